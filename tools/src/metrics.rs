//! `xoff run --metrics ADDR`: the switch's counters in the Prometheus/OpenMetrics text format
//! at `http://ADDR/metrics`, encoded by `prometheus-client` from a fresh snapshot on every
//! scrape (the same snapshot `xoff ctl stats --json` serves, so the two never disagree).
//!
//! Ports, queues and AF_XDP ring statistics have fixed names
//! (`xoff_port_rx_packets_total{switch="s1",port="p1"}`). The MMU and scheme statistics are
//! nested JSON whose shape depends on the configuration; they are flattened by [`flatten`]:
//! the path becomes the name, array positions and the objects' own `port`/`pg`/`queue`/`prio`
//! fields become labels, and a `drops` object becomes a `reason` label.

use anyhow::{Context, Result};
use dataplane::stats::SwitchSnapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A source of snapshots (the running switch).
pub type Source = Arc<dyn Fn() -> SwitchSnapshot + Send + Sync>;

type Labels = Vec<(String, String)>;

/// A sample value: counts stay integers in the exposition (`42`, not `42.0`).
#[derive(Clone, Copy)]
enum Num {
    I(u64),
    F(f64),
}

impl From<u64> for Num {
    fn from(v: u64) -> Num {
        Num::I(v)
    }
}

impl From<f64> for Num {
    fn from(v: f64) -> Num {
        Num::F(v)
    }
}

/// One metric family: its type, help text and samples.
struct Family {
    counter: bool,
    help: &'static str,
    samples: Vec<(Labels, Num)>,
}

/// Families by name (without the `_total` a counter gets on encoding), in a stable order.
#[derive(Default)]
struct Families(BTreeMap<String, Family>);

impl Families {
    fn add(
        &mut self,
        name: &str,
        counter: bool,
        help: &'static str,
        labels: Labels,
        v: impl Into<Num>,
    ) {
        let v = v.into();
        let f = self.0.entry(name.to_string()).or_insert(Family {
            counter,
            help,
            samples: Vec::new(),
        });
        // A name seen first as one type keeps it; a later sample of another type would be
        // an invalid exposition, so it goes under a suffixed name instead.
        if f.counter == counter {
            f.samples.push((labels, v));
        } else {
            let alt = format!("{name}_{}", if counter { "count" } else { "value" });
            self.add(&alt, counter, help, labels, v);
        }
    }
}

fn lab(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The fixed-name families of ports, queues and rings, then the flattened MMU and scheme
/// statistics.
fn families(s: &SwitchSnapshot) -> Families {
    let mut f = Families::default();
    let sw = s.switch.as_str();
    f.add(
        "xoff_uptime_seconds",
        false,
        "Seconds since the switch started.",
        lab(&[("switch", sw)]),
        s.uptime_s,
    );
    for p in &s.ports {
        let l = lab(&[("switch", sw), ("port", &p.name)]);
        let c = |f: &mut Families, n: &str, h, v: u64| f.add(n, true, h, l.clone(), v);
        f.add(
            "xoff_port_up",
            false,
            "1 while the port's interface is up.",
            l.clone(),
            u64::from(p.up),
        );
        for (n, v, h) in [
            (
                "xoff_port_link_down",
                p.port_down,
                "Times the port's link went down.",
            ),
            (
                "xoff_port_link_up",
                p.port_up,
                "Times the port's link came (back) up.",
            ),
        ] {
            if let Some(v) = v {
                c(&mut f, n, h, v);
            }
        }
        c(
            &mut f,
            "xoff_port_rx_packets",
            "Frames received.",
            p.rx_pkts,
        );
        c(&mut f, "xoff_port_rx_bytes", "Bytes received.", p.rx_bytes);
        c(&mut f, "xoff_port_tx_packets", "Frames sent.", p.tx_pkts);
        c(&mut f, "xoff_port_tx_bytes", "Bytes sent.", p.tx_bytes);
        for (reason, n) in &p.drops {
            let mut l = l.clone();
            l.push(("reason".into(), reason.clone()));
            f.add(
                "xoff_port_drops",
                true,
                "Packets dropped at the port, by reason.",
                l,
                *n,
            );
        }
        let x = &p.xdp;
        for (n, v) in [
            ("rx_dropped", x.rx_dropped),
            ("rx_invalid_descs", x.rx_invalid_descs),
            ("rx_ring_full", x.rx_ring_full),
            ("rx_fill_ring_empty_descs", x.rx_fill_ring_empty_descs),
            ("tx_invalid_descs", x.tx_invalid_descs),
            ("tx_ring_empty_descs", x.tx_ring_empty_descs),
        ] {
            c(
                &mut f,
                &format!("xoff_port_xdp_{n}"),
                "AF_XDP socket statistics (XDP_STATISTICS).",
                v,
            );
        }
        for (qi, q) in p.queues.iter().enumerate() {
            let qs = qi.to_string();
            let l = lab(&[("switch", sw), ("port", &p.name), ("queue", &qs)]);
            for (n, counter, h, v) in [
                ("enqueued_packets", true, "Packets enqueued.", q.enq_pkts),
                ("enqueued_bytes", true, "Bytes enqueued.", q.enq_bytes),
                ("dequeued_packets", true, "Packets dequeued.", q.deq_pkts),
                ("dequeued_bytes", true, "Bytes dequeued.", q.deq_bytes),
                ("drops", true, "Packets dropped at the queue.", q.drops),
                ("ecn_marked", true, "Packets marked CE.", q.ecn_marked),
                ("depth_bytes", false, "Bytes queued now.", q.depth_bytes),
                ("depth_packets", false, "Packets queued now.", q.depth_pkts),
                (
                    "watermark_bytes",
                    false,
                    "Most bytes ever queued.",
                    q.watermark_bytes,
                ),
            ] {
                f.add(&format!("xoff_queue_{n}"), counter, h, l.clone(), v);
            }
        }
    }
    let l = lab(&[("switch", sw)]);
    f.add(
        "xoff_afc_applied",
        true,
        "Pause/resume commands the AFC unit applied.",
        l.clone(),
        s.afc_applied,
    );
    f.add(
        "xoff_afc_refused",
        true,
        "AFC commands refused (no such port or queue).",
        l.clone(),
        s.afc_refused,
    );
    if let Some(n) = s.afc_ring_full {
        f.add(
            "xoff_afc_ring_full",
            true,
            "AFC commands external controllers could not write (lane full).",
            l.clone(),
            n,
        );
    }
    if let Some(u) = s.umem {
        f.add(
            "xoff_umem_frames",
            false,
            "UMEM chunks of the switch.",
            l.clone(),
            u.frames,
        );
        f.add(
            "xoff_umem_free_frames",
            false,
            "UMEM chunks the switch holds free (idle value is constant: a leak check).",
            l.clone(),
            u.free,
        );
        f.add(
            "xoff_umem_in_rings_frames",
            false,
            "UMEM chunks the sockets lent the kernel (fill, RX and uncompleted TX rings).",
            l.clone(),
            u.in_rings,
        );
    }
    // --- issue 23 item 4 (branch nic): RX queues and workers ---
    if let Some(n) = &s.nic {
        f.add(
            "xoff_umem_hugepages",
            false,
            "1 if the AF_XDP UMEM lives in huge pages.",
            l.clone(),
            u64::from(n.hugepages),
        );
        for p in &n.ports {
            f.add(
                "xoff_port_zerocopy",
                false,
                "1 if the port's AF_XDP sockets are bound zero-copy.",
                lab(&[("switch", sw), ("port", &p.port)]),
                u64::from(p.bind == "zerocopy"),
            );
            for q in &p.rx_queues {
                let (qs, ws) = (q.queue.to_string(), q.worker.to_string());
                let ql = lab(&[
                    ("switch", sw),
                    ("port", &p.port),
                    ("queue", &qs),
                    ("worker", &ws),
                ]);
                for (name, h, v) in [
                    (
                        "xoff_rxq_packets",
                        "Frames read from the RX queue.",
                        q.rx_pkts,
                    ),
                    (
                        "xoff_rxq_bytes",
                        "Bytes read from the RX queue.",
                        q.rx_bytes,
                    ),
                    (
                        "xoff_rxq_xdp_lost",
                        "Frames the kernel dropped on the queue's AF_XDP socket.",
                        q.xdp.lost(),
                    ),
                ] {
                    f.add(name, true, h, ql.clone(), v);
                }
            }
        }
        for w in &n.workers {
            let ws = w.worker.to_string();
            let wl = lab(&[("switch", sw), ("worker", &ws)]);
            for (name, h, v) in [
                (
                    "xoff_worker_rx_packets",
                    "Frames the worker read.",
                    w.rx_pkts,
                ),
                ("xoff_worker_rx_bytes", "Bytes the worker read.", w.rx_bytes),
                (
                    "xoff_worker_tx_packets",
                    "Frames the worker sent.",
                    w.tx_pkts,
                ),
                ("xoff_worker_tx_bytes", "Bytes the worker sent.", w.tx_bytes),
                (
                    "xoff_worker_handoffs_out",
                    "Frames passed to other workers' mailboxes.",
                    w.handoffs_out,
                ),
                (
                    "xoff_worker_handoffs_in",
                    "Frames taken from the worker's mailbox.",
                    w.handoffs_in,
                ),
            ] {
                f.add(name, true, h, wl.clone(), v);
            }
        }
    }
    // --- end issue 23 item 4 ---
    if let Some(m) = &s.mmu {
        flatten(&mut f, "xoff_mmu", m, &l, "Shared-buffer MMU statistics.");
    }
    if let Some(p) = &s.pfc {
        if let Ok(v) = serde_json::to_value(p) {
            flatten(
                &mut f,
                "xoff_scheme",
                &v,
                &l,
                "Flow-control scheme statistics.",
            );
        }
    }
    f
}

/// Fields of an array element that identify it, made labels rather than metrics.
const ID_KEYS: [&str; 5] = ["port", "pg", "queue", "prio", "pipe"];

/// Whether a leaf named `key` (under `parent`) only ever grows. Anything else is a gauge:
/// a counter that went down would break `rate()`, a monotonic gauge only loses a hint.
fn is_counter(parent: &str, key: &str) -> bool {
    const GROWING: [&str; 21] = [
        "sent",
        "absorbed",
        "received",
        "xoff",
        "xon",
        "storms",
        "restorations",
        "events",
        "errors",
        "admitted",
        "released",
        "marked",
        "applied",
        "refused",
        "allocations",
        "releases",
        "pauses",
        "resumes",
        "assignments",
        "collisions",
        "reassigned",
    ];
    if parent.ends_with("counters") || parent.ends_with("drops") {
        return true;
    }
    if key.contains("peak") || key.contains("max") || key.ends_with("since_ps") {
        return false;
    }
    // Cumulative pause time.
    if key.ends_with("pause_us") || key == "paused_ps" {
        return true;
    }
    key.split('_').any(|w| GROWING.contains(&w))
}

/// Adds every number (and boolean, as 0/1) under `v` to `f`, named by its path below `name`.
fn flatten(f: &mut Families, name: &str, v: &Value, labels: &Labels, help: &'static str) {
    walk(f, name, "", "", v, labels, help);
}

/// `name` is the metric name so far, `parent` the name of the enclosing object, `key` the
/// JSON key `v` was found under.
fn walk(
    f: &mut Families,
    name: &str,
    parent: &str,
    key: &str,
    v: &Value,
    labels: &Labels,
    help: &'static str,
) {
    match v {
        Value::Number(n) => {
            let x = match (n.as_u64(), n.as_f64()) {
                (Some(i), _) => Num::I(i),
                (None, Some(x)) => Num::F(x),
                _ => return,
            };
            f.add(name, is_counter(parent, key), help, labels.clone(), x);
        }
        Value::Bool(b) => f.add(name, false, help, labels.clone(), u64::from(*b)),
        Value::Object(o) => {
            for (k, x) in o {
                if ID_KEYS.contains(&k.as_str()) && labels.iter().any(|(l, _)| l == k) {
                    continue; // already a label of this element
                }
                if name.ends_with("drops") && x.is_number() {
                    let mut l = labels.clone();
                    l.push(("reason".into(), k.clone()));
                    walk(f, name, name, k, x, &l, help);
                } else if let (Some(stem), Some(t)) = (time_stem(k), x.as_f64()) {
                    // Times in seconds, the base unit Prometheus expects.
                    let scale = if k.ends_with("_us") { 1e-6 } else { 1e-12 };
                    let sub = format!("{name}_{}_seconds", clean(stem));
                    f.add(&sub, is_counter(name, k), help, labels.clone(), t * scale);
                } else {
                    let sub = format!("{name}_{}", clean(k));
                    walk(f, &sub, name, k, x, labels, help);
                }
            }
        }
        Value::Array(a) => {
            // `ports` → label `port`, `queues` → `queue`, `pgs` → `pg`; the top level (one
            // object per pipe) → `pipe`; a label already taken (an array nested in one of the
            // same name) → `index`.
            let pos = match key {
                "ports" => "port",
                "queues" => "queue",
                "pgs" => "pg",
                "" => "pipe",
                _ => "index",
            };
            let pos = if labels.iter().any(|(l, _)| l == pos) {
                "index"
            } else {
                pos
            };
            for (i, x) in a.iter().enumerate() {
                let mut l = labels.clone();
                // An element's own id fields win over its position.
                let mut ids: Vec<(String, String)> = Vec::new();
                if let Value::Object(o) = x {
                    for k in ID_KEYS {
                        if let Some(id) = o.get(k).and_then(Value::as_u64) {
                            ids.push((k.to_string(), id.to_string()));
                        }
                    }
                }
                if ids.is_empty() {
                    ids.push((pos.to_string(), i.to_string()));
                }
                for (k, id) in ids {
                    match l.iter_mut().find(|(lk, _)| *lk == k) {
                        Some(e) => e.1 = id,
                        None => l.push((k, id)),
                    }
                }
                walk(f, name, parent, key, x, &l, help);
            }
        }
        Value::String(_) | Value::Null => {}
    }
}

/// `tx_pause` of `tx_pause_us`, `paused` of `paused_ps`: keys holding a time in µs or ps.
fn time_stem(k: &str) -> Option<&str> {
    k.strip_suffix("_us").or_else(|| k.strip_suffix("_ps"))
}

/// A JSON key as part of a metric name.
fn clean(k: &str) -> String {
    k.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[derive(Clone)]
struct SnapshotCollector(Source);

impl std::fmt::Debug for SnapshotCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SnapshotCollector")
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let fams = families(&(self.0)());
        for (name, fam) in &fams.0 {
            let ty = if fam.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut me = enc.encode_descriptor(name, fam.help, None, ty)?;
            for (labels, v) in &fam.samples {
                let e = me.encode_family(labels)?;
                match (fam.counter, *v) {
                    (true, Num::I(x)) => ConstCounter::new(x).encode(e)?,
                    (true, Num::F(x)) => ConstCounter::new(x).encode(e)?,
                    (false, Num::I(x)) => ConstGauge::new(x).encode(e)?,
                    (false, Num::F(x)) => ConstGauge::new(x).encode(e)?,
                }
            }
        }
        Ok(())
    }
}

const OPENMETRICS: &[u8] = b"application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT_004: &[u8] = b"text/plain; version=0.0.4; charset=utf-8";

/// The OpenMetrics exposition of one snapshot.
pub fn render(src: &Source) -> Result<String> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(SnapshotCollector(src.clone())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg).context("encode metrics")?;
    Ok(out)
}

/// The same exposition in the Prometheus 0.0.4 text format, for scrapers that do not ask for
/// OpenMetrics (curl, `promtool check metrics`, older agents). The two differ, for what this
/// module emits, in one point and a trailer: a counter family's HELP/TYPE lines carry the
/// sample name (`foo_total`), and there is no `# EOF`.
pub fn to_text_004(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64 * counters.len());
    for l in openmetrics.lines() {
        if l == "# EOF" {
            continue;
        }
        let meta = l
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| l.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((tag, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(tag);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// Serves `GET /metrics` on `addr` from a background thread until the process exits:
/// OpenMetrics to clients that accept it (Prometheus asks for it first), else the 0.0.4 text.
pub fn serve(addr: &str, src: Source) -> Result<()> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("--metrics {addr}: cannot listen: {e}"))?;
    tracing::info!(%addr, "serving Prometheus metrics at /metrics");
    std::thread::Builder::new()
        .name("xoff-metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let om = req.headers().iter().any(|h| {
                    h.field.equiv("Accept")
                        && h.value.as_str().contains("application/openmetrics-text")
                });
                let resp = if req.url() == "/metrics" || req.url().starts_with("/metrics?") {
                    match render(&src) {
                        Ok(body) => {
                            let (body, ct) = if om {
                                (body, OPENMETRICS)
                            } else {
                                (to_text_004(&body), TEXT_004)
                            };
                            tiny_http::Response::from_string(body).with_header(
                                tiny_http::Header::from_bytes(&b"Content-Type"[..], ct)
                                    .expect("static header"),
                            )
                        }
                        Err(e) => tiny_http::Response::from_string(format!("{e:#}\n"))
                            .with_status_code(500),
                    }
                } else {
                    tiny_http::Response::from_string("metrics are at /metrics\n")
                        .with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::stats::{PortSnapshot, QueueSnapshot, XdpSnapshot};

    fn snap(rx: u64) -> SwitchSnapshot {
        SwitchSnapshot {
            switch: "s1".into(),
            uptime_s: 1.5,
            ports: vec![PortSnapshot {
                name: "p1".into(),
                up: true,
                rx_pkts: rx,
                rx_bytes: rx * 100,
                tx_pkts: 3,
                tx_bytes: 300,
                drops: [("queue_full".to_string(), 7)].into_iter().collect(),
                port_down: None,
                port_up: None,
                xdp: XdpSnapshot::default(),
                kernel_tx_dropped: 0,
                queues: vec![QueueSnapshot {
                    enq_pkts: 1,
                    enq_bytes: 2,
                    deq_pkts: 3,
                    deq_bytes: 4,
                    depth_bytes: 5,
                    depth_pkts: 6,
                    watermark_bytes: 7,
                    drops: 8,
                    ecn_marked: 9,
                }],
            }],
            mmu: Some(serde_json::json!({
                "mode": "dsh",
                "counters": {"xoff": 4, "drops": {"insurance_exhausted": 2}},
                "peak": {"shared": 768},
                "ports": [{"port": 0, "paused": true, "threshold_cells": 814}],
                "pgs": [{"port": 0, "pg": 3, "xoff": 1, "peak": 12}],
            })),
            pfc: None,
            afc_applied: 11,
            afc_refused: 0,
            afc_ring_full: Some(0),
            umem: Some(dataplane::stats::UmemSnapshot {
                frames: 4096,
                free: 4000,
                in_rings: 64,
            }),
            nic: None,
        }
    }

    #[test]
    fn fixed_and_flattened_names_and_labels() {
        let src: Source = Arc::new(|| snap(42));
        let t = render(&src).unwrap();
        for line in [
            "# TYPE xoff_port_rx_packets counter",
            r#"xoff_port_rx_packets_total{switch="s1",port="p1"} 42"#,
            r#"xoff_port_drops_total{switch="s1",port="p1",reason="queue_full"} 7"#,
            r#"xoff_queue_depth_bytes{switch="s1",port="p1",queue="0"} 5"#,
            "# TYPE xoff_queue_depth_bytes gauge",
            r#"xoff_mmu_counters_xoff_total{switch="s1"} 4"#,
            r#"xoff_mmu_counters_drops_total{switch="s1",reason="insurance_exhausted"} 2"#,
            r#"xoff_mmu_peak_shared{switch="s1"} 768"#,
            r#"xoff_mmu_ports_paused{switch="s1",port="0"} 1"#,
            r#"xoff_mmu_pgs_xoff_total{switch="s1",port="0",pg="3"} 1"#,
            r#"xoff_mmu_pgs_peak{switch="s1",port="0",pg="3"} 12"#,
            r#"xoff_afc_applied_total{switch="s1"} 11"#,
            "# EOF",
        ] {
            assert!(t.lines().any(|l| l == line), "missing `{line}` in\n{t}");
        }
        // The MMU's mode is a string, not a number: no metric for it.
        assert!(!t.contains("xoff_mmu_mode"), "{t}");
        // Every sample line is unique (a duplicate series is an invalid exposition).
        let samples: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        let mut uniq = samples.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), samples.len(), "{t}");
    }

    #[test]
    fn text_004_names_counter_families_by_their_samples() {
        let src: Source = Arc::new(|| snap(42));
        let t = to_text_004(&render(&src).unwrap());
        assert!(
            t.contains("# TYPE xoff_port_rx_packets_total counter\n"),
            "{t}"
        );
        assert!(
            t.contains("# HELP xoff_port_rx_packets_total Frames received.\n"),
            "{t}"
        );
        assert!(t.contains("# TYPE xoff_queue_depth_bytes gauge\n"), "{t}");
        assert!(t.contains("xoff_port_rx_packets_total{switch=\"s1\",port=\"p1\"} 42\n"));
        assert!(!t.contains("# EOF"), "{t}");
    }

    /// Issue 23 item 4: per-queue and per-worker series of a multi-queue switch.
    #[test]
    fn rx_queues_and_workers_have_fixed_names() {
        use dataplane::nicstats::{NicPortSnapshot, NicSnapshot, RxQueueSnapshot, WorkerSnapshot};
        let src: Source = Arc::new(|| SwitchSnapshot {
            nic: Some(NicSnapshot {
                umem_frames: 4096,
                hugepages: false,
                hugepage_fallback: Some("none reserved".into()),
                ports: vec![NicPortSnapshot {
                    port: "p1".into(),
                    iface: "p1".into(),
                    attach: "native".into(),
                    requested: "auto".into(),
                    bind: "copy".into(),
                    zerocopy_fallback: Some("EOPNOTSUPP".into()),
                    rx_queues: (0..2)
                        .map(|q| RxQueueSnapshot {
                            queue: q,
                            worker: q as usize,
                            rx_pkts: 10 + u64::from(q),
                            rx_bytes: 1000,
                            xdp: XdpSnapshot::default(),
                        })
                        .collect(),
                }],
                reaction: None,
                calibration: None,
                workers: vec![WorkerSnapshot {
                    worker: 1,
                    rx_pkts: 11,
                    rx_bytes: 1000,
                    tx_pkts: 5,
                    tx_bytes: 500,
                    handoffs_out: 2,
                    handoffs_in: 3,
                }],
            }),
            ..snap(21)
        });
        let t = render(&src).unwrap();
        for line in [
            r#"xoff_rxq_packets_total{switch="s1",port="p1",queue="1",worker="1"} 11"#,
            r#"xoff_rxq_packets_total{switch="s1",port="p1",queue="0",worker="0"} 10"#,
            r#"xoff_worker_handoffs_in_total{switch="s1",worker="1"} 3"#,
            r#"xoff_port_zerocopy{switch="s1",port="p1"} 0"#,
            r#"xoff_umem_hugepages{switch="s1"} 0"#,
        ] {
            assert!(t.lines().any(|l| l == line), "missing `{line}` in\n{t}");
        }
    }

    #[test]
    fn counters_and_gauges_by_name() {
        assert!(is_counter("xoff_mmu_counters", "xoff"));
        assert!(is_counter("xoff_scheme_ports", "xoff_sent"));
        assert!(is_counter("xoff_scheme_ports", "tx_pause_us"));
        assert!(!is_counter("xoff_mmu_ports", "insurance_peak"));
        assert!(is_counter("xoff_mmu_pgs", "absorbed_cells"));
        assert!(!is_counter("xoff_mmu_pgs", "absorbed_peak"));
        assert!(!is_counter("xoff_mmu", "lossless_used"));
        assert!(!is_counter("xoff_mmu_ports", "paused_since_ps"));
    }
}

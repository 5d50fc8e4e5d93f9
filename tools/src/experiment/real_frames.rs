//! The real-frame runner (`mode = "real"`): one cell on a netns testbed brought up with the
//! cell's settings, `xoff host` on every host that sends or receives, switch counters sampled
//! over the control socket until the hosts are done, then the testbed torn down.

use super::plan::{CellSetup, Plan};
use super::results::{flow_results, CellAudit, CellOut, CellResult, FcPort, Series};
use super::spec::BFC_QUEUES;
use anyhow::{Context, Result};
use dataplane::config::Topology;
use dataplane::ctl::{self, Request, Response};
use dataplane::host::cc::CcKind;
use dataplane::host::report::TxRecord;
use dataplane::stats::SwitchSnapshot;
use deploy::testbed::{socket_path, Testbed};
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Runs cell `c` of plan `p` on real frames.
pub(super) fn run(p: &Plan, c: &CellSetup) -> Result<CellOut> {
    let timing = p.timing;
    let name = format!("xe{}{}", std::process::id() % 10_000, c.spec.index + 1);
    // `response_ps = "auto"`: the first cell measures, the later ones reuse its figures (and
    // time their XOFFs), so that cells differ only in their matrix settings.
    let reuse = p.calibrated.lock().map(|g| g.clone()).unwrap_or_default();
    if !reuse.is_empty() {
        pin_response(&c.tpath, &reuse)?;
    }
    let tb = Testbed::load(&c.tpath, Some(&name))?;
    let args: Vec<String> = if reuse.is_empty() {
        Vec::new()
    } else {
        vec!["--reaction".into()]
    };
    tb.up(&args)?;
    let guard = Down(&tb);
    if reuse.is_empty() {
        calibrate(p, c, &tb, &name)?;
    }
    let start_at = crate::host::unix_ns() + 1_500_000_000;
    let run_ps = timing.duration + timing.drain;
    let sched = c.dir.join("schedule.csv");
    let mut children = start_hosts(p, c, &tb, &sched, &c.dir, start_at, run_ps)?;
    let t0 = Instant::now()
        + Duration::from_nanos(
            u64::try_from(start_at.saturating_sub(crate::host::unix_ns())).unwrap_or(0),
        );
    let deadline = t0 + Duration::from_nanos(run_ps / 1000) + Duration::from_secs(10);
    let (series, last) = sample(&c.topo, &name, &mut children, t0, deadline, timing.interval);
    // Final counters after the hosts stopped.
    let mut finals = stats(&c.topo, &name);
    if finals.is_empty() {
        finals = last;
    }
    let mut audit = CellAudit::default();
    for s in &c.topo.switches {
        let spec = c.topo.switch_spec(&s.name)?;
        match ctl::request(&socket_path(&name, &s.name), &Request::Audit) {
            Ok(Response::Audit(a)) => audit.add(&a, &spec),
            _ => {
                audit.lossless_claimed |= dataplane::audit::lossless_prios(&spec) != 0;
                audit.unbalanced.push(format!("{} (no answer)", s.name));
            }
        }
    }
    drop(guard);
    let mut r = CellResult::default();
    let mut tx = Vec::new();
    let mut rx = Vec::new();
    for (hn, _) in &children {
        let path = c.dir.join(format!("{hn}.json"));
        match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<crate::host::HostOutput>(&t).ok())
        {
            Some(o) => {
                tx.extend(o.tx);
                rx.extend(o.rx);
                r.add_host(&o.counters);
                r.xdp_lost += o.xdp.map_or(0, |x| x.lost());
            }
            None => r.hosts_incomplete.push(hn.clone()),
        }
    }
    // Flows that never started at their sender still count (as incomplete).
    let started: std::collections::BTreeSet<u32> = tx.iter().map(|t| t.id).collect();
    for s in c.sched.iter().filter(|s| !started.contains(&s.id)) {
        tx.push(TxRecord {
            id: s.id,
            src: s.src,
            dst: s.dst,
            size: s.size,
            prio: s.prio,
            start_ps: s.start_ps,
            ..TxRecord::default()
        });
    }
    let flows = flow_results(p, &tx, &rx);
    r.set_flows(&flows, run_ps);
    // Host ends' ring losses (the switches' are in their audits): a host carries the cell's
    // traffic, lossless or not.
    let host_ring = r.xdp_lost;
    r.add_switches(&finals, true);
    for (sw, k) in &reuse {
        let reaction = finals
            .iter()
            .find(|s| &s.switch == sw)
            .and_then(|s| s.nic.as_ref())
            .and_then(|n| n.reaction.clone())
            .unwrap_or_default();
        r.response.insert(
            sw.clone(),
            super::results::ResponseAuto {
                calibration: k.clone(),
                reaction,
                reused: true,
            },
        );
    }
    audit.lost += host_ring;
    if audit.lossless_claimed {
        audit.lossless_lost += host_ring;
    }
    r.audit = audit;
    Ok((r, flows, series))
}

/// Writes the measured terms `k` over the `response_ps = "auto"` of the switches in topology
/// file `path` (a cell after the first, `run`).
fn pin_response(
    path: &std::path::Path,
    k: &BTreeMap<String, dataplane::calibrate::CalibrationSnapshot>,
) -> Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut t: toml::Table = toml::from_str(&text)?;
    if let Some(toml::Value::Array(sws)) = t.get_mut("switch") {
        for sw in sws.iter_mut().filter_map(toml::Value::as_table_mut) {
            let name = sw
                .get("name")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
            if let (Some(c), Some(b)) = (
                k.get(&name),
                sw.get_mut("buffer").and_then(toml::Value::as_table_mut),
            ) {
                b.insert(
                    "response_ps".into(),
                    toml::Value::Integer(i64::try_from(c.response_ps)?),
                );
            }
        }
    }
    std::fs::write(path, toml::to_string(&t)?)?;
    Ok(())
}

/// Calibration bursts tried before a cell gives up on a switch whose measured term does not
/// fit its buffer.
const CALIBRATION_ATTEMPTS: usize = 3;

/// Bytes each host sends in the calibration burst of a `response_ps = "auto"` testbed.
const CALIBRATION_BYTES: u64 = 2_000_000;

/// A testbed with `response_ps = "auto"` switches measures them before the cell's flows
/// start (`dataplane::calibrate`): every host of the cell sends [`CALIBRATION_BYTES`] to the
/// next one round a ring, at once, so the switches carry the cell's hosts' line rate and the
/// hosts' stacks load the machine as in the cell, while no egress port of a one-switch
/// testbed gets two flows (no queue, no pause: the cell's peaks and pause counts stay the
/// cell's). Then it waits until every such switch has applied its measured term, and keeps
/// the figures for the experiment's later cells.
fn calibrate(p: &Plan, c: &CellSetup, tb: &Testbed, name: &str) -> Result<()> {
    let mut auto = Vec::new();
    for s in &c.topo.switches {
        if c.topo.switch_spec(&s.name)?.response_auto {
            auto.push(s.name.clone());
        }
    }
    if auto.is_empty() {
        return Ok(());
    }
    let dir = c.dir.join("calibration");
    std::fs::create_dir_all(&dir)?;
    let hosts = involved(c);
    let prio = c.sched.first().map_or(0, |f| f.prio);
    let ring: Vec<dataplane::workload::FlowSpec> = hosts
        .iter()
        .enumerate()
        .map(|(i, &h)| dataplane::workload::FlowSpec {
            id: i as u32,
            src: h,
            dst: hosts[(i + 1) % hosts.len()],
            size: CALIBRATION_BYTES,
            start_ps: 0,
            prio,
        })
        .collect();
    let sched = dir.join("schedule.csv");
    std::fs::write(&sched, dataplane::workload::to_csv(&ring))?;
    // A burst a long stall dominated gives a term that does not fit the buffer: the switch
    // says so and measures the next burst.
    let mut why = Vec::new();
    for attempt in 1..=CALIBRATION_ATTEMPTS {
        let start_at = crate::host::unix_ns() + 1_500_000_000;
        let mut kids = start_hosts(p, c, tb, &sched, &dir, start_at, 1_000_000_000_000)?;
        for (_, k) in kids.iter_mut() {
            let _ = k.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut done = BTreeMap::new();
        why.clear();
        loop {
            let mut waiting = Vec::new();
            let left: Vec<&String> = auto.iter().filter(|s| !done.contains_key(*s)).collect();
            for sw in left {
                let cal = match ctl::request(&socket_path(name, sw), &Request::Stats) {
                    Ok(Response::Stats(st)) => st.nic.and_then(|n| n.calibration),
                    _ => None,
                };
                match cal {
                    Some(k) if k.response_ps > 0 => {
                        done.insert(sw.clone(), k);
                    }
                    // Refused and reset: this burst is spent.
                    Some(k) if k.error.is_some() && k.samples == 0 => {
                        why.push(format!("{sw}: {}", k.error.unwrap_or_default()));
                    }
                    Some(k) => waiting.push(format!(
                        "{sw} ({} of {} frames timed)",
                        k.samples,
                        dataplane::calibrate::SAMPLES
                    )),
                    None => waiting.push(format!("{sw} (no calibration in its statistics)")),
                }
            }
            if done.len() == auto.len() {
                if let Ok(mut g) = p.calibrated.lock() {
                    *g = done;
                }
                return Ok(());
            }
            if !why.is_empty() {
                tracing::warn!("calibration burst {attempt}: {}", why.join("; "));
                break;
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "response_ps = \"auto\": not calibrated 5 s after the calibration burst \
                     (host logs in {}): {}",
                    dir.display(),
                    waiting.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    anyhow::bail!(
        "response_ps = \"auto\": {CALIBRATION_ATTEMPTS} calibration bursts measured a term \
         that does not fit: {}",
        why.join("; ")
    )
}

/// The hosts that send or receive in cell `c`, by index.
fn involved(c: &CellSetup) -> Vec<u32> {
    let mut v: Vec<u32> = c.sched.iter().flat_map(|f| [f.src, f.dst]).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Starts `xoff host` in the namespace of every host that sends or receives in the cell, all
/// starting schedule `sched` at `start_at` (Unix ns), running for `run_ps` and writing to `out`.
fn start_hosts(
    p: &Plan,
    c: &CellSetup,
    tb: &Testbed,
    sched: &std::path::Path,
    out: &std::path::Path,
    start_at: u128,
    run_ps: u64,
) -> Result<Vec<(String, Child)>> {
    let exp = &p.exp;
    let xoff = std::env::current_exe()?;
    let aquarius = c
        .topo
        .switches
        .iter()
        .any(|s| s.scheme == dataplane::config::Scheme::Aquarius);
    let bfc = aquarius || c.topo.switches.iter().any(|s| s.scheme.is_bfc());
    let mut children = Vec::new();
    for h in involved(c) {
        let hn = &c.topo.hosts[h as usize].name;
        let log = std::fs::File::create(out.join(format!("{hn}.log")))?;
        let mut cmd = tb.command(hn, &xoff.display().to_string());
        cmd.args(["host", "--topology"])
            .arg(&c.tpath)
            .args(["--host", hn, "--schedule"])
            .arg(sched)
            .arg("--out")
            .arg(out)
            .args(["--start-at", &start_at.to_string()])
            .args(["--run", &format!("{}ns", run_ps / 1000)])
            .args(["--base-rtt", &format!("{}ns", p.paths.rtt / 1000)])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(r) = &exp.host.rate {
            cmd.args(["--rate", r]);
        }
        if let Some(w) = &exp.host.window {
            cmd.args(["--window", w]);
        }
        if let Some(r) = &exp.host.rto {
            cmd.args(["--rto", r]);
        }
        if let Some(o) = &exp.host.out_of_order {
            cmd.args(["--out-of-order", o]);
        }
        if c.cc != CcKind::default() {
            cmd.args(["--cc", c.cc.as_str()]);
        }
        if bfc {
            // As many NIC queues as the cell gives the switch ports (BFC-8: 8 everywhere).
            let q = c.queues.or(exp.host.bfc_queues).unwrap_or(BFC_QUEUES);
            cmd.args(["--bfc-queues", &q.to_string()]);
        }
        if aquarius {
            cmd.arg("--aquarius");
        }
        children.push((hn.clone(), cmd.spawn().context("starting xoff host")?));
    }
    Ok(children)
}

/// Every switch's counters that answer over the control socket of testbed `name`.
fn stats(topo: &Topology, name: &str) -> Vec<SwitchSnapshot> {
    topo.switches
        .iter()
        .filter_map(
            |s| match ctl::request(&socket_path(name, &s.name), &Request::Stats) {
                Ok(Response::Stats(st)) => Some(*st),
                _ => None,
            },
        )
        .collect()
}

/// One switch port's sample: bytes queued, bytes in its fullest queue, pause signals sent.
#[derive(Debug, Clone, Copy, Default)]
struct PortSample {
    depth: u64,
    max_queue: u64,
    pauses: u64,
}

/// Samples the switches every `interval` ps from `t0` until the hosts are done (killing them
/// at `deadline`). Every port gets a sample each time (its last known values if its switch did
/// not answer). Returns the series and the last counters any switch gave.
fn sample(
    topo: &Topology,
    name: &str,
    children: &mut [(String, Child)],
    t0: Instant,
    deadline: Instant,
    interval: u64,
) -> (Series, Vec<SwitchSnapshot>) {
    let mut series = Series {
        interval_ps: interval,
        ..Series::default()
    };
    let mut known: BTreeMap<String, PortSample> = topo
        .switches
        .iter()
        .flat_map(|s| {
            s.ports
                .iter()
                .map(move |p| (format!("{}:{}", s.name, p.name), PortSample::default()))
        })
        .collect();
    let mut last = Vec::new();
    loop {
        let t = Instant::now()
            .checked_duration_since(t0)
            .map_or(0.0, |d| d.as_secs_f64());
        let snaps = stats(topo, name);
        if Instant::now() >= t0 {
            for s in &snaps {
                for (i, p) in s.ports.iter().enumerate() {
                    if let Some(e) = known.get_mut(&format!("{}:{}", s.switch, p.name)) {
                        *e = PortSample {
                            depth: p.queues.iter().map(|q| q.depth_bytes).sum(),
                            max_queue: p.queues.iter().map(|q| q.depth_bytes).max().unwrap_or(0),
                            pauses: FcPort::of(s, i).pauses(),
                        };
                    }
                }
            }
            series.t_ps.push((t * 1e12) as u64);
            for (k, e) in &known {
                series.push(k, e.depth, e.max_queue, e.pauses);
            }
        }
        if !snaps.is_empty() {
            last = snaps;
        }
        let mut running = false;
        for (_, c) in children.iter_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                running = true;
            }
        }
        if !running {
            break;
        }
        if Instant::now() > deadline {
            for (_, c) in children.iter_mut() {
                let _ = c.kill();
            }
            break;
        }
        std::thread::sleep(Duration::from_nanos(interval / 1000));
    }
    for (_, c) in children.iter_mut() {
        let _ = c.wait();
    }
    (series, last)
}

/// Brings a testbed down when dropped.
struct Down<'a>(&'a Testbed);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.down() {
            tracing::warn!("testbed down: {e}");
        }
    }
}

//! Aquarius in virtual time at the paper's scale (APNet '23 §4): 100 Gbit/s, 1 µs links,
//! 8 queues per port, host NICs honouring per-flow pauses.
//!
//! * The micro-benchmark (Fig. 4/5) is reproduced by `xoff repro aquarius`
//!   (`tools/src/repro/aquarius.rs`, checked by `tools/tests/repro.rs`).
//! * BFC's own scenarios (`deploy/sim/bfc-two-flows.toml`, `bfc-three-groups.toml`) with
//!   every switch on Aquarius: lossless and in order. A flow alone in its queue is held by
//!   pausing that queue; at line rate its queue empties between packets, and without the
//!   QueueTable sending it back to the paused queue it took a fresh one each time and was
//!   never held (1293 drops at the bottleneck before that fix).

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use std::path::Path;

fn aquarius_json(f: &Fabric, sw: &str) -> serde_json::Value {
    let st = f.switch(sw).unwrap().scheme_stats(f.now()).unwrap();
    serde_json::to_value(st.aquarius.unwrap()).unwrap()
}

#[test]
fn bfc_scenarios_under_aquarius_are_lossless_and_in_order() {
    for name in ["bfc-two-flows.toml", "bfc-three-groups.toml"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/sim")
            .join(name);
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("scheme = \"bfc\"", "scheme = \"aquarius\"");
        assert!(
            text.contains("honor_bfc = true"),
            "{name}: host NICs hold flows"
        );
        let t = Topology::parse(&text, &p).unwrap();
        let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
        f.run();
        let rep = f.report();
        let mut pauses = 0;
        for s in &rep.switches {
            for p in &s.ports {
                assert_eq!(
                    p.drops.values().sum::<u64>(),
                    0,
                    "{name} {}:{}",
                    s.switch,
                    p.name
                );
            }
            let a = aquarius_json(&f, &s.switch);
            for p in a["ports"].as_array().unwrap() {
                let sent = p["pauses_sent_qhigh"].as_u64().unwrap()
                    + p["pauses_sent_contribution"].as_u64().unwrap();
                assert_eq!(sent, p["resumes_sent"].as_u64().unwrap(), "{name}: {a}");
                pauses += sent;
            }
        }
        assert!(pauses > 0, "{name}: Aquarius paused something");
        for fl in &rep.flows {
            assert_eq!((fl.lost, fl.reordered), (0, 0), "{name} {}", fl.name);
            assert_eq!(fl.rx_pkts, fl.tx_pkts, "{name} {}", fl.name);
        }
    }
}

/// The ACK class (`strict` queues, `host.ack_prio`), as the HPCC ns-3 simulator BFC and
/// Aquarius were evaluated on keeps ACKs (`ACK_HIGH_PRIO`: queue 0, never paused, assignment
/// among the other queues): under both schemes a port's strict queue takes no part. Frames
/// whose priority maps to it stay in it, are never marked and raise no PAUSE however long it
/// grows; flows are assigned to the other queues only.
#[test]
fn strict_ack_queue_is_out_of_bfc_and_aquarius() {
    use dataplane::frame::HeapMem;
    use dataplane::switch::Outputs;
    use dataplane::wire::data::FrameTemplate;
    use dataplane::Switch;
    use flowctl::wire::shim::ShimRepr;
    const TOPO: &str = r#"
[[switch]]
name = "s1"
scheme = "SCHEME"
defaults = { rate = "100Gbit", delay = "1us", queues = 8, strict = [7] }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }]
buffer = { buffer_bytes = 12000000, response_ps = 0 }
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.0.3/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
"#;
    for scheme in ["bfc", "aquarius"] {
        let text = TOPO.replace("SCHEME", scheme);
        let t = Topology::parse(&text, Path::new("ackclass.toml")).unwrap();
        let r = t.resolve().unwrap();
        let h1 = &r.hosts[r.host_index("h1").unwrap() as usize];
        let h3 = &r.hosts[r.host_index("h3").unwrap() as usize];
        let mut sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
        let mut mem = HeapMem::new(4096, 2048);
        // Frames from h1 (behind a BFC/Aquarius upstream: the data shim names its queue
        // `prio`) to h3, 1500 B; nothing is served, so the queues only grow.
        let mut send = |sw: &mut Switch, sport: u16, prio: u8, now: u64| {
            let tmpl = FrameTemplate {
                src_mac: h1.mac,
                dst_mac: h1.peer_mac.unwrap(),
                src_ip: h1.ip,
                dst_ip: h3.ip,
                sport,
                dport: 4791,
                prio,
                vlan: false,
                ecn: false,
            };
            let mut b = vec![0u8; 1600];
            tmpl.emit_headers(&mut b, 1500);
            let n = ShimRepr { upstream_q: prio }.push(&mut b, 1500).unwrap();
            let f = mem.alloc_with(&b[..n]).unwrap();
            sw.receive(&mut mem, 0, f, n as u32, now, &mut Outputs::new());
        };
        // 100 frames of an ACK-class flow (priority 7): 150 KB in queue 7, above every
        // threshold (Th, Q_high), 10 ns apart.
        for i in 0..100 {
            send(&mut sw, 1000, 7, i * 10_000);
        }
        assert_eq!(sw.queue_bytes(2, 7), 150_000, "{scheme}: its static queue");
        let st = serde_json::to_value(sw.scheme_stats(1_000_000).unwrap()).unwrap();
        let pauses = |st: &serde_json::Value| -> u64 {
            match scheme {
                "bfc" => st["bfc"]["ports"][0]["pauses_sent"]
                    .as_object()
                    .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum()),
                _ => {
                    let p = &st["aquarius"]["ports"][0];
                    p["pauses_sent_qhigh"].as_u64().unwrap()
                        + p["pauses_sent_contribution"].as_u64().unwrap()
                }
            }
        };
        let marks = |st: &serde_json::Value| -> u64 {
            match scheme {
                "bfc" => st["bfc"]["ports"][2]["marked"].as_u64().unwrap(),
                _ => {
                    let p = &st["aquarius"]["ports"][2];
                    p["marked_qhigh"].as_u64().unwrap() + p["marked_contribution"].as_u64().unwrap()
                }
            }
        };
        assert_eq!((marks(&st), pauses(&st)), (0, 0), "{scheme}: {st}");
        // 14 data flows (priority 3): spread over queues 0-6, two per queue, none in 7.
        for k in 0..14u16 {
            send(&mut sw, 2000 + k, 3, 1_000_000 + u64::from(k) * 10_000);
        }
        assert_eq!(
            sw.queue_bytes(2, 7),
            150_000,
            "{scheme}: no flow in queue 7"
        );
        // Aquarius keeps the last empty queue back for rsvQ while it has none (hold_rsv).
        let used = (0..7).filter(|&q| sw.queue_bytes(2, q) > 0).count();
        let want = if scheme == "bfc" { 7 } else { 6 };
        assert_eq!(used, want, "{scheme}: data queues used");
        // The data flows do meet the scheme: enough of them marks and pauses.
        for i in 0..200u64 {
            send(&mut sw, 2000 + (i % 14) as u16, 3, 2_000_000 + i * 10_000);
        }
        let st = serde_json::to_value(sw.scheme_stats(10_000_000).unwrap()).unwrap();
        assert!(marks(&st) > 0 && pauses(&st) > 0, "{scheme}: {st}");
        assert_eq!(sw.queue_bytes(2, 7), 150_000);
    }
}

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

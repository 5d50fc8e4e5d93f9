//! Aquarius in virtual time at the paper's scale (APNet '23 §4): 100 Gbit/s, 1 µs links,
//! 8 queues per port, host NICs honouring per-flow pauses.
//!
//! * Micro-benchmark (Fig. 4/5, `deploy/sim/aquarius-microbenchmark.toml`): f1 (33 Gbit/s),
//!   f2 and f3 (line rate) to R1, f4 (line rate) to R2; f1–f3 forced into one egress queue at
//!   L1 toward R1, f3 and f4 into one egress queue at L2 toward L1. Aquarius and BFC run on
//!   the same setup; BFC with `scheme = "bfc-single"` (every flow in queue 0), which in this
//!   topology is exactly the paper's forcing: each port's flows are the forced ones.
//! * BFC's own scenarios (`deploy/sim/bfc-two-flows.toml`, `bfc-three-groups.toml`) with
//!   every switch on Aquarius: lossless and in order. A flow alone in its queue is held by
//!   pausing that queue; at line rate its queue empties between packets, and without the
//!   QueueTable sending it back to the paused queue it took a fresh one each time and was
//!   never held (1293 drops at the bottleneck before that fix).

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use std::path::Path;

const G100: f64 = 100e9;

/// Per-flow receive rate (Gbit/s) of f1..f4 over [from, to] ps, from the flow probes, and
/// the fabric after the run.
fn run(text: &str) -> ([f64; 4], Fabric) {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/aquarius-microbenchmark.toml");
    let t = Topology::parse(text, &p).unwrap();
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    f.run();
    let (from, to) = (100_000_000u64, 600_000_000u64);
    let mut r = [0.0; 4];
    for (i, name) in ["f1", "f2", "f3", "f4"].iter().enumerate() {
        let s = f.probes().series(name).unwrap();
        let at = |t: u64| s.iter().find(|x| x.0 >= t).unwrap();
        let (a, b) = (at(from), at(to));
        r[i] = (b.1 - a.1) as f64 * 8.0 / ((b.0 - a.0) as f64 / 1e12) / 1e9;
    }
    (r, f)
}

fn aquarius_json(f: &Fabric, sw: &str) -> serde_json::Value {
    let st = f.switch(sw).unwrap().scheme_stats(f.now()).unwrap();
    serde_json::to_value(st.aquarius.unwrap()).unwrap()
}

/// Fig. 5: Aquarius shares R1's link fairly among f1–f3 despite their rates, and keeps f4
/// going by moving f3 to a reserved queue at L2; BFC, which pauses L2's shared queue as a
/// whole, drags f4 down with f3.
///
/// The issue asks for f4 ≥ 90 % of *line rate*. That cannot hold on this topology: f3 and
/// f4 cross the same 100 Gbit/s link L2→L1, and f3's fair share of R1 is a third of it, so
/// f4's max-min fair rate is 100 − 33.3 = 66.7 Gbit/s (the paper's Fig. 5 has no numbers to
/// say otherwise). The check is ≥ 90 % of that fair rate.
#[test]
fn microbenchmark_aquarius_isolates_f4_bfc_does_not() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/aquarius-microbenchmark.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let (aq, fa) = run(&text);
    let bfc_text = text
        .replace("scheme = \"aquarius\"", "scheme = \"bfc-single\"")
        .lines()
        .filter(|l| !l.starts_with("aquarius = "))
        .collect::<Vec<_>>()
        .join("\n");
    let (bfc, fb) = run(&bfc_text);
    let log = format!(
        "Gbit/s over 100–600 µs: Aquarius f1 {:.1} f2 {:.1} f3 {:.1} f4 {:.1}; \
         BFC f1 {:.1} f2 {:.1} f3 {:.1} f4 {:.1}",
        aq[0], aq[1], aq[2], aq[3], bfc[0], bfc[1], bfc[2], bfc[3]
    );
    println!("{log}");

    // Lossless and in order under both (Aquarius moves f3 between queues at L2).
    for f in [&fa, &fb] {
        let rep = f.report();
        for fl in &rep.flows {
            assert_eq!(fl.lost, 0, "{}: {log}", fl.name);
            assert_eq!(fl.reordered, 0, "{}: {log}", fl.name);
        }
        for s in &rep.switches {
            for p in &s.ports {
                assert_eq!(p.drops.values().sum::<u64>(), 0, "{}:{}", s.switch, p.name);
            }
        }
    }

    // Aquarius: f1–f3 each within 20 % of a third of R1's link.
    let third = G100 / 3.0 / 1e9;
    for (i, &r) in aq[..3].iter().enumerate() {
        assert!(
            (r - third).abs() <= 0.2 * third,
            "f{} {r:.1} Gbit/s not within 20 % of {third:.1}: {log}",
            i + 1
        );
    }
    // f4 keeps ≥ 90 % of its max-min fair rate (see the doc comment).
    let fair4 = G100 / 1e9 - third;
    assert!(
        aq[3] >= 0.9 * fair4,
        "f4 {:.1} < 90 % of {fair4:.1}: {log}",
        aq[3]
    );
    // BFC pauses f4 with f3: well below Aquarius's f4.
    assert!(
        bfc[3] < 0.5 * aq[3],
        "BFC f4 not well below Aquarius's: {log}"
    );

    // The mechanisms that did it: contribution-aware pauses at L1, f3 moved to rsvQ at L2
    // (allocated, released, balanced PAUSE/RESUME), f4 never moved.
    let l1 = aquarius_json(&fa, "l1");
    let l2 = aquarius_json(&fa, "l2");
    let port = |v: &serde_json::Value, i: usize, k: &str| v["ports"][i][k].as_u64().unwrap();
    // l1 ports: s1, s2, down, r1, r2; l2 ports: s3, s4, up.
    assert!(port(&l1, 3, "marked_contribution") > 0);
    assert_eq!(port(&l1, 3, "marked_qhigh"), 0, "{l1}");
    for i in 0..3 {
        assert_eq!(port(&l1, i, "pauses_sent_qhigh"), 0);
        assert_eq!(
            port(&l1, i, "pauses_sent_contribution"),
            port(&l1, i, "resumes_sent")
        );
    }
    assert!(port(&l2, 2, "flows_reassigned") > 0, "{l2}");
    assert!(port(&l2, 2, "rsv_allocations") > 0);
    assert_eq!(
        port(&l2, 2, "rsv_allocations"),
        port(&l2, 2, "rsv_releases")
    );
    assert_eq!(
        port(&l2, 2, "pauses_received"),
        port(&l1, 2, "pauses_sent_contribution") + port(&l1, 2, "pauses_sent_qhigh")
    );
    assert_eq!(
        port(&l2, 2, "resumes_received"),
        port(&l1, 2, "resumes_sent")
    );
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

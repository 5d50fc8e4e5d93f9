//! Load balancing in virtual time (issue 18): DRILL beside ECMP on the same leaf-spine, same
//! flows, same seed. Transport: the fabric's constant-rate UDP flows (no congestion control;
//! DCQCN is issue 19).

use dataplane::config::LoadBalancer;
use dataplane::fabric::{Fabric, FabricOptions, SimReport};
use dataplane::Topology;
use std::path::{Path, PathBuf};

fn sim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim")
}

fn run(file: &str) -> SimReport {
    let mut f = Fabric::load(
        sim_dir().join(file),
        &FabricOptions {
            seed: None,
            duration: None,
        },
    )
    .unwrap();
    f.run();
    f.report()
}

#[test]
fn lb_key_defaults_to_ecmp_and_selects_drill() {
    let plain = Topology::load(sim_dir().join("leafspine.toml")).unwrap();
    let drill = Topology::load(sim_dir().join("drill-leafspine.toml")).unwrap();
    let p = plain.resolve().unwrap();
    let d = drill.resolve().unwrap();
    for (a, b) in p.switches.iter().zip(&d.switches) {
        assert_eq!(a.spec.lb, LoadBalancer::Ecmp, "{}", a.name());
        let want = if b.name().starts_with("leaf") {
            LoadBalancer::Drill
        } else {
            LoadBalancer::Ecmp
        };
        assert_eq!(b.spec.lb, want, "{}", b.name());
    }
    let bad = std::fs::read_to_string(sim_dir().join("drill-leafspine.toml"))
        .unwrap()
        .replacen("\nlb = \"drill\"", "\nlb = \"spray\"", 1);
    let e = Topology::parse(&bad, Path::new("x.toml")).unwrap_err();
    assert_eq!(e.key, "lb", "{e}");
}

/// The leaf-spine permutation (16 line-rate flows, 4 uplinks per leaf): seeded ECMP collides
/// flows on uplinks (some lose half their packets to 512 KiB tail drops), DRILL(2, 1) spreads
/// per packet, so nothing is lost and every flow runs near line rate, at the price of
/// reordering, which the receivers count.
#[test]
fn drill_removes_ecmp_collisions_and_reorders() {
    let e = run("leafspine.toml");
    let d = run("drill-leafspine.toml");
    assert_eq!(e.flows.len(), d.flows.len());
    let lost = |r: &SimReport| r.flows.iter().map(|f| f.lost).sum::<u64>();
    let reord = |r: &SimReport| r.flows.iter().map(|f| f.reordered).sum::<u64>();
    let worst = |r: &SimReport| {
        r.flows
            .iter()
            .map(|f| f.throughput_gbps)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        lost(&e) > 0,
        "ECMP must collide for this comparison to mean anything"
    );
    assert_eq!(reord(&e), 0, "ECMP keeps a flow on one path");
    assert_eq!(lost(&d), 0);
    assert!(reord(&d) > 0, "per-packet spraying reorders");
    assert!(worst(&d) > 95.0, "worst DRILL flow {} Gbit/s", worst(&d));
    assert!(worst(&e) < 60.0, "worst ECMP flow {} Gbit/s", worst(&e));
}

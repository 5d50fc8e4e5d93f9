//! BFC in virtual time at paper scale: 100 Gbit/s, 1 µs links, host NICs running BFC (BFC
//! §5), every switch on `scheme = "bfc"`: the deadlock guard, configuration, partial
//! deployment and queue-count variants. The §6.1 figures (Fig. 7, Fig. 8) are reproduced by
//! `xoff repro bfc` (`tools/src/repro/bfc.rs`, checked by `tools/tests/repro.rs`).

use dataplane::config::Scheme;
use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use std::fmt::Write;
use std::path::Path;

fn load(name: &str) -> Topology {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/sim")
        .join(name);
    Topology::load(p).unwrap()
}

fn bfc_json(f: &Fabric, sw: &str) -> serde_json::Value {
    let st = f.switch(sw).unwrap().scheme_stats(f.now()).unwrap();
    serde_json::to_value(st.bfc.unwrap()).unwrap()
}

fn port_index(f: &Fabric, sw: &str, port: &str) -> usize {
    f.switch(sw)
        .unwrap()
        .shared
        .spec
        .ports
        .iter()
        .position(|p| p.name == port)
        .unwrap()
}

#[test]
fn leafspine_up_down_deadlock_guard_and_shim_ports() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
    let mut t = Topology::load(p).unwrap();
    for s in &mut t.switches {
        s.scheme = Scheme::Bfc;
    }
    // Leaf: up1/up2 lead to spines (switches without hosts): packets from one uplink to an
    // uplink (a down-up bounce) get no backpressure; shims go toward the spines only.
    let leaf = t.switch_spec("leaf1").unwrap();
    let b = leaf.bfc.as_ref().unwrap();
    assert_eq!(b.elide, vec![(2, 2), (2, 3), (3, 2), (3, 3)]);
    assert_eq!(b.shim, vec![false, false, true, true]);
    assert_eq!(b.config.assignment, flowctl::Assignment::Dynamic);
    // Spine: every port is a down port; nothing elided; all peers speak BFC.
    let spine = t.switch_spec("spine1").unwrap();
    let b = spine.bfc.as_ref().unwrap();
    assert!(b.elide.is_empty());
    assert_eq!(b.shim, vec![true; 3]);
    // A switch that is not on BFC gets no shim from its neighbours.
    t.switches
        .iter_mut()
        .find(|s| s.name == "spine2")
        .unwrap()
        .scheme = Scheme::Static;
    let leaf = t.switch_spec("leaf1").unwrap();
    assert_eq!(leaf.bfc.unwrap().shim, vec![false, false, true, false]);
    assert!(t.switch_spec("spine2").unwrap().bfc.is_none());
}

#[test]
fn bfc_config_syntax_and_errors() {
    let text = r#"
[[switch]]
name = "s1"
scheme = "bfc-stochastic"
defaults = { rate = "100Gbit", delay = "1us", queues = 32 }
port = [{ name = "a" }, { name = "b" }, { name = "c" }]
bfc = { table_factor = 50, hrtt = "3us", threshold = "9KB", sticky_hrtts = 4, refresh = "50us", shim_ports = ["a"], uplinks = ["b", "c"], elide = [["a", "c"]] }
[[host]]
name = "h"
ip = "10.0.0.1/24"
[[link]]
a = "h"
b = "s1:a"
"#;
    let t = Topology::parse(text, Path::new("t.toml")).unwrap();
    let b = t.switch_spec("s1").unwrap().bfc.unwrap();
    assert_eq!(b.config.assignment, flowctl::Assignment::Stochastic);
    assert_eq!(b.config.table_factor, 50);
    assert_eq!(b.config.hrtt_ps, Some(3_000_000));
    assert_eq!(b.config.th_bytes, Some(9_000));
    assert_eq!(b.config.sticky_hrtts, 4);
    assert_eq!(b.config.refresh_ps, Some(50_000_000));
    assert_eq!(b.shim, vec![true, false, false]);
    assert_eq!(b.elide, vec![(1, 1), (1, 2), (2, 1), (2, 2), (0, 2)]);
    let e = Topology::parse(
        &text.replace("elide = [[\"a\", \"c\"]]", "elide = [[\"a\", \"z\"]]"),
        Path::new("t.toml"),
    )
    .unwrap_err();
    assert_eq!(e.key, "switch[0].bfc.elide");
    let e = Topology::parse(
        &text.replace("bfc-stochastic", "bfc-magic"),
        Path::new("t.toml"),
    )
    .unwrap_err();
    assert!(e.reason.contains("unknown variant"), "{e}");
    let e = Topology::parse(
        &text.replace("table_factor = 50", "table_factor = 0"),
        Path::new("t.toml"),
    )
    .unwrap_err();
    assert_eq!(e.key, "switch[0].bfc.table_factor");
}

/// BFC §5 / App. E.1 partial deployment: switches run BFC, host NICs do not; they cap each
/// flow's bytes in flight at one end-to-end BDP instead. The first-hop switch then holds at
/// most that much per flow and drops nothing; without the cap it overflows.
#[test]
fn partial_deployment_bdp_cap_keeps_first_hop_bounded() {
    let run = |cap: Option<u64>| {
        let mut t = load("bfc-two-flows.toml");
        let sim = t.sim.as_mut().unwrap();
        sim.honor_bfc = false;
        sim.inflight_cap = cap.map(dataplane::units::Size);
        sim.probe.clear();
        let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
        f.run();
        f
    };
    // Base RTT a -> r: 3 hops of 1 µs + 123 ns each way ≈ 6.7 µs; × 100 Gbit/s ≈ 84 KB.
    let bdp = 84_000u64;
    let f = run(Some(bdp));
    let rep = f.report();
    let mut log = String::new();
    for s in &rep.switches {
        for p in &s.ports {
            let drops: u64 = p.drops.values().sum();
            assert_eq!(drops, 0, "{}:{} dropped", s.switch, p.name);
            for q in &p.queues {
                if q.enq_pkts > 0 {
                    let _ = writeln!(log, "{}:{} peak {} B", s.switch, p.name, q.watermark_bytes);
                    assert!(q.watermark_bytes <= bdp, "{}:{}: {log}", s.switch, p.name);
                }
            }
        }
    }
    let total: f64 = rep.flows.iter().map(|x| x.throughput_gbps).sum();
    let _ = writeln!(log, "capped: {total:.1} Gbit/s delivered in total");
    assert!(total > 80.0, "{log}");
    assert!(f.hosts()[0].nic.capped > 0);
    // Without the cap (and without BFC NICs) the first hop overflows its queue.
    let f = run(None);
    let drops: u64 = f.report().switches[0]
        .ports
        .iter()
        .map(|p| p.drops.values().sum::<u64>())
        .sum();
    let _ = writeln!(log, "uncapped: s1 dropped {drops} frames");
    assert!(drops > 0, "{log}");
    println!("{log}");
}

/// The queue count is a port setting (8, 32, up to 127 data queues plus the control queue):
/// every variant completes without loss; with 12 flows at s2→r2, 32 and 127 queues never
/// collide.
#[test]
fn queue_count_variants() {
    let mut log = String::new();
    for queues in [8usize, 32, 127] {
        let mut t = load("bfc-three-groups.toml");
        for s in &mut t.switches {
            s.defaults.queues = Some(queues);
        }
        let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
        f.run();
        let rep = f.report();
        assert!(rep.flows.iter().all(|x| x.fct_ps.is_some() && x.lost == 0));
        let r2 = port_index(&f, "s2", "r2");
        let s2 = bfc_json(&f, "s2");
        let c = s2["ports"][r2]["collisions"].as_u64().unwrap();
        let active = s2["ports"][r2]["active_queues_max"].as_u64().unwrap();
        let _ = writeln!(
            log,
            "{queues} queues: s2:r2 collisions {c}, most active {active}"
        );
        // With fewer queues than flows, sharing is possible but only counted when a new
        // assignment finds every queue occupied (backpressure keeps few flows active).
        if queues >= 12 {
            assert_eq!(c, 0, "{log}");
        }
        assert!(active <= queues as u64);
    }
    println!("{log}");
}

//! BFC in virtual time at paper scale (§6.1): 100 Gbit/s, 1 µs links, host NICs running BFC
//! (BFC §5), every switch on `scheme = "bfc"`.
//!
//! * Fig. 7: two long flows compete at one egress. The queue of each stays near
//!   `Th = HRTT·μ/N_active` (peak ≤ Th + HRTT·μ) and each flow runs out of packets at the
//!   bottleneck at most 20 % of the time (Appendix A, worst case x = 2, which this is).
//! * Fig. 6/8: three flow groups; dynamic assignment gives the group-1 flows (bottlenecked
//!   on s1→s2, sharing it with backpressured group-2 flows) lower completion times than
//!   stochastic assignment, and never collides while flows < queues.

use dataplane::config::Scheme;
use dataplane::fabric::{Fabric, FabricOptions, ProbeTarget, QueueCounter};
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

const G100: f64 = 100e9;
/// Default HRTT at 100 Gbit/s, 1 µs: 2 µs + 2 × 1538 B of wire time.
const HRTT_PS: u64 = 2_246_080;

/// Fig. 7 with `resume` on every switch: checks what both resume rules share (no loss, the
/// queue near Th, Appendix A's bound, signals both ways) and returns the s2→r utilisation
/// with a log of the figures.
fn fig7(resume: &str) -> (f64, String) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/bfc-two-flows.toml");
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "scheme = \"bfc\"",
        &format!("scheme = \"bfc\"\nbfc = {{ resume = \"{resume}\" }}"),
    );
    let t = Topology::parse(&text, &p).unwrap();
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    let shared = f.switch("s2").unwrap().shared.clone();
    let r = port_index(&f, "s2", "r");
    for q in 0..2 {
        f.add_probe(
            format!("d{q}"),
            ProbeTarget::Queue {
                shared: shared.clone(),
                port: r,
                queue: q,
                counter: QueueCounter::DeqPkts,
            },
        );
    }
    f.run();
    let rep = f.report();
    let mut log = String::new();
    // Both flows delivered everything, nothing dropped anywhere.
    for fl in &rep.flows {
        assert_eq!(fl.lost, 0, "{}", fl.name);
        assert!(fl.rx_pkts > 1000, "{}", fl.name);
    }
    for s in &rep.switches {
        for p in &s.ports {
            assert_eq!(p.drops.values().sum::<u64>(), 0, "{}:{}", s.switch, p.name);
        }
    }
    // Dynamic assignment put the two flows in queues 0 and 1 of s2:r.
    let q = &rep.switches[2].ports[r].queues;
    assert!(q[0].enq_pkts > 0 && q[1].enq_pkts > 0);
    assert_eq!(
        q[0].enq_pkts + q[1].enq_pkts,
        rep.flows[0].rx_pkts + rep.flows[1].rx_pkts
    );

    let bdp = HRTT_PS as f64 * G100 / 8.0 / 1e12; // HRTT·μ = 28 076 B
    let th2 = (bdp / 2.0).floor(); // Th with both queues active
    let p = f.probes();
    let window = |s: Vec<(u64, u64)>| -> Vec<(u64, u64)> {
        s.into_iter()
            .filter(|&(t, _)| (20_000_000..=180_000_000).contains(&t))
            .collect()
    };
    let dt = p.interval_ps;
    let ser = (1538.0 * 8.0 / G100 * 1e12) as u64; // one frame's wire time
    let lag = ser.div_ceil(dt) as usize;
    for qn in 0..2 {
        let depth = window(p.series(&format!("q{qn}")).unwrap());
        let deq = window(p.series(&format!("d{qn}")).unwrap());
        let peak = depth.iter().map(|x| x.1).max().unwrap();
        let mean = depth.iter().map(|x| x.1 as f64).sum::<f64>() / depth.len() as f64;
        // Out of packets: nothing queued and no frame of the flow started within one wire
        // time (so none is being serialized).
        let starved = (lag..depth.len())
            .filter(|&i| depth[i].1 == 0 && deq[i].1 == deq[i - lag].1)
            .count() as f64
            / (depth.len() - lag) as f64;
        let _ = writeln!(
            log,
            "queue {qn}: peak {peak} B, mean {mean:.0} B, Th(2) {th2} B, Th + HRTT·μ {:.0} B, \
             out of packets {:.1} %",
            th2 + bdp,
            starved * 100.0
        );
        assert!(peak as f64 >= th2, "{log}: the queue reaches Th");
        assert!(peak as f64 <= th2 + bdp, "{log}: peak ≤ Th + HRTT·μ");
        assert!(mean <= 1.5 * th2, "{log}: the queue stays near Th");
        assert!(starved <= 0.20, "{log}: Appendix A bound");
    }
    let tx = window(p.series("tx").unwrap());
    let txp = window(p.series("txp").unwrap());
    let (a, b) = (tx.first().unwrap(), tx.last().unwrap());
    let pk = txp.last().unwrap().1 - txp.first().unwrap().1;
    let wire_bits = ((b.1 - a.1) + 20 * pk) as f64 * 8.0;
    let util = wire_bits / ((b.0 - a.0) as f64 / 1e12 * G100);
    let _ = writeln!(
        log,
        "resume = {resume}: s2→r utilisation {:.1} %",
        util * 100.0
    );
    // Signals: s2 paused and resumed both upstreams; they paused their host NICs.
    let s2 = bfc_json(&f, "s2");
    for up in ["from1", "from3"] {
        let pi = port_index(&f, "s2", up);
        let ps = &s2["ports"][pi];
        assert!(ps["pauses_sent"]["0"].as_u64().unwrap() > 10, "{s2}");
        assert_eq!(ps["pauses_sent"]["0"], ps["resumes_sent"]["0"], "{s2}");
    }
    assert_eq!(s2["ports"][r]["collisions"], 0);
    assert_eq!(s2["ports"][r]["active_queues_max"], 2);
    for h in f.hosts().iter().take(2) {
        let b = h.nic.bfc.as_ref().unwrap();
        assert!(b.pauses_rx > 10 && b.pauses_rx == b.resumes_rx);
    }
    println!("{log}");
    (util, log)
}

/// Fig. 7 as the paper's pseudocode has it (resume once every marked packet has left).
/// Two identical line-rate flows at x = 2 lock into step: a resumed flow alone cannot build
/// a queue (it arrives at the rate it drains), so both queues grow, pause, drain and run dry
/// together, and the link idles for the HRTT the resumes take, whatever the start offsets.
/// That is Appendix A's worst case for both flows at once, `1 − E_f(2, Th)` with
/// `Th = HRTT·μ_f`: E_f = (x−1)/(x·Th/(HRTT·μ_f) + x² − 1) = 1/5, so the floor is 80 %.
#[test]
fn fig7_two_flows_queue_near_threshold() {
    let (util, log) = fig7("drained");
    let e_f = 1.0 / (2.0 * 1.0 + 4.0 - 1.0);
    assert!(util >= 1.0 - e_f, "{log}");
}

/// Fig. 7 with §3.3.2's suggested early resume ("when every queue with a flow from the same
/// upstream queue drops below Th"): Th is one HRTT of the queue's drain, so the resumed
/// data arrives as the queue runs dry and the link stays busy even in lockstep.
#[test]
fn fig7_early_resume_keeps_the_link_busy() {
    let (util, log) = fig7("below-th");
    assert!(util >= 0.95, "{log}");
}

/// The §6.1 congestion-spreading experiment: runs `bfc-three-groups.toml` with `scheme` on
/// every switch and returns (mean group-1 FCT in µs, collisions at s1's uplink).
fn three_groups(scheme: Scheme, seed: u64) -> (f64, u64, u64) {
    let mut t = load("bfc-three-groups.toml");
    for s in &mut t.switches {
        s.scheme = scheme;
    }
    let opts = FabricOptions {
        seed: Some(seed),
        ..FabricOptions::default()
    };
    let mut f = Fabric::new(&t, &opts).unwrap();
    f.run();
    let rep = f.report();
    let g1: Vec<f64> = rep
        .flows
        .iter()
        .filter(|x| x.name.starts_with("g1"))
        .map(|x| x.fct_ps.expect("group-1 flow completed") as f64 / 1e6)
        .collect();
    for x in &rep.flows {
        assert!(x.fct_ps.is_some(), "{} did not complete", x.name);
    }
    let up = port_index(&f, "s1", "up");
    let s1 = bfc_json(&f, "s1");
    let r2 = port_index(&f, "s2", "r2");
    let s2 = bfc_json(&f, "s2");
    (
        g1.iter().sum::<f64>() / g1.len() as f64,
        s1["ports"][up]["collisions"].as_u64().unwrap(),
        s2["ports"][r2]["collisions"].as_u64().unwrap(),
    )
}

#[test]
fn fig8_dynamic_assignment_beats_stochastic() {
    let mut log = String::new();
    let (mut d, mut s) = (Vec::new(), Vec::new());
    for seed in 1..=8u64 {
        let (fd, dc1, dc2) = three_groups(Scheme::Bfc, seed);
        let (fs, sc1, sc2) = three_groups(Scheme::BfcStochastic, seed);
        let _ = writeln!(
            log,
            "seed {seed}: group-1 mean FCT dynamic {fd:.1} µs (collisions s1:up {dc1}, s2:r2 \
             {dc2}), stochastic {fs:.1} µs (collisions {sc1}, {sc2})"
        );
        // 6 flows on s1:up and 12 on s2:r2, 16 queues: dynamic never collides.
        assert_eq!((dc1, dc2), (0, 0), "{log}");
        d.push(fd);
        s.push(fs);
    }
    let stats = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt();
        let max = v.iter().copied().fold(0.0, f64::max);
        (m, sd, max)
    };
    let (dm, dsd, dmax) = stats(&d);
    let (sm, ssd, smax) = stats(&s);
    let _ = writeln!(
        log,
        "group-1 FCT over seeds: dynamic mean {dm:.1} µs sd {dsd:.1} max {dmax:.1}; \
         stochastic mean {sm:.1} µs sd {ssd:.1} max {smax:.1}"
    );
    // Fig. 8: lower mean and a tighter spread (no HoL blocking behind group 2).
    assert!(dm < sm, "{log}");
    assert!(dsd < ssd, "{log}");
    assert!(dmax < smax, "{log}");
    println!("{log}");
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

/// Appendix A's under-utilisation needs every flow's queue empty at once. Two identical
/// flows at x = 2 fall into lockstep in a deterministic fabric (see the Fig. 7 test); once
/// their loops differ (group 3's links 3 µs instead of 1 µs) the link stays busy.
#[test]
fn fig7_utilisation_when_flows_are_not_in_lockstep() {
    let mut t = load("bfc-two-flows.toml");
    let three_us = dataplane::units::Time(3_000_000);
    for s in &mut t.switches {
        if s.name == "s3" {
            s.defaults.delay = Some(three_us);
        }
        if s.name == "s2" {
            s.ports
                .iter_mut()
                .find(|p| p.name == "from3")
                .unwrap()
                .settings
                .delay = Some(three_us);
        }
    }
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    f.run();
    let p = f.probes();
    let w: Vec<(u64, u64, u64)> = p
        .series("tx")
        .unwrap()
        .into_iter()
        .zip(p.series("txp").unwrap())
        .filter(|((t, _), _)| (20_000_000..=180_000_000).contains(t))
        .map(|((t, b), (_, k))| (t, b, k))
        .collect();
    let (a, b) = (w.first().unwrap(), w.last().unwrap());
    let bits = ((b.1 - a.1) + 20 * (b.2 - a.2)) as f64 * 8.0;
    let util = bits / ((b.0 - a.0) as f64 / 1e12 * G100);
    println!("s2→r utilisation {:.1} %", util * 100.0);
    assert!(util >= 0.95, "{util}");
    assert!(f.report().flows.iter().all(|x| x.lost == 0));
}

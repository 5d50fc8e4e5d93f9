//! `xoff sim` flows that run the host stack's congestion control (issue 19): `[[flow]] cc`.
//!
//! The fabric is built from topology text as `xoff sim` builds it (`Fabric::new`), with the
//! flows and probes in the file, no host model installed by hand. The setup is
//! `tests/cc.rs`'s (one 100 Gbit/s switch, 1 µs links, 4 MB DSH buffer, two 1 GB flows
//! h1→rx from 0 and h2→rx from 300 µs, same windows of measurement), so the figures are
//! comparable: the stacks get the parameters `xoff experiment` derives (`StackConfig::new`
//! with the NIC rate and the longest base RTT, here the only one: 2 links). One difference:
//! `tests/cc.rs` sets a 10 ms RTO, `xoff sim` keeps the default (max(1 ms, 4 × base RTT)).
//! DCTCP and HPCC never time out (checked), so their figures are `tests/cc.rs`'s to the
//! digit (50.32/48.37 Gbit/s, queue 18 391 B; 46.89/47.89 Gbit/s, 334 B). DCQCN runs over PFC
//! in both, as RoCE does, and never times out either: 48.89/49.51 Gbit/s, mean queue
//! 43 677 B in both. (Without PFC the lossless class overflowed its DSH insurance in the start
//! transient, ~430-730 drops, and the 50-100 ms window's split hung on how the flows
//! recovered.)
//! (Run with `--nocapture` for the figures.)

use crate::common;

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use std::path::Path;

const US: u64 = 1_000_000;

/// h1, h2 → rx through one switch at 100 Gbit/s; `ecn` is the buffer's ECN table (TOML
/// inline), `int` turns INT on, `pfc` PFC on priority 3; `flows` are `[[flow]]` tables
/// appended verbatim.
fn topology_text(ecn: &str, int: bool, pfc: bool, flows: &str) -> String {
    let mut t = format!(
        "name = \"simcc\"\n\
         [sim]\nprobe_interval = \"2us\"\n\
         probe = [{{ name = \"q\", switch = \"s1\", port = \"p3\", counter = \"depth_bytes\" }},\n\
                  {{ name = \"rx0\", flow = \"f0\", counter = \"rx_bytes\" }},\n\
                  {{ name = \"rx1\", flow = \"f1\", counter = \"rx_bytes\" }}]\n\
         [[switch]]\nname = \"s1\"\n\
         defaults = {{ rate = \"100Gbit\", delay = \"1us\", queues = 8 }}\n\
         port = [{{ name = \"p1\" }}, {{ name = \"p2\" }}, {{ name = \"p3\" }}]\n\
         buffer = {{ buffer_bytes = 4000000, headroom_mode = \"dsh\", response_ps = 0, ecn = {ecn} }}\n\
         int = {int}\n"
    );
    if pfc {
        t.push_str("pfc = { enable_mask = 8 }\n");
    }
    for (i, h) in ["h1", "h2", "rx"].iter().enumerate() {
        t.push_str(&format!(
            "[[host]]\nname = \"{h}\"\nip = \"10.0.0.{}/24\"\n[[link]]\na = \"{h}\"\nb = \"s1:p{}\"\n",
            i + 1,
            i + 1
        ));
    }
    t.push_str(flows);
    t
}

/// The two flows of `tests/cc.rs` with congestion control `cc`.
fn two_flows_text(cc: &str) -> String {
    format!(
        "[[flow]]\nname = \"f0\"\nsrc = \"h1\"\ndst = \"rx\"\ncc = \"{cc}\"\nsize = 1000000000\nprio = 3\n\
         [[flow]]\nname = \"f1\"\nsrc = \"h2\"\ndst = \"rx\"\ncc = \"{cc}\"\nsize = 1000000000\nprio = 3\nstart = \"300us\"\n"
    )
}

fn parse(text: &str) -> Topology {
    Topology::parse(text, Path::new("simcc.toml")).unwrap()
}

struct TwoFlows {
    /// Throughput of each flow over the window (data frame bytes its receiver's stack took,
    /// as `tests/cc.rs` counts them), Gbit/s.
    gbps: Vec<f64>,
    mean_q: f64,
    max_q: u64,
    /// Retransmission timeouts of both flows, and the switch's drops, over the whole run.
    timeouts: u64,
    drops: u64,
}

/// Frame bytes each `cc` flow delivered so far (the receivers' stack records), by flow.
fn delivered(fab: &Fabric) -> Vec<u64> {
    let mut v: Vec<(u32, u64)> = fab
        .stacks()
        .iter()
        .flat_map(|(_, s)| s.borrow().rx_records())
        .map(|r| (r.id, r.rx_bytes))
        .collect();
    v.sort();
    v.into_iter().map(|(_, b)| b).collect()
}

fn run_two_flows(cc: &str, ecn: &str, from: u64, to: u64) -> TwoFlows {
    let topo = parse(&topology_text(
        ecn,
        cc == "hpcc",
        cc == "dcqcn",
        &two_flows_text(cc),
    ));
    let mut fab = Fabric::new(&topo, &FabricOptions::default()).unwrap();
    fab.run_until(from);
    let a = delivered(&fab);
    fab.run_until(to);
    let b = delivered(&fab);
    assert_eq!(a.len(), 2, "{cc}: both flows started by {from} ps");
    let gbps = common::gbps(&a, &b, from, to);
    let p = fab.probes();
    let (mean_q, max_q) = common::mean_max(p.series("q").unwrap(), from, to);
    // The flow probes (data frame bytes the sink host received, from the fabric's flow log)
    // agree with the receiving stacks' own count.
    for (i, col) in ["rx0", "rx1"].iter().enumerate() {
        let s = p.series(col).unwrap();
        let (a, b) = (common::value_at(&s, from), common::value_at(&s, to));
        let probe = common::gbps(&[a], &[b], from, to)[0];
        assert!(
            (probe - gbps[i]).abs() <= 0.01 * gbps[i],
            "{cc}: flow probe {col} {probe:.2} Gbit/s vs stack {:.2}",
            gbps[i]
        );
    }
    // The report of `xoff sim` for these flows: cc named, retransmissions counted.
    let rep = fab.report();
    let mut timeouts = 0;
    for f in &rep.flows {
        let c = f.cc.as_ref().expect("cc report");
        assert_eq!(c.cc.as_str(), cc);
        assert!(f.tx_pkts > 0 && f.rx_pkts > 0 && c.srtt_ps > 0);
        assert!(c.retx > 0 || c.timeouts == 0, "{cc}: a timeout resends");
        timeouts += c.timeouts;
    }
    let drops: u64 = rep.switches[0]
        .ports
        .iter()
        .map(|p| p.drops.values().sum::<u64>())
        .sum();
    TwoFlows {
        gbps,
        timeouts,
        drops,
        mean_q,
        max_q,
    }
}

/// The bounds of `tests/cc.rs`: each flow within 10 % of the fair share, the link > 80 %.
fn check_fair(name: &str, r: &TwoFlows) {
    println!(
        "xoff sim {name}: flows {:.2} and {:.2} Gbit/s, bottleneck queue mean {:.0} B, max {} B \
         ({} timeouts, {} drops)",
        r.gbps[0], r.gbps[1], r.mean_q, r.max_q, r.timeouts, r.drops
    );
    common::assert_fair(name, &r.gbps);
}

#[test]
fn sim_dctcp_two_flows_fair_share_queue_near_k() {
    const K: u64 = 20_000;
    let ecn = format!("{{ k_min_bytes = {K}, k_max_bytes = {K}, p_max = 1.0 }}");
    let r = run_two_flows("dctcp", &ecn, 2_000 * US, 4_000 * US);
    check_fair("dctcp", &r);
    assert_eq!(
        (r.timeouts, r.drops),
        (0, 0),
        "dctcp: lossless by ECN alone"
    );
    assert!(
        r.mean_q > 0.5 * K as f64 && r.mean_q < 2.0 * K as f64,
        "mean queue {} not near K = {K}",
        r.mean_q
    );
}

/// DCQCN with its paper's RED setting and the 50-100 ms window of `tests/cc.rs` (see there).
#[test]
fn sim_dcqcn_two_flows_fair_share_queue_in_red_band() {
    let ecn =
        "{ k_min_bytes = 5000, k_max_bytes = 200000, p_max = 0.01, ref_rate_bps = 40000000000 }";
    let r = run_two_flows("dcqcn", ecn, 50_000 * US, 100_000 * US);
    check_fair("dcqcn", &r);
    assert!(r.mean_q > 12_500.0, "queue below K_min: {}", r.mean_q);
    assert!(r.max_q < 500_000, "queue above K_max: {}", r.max_q);
}

#[test]
fn sim_hpcc_two_flows_fair_share_queue_near_zero() {
    let r = run_two_flows("hpcc", "{ enabled = false }", 8_000 * US, 12_000 * US);
    check_fair("hpcc", &r);
    assert_eq!((r.timeouts, r.drops), (0, 0), "hpcc: lossless by INT alone");
    assert!(
        r.mean_q < 3_000.0,
        "mean queue {} B not near zero",
        r.mean_q
    );
}

/// A short DCTCP flow runs to completion under `Fabric::run` (the network drains, the run
/// ends) and reports its FCT: at least the ideal (base RTT + serialization).
#[test]
fn sim_cc_flow_completes_and_reports_fct() {
    let flows = "[[flow]]\nname = \"f0\"\nsrc = \"h1\"\ndst = \"rx\"\ncc = \"dctcp\"\nsize = \"1MB\"\n\
                 [[flow]]\nname = \"f1\"\nsrc = \"h2\"\ndst = \"rx\"\ncc = \"dctcp\"\nsize = \"1MB\"\nstart = \"5us\"\njitter = \"2us\"\n";
    let ecn = "{ k_min_bytes = 20000, k_max_bytes = 20000, p_max = 1.0 }";
    let mut fab = Fabric::new(
        &parse(&topology_text(ecn, false, false, flows)),
        &FabricOptions::default(),
    )
    .unwrap();
    fab.run();
    let rep = fab.report();
    let json = rep.to_json();
    assert!(json.contains("\"cc\": \"dctcp\""), "{json}");
    let table = rep.table();
    assert!(table.contains("cc flow"), "{table}");
    println!("{table}");
    // Serialization alone at 100 Gbit/s, full frames of one MSS each.
    let mss = dataplane::host::StackConfig::new(0, 1, 0).mss as f64;
    let ideal_us = 1e6 / mss * 1500.0 * 8.0 / 100e9 * 1e6;
    for f in &rep.flows {
        let c = f.cc.as_ref().unwrap();
        assert!(c.completed, "{}", f.name);
        let fct_us = f.fct_ps.unwrap() as f64 / 1e6;
        assert!(
            fct_us > ideal_us,
            "{}: fct {fct_us} us < ideal {ideal_us}",
            f.name
        );
        assert_eq!(f.rx_bytes, f.tx_bytes, "{}: drained", f.name);
    }
    // The second flow starts at 5 µs plus a seeded jitter of at most 2 µs.
    let s = rep.flows[1].start_ps;
    assert!((5 * US..=7 * US).contains(&s), "{s}");
}

fn build_err(flows: &str, int: bool) -> String {
    let ecn = "{ enabled = false }";
    match Fabric::new(
        &parse(&topology_text(ecn, int, false, flows)),
        &FabricOptions::default(),
    ) {
        Ok(_) => panic!("built: {flows}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn sim_cc_config_errors() {
    let base = "[[flow]]\nname = \"f0\"\nsrc = \"h1\"\ndst = \"rx\"\n";
    // Missing size.
    let e = build_err(&format!("{base}cc = \"dctcp\"\n"), false);
    assert!(
        e.contains("simcc.toml") && e.contains("flow[0].size"),
        "{e}"
    );
    // A key of UDP-like sources.
    let e = build_err(
        &format!("{base}cc = \"dctcp\"\nsize = \"1MB\"\nrate = \"10Gbit\"\n"),
        false,
    );
    assert!(
        e.contains("flow[0].rate") && e.contains("does not apply"),
        "{e}"
    );
    let e = build_err(
        &format!("{base}cc = \"dcqcn\"\nsize = \"1MB\"\necn = true\n"),
        false,
    );
    assert!(e.contains("flow[0].ecn"), "{e}");
    // Unknown cc: the file, the key and the accepted values.
    let e = build_err(&format!("{base}cc = \"reno\"\nsize = \"1MB\"\n"), false);
    assert!(
        e.contains("simcc.toml") && e.contains("flow[0].cc") && e.contains("reno"),
        "{e}"
    );
    for k in ["none", "window", "dcqcn", "dctcp", "hpcc"] {
        assert!(e.contains(k), "{e}");
    }
    // HPCC through a switch without INT.
    let e = build_err(&format!("{base}cc = \"hpcc\"\nsize = \"1MB\"\n"), false);
    assert!(
        e.contains("flow[0].cc") && e.contains("`s1`") && e.contains("int"),
        "{e}"
    );
    // A host with a cc flow and a UDP-like one: both flows named.
    let e = build_err(
        &format!(
            "{base}cc = \"dctcp\"\nsize = \"1MB\"\n\
             [[flow]]\nname = \"udp\"\nsrc = \"h2\"\ndst = \"rx\"\nsize = \"1MB\"\n"
        ),
        false,
    );
    assert!(
        e.contains("`f0`") && e.contains("`udp`") && e.contains("`rx`"),
        "{e}"
    );
    // Two cc flows from one host with different algorithms.
    let e = build_err(
        &format!(
            "{base}cc = \"dctcp\"\nsize = \"1MB\"\n\
             [[flow]]\nname = \"g\"\nsrc = \"h1\"\ndst = \"h2\"\ncc = \"dcqcn\"\nsize = \"1MB\"\n"
        ),
        false,
    );
    assert!(e.contains("flow[1].cc") && e.contains("`f0`"), "{e}");
    // The same, after h1 received a cc flow first: the message names the flow h1 sends.
    let e = build_err(
        "[[flow]]\nname = \"in\"\nsrc = \"h2\"\ndst = \"h1\"\ncc = \"dcqcn\"\nsize = \"1MB\"\n\
         [[flow]]\nname = \"out\"\nsrc = \"h1\"\ndst = \"rx\"\ncc = \"dctcp\"\nsize = \"1MB\"\n\
         [[flow]]\nname = \"out2\"\nsrc = \"h1\"\ndst = \"h2\"\ncc = \"dcqcn\"\nsize = \"1MB\"\n",
        false,
    );
    assert!(
        e.contains("flow[2].cc") && e.contains("`out`") && !e.contains("`in`"),
        "{e}"
    );
    // With INT on, the HPCC flows build.
    let ok = format!(
        "{base}cc = \"hpcc\"\nsize = \"1MB\"\n\
         [[flow]]\nname = \"f1\"\nsrc = \"h2\"\ndst = \"rx\"\ncc = \"hpcc\"\nsize = \"1MB\"\n"
    );
    Fabric::new(
        &parse(&topology_text("{ enabled = false }", true, false, &ok)),
        &FabricOptions::default(),
    )
    .unwrap();
}

/// HPCC's INT check follows every fewest-hop path (ECMP may take any): on
/// `deploy/sim/drill-leafspine.toml` (4 leaves, 4 spines) with INT on every switch but
/// `spine4`, a flow between two leaves is refused naming `spine4`; one inside a leaf builds.
#[test]
fn sim_hpcc_int_check_covers_every_equal_cost_path() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/drill-leafspine.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    // The topology without its UDP-like flows, INT on all switches but spine4.
    let mut t = text[..text.find("\n[[flow]]").unwrap()].to_string();
    for sw in [
        "leaf1", "leaf2", "leaf3", "leaf4", "spine1", "spine2", "spine3",
    ] {
        let at = format!("name = \"{sw}\"\n");
        assert!(t.contains(&at), "{sw}");
        t = t.replace(&at, &format!("{at}int = true\n"));
    }
    let flow = |dst: &str| {
        format!("{t}\n[[flow]]\nname = \"f0\"\nsrc = \"h1\"\ndst = \"{dst}\"\ncc = \"hpcc\"\nsize = \"1MB\"\n")
    };
    let topo = |s: &str| Topology::parse(s, Path::new("leafspine.toml")).unwrap();
    let err = match Fabric::new(&topo(&flow("h5")), &FabricOptions::default()) {
        Ok(_) => panic!("h1 -> h5 crosses spine4, which has no INT"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("flow[0].cc") && err.contains("`spine4`"),
        "{err}"
    );
    Fabric::new(&topo(&flow("h2")), &FabricOptions::default()).unwrap();
}

/// `deploy/sim/cc-dumbbell.toml` as `xoff sim` loads it: both DCTCP flows complete without
/// loss, and while both run (0.5-2.9 ms: the second starts at 200 µs, the first finishes
/// near 2.95 ms) they share the 100 Gbit/s uplink within 10 % and its queue sits near
/// K = 20 KB (DCTCP §3.1), from the file's own probes.
#[test]
fn sim_cc_dumbbell_example() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/cc-dumbbell.toml");
    let mut fab = Fabric::load(&file, &FabricOptions::default()).unwrap();
    fab.run();
    let rep = fab.report();
    for f in &rep.flows {
        let c = f.cc.as_ref().unwrap();
        assert!(c.completed && c.retx == 0 && f.lost == 0, "{}", f.name);
    }
    let (from, to) = (500 * US, 2_900 * US);
    let p = fab.probes();
    let rx: Vec<Vec<(u64, u64)>> = ["a_rx", "b_rx"]
        .iter()
        .map(|c| p.series(c).unwrap())
        .collect();
    let at = |t: u64| -> Vec<u64> { rx.iter().map(|s| common::value_at(s, t)).collect() };
    let gbps = common::gbps(&at(from), &at(to), from, to);
    let (mean_q, _) = common::mean_max(p.series("q").unwrap(), from, to);
    println!(
        "cc-dumbbell: {:.2} and {:.2} Gbit/s, uplink queue mean {mean_q:.0} B",
        gbps[0], gbps[1]
    );
    let fair = (gbps[0] + gbps[1]) / 2.0;
    for g in &gbps {
        assert!((g - fair).abs() <= 0.1 * fair, "{gbps:?}");
    }
    assert!(fair * 2.0 > 80.0, "{gbps:?}");
    assert!(
        mean_q > 10_000.0 && mean_q < 40_000.0,
        "queue {mean_q} not near K"
    );
}

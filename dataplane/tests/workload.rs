//! Workload fidelity (flow-size CDFs, offered load, determinism) and FCT accounting of the
//! host stack in the virtual-time fabric.

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::host::report::{base_rtt_ps, merge};
use dataplane::host::{fabric::install, StackConfig};
use dataplane::workload::{offered_load, Arrival, Cdf, Dests, FlowSpec, IncastSpec, LoadSpec};
use dataplane::Topology;
use std::path::{Path, PathBuf};

fn workloads() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/workloads")
}

fn spec(cdf: Cdf, load: f64, arrival: Arrival, duration_ps: u64) -> LoadSpec {
    LoadSpec {
        cdf,
        load,
        rate_bps: 100_000_000_000,
        arrival,
        hosts: 16,
        senders: (0..16).collect(),
        dests: Dests::Uniform,
        prios: vec![3],
        duration_ps,
        start_ps: 0,
    }
}

/// Every shipped CDF: ≥ 10^5 sampled sizes are within KS distance 0.02 of the CDF.
#[test]
fn flow_sizes_match_every_cdf() {
    let mut names = Vec::new();
    for e in std::fs::read_dir(workloads()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "cdf") {
            names.push(p);
        }
    }
    names.sort();
    assert!(names.len() >= 5, "workloads: {names:?}");
    for p in names {
        let cdf = Cdf::load(&p).unwrap();
        let mut rng = dataplane::fabric::Rng::new(42);
        let v: Vec<u64> = (0..100_000).map(|_| cdf.sample(&mut rng)).collect();
        let d = cdf.ks_distance(&v);
        eprintln!("{}: mean {:.0} B, KS {:.4}", cdf.name, cdf.mean(), d);
        assert!(d <= 0.02, "{}: KS distance {d}", p.display());
    }
}

/// Schedules of ≥ 10^5 flows: sizes within KS 0.02, offered load within 2% of the target,
/// for Poisson and lognormal (σ = 2) arrivals.
#[test]
fn schedule_offers_the_target_load() {
    for (name, arrival, dur) in [
        ("poisson", Arrival::Poisson, 400_000_000_000u64),
        (
            "lognormal",
            Arrival::Lognormal { sigma: 2.0 },
            1_600_000_000_000,
        ),
    ] {
        let cdf = Cdf::load(workloads().join("fb_hadoop.cdf")).unwrap();
        let s = spec(cdf, 0.5, arrival, dur);
        let flows = s.generate(7, 0);
        let sizes: Vec<u64> = flows.iter().map(|f| f.size).collect();
        let load = offered_load(&flows, 16, s.rate_bps, dur);
        let ks = s.cdf.ks_distance(&sizes);
        eprintln!("{name}: {} flows, load {load:.4}, KS {ks:.4}", flows.len());
        assert!(flows.len() >= 100_000, "{name}: {} flows", flows.len());
        assert!((load - 0.5).abs() <= 0.5 * 0.02, "{name}: load {load}");
        assert!(ks <= 0.02, "{name}: KS {ks}");
        assert!(flows.iter().all(|f| f.src != f.dst && f.dst < 16));
    }
}

#[test]
fn same_seed_same_schedule() {
    let cdf = Cdf::load(workloads().join("websearch.cdf")).unwrap();
    let s = spec(cdf, 0.3, Arrival::Lognormal { sigma: 2.0 }, 10_000_000_000);
    let a = s.generate(5, 0);
    assert_eq!(a, s.generate(5, 0));
    assert_ne!(a, s.generate(6, 0));
    let inc = IncastSpec {
        senders: (1..9).collect(),
        receiver: 0,
        size: 100_000,
        period_ps: 1_000_000_000,
        rounds: 3,
        start_ps: 0,
        jitter_ps: 1_000_000,
        prio: 3,
    };
    let x = inc.generate(1, 0);
    assert_eq!(x.len(), 24);
    assert_eq!(x, inc.generate(1, 0));
    let csv = dataplane::workload::to_csv(&x);
    assert_eq!(dataplane::workload::from_csv(&csv, "t").unwrap(), x);
}

const LINE: &str = r#"name = "line"
[[switch]]
name = "s1"
defaults = { rate = "10Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
"#;

/// One flow on an idle path: FCT / (base RTT + serialization at line rate) is 1.0 ± 5%,
/// for a short and a long flow, with nothing lost.
#[test]
fn single_flow_slowdown_is_one_on_an_idle_path() {
    let topo = Topology::parse(LINE, Path::new("line.toml")).unwrap();
    let rate = 10_000_000_000;
    let mss = StackConfig::new(0, rate, 0).mss;
    // Two links of 10 Gbit/s and 1 us each way.
    let rtt = base_rtt_ps(&[(rate, 1_000_000), (rate, 1_000_000)], mss);
    for size in [20_000u64, 1_000_000, 5_000_000] {
        let flows = [FlowSpec {
            id: 0,
            src: 0,
            dst: 1,
            size,
            start_ps: 1_000_000,
            prio: 3,
        }];
        let mut fab = Fabric::new(&topo, &FabricOptions::default()).unwrap();
        let stacks = install(&mut fab, &flows, |i| {
            StackConfig::new(0, i.nic_rate_bps, rtt)
        });
        fab.run();
        let tx = stacks[0].borrow().tx_records();
        let rx = stacks[1].borrow().rx_records();
        let r = merge(&tx, &rx, mss, rate, rtt);
        let f = &r[0];
        let sd = f.slowdown.unwrap();
        eprintln!(
            "{size} B: fct {} ps, ideal {} ps, slowdown {sd:.4}",
            f.fct_ps.unwrap(),
            f.ideal_ps
        );
        assert!((sd - 1.0).abs() <= 0.05, "{size} B: slowdown {sd}: {f:?}");
        assert_eq!((f.lost, f.retx, f.duplicates), (0, 0, 0), "{f:?}");
        assert!(f.completed);
    }
}

//! Pyrrha §5.2 (Fig. 8, Fig. 10) on real frames: `deploy/topologies/leafspine-pyrrha.toml`
//! (leafspine.toml's shape, every link 50 Mbit/s), `xoff host` ends. S1 and S2 (rack 1) send
//! to R1 (rack 3), the incast; VS (rack 2) sends to VR (rack 3), the vulnerable flow, and
//! shares core2's port toward tor3 with S2 → R1 (the flow ids are picked so the switches'
//! seeded ECMP puts S1 on core1 and S2 and VS on core2, as the paper places them). The flows
//! start in turn, S1, S2, VS (Fig. 10(a)).
//!
//! The same flows run twice: under Pyrrha (with PFC beside it, as the Fig. 8 runs in virtual
//! time; the hosts run `--pyrrha` and honour the switches' per-root PAUSE) and under PFC
//! only (Fig. 10(b)). Under Pyrrha the incast's root is tor3's port toward R1 and only the
//! flows crossing it wait, in isolation queues: core2 keeps sending VS from its OQ while S2
//! waits in an IQ, so VS keeps most of the core port (the paper: 66.7 of 100 Gbit/s; S1,
//! alone on core1, gets the larger half of R1). Under PFC tor3 pauses core2's whole port
//! toward it, VS with S2, and VS gets no more than S2's share (the paper: about 40 Gbit/s).
//! Both runs lose nothing: no receiver hole, no switch drop, no ring drop at switches or hosts,
//! and the testbed audit balances. Requires root.
//!
//! Measured (2-core VM, machine reserved): VS 34.6, 33.8, 34.5 and 32.7 Mbit/s of 50 under
//! Pyrrha (the paper's 66.7 %), 23.5, 23.8, 24.4 and 23.5 under PFC (the paper's about 40 %),
//! the incast 49.1-49.3 Mbit/s of R1's link in both. Checked against PFC-only semantics: the
//! Pyrrha cell run on the PFC-only network fails the Pyrrha check (VS 23.7 Mbit/s < 30).

use crate::common;

use common::{n, rate_bps, read_output, repo, rx_of, serial, start_hosts, unique, unix_ns, Bed};
use dataplane::host::wire::{flow_port, PORT};
use dataplane::Topology;
use loadbal::FiveTuple;
use serde_json::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every link's rate (bit/s), as the topology file sets it.
const LINK: f64 = 50e6;
/// Hosts in topology order (the schedule's host indices).
const HOSTS: [&str; 6] = ["s1", "s2", "vs", "x", "r1", "vr"];
/// The hosts that run `xoff host` (x has no flow).
const ENDS: [&str; 5] = ["s1", "s2", "vs", "r1", "vr"];
const SWITCHES: [&str; 5] = ["tor1", "tor2", "tor3", "core1", "core2"];

/// The flows: (name, src, dst, the uplink ECMP must pick at the source ToR, size, start).
/// S1 and S2 outlast VS, so VS's whole life is measured with the incast on.
const FLOWS: [(&str, &str, &str, &str, u64, u64); 3] = [
    ("S1", "s1", "r1", "up1", 12_000_000, 0),
    ("S2", "s2", "r1", "up2", 12_000_000, 500_000_000_000),
    ("VS", "vs", "vr", "up2", 4_000_000, 1_000_000_000_000),
];

fn topology_text(pyrrha: bool) -> String {
    let text = std::fs::read_to_string(repo().join("deploy/topologies/leafspine-pyrrha.toml"))
        .expect("leafspine-pyrrha.toml");
    assert_eq!(text.matches("scheme = \"pyrrha\"\n").count(), 5);
    if pyrrha {
        text
    } else {
        text.replace("scheme = \"pyrrha\"\n", "")
            .replace("pyrrha = { hosts = true, hop_bdp = \"8KB\" }\n", "")
    }
}

/// Flow ids (distinct, so distinct source ports) whose 5-tuples the source ToR's seeded ECMP
/// sends out of the uplink `FLOWS` asks for: the Fig. 8 placement, from the switches' own
/// ECMP (`ResolvedSwitch::ecmp_port`).
fn flow_ids(topo: &Path) -> [u32; 3] {
    let t = Topology::load(topo).expect("topology");
    let r = t.resolve().expect("resolve");
    let ip = |h: &str| r.hosts[r.host_index(h).expect("host") as usize].ip;
    let mut ids = [0u32; 3];
    let mut next = 0u32;
    for (i, &(name, src, dst, up, _, _)) in FLOWS.iter().enumerate() {
        let (tor, _) = r.hosts[r.host_index(src).expect("src") as usize]
            .port()
            .expect("host link");
        let sw = &r.switches[tor as usize];
        let want = sw.port_index(up).expect("uplink");
        ids[i] = (next..next + 64)
            .find(|&id| {
                let t = FiveTuple {
                    proto: 17,
                    src: IpAddr::V4(ip(src)),
                    dst: IpAddr::V4(ip(dst)),
                    sport: flow_port(id),
                    dport: PORT,
                };
                sw.ecmp_port(&t) == Some(want)
            })
            .unwrap_or_else(|| panic!("no flow id puts {name} on {up}"));
        next = ids[i] + 1;
    }
    ids
}

struct Cell {
    /// Delivered rate (bit/s) of S1, S2, VS, first to last packet at the receiver.
    rate: [f64; 3],
    /// The receivers' records of S1, S2, VS.
    rx: [Value; 3],
    /// What tor3 sent R1 while VS was on, bit/s (the incast's share of R1's link then).
    incast_during_vs: f64,
    stats: Vec<dataplane::stats::SwitchSnapshot>,
    hosts: Vec<Value>,
    audit_ok: bool,
    audit: Value,
    dir: PathBuf,
}

fn run(pyrrha: bool) -> Cell {
    let dir = std::env::temp_dir().join(unique("pf8"));
    std::fs::create_dir_all(&dir).expect("output dir");
    let topo = dir.join("leafspine-pyrrha.toml");
    std::fs::write(&topo, topology_text(pyrrha)).expect("topology");
    let ids = flow_ids(&topo);
    let idx = |h: &str| HOSTS.iter().position(|&x| x == h).expect("host");
    let mut csv = String::from("id,src,dst,size,start_ps,prio\n");
    for (i, &(_, src, dst, _, size, start)) in FLOWS.iter().enumerate() {
        csv += &format!("{},{},{},{size},{start},3\n", ids[i], idx(src), idx(dst));
    }
    let sched = dir.join("schedule.csv");
    std::fs::write(&sched, csv).expect("schedule");
    let bed = Bed::up(&topo, if pyrrha { "pf8p" } else { "pf8f" });
    let start_at = unix_ns() + 1_500_000_000;
    // A 1 MB window: 160 ms at 50 Mbit/s, far above the software path's RTT, so only the
    // pauses (Pyrrha's per root, PFC's per priority) hold the senders, as the paper's
    // line-rate RDMA senders. With 256 KB the incast's backlog stayed under tor3's PFC
    // threshold, PFC never paused core2 and VS kept 64 % under PFC too: not Fig. 10(b)'s
    // setting. The RTO (500 ms, adapting above) stays above what a paused flow queues.
    let mut args = vec!["--run", "7s", "--window", "1MB", "--rto", "500ms"];
    if pyrrha {
        args.push("--pyrrha");
    }
    let mut kids = start_hosts(&bed, &topo, &ENDS, &sched, &dir, start_at, &args);
    // tor3's bytes toward R1 and VR, sampled every 50 ms: the incast's rate while VS is on.
    let mut samples: Vec<(Instant, u64, u64)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = bed.stats("tor3");
        samples.push((Instant::now(), s.ports[0].tx_bytes, s.ports[1].tx_bytes));
        if kids.0.iter_mut().all(|c| !matches!(c.try_wait(), Ok(None))) || Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats: Vec<_> = SWITCHES.iter().map(|s| bed.stats(s)).collect();
    let (audit_ok, audit) = bed.audit();
    let hosts: Vec<Value> = ENDS.iter().map(|h| read_output(&dir, h)).collect();
    drop(kids);
    let host = |h: &str| &hosts[ENDS.iter().position(|&x| x == h).unwrap()];
    let rx = [
        rx_of(host("r1"), u64::from(ids[0])),
        rx_of(host("r1"), u64::from(ids[1])),
        rx_of(host("vr"), u64::from(ids[2])),
    ];
    let rate = [rate_bps(&rx[0]), rate_bps(&rx[1]), rate_bps(&rx[2])];
    // The window VS was on: the samples in which tor3 sent VR something, trimmed of the
    // first and last (partial) ones.
    let on: Vec<usize> = (1..samples.len())
        .filter(|&i| samples[i].2 > samples[i - 1].2)
        .collect();
    let incast_during_vs = match (on.get(1), on.len().checked_sub(2).and_then(|k| on.get(k))) {
        (Some(&a), Some(&b)) if b > a => {
            let secs = samples[b].0.duration_since(samples[a].0).as_secs_f64();
            (samples[b].1 - samples[a].1) as f64 * 8.0 / secs
        }
        _ => 0.0,
    };
    Cell {
        rate,
        rx,
        incast_during_vs,
        stats,
        hosts,
        audit_ok,
        audit,
        dir,
    }
}

fn pyrrha(s: &dataplane::stats::SwitchSnapshot) -> Value {
    common::scheme_stats(s, "pyrrha")
}

impl Cell {
    fn print(&self, what: &str) {
        eprintln!(
            "{what}: S1 {:.1} S2 {:.1} VS {:.1} Mbit/s (link {:.0}); tor3 -> R1 while VS was on \
             {:.1} Mbit/s; audit balanced {} lost {} lossless_lost {}",
            self.rate[0] / 1e6,
            self.rate[1] / 1e6,
            self.rate[2] / 1e6,
            LINK / 1e6,
            self.incast_during_vs / 1e6,
            self.audit["balanced"],
            self.audit["lost"],
            self.audit["lossless_lost"]
        );
        for (h, v) in ENDS.iter().zip(&self.hosts) {
            eprintln!("{what} {h}: counters {} xdp {}", v["counters"], v["xdp"]);
        }
    }

    /// Nothing lost anywhere, every flow delivered whole.
    fn assert_lossless(&self, what: &str) {
        for ((name, .., size, _), r) in FLOWS.iter().zip(&self.rx) {
            assert!(
                r["complete_ps"].is_u64(),
                "{what}: {name} did not complete: {r}"
            );
            let _ = size;
            assert_eq!(n(&r["rx_pkts"]), n(&r["pkts"]), "{what}: {name}: {r}");
            assert_eq!(
                n(&r["gaps"]),
                n(&r["reordered"]),
                "{what}: {name} lost: {r}"
            );
        }
        for s in &self.stats {
            for p in &s.ports {
                assert!(
                    p.drops.values().all(|&d| d == 0),
                    "{what}: switch drops: {p:?}"
                );
                assert_eq!(p.xdp.lost(), 0, "{what}: switch ring drops: {:?}", p.xdp);
            }
        }
        for (h, v) in ENDS.iter().zip(&self.hosts) {
            let x = &v["xdp"];
            let lost = n(&x["rx_dropped"]) + n(&x["rx_invalid_descs"]) + n(&x["rx_ring_full"]);
            assert_eq!(lost, 0, "{what}: {h}: ring drops {x}");
            assert_eq!(n(&v["counters"]["timeouts"]), 0, "{what}: {h} timed out");
        }
        assert!(self.audit_ok, "{what}: audit: {}", self.audit);
        assert_eq!(n(&self.audit["lossless_lost"]), 0, "{what}: {}", self.audit);
    }

    /// Fig. 10(a)'s result: the vulnerable flow keeps most of core2's port (the paper: 66.7
    /// of 100), above the half a fair split of that port would give it, while the incast
    /// still fills R1's link.
    fn assert_vulnerable_keeps_its_share(&self, what: &str) {
        let vs = self.rate[2];
        assert!(
            vs >= 0.6 * LINK,
            "{what}: VS kept {:.1} Mbit/s of core2's {:.0} Mbit/s port",
            vs / 1e6,
            LINK / 1e6
        );
    }
}

#[test]
fn fig8_the_vulnerable_flow_keeps_its_share_under_pyrrha_and_loses_it_under_pfc() {
    let _g = serial();
    let py = run(true);
    py.print("Pyrrha");
    for (s, st) in SWITCHES.iter().zip(&py.stats) {
        let p = pyrrha(st);
        eprintln!("Pyrrha {s}: {}", p["ports"]);
    }
    let pfc = run(false);
    pfc.print("PFC");
    for (s, st) in SWITCHES.iter().zip(&pfc.stats) {
        let p = serde_json::to_value(&st.pfc).unwrap_or_default();
        let xoff: u64 = p["ports"]
            .as_array()
            .map(|ports| {
                ports
                    .iter()
                    .flat_map(|q| q.as_array().into_iter().flatten())
                    .map(|x| n(&x["xoff_sent"]))
                    .sum()
            })
            .unwrap_or(0);
        eprintln!("PFC {s}: {xoff} XOFF frames sent");
    }

    // Both runs: lossless, in order, whole.
    py.assert_lossless("Pyrrha");
    pfc.assert_lossless("PFC");

    // Pyrrha: tor3's port toward R1 nominated itself a root; core2 isolated the flows
    // crossing it in an IQ on its port toward tor3.
    let tor3 = pyrrha(&py.stats[2]);
    let core2 = pyrrha(&py.stats[4]);
    assert!(
        n(&tor3["ports"][0]["roots_detected"]) > 0,
        "tor3:h1 was no root: {}",
        tor3["ports"][0]
    );
    assert!(
        n(&core2["ports"][2]["iqs_assigned"]) > 0,
        "core2 isolated nothing toward tor3: {}",
        core2["ports"][2]
    );

    // The incast fills R1's link in both runs while VS is on ("without compromising the
    // overall throughput of incast flows").
    for (c, what) in [(&py, "Pyrrha"), (&pfc, "PFC")] {
        assert!(
            c.incast_during_vs >= 0.9 * LINK,
            "{what}: the incast got {:.1} Mbit/s of R1's link",
            c.incast_during_vs / 1e6
        );
    }
    // Fig. 10: VS keeps most of its share under Pyrrha, not under PFC.
    py.assert_vulnerable_keeps_its_share("Pyrrha");
    // PFC pauses core2's port toward tor3 whole, VS with S2, so VS gets about S2's part of
    // that port, half of it (the paper: about 40 of 100 Gbit/s; measured here 47-49 %).
    // The bound leaves that half some noise; the gain below is the check that separates
    // the two schemes.
    assert!(
        pfc.rate[2] <= 0.55 * LINK,
        "PFC: VS kept {:.1} Mbit/s: PFC did not block it",
        pfc.rate[2] / 1e6
    );
    assert!(
        py.rate[2] - pfc.rate[2] >= 0.15 * LINK,
        "Pyrrha's gain for VS: {:.1} Mbit/s",
        (py.rate[2] - pfc.rate[2]) / 1e6
    );
    let _ = std::fs::remove_dir_all(&py.dir);
    let _ = std::fs::remove_dir_all(&pfc.dir);
}

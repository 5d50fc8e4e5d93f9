//! `xoff host --bfc-queues` on real frames: a 3:1 incast (two 1 MB flows from each of h1..h3
//! to rx, 100 Mbit/s ports) through a switch on `scheme = "bfc"`. The hosts speak BFC: their
//! data frames carry the Xoff data shim with the NIC queue, so the switch pauses and resumes
//! single NIC queues with Xoff signal frames, and the hosts honour them: nothing is lost
//! although the senders' windows (2 MB) are far above the switch's queues (256 KB). The same
//! incast with hosts that do not speak BFC overflows the switch. Requires root.

use crate::common;

use common::{n, read_output, serial, start_hosts, unique, unix_ns, Bed};
use serde_json::Value;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

const TOPOLOGY: &str = r#"# 3:1 incast through one BFC switch (tools/tests/host_bfc.rs).
# `hrtt` adds a software response term, as in chain-bfc.toml.
name = "hostbfc"

[[switch]]
name = "s1"
scheme = "bfc"
defaults = { rate = "100Mbit", delay = "10us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }, { name = "p4" }]
bfc = { hrtt = "500us" }

[[host]]
name = "h1"
ip = "10.0.0.1/24"

[[host]]
name = "h2"
ip = "10.0.0.2/24"

[[host]]
name = "h3"
ip = "10.0.0.3/24"

[[host]]
name = "rx"
ip = "10.0.0.100/24"

[[link]]
a = "h1"
b = "s1:p1"

[[link]]
a = "h2"
b = "s1:p2"

[[link]]
a = "h3"
b = "s1:p3"

[[link]]
a = "rx"
b = "s1:p4"
"#;

const HOSTS: [&str; 4] = ["h1", "h2", "h3", "rx"];
const FLOWS: u64 = 6;

struct Cell {
    hosts: Vec<Value>,
    switch: dataplane::stats::SwitchSnapshot,
}

/// Runs the incast once on a fresh testbed: every host runs `xoff host` (with
/// `--bfc-queues 8` if `bfc`); returns the hosts' JSON outputs and the switch's counters.
fn incast(topo: &Path, bfc: bool) -> Cell {
    let bed = Bed::up(topo, "hb");
    let dir = std::env::temp_dir().join(unique("hbout"));
    std::fs::create_dir_all(&dir).expect("output dir");
    // id,src,dst,size,start_ps,prio: two 1 MB flows per sender, 1 ms apart.
    let mut csv = String::from("id,src,dst,size,start_ps,prio\n");
    for i in 0..FLOWS {
        csv += &format!("{i},{},3,1000000,{},3\n", i % 3, i * 1_000_000_000);
    }
    let sched = dir.join("schedule.csv");
    std::fs::write(&sched, csv).expect("schedule");
    let start_at = unix_ns() + 1_500_000_000;
    let mut args = vec!["--run", "2500ms", "--window", "2MB", "--rto", "100ms"];
    if bfc {
        args.extend(["--bfc-queues", "8"]);
    }
    let mut kids = start_hosts(&bed, topo, &HOSTS, &sched, &dir, start_at, &args);
    let deadline = Instant::now() + Duration::from_secs(15);
    for c in &mut kids.0 {
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let switch = bed.stats("s1");
    let hosts = HOSTS
        .iter()
        .map(|h| read_output(&dir, h))
        .collect::<Vec<_>>();
    drop(kids);
    drop(bed);
    let _ = std::fs::remove_dir_all(&dir);
    Cell { hosts, switch }
}

fn sum(v: &Value) -> u64 {
    v.as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
}

/// Packets lost in the network by the receiver's sequence check (holes not filled by their
/// original packet), and the flows it saw complete.
fn receiver(rx: &Value) -> (u64, u64) {
    let recs = rx["rx"].as_array().expect("rx records");
    let lost = recs
        .iter()
        .map(|r| n(&r["gaps"]).saturating_sub(n(&r["reordered"])))
        .sum();
    let done = recs.iter().filter(|r| !r["complete_ps"].is_null()).count() as u64;
    (lost, done)
}

fn xdp_lost(v: &Value) -> u64 {
    n(&v["rx_dropped"]) + n(&v["rx_invalid_descs"]) + n(&v["rx_ring_full"])
}

fn switch_drops(s: &dataplane::stats::SwitchSnapshot) -> (u64, u64) {
    let drops = s.ports.iter().map(|p| p.drops.values().sum::<u64>()).sum();
    let xdp = s.ports.iter().map(|p| p.xdp.lost()).sum();
    (drops, xdp)
}

fn bfc_json(s: &dataplane::stats::SwitchSnapshot) -> Value {
    let pfc = s.pfc.as_ref().expect("flow-control stats");
    serde_json::to_value(&pfc.pipes()[0].bfc).unwrap()
}

#[test]
fn bfc_hosts_are_paused_per_queue_and_the_incast_is_lossless() {
    let _g = serial();
    let topo: PathBuf = std::env::temp_dir().join(format!("{}.toml", unique("hbtopo")));
    std::fs::write(&topo, TOPOLOGY).expect("topology");
    let t0 = Instant::now();

    let c = incast(&topo, true);
    let bfc = bfc_json(&c.switch);
    let (lost, done) = receiver(&c.hosts[3]);
    let (drops, sw_xdp) = switch_drops(&c.switch);
    for (i, h) in c.hosts.iter().enumerate().take(3) {
        let k = &h["counters"];
        let acked = h["tx"]
            .as_array()
            .map_or(0, |v| v.iter().filter(|r| !r["done_ps"].is_null()).count());
        let retx: u64 = h["tx"]
            .as_array()
            .map_or(0, |v| v.iter().map(|r| n(&r["retx"])).sum());
        eprintln!(
            "{}: tx_frames {} signals_rx {} pauses_rx {} resumes_rx {} flows acked {acked} \
             retx {retx} xdp_lost {}; s1:p{} pauses_sent {}",
            HOSTS[i],
            n(&k["tx_frames"]),
            n(&k["signals_rx"]),
            n(&k["pauses_rx"]),
            n(&k["resumes_rx"]),
            xdp_lost(&h["xdp"]),
            i + 1,
            bfc["ports"][i]["pauses_sent"]
        );
    }
    eprintln!(
        "BFC hosts: receiver lost {lost}, flows complete {done}/{FLOWS}, rx xdp_lost {}, \
         switch drops {drops}, switch xdp_lost {sw_xdp}",
        xdp_lost(&c.hosts[3]["xdp"])
    );
    for (i, h) in c.hosts.iter().enumerate().take(3) {
        let k = &h["counters"];
        // The switch paused this host's NIC queues and the host received those pauses.
        assert!(
            n(&k["pauses_rx"]) > 0 && n(&k["resumes_rx"]) > 0,
            "{}: {k}",
            HOSTS[i]
        );
        assert!(sum(&bfc["ports"][i]["pauses_sent"]) > 0, "{bfc}");
        assert!(
            h["tx"]
                .as_array()
                .is_some_and(|v| v.len() == 2 && v.iter().all(|r| !r["done_ps"].is_null())),
            "{}: flows not all acknowledged: {}",
            HOSTS[i],
            h["tx"]
        );
        assert_eq!(n(&k["signals_ignored"]), 0);
    }
    assert_eq!(lost, 0, "receiver lost packets");
    assert_eq!(done, FLOWS, "{}", c.hosts[3]["rx"]);
    assert_eq!((drops, sw_xdp), (0, 0), "switch drops / XDP ring drops");
    for h in &c.hosts {
        assert_eq!(xdp_lost(&h["xdp"]), 0, "host XDP ring drops: {}", h["xdp"]);
    }

    // Control: hosts that do not speak BFC cannot be paused, and the switch overflows.
    let c = incast(&topo, false);
    let (lost, done) = receiver(&c.hosts[3]);
    let (drops, _) = switch_drops(&c.switch);
    let pauses: u64 = c.hosts.iter().map(|h| n(&h["counters"]["pauses_rx"])).sum();
    eprintln!(
        "plain hosts: receiver lost {lost}, flows complete {done}/{FLOWS}, switch drops \
         {drops}, host pauses_rx {pauses}"
    );
    assert!(drops > 0 && lost > 0, "no loss without BFC hosts");
    assert_eq!(pauses, 0);
    let _ = std::fs::remove_file(&topo);
    eprintln!("took {:.1} s", t0.elapsed().as_secs_f64());
}

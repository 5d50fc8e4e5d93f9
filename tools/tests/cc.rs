//! End-host congestion control (issue 19) through the tools: the `cc` matrix key of `xoff
//! experiment` in virtual time, and `xoff host --cc dcqcn` on real frames through an
//! ECN-marking switch (root).

use crate::common;

use common::{read_output, repo, serial, start_hosts, unique, unix_ns, xoff, Bed};
use serde_json::Value;

use std::process::Command;
use std::time::{Duration, Instant};

/// `deploy/experiments/websearch-cc.toml`: every cell completes every flow, the cells are
/// not copies of each other (DCQCN changes the run), and a bad name is refused.
#[test]
fn experiment_matrix_cc_selects_the_hosts_congestion_control() {
    let _g = serial();
    let out = std::env::temp_dir().join(unique("ccexp"));
    let o = Command::new(xoff())
        .args(["experiment", "run"])
        .arg(repo().join("deploy/experiments/websearch-cc.toml"))
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .output()
        .expect("xoff experiment");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let cells = v["cells"].as_array().expect("cells");
    let ccs: Vec<&str> = cells
        .iter()
        .map(|c| c["params"]["cc"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ccs, ["window", "dcqcn", "dctcp", "hpcc"]);
    for c in cells {
        let s = &c["summary"];
        assert!(s["flows"].as_u64().unwrap_or(0) > 100, "{c}");
        assert_eq!(s["flows"], s["completed"], "{c}");
    }
    assert_ne!(cells[0]["summary"], cells[1]["summary"], "dcqcn = window");
    // The DCTCP cell marks at one threshold K on the switch (the patched topology).
    let topo = std::fs::read_to_string(out.join("cc_dctcp_scheme_pfc/topology.toml"))
        .expect("dctcp cell topology");
    assert!(topo.contains("k_min_bytes = 30000"), "{topo}");
    // HPCC cells turn INT on at the switch, and HPCC holds the queue far below the window
    // cell's.
    let topo = std::fs::read_to_string(out.join("cc_hpcc_scheme_pfc/topology.toml"))
        .expect("hpcc cell topology");
    assert!(topo.contains("int = true"), "{topo}");
    let maxq = |c: &Value| c["max_queue_bytes"].as_u64().unwrap_or(0);
    assert!(
        maxq(&cells[3]) < maxq(&cells[0]),
        "hpcc {} vs window {}",
        maxq(&cells[3]),
        maxq(&cells[0])
    );
    let _ = std::fs::remove_dir_all(&out);

    let bad = std::env::temp_dir().join(format!("{}.toml", unique("ccbad")));
    let text = std::fs::read_to_string(repo().join("deploy/experiments/websearch-cc.toml"))
        .expect("experiment")
        .replace(
            "topo/",
            &format!("{}/", repo().join("deploy/experiments/topo").display()),
        )
        .replace(
            "../workloads/",
            &format!("{}/", repo().join("deploy/workloads").display()),
        )
        .replace("\"dctcp\"", "\"reno\"");
    std::fs::write(&bad, text).expect("write");
    let o = Command::new(xoff())
        .args(["experiment", "run"])
        .arg(&bad)
        .arg("--out")
        .arg(std::env::temp_dir().join(unique("ccbadout")))
        .output()
        .expect("xoff experiment");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown congestion control `reno`"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_file(&bad);
}

/// Two senders and a receiver on one switch at 100 Mbit/s with RED ECN marking (the DCQCN
/// paper's shape, K_min 5 packets, K_max 40, P_max 1 %: at 100 Mbit/s a byte-scaled 5 KB
/// would mark every queue). No PFC: with it, the pauses reached the AF_XDP hosts after up to
/// a ring of frames had left, the headroom overflowed, and drops with 100 ms timeouts halved
/// the throughput in one of three runs (a PFC-on-real-hosts matter, not this test's). A 10 MB
/// buffer: with the paper's DCQCN timers (50-55 µs, tuned for µs RTTs) and this loop through
/// AF_XDP hosts taking milliseconds, the rates overshot before the CNPs arrived (peak queue
/// 0.36-0.95 MB measured); a 2 MB buffer's lossy threshold (244 KB) dropped.
///
/// So the hosts run DCQCN 10 times slower (`--dcqcn-time-scale 10`: timers 0.5-0.55 ms, one
/// CNP per flow per 0.5 ms). With the paper's timers the queue stayed far above K_max, every
/// packet was marked, and the receiver, which takes a batch of frames per loop, answered
/// each flow once per batch whatever its rate: beside a CPU hog the senders got nearly equal
/// CNPs (6 088 vs 5 020) at a 3:1 split, and the test failed in 2 of 5 suite runs (77/23
/// and 73/24 Mbit/s). Scaled, the queue peaks at 0.16-0.28 MB and the receiver answers about
/// a third of the marks (2 500 CNPs of 7 000), so the CNPs follow each flow's packets.
/// 100 times slower (5 ms) converged too slowly (h1, which starts first, kept 55-65 % in 4
/// of 8 runs). `xoff host` lets a flow's rate limiter make up 10 ms of a stalled loop at the
/// NIC's pace (an RDMA NIC's limiter is not held up by the host's CPU). Measured with both:
/// 13 of 14 runs within 8 % of the fair share; beside a hog 9 of 10, where the senders reach
/// only 81-87 Mbit/s in total (86-90 without) and the miss split 56/31 Mbit/s.
const TOPOLOGY: &str = r#"# Two DCQCN senders through one ECN-marking switch (tools/tests/cc.rs).
name = "ccdcqcn"

[[switch]]
name = "s1"
defaults = { rate = "100Mbit", delay = "10us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }]
buffer = { buffer_bytes = 10000000, lossless_pgs = [], ecn = { k_min_bytes = 7500, k_max_bytes = 60000, p_max = 0.01, ref_rate_bps = 100000000 } }

[[host]]
name = "h1"
ip = "10.0.0.1/24"

[[host]]
name = "h2"
ip = "10.0.0.2/24"

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
a = "rx"
b = "s1:p3"
"#;

const HOSTS: [&str; 3] = ["h1", "h2", "rx"];

fn sleep_until_ns(t: u128) {
    let now = unix_ns();
    if t > now {
        std::thread::sleep(Duration::from_nanos((t - now) as u64));
    }
}

/// Bytes the switch received on ports p1 and p2 (from h1 and h2).
fn rx_bytes(s: &dataplane::stats::SwitchSnapshot) -> [u64; 2] {
    [s.ports[0].rx_bytes, s.ports[1].rx_bytes]
}

#[test]
fn dcqcn_hosts_on_real_frames_converge_to_a_fair_share() {
    let _g = serial();
    let topo = std::env::temp_dir().join(format!("{}.toml", unique("cctopo")));
    std::fs::write(&topo, TOPOLOGY).expect("topology");
    let bed = Bed::up(&topo, "cc");
    let dir = std::env::temp_dir().join(unique("ccout"));
    std::fs::create_dir_all(&dir).expect("output dir");
    // h1 starts at 0, h2 at 1 s; both far longer than the 6 s run.
    let sched = dir.join("schedule.csv");
    std::fs::write(
        &sched,
        "id,src,dst,size,start_ps,prio\n0,0,2,200000000,0,3\n1,1,2,200000000,1000000000000,3\n",
    )
    .expect("schedule");
    let start_at = unix_ns() + 1_500_000_000;
    let mut kids = start_hosts(
        &bed,
        &topo,
        &HOSTS,
        &sched,
        &dir,
        start_at,
        &[
            "--run",
            "6s",
            "--rto",
            "100ms",
            "--cc",
            "dcqcn",
            "--dcqcn-time-scale",
            "10",
        ],
    );
    // Measure from 3 s (2 s after h2 joined) to 5.5 s at the switch's ingress ports.
    sleep_until_ns(start_at + 3_000_000_000);
    let a = bed.stats("s1");
    let t_a = Instant::now();
    sleep_until_ns(start_at + 5_500_000_000);
    let b = bed.stats("s1");
    let secs = t_a.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(15);
    for c in &mut kids.0 {
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let hosts: Vec<Value> = HOSTS.iter().map(|h| read_output(&dir, h)).collect();
    drop(kids);
    drop(bed);
    let _ = std::fs::remove_dir_all(&dir);
    let (ra, rb) = (rx_bytes(&a), rx_bytes(&b));
    let mbps: Vec<f64> = (0..2)
        .map(|i| (rb[i] - ra[i]) as f64 * 8.0 / secs / 1e6)
        .collect();
    let marked: u64 = b.ports[2].queues.iter().map(|q| q.ecn_marked).sum();
    let drops: u64 = b.ports.iter().map(|p| p.drops.values().sum::<u64>()).sum();
    let reasons: Vec<_> = b.ports.iter().map(|p| &p.drops).collect();
    let peak = b.ports[2].queues.iter().map(|q| q.watermark_bytes).max();
    println!("drops by port: {reasons:?}; peak queue toward rx {peak:?} B");
    let c = |h: &Value, k: &str| h["counters"][k].as_u64().unwrap_or(0);
    println!(
        "dcqcn at 100 Mbit/s: h1 {:.1} Mbit/s, h2 {:.1} Mbit/s over {secs:.2} s; CE marks {marked}, \
         receiver CE {} CNPs sent {}, senders CNPs {} / {}, switch drops {drops}",
        mbps[0],
        mbps[1],
        c(&hosts[2], "ce_rx"),
        c(&hosts[2], "cnp_tx"),
        c(&hosts[0], "cnp_rx"),
        c(&hosts[1], "cnp_rx"),
    );
    assert!(marked > 0, "the switch never marked CE");
    assert!(c(&hosts[2], "ce_rx") > 0 && c(&hosts[2], "cnp_tx") > 0);
    assert!(c(&hosts[0], "cnp_rx") > 0 && c(&hosts[1], "cnp_rx") > 0);
    let total = mbps[0] + mbps[1];
    // Measured 94.3-95.4 Mbit/s in total (at the switch's ingress; nothing is dropped).
    assert_eq!(drops, 0, "switch drops");
    assert!(total > 80.0, "link underused: {total:.1} Mbit/s");
    for m in &mbps {
        assert!(
            (m - total / 2.0).abs() <= 0.1 * total / 2.0,
            "not within 10 % of the fair share: {mbps:?}"
        );
    }
}

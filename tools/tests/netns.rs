//! The foundation on real frames: testbeds in network namespaces, forwarding through
//! `xoff run` over AF_XDP. Requires root.

use crate::common;

use common::{repo, serial, xoff, Bed};
use std::process::Command;
use std::time::{Duration, Instant};

fn topo(name: &str) -> std::path::PathBuf {
    repo().join("deploy/topologies").join(name)
}

#[test]
fn single_pings_all_pairs_and_shapes_tcp() {
    let _g = serial();
    let bed = Bed::up(&topo("single.toml"), "s");
    for (a, b) in [
        ("h1", "10.0.0.2"),
        ("h1", "10.0.0.3"),
        ("h2", "10.0.0.1"),
        ("h2", "10.0.0.3"),
        ("h3", "10.0.0.1"),
        ("h3", "10.0.0.2"),
    ] {
        assert!(bed.ping(a, b), "{a} cannot ping {b}");
    }
    // Unshaped-ish (1 Gbit/s) port: TCP flows.
    let r = bed.tcp_mbps("h1", "h2", "10.0.0.2", 3) * 1e6;
    assert!(r > 300e6 && r < 1e9, "TCP at 1 Gbit/s port: {r:.0} bit/s");
    // h3's port is shaped to 100 Mbit/s: TCP for 10 s reports 93–100 Mbit/s.
    let r = bed.tcp_mbps("h1", "h3", "10.0.0.3", 10);
    assert!(
        (93.0..=100.0).contains(&r),
        "TCP through a 100 Mbit/s port: {r:.2} Mbit/s"
    );
    let s = bed.stats("s1");
    assert!(
        s.ports[2]
            .queues
            .iter()
            .map(|q| q.watermark_bytes)
            .max()
            .unwrap_or(0)
            > 10_000,
        "no queue built at the shaped port"
    );
}

/// h1 -- s1 -- h2 with s1's port toward h2 shaped to `rate`. That port's queue holds 40 ms
/// of its line rate (`queue_bytes`), so a sender that pauses for a few milliseconds (2 cores
/// shared with everything else) does not empty it: with a 512 KiB queue (4 ms at 1 Gbit/s) a
/// faithful wire idled whenever iperf3 paused (1 Gbit/s came out 0.7-1.5 % slow).
fn two_host_topology(rate: &str, queue_bytes: u64) -> String {
    format!(
        r#"name = "shape"
[[switch]]
name = "s1"
defaults = {{ rate = "10Gbit", queues = 2, queue_limit = "512KiB" }}
port = [{{ name = "p1" }}, {{ name = "p2", rate = "{rate}", queue_limit = {queue_bytes} }}]
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
"#
    )
}

/// Frames of the flood: 1400 B of UDP payload + UDP/IPv4/Ethernet headers (FCS not counted,
/// as the switch's byte counters do not).
const FLOOD_FRAME: u64 = 1442;

/// The flood comes from `xoff bench gen` (AF_XDP, paced at 2x the port rate, sleeping when
/// ahead of its schedule) on h1's interface and is counted by `xoff bench sink` (an XDP
/// program counting and dropping at h2's interface). It was an iperf3 client and server
/// before: on a 2-vCPU AMD EPYC (CI's machine at stop 41) the switch's worker holds one core
/// and iperf3's client, its server and the hosts' softirq work share the other, and the client
/// reached 0.73-1.1 Gbit/s of the 2 Gbit/s asked (CI: 0.86, switch ingress 0.86; five runs
/// by hand, paced, burst-paced `-b 2G/64` and unpaced `-b 0` alike), so the 1 Gbit/s port
/// was never overloaded and nothing about its shaper could be concluded. The same switch fed
/// by the generator received 2.000-2.004 Gbit/s and shaped to -0.02..+0.17 % (five runs).
/// TCP through a shaped port with real host stacks stays checked by
/// `single_pings_all_pairs_and_shapes_tcp`.
#[test]
fn udp_flood_at_twice_the_rate_is_shaped_within_2_percent() {
    let _g = serial();
    for (rate, bps) in [("10Mbit", 10e6), ("100Mbit", 100e6), ("1Gbit", 1e9)] {
        let bed = Bed::up_text(&two_host_topology(rate, (bps * 0.040 / 8.0) as u64), "u");
        let (m1, m2) = (bed.mac("h1"), bed.mac("h2"));
        let wire_bits = (FLOOD_FRAME + 20) as f64 * 8.0;
        let pps = format!("{:.0}", 2.0 * bps / wire_bits);
        let sink = Command::new("ip")
            .args(["netns", "exec", &bed.ns("h2"), xoff(), "bench", "sink"])
            .args(["--iface", "eth0", "--duration", "8"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn xoff bench sink");
        std::thread::sleep(Duration::from_millis(500));
        let frame = FLOOD_FRAME.to_string();
        let gen_args = [
            "netns",
            "exec",
            &bed.ns("h1"),
            xoff(),
            "bench",
            "gen",
            "--iface",
            "eth0",
            "--src-mac",
            &m1,
            "--dst-mac",
            &m2,
            "--src-ip",
            "10.0.0.1",
            "--dst-ip",
            "10.0.0.2",
            "--size",
            &frame,
            "--rate",
            &pps,
            "--duration",
            "6",
        ];
        // Measure the switch's ingress and egress over the middle of the flood.
        let bed_ref = &bed;
        let (gen, (wire_sw, wire_in)) = std::thread::scope(|sc| {
            let meter = sc.spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                let (a, t0) = (bed_ref.stats("s1"), Instant::now());
                std::thread::sleep(Duration::from_secs(3));
                let (b, t1) = (bed_ref.stats("s1"), Instant::now());
                // Wire bit/s from byte and frame counts (+ 20 B preamble/IFG per frame).
                let secs = (t1 - t0).as_secs_f64();
                let rate = |bytes: u64, pkts: u64| (bytes + 20 * pkts) as f64 * 8.0 / secs;
                let (pa, pb) = (&a.ports, &b.ports);
                (
                    rate(
                        pb[1].tx_bytes - pa[1].tx_bytes,
                        pb[1].tx_pkts - pa[1].tx_pkts,
                    ),
                    rate(
                        pb[0].rx_bytes - pa[0].rx_bytes,
                        pb[0].rx_pkts - pa[0].rx_pkts,
                    ),
                )
            });
            let gen = Command::new("ip")
                .args(gen_args)
                .output()
                .expect("xoff bench gen");
            (gen, meter.join().expect("meter"))
        });
        assert!(
            gen.status.success(),
            "{rate}: xoff bench gen: {}",
            String::from_utf8_lossy(&gen.stderr)
        );
        let sink = sink.wait_with_output().expect("xoff bench sink");
        // At the receiver: frames counted at h2's interface from 2 s to 5.5 s of the sink's
        // clock (the flood runs from about 0.5 s to 6.5 s; its queue fills in 40 ms).
        let counts: Vec<(f64, u64)> = String::from_utf8_lossy(&sink.stdout)
            .lines()
            .filter_map(bench::traffic::parse_count_line)
            .filter(|&(t, _)| (2.0..=5.5).contains(&t))
            .collect();
        let (Some(&(ta, na)), Some(&(tb, nb))) = (counts.first(), counts.last()) else {
            panic!(
                "{rate}: the sink counted nothing between 2 s and 5.5 s: {}",
                String::from_utf8_lossy(&sink.stdout)
            );
        };
        let wire = (nb - na) as f64 * wire_bits / (tb - ta);
        let err = (wire - bps) / bps;
        let err_sw = (wire_sw - bps) / bps;
        eprintln!(
            "{rate}: offered {:.0} bit/s, switch ingress {wire_in:.0} bit/s; switch egress {wire_sw:.0} bit/s ({:+.2}%); receiver {wire:.0} bit/s on the wire ({:+.2}%)",
            2.0 * bps,
            err_sw * 100.0,
            err * 100.0
        );
        // The premise: the switch was overloaded while its egress was measured, which the
        // tail drops below prove as well. 5 % more than the rate is 2.5x outside the 2 %
        // checked below.
        assert!(
            wire_in > 1.05 * bps,
            "{rate}: the switch received {wire_in:.0} bit/s, not an overload"
        );
        assert!(
            err_sw.abs() <= 0.02,
            "{rate}: switch egress shaped to {wire_sw:.0} bit/s, {:+.2}% off",
            err_sw * 100.0
        );
        assert!(
            err.abs() <= 0.02,
            "{rate}: receiver got {wire:.0} bit/s, {:+.2}% off",
            err * 100.0
        );
        let s = bed.stats("s1");
        assert!(
            s.ports[1].drops.get("queue_full").copied().unwrap_or(0) > 0,
            "{rate}: overload without tail drops?"
        );
    }
}

#[test]
fn leafspine_routes_across_leaves_and_spreads_flows_over_both_spines() {
    let _g = serial();
    let bed = Bed::up(&topo("leafspine.toml"), "l");
    let hosts: Vec<(String, String)> = (1..=3)
        .flat_map(|i| (1..=2).map(move |k| (format!("h{i}{k}"), format!("10.0.{i}.{k}"))))
        .collect();
    for (a, _) in &hosts {
        for (b, ip) in &hosts {
            if a != b {
                assert!(bed.ping(a, ip), "{a} cannot ping {b} ({ip})");
            }
        }
    }
    bed.iperf_server("h31");
    let before = bed.stats("leaf1");
    // Fixed source ports (40000..=40007, one per stream): with ephemeral ones the split was a
    // lottery (8 flows fall 7:1 or worse in 7 % of draws from a fair hash, and the check below
    // failed at 52507 / 7499 packets); fixed, the same flows take the same spines every run.
    let v = bed.iperf(
        "h11",
        &[
            "-c", "10.0.3.1", "-u", "-b", "20M", "-P", "8", "-l", "1000", "-t", "3", "--cport",
            "40000",
        ],
    );
    let after = bed.stats("leaf1");
    let up = |i: usize| after.ports[i].tx_pkts - before.ports[i].tx_pkts;
    let (u1, u2) = (up(2), up(3));
    eprintln!("leaf1 uplinks carried {u1} and {u2} packets");
    assert!(
        u1 > (u1 + u2) / 8 && u2 > (u1 + u2) / 8,
        "flows not spread over both spines: {u1} / {u2}"
    );
    let streams = v["end"]["streams"].as_array().cloned().unwrap_or_default();
    assert_eq!(streams.len(), 8);
    for s in streams {
        assert_eq!(
            s["udp"]["out_of_order"].as_u64(),
            Some(0),
            "reordering within a flow: {}",
            s["udp"]
        );
    }
}

#[test]
fn killed_or_stopped_switch_leaves_no_xdp_program_and_restarts() {
    let _g = serial();
    let bed = Bed::up(&topo("single.toml"), "k");
    assert!(bed.xdp_attached("s1"), "no XDP program while running?");
    let pid = bed.pid("s1");
    dataplane::port::sys::signal(pid, libc::SIGKILL);
    let t = Instant::now();
    while dataplane::port::sys::alive(pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!bed.xdp_attached("s1"), "XDP program left after SIGKILL");
    // A new switch starts on the same interfaces and forwards.
    for round in 0..2 {
        let sock = format!("/tmp/{}-{round}.sock", bed.name);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &bed.ns("s1"), xoff(), "run", "--config"])
            .arg(topo("single.toml"))
            .args(["--switch", "s1", "--ctl", &sock])
            .spawn()
            .expect("spawn xoff run");
        let t = Instant::now();
        while dataplane::ctl::request(std::path::Path::new(&sock), &dataplane::ctl::Request::Stats)
            .is_err()
        {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "restarted switch did not come up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(bed.ping("h1", "10.0.0.2"), "no forwarding after restart");
        dataplane::port::sys::signal(child.id() as i32, libc::SIGTERM);
        let st = child.wait().expect("wait");
        assert!(st.success(), "xoff run exited with {st} on SIGTERM");
        assert!(!bed.xdp_attached("s1"), "XDP program left after SIGTERM");
    }
}

#[test]
fn malformed_frames_are_counted_by_reason_and_forwarding_continues() {
    let _g = serial();
    let bed = Bed::up(&topo("single.toml"), "m");
    let py = r#"
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
dst = bytes.fromhex(sys.argv[1].replace(":", ""))
src = bytes.fromhex("020000000099")
# runt: an ARP frame cut to 30 bytes
s.send(dst + src + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04\x00\x01" + bytes(8))
# truncated IPv4 header: 12 of 20 bytes
s.send(dst + src + b"\x08\x00" + b"\x45\x00\x00\x54\x00\x00\x40\x00\x40\x01\x00\x00")
# unknown EtherType
s.send(dst + src + b"\x12\x34" + bytes(46))
"#;
    let topo_t = dataplane::Topology::load(topo("single.toml")).expect("topology");
    let h2 = topo_t.host_mac(&topo_t.hosts[1]).to_string();
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let out = bed.run("h1", &[python, "-c", py, &h2]);
    assert!(
        out.status.success(),
        "raw send failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(200));
    let s = bed.stats("s1");
    for reason in ["runt", "truncated_ipv4", "unknown_ethertype"] {
        assert_eq!(
            s.ports[0].drops.get(reason).copied(),
            Some(1),
            "drop reason {reason}: {:?}",
            s.ports[0].drops
        );
    }
    assert!(bed.ping("h1", "10.0.0.2"), "switch stopped forwarding");
}

#[test]
fn bad_config_names_file_key_and_reason() {
    let dir = std::env::temp_dir().join(common::unique("cfg"));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let base = std::fs::read_to_string(topo("single.toml")).expect("single.toml");
    let cases = [
        (
            "unknown.toml",
            base.replace("name = \"s1\"", "name = \"s1\"\nspeed = 5"),
            "speed",
            "unknown field",
        ),
        (
            "rate0.toml",
            base.replace("rate = \"100Mbit\"", "rate = 0"),
            "switch[0].port[2].rate",
            "rate must be > 0",
        ),
        (
            "noiface.toml",
            base.replace(
                "{ name = \"p1\" }",
                "{ name = \"p1\", iface = \"nosuchif0\" }",
            ),
            "switch[0].port[0].iface",
            "does not exist",
        ),
    ];
    for (file, text, key, why) in cases {
        let path = dir.join(file);
        std::fs::write(&path, text).expect("write");
        let out = Command::new(xoff())
            .args(["run", "--config"])
            .arg(&path)
            .args(["--switch", "s1"])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{file}: accepted");
        assert!(
            err.contains(&path.display().to_string()) && err.contains(key) && err.contains(why),
            "{file}: message `{err}` lacks file, key `{key}` or `{why}`"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mmu_occupancy_and_watermarks_move_under_iperf3_load() {
    let _g = serial();
    let bed = Bed::up(&topo("single.toml"), "o");
    let idle = bed.stats("s1");
    let mmu = |s: &dataplane::stats::SwitchSnapshot| s.mmu.clone().expect("single.toml has an MMU");
    assert_eq!(mmu(&idle)["occupancy"]["lossy"].as_u64(), Some(0));
    bed.iperf_server("h3");
    let bed_ref = &bed;
    let samples = std::thread::scope(|sc| {
        let t = sc.spawn(move || {
            let mut v = Vec::new();
            for _ in 0..6 {
                std::thread::sleep(Duration::from_millis(500));
                v.push(bed_ref.stats("s1"));
            }
            v
        });
        bed_ref.iperf("h1", &["-c", "10.0.0.3", "-t", "4"]);
        t.join().expect("sampler")
    });
    let occ: Vec<u64> = samples
        .iter()
        .map(|s| mmu(s)["occupancy"]["lossy"].as_u64().unwrap_or(0))
        .collect();
    let peak: Vec<u64> = samples
        .iter()
        .map(|s| mmu(s)["peak"]["lossy"].as_u64().unwrap_or(0))
        .collect();
    eprintln!("lossy occupancy (cells) {occ:?}, peak {peak:?}");
    assert!(
        occ.iter().any(|&c| c > 0),
        "no buffer occupancy under load: {occ:?}"
    );
    assert!(
        peak.last() > Some(&0) && peak.windows(2).all(|w| w[0] <= w[1]),
        "watermark does not rise monotonically: {peak:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let after = bed.stats("s1");
    assert_eq!(
        mmu(&after)["occupancy"]["lossy"].as_u64(),
        Some(0),
        "buffer not released after the load"
    );
    assert_eq!(
        mmu(&after)["counters"]["accounting_errors"].as_u64(),
        Some(0)
    );
}

#[test]
fn two_workers_forward_and_shape_like_one() {
    let _g = serial();
    let bed = Bed::up_with(&topo("single.toml"), "w", &["--workers", "2"]);
    for (a, b) in [("h1", "10.0.0.2"), ("h2", "10.0.0.3"), ("h3", "10.0.0.1")] {
        assert!(bed.ping(a, b), "{a} cannot ping {b} with two workers");
    }
    let r = bed.tcp_mbps("h1", "h3", "10.0.0.3", 4);
    assert!(
        (90.0..=100.0).contains(&r),
        "TCP through a 100 Mbit/s port with two workers: {r:.2} Mbit/s"
    );
    // h1 (port 0, worker 0) to h3 (port 2, worker 0) stays local; h2 (port 1, worker 1) to h3
    // crosses workers.
    let r = bed.tcp_mbps("h2", "h3", "10.0.0.3", 3);
    assert!(
        (90.0..=100.0).contains(&r),
        "TCP across workers: {r:.2} Mbit/s"
    );
}

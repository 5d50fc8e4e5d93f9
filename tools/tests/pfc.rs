//! PFC on real frames: switch-to-switch pauses in `chain-pfc.toml`, decoded by tshark, and the
//! PFC watchdog against a host's pause storm. Requires root.

use crate::common;

use common::{repo, serial, Bed};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn prio3(stats: &dataplane::stats::SwitchSnapshot, port: usize) -> Value {
    let pfc = serde_json::to_value(stats.pfc.as_ref().expect("PFC configured")).unwrap();
    pfc["ports"][port][3].clone()
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

#[test]
fn downstream_switch_pauses_upstream_switch_without_loss() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-pfc.toml"), "p");
    // Capture what s1 sends toward h1 (switch ports are AF_XDP: the kernel's taps do not see
    // them, a host's interface does).
    let pcap = std::env::temp_dir().join(format!("{}.pcap", bed.name));
    let mut cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.ns("h1"),
            "tshark",
            "-q",
            "-i",
            "eth0",
            "-f",
            "ether proto 0x8808",
            "-a",
            "duration:9",
            "-w",
        ])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tshark");
    std::thread::sleep(Duration::from_millis(1500));
    bed.iperf_server("h4");
    // Priority 3 (DSCP 24) from h1 into h4's 100 Mbit/s port behind s2: 3× overload.
    bed.iperf(
        "h1",
        &[
            "-c", "10.0.0.4", "-u", "-b", "300M", "-S", "0x60", "-l", "1400", "-t", "3",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    let (s1, s2) = (bed.stats("s1"), bed.stats("s2"));
    // s2 paused s1's uplink and resumed it; s1 saw exactly those frames.
    let (tx, rx) = (prio3(&s2, 2), prio3(&s1, 2));
    eprintln!("s2 -> s1 PFC: {tx}\ns1 <- s2 PFC: {rx}");
    assert!(
        n(&tx, "xoff_sent") > 0 && n(&tx, "xon_sent") > 0,
        "s2 sent no PFC: {tx}"
    );
    assert_eq!(
        n(&tx, "xoff_sent"),
        n(&rx, "xoff_received"),
        "XOFF counts disagree"
    );
    assert_eq!(
        n(&tx, "xon_sent"),
        n(&rx, "xon_received"),
        "XON counts disagree"
    );
    // s1 held the class back while paused, and drained it after XON.
    let q = &s1.ports[2].queues[3];
    assert!(
        q.watermark_bytes > 50_000,
        "s1 did not queue while paused: {q:?}"
    );
    assert_eq!(q.depth_bytes, 0, "s1 still holds packets after XON: {q:?}");
    // Zero loss at s2: no drops of any kind, none in the AF_XDP rings.
    for p in &s2.ports {
        assert!(
            p.drops.is_empty(),
            "s2 dropped on {}: {:?}",
            p.name,
            p.drops
        );
        assert_eq!(p.xdp.lost(), 0, "s2 ring drops on {}: {:?}", p.name, p.xdp);
    }
    let _ = cap.wait();
    // tshark decodes s1's pauses toward h1 as PFC on class 3 with full and zero quanta.
    let out = common::tshark()
        .args(["-r"])
        .arg(&pcap)
        .args([
            "-T",
            "fields",
            "-e",
            "macc.opcode",
            "-e",
            "macc.cbfc.enbv",
            "-e",
            "macc.cbfc.pause_time.c3",
        ])
        .output()
        .expect("tshark -r");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    eprintln!("{} PFC frames captured at h1", lines.len());
    assert!(
        lines.contains(&"0x0101\t0x0008\t65535"),
        "no decoded XOFF: {lines:?}"
    );
    assert!(
        lines.iter().all(|l| l.starts_with("0x0101\t0x0008\t")),
        "unexpected frames: {lines:?}"
    );
    let _ = std::fs::remove_file(&pcap);
}

const WD_TOPO: &str = r#"name = "wd"
[[switch]]
name = "s1"
defaults = { rate = "1Gbit", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }]
pfc = { enable_mask = 8 }
watchdog = { detection_time_ps = 200000000000, restoration_time_ps = 200000000000, action = "drop" }
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

#[test]
fn watchdog_detects_a_pause_storm_drops_and_restores() {
    let _g = serial();
    let bed = Bed::up_text(WD_TOPO, "w");
    // h1 floods its switch port with XOFF for priority 3 every 5 ms for 1.2 s.
    let storm = r#"
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
f = bytes.fromhex("0180c2000001") + s.getsockname()[4] + b"\x88\x08" + struct.pack(">HH", 0x0101, 8) + struct.pack(">8H", 0, 0, 0, 0xffff, 0, 0, 0, 0)
f += bytes(60 - len(f))
end = time.time() + 1.2
while time.time() < end:
    s.send(f)
    time.sleep(0.005)
"#;
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let mut storm_proc = Command::new("ip")
        .args(["netns", "exec", &bed.ns("h1"), python, "-c", storm])
        .spawn()
        .expect("storm");
    // Priority-3 traffic toward the paused port, so the stalled queue holds packets.
    let mut flow = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.ns("h2"),
            "ping",
            "-Q",
            "0x60",
            "-i",
            "0.01",
            "-c",
            "150",
            "10.0.0.1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("ping");
    let t0 = Instant::now();
    let wd = |s: &dataplane::stats::SwitchSnapshot| {
        s.pfc
            .as_ref()
            .map(|p| serde_json::to_value(p).unwrap()["watchdog"].clone())
            .unwrap_or(Value::Null)
    };
    let detected = loop {
        let s = bed.stats("s1");
        if n(&wd(&s), "storms") > 0 {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_millis(1000),
            "no storm detected: {}",
            wd(&s)
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("storm detected after {detected:?}");
    // Detection time 200 ms; the stall starts once the first paused packet waits.
    assert!(
        detected <= Duration::from_millis(400) + Duration::from_millis(50),
        "detected after {detected:?}"
    );
    let _ = storm_proc.wait();
    let s = bed.stats("s1");
    assert!(
        s.ports[0].drops.get("pfc_watchdog").copied().unwrap_or(0) > 0,
        "drop action not applied: {:?}",
        s.ports[0].drops
    );
    // Restoration 200 ms after the last pause frame.
    let t1 = Instant::now();
    loop {
        let s = bed.stats("s1");
        if n(&wd(&s), "restorations") > 0 {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_millis(1000),
            "queue not restored: {}",
            wd(&s)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = flow.wait();
    assert!(
        bed.ping("h2", "10.0.0.1"),
        "no forwarding after restoration"
    );
}

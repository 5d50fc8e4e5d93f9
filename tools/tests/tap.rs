//! `xoff ctl tap` (issue 22 item 2) on real frames: tap h3's port of `single.toml` while ping
//! and iperf3 run through it; `tshark -r` reads the pcap and its frames match the port
//! counters over the tap window exactly. Requires root.
//!
//! The window: the switch's worker opens it at its first look at the port after the tap is
//! attached and closes it when the client half-closes (`--duration`) or at the `--count`th
//! frame, recording the port's `rx_pkts`/`tx_pkts` at both edges. It is those counters' only
//! writer, so `rx_end − rx_start` is exactly the frames received in the window
//! (`dataplane::tap`). The test checks: frames in the pcap = `captured`; `captured +
//! over_budget` = frames seen = the counters' growth over the window, per direction; the
//! edges lie between two `xoff ctl stats` taken before and after (they are real counter
//! values, not the tap's own count); every timestamp lies inside the window.

use crate::common;

use common::{repo, serial, xoff, Bed};
use dataplane::tap::{TapDir, TapSummary};
use std::process::{Command, Output};
use std::time::Duration;

/// Runs `xoff ctl tap` on `s1` of `bed` and returns its summary.
fn tap(bed: &Bed, args: &[&str], out: &std::path::Path) -> TapSummary {
    let o: Output = Command::new(xoff())
        .args(["ctl", "--testbed", &bed.name, "--switch", "s1", "tap"])
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .output()
        .expect("run xoff ctl tap");
    assert!(
        o.status.success(),
        "xoff ctl tap: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&o.stderr).trim());
    serde_json::from_slice(&o.stdout).expect("summary JSON")
}

/// One line per frame of `pcap`: the fields asked for, tab-separated, as tshark prints them.
fn tshark(pcap: &std::path::Path, filter: Option<&str>, fields: &[&str]) -> Vec<String> {
    let mut c = common::tshark();
    c.arg("-r").arg(pcap).args(["-T", "fields"]);
    if let Some(f) = filter {
        c.args(["-Y", f]);
    }
    for f in fields {
        c.args(["-e", f]);
    }
    let o = c.output().expect("tshark (Debian package tshark)");
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The counters' growth over the window equals what the tap saw, and the tap's frames are
/// in the file.
fn check_exact(s: &TapSummary, pcap: &std::path::Path) -> usize {
    assert!(s.complete, "{s:?}");
    // Every frame of a tapped direction in the window was seen; an untapped one none.
    let (rx, tx) = match s.dir {
        TapDir::Rx => (true, false),
        TapDir::Tx => (false, true),
        TapDir::Both => (true, true),
    };
    let grew = |on: bool, a: u64, b: u64| if on { b - a } else { 0 };
    assert_eq!(s.seen_rx, grew(rx, s.rx_start, s.rx_end), "rx: {s:?}");
    assert_eq!(s.seen_tx, grew(tx, s.tx_start, s.tx_end), "tx: {s:?}");
    assert_eq!(s.captured + s.over_budget, s.seen_rx + s.seen_tx, "{s:?}");
    let frames = tshark(pcap, None, &["frame.time_epoch"]);
    assert_eq!(
        frames.len() as u64,
        s.captured,
        "frames in the pcap vs captured"
    );
    let (lo, hi) = (s.start_unix_ns as f64 / 1e9, s.end_unix_ns as f64 / 1e9);
    for t in &frames {
        let t: f64 = t.trim().parse().expect("epoch");
        // tshark prints 9 decimals; allow its rounding.
        assert!(t >= lo - 1e-6 && t <= hi + 1e-6, "{t} outside {lo}..{hi}");
    }
    frames.len()
}

#[test]
fn tap_during_ping_and_iperf3_matches_port_counters() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/single.toml"), "tap");
    assert!(bed.ping("h1", "10.0.0.3"), "h1 reaches h3 before the tap");
    let h3_mac = bed.mac("h3");
    let dir = std::env::temp_dir().join(common::unique("tap"));
    std::fs::create_dir_all(&dir).unwrap();

    // Traffic through p3 (h3's port, 100 Mbit/s) for the whole test (12 s; the taps take ~3): iperf3 h1 -> h3 and a
    // ping every 50 ms.
    bed.iperf_server("h3");
    let iperf = {
        let ns = bed.ns("h1");
        std::thread::spawn(move || {
            let o = Command::new("ip")
                .args([
                    "netns", "exec", &ns, "iperf3", "--json", "-c", "10.0.0.3", "-t", "12",
                ])
                .output()
                .expect("iperf3");
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("iperf3 JSON");
            v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
        })
    };
    let ping = {
        let ns = bed.ns("h1");
        std::thread::spawn(move || {
            Command::new("ip")
                .args(["netns", "exec", &ns, "ping", "-c", "240", "-i", "0.05"])
                .arg("10.0.0.3")
                .output()
                .expect("ping")
        })
    };
    std::thread::sleep(Duration::from_millis(700));

    // The taps, back to back while the traffic runs; tshark reads the files afterwards (it
    // takes seconds of this shared CPU per file).
    // 1. Both directions for 1.5 s with the default budget, between two `ctl stats`.
    let both = dir.join("both.pcap");
    let before = bed.stats("s1").ports[2].clone();
    let s1 = tap(
        &bed,
        &["--port", "p3", "--dir", "both", "--duration", "1.5"],
        &both,
    );
    let after = bed.stats("s1").ports[2].clone();
    // 2. A budget of 8 frames: the excess is counted, the identity still exact.
    let small = dir.join("budget.pcap");
    let s2 = tap(
        &bed,
        &[
            "--port",
            "p3",
            "--dir",
            "tx",
            "--budget",
            "8",
            "--duration",
            "0.5",
        ],
        &small,
    );
    // 3. --count closes the window at exactly that many frames.
    let counted = dir.join("count.pcap");
    let s3 = tap(
        &bed,
        &["--port", "p3", "--dir", "rx", "--count", "300"],
        &counted,
    );
    let mbps = iperf.join().unwrap() / 1e6;
    let pinged = ping.join().unwrap();

    let n = check_exact(&s1, &both);
    assert!(
        before.rx_pkts <= s1.rx_start && s1.rx_end <= after.rx_pkts,
        "rx edges {}..{} inside the stats {}..{}",
        s1.rx_start,
        s1.rx_end,
        before.rx_pkts,
        after.rx_pkts
    );
    assert!(before.tx_pkts <= s1.tx_start && s1.tx_end <= after.tx_pkts);
    assert!(s1.seen_tx > 1000, "iperf3 data left p3 in 1.5 s: {s1:?}");
    assert!(s1.seen_rx > 100, "ACKs and echo replies came in: {s1:?}");
    if s1.over_budget == 0 {
        // Each direction by MAC: frames from h3 are p3's received ones.
        let from_h3 = tshark(&both, Some(&format!("eth.src == {h3_mac}")), &["frame.len"]);
        assert_eq!(from_h3.len() as u64, s1.seen_rx, "rx frames in the pcap");
        assert_eq!(n as u64 - s1.seen_rx, s1.seen_tx, "tx frames in the pcap");
    }
    let icmp = tshark(&both, Some("icmp.type == 8"), &["frame.len"]).len();
    let replies = tshark(&both, Some("icmp.type == 0"), &["frame.len"]).len();
    let tcp = tshark(&both, Some("tcp.dstport == 5201"), &["frame.len"]).len();
    assert!(
        icmp >= 20 && replies >= 20,
        "pings every 50 ms over 1.5 s: {icmp} requests, {replies} replies"
    );
    assert!(tcp > 1000, "iperf3 segments: {tcp}");
    eprintln!(
        "tap both: {n} frames in pcap; rx {}..{} tx {}..{}; {} over budget; {icmp} echo requests, {replies} replies, {tcp} iperf3 segments",
        s1.rx_start, s1.rx_end, s1.tx_start, s1.tx_end, s1.over_budget
    );

    let n = check_exact(&s2, &small);
    assert!(
        s2.over_budget > 0,
        "8 frames of budget overflow at 100 Mbit/s: {s2:?}"
    );
    eprintln!(
        "tap budget 8: {n} frames in pcap, {} over budget, {} seen",
        s2.over_budget, s2.seen_tx
    );

    let n = check_exact(&s3, &counted);
    assert_eq!(s3.seen_rx, 300, "{s3:?}");
    eprintln!(
        "tap count 300: {n} frames in pcap, {} over budget",
        s3.over_budget
    );

    assert!(pinged.status.success(), "ping lost everything");
    // Forwarding did not stop: p3 is shaped to 100 Mbit/s.
    assert!(
        mbps > 60.0,
        "iperf3 through the tapped port: {mbps:.1} Mbit/s"
    );
    eprintln!("iperf3 during the taps: {mbps:.1} Mbit/s");
    let _ = std::fs::remove_dir_all(&dir);
}

//! Pyrrha on real frames (`deploy/topologies/chain-pyrrha.toml`): the switch whose port is
//! congested nominates itself a root and PAUSEs it upstream; the upstream isolates the
//! packets bound for that root in an isolation queue and holds only that queue (§4), so a
//! flow sharing the uplink but not the root keeps its rate, and nothing is lost at the root.
//! Requires root.

mod common;

use common::{repo, serial, Bed};
use serde_json::Value;

fn pyrrha(s: &dataplane::stats::SwitchSnapshot) -> Value {
    serde_json::to_value(s.pfc.as_ref().expect("scheme stats")).unwrap()["pyrrha"].clone()
}

/// (offered, received) bit/s of a UDP iperf3 run: what the sender managed to send, and what
/// arrived.
fn rates(v: &Value) -> (f64, f64) {
    let s = &v["end"]["sum"];
    let sent = s["bits_per_second"].as_f64().unwrap_or(0.0);
    (
        sent,
        sent * (1.0 - s["lost_percent"].as_f64().unwrap_or(100.0) / 100.0),
    )
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

#[test]
fn root_is_isolated_upstream_and_the_flow_sharing_the_uplink_keeps_its_rate() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-pyrrha.toml"), "py");
    bed.iperf_server("h4");
    bed.iperf_server("h3");
    // A: h1 -> h4, 3x h4's 50 Mbit/s. B: h2 -> h3, shares s1's 200 Mbit/s uplink with A.
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(|| {
            bed.iperf(
                "h1",
                &[
                    "-c", "10.0.0.4", "-u", "-b", "150M", "-l", "1400", "-t", "3",
                ],
            )
        });
        let b = bed.iperf(
            "h2",
            &[
                "-c", "10.0.0.3", "-u", "-b", "150M", "-l", "1400", "-t", "3",
            ],
        );
        (a.join().expect("iperf A"), b)
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (s1, s2) = (bed.stats("s1"), bed.stats("s2"));
    let (p1, p2) = (pyrrha(&s1), pyrrha(&s2));
    let (up, down) = (&p1["ports"][2], &p2["ports"][2]);
    let ((_, ra), (ob, rb)) = (rates(&a), rates(&b));
    eprintln!(
        "A received {:.1} Mbit/s; B offered {:.1}, received {:.1} Mbit/s\ns1 uplink: {up}\ns2 toward s1: {down}",
        ra / 1e6,
        ob / 1e6,
        rb / 1e6
    );
    for p in &s1.ports {
        eprintln!(
            "s1 {}: drops {:?}, queues (enq, drops) {:?}",
            p.name,
            p.drops,
            p.queues
                .iter()
                .map(|q| (q.enq_pkts, q.drops))
                .collect::<Vec<_>>()
        );
    }
    // s2 PAUSEd its root at s1 and RESUMEd it; s1 got every signal.
    assert!(n(&down["pauses_sent"]) > 0, "s2 sent no PAUSE: {down}");
    assert_eq!(n(&down["pauses_sent"]), n(&up["pauses_received"]));
    assert_eq!(n(&down["resumes_sent"]), n(&up["resumes_received"]));
    // s1 isolated the root's packets in an IQ rather than holding its shared queue.
    assert!(n(&up["iqs_assigned"]) > 0, "no isolation queue at s1: {up}");
    // Nothing lost at the root's switch: the root's traffic waited at s1.
    for p in &s2.ports {
        assert!(
            p.drops.is_empty(),
            "s2 dropped on {}: {:?}",
            p.name,
            p.drops
        );
        assert_eq!(p.xdp.lost(), 0, "s2 ring drops on {}", p.name);
    }
    // A is held to its bottleneck; B loses at most 20 % of what its sender sent, counted at
    // the switches (frames s1 took from h2, frames s2 handed to h3): iperf3's own count also
    // has the receiving host's socket drops when a starved iperf3 server falls behind (seen:
    // 58 % "lost" with 97 % delivered to h3's interface).
    assert!(ra < 60e6, "A not held to h4's 50 Mbit/s: {ra}");
    assert!(ob > 50e6, "B's sender only sent {ob} bit/s: no test");
    let (b_in, b_out) = (s1.ports[1].rx_pkts, s2.ports[0].tx_pkts);
    eprintln!("B through the switches: {b_out} of {b_in} frames; iperf3 received {rb} bit/s");
    assert!(
        b_out as f64 >= 0.8 * b_in as f64,
        "B lost its rate at the switches: {b_out} of {b_in} frames"
    );
}

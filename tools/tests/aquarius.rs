//! Aquarius on real frames (`deploy/topologies/chain-aquarius.toml`): the downstream switch
//! sends FLOW PAUSE for the flow that congests it; the upstream moves that flow, which shares
//! a forced uplink queue with an uncongested one, into a reserved queue and pauses only that
//! (§3.3 opportunistic re-assigning), so the other flow keeps the uplink's remaining rate.
//! Requires root.

mod common;

use common::{repo, serial, Bed};
use serde_json::Value;

fn aquarius(s: &dataplane::stats::SwitchSnapshot) -> Value {
    serde_json::to_value(s.pfc.as_ref().expect("scheme stats")).unwrap()["aquarius"].clone()
}

/// (offered, received) bit/s of a UDP iperf3 run: what the sender managed to send (a 2-core
/// machine may not give it the CPU for all it was asked), and what arrived.
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
fn congested_flow_moves_to_rsvq_and_the_flow_sharing_its_queue_keeps_its_rate() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-aquarius.toml"), "aq");
    bed.iperf_server("h4");
    bed.iperf_server("h3");
    // A: h1 -> h4, 3x h4's 50 Mbit/s. B: h2 -> h3, shares s1's 200 Mbit/s uplink queue with A.
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
    let (q1, q2) = (aquarius(&s1), aquarius(&s2));
    let (up, down) = (&q1["ports"][2], &q2["ports"][2]);
    let ((_, ra), (ob, rb)) = (rates(&a), rates(&b));
    eprintln!(
        "A received {:.1} Mbit/s; B offered {:.1}, received {:.1} Mbit/s\ns1 uplink: {up}\ns2 toward s1: {down}",
        ra / 1e6,
        ob / 1e6,
        rb / 1e6
    );
    // s2 paused A by flow (Q_high or contribution) and resumed it; s1 got every signal.
    let sent = n(&down["pauses_sent_qhigh"]) + n(&down["pauses_sent_contribution"]);
    assert!(sent > 0, "s2 sent no FLOW PAUSE: {down}");
    assert_eq!(
        sent,
        n(&up["pauses_received"]),
        "PAUSEs lost between s2 and s1"
    );
    assert_eq!(n(&down["resumes_sent"]), n(&up["resumes_received"]));
    // s1 moved A out of the queue it shared with B into a reserved queue.
    assert!(n(&up["rsv_allocations"]) > 0, "no rsvQ: {up}");
    assert!(n(&up["flows_reassigned"]) > 0, "no flow moved: {up}");
    // A is held to its bottleneck; B, offered below what A leaves of the uplink (about
    // 150 Mbit/s), loses at most 20 % of what its sender managed to send. A queue pause
    // instead would stop B with A.
    // Counted at the switches (frames s1 took from h2, frames s2 handed to h3): iperf3's
    // own count also has the receiving host's socket drops when a starved server falls behind.
    assert!(ra < 60e6, "A not held to h4's 50 Mbit/s: {ra}");
    assert!(ob > 50e6, "B's sender only sent {ob} bit/s: no test");
    let (b_in, b_out) = (s1.ports[1].rx_pkts, s2.ports[0].tx_pkts);
    eprintln!("B through the switches: {b_out} of {b_in} frames; iperf3 received {rb} bit/s");
    assert!(
        b_out as f64 >= 0.8 * b_in as f64,
        "B lost its rate at the switches: {b_out} of {b_in} frames"
    );
}

//! Aquarius on real frames (`deploy/topologies/chain-aquarius.toml`): the downstream switch
//! sends FLOW PAUSE for the flow that congests it; the upstream moves that flow, which shares
//! a forced uplink queue with an uncongested one, into a reserved queue and pauses only that
//! (§3.3 opportunistic re-assigning), so the other flow keeps the uplink's remaining rate.
//! Requires root.

use crate::common;

use common::{n, repo, serial, Bed};
use serde_json::Value;

fn aquarius(s: &dataplane::stats::SwitchSnapshot) -> Value {
    common::scheme_stats(s, "aquarius")
}

#[test]
fn congested_flow_moves_to_rsvq_and_the_flow_sharing_its_queue_keeps_its_rate() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-aquarius.toml"), "aq");
    let run = bed.chain_two_flows();
    let (q1, q2) = (aquarius(&run.s1), aquarius(&run.s2));
    let (up, down) = (&q1["ports"][2], &q2["ports"][2]);
    eprintln!("s1 uplink: {up}\ns2 toward s1: {down}");
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
    // B, offered below what A leaves of the uplink (about 150 Mbit/s), keeps its rate; a
    // queue pause instead would stop B with A.
    run.assert_victim_keeps_its_rate();
}

//! Pyrrha on real frames (`deploy/topologies/chain-pyrrha.toml`): the switch whose port is
//! congested nominates itself a root and PAUSEs it upstream; the upstream isolates the
//! packets bound for that root in an isolation queue and holds only that queue (§4), so a
//! flow sharing the uplink but not the root keeps its rate, and nothing is lost at the root.
//! Requires root.

use crate::common;

use common::{n, repo, serial, Bed};
use serde_json::Value;

fn pyrrha(s: &dataplane::stats::SwitchSnapshot) -> Value {
    common::scheme_stats(s, "pyrrha")
}

#[test]
fn root_is_isolated_upstream_and_the_flow_sharing_the_uplink_keeps_its_rate() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-pyrrha.toml"), "py");
    let run = bed.chain_two_flows();
    let (p1, p2) = (pyrrha(&run.s1), pyrrha(&run.s2));
    let (up, down) = (&p1["ports"][2], &p2["ports"][2]);
    eprintln!("s1 uplink: {up}\ns2 toward s1: {down}");
    // s2 PAUSEd its root at s1 and RESUMEd it; s1 got every signal.
    assert!(n(&down["pauses_sent"]) > 0, "s2 sent no PAUSE: {down}");
    assert_eq!(n(&down["pauses_sent"]), n(&up["pauses_received"]));
    assert_eq!(n(&down["resumes_sent"]), n(&up["resumes_received"]));
    // s1 isolated the root's packets in an IQ rather than holding its shared queue.
    assert!(n(&up["iqs_assigned"]) > 0, "no isolation queue at s1: {up}");
    // Nothing lost at the root's switch: the root's traffic waited at s1.
    for p in &run.s2.ports {
        assert!(
            p.drops.is_empty(),
            "s2 dropped on {}: {:?}",
            p.name,
            p.drops
        );
        assert_eq!(p.xdp.lost(), 0, "s2 ring drops on {}", p.name);
    }
    run.assert_victim_keeps_its_rate();
}

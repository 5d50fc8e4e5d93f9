//! Proteus on real frames (issue 18), `leafspine.toml` with `lb = "proteus"` at every switch.
//! Requires root.
//!
//! * Full-size TCP crosses Proteus switches: the version-2 data shim (16 B) rides inside
//!   1514-byte frames on the switch-to-switch veths, which `xoff testbed` gives that much MTU
//!   room (before, a veth dropped every shimmed full-size frame: 0.0 Mbit/s).
//! * With PFC on priority 3, a long PFC pause (XOFF frames from the spine, refreshed for 1.5 s)
//!   on the spine path an `xoff host` flow took should move the flow's new packets to the
//!   other spine (Algorithm 2 at leaf1). Ignored: it does not; see the test.

use crate::common;

use common::{read_output, repo, serial, start_hosts, unique, unix_ns, Bed};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// The PFC priority (DSCP 24) the flow and the pause use.
const PRIO: u8 = 3;

/// `leafspine.toml` with Proteus and PFC (a DSH buffer, lossless priority 3) on every switch.
fn topology() -> String {
    let text = std::fs::read_to_string(repo().join("deploy/topologies/leafspine.toml"))
        .expect("leafspine.toml");
    let text = text.replace(
        "[[switch]]\n",
        "[[switch]]\nlb = \"proteus\"\npfc = { enable_mask = 8 }\nbuffer = { buffer_bytes = \
         8000000, lossless_pgs = [3], headroom_mode = \"dsh\" }\n",
    );
    assert_eq!(text.matches("lb = \"proteus\"").count(), 5, "five switches");
    text
}

/// Sends a PFC XOFF for `PRIO` (quanta 0xFFFF, 33.6 ms at 1 Gbit/s) out of `iface` every 5 ms
/// for `secs`: the spine's side of the link pausing the leaf's uplink queue.
const PAUSER: &str = r#"
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
q = [0] * 8
q[int(sys.argv[3])] = 0xffff
f = bytes.fromhex("0180c2000001") + s.getsockname()[4] + b"\x88\x08" + struct.pack(">HH", 0x0101, 1 << int(sys.argv[3])) + struct.pack(">8H", *q)
f += bytes(60 - len(f))
end = time.time() + float(sys.argv[2])
while time.time() < end:
    s.send(f)
    time.sleep(0.005)
"#;

fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn sleep_until_ns(t: u128) {
    let now = unix_ns();
    if t > now {
        std::thread::sleep(Duration::from_nanos((t - now) as u64));
    }
}

/// Bytes leaf1 sent on priority 3's queue of its uplinks up1 and up2 (ports 2 and 3).
fn uplink_bytes(s: &dataplane::stats::SwitchSnapshot) -> [u64; 2] {
    [2, 3].map(|p| s.ports[p].queues[usize::from(PRIO)].deq_bytes)
}

fn proteus_stats(s: &dataplane::stats::SwitchSnapshot) -> Value {
    let set = s.pfc.as_ref().expect("scheme stats");
    serde_json::to_value(&set.pipes()[0].proteus).unwrap()
}

#[test]
fn full_size_tcp_crosses_proteus_switches() {
    let _g = serial();
    let text = std::fs::read_to_string(repo().join("deploy/topologies/leafspine.toml"))
        .expect("leafspine.toml")
        .replace("[[switch]]\n", "[[switch]]\nlb = \"proteus\"\n");
    let bed = Bed::up_text(&text, "pt");
    // Default MSS: 1514-byte frames, 1530 with the shim between switches.
    let mbps = bed.tcp_mbps("h11", "h21", "10.0.2.1", 3);
    let leaf1 = bed.stats("leaf1");
    let routed = proteus_stats(&leaf1)["routed"].as_u64().unwrap_or(0);
    eprintln!("iperf3 TCP h11 -> h21 through Proteus: {mbps:.1} Mbit/s; leaf1 routed {routed}");
    assert!(
        routed > 10_000,
        "leaf1 did not route the flow with Proteus: {routed}"
    );
    // Measured 86-383 Mbit/s across five AF_XDP switches on 2 shared cores (ECMP in the same
    // setup: 512); 0.0 when the veths dropped shimmed frames. The bound separates the two.
    assert!(
        mbps > 20.0,
        "full-size TCP through Proteus: {mbps:.1} Mbit/s"
    );
}

/// Measured: before the pause the flow sent 15.9 MB over up1 in 1 s; during it, 0 B over
/// either uplink. leaf1 received 202 XOFF on up1 and Algorithm 2 rerouted nothing
/// (`hop_reroutes` 0): the paused queue stays short because leaf1's MMU PFC-pauses the sending
/// host once the queue reaches XOFF (the host was paused 985 ms), so the predicted minimum
/// queuing delay `t_qd` (queue bytes / line rate, `loadbal::proteus::hop`) stays below the
/// packets' tolerable delay `t_td`, and they wait out a pause of any length.
///
/// Tried (not landed): `t_qd` plus the pause's age as arrivals see it (better late than never,
/// §III-C). On real frames the flow then moved to the other spine at its full rate in 6 of 7
/// runs (21-29 MB/s during the pause; reordered 0-89 packets with 0-36 held behind the pause).
/// In virtual time it broke the paper's Fig. 4 case (`xoff repro proteus`): f1's FCT 979 ->
/// 1583 us, both spines paused > 500 us, Proteus 13 % slower than DRILL instead of 34 % faster.
/// Left for issue 18.
///
/// When this runs, the checks are: the XOFF arrived, Proteus moved the flow, the other spine
/// carries it at a rate comparable to before. Reordering is printed, not asserted: packets held
/// behind the pause are necessarily overtaken by later ones on the other spine.
///
/// Since issue 18's order rule (session 13: a known flow moves, by Algorithm 1 or 2, only once
/// its previous packet has left leaf1 and L3 has confirmed it arrived) this flow cannot move by
/// design: its packets are queued behind the pause, so every move would overtake them, and the
/// issue's "new packets take the other spine" and "no reordering" cannot both hold for a flow
/// with packets held on the paused path. What can hold, and is tested at the leaf on frames
/// (`dataplane/tests/lb_fidelity.rs`, `a_pause_on_the_chosen_uplink_moves_the_flow_to_the_other_spine`
/// and `a_pause_does_not_move_a_flow_whose_last_packet_is_unconfirmed`): a flow whose last
/// packet was confirmed before the pause moves on its next packet, in order. A real-frame
/// version needs an ON/OFF flow (a gap of more than a feedback period before the pause); not
/// written.
#[test]
#[ignore = "the flow's packets are held behind the pause, so no move keeps order (see the doc)"]
fn a_long_pfc_pause_on_the_flows_spine_moves_its_new_packets_to_the_other_spine() {
    let _g = serial();
    let text = topology();
    let topo_path = std::env::temp_dir().join(format!("{}.toml", unique("prtopo")));
    std::fs::write(&topo_path, &text).expect("topology");
    let bed = Bed::up(&topo_path, "pr");
    assert!(bed.ping("h11", "10.0.2.1"), "h11 reaches h21");
    let t = dataplane::Topology::parse(&text, &topo_path).expect("topology");
    let idx = |n: &str| t.hosts.iter().position(|h| h.name == n).expect("host");
    let (src, dst) = (idx("h11"), idx("h21"));
    let dir = std::env::temp_dir().join(unique("prout"));
    std::fs::create_dir_all(&dir).expect("output dir");
    // One long flow (it does not finish within the run).
    let sched = dir.join("schedule.csv");
    std::fs::write(
        &sched,
        format!("id,src,dst,size,start_ps,prio\n0,{src},{dst},2000000000,0,{PRIO}\n"),
    )
    .expect("schedule");
    let start_at = unix_ns() + 1_500_000_000;
    let mut kids = start_hosts(
        &bed,
        &topo_path,
        &["h11", "h21"],
        &sched,
        &dir,
        start_at,
        &["--run", "6s"],
    );
    // The path the flow is on: leaf1's uplink that carried most of it from 1 s to 1.5 s
    // (Algorithm 1 may move it between the spines as their measured delays change).
    sleep_until_ns(start_at + 1_000_000_000);
    let a = bed.stats("leaf1");
    sleep_until_ns(start_at + 1_500_000_000);
    let b = bed.stats("leaf1");
    let before = [0, 1].map(|i| uplink_bytes(&b)[i] - uplink_bytes(&a)[i]);
    let used = usize::from(before[1] > before[0]);
    let other = 1 - used;
    eprintln!("before the pause, leaf1 up1/up2 sent {before:?} B of the flow");
    assert!(
        before[used] > 500_000,
        "the flow did not run before the pause: {before:?}"
    );
    // The spine behind that uplink pauses it: XOFF out of its port toward leaf1 for 1.5 s.
    let spine = ["spine1", "spine2"][used];
    let mut pauser = Command::new("ip")
        .args(["netns", "exec", &bed.ns(spine), python(), "-c", PAUSER])
        .args(["l1", "1.5", &PRIO.to_string()])
        .spawn()
        .expect("pauser");
    // During the pause (from 0.2 s into it to 1.2 s): the flow goes on over the other spine.
    sleep_until_ns(start_at + 1_700_000_000);
    let c = bed.stats("leaf1");
    sleep_until_ns(start_at + 2_700_000_000);
    let d = bed.stats("leaf1");
    let during = [0, 1].map(|i| uplink_bytes(&d)[i] - uplink_bytes(&c)[i]);
    // Packets held in the paused queue (they leave when the pause ends).
    let held = d.ports[2 + used].queues[usize::from(PRIO)].depth_pkts;
    let _ = pauser.wait();
    eprintln!(
        "during the pause, leaf1 up1/up2 sent {during:?} B of the flow; {held} packets held \
         behind the pause"
    );
    let pr = proteus_stats(&d);
    let pfc_rx = d
        .pfc
        .as_ref()
        .unwrap()
        .pfc_total(2 + used, dataplane::scheme::pfc::PfcCount::XoffReceived);
    eprintln!("leaf1 proteus {pr}; XOFF received on the paused uplink {pfc_rx}");
    // Wait for the hosts and read the receiver's view.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    for c in &mut kids.0 {
        while matches!(c.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let rx = read_output(&dir, "h21");
    let tx = read_output(&dir, "h11");
    drop(kids);
    drop(bed);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&topo_path);
    let r = &rx["rx"][0];
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    eprintln!(
        "receiver: {} packets, gaps {}, reordered {}, recovered {}, duplicates {}; sender: {}",
        n(r, "rx_pkts"),
        n(r, "gaps"),
        n(r, "reordered"),
        n(r, "recovered"),
        n(r, "duplicates"),
        tx["tx"][0]
    );
    assert!(pfc_rx > 0, "leaf1 received no XOFF on the paused uplink");
    assert!(
        n(&pr, "hop_reroutes") + n(&pr, "source_reroutes") > 0,
        "Proteus moved nothing: {pr}"
    );
    // New packets took the other spine, at a rate comparable to before the pause.
    assert!(
        during[other] > 9 * during[used],
        "the flow stayed on the paused path: {during:?}"
    );
    assert!(
        during[other] * 2 > before[used],
        "the flow lost its rate on the other spine: {during:?} vs {before:?} before"
    );
    eprintln!(
        "reordered {} with {held} held behind the pause",
        n(r, "reordered")
    );
}

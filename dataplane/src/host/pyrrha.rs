//! A NIC that honours Pyrrha's PAUSE per congestion root (Pyrrha §4.4 "Cooperation on
//! end-hosts": "Pyrrha can perform better if end-hosts can respond to PAUSE (or RESUME and
//! MERGE) frames"; App. B: Pyrrha "sends congestion notifications to the connected source
//! hosts. Then, senders can send other flows that do not pass the imbalanced ports").
//!
//! The NIC is one more Pyrrha upstream, one hop before its first switch (the ToR): it runs
//! the decision logic of a switch port, [`flowctl::Pyrrha`] with a single port (its uplink),
//! on its own [`NicQueues`](super::nicq::NicQueues): queue 0 is the OQ, queues 1.. are IQs.
//!
//! * **Path.** A frame's onward path is computed as the switches compute it
//!   ([`PathModel::from_host`]: the ToR's ECMP, then every switch after it, from the topology
//!   and their seeds); `hops[k]` is the egress port `k` switch hops on, so a PAUSE(root, k)
//!   from the ToR names the frames whose path has `root` at `hops[k]` (the ToR's own OQ root
//!   arrives with k = 1).
//! * **Holding.** PAUSE / RESUME / MERGE update the root table ([`flowctl::Pyrrha::on_pause`],
//!   `on_resume`, `on_merge`: merging, soft-merging and the loop guard included); a frame
//!   (the stack: a flow) whose path crosses a paused root goes to the IQ of its roots, which
//!   is paused; every other one to the OQ. The IQ pauses come back as queue commands and set
//!   the NIC queues' paused bits, so the round-robin service skips them.
//! * **Never upstream.** Nothing is upstream of a NIC: it never nominates itself a root and
//!   sends no signal.
//!
//! Pure: the caller passes the time and moves frames or flows between queues.

use crate::scheme::pyrrha::path::{OnwardPath, PathModel};
use flowctl::pyrrha::wire::{is_pyrrha_type, Frame, PyrrhaRepr};
use flowctl::pyrrha::{Choice, Msg, PyrrhaConfig, PyrrhaPort};
use std::sync::Arc;

/// Where a NIC is in the network, for [`NicPyrrha::new`].
#[derive(Debug, Clone)]
pub struct PyrrhaNicConfig {
    /// The network model the switches' path calculation reads.
    pub model: Arc<PathModel>,
    /// Topology index of the switch the NIC is linked to.
    pub tor: u16,
    /// NIC queues (1..=128): the OQ and `queues - 1` IQs.
    pub queues: usize,
}

/// Pyrrha's state at a NIC.
#[derive(Debug)]
pub struct NicPyrrha {
    model: Arc<PathModel>,
    tor: u16,
    pyrrha: flowctl::Pyrrha,
    path: OnwardPath,
    /// Pyrrha signal frames honoured, and the PAUSEs, RESUMEs and MERGEs among them.
    pub signals_rx: u64,
    pub pauses_rx: u64,
    pub resumes_rx: u64,
    pub merges_rx: u64,
}

/// The only port of the NIC's Pyrrha (its uplink).
const UPLINK: usize = 0;
/// The NIC's OQ.
pub const OQ: u8 = 0;

impl NicPyrrha {
    pub fn new(c: &PyrrhaNicConfig) -> Self {
        let queues = c.queues.clamp(1, super::nicq::MAX_QUEUES);
        let port = PyrrhaPort {
            // Never read: a NIC has no upstream to pause.
            bdp_bytes: 1,
            iqs: (1..queues).map(|q| q as u8).collect(),
            queues,
        };
        let cfg = PyrrhaConfig {
            max_iqs: queues - 1,
            timeline: 0,
            ..PyrrhaConfig::default()
        };
        // The switch id no switch has (`HOST_NIC`): the loop guard never fires on a NIC.
        let pyrrha =
            flowctl::Pyrrha::new(cfg, crate::scheme::pyrrha::path::HOST_NIC.switch, &[port])
                .expect("one port of at most 128 queues, default thresholds");
        NicPyrrha {
            model: c.model.clone(),
            tor: c.tor,
            pyrrha,
            path: OnwardPath::default(),
            signals_rx: 0,
            pauses_rx: 0,
            resumes_rx: 0,
            merges_rx: 0,
        }
    }

    /// The NIC queue of a frame to `dst` (IPv4, host order) whose unseeded ECMP hash is `h0`
    /// (`scheme::pyrrha::path::flow_hash` of its 5-tuple): an IQ if its path crosses a
    /// known root, else the OQ. May pause or assign an IQ ([`Self::apply`]).
    #[inline]
    pub fn select(&mut self, dst: u32, h0: u32, now: u64) -> u8 {
        if self.pyrrha.roots().is_empty() {
            return OQ;
        }
        self.model
            .from_host(self.tor, Some(dst), h0, &mut self.path);
        match self.pyrrha.select(UPLINK, OQ, self.path.as_slice(), now) {
            Choice::Oq => OQ,
            Choice::Iq(q) => q,
        }
    }

    /// Applies a Pyrrha signal frame from the switch; false if `frame` is not one.
    pub fn on_frame(&mut self, frame: &[u8], now: u64) -> bool {
        if !frame.get(15).is_some_and(|&t| is_pyrrha_type(t)) {
            return false;
        }
        let Some(r) = Frame::new_checked(frame)
            .ok()
            .and_then(|f| PyrrhaRepr::parse(&f).ok())
        else {
            return false;
        };
        self.signals_rx += 1;
        match r.msg {
            Msg::Pause { root, hops } => {
                self.pauses_rx += 1;
                self.pyrrha.on_pause(UPLINK, root, hops, now);
            }
            Msg::Resume { root, hops } => {
                self.resumes_rx += 1;
                self.pyrrha.on_resume(UPLINK, root, hops, now);
            }
            Msg::Merge {
                old,
                old_hops,
                new,
                new_hops,
            } => {
                self.merges_rx += 1;
                self.pyrrha
                    .on_merge(UPLINK, old, old_hops, new, new_hops, now);
            }
        }
        true
    }

    /// Moves the IQ pause changes decided since the last call into `paused` (bit q: NIC
    /// queue q paused, as [`super::nicq::NicQueues::paused`]).
    pub fn apply(&mut self, paused: &mut u128) {
        for c in self.pyrrha.drain_cmds() {
            let bit = 1u128 << (c.queue & 127);
            if c.pause {
                *paused |= bit;
            } else {
                *paused &= !bit;
            }
        }
        // A NIC has no upstream: nothing it decides to send goes anywhere.
        self.pyrrha.drain_msgs().for_each(drop);
    }

    /// A frame was queued in / left NIC queue `q` (the order marks of App. C: an IQ a
    /// flow moves to waits until the frames it left in the OQ have gone). A NIC whose
    /// queues hold flows rather than frames (the host stack) calls neither.
    pub fn on_enqueue(&mut self, q: u8, now: u64) {
        self.pyrrha.on_enqueue(UPLINK, q, None, 0, now);
    }

    pub fn on_dequeue(&mut self, q: u8, now: u64) {
        self.pyrrha.on_dequeue(UPLINK, q, 0, now);
    }

    /// IQs in use (roots the NIC is holding traffic for).
    pub fn iqs_in_use(&self) -> usize {
        self.pyrrha.iqs_in_use(UPLINK)
    }

    /// Per root (`switch:port`): the time it held traffic here (ps).
    pub fn paused_ps(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.pyrrha.stats().paused_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Peer, Topology};
    use flowctl::pyrrha::RootId;
    use loadbal::FiveTuple;
    use std::net::IpAddr;
    use std::path::Path;

    fn signal(m: Msg) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let n = PyrrhaRepr::new([2, 0, 0, 0, 0, 9], None, m).emit_into(&mut b);
        b.truncate(n);
        b
    }

    /// leafspine.toml: h11 sends to h31 and to h21 (both through its leaf's uplinks), and to
    /// h12 (its own leaf). A PAUSE for leaf3's port toward h31, 3 hops from the NIC (leaf1 →
    /// spine → leaf3), holds exactly the frames to h31; RESUME lets them go; a MERGE moves
    /// the hold from an old root to the new one.
    #[test]
    fn pause_holds_exactly_the_frames_whose_path_crosses_the_root() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
        let r = Topology::load(p).unwrap().resolve().unwrap();
        let model = Arc::new(PathModel::new(&r));
        let h = |n: &str| r.hosts[r.host_index(n).unwrap() as usize].clone();
        let src = h("h11");
        let Peer::Port(tor, _) = src.peer else {
            panic!("h11 is not linked to a switch")
        };
        let mut nic = NicPyrrha::new(&PyrrhaNicConfig {
            model: model.clone(),
            tor: tor as u16,
            queues: 8,
        });
        let tuple = |dst: &str, sport: u16| {
            let d = h(dst).ip;
            let t = FiveTuple {
                proto: 17,
                src: IpAddr::V4(src.ip),
                dst: IpAddr::V4(d),
                sport,
                dport: 4791,
            };
            (u32::from(d), crate::scheme::pyrrha::path::flow_hash(&t))
        };
        let (to31, h31) = tuple("h31", 49152);
        let (to21, h21) = tuple("h21", 49153);
        let (to12, h12) = tuple("h12", 49154);
        let (leaf3, down31) = r.port_of("leaf3", "h1").unwrap();
        let root = RootId::new(leaf3 as u16, down31);
        let mut paused = 0u128;
        // Nothing known: everything in the OQ.
        assert_eq!(nic.select(to31, h31, 0), OQ);
        // PAUSE(leaf3:h1, 3): the frames to h31 go to a paused IQ, the others to the OQ.
        assert!(nic.on_frame(&signal(Msg::Pause { root, hops: 3 }), 10));
        let q = nic.select(to31, h31, 20);
        nic.apply(&mut paused);
        assert_ne!(q, OQ);
        assert_eq!(paused, 1 << q);
        assert_eq!(nic.select(to21, h21, 20), OQ);
        assert_eq!(nic.select(to12, h12, 20), OQ);
        // The same root at another distance is another root: no hold.
        let mut other = NicPyrrha::new(&PyrrhaNicConfig {
            model,
            tor: tor as u16,
            queues: 8,
        });
        other.on_frame(&signal(Msg::Pause { root, hops: 2 }), 10);
        assert_eq!(other.select(to31, h31, 20), OQ);
        // RESUME: the IQ is released and unassigned; the frames go to the OQ again.
        assert!(nic.on_frame(&signal(Msg::Resume { root, hops: 3 }), 30));
        nic.apply(&mut paused);
        assert_eq!(paused, 0);
        assert_eq!(nic.iqs_in_use(), 0);
        assert_eq!(nic.select(to31, h31, 40), OQ);
        // MERGE: a false-positive root (the spine's port toward leaf3, 2 hops) held the
        // frames to h31 and h32; it merges into leaf3:h1. Only the frames to h31 stay held.
        let (to32, h32) = tuple("h32", 49155);
        let path = |dst, h0| {
            let mut o = OnwardPath::default();
            nic.model.from_host(tor as u16, Some(dst), h0, &mut o);
            o
        };
        let spine = path(to31, h31).as_slice()[2];
        assert_eq!(path(to31, h31).as_slice()[3], root);
        let spine32 = path(to32, h32).as_slice()[2];
        nic.on_frame(
            &signal(Msg::Pause {
                root: spine,
                hops: 2,
            }),
            50,
        );
        let q31 = nic.select(to31, h31, 60);
        let q32 = nic.select(to32, h32, 60);
        nic.apply(&mut paused);
        assert_ne!(q31, OQ);
        if spine32 == spine {
            assert_eq!(q32, q31, "one root, one IQ");
        }
        nic.on_frame(
            &signal(Msg::Merge {
                old: spine,
                old_hops: 2,
                new: root,
                new_hops: 3,
            }),
            70,
        );
        let q31 = nic.select(to31, h31, 80);
        let q32 = nic.select(to32, h32, 80);
        nic.apply(&mut paused);
        assert_ne!(q31, OQ);
        assert_eq!(paused, 1 << q31, "only the new root's IQ is paused");
        assert_eq!(q32, OQ, "h32 does not cross the real root");
        assert_eq!(
            (nic.signals_rx, nic.pauses_rx, nic.resumes_rx, nic.merges_rx),
            (4, 2, 1, 1)
        );
        // Not a Pyrrha frame.
        assert!(!nic.on_frame(&[0u8; 60], 90));
    }

    /// The host stack in Pyrrha mode (h11 of leafspine.toml): flow 1 to h31 and flow 2 to
    /// h21 share the NIC; a PAUSE for leaf3's port toward h31 (3 hops from the NIC) holds
    /// flow 1 only — its timer frozen, so no timeout however long it lasts — while flow 2
    /// gets the whole NIC; RESUME restarts it. The frames carry no shim.
    #[test]
    fn stack_holds_exactly_the_flow_crossing_the_paused_root() {
        use crate::host::{HostStack, StackConfig};
        use crate::workload::FlowSpec;
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
        let r = Topology::load(p).unwrap().resolve().unwrap();
        let idx = |n: &str| r.host_index(n).unwrap();
        let (me, h31, h21) = (idx("h11"), idx("h31"), idx("h21"));
        let Peer::Port(tor, _) = r.hosts[me as usize].peer else {
            panic!("h11 is not linked to a switch")
        };
        let ms = 1_000_000_000u64;
        let mut cfg = StackConfig::new(me, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 1000 * u64::from(cfg.mss);
        cfg.pyrrha = Some(PyrrhaNicConfig {
            model: Arc::new(PathModel::new(&r)),
            tor: tor as u16,
            queues: 4,
        });
        let flow = |id, dst| FlowSpec {
            id,
            src: me,
            dst,
            size: 10_000_000,
            start_ps: 0,
            prio: 3,
        };
        let mut a = HostStack::new(cfg, &[flow(1, h31), flow(2, h21)]);
        a.set_addresses(
            r.hosts[me as usize].ip,
            r.hosts.iter().map(|h| h.ip).collect(),
        );
        a.on_tick(0);
        let mut t = 0;
        let drain = |a: &mut HostStack, t: &mut u64| {
            let mut n = [0usize; 2];
            for _ in 0..50 {
                *t += 10_000_000;
                if let Some(s) = a.poll_send(*t) {
                    assert_eq!(s.upq, None, "no shim in Pyrrha mode");
                    n[s.hdr.flow as usize - 1] += 1;
                }
            }
            n
        };
        assert_eq!(drain(&mut a, &mut t), [25, 25]);
        let (leaf3, down) = r.port_of("leaf3", "h1").unwrap();
        let root = RootId::new(leaf3 as u16, down);
        a.on_receive(t, &signal(Msg::Pause { root, hops: 3 }), 60);
        assert_eq!(drain(&mut a, &mut t), [0, 50]);
        // Held for 5 ms, past the 1 ms RTO: no timeout (flow 2's ACKs keep it going; flow
        // 1's outstanding packets are frozen with it).
        a.on_tick(t + 5 * ms);
        assert_eq!(
            a.counters.timeouts, 1,
            "only flow 2 (no ACKs here) times out"
        );
        a.on_receive(t + 5 * ms, &signal(Msg::Resume { root, hops: 3 }), 60);
        t += 5 * ms;
        let n = drain(&mut a, &mut t);
        assert!(n[0] > 0 && n[1] > 0, "{n:?}");
        let c = a.counters;
        assert_eq!((c.signals_rx, c.pauses_rx, c.resumes_rx), (2, 1, 1));
        let rec = a.tx_records();
        assert!(
            rec[0].paused_ps >= 5 * ms,
            "flow 1's timer frozen: {:?}",
            rec[0]
        );
        assert_eq!(rec[1].paused_ps, 0);
        assert_eq!(a.pyrrha().unwrap().iqs_in_use(), 0);
    }
}

//! Pyrrha (NSDI '25) as a scheme: the path calculation ([`path`], §4.2) and the adapter that
//! moves packets, frames and queue pauses between the pipeline and `flowctl::pyrrha`.
//!
//! Per packet: `on_parsed` keeps the destination and the unseeded ECMP hash in the packet's
//! metadata; `select_queue` computes the onward path from the egress port on and lets Pyrrha
//! pick the OQ or an IQ (§4.2, §4.3); `on_enqueue`/`on_dequeue` feed the thresholds, order
//! marks and IQ lifetimes (§4.1, App. C). IQ pauses are per-queue AFC pauses, as the Tofino2
//! prototype's (§5.1 (iv)). PAUSE/RESUME/MERGE go out as Xoff signal frames to peers that run
//! Pyrrha, and to hosts when `[switch.pyrrha] hosts = true` (§4.4 "Cooperation on
//! end-hosts": their NICs hold exactly the flows that cross a paused root,
//! `crate::host::pyrrha`); otherwise hosts get none and PFC, if configured beside Pyrrha, is
//! the host-edge fallback. IQs are single-tier with order marks (App. C, the default) or the
//! two-level HIQ of §4.3 (`iq_mode = "two-level"`): the port's scheduler picking an IQ moves
//! its head on to the next level ([`PyrrhaScheme::hiq_next`]) instead of the wire.
//!
//! [`incast_mix`] is the §6 incast-mix experiment (Fig. 11) the fidelity test and `xoff repro
//! pyrrha` run.

pub mod incast_mix;
pub mod path;

use super::{ControlFrame, PortView};
use crate::config::SwitchSpec;
use crate::frame::Pkt;
use crate::parse::PacketMeta;
use crate::wire::EtherType;
use flowctl::pyrrha::wire::{is_pyrrha_type, Frame, PyrrhaRepr};
use flowctl::pyrrha::{Choice, Msg, QueueCmd};
use flowctl::{Afc, PauseRegs};
use path::{OnwardPath, PathModel};
use std::net::IpAddr;
use std::sync::Arc;

/// Tag in the packet metadata: the destination and hash words are valid (an IPv4 packet).
/// Bits 8..16 of the tag word carry the packet's OQ once a queue is selected (the HIQ
/// scheduler moves a packet on into it).
const TAG_IPV4: u32 = 0x5059_0004;
const TAG_MASK: u32 = !0xff00;

/// Pyrrha state of one pipe.
#[derive(Debug)]
pub struct PyrrhaScheme {
    pub pyrrha: flowctl::Pyrrha,
    model: Arc<PathModel>,
    /// Per port: the peer runs Pyrrha (signals go there).
    signal: Vec<bool>,
    macs: Vec<([u8; 6], Option<[u8; 6]>)>,
    path: OnwardPath,
    /// Two-level HIQ (`iq_mode = "two-level"`): IQs are dequeued into the next level, not
    /// onto the wire ([`Self::hiq_next`]).
    hiq: bool,
}

impl PyrrhaScheme {
    /// Pyrrha for `spec`, if it runs Pyrrha.
    pub fn new(spec: &SwitchSpec) -> Result<Option<Self>, flowctl::PyrrhaError> {
        let Some(p) = &spec.pyrrha else {
            return Ok(None);
        };
        let pyrrha = flowctl::Pyrrha::new(p.config.clone(), p.switch_id, &p.ports)?;
        Ok(Some(PyrrhaScheme {
            pyrrha,
            model: p.model.clone(),
            signal: p.signal.clone(),
            macs: spec
                .ports
                .iter()
                .map(|x| (x.mac.0, x.peer_mac.map(|m| m.0)))
                .collect(),
            path: OnwardPath::default(),
            hiq: p.config.iq_mode == flowctl::pyrrha::IqMode::TwoLevel,
        }))
    }

    /// Applies a Pyrrha signal frame received on `port`.
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        if ethertype != EtherType::XOFF_SIGNAL || !frame.get(15).is_some_and(|&t| is_pyrrha_type(t))
        {
            return None;
        }
        let f = Frame::new_checked(frame).ok()?;
        let r = PyrrhaRepr::parse(&f).ok()?;
        match r.msg {
            Msg::Pause { root, hops } => self.pyrrha.on_pause(port, root, hops, now),
            Msg::Resume { root, hops } => self.pyrrha.on_resume(port, root, hops, now),
            Msg::Merge {
                old,
                old_hops,
                new,
                new_hops,
            } => self
                .pyrrha
                .on_merge(port, old, old_hops, new, new_hops, now),
        }
        for c in self.pyrrha.drain_cmds() {
            apply(afc.port(usize::from(c.port)), c);
        }
        // A resumed IQ may be eligible now.
        Some(true)
    }

    /// Keeps what the path calculation needs: the IPv4 destination and the unseeded hash.
    #[inline(never)]
    pub fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        pkt.scheme.0 = match meta.five_tuple() {
            Some(t) => match t.dst {
                IpAddr::V4(d) => [u32::from(d), path::flow_hash(t), TAG_IPV4],
                IpAddr::V6(_) => [0, 0, 0],
            },
            None => [0, 0, 0],
        };
    }

    /// The OQ (`pkt.queue`, by priority) or the IQ of the roots the packet's path crosses.
    #[inline(never)]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        if self.pyrrha.roots().is_empty() {
            return;
        }
        let [dst, h0, tag] = pkt.scheme.0;
        if tag != TAG_IPV4 {
            return;
        }
        if self.hiq {
            pkt.scheme.0[2] = TAG_IPV4 | u32::from(pkt.queue) << 8;
        }
        let me = self.pyrrha.switch_id();
        self.model
            .onward_hashed(me, view.port as u16, Some(dst), h0, &mut self.path);
        let c = self
            .pyrrha
            .select(view.port, pkt.queue, self.path.as_slice(), now);
        if let Choice::Iq(q) = c {
            pkt.queue = q;
        }
        for c in self.pyrrha.drain_cmds() {
            apply(view.pause, c);
        }
    }

    /// Two-level HIQ: whether `queue` of `port` is an IQ, whose packets the HIQ scheduler
    /// moves on ([`Self::hiq_next`]) instead of sending.
    #[inline]
    pub fn hiq_moves(&self, port: usize, queue: usize) -> bool {
        self.hiq && self.pyrrha.is_iq(port, queue as u8)
    }

    /// Two-level HIQ (§4.3): `pkt` left IQ `from` (now `from_bytes`), which the wire
    /// scheduler picked (it is resumed or soft-merging); the queue the HIQ scheduler puts it
    /// in: the IQ of the next root farther on its path, or its OQ. The caller then enqueues
    /// it there through [`Self::on_enqueue`].
    pub fn hiq_next(
        &mut self,
        pkt: &Pkt,
        from: usize,
        from_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) -> usize {
        let [dst, h0, tag] = pkt.scheme.0;
        let oq = ((tag >> 8) & 0xff) as u8;
        let to = if tag & TAG_MASK != TAG_IPV4 {
            usize::from(oq)
        } else {
            // Decided while the packet still counts in `from`: the dequeue may leave it
            // empty and resumed, hence unassigned, its roots forgotten.
            let me = self.pyrrha.switch_id();
            self.model
                .onward_hashed(me, view.port as u16, Some(dst), h0, &mut self.path);
            let c = self
                .pyrrha
                .next_queue(view.port, from as u8, oq, self.path.as_slice(), now);
            for c in self.pyrrha.drain_cmds() {
                apply(view.pause, c);
            }
            match c {
                Choice::Oq => usize::from(oq),
                Choice::Iq(q) => usize::from(q),
            }
        };
        self.on_dequeue(from, from_bytes, view, now);
        to
    }

    /// Thresholds on enqueue into `queue` (holding `queue_bytes` before the packet).
    #[inline(never)]
    pub fn on_enqueue(
        &mut self,
        pkt: &Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        let after = queue_bytes + u64::from(pkt.len);
        self.pyrrha
            .on_enqueue(view.port, queue as u8, Some(pkt.in_port), after, now);
    }

    /// Order marks, resume thresholds and IQ lifetimes on leaving `queue` (now `queue_bytes`).
    #[inline(never)]
    pub fn on_dequeue(&mut self, queue: usize, queue_bytes: u64, view: &PortView<'_>, now: u64) {
        self.pyrrha
            .on_dequeue(view.port, queue as u8, queue_bytes, now);
        for c in self.pyrrha.drain_cmds() {
            apply(view.pause, c);
        }
    }

    /// The signals decided since the last call, to the peers that run Pyrrha.
    pub fn poll(&mut self, out: &mut Vec<(usize, ControlFrame)>) {
        let (signal, macs) = (&self.signal, &self.macs);
        for (p, m) in self.pyrrha.drain_msgs() {
            let p = usize::from(p);
            if signal.get(p).copied().unwrap_or(false) {
                let (src, dst) = macs[p];
                out.push((p, ControlFrame::Pyrrha(PyrrhaRepr::new(src, dst, m))));
            }
        }
    }

    #[inline]
    pub fn poll_due(&self) -> bool {
        self.pyrrha.has_output()
    }
}

fn apply(regs: &PauseRegs, c: QueueCmd) {
    if c.pause {
        regs.pause(usize::from(c.queue), flowctl::afc::FOREVER);
    } else {
        regs.resume(usize::from(c.queue));
    }
}

/// Pyrrha counters of one pipe (`flowctl::pyrrha::PyrrhaStats`).
pub type PyrrhaStats = flowctl::pyrrha::PyrrhaStats;

#[cfg(test)]
mod tests {
    use crate::config::Topology;
    use crate::frame::HeapMem;
    use crate::switch::Outputs;
    use crate::wire::data::FrameTemplate;
    use crate::Switch;
    use flowctl::pyrrha::wire::PyrrhaRepr;
    use flowctl::pyrrha::{Msg, RootId};
    use std::path::Path;

    /// A 1000-byte UDP frame h1 → h2 of `TOPO` (priority 3), its last byte `seq`.
    fn data_frame(r: &crate::config::ResolvedTopology, seq: u8) -> Vec<u8> {
        let h1 = &r.hosts[0];
        let tmpl = FrameTemplate {
            src_mac: h1.mac,
            dst_mac: h1.peer_mac.unwrap(),
            src_ip: h1.ip,
            dst_ip: r.hosts[1].ip,
            sport: 1000,
            dport: 4791,
            prio: 3,
            vlan: false,
            ecn: false,
        };
        let mut f = vec![0u8; 1000];
        tmpl.emit_headers(&mut f, 1000);
        f[999] = seq;
        f
    }

    /// h1 - s1 - s2 - h2; s1 runs Pyrrha. The root is s2's port toward h2.
    const TOPO: &str = r#"
[[switch]]
name = "s1"
scheme = "pyrrha"
defaults = { rate = "100Gbit", delay = "1us", queues = 8, prio_map = [0, 0, 0, 0, 0, 0, 0, 0] }
port = [{ name = "h" }, { name = "up" }]
route = [{ prefix = "10.0.1.1/32", via = ["h"] }, { prefix = "10.0.2.0/24", via = ["up"] }]
[[switch]]
name = "s2"
scheme = "pyrrha"
defaults = { rate = "100Gbit", delay = "1us", queues = 8, prio_map = [0, 0, 0, 0, 0, 0, 0, 0] }
port = [{ name = "down" }, { name = "h" }]
route = [{ prefix = "10.0.2.1/32", via = ["h"] }, { prefix = "10.0.1.0/24", via = ["down"] }]
[[host]]
name = "h1"
ip = "10.0.1.1/24"
gateway = "10.0.1.254"
[[host]]
name = "h2"
ip = "10.0.2.1/24"
gateway = "10.0.2.254"
[[link]]
a = "h1"
b = "s1:h"
[[link]]
a = "s1:up"
b = "s2:down"
[[link]]
a = "h2"
b = "s2:h"
"#;

    fn receive(sw: &mut Switch, mem: &mut HeapMem, port: u16, bytes: &[u8], now: u64) {
        let f = mem.alloc_with(bytes).expect("frame");
        let mut out = Outputs::new();
        sw.receive(mem, port, f, bytes.len() as u32, now, &mut out);
    }

    fn signal(m: Msg) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let n = PyrrhaRepr::new([2, 0, 0, 0, 0, 9], None, m).emit_into(&mut b);
        b.truncate(n);
        b
    }

    #[test]
    fn a_paused_root_puts_the_flows_crossing_it_in_a_paused_iq() {
        let t = Topology::parse(TOPO, Path::new("pyrrha.toml")).unwrap();
        let r = t.resolve().unwrap();
        let spec = r.switch("s1").unwrap().spec.clone();
        let p = spec.pyrrha.as_ref().unwrap();
        assert_eq!(p.ports[1].iqs, (1..8).collect::<Vec<u8>>());
        // 100 Gbit/s x 2 x 1 us = 25 000 B: K_pause 50 000, K_resume 25 000.
        assert_eq!(p.ports[1].bdp_bytes, 25_000);
        assert_eq!(p.signal, vec![false, true], "signals to s2 only, not to h1");
        let mut sw = Switch::single(spec, 0).unwrap();
        let mut mem = HeapMem::new(64, 2048);
        let (s2, h) = r.port_of("s2", "h").unwrap();
        let root = RootId::new(s2 as u16, h);
        let frame = data_frame(&r, 0);
        // Uncongested: the OQ.
        receive(&mut sw, &mut mem, 0, &frame, 0);
        assert_eq!(sw.queue_bytes(1, 0), 1000);
        // PAUSE(s2:h, 1 hop) on the uplink: the next packet of the flow takes an IQ, paused,
        // held behind the order mark in the OQ as well.
        receive(
            &mut sw,
            &mut mem,
            1,
            &signal(Msg::Pause { root, hops: 1 }),
            10,
        );
        receive(&mut sw, &mut mem, 0, &frame, 20);
        assert_eq!(sw.queue_bytes(1, 1), 1000);
        assert_eq!(sw.shared.afc.port(1).paused_mask(21), 1 << 1);
        // A PAUSE naming s1 itself is ignored (loop guard).
        let me = RootId::new(r.switch_index("s1").unwrap() as u16, 1);
        receive(
            &mut sw,
            &mut mem,
            1,
            &signal(Msg::Pause { root: me, hops: 2 }),
            30,
        );
        // RESUME: the IQ stays paused until the OQ's packet (ahead of the mark) has left.
        receive(
            &mut sw,
            &mut mem,
            1,
            &signal(Msg::Resume { root, hops: 1 }),
            40,
        );
        assert_eq!(sw.shared.afc.port(1).paused_mask(41), 1 << 1);
        let mut out = Outputs::new();
        sw.service(&mut mem, 1, 1_000_000, &mut out);
        assert_eq!(sw.queue_bytes(1, 0), 0);
        assert_eq!(sw.shared.afc.port(1).paused_mask(1_000_001), 0);
        let st = sw.scheme_stats(2_000_000).unwrap().pyrrha.unwrap();
        assert_eq!(st.ports[1].pauses_received, 2);
        assert_eq!(st.ports[1].loops_ignored, 1);
        assert_eq!((st.ports[1].iqs_assigned, st.ports[1].order_marks), (1, 1));
    }

    /// `iq_mode = "two-level"`: a packet of a paused root waits in its IQ; once the root
    /// resumes, the scheduler's pick of the IQ moves it into the OQ behind the flow's earlier
    /// packet (no order mark), and it leaves from there; queue counters follow it and the
    /// buffer is given back whole.
    #[test]
    fn hiq_moves_a_resumed_iq_into_the_oq_and_sends_in_order() {
        use crate::frame::FrameMem;
        let text = TOPO.replace(
            "scheme = \"pyrrha\"\n",
            "scheme = \"pyrrha\"\npyrrha = { iq_mode = \"two-level\" }\nbuffer = { buffer_bytes = 4000000 }\n",
        );
        let t = Topology::parse(&text, Path::new("pyrrha.toml")).unwrap();
        let r = t.resolve().unwrap();
        let spec = r.switch("s1").unwrap().spec.clone();
        let mut sw = Switch::single(spec, 0).unwrap();
        let mut mem = HeapMem::new(64, 2048);
        let (s2, h) = r.port_of("s2", "h").unwrap();
        let root = RootId::new(s2 as u16, h);
        let frame = |seq: u8| data_frame(&r, seq);
        // The wire is busy with packet 0 (OQ); packet 1 arrives after the PAUSE: IQ 1.
        receive(&mut sw, &mut mem, 0, &frame(0), 0);
        let pause = signal(Msg::Pause { root, hops: 1 });
        receive(&mut sw, &mut mem, 1, &pause, 10);
        receive(&mut sw, &mut mem, 0, &frame(1), 20);
        assert_eq!((sw.queue_bytes(1, 0), sw.queue_bytes(1, 1)), (1000, 1000));
        let mut out = Outputs::new();
        sw.service(&mut mem, 1, 30, &mut out);
        // Packet 0 left; packet 1 waits in its paused IQ.
        assert_eq!((sw.queue_bytes(1, 0), sw.queue_bytes(1, 1)), (0, 1000));
        receive(
            &mut sw,
            &mut mem,
            1,
            &signal(Msg::Resume { root, hops: 1 }),
            40,
        );
        let mut out = Outputs::new();
        for t in [50, 1_000_000, 2_000_000, 3_000_000] {
            sw.service(&mut mem, 1, t, &mut out);
        }
        assert_eq!((sw.queue_bytes(1, 0), sw.queue_bytes(1, 1)), (0, 0));
        let sent: Vec<u8> = out
            .tx
            .iter()
            .map(|&(f, len)| mem.data(f)[len as usize - 1])
            .collect();
        assert!(sent.ends_with(&[1]), "{sent:?}");
        let q = &sw.shared.counters[1].queues;
        assert_eq!((q[1].enq_pkts.get(), q[1].deq_pkts.get()), (1, 1));
        assert_eq!((q[0].enq_pkts.get(), q[0].deq_pkts.get()), (2, 2));
        let st = sw.scheme_stats(4_000_000).unwrap().pyrrha.unwrap();
        assert_eq!(st.ports[1].order_marks, 0);
        assert_eq!(st.ports[1].iqs_in_use, 0);
        let mmu = sw.buffer().mmu().unwrap().stats();
        assert_eq!((mmu.lossless_used, mmu.lossy_used), (0, 0));
        assert!(mmu.queues.iter().all(|q| q.cells == 0), "{:?}", mmu.queues);
    }
}

//! Pyrrha (NSDI '25) as a scheme: the path calculation ([`path`], §4.2) and the adapter that
//! moves packets, frames and queue pauses between the pipeline and `flowctl::pyrrha`.
//!
//! Per packet: `on_parsed` keeps the destination and the unseeded ECMP hash in the packet's
//! metadata; `select_queue` computes the onward path from the egress port on and lets Pyrrha
//! pick the OQ or an IQ (§4.2, §4.3); `on_enqueue`/`on_dequeue` feed the thresholds, order
//! marks and IQ lifetimes (§4.1, App. C). IQ pauses are per-queue AFC pauses, as the Tofino2
//! prototype's (§5.1 (iv)). PAUSE/RESUME/MERGE go out as Xoff signal frames to peers that run
//! Pyrrha; hosts get none (they do not honour per-root pause here): at the host edge PFC, if
//! configured beside Pyrrha, is the fallback. IQs are single-tier with order marks (App. C);
//! the two-level HIQ scheduler is not built.

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
const TAG_IPV4: u32 = 0x5059_0004;

/// Pyrrha state of one pipe.
#[derive(Debug)]
pub struct PyrrhaScheme {
    pub pyrrha: flowctl::Pyrrha,
    model: Arc<PathModel>,
    /// Per port: the peer runs Pyrrha (signals go there).
    signal: Vec<bool>,
    macs: Vec<([u8; 6], Option<[u8; 6]>)>,
    path: OnwardPath,
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
    #[inline]
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
    #[inline]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        if self.pyrrha.roots().is_empty() {
            return;
        }
        let [dst, h0, tag] = pkt.scheme.0;
        if tag != TAG_IPV4 {
            return;
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

    /// Thresholds on enqueue into `queue` (holding `queue_bytes` before the packet).
    #[inline]
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
    #[inline]
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

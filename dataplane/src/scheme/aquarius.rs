//! Aquarius (APNet '23, §3; `flowctl::aquarius`) as a scheme: strips the data shim on ingress
//! and pushes it toward peers that speak it, maps flows to queues (Alg. 1 lines 2–6, or the
//! reserved queue for a flow the downstream paused, §3.3), marks packets and raises
//! PAUSE/RESUME(queue, FID) from enqueue/dequeue (Alg. 1/2), and turns received ones into
//! AFC commands on its own egress queues (§3.3). The decisions are `flowctl::Aquarius`'s.
//!
//! Queue commands that arise on the packet path (a reserved queue resuming once a flow's
//! earlier packets have left) have no AFC unit at hand there: they wait for the next timer
//! (`next_deadline` is the instant they arose), which applies them through the unit; the
//! departure that raised them put a frame on the wire, so the port is serviced again.
//!
//! A port's strict-priority data queues (`strict`) are out of Aquarius
//! ([`flowctl::Aquarius::reserve`]): a packet whose priority maps to one (the ACK class,
//! `host.ack_prio`) stays there and meets no hook; they are never mapped to, never `rsvQ`,
//! and do not count in `NQ_active`.

use super::{ControlFrame, PortView};
use crate::config::SwitchSpec;
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::parse::PacketMeta;
use flowctl::aquarius::QueueCmd;
use flowctl::bfc::NO_UPQ;
use flowctl::wire::signal::SignalRepr;
use flowctl::{Afc, AfcCmd};
use serde::{Deserialize, Serialize};

/// Aquarius state of one pipe.
#[derive(Debug)]
pub struct AquariusScheme {
    pub aq: flowctl::Aquarius,
    /// Per port: push the data shim on egress.
    pub shim: Vec<bool>,
    /// Signals to send (port, repr).
    sig: Vec<(usize, SignalRepr)>,
    /// Queue commands raised on the packet path, per port, applied at the next timer.
    pending: Vec<(usize, QueueCmd)>,
    pending_since: Option<u64>,
    cmds: Vec<QueueCmd>,
    /// AFC commands applied, by this scheme.
    pub afc_cmds: u64,
}

/// What Aquarius keeps in a packet's [`super::PktMeta`]: flow id, flow-table slot, upstream
/// queue from the shim, the mark, and the egress port (for a drop before queueing; the
/// default reads "no slot, no upstream, unmarked").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    fid: u32,
    slot: u32,
    upq: u8,
    marked: bool,
    port: u16,
}

impl Meta {
    #[inline]
    fn get(pkt: &Pkt) -> Meta {
        let [fid, slot, w] = pkt.scheme.0;
        Meta {
            fid,
            slot,
            upq: w as u8,
            marked: (w >> 16) & 1 != 0,
            port: (w >> 17) as u16,
        }
    }

    #[inline]
    fn set(self, pkt: &mut Pkt) {
        pkt.scheme.0 = [
            self.fid,
            self.slot,
            u32::from(self.upq) | (u32::from(self.marked) << 16) | (u32::from(self.port) << 17),
        ];
    }
}

impl AquariusScheme {
    /// Aquarius for `spec` if it runs it.
    pub fn new(spec: &SwitchSpec) -> Result<Option<Self>, flowctl::AquariusError> {
        let Some(a) = &spec.aquarius else {
            return Ok(None);
        };
        let ports: Vec<flowctl::BfcPort> = spec
            .ports
            .iter()
            .map(|p| flowctl::BfcPort {
                rate_bps: p.rate_bps,
                delay_ps: p.delay_ps,
                queues: p.queues,
                mtu_frame: p.mtu + 14,
                mac: p.mac.0,
                peer_mac: p.peer_mac.map(|m| m.0),
            })
            .collect();
        let mut aq = flowctl::Aquarius::new(a.config.clone(), &ports)?;
        for (p, &n) in a.map_queues.iter().enumerate() {
            aq.limit_mapping(p, n);
        }
        for (i, p) in spec.ports.iter().enumerate() {
            aq.reserve(i, super::queue_mask(&p.strict))?;
        }
        Ok(Some(AquariusScheme {
            aq,
            shim: a.shim.clone(),
            sig: Vec::new(),
            pending: Vec::new(),
            pending_since: None,
            cmds: Vec::new(),
            afc_cmds: 0,
        }))
    }

    fn apply(&mut self, port: usize, afc: &Afc, now: u64) {
        for c in self.cmds.drain(..) {
            let cmd = match c {
                QueueCmd::Pause(q) => AfcCmd::pause(port as u16, q, 0),
                QueueCmd::Resume(q) => AfcCmd::resume(port as u16, q),
            };
            if let Ok(cmd) = cmd {
                if afc.apply(cmd, now, 1).is_ok() {
                    self.afc_cmds += 1;
                }
            }
        }
    }

    /// Applies an Aquarius signal frame received on `port` (§3.3) to `port`'s queues.
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        let r = super::parse_signal(ethertype, frame)?;
        let paused = afc.regs().get(port)?.paused_mask(now);
        if !self.aq.on_signal(port, &r.signal, paused, &mut self.cmds) {
            return None;
        }
        self.apply(port, afc, now);
        self.on_timer(now, afc);
        // A resumed queue may be eligible now.
        Some(true)
    }

    /// Strips the data shim: the upstream queue goes into the packet's metadata.
    #[inline(never)]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        let mut m = Meta::get(pkt);
        m.upq = match super::shim_pop(mem, pkt.frame, pkt.len) {
            Some((upq, len)) => {
                pkt.len = len;
                upq
            }
            None => NO_UPQ,
        };
        m.set(pkt);
    }

    #[inline(never)]
    pub fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        let mut m = Meta::get(pkt);
        m.fid = super::flow_id(meta);
        m.set(pkt);
    }

    /// Alg. 1 lines 2–6 (and §3.3's steering into `rsvQ`).
    #[inline(never)]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        if self.aq.reserved(view.port) & (1 << pkt.queue) != 0 {
            return; // a strict class: its static queue, no flow-table slot
        }
        let paused = view.pause.paused_mask(now);
        let mut m = Meta::get(pkt);
        let a = self
            .aq
            .assign(view.port, m.fid, view.nonempty, paused, now, &mut self.cmds);
        self.hold(view.port, now);
        pkt.queue = a.queue;
        m.slot = a.slot;
        m.port = view.port as u16;
        m.set(pkt);
    }

    /// Undoes the assignment of a packet that was not queued.
    #[inline(never)]
    pub fn on_drop(&mut self, pkt: &Pkt, now: u64) {
        let m = Meta::get(pkt);
        self.aq
            .unassign(usize::from(m.port), m.slot, m.fid, pkt.queue, now);
    }

    /// Alg. 1 lines 7–16.
    #[inline(never)]
    pub fn on_enqueue(
        &mut self,
        pkt: &mut Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        let reserved = self.aq.reserved(view.port);
        if reserved & (1 << queue) != 0 {
            return;
        }
        // A paused queue is not given `NQ_active` 0 (thresholds 0, every entering flow
        // paused): tried for the Web Server run, it cut Fig. 5(a)'s f3 from 34 to 21 Gbit/s,
        // and with the ACK class that run is lossless without it (issue 16 note).
        let nq_active = view.without(reserved).active_unpaused(1 << queue, now);
        let mut m = Meta::get(pkt);
        let (mark, sig) = self.aq.on_enqueue(
            usize::from(pkt.in_port),
            m.upq,
            view.port,
            queue,
            m.slot,
            m.fid,
            pkt.len,
            queue_bytes,
            nq_active,
            now,
        );
        m.marked = mark.is_some();
        m.set(pkt);
        if let Some(s) = sig {
            self.sig.push(s);
        }
    }

    /// Alg. 2.
    #[inline(never)]
    pub fn on_dequeue(&mut self, pkt: &Pkt, queue: usize, view: &PortView<'_>, now: u64) {
        if self.aq.reserved(view.port) & (1 << queue) != 0 {
            return;
        }
        let m = Meta::get(pkt);
        self.aq.on_dequeue(
            view.port,
            queue,
            m.slot,
            m.fid,
            pkt.len,
            m.marked,
            usize::from(pkt.in_port),
            m.upq,
            now,
            &mut self.cmds,
            &mut self.sig,
        );
        self.hold(view.port, now);
    }

    /// Queue commands raised without the AFC unit at hand wait for the timer.
    #[inline]
    fn hold(&mut self, port: usize, now: u64) {
        if !self.cmds.is_empty() {
            self.pending.extend(self.cmds.drain(..).map(|c| (port, c)));
            self.pending_since.get_or_insert(now);
        }
    }

    /// Toward a peer that speaks the shim: the frame carries the queue it left from.
    #[inline(never)]
    pub fn egress_rewrite<M: FrameMem>(
        &mut self,
        mem: &mut M,
        frame: FrameId,
        len: u32,
        port: usize,
        queue: usize,
    ) -> u32 {
        if self.shim[port] {
            super::shim_push(mem, frame, len, queue)
        } else {
            len
        }
    }

    /// The signals collected since the last call.
    pub fn poll(&mut self, out: &mut Vec<(usize, ControlFrame)>) {
        out.extend(
            self.sig
                .drain(..)
                .map(|(p, r)| (p, ControlFrame::Signal(r))),
        );
    }

    #[inline]
    pub fn poll_due(&self) -> bool {
        !self.sig.is_empty()
    }

    /// When held queue commands are due (at once).
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending_since
    }

    pub fn timer_due(&self, now: u64) -> bool {
        self.pending_since.is_some_and(|t| t <= now)
    }

    /// Applies the held queue commands through the AFC unit.
    pub fn on_timer(&mut self, now: u64, afc: &Afc) {
        let pending = std::mem::take(&mut self.pending);
        for &(port, c) in &pending {
            self.cmds.push(c);
            self.apply(port, afc, now);
        }
        self.pending = pending;
        self.pending.clear();
        self.pending_since = None;
    }

    /// Counters of this pipe.
    pub fn stats(&self) -> AquariusStats {
        AquariusStats {
            afc_cmds: self.afc_cmds,
            ports: (0..self.aq.ports())
                .map(|p| {
                    let s = self.aq.port_stats(p);
                    let qt = self.aq.queue_table(p);
                    let u = qt.stats;
                    AquariusPortStats {
                        active_flows: s.active_flows,
                        active_flows_max: s.active_flows_max,
                        assignments: s.assignments,
                        flows_reassigned: u.flows_reassigned,
                        marked_contribution: s.marked_contribution,
                        marked_qhigh: s.marked_qhigh,
                        no_rsv: u.no_rsv,
                        pauses_received: u.pauses_received,
                        pauses_sent_contribution: s.pauses_sent_contribution,
                        pauses_sent_qhigh: s.pauses_sent_qhigh,
                        queue_pauses: u.queue_pauses,
                        resumes_received: u.resumes_received,
                        resumes_sent: s.resumes_sent,
                        rsv_allocations: u.rsv_allocations,
                        rsv_bytes: s.rsv_bytes,
                        rsv_bytes_max: s.rsv_bytes_max,
                        rsv_flows: u64::from(qt.rsv_flows()),
                        rsv_queue: qt.rsv().map(u64::from),
                        rsv_releases: u.rsv_releases,
                        shared_on_join: u.shared_on_join,
                        table_collisions: s.table_collisions,
                    }
                })
                .collect(),
        }
    }
}

/// Aquarius counters of one port (fields in alphabetical order). Egress side: marks by
/// reason, flows; ingress side: PAUSE/RESUME sent to the peer, by the reason of the mark
/// that raised the PAUSE; upstream side (§3.3): what received PAUSE/RESUMEs did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AquariusPortStats {
    pub active_flows: u64,
    pub active_flows_max: u64,
    pub assignments: u64,
    pub flows_reassigned: u64,
    pub marked_contribution: u64,
    pub marked_qhigh: u64,
    pub no_rsv: u64,
    pub pauses_received: u64,
    pub pauses_sent_contribution: u64,
    pub pauses_sent_qhigh: u64,
    pub queue_pauses: u64,
    pub resumes_received: u64,
    pub resumes_sent: u64,
    pub rsv_allocations: u64,
    pub rsv_bytes: u64,
    pub rsv_bytes_max: u64,
    pub rsv_flows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rsv_queue: Option<u64>,
    pub rsv_releases: u64,
    /// Held flows moved to `rsvQ` when another flow joined their paused queue.
    #[serde(default)]
    pub shared_on_join: u64,
    pub table_collisions: u64,
}

impl AquariusPortStats {
    /// PAUSEs sent, both reasons.
    pub fn pauses(&self) -> u64 {
        self.pauses_sent_qhigh + self.pauses_sent_contribution
    }
}

/// Aquarius counters of one pipe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AquariusStats {
    pub afc_cmds: u64,
    pub ports: Vec<AquariusPortStats>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowctl::bfc::NO_SLOT;

    #[test]
    fn metadata_round_trips_and_default_means_none() {
        let mut pkt = Pkt::new(FrameId(0), 64, 1, 0);
        let m = Meta::get(&pkt);
        assert_eq!((m.slot, m.upq, m.marked), (NO_SLOT, NO_UPQ, false));
        for (fid, slot, upq, marked, port) in [
            (7, 0, 0, true, 0),
            (u32::MAX, 41, 127, false, 32767),
            (3, 9, NO_UPQ, true, 5),
        ] {
            let m = Meta {
                fid,
                slot,
                upq,
                marked,
                port,
            };
            m.set(&mut pkt);
            assert_eq!(Meta::get(&pkt), m);
        }
    }
}

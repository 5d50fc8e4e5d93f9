//! Backpressure Flow Control (BFC, §3.3) as a scheme: strips the data shim on ingress and
//! pushes it on egress toward BFC peers, assigns flows to queues, feeds the pause counters from
//! enqueue/dequeue, applies received Xoff signal frames through the AFC unit, and sends the
//! signals. The decisions are `flowctl::Bfc`'s; this adapter only moves data.
//!
//! A port's strict-priority data queues (`strict`) are out of BFC ([`flowctl::Bfc::reserve`]):
//! a packet whose priority maps to one (the ACK class, `host.ack_prio`) stays there, meets
//! no hook and is never marked; they do not count in `N_active`.

use super::{ControlFrame, PortView};
use crate::config::SwitchSpec;
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::parse::PacketMeta;
use flowctl::bfc::NO_UPQ;
use flowctl::wire::signal::SignalRepr;
use flowctl::Afc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// BFC state of one pipe.
#[derive(Debug)]
pub struct BfcScheme {
    pub bfc: flowctl::Bfc,
    /// Per port: push the data shim on egress.
    pub shim: Vec<bool>,
    /// Signals to send (port, repr).
    sig: Vec<(usize, SignalRepr)>,
}

/// What BFC keeps in a packet's [`super::PktMeta`]: flow id, flow-table slot, upstream queue
/// from the shim, and the pause mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    fid: u32,
    slot: u32,
    upq: u8,
    mark: u16,
}

impl Meta {
    // Stored as is: fid, slot, upq | mark << 16; the slot's default (`PktMeta::default`)
    // reads as "no slot, no upstream queue, no mark".
    #[inline]
    fn get(pkt: &Pkt) -> Meta {
        let [fid, slot, w] = pkt.scheme.0;
        Meta {
            fid,
            slot,
            upq: w as u8,
            mark: (w >> 16) as u16,
        }
    }

    #[inline]
    fn set(self, pkt: &mut Pkt) {
        pkt.scheme.0 = [
            self.fid,
            self.slot,
            u32::from(self.upq) | (u32::from(self.mark) << 16),
        ];
    }
}

impl BfcScheme {
    /// BFC for `spec` if it runs a BFC scheme; `refresher` on one pipe per switch.
    pub fn new(
        spec: &SwitchSpec,
        shared: Option<&Arc<flowctl::BfcShared>>,
        refresher: bool,
    ) -> Result<Option<Self>, flowctl::BfcError> {
        let (Some(b), Some(sh)) = (&spec.bfc, shared) else {
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
        let mut bfc = flowctl::Bfc::new(
            b.config.clone(),
            &ports,
            &b.elide,
            b.shim.clone(),
            sh.clone(),
            refresher,
        )?;
        for (i, p) in spec.ports.iter().enumerate() {
            bfc.reserve(i, super::queue_mask(&p.strict))?;
        }
        Ok(Some(BfcScheme {
            bfc,
            shim: b.shim.clone(),
            sig: Vec::new(),
        }))
    }

    /// Applies an Xoff signal frame received on `port`.
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        let r = super::parse_signal(ethertype, frame)?;
        flowctl::Bfc::apply_signal(self.bfc.shared(), port, &r.signal, afc, now);
        // A resumed queue may be eligible now.
        Some(true)
    }

    /// Strips the data shim: the upstream queue goes into the packet's metadata.
    #[inline]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        let mut m = Meta::get(pkt);
        m.upq = match super::shim_pop(mem, pkt.frame, pkt.len) {
            Some((upq, len)) => {
                pkt.len = len;
                if upq != NO_UPQ {
                    // The peer speaks BFC (e.g. a BFC NIC): it gets the bitmap refresh too.
                    self.bfc.note_signal_port(usize::from(pkt.in_port));
                }
                upq
            }
            None => NO_UPQ,
        };
        m.set(pkt);
    }

    #[inline]
    pub fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        let mut m = Meta::get(pkt);
        m.fid = super::flow_id(meta);
        m.set(pkt);
    }

    /// BFC replaces the priority map for data traffic (§3.3.1): the flow's queue.
    #[inline]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        let reserved = self.bfc.reserved(view.port);
        if reserved & (1 << pkt.queue) != 0 {
            return; // a strict class: its static queue, no flow-table slot
        }
        let paused = view.pause.paused_mask(now);
        let mut m = Meta::get(pkt);
        let a = self
            .bfc
            .assign(view.port, m.fid, view.nonempty, paused, now);
        pkt.queue = a.queue;
        m.slot = a.slot;
        m.set(pkt);
    }

    /// Undoes the assignment of a packet that was not queued.
    #[inline]
    pub fn on_drop(&mut self, pkt: &Pkt, now: u64) {
        self.bfc.unassign(Meta::get(pkt).slot, now);
    }

    /// Backpressure on enqueue into `queue` (holding `queue_bytes`).
    #[inline]
    pub fn on_enqueue(
        &mut self,
        pkt: &mut Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        let reserved = self.bfc.reserved(view.port);
        if reserved & (1 << queue) != 0 {
            return;
        }
        let view = view.without(reserved);
        let n_active = view.active_unpaused(1 << queue, now);
        let mut m = Meta::get(pkt);
        let (mark, sig) = self.bfc.on_enqueue(
            usize::from(pkt.in_port),
            m.upq,
            view.port,
            queue,
            queue_bytes,
            n_active,
        );
        m.mark = mark;
        m.set(pkt);
        if let Some(s) = sig {
            self.sig.push(s);
        }
    }

    /// A packet left `queue` (sent or dropped), which now holds `queue_bytes`.
    #[inline(always)]
    pub fn on_dequeue(
        &mut self,
        pkt: &Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        let reserved = self.bfc.reserved(view.port);
        if reserved & (1 << queue) != 0 {
            return;
        }
        let view = view.without(reserved);
        let m = Meta::get(pkt);
        let port = view.port;
        if let Some(s) = self.bfc.on_dequeue(
            port,
            queue,
            m.slot,
            m.mark,
            usize::from(pkt.in_port),
            m.upq,
            now,
        ) {
            self.sig.push(s);
        }
        if self.bfc.config().resume == flowctl::bfc::Resume::BelowTh {
            let n_active = view.active_unpaused(0, now);
            self.bfc
                .after_dequeue(port, queue, queue_bytes, n_active, &mut self.sig);
        }
    }

    /// Toward a BFC peer: the frame carries the queue it left from.
    #[inline]
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

    /// The signals collected since the last call, and the pause-bitmap refresh when due.
    pub fn poll(&mut self, now: u64, out: &mut Vec<(usize, ControlFrame)>) {
        self.bfc.refresh_due(now);
        self.bfc.refresh(now, &mut self.sig);
        out.extend(
            self.sig
                .drain(..)
                .map(|(p, r)| (p, ControlFrame::Signal(r))),
        );
    }

    /// Whether `poll` has work at `now`: signals collected, or the refresh due (or armed and
    /// waiting to be anchored at this `now`).
    #[inline]
    pub fn poll_due(&self, now: u64) -> bool {
        !self.sig.is_empty() || self.bfc.pending_refresh().is_some_and(|t| t <= now)
    }

    pub fn next_deadline(&self) -> Option<u64> {
        self.bfc.pending_refresh()
    }
}

/// BFC counters of one port (fields in alphabetical order, as the JSON always listed them;
/// per-queue maps hold the non-zero counters keyed by queue number).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BfcPortStats {
    pub active_queues: u64,
    pub active_queues_max: u64,
    pub assignments: u64,
    pub collisions: u64,
    pub marked: u64,
    pub pauses_received: BTreeMap<String, u64>,
    pub pauses_sent: BTreeMap<String, u64>,
    pub refresh_received: u64,
    pub refresh_sent: u64,
    pub resumes_received: BTreeMap<String, u64>,
    pub resumes_sent: BTreeMap<String, u64>,
    pub table_collisions: u64,
}

impl BfcPortStats {
    /// Pauses sent over all queues.
    pub fn pauses(&self) -> u64 {
        self.pauses_sent.values().sum()
    }

    /// Resumes sent over all queues.
    pub fn resumes(&self) -> u64 {
        self.resumes_sent.values().sum()
    }
}

/// BFC counters of a switch (shared by its pipes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BfcStats {
    pub ports: Vec<BfcPortStats>,
}

impl BfcStats {
    pub fn of(shared: &flowctl::BfcShared) -> Self {
        let per_q = |c: &[flowctl::bfc::Counter]| -> BTreeMap<String, u64> {
            c.iter()
                .enumerate()
                .filter(|(_, c)| c.get() > 0)
                .map(|(q, c)| (q.to_string(), c.get()))
                .collect()
        };
        BfcStats {
            ports: shared
                .ports
                .iter()
                .map(|p| BfcPortStats {
                    active_queues: p.active_queues.get(),
                    active_queues_max: p.active_queues_max.get(),
                    assignments: p.assignments.get(),
                    collisions: p.collisions.get(),
                    table_collisions: p.table_collisions.get(),
                    marked: p.marked.get(),
                    refresh_sent: p.refresh_sent.get(),
                    refresh_received: p.refresh_received.get(),
                    pauses_sent: per_q(&p.pauses_sent),
                    resumes_sent: per_q(&p.resumes_sent),
                    pauses_received: per_q(&p.pauses_received),
                    resumes_received: per_q(&p.resumes_received),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowctl::bfc::NO_SLOT;

    #[test]
    fn metadata_round_trips_and_default_means_none() {
        let mut pkt = Pkt::new(FrameId(0), 64, 1, 0);
        let m = Meta::get(&pkt);
        assert_eq!((m.slot, m.upq, m.mark), (NO_SLOT, NO_UPQ, 0));
        for (fid, slot, upq, mark) in [
            (7, 0, 0, 1),
            (u32::MAX, 41, 127, u16::MAX),
            (3, NO_SLOT, NO_UPQ, 0),
        ] {
            let m = Meta {
                fid,
                slot,
                upq,
                mark,
            };
            m.set(&mut pkt);
            assert_eq!(Meta::get(&pkt), m);
        }
    }
}

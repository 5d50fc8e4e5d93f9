//! Egress stages of one port: `schedule → depart → shape → transmit`.
//!
//! `schedule` picks the next frame (control queue first, then strict and DRR data queues,
//! paused queues skipped) when the wire is free; `depart` lets the schemes see the departure
//! and rewrite the frame, counts it and releases its buffer; `shape` starts it on the emulated
//! wire (line rate + propagation delay, `crate::link`); `transmit` hands frames whose wire
//! time has elapsed to the sink.

use super::Outputs;
use crate::buffer::BufReq;
use crate::frame::{FrameMem, Pkt};
use crate::switch::Switch;

impl Switch {
    /// The next frame to start on `port`'s wire, if the wire is free and a queue is eligible:
    /// (packet, its data queue or `None` for the control queue).
    #[inline]
    pub(crate) fn schedule(&mut self, port: usize, now: u64) -> Option<(Pkt, Option<usize>)> {
        let eg = self.egress[port].as_mut()?;
        if !eg.link.can_start(now) {
            return None;
        }
        eg.qs.dequeue(self.shared.afc.port(port), now)
    }

    /// A data packet leaves queue `q` (control frames pass unchanged): the schemes' dequeue
    /// and rewrite hooks, the queue counters, the buffer release. Returns the packet as it
    /// goes on the wire.
    #[inline]
    pub(crate) fn depart<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: usize,
        pkt: Pkt,
        q: Option<usize>,
        now: u64,
    ) -> Pkt {
        let Some(q) = q else { return pkt };
        let Some(eg) = self.egress[port].as_ref() else {
            return pkt;
        };
        let bytes = eg.qs.data[q].bytes();
        let depth_pkts = eg.qs.data[q].len() as u64;
        let mut wire = pkt;
        if !self.schemes.is_empty() {
            let view = super::view(&self.egress, &self.shared.afc, port);
            self.schemes.on_dequeue(&pkt, q, bytes, &view, now);
            wire.len = self.schemes.egress_rewrite(mem, &pkt, port, q);
        }
        let qc = &self.shared.counters[port].queues[q];
        qc.deq_pkts.add(1);
        qc.deq_bytes.add(u64::from(pkt.len));
        qc.depth_bytes.set(bytes);
        qc.depth_pkts.set(depth_pkts);
        let req = BufReq::leaving(&pkt, port, q);
        self.buffer.release(&req, pkt.tag, now);
        wire
    }

    /// Starts `pkt` on the emulated wire of `port`.
    #[inline]
    pub(crate) fn shape(&mut self, port: usize, pkt: Pkt, now: u64) {
        if let Some(eg) = self.egress[port].as_mut() {
            eg.link.start(pkt, now);
        }
    }

    /// Frames whose serialization and propagation have elapsed go to `out.tx`.
    #[inline]
    pub(crate) fn transmit(&mut self, port: usize, now: u64, out: &mut Outputs) {
        if let Some(eg) = self.egress[port].as_mut() {
            while let Some(f) = eg.link.pop_due(now) {
                out.tx.push((f.pkt.frame, f.pkt.len));
            }
        }
    }

    /// The next time `port` needs `service` (None: idle until something arrives).
    pub fn next_wakeup(&self, port: u16, now: u64) -> Option<u64> {
        let p = usize::from(port);
        let eg = self.egress[p].as_ref()?;
        let pause = self.shared.afc.port(p);
        let mut t = eg.link.next_release();
        let mut upd = |x: u64| t = Some(t.map_or(x, |y: u64| y.min(x)));
        if eg.qs.has_eligible(pause, now) {
            upd(eg.link.free_at().max(now));
        } else if eg.qs.nonempty() != 0 {
            if let Some(e) = pause.next_expiry(now) {
                upd(e.max(eg.link.free_at()));
            }
        }
        t
    }
}

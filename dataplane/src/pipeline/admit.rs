//! Admission stages: `select_queue → admit → enqueue_admitted` (and the drop path between).

use super::Outputs;
use crate::frame::{FrameMem, Pkt};
use crate::parse::{self, PacketMeta, L3};
use crate::scheme::PortView;
use crate::stats::DropReason;
use crate::switch::Switch;

impl Switch {
    /// Whether `port` can take packets (this pipe owns it and it is up).
    #[inline]
    pub(crate) fn egress_ready(&self, port: usize) -> Result<(), DropReason> {
        if self.egress[port].is_none() || !self.shared.is_up(port) {
            return Err(DropReason::PortDown);
        }
        Ok(())
    }

    /// The packet's data queue: the static one by priority unless a scheme assigns queues.
    #[inline]
    pub(crate) fn select_queue(&mut self, port: usize, pkt: &mut Pkt, now: u64) {
        if self.schemes.per_packet() {
            let view = super::view(&self.egress, &self.shared.afc, port);
            self.schemes.select_queue(pkt, &view, now);
        }
    }

    /// Buffer admission (MMU or tail drop): sets the packet's buffer tag; `Ok(true)` if the
    /// MMU asks for a CE mark.
    #[inline]
    pub(crate) fn admit(
        &mut self,
        port: usize,
        pkt: &mut Pkt,
        now: u64,
    ) -> Result<bool, DropReason> {
        let q = usize::from(pkt.queue);
        let req = mmu::PacketInfo {
            in_port: usize::from(pkt.in_port),
            pg: usize::from(pkt.prio),
            out_port: port,
            queue: q,
            bytes: pkt.len,
            lossless: true,
            ecn_capable: pkt.ect,
        };
        let egress = &self.egress;
        let queue_bytes = || egress[port].as_ref().map_or(0, |e| e.qs.data[q].bytes());
        self.buffer.admit(&req, queue_bytes, &mut pkt.tag, now)
    }

    /// Drops a packet whose queue was chosen but which was not queued (scheme veto, buffer
    /// full): the schemes hear of it, the queue and the port count it.
    #[inline]
    pub(crate) fn drop_queued<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: usize,
        pkt: &Pkt,
        r: DropReason,
        now: u64,
    ) {
        self.schemes.on_drop(pkt, now);
        self.ledger.dropped(pkt.in_port, pkt.prio, r);
        self.shared.counters[port].queues[usize::from(pkt.queue)]
            .drops
            .add(1);
        self.drop_at(port, mem, pkt.frame, r);
    }

    /// Puts an admitted packet in its queue: the schemes' enqueue hook, ECN marking, counters.
    #[inline]
    pub(crate) fn enqueue_admitted<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: u16,
        pkt: &mut Pkt,
        ce: bool,
        now: u64,
        out: &mut Outputs,
    ) {
        let p = usize::from(port);
        let q = usize::from(pkt.queue);
        let Some(eg) = self.egress[p].as_mut() else {
            return;
        };
        if self.schemes.per_packet() {
            let view = PortView {
                port: p,
                nonempty: eg.qs.nonempty(),
                pause: self.shared.afc.port(p),
            };
            self.schemes
                .on_enqueue(pkt, q, eg.qs.data[q].bytes(), &view, now);
        }
        let qc = &self.shared.counters[p].queues[q];
        if ce && pkt.l3_type != 0 {
            let (l3_type, l3_off, n) = (pkt.l3_type, pkt.l3_off, pkt.len as usize);
            mem.with_mut(pkt.frame, |d| mark_ce(&mut d[..n], l3_type, l3_off.into()));
            qc.ecn_marked.add(1);
        }
        eg.qs.push(q, *pkt);
        self.ledger.admitted(pkt.in_port, pkt.prio);
        out.touch(port);
        qc.enq_pkts.add(1);
        qc.enq_bytes.add(u64::from(pkt.len));
        let depth = eg.qs.data[q].bytes();
        qc.depth_bytes.set(depth);
        qc.depth_pkts.set(eg.qs.data[q].len() as u64);
        qc.watermark_bytes.max(depth);
    }
}

fn mark_ce(frame: &mut [u8], l3_type: u16, l3_off: usize) {
    let meta = PacketMeta {
        dst: Default::default(),
        src: Default::default(),
        pcp: None,
        ethertype: l3_type,
        l3_off: l3_off as u16,
        l3: L3::None,
    };
    parse::mark_ce(frame, &meta);
}

//! Egress stages of one port: `schedule → take → depart → shape → transmit`.
//!
//! `schedule` picks the next frame (control queue first, then strict and DRR data queues,
//! paused queues skipped) when the wire is free; `depart` lets the schemes see the departure
//! and rewrite the frame, counts it and releases its buffer; `shape` starts it on the emulated
//! wire (line rate + propagation delay, `crate::link`); `transmit` hands frames whose wire
//! time has elapsed to the sink. The port's egress state is borrowed once for the whole loop
//! (the stages take it as an argument rather than looking the port up again).

use super::Outputs;
use crate::buffer::Buffer;
use crate::frame::{FrameMem, Pkt};
use crate::queue::Pick;
use crate::scheme::{PortView, Schemes};
use crate::stats::PortCounters;
use crate::switch::{Egress, Switch};
use flowctl::PauseRegs;

impl Egress {
    /// The queue whose head starts on the wire next, if the wire is free and a queue is
    /// eligible; `take` dequeues it. A free wire with nothing eligible is idle as of `now`
    /// when `idle_seen` (no receive backlog that could still fill the queues).
    #[inline]
    pub(crate) fn schedule(
        &mut self,
        pause: &PauseRegs,
        now: u64,
        idle_seen: bool,
    ) -> Option<Pick> {
        if !self.link.can_start(now) {
            return None;
        }
        let pick = self.qs.pick(pause, now);
        if pick.is_none() && idle_seen {
            self.link.idle(now);
        }
        pick
    }

    /// Starts `len` bytes of `pkt`'s frame on the emulated wire.
    #[inline]
    pub(crate) fn shape(&mut self, pkt: &Pkt, len: u32, now: u64) {
        self.link.start(pkt.frame, len, now);
    }

    /// Frames whose serialization and propagation have elapsed go to `out.tx`.
    #[inline]
    pub(crate) fn transmit(&mut self, now: u64, out: &mut Outputs) {
        while let Some(f) = self.link.pop_due(now) {
            out.tx.push((f.frame, f.len));
        }
    }
}

/// What `depart` works on besides the port's queues: the pipe's schemes and buffer, the
/// port's counters and pause registers.
pub(crate) struct Departure<'a> {
    pub schemes: &'a mut Schemes,
    pub buffer: &'a mut Buffer,
    pub counters: &'a PortCounters,
    pub ledger: &'a crate::audit::Ledger,
    pub pause: &'a PauseRegs,
    pub port: usize,
    /// HPCC INT on this port: its link rate (bit/s), else `None`.
    pub int_rate_bps: Option<u64>,
}

impl Departure<'_> {
    /// A data packet leaves queue `q` of `eg` (control frames pass unchanged): the schemes'
    /// dequeue and rewrite hooks, the queue counters, the buffer release. Returns the frame's
    /// length as it goes on the wire.
    #[inline]
    pub(crate) fn depart<M: FrameMem>(
        &mut self,
        eg: &Egress,
        mem: &mut M,
        pkt: &Pkt,
        q: Option<usize>,
        now: u64,
    ) -> u32 {
        let Some(q) = q else { return pkt.len };
        self.ledger.departed(pkt.in_port, pkt.prio);
        let bytes = eg.qs.data[q].bytes();
        if let Some(rate) = self.int_rate_bps {
            self.append_int(eg, mem, pkt, rate, now);
        }
        let mut wire = pkt.len;
        if self.schemes.per_packet() {
            let view = PortView {
                port: self.port,
                nonempty: eg.qs.nonempty(),
                pause: self.pause,
            };
            self.schemes.on_dequeue(pkt, q, bytes, &view, now);
            wire = self.schemes.egress_rewrite(mem, pkt, self.port, q);
        }
        let qc = &self.counters.queues[q];
        qc.deq_pkts.add(1);
        qc.deq_bytes.add(u64::from(pkt.len));
        qc.depth_bytes.set(bytes);
        qc.depth_pkts.set(eg.qs.data[q].len() as u64);
        self.buffer.release(pkt.tag, pkt.len, now);
        wire
    }

    /// A two-level HIQ (Pyrrha §4.3): the scheduler picked IQ `from`, whose head `pkt` (taken)
    /// moves on to the next level (the IQ of the next root on its path, or its OQ) instead of
    /// the wire. The queues' counters follow the packet; its buffer stays charged to the
    /// queue it was admitted to (`pkt.queue`) until it leaves the switch.
    #[cold]
    #[inline(never)]
    pub(crate) fn hiq_move(&mut self, eg: &mut Egress, pkt: Pkt, from: usize, now: u64) {
        let view = PortView {
            port: self.port,
            nonempty: eg.qs.nonempty(),
            pause: self.pause,
        };
        let to = self
            .schemes
            .hiq_next(&pkt, from, eg.qs.data[from].bytes(), &view, now);
        let mut moved = pkt;
        let view = PortView {
            port: self.port,
            nonempty: eg.qs.nonempty(),
            pause: self.pause,
        };
        self.schemes
            .on_enqueue(&mut moved, to, eg.qs.data[to].bytes(), &view, now);
        eg.qs.push(to, moved);
        let len = u64::from(moved.len);
        let (qf, qt) = (&self.counters.queues[from], &self.counters.queues[to]);
        qf.deq_pkts.add(1);
        qf.deq_bytes.add(len);
        qf.depth_bytes.set(eg.qs.data[from].bytes());
        qf.depth_pkts.set(eg.qs.data[from].len() as u64);
        qt.enq_pkts.add(1);
        qt.enq_bytes.add(len);
        let depth = eg.qs.data[to].bytes();
        qt.depth_bytes.set(depth);
        qt.depth_pkts.set(eg.qs.data[to].len() as u64);
        qt.watermark_bytes.max(depth);
    }

    /// HPCC §3.2 (as HPCC's ns-3 `SwitchNotifyDequeue` pushes it): the port's record on a
    /// host-stack data packet that asks for INT, as it leaves: bytes still queued at the
    /// port, bytes the port has sent with this packet, the time, the link rate. Written
    /// before a scheme may push the data shim (the stack is found behind an untagged or
    /// VLAN-tagged IPv4 header). Out of line: most ports run without INT, and inlined it
    /// cost every departure ~48 instructions (bench/callgrind.sh).
    #[cold]
    #[inline(never)]
    fn append_int<M: FrameMem>(&self, eg: &Egress, mem: &mut M, pkt: &Pkt, rate: u64, now: u64) {
        if pkt.l3_type != crate::wire::EtherType::IPV4 {
            return;
        }
        let sent: u64 = self.counters.queues.iter().map(|c| c.deq_bytes.get()).sum();
        let hop = crate::wire::int::IntHop {
            qlen_bytes: eg.qs.data_bytes(),
            tx_bytes: sent + u64::from(pkt.len),
            ts_ps: now,
            rate_bps: rate,
        };
        let n = pkt.len as usize;
        mem.with_mut(pkt.frame, |d| {
            crate::wire::int::append_hop(&mut d[..n], &hop)
        });
    }
}

impl Switch {
    /// The frame the emulated wire of `port` releases next, if any.
    #[inline]
    pub fn next_on_wire(&self, port: u16) -> Option<crate::frame::FrameId> {
        self.egress
            .get(usize::from(port))?
            .as_ref()?
            .link
            .next_frame()
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

//! Control stages: the one loop that turns the schemes' control frames (PFC, Xoff signals)
//! into frames on ports' strict-priority control queues, timed scheme work, and taking
//! packets out of queues without sending them (watchdog flush, port down).

use super::{Handoff, Outputs};
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::scheme::ControlFrame;
use crate::stats::DropReason;
use crate::switch::Switch;
use std::sync::atomic::Ordering;

/// A PFC frame that pauses some class: the reaction `crate::reaction` times.
fn is_xoff(cf: &ControlFrame) -> bool {
    matches!(cf, ControlFrame::Pfc(r) if r.xoff_mask() != 0)
}

impl Switch {
    /// Moves the MMU's flow-control events into the schemes and sends the control frames
    /// they want sent now.
    /// Runs after every receive and service, so the common case (no event, nothing due) is
    /// an inlined check; the work itself stays out of line.
    #[inline(always)]
    pub(crate) fn control_out<M: FrameMem>(&mut self, mem: &mut M, now: u64, out: &mut Outputs) {
        if self.buffer.has_events() || self.schemes.poll_due(now) {
            self.emit_control(mem, now, out);
        }
    }

    #[inline(never)]
    fn emit_control<M: FrameMem>(&mut self, mem: &mut M, now: u64, out: &mut Outputs) {
        self.buffer.poll_events(&mut self.fc_events);
        self.mmu_events += self.fc_events.len() as u64;
        let mut frames = std::mem::take(&mut self.ctl_frames);
        self.schemes.poll(&mut self.fc_events, now, &mut frames);
        for (port, cf) in frames.drain(..) {
            let Some(f) = mem.alloc() else {
                // The port may belong to another pipe.
                self.shared.counters[port].drop_shared(DropReason::NoFrame);
                continue;
            };
            let len = mem.with_mut(f, |d| cf.emit(d)) as u32;
            if self.rx_stamp_ns != 0 && is_xoff(&cf) && self.owns(port) {
                // Bounded: frames that never reach a TX ring (port down) age out.
                if self.reactions.len() >= 256 {
                    self.reactions.remove(0);
                }
                self.reactions.push((f, self.rx_stamp_ns));
            }
            self.queue_control(port as u16, f, len, now, out);
        }
        self.ctl_frames = frames;
    }

    /// Queues a control frame on `port`'s strict-priority control queue; false if this pipe
    /// does not own the port.
    pub fn send_control(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: u64,
        out: &mut Outputs,
    ) -> bool {
        match self
            .egress
            .get_mut(usize::from(port))
            .and_then(Option::as_mut)
        {
            Some(eg) => {
                eg.qs.ctrl.push(Pkt::new(frame, len, port, now));
                out.touch(port);
                true
            }
            None => false,
        }
    }

    /// Queues a control frame this pipe generated: on the port's control queue if this pipe
    /// owns it, else handed to the owning pipe.
    fn queue_control(&mut self, port: u16, frame: FrameId, len: u32, now: u64, out: &mut Outputs) {
        if self.owns(usize::from(port)) {
            self.send_control(port, frame, len, now, out);
        } else {
            out.handoff.push(Handoff {
                port,
                pkt: Pkt::new(frame, len, port, now),
                ctrl: true,
            });
        }
    }

    /// Timed work of the schemes (e.g. refreshes, the PFC watchdog). Call at
    /// `next_timer()`; queues a scheme now refuses (watchdog drop) are flushed.
    pub fn on_timer<M: FrameMem>(&mut self, mem: &mut M, now: u64, out: &mut Outputs) {
        if self.schemes.timer_due(now) {
            let ports: Vec<(usize, u128, usize)> = self
                .egress
                .iter()
                .enumerate()
                .filter_map(|(p, eg)| eg.as_ref().map(|e| (p, e.qs.nonempty(), e.qs.data.len())))
                .collect();
            self.schemes.on_timer(now, &ports, &self.shared.afc);
            for &(p, nonempty, queues) in &ports {
                for q in 0..queues {
                    if nonempty & (1 << q) != 0 {
                        if let Some(r) = self.schemes.veto(p, q) {
                            self.flush_queue(mem, p, Some(q), now, r);
                        }
                    }
                }
            }
        }
        self.control_out(mem, now, out);
    }

    /// When `on_timer` next has work.
    pub fn next_timer(&self) -> Option<u64> {
        self.schemes.next_deadline()
    }

    /// Drops what `port` holds without sending it: one data queue (`Some(q)`), or everything
    /// (`None`: control queue, data queues and the frames on the wire). Schemes and the
    /// buffer see data packets leave as if dequeued.
    pub(crate) fn flush_queue<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: usize,
        queue: Option<usize>,
        now: u64,
        why: DropReason,
    ) {
        let Some(eg) = self.egress[port].as_mut() else {
            return;
        };
        let mut dropped: Vec<FrameId> = Vec::new();
        if queue.is_none() {
            dropped.extend(eg.qs.ctrl.drain().map(|p| p.frame));
        }
        let queues = match queue {
            Some(q) => q..q + 1,
            None => 0..eg.qs.data.len(),
        };
        for q in queues {
            let Some(eg) = self.egress[port].as_mut() else {
                return;
            };
            let pkts: Vec<Pkt> = eg.qs.drain_queue(q);
            let qc = &self.shared.counters[port].queues[q];
            qc.depth_bytes.set(0);
            qc.depth_pkts.set(0);
            let view = crate::scheme::PortView {
                port,
                nonempty: 0,
                pause: self.shared.afc.port(port),
            };
            for pkt in pkts {
                self.ledger.flushed(pkt.in_port, pkt.prio, why);
                self.buffer.release(pkt.tag, pkt.len, now);
                self.schemes.on_dequeue(&pkt, q, 0, &view, now);
                if queue.is_some() {
                    qc.drops.add(1);
                }
                dropped.push(pkt.frame);
            }
        }
        if queue.is_none() {
            if let Some(eg) = self.egress[port].as_mut() {
                let before = dropped.len();
                dropped.extend(eg.link.drain().map(|f| f.frame));
                self.ledger
                    .wire_dropped(port as u16, (dropped.len() - before) as u64);
            }
        }
        for frame in dropped {
            self.shared.counters[port].drop(why);
            mem.free(frame);
        }
    }

    /// Takes a port out of service: frees everything it holds and drops further traffic to it.
    pub fn port_down<M: FrameMem>(&mut self, mem: &mut M, port: usize, now: u64) {
        self.shared.up[port].store(false, Ordering::Relaxed);
        self.shared.counters[port].down.set(1);
        self.flush_queue(mem, port, None, now, DropReason::PortDown);
    }
}

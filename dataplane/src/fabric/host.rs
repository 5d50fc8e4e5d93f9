//! Host models: what sits at the host end of a fabric link.
//!
//! A host is a [`HostModel`] behind a NIC. The fabric owns the NIC (a FIFO feeding a
//! [`crate::link::Link`] that emulates the host's own line rate and propagation delay toward its
//! switch) and calls the model at start, when a timer the model set fires, and when a frame
//! arrives. Through [`HostCtx`] a model reads the time, allocates frames in the fabric's
//! arena, sends, sets timers, draws random numbers and records flow statistics. The built-in
//! [`UdpHost`] runs constant-rate and on/off sources and a sink; a later workload emulator
//! (TCP-like senders, receivers) implements the same trait.
//!
//! Data packets are real Ethernet/IPv4/UDP frames whose UDP payload starts with the 24-byte
//! [`DataHeader`] (format in [`crate::wire::data`], which the host stack shares). Priority is
//! DSCP `prio << 3`, or an 802.1Q PCP.

use super::flow::FlowLog;
use super::mem::FabricMem;
use crate::frame::{FrameId, FrameMem};
use crate::link::Link;
use crate::rng::Rng;
use crate::units::ser_ps;
use std::collections::VecDeque;

pub use crate::config::HostInfo;
pub use crate::wire::data::{
    magic_payload, magic_payload_at, DataHeader, FrameTemplate, DATA_HEADER_LEN, DATA_MAGIC,
};

/// A host NIC: one FIFO per priority in front of an emulated link toward the switch, served
/// round robin. A NIC that honours PFC (as RDMA NICs do) stops a priority while a received
/// 802.1Qbb frame says so; otherwise PFC frames are handed to the host model like any frame.
#[derive(Debug)]
pub struct Nic {
    pub link: Link,
    queues: [VecDeque<(FrameId, u32)>; 8],
    /// Bit `c` set: priority `c`'s queue holds a frame.
    nonempty: u8,
    len: usize,
    rr: usize,
    /// Frames the queues hold at most (all priorities together).
    pub limit: usize,
    pub honor_pfc: bool,
    /// Per priority: paused until this time (ps).
    pub paused_until: [u64; 8],
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    /// PFC frames received and honoured.
    pub pfc_rx: u64,
    /// Frames refused because the queue was full.
    pub refused: u64,
    /// Pending wakeup in the event heap (`u64::MAX`: none).
    pub(crate) sched: u64,
    /// BFC mode (BFC §5): per-flow NIC queues, upstreamQ in the data shim, paused and resumed
    /// per queue by Xoff signal frames. `None`: queues per priority as above.
    pub bfc: Option<NicBfc>,
    /// Per-flow cap on bytes in flight (sent, not yet received; BFC partial deployment).
    pub inflight_cap: Option<u64>,
    /// Frames held back by `inflight_cap`.
    pub capped: u64,
}

/// The BFC side of a host NIC: one FIFO of frames per NIC queue, flows (by FID hash) assigned
/// to queues on first sight and never released (so flow k of a host takes queue k mod n; see
/// [`crate::host::nicq`], which the host stack shares).
pub type NicBfc = crate::host::nicq::NicQueues<(FrameId, u32, u32)>;

impl Nic {
    pub fn new(rate_bps: u64, delay_ps: u64, limit: usize) -> Self {
        Nic {
            link: Link::new(rate_bps, delay_ps, 0),
            queues: Default::default(),
            nonempty: 0,
            len: 0,
            rr: 0,
            limit,
            honor_pfc: false,
            paused_until: [0; 8],
            tx_pkts: 0,
            tx_bytes: 0,
            rx_pkts: 0,
            rx_bytes: 0,
            pfc_rx: 0,
            refused: 0,
            sched: u64::MAX,
            bfc: None,
            inflight_cap: None,
            capped: 0,
        }
    }

    /// Frames queued (all priorities).
    pub fn backlog(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, prio: u8, frame: FrameId, len: u32) {
        self.queues[usize::from(prio & 7)].push_back((frame, len));
        self.nonempty |= 1 << (prio & 7);
        self.len += 1;
    }

    /// The next frame to send at `now`: round robin over unpaused, non-empty priorities.
    fn pop(&mut self, now: u64) -> Option<(FrameId, u32)> {
        if self.len == 0 {
            return None;
        }
        if let Some(b) = self.bfc.as_mut() {
            if let Some((q, (f, len, fid))) = b.pop_indexed() {
                // Items carry the FID hash: Aquarius's per-flow pause follows departures.
                b.departed(fid, q);
                self.len -= 1;
                return Some((f, len));
            }
        }
        // Round robin from `rr` over the non-empty priorities that are not paused.
        let mut m = self.nonempty.rotate_right(self.rr as u32);
        while m != 0 {
            let c = (self.rr + m.trailing_zeros() as usize) % 8;
            m &= m - 1;
            if self.paused_until[c] <= now {
                self.rr = (c + 1) % 8;
                self.len -= 1;
                let q = &mut self.queues[c];
                let head = q.pop_front();
                if q.is_empty() {
                    self.nonempty &= !(1 << c);
                }
                return head;
            }
        }
        None
    }

    /// Applies a received PFC frame if this NIC honours PFC; true if it was one.
    pub(crate) fn on_pfc(&mut self, frame: &[u8], now: u64) -> bool {
        use flowctl::wire::pfc::{quanta_to_ps, Frame, PfcRepr};
        if !self.honor_pfc {
            return false;
        }
        let Ok(f) = Frame::new_checked(frame) else {
            return false;
        };
        let Ok(r) = PfcRepr::parse(&f) else {
            return false;
        };
        for c in 0..8 {
            if r.class_enable & (1 << c) != 0 {
                self.paused_until[c] = match r.quanta[c] {
                    0 => 0,
                    q => now.saturating_add(quanta_to_ps(q, self.link.rate_bps)),
                };
            }
        }
        self.pfc_rx += 1;
        true
    }

    /// Applies a received Xoff signal frame if this NIC runs BFC; true if it was one.
    pub(crate) fn on_bfc_signal(&mut self, frame: &[u8]) -> bool {
        self.bfc
            .as_mut()
            .is_some_and(|b| b.on_signal_keyed(frame, |x| Some(x.2)))
    }

    /// Starts queued frames as the link allows and returns when it next needs service.
    pub(crate) fn service(&mut self, now: u64, out: &mut Vec<(FrameId, u32)>) -> Option<u64> {
        while self.link.can_start(now) {
            let Some((f, len)) = self.pop(now) else {
                break;
            };
            self.link.start(f, len, now);
            self.tx_pkts += 1;
            self.tx_bytes += u64::from(len);
        }
        while let Some(f) = self.link.pop_due(now) {
            out.push((f.frame, f.len));
        }
        let mut t = self.link.next_release();
        let mut upd = |x: u64| t = Some(t.map_or(x, |y: u64| y.min(x)));
        if let Some(b) = self.bfc.as_ref().filter(|_| self.len > 0) {
            // BFC queues wait for a resume frame, which services the NIC.
            if b.has_eligible() {
                upd(now.max(self.link.free_at()));
            }
        }
        if self.len > 0 {
            // Eligible now (link permitting), or when the earliest pause of a non-empty
            // priority lapses.
            let mut ready = None::<u64>;
            let mut m = self.nonempty;
            while m != 0 {
                let c = m.trailing_zeros() as usize;
                m &= m - 1;
                let r = self.paused_until[c].max(now);
                ready = Some(ready.map_or(r, |x| x.min(r)));
            }
            if let Some(r) = ready {
                upd(r.max(self.link.free_at()));
            }
        }
        t
    }
}

/// The world as a host model sees it during one call.
pub struct HostCtx<'a> {
    /// Current virtual time, ps.
    pub now: u64,
    pub info: &'a HostInfo,
    pub mem: &'a mut FabricMem,
    pub flows: &'a mut FlowLog,
    /// This host's random stream (seeded from the sim seed).
    pub rng: &'a mut Rng,
    /// End of the traffic window: sources send nothing at or after it.
    pub traffic_end: Option<u64>,
    pub(crate) nic: &'a mut Nic,
    pub(crate) timers: &'a mut Vec<(u64, u64)>,
}

impl HostCtx<'_> {
    /// Whether the NIC queue has room for another frame.
    pub fn can_send(&self) -> bool {
        self.nic.backlog() < self.nic.limit
    }

    /// Frames waiting in the NIC queue.
    pub fn nic_backlog(&self) -> usize {
        self.nic.backlog()
    }

    /// Queues `frame` on the NIC. If the queue is full (or the frame's flow is at the NIC's
    /// in-flight cap) the frame is freed and `false` returned.
    pub fn send(&mut self, frame: FrameId, len: u32) -> bool {
        self.send_as(frame, len, None)
    }

    /// [`HostCtx::send`] of a frame whose NIC priority the caller read from the same headers
    /// before (`prio`: what [`nic_prio`] gives for this frame), so it is not parsed again.
    fn send_as(&mut self, frame: FrameId, len: u32, prio: Option<u8>) -> bool {
        if let Some(cap) = self.nic.inflight_cap {
            let data = &self.mem.data(frame)[..len as usize];
            let inflight = DataHeader::parse(data)
                .and_then(|h| self.flows.flows.get(h.flow as usize))
                .map_or(0, |r| r.tx_bytes.saturating_sub(r.rx_bytes));
            if inflight + u64::from(len) > cap {
                self.nic.capped += 1;
                self.mem.free(frame);
                return false;
            }
        }
        if self.can_send() && self.nic.bfc.is_some() {
            // BFC NIC: the flow's NIC queue, carried as upstreamQ in the data shim.
            let fid = crate::parse::parse(&self.mem.data(frame)[..len as usize])
                .map(|m| crate::scheme::flow_id(&m))
                .unwrap_or(0);
            let Some(b) = self.nic.bfc.as_mut() else {
                return false;
            };
            let q = b.queue_of(fid);
            let len = crate::scheme::shim_push(self.mem, frame, len, usize::from(q));
            b.push(usize::from(q), (frame, len, fid));
            self.nic.len += 1;
            return true;
        }
        if self.can_send() {
            let prio = prio.unwrap_or_else(|| nic_prio(&self.mem.data(frame)[..len as usize]));
            self.nic.push(prio, frame, len);
            true
        } else {
            self.nic.refused += 1;
            self.mem.free(frame);
            false
        }
    }

    /// Calls the model's `on_timer(token)` at time `at` (not before now).
    pub fn set_timer(&mut self, at: u64, token: u64) {
        self.timers.push((at.max(self.now), token));
    }
}

/// The NIC queue of a frame: its priority read as a switch would (PCP, else DSCP >> 3).
fn nic_prio(frame: &[u8]) -> u8 {
    crate::parse::parse(frame)
        .map(|m| {
            let dscp = match m.l3 {
                crate::parse::L3::Ip { dscp, .. } => Some(dscp >> 3),
                crate::parse::L3::None => None,
            };
            m.pcp.or(dscp).unwrap_or(0)
        })
        .unwrap_or(0)
}

/// A host's behaviour in the fabric.
pub trait HostModel {
    /// Called once at time 0.
    fn start(&mut self, ctx: &mut HostCtx<'_>);
    /// A timer set with [`HostCtx::set_timer`] fired.
    fn on_timer(&mut self, ctx: &mut HostCtx<'_>, token: u64);
    /// A frame arrived (its last bit, at `ctx.now`). The model owns it: free it or send it.
    fn on_receive(&mut self, ctx: &mut HostCtx<'_>, frame: FrameId, len: u32);
}

/// The sink every built-in host runs: parses the data header, records the packet in the
/// flow log and frees the frame.
pub fn sink_receive(ctx: &mut HostCtx<'_>, frame: FrameId, len: u32) {
    let data = ctx.mem.data(frame);
    match DataHeader::parse(&data[..(len as usize).min(data.len())]) {
        Some(h) => ctx.flows.record_rx(h.flow, h.seq, h.sent_ps, len, ctx.now),
        None => ctx.flows.unknown_rx += 1,
    }
    ctx.mem.free(frame);
}

/// On/off behaviour of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    Always,
    /// Periods of `on` ps sending and `off` ps silent; exponential with these means if
    /// `random`.
    Periods {
        on: u64,
        off: u64,
        random: bool,
    },
}

/// A UDP-like source: one flow at a constant rate (optionally on/off), from `start` until
/// `stop` or until `size` bytes are sent.
#[derive(Debug, Clone)]
pub struct Source {
    pub flow: u32,
    pub tmpl: FrameTemplate,
    /// Frame length (the last frame of a sized flow may be shorter).
    pub pkt: u32,
    /// Sending rate in wire bits per second.
    pub rate_bps: u64,
    pub start: u64,
    pub stop: Option<u64>,
    /// Bytes still to send (`None`: unbounded).
    pub remaining: Option<u64>,
    pub onoff: OnOff,
    /// Random stream for on/off periods.
    pub rng: Rng,
    seq: u64,
    /// End of the current on period.
    period_end: u64,
    /// Headers of a full-size frame, prebuilt.
    hdr: Vec<u8>,
    /// NIC priority of a full-size frame (read once from the prebuilt frame: every full-size
    /// frame has the same headers).
    prio: u8,
}

impl Source {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        tmpl: FrameTemplate,
        pkt: u32,
        rate_bps: u64,
        start: u64,
        stop: Option<u64>,
        size: Option<u64>,
        onoff: OnOff,
        rng: Rng,
    ) -> Self {
        let pkt = pkt.max(tmpl.min_len() as u32);
        let mut hdr = vec![0u8; tmpl.payload_off()];
        let mut full = vec![0u8; pkt as usize];
        tmpl.emit_headers(&mut full, pkt as usize);
        hdr.copy_from_slice(&full[..tmpl.payload_off()]);
        let prio = nic_prio(&full);
        Source {
            flow,
            tmpl,
            pkt,
            rate_bps,
            start,
            stop,
            remaining: size,
            onoff,
            rng,
            seq: 0,
            period_end: u64::MAX,
            hdr,
            prio,
        }
    }

    /// Packets a sized flow sends.
    pub fn total_pkts(&self) -> Option<u64> {
        self.remaining.map(|s| s.div_ceil(u64::from(self.pkt)))
    }

    fn draw(&mut self, mean: u64, random: bool) -> u64 {
        if random {
            self.rng.exp(mean)
        } else {
            mean
        }
    }

    /// Sends the packet due now (if any) and sets the timer for the next one.
    pub fn fire(&mut self, ctx: &mut HostCtx<'_>, token: u64) {
        let now = ctx.now;
        let stop = match (self.stop, ctx.traffic_end) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(u64::MAX),
        };
        if now >= stop || self.remaining == Some(0) {
            return;
        }
        if let OnOff::Periods { on, off, random } = self.onoff {
            if self.period_end == u64::MAX {
                self.period_end = now + self.draw(on, random);
            } else if now >= self.period_end {
                let next_on = self.period_end + self.draw(off, random);
                self.period_end = next_on + self.draw(on, random);
                if next_on < stop {
                    ctx.set_timer(next_on, token);
                }
                return;
            }
        }
        let len = match self.remaining {
            Some(r) if r < u64::from(self.pkt) => (r as u32).max(self.tmpl.min_len() as u32),
            _ => self.pkt,
        };
        let sent = if ctx.can_send() {
            ctx.mem.alloc().map(|f| {
                let h = DataHeader {
                    flow: self.flow,
                    seq: self.seq,
                    sent_ps: now,
                };
                let (tmpl, hdr) = (&self.tmpl, &self.hdr);
                ctx.mem.with_mut(f, |d| {
                    let off = if len == self.pkt {
                        d[..hdr.len()].copy_from_slice(hdr);
                        hdr.len()
                    } else {
                        tmpl.emit_headers(d, len as usize)
                    };
                    h.emit(&mut d[off..off + DATA_HEADER_LEN]);
                });
                ctx.send_as(f, len, (len == self.pkt).then_some(self.prio))
            })
        } else {
            None
        };
        if sent == Some(true) {
            ctx.flows.record_tx(self.flow, len);
            self.seq += 1;
            if let Some(r) = self.remaining.as_mut() {
                *r = r.saturating_sub(u64::from(len));
            }
        } else {
            ctx.flows.record_blocked(self.flow);
        }
        let next = now + ser_ps(u64::from(len), self.rate_bps).max(1);
        if self.remaining != Some(0) && next < stop {
            ctx.set_timer(next, token);
        }
    }
}

/// The built-in host: any number of sources and a sink.
#[derive(Debug, Clone, Default)]
pub struct UdpHost {
    pub sources: Vec<Source>,
}

impl HostModel for UdpHost {
    fn start(&mut self, ctx: &mut HostCtx<'_>) {
        for (i, s) in self.sources.iter().enumerate() {
            ctx.set_timer(s.start, i as u64);
        }
    }

    fn on_timer(&mut self, ctx: &mut HostCtx<'_>, token: u64) {
        if let Some(s) = self.sources.get_mut(token as usize) {
            s.fire(ctx, token);
        }
    }

    fn on_receive(&mut self, ctx: &mut HostCtx<'_>, frame: FrameId, len: u32) {
        sink_receive(ctx, frame, len);
    }
}

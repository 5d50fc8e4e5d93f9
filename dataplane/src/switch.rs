//! The switch pipeline: the one implementation of forwarding, queueing, scheduling and link
//! emulation, run on AF_XDP ports by `xoff run` and on in-memory ports by the virtual-time
//! fabric.
//!
//! Per packet (run to completion): parse → classify (PCP/DSCP → priority → queue) → forward
//! (FIB, ECMP) → rewrite if routed → buffer admission → enqueue. Per egress port: scheduler
//! (control queue, strict, DRR; paused queues skipped) → shaper → delay line → transmit.
//! A `Switch` is one pipeline ("pipe") owning the egress side of a subset of the ports; with
//! one worker it owns them all. Frames bound for a port another pipe owns are handed off.

use crate::buffer::{BufReq, Buffer};
use crate::config::{PrioSource, SwitchSpec};
use crate::fc::FlowControl;
use crate::fib::{Fib, Forward};
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::link::Link;
use crate::parse::{self, PacketMeta, L3};
use crate::queue::QueueSet;
use crate::stats::{DropReason, PortCounters, SwitchSnapshot};
use crate::wire::{EtherType, EthernetFrame};
use flowctl::Afc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// State shared by all pipes of a switch: configuration, FIB, counters, pause registers.
#[derive(Debug)]
pub struct SwitchShared {
    pub spec: SwitchSpec,
    pub fib: Fib,
    pub counters: Vec<PortCounters>,
    /// The AFC unit: pause registers of every port's data queues, written only by commands.
    pub afc: Afc,
    pub up: Vec<AtomicBool>,
    /// BFC pause counters and statistics (`scheme = "bfc"`), shared by the pipes.
    pub bfc: Option<Arc<flowctl::BfcShared>>,
}

impl SwitchShared {
    pub fn new(spec: SwitchSpec) -> Arc<Self> {
        Arc::new(SwitchShared {
            fib: Fib::new(&spec),
            counters: spec
                .ports
                .iter()
                .map(|p| PortCounters::new(p.queues))
                .collect(),
            afc: Afc::new(spec.ports.iter().map(|p| p.queues)),
            up: spec.ports.iter().map(|_| AtomicBool::new(true)).collect(),
            bfc: spec
                .bfc
                .as_ref()
                .map(|_| Arc::new(flowctl::BfcShared::new(spec.ports.len()))),
            spec,
        })
    }

    pub fn ports(&self) -> usize {
        self.spec.ports.len()
    }

    pub fn is_up(&self, p: usize) -> bool {
        self.up[p].load(Ordering::Relaxed)
    }

    /// Counters of all ports.
    pub fn snapshot(&self, uptime_s: f64, mmu: Option<serde_json::Value>) -> SwitchSnapshot {
        SwitchSnapshot {
            switch: self.spec.name.clone(),
            uptime_s,
            ports: self
                .counters
                .iter()
                .zip(&self.spec.ports)
                .map(|(c, p)| c.snapshot(&p.name))
                .collect(),
            mmu,
            pfc: None,
            afc_applied: self.afc.applied(),
            afc_refused: self.afc.refused(),
            afc_ring_full: None,
        }
    }
}

/// A packet bound for a port owned by another pipe.
#[derive(Debug, Clone, Copy)]
pub struct Handoff {
    pub port: u16,
    pub pkt: Pkt,
    /// A control frame (PFC) for the port's control queue rather than a data packet.
    pub ctrl: bool,
}

/// Errors building a pipeline from a switch's configuration.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("buffer: {0}")]
    Mmu(#[from] mmu::MmuError),
    #[error("pfc: {0}")]
    Pfc(#[from] flowctl::PfcError),
    #[error("bfc: {0}")]
    Bfc(#[from] flowctl::BfcError),
}

struct Egress {
    qs: QueueSet,
    link: Link,
}

/// One pipeline of a switch.
pub struct Switch {
    pub shared: Arc<SwitchShared>,
    /// Which pipe owns each port's egress.
    owner: Vec<u16>,
    me: u16,
    egress: Vec<Option<Egress>>,
    buffer: Buffer,
    fc_events: Vec<mmu::FcEvent>,
    fc: FlowControl,
    pfc_buf: Vec<(usize, flowctl::wire::pfc::PfcRepr)>,
    /// Control frames generated for ports another pipe owns.
    ctrl_out: Vec<Handoff>,
    /// With `track_touched`: ports that got packets or control frames since the last
    /// `take_touched` (an event-driven caller services just those).
    touched: Vec<u16>,
    track: bool,
    /// BFC (`scheme = "bfc"`), if configured.
    bfc: Option<Box<crate::fc::BfcGlue>>,
}

/// Default shaper catch-up window for real-time pipes. A worker that was descheduled (2 cores
/// shared with the hosts' stacks) or woke late may start frames up to this far in the past, so
/// the emulated rate holds over any window longer than this; the cost is a burst of at most
/// this much line time after a stall.
pub const REALTIME_MAX_LAG_PS: u64 = 5_000_000_000; // 5 ms

impl Switch {
    /// A pipe owning the ports `p` with `owner[p] == me`. `pipes` divides the MMU's buffer.
    /// `max_lag_ps` is the shaper's catch-up window (0 in virtual time, where nothing is late).
    pub fn new(
        shared: Arc<SwitchShared>,
        owner: Vec<u16>,
        me: u16,
        max_lag_ps: u64,
    ) -> Result<Self, SwitchError> {
        let pipes = u64::from(owner.iter().copied().max().unwrap_or(0)) + 1;
        let spec = &shared.spec;
        let egress = spec
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (owner[i] == me).then(|| Egress {
                    qs: QueueSet::new(p),
                    link: Link::new(p.rate_bps, p.delay_ps, max_lag_ps),
                })
            })
            .collect();
        let buffer = Buffer::new(spec.buffer.as_ref(), &spec.ports, pipes)?;
        let fc = FlowControl::new(spec)?;
        let bfc = crate::fc::BfcGlue::new(spec, shared.bfc.as_ref(), me == 0)?.map(Box::new);
        Ok(Switch {
            bfc,
            owner,
            me,
            egress,
            buffer,
            fc_events: Vec::new(),
            fc,
            pfc_buf: Vec::new(),
            ctrl_out: Vec::new(),
            touched: Vec::new(),
            track: false,
            shared,
        })
    }

    /// A single pipe owning every port.
    pub fn single(spec: SwitchSpec, max_lag_ps: u64) -> Result<Self, SwitchError> {
        let n = spec.ports.len();
        Self::new(SwitchShared::new(spec), vec![0; n], 0, max_lag_ps)
    }

    pub fn owns(&self, port: usize) -> bool {
        self.owner.get(port) == Some(&self.me)
    }

    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    fn classify(&self, in_port: usize, m: &PacketMeta) -> u8 {
        let dscp = match m.l3 {
            L3::Ip { dscp, .. } => Some(dscp >> 3),
            L3::None => None,
        };
        match self.shared.spec.ports[in_port].prio_source {
            PrioSource::Pcp => m.pcp.unwrap_or(0),
            PrioSource::Dscp => dscp.unwrap_or(0),
            PrioSource::Auto => m.pcp.or(dscp).unwrap_or(0),
        }
    }

    fn drop_at(&self, port: usize, mem: &mut impl FrameMem, f: FrameId, r: DropReason) {
        self.shared.counters[port].drop(r);
        mem.free(f);
    }

    /// Processes a frame received on `in_port`. Packets for ports this pipe does not own are
    /// appended to `handoff`; everything else is enqueued or dropped (and counted) here.
    pub fn receive<M: FrameMem>(
        &mut self,
        mem: &mut M,
        in_port: u16,
        frame: FrameId,
        len: u32,
        now: u64,
        handoff: &mut Vec<Handoff>,
    ) {
        let ip = usize::from(in_port);
        let c = &self.shared.counters[ip];
        c.rx_pkts.add(1);
        c.rx_bytes.add(u64::from(len));
        if len as usize > mem.room() {
            return self.drop_at(ip, mem, frame, DropReason::Oversize);
        }
        let (upq, len) = match self.bfc.as_mut() {
            Some(b) => {
                let (upq, len) = crate::fc::BfcGlue::ingress_shim(mem, frame, len);
                if upq != flowctl::bfc::NO_UPQ {
                    // The peer speaks BFC (e.g. a BFC NIC): it gets the bitmap refresh too.
                    b.bfc.note_signal_port(ip);
                }
                (upq, len)
            }
            None => (flowctl::bfc::NO_UPQ, len),
        };
        let meta = match parse::parse(&mem.data(frame)[..len as usize]) {
            Ok(m) => m,
            Err(r) => return self.drop_at(ip, mem, frame, r),
        };
        if meta.ethertype == EtherType::MAC_CONTROL {
            // Link-local: never forwarded. PFC/PAUSE act on this port's egress queues.
            let ok =
                self.fc
                    .on_mac_control(ip, &mem.data(frame)[..len as usize], now, &self.shared.afc);
            if ok {
                mem.free(frame);
                return;
            }
            return self.drop_at(ip, mem, frame, DropReason::MacControl);
        }
        if meta.ethertype == EtherType::XOFF_SIGNAL {
            // Link-local: BFC signals act on this port's egress queues.
            if let Some(sh) = self.shared.bfc.as_ref() {
                let d = &mem.data(frame)[..len as usize];
                if crate::fc::BfcGlue::on_signal(sh, ip, d, &self.shared.afc, now) {
                    mem.free(frame);
                    if self.track && self.owns(ip) {
                        // A resumed queue may be eligible now.
                        self.touched.push(in_port);
                    }
                    return;
                }
            }
            return self.drop_at(ip, mem, frame, DropReason::MacControl);
        }
        let prio = self.classify(ip, &meta);
        let mut pkt = Pkt::new(frame, len, in_port, now);
        pkt.prio = prio;
        pkt.ect = meta.ecn_capable();
        if self.bfc.is_some() {
            pkt.upq = upq;
            pkt.fid = crate::fc::BfcGlue::fid(&meta);
        }
        if matches!(meta.l3, L3::Ip { .. }) {
            pkt.l3_type = meta.ethertype;
            pkt.l3_off = meta.l3_off as u8;
        }
        let fwd = self.shared.fib.forward(in_port, &meta);
        match fwd {
            Forward::Drop(r) => self.drop_at(ip, mem, frame, r),
            Forward::Bridge(p) => self.dispatch(mem, p, pkt, now, handoff),
            Forward::Route(nh) => {
                let out_mac = self.shared.spec.ports[usize::from(nh.port)].mac;
                mem.with_mut(frame, |d| {
                    let data = &mut d[..len as usize];
                    let mut eth = EthernetFrame::new_unchecked(&mut *data);
                    eth.set_dst_addr(nh.mac);
                    eth.set_src_addr(out_mac);
                    parse::decrement_ttl(data, &meta);
                });
                self.dispatch(mem, nh.port, pkt, now, handoff)
            }
            Forward::Flood => {
                let targets: Vec<u16> = (0..self.shared.ports())
                    .filter(|&p| p != ip && self.shared.spec.ports[p].flood && self.shared.is_up(p))
                    .map(|p| p as u16)
                    .collect();
                let Some((&last, rest)) = targets.split_last() else {
                    return self.drop_at(ip, mem, frame, DropReason::NoRoute);
                };
                for &p in rest {
                    let Some(copy) = mem.alloc() else {
                        self.shared.counters[ip].drop(DropReason::NoFrame);
                        continue;
                    };
                    mem.copy_frame(frame, copy, len as usize);
                    self.dispatch(mem, p, Pkt { frame: copy, ..pkt }, now, handoff);
                }
                self.dispatch(mem, last, pkt, now, handoff)
            }
        }
    }

    fn dispatch<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: u16,
        mut pkt: Pkt,
        now: u64,
        handoff: &mut Vec<Handoff>,
    ) {
        let p = usize::from(port);
        pkt.queue = self.shared.spec.ports[p].prio_map[usize::from(pkt.prio & 7)] as u8;
        if self.owns(p) {
            self.enqueue(mem, port, pkt, now);
        } else {
            handoff.push(Handoff {
                port,
                pkt,
                ctrl: false,
            });
        }
    }

    /// Admits `pkt` to a data queue of `port` (owned by this pipe) or drops it.
    pub fn enqueue<M: FrameMem>(&mut self, mem: &mut M, port: u16, mut pkt: Pkt, now: u64) {
        let p = usize::from(port);
        let Some(eg) = self.egress[p].as_mut() else {
            return self.drop_at(p, mem, pkt.frame, DropReason::PortDown);
        };
        if !self.shared.is_up(p) {
            return self.drop_at(p, mem, pkt.frame, DropReason::PortDown);
        }
        if let Some(b) = self.bfc.as_mut() {
            // BFC replaces the priority map for data traffic (§3.3.1).
            let paused = self.shared.afc.port(p).paused_mask(now);
            let a = b.bfc.assign(p, pkt.fid, eg.qs.nonempty(), paused, now);
            pkt.queue = a.queue;
            pkt.bfc_slot = a.slot;
        }
        let q = usize::from(pkt.queue);
        if self.fc.drops(p, q) {
            if let Some(b) = self.bfc.as_mut() {
                b.bfc.unassign(pkt.bfc_slot, now);
            }
            self.shared.counters[p].queues[q].drops.add(1);
            return self.drop_at(p, mem, pkt.frame, DropReason::PfcWatchdog);
        }
        let qc = &self.shared.counters[p].queues[q];
        let req = BufReq {
            in_port: usize::from(pkt.in_port),
            prio: usize::from(pkt.prio),
            out_port: p,
            queue: q,
            bytes: pkt.len,
            ecn_capable: pkt.ect,
            queue_bytes: eg.qs.data[q].bytes(),
        };
        match self.buffer.admit(&req, now) {
            Err(r) => {
                if let Some(b) = self.bfc.as_mut() {
                    b.bfc.unassign(pkt.bfc_slot, now);
                }
                qc.drops.add(1);
                self.shared.counters[p].drop(r);
                mem.free(pkt.frame);
            }
            Ok((tag, mark)) => {
                pkt.tag = tag;
                if let Some(b) = self.bfc.as_mut() {
                    let (bytes, ne) = (eg.qs.data[q].bytes(), eg.qs.nonempty());
                    b.on_enqueue(&mut pkt, p, q, bytes, ne, &self.shared.afc.port(p), now);
                }
                if mark && pkt.l3_type != 0 {
                    let meta_off = usize::from(pkt.l3_off);
                    let (l3_type, n) = (pkt.l3_type, pkt.len as usize);
                    mem.with_mut(pkt.frame, |d| mark_ce(&mut d[..n], l3_type, meta_off));
                    qc.ecn_marked.add(1);
                }
                eg.qs.push(q, pkt);
                if self.track {
                    self.touched.push(port);
                }
                qc.enq_pkts.add(1);
                qc.enq_bytes.add(u64::from(pkt.len));
                let depth = eg.qs.data[q].bytes();
                qc.depth_bytes.set(depth);
                qc.depth_pkts.set(eg.qs.data[q].len() as u64);
                qc.watermark_bytes.max(depth);
            }
        }
        self.pump_control(mem, now);
    }

    /// Moves MMU events into the flow-control engine and queues the frames it wants sent.
    fn pump_control<M: FrameMem>(&mut self, mem: &mut M, now: u64) {
        if self.bfc.is_some() {
            self.pump_bfc(mem, now);
        }
        self.buffer.poll_events(&mut self.fc_events);
        if !self.fc_events.is_empty() {
            self.fc.on_mmu_events(&mut self.fc_events, now);
        }
        self.fc.poll(now, &mut self.pfc_buf);
        if self.pfc_buf.is_empty() {
            return;
        }
        let mut frames = std::mem::take(&mut self.pfc_buf);
        for (port, repr) in frames.drain(..) {
            let Some(f) = mem.alloc() else {
                self.shared.counters[port].drop(DropReason::NoFrame);
                continue;
            };
            let len = mem.with_mut(f, |d| crate::fc::emit_pfc(&repr, d)) as u32;
            self.queue_control(port as u16, f, len, now);
        }
        self.pfc_buf = frames;
    }

    /// Sends the BFC signals collected since the last call (and the pause-bitmap refresh
    /// when due) as Xoff signal frames on the control queues.
    fn pump_bfc<M: FrameMem>(&mut self, mem: &mut M, now: u64) {
        let Some(b) = self.bfc.as_mut() else { return };
        b.bfc.refresh_due(now);
        b.bfc.refresh(now, &mut b.sig);
        if b.sig.is_empty() {
            return;
        }
        let mut sig = std::mem::take(&mut b.sig);
        for (port, repr) in sig.drain(..) {
            let Some(f) = mem.alloc() else {
                self.shared.counters[port].drop(DropReason::NoFrame);
                continue;
            };
            let len = mem.with_mut(f, |d| repr.emit_into(d)) as u32;
            self.queue_control(port as u16, f, len, now);
        }
        if let Some(b) = self.bfc.as_mut() {
            b.sig = sig;
        }
    }

    /// Timed work of flow control (PFC refresh, watchdog). Call at `next_timer()`.
    pub fn on_timer<M: FrameMem>(&mut self, mem: &mut M, now: u64) {
        if self.fc.watchdog_due(now) {
            let mut views = Vec::new();
            for (p, eg) in self.egress.iter().enumerate() {
                let Some(eg) = eg else { continue };
                for (q, fifo) in eg.qs.data.iter().enumerate() {
                    views.push(flowctl::QueueView {
                        port: p,
                        queue: q,
                        paused: self.shared.afc.port(p).is_paused(q, now),
                        has_packets: !fifo.is_empty(),
                        last_pause_frame_ps: self
                            .fc
                            .pfc
                            .as_ref()
                            .and_then(|x| x.last_xoff_rx_queue(p, q)),
                    });
                }
            }
            self.fc.watchdog_tick(now, &views, &self.shared.afc);
            for v in views {
                if self.fc.drops(v.port, v.queue) && v.has_packets {
                    self.flush_queue(mem, v.port, v.queue, now, DropReason::PfcWatchdog);
                }
            }
        }
        self.pump_control(mem, now);
    }

    /// When `on_timer` next has work.
    pub fn next_timer(&self) -> Option<u64> {
        let t = self.fc.next_deadline();
        match self.bfc.as_ref().and_then(|b| b.bfc.pending_refresh()) {
            Some(r) => Some(t.map_or(r, |t| t.min(r))),
            None => t,
        }
    }

    /// Drops everything in one data queue.
    fn flush_queue<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: usize,
        q: usize,
        now: u64,
        why: DropReason,
    ) {
        let Some(eg) = self.egress[port].as_mut() else {
            return;
        };
        let pkts: Vec<Pkt> = eg.qs.drain_queue(q);
        let qc = &self.shared.counters[port].queues[q];
        qc.depth_bytes.set(0);
        qc.depth_pkts.set(0);
        for pkt in pkts {
            let req = BufReq::leaving(&pkt, port, q);
            self.buffer.release(&req, pkt.tag, now);
            if let Some(b) = self.bfc.as_mut() {
                b.on_dequeue(port, q, &pkt, 0, 0, &self.shared.afc.port(port), now);
            }
            qc.drops.add(1);
            self.shared.counters[port].drop(why);
            mem.free(pkt.frame);
        }
    }

    /// Control frames for ports owned by other pipes (multi-worker runtime).
    pub fn take_ctrl_handoffs(&mut self, out: &mut Vec<Handoff>) {
        out.append(&mut self.ctrl_out);
    }

    /// Records the ports that get packets or control frames, for `take_touched`.
    pub fn track_touched(&mut self) {
        self.track = true;
    }

    /// Ports that got packets or control frames queued since the last call (they need
    /// service). Only recorded after `track_touched`.
    pub fn take_touched(&mut self, out: &mut Vec<u16>) {
        out.append(&mut self.touched);
    }

    /// Flow-control counters (PFC per port and priority, watchdog), if configured.
    pub fn fc_stats_json(&self, now: u64) -> Option<serde_json::Value> {
        let fc = self.fc.stats_json(now);
        let Some(sh) = self.shared.bfc.as_ref() else {
            return fc;
        };
        let mut v = fc.unwrap_or_else(|| serde_json::json!({}));
        v["bfc"] = crate::fc::BfcGlue::stats_json(sh);
        Some(v)
    }

    /// MMU events raised so far.
    pub fn mmu_events(&self) -> u64 {
        self.fc.mmu_events
    }

    /// Queues a control frame (PFC, Xoff signal) on `port`'s strict-priority control queue.
    pub fn send_control(&mut self, port: u16, frame: FrameId, len: u32, now: u64) -> bool {
        match self
            .egress
            .get_mut(usize::from(port))
            .and_then(Option::as_mut)
        {
            Some(eg) => {
                eg.qs.ctrl.push(Pkt::new(frame, len, port, now));
                if self.track {
                    self.touched.push(port);
                }
                true
            }
            None => false,
        }
    }

    /// Queues a control frame this pipe generated: on the port's control queue if this pipe
    /// owns it, else handed to the owning pipe.
    fn queue_control(&mut self, port: u16, frame: FrameId, len: u32, now: u64) {
        if self.owns(usize::from(port)) {
            self.send_control(port, frame, len, now);
        } else {
            let pkt = Pkt::new(frame, len, port, now);
            self.ctrl_out.push(Handoff {
                port,
                pkt,
                ctrl: true,
            });
        }
    }

    /// Runs the egress of `port` up to `now`: starts frames on the wire as the shaper allows
    /// and appends frames whose wire time has elapsed to `tx` (frame, length).
    pub fn service<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: u16,
        now: u64,
        tx: &mut Vec<(FrameId, u32)>,
    ) {
        let p = usize::from(port);
        let Some(eg) = self.egress[p].as_mut() else {
            return;
        };
        let pause = &self.shared.afc.port(p);
        while eg.link.can_start(now) {
            let Some((pkt, q)) = eg.qs.dequeue(pause, now) else {
                break;
            };
            match (self.bfc.as_mut(), q) {
                (Some(b), Some(q)) => {
                    let (bytes, ne) = (eg.qs.data[q].bytes(), eg.qs.nonempty());
                    b.on_dequeue(p, q, &pkt, bytes, ne, pause, now);
                    let mut wire = pkt;
                    if b.shim[p] {
                        // Toward a BFC peer: carry the queue the packet left from.
                        wire.len = crate::fc::BfcGlue::push_shim(mem, pkt.frame, pkt.len, q);
                    }
                    eg.link.start(wire, now);
                }
                _ => {
                    eg.link.start(pkt, now);
                }
            }
            if let Some(q) = q {
                let qc = &self.shared.counters[p].queues[q];
                qc.deq_pkts.add(1);
                qc.deq_bytes.add(u64::from(pkt.len));
                qc.depth_bytes.set(eg.qs.data[q].bytes());
                qc.depth_pkts.set(eg.qs.data[q].len() as u64);
                let req = BufReq::leaving(&pkt, p, q);
                self.buffer.release(&req, pkt.tag, now);
            }
        }
        while let Some(f) = eg.link.pop_due(now) {
            tx.push((f.pkt.frame, f.pkt.len));
        }
        self.pump_control(mem, now);
    }

    /// The next time `port` needs `service` (None: idle until something arrives).
    pub fn next_wakeup(&self, port: u16, now: u64) -> Option<u64> {
        let p = usize::from(port);
        let eg = self.egress[p].as_ref()?;
        let pause = &self.shared.afc.port(p);
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

    /// Bytes queued in the data queues of `port`.
    pub fn queue_bytes(&self, port: usize, queue: usize) -> u64 {
        self.egress[port]
            .as_ref()
            .map_or(0, |e| e.qs.data[queue].bytes())
    }

    /// Takes a port out of service: frees everything it holds and drops further traffic to it.
    pub fn port_down<M: FrameMem>(&mut self, mem: &mut M, port: usize, now: u64) {
        self.shared.up[port].store(false, Ordering::Relaxed);
        self.shared.counters[port].down.set(1);
        let Some(eg) = self.egress[port].as_mut() else {
            return;
        };
        let mut flushed = Vec::new();
        flushed.extend(eg.qs.ctrl.drain());
        for (q, fifo) in eg.qs.data.iter_mut().enumerate() {
            for pkt in fifo.drain() {
                let req = BufReq::leaving(&pkt, port, q);
                self.buffer.release(&req, pkt.tag, now);
                if let Some(b) = self.bfc.as_mut() {
                    b.on_dequeue(port, q, &pkt, 0, 0, &self.shared.afc.port(port), now);
                }
                flushed.push(pkt);
            }
        }
        flushed.extend(eg.link.drain().map(|f| f.pkt));
        for pkt in flushed {
            self.shared.counters[port].drop(DropReason::PortDown);
            mem.free(pkt.frame);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Topology;
    use crate::frame::HeapMem;
    use crate::wire::{EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
    use std::net::Ipv4Addr;
    use std::path::Path;

    const TOPO: &str = r#"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", delay = "1us", queues = 2 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }]
route = [{ prefix = "10.0.9.0/24", via = ["p3"] }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.9.1/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
"#;

    fn setup() -> (Topology, Switch, HeapMem) {
        let t = Topology::parse(TOPO, Path::new("t.toml")).unwrap();
        let sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
        (t, sw, HeapMem::new(64, 1792))
    }

    fn frame(
        mem: &mut HeapMem,
        src: MacAddr,
        dst: MacAddr,
        dip: [u8; 4],
        len: usize,
    ) -> (FrameId, u32) {
        let mut f = vec![0u8; len];
        EthernetRepr {
            src,
            dst,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::from(dip),
            protocol: 17,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            payload_len: len - 34,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
        (mem.alloc_with(&f).unwrap(), len as u32)
    }

    /// Services `port` at every wakeup from time 0 up to `t`, as the fabric's event loop does.
    fn run_until(sw: &mut Switch, mem: &mut HeapMem, port: u16, t: u64) -> Vec<(FrameId, u32)> {
        let mut tx = Vec::new();
        let mut now = 0;
        loop {
            sw.service(mem, port, now, &mut tx);
            match sw.next_wakeup(port, now) {
                Some(w) if w <= t && w > now => now = w,
                _ => return tx,
            }
        }
    }

    #[test]
    fn bridges_known_host_and_times_the_wire() {
        let (t, mut sw, mut mem) = setup();
        let (h1, h2) = (t.host_mac(&t.hosts[0]), t.host_mac(&t.hosts[1]));
        let (f, len) = frame(&mut mem, h1, h2, [10, 0, 0, 2], 1500);
        let mut ho = Vec::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        assert!(ho.is_empty());
        // 1520 B at 100 Gbit/s = 121.6 ns, plus 1 µs propagation.
        let due = 121_600 + 1_000_000;
        assert_eq!(sw.next_wakeup(1, 0), Some(0));
        let mut tx = Vec::new();
        sw.service(&mut mem, 1, 0, &mut tx);
        assert!(tx.is_empty());
        assert_eq!(sw.next_wakeup(1, 0), Some(due));
        sw.service(&mut mem, 1, due - 1, &mut tx);
        assert!(tx.is_empty());
        sw.service(&mut mem, 1, due, &mut tx);
        assert_eq!(tx, vec![(f, len)]);
        assert_eq!(sw.shared.counters[1].queues[0].watermark_bytes.get(), 1500);
    }

    #[test]
    fn routes_with_rewrite_and_drops_malformed() {
        let (t, mut sw, mut mem) = setup();
        let h1 = t.host_mac(&t.hosts[0]);
        let router = sw.shared.spec.ports[0].mac;
        let (f, len) = frame(&mut mem, h1, router, [10, 0, 9, 1], 100);
        let mut ho = Vec::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        let tx = run_until(&mut sw, &mut mem, 2, 10_000_000);
        assert_eq!(tx.len(), 1);
        let d = &mem.data(tx[0].0)[..100];
        let eth = EthernetFrame::new_checked(d).unwrap();
        assert_eq!(eth.dst_addr(), t.host_mac(&t.hosts[2]));
        assert_eq!(eth.src_addr(), sw.shared.spec.ports[2].mac);
        let ip = Ipv4Packet::new_checked(&d[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        // A truncated IPv4 header is counted and dropped; the frame is recycled.
        let free = mem.available();
        let (g, _) = frame(&mut mem, h1, router, [10, 0, 9, 1], 100);
        sw.receive(&mut mem, 0, g, 20, 0, &mut ho);
        assert_eq!(
            sw.shared.counters[0].drops[DropReason::TruncatedIpv4.index()].get(),
            1
        );
        assert_eq!(mem.available(), free);
    }

    #[test]
    fn floods_broadcast_to_all_other_ports() {
        let (t, mut sw, mut mem) = setup();
        let (f, len) = frame(
            &mut mem,
            t.host_mac(&t.hosts[0]),
            MacAddr::BROADCAST,
            [10, 0, 0, 255],
            64,
        );
        let mut ho = Vec::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        for p in [1u16, 2] {
            let tx = run_until(&mut sw, &mut mem, p, 10_000_000);
            assert_eq!(tx.len(), 1, "port {p}");
            assert_eq!(
                EthernetFrame::new_checked(&mem.data(tx[0].0)[..64])
                    .unwrap()
                    .dst_addr(),
                MacAddr::BROADCAST
            );
        }
        assert!(run_until(&mut sw, &mut mem, 0, 10_000_000).is_empty());
    }
}

//! Flow-control schemes as plug-ins of the pipeline.
//!
//! A switch runs a *list* of schemes (e.g. BFC with PFC beside it as the fallback, as the BFC
//! paper keeps it). Each scheme is one decision module in `flowctl` plus one adapter file here
//! that moves packets, frames and events between the pipeline and that module; [`Scheme`] is
//! the enum that dispatches to the adapters (no `dyn` on the per-packet path). The pipeline
//! stages (`crate::pipeline`) call the hooks of [`Schemes`] and never name a scheme.
//!
//! Hooks, in the order a packet meets them:
//! - [`Schemes::on_control`]: a link-local control frame arrived (PFC, Xoff signal); the
//!   scheme that knows it consumes it and pauses/resumes queues through the AFC unit.
//! - [`Schemes::on_ingress`]: before parsing (pop the data shim into the packet's metadata).
//! - [`Schemes::on_parsed`]: after parsing (flow id).
//! - [`Schemes::select_queue`]: the egress queue, given a view of the port's queues and pauses.
//! - [`Schemes::veto`] / [`Schemes::on_drop`]: refuse a packet / hear that one was dropped
//!   before it was queued.
//! - [`Schemes::on_enqueue`], [`Schemes::on_dequeue`]: after admission, on leaving a queue.
//! - [`Schemes::egress_rewrite`]: the frame as it goes on the wire (push the data shim).
//! - [`Schemes::poll`]: MMU events in, control frames out; [`Schemes::next_deadline`] and
//!   [`Schemes::on_timer`] for timed work; [`Schemes::stats`] for typed counters.
//!
//! Adding a scheme: a decision module in `flowctl` (or `loadbal`), an adapter file here, one
//! arm in [`Scheme`] (and in each `match` of this file), and its section of the statistics.

pub mod aquarius;
pub mod bfc;
// issue 18 (branch conga): CONGA, Proteus's baseline.
pub mod conga;
pub mod pfc;
pub mod proteus;
pub mod pyrrha;

use crate::config::SwitchSpec;
use crate::frame::{FrameMem, Pkt};
use crate::parse::PacketMeta;
use crate::stats::DropReason;
use flowctl::wire::pfc::PfcRepr;
use flowctl::wire::signal::SignalRepr;
use flowctl::{Afc, PauseRegs};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Per-packet state a scheme keeps with a queued packet. Opaque to the pipeline, which only
/// carries it (through queues and between pipes); the default means "nothing recorded" (for
/// BFC: no flow-table slot, no upstream queue, no mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PktMeta(pub(crate) [u32; 3]);

impl Default for PktMeta {
    fn default() -> Self {
        PktMeta([0, flowctl::bfc::NO_SLOT, u32::from(flowctl::bfc::NO_UPQ)])
    }
}

/// What a scheme sees of an egress port: which data queues hold packets and which are paused.
#[derive(Debug, Clone, Copy)]
pub struct PortView<'a> {
    pub port: usize,
    /// Bitmap of non-empty data queues.
    pub nonempty: u128,
    /// The port's AFC pause registers.
    pub pause: &'a PauseRegs,
}

impl PortView<'_> {
    /// Active queues that are not paused (`N_active` of BFC's `Th`, `NQ_active` of Aquarius's
    /// thresholds): the non-empty queues plus `extra` (e.g. the queue a packet is entering).
    #[inline]
    pub fn active_unpaused(&self, extra: u128, now: u64) -> u32 {
        ((self.nonempty | extra) & !self.pause.paused_mask(now)).count_ones()
    }

    /// The view with the queues of `mask` left out (a scheme's reserved, strict queues).
    #[inline]
    pub fn without(&self, mask: u128) -> Self {
        PortView {
            nonempty: self.nonempty & !mask,
            ..*self
        }
    }
}

/// The bitmap of queue indices `qs` (indices beyond 127 ignored).
pub fn queue_mask(qs: &[usize]) -> u128 {
    qs.iter()
        .filter(|&&q| q < 128)
        .fold(0u128, |m, &q| m | (1 << q))
}

/// An Xoff signal frame (EtherType 0x88B5) received as `frame`, parsed; `None` for another
/// EtherType or a malformed frame (the schemes that read signals share this).
#[inline]
pub fn parse_signal(ethertype: u16, frame: &[u8]) -> Option<SignalRepr> {
    use flowctl::wire::signal::Frame;
    if ethertype != crate::wire::EtherType::XOFF_SIGNAL {
        return None;
    }
    SignalRepr::parse(&Frame::new_checked(frame).ok()?).ok()
}

/// A control frame a scheme wants sent on a port's strict-priority control queue.
#[derive(Debug, Clone)]
pub enum ControlFrame {
    /// IEEE 802.1Qbb PFC.
    Pfc(PfcRepr),
    /// Xoff signal frame (EtherType 0x88B5).
    Signal(SignalRepr),
    /// Pyrrha signal frame (EtherType 0x88B5, types 0x20-0x2F).
    Pyrrha(flowctl::pyrrha::wire::PyrrhaRepr),
    /// Proteus feedback signal (EtherType 0x88B5, type 0x30).
    Proteus(flowctl::wire::proteus::FeedbackRepr),
}

impl ControlFrame {
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        match self {
            ControlFrame::Pfc(r) => pfc::emit_pfc(r, buf),
            ControlFrame::Signal(r) => r.emit_into(buf),
            ControlFrame::Pyrrha(r) => r.emit_into(buf),
            ControlFrame::Proteus(r) => r.emit(buf),
        }
    }
}

/// State of the schemes shared by all pipes of a switch (one `Arc` per scheme that has any).
#[derive(Debug, Default)]
pub struct Shared {
    pub bfc: Option<Arc<flowctl::BfcShared>>,
}

impl Shared {
    pub fn new(spec: &SwitchSpec) -> Self {
        Shared {
            bfc: spec
                .bfc
                .as_ref()
                .map(|_| Arc::new(flowctl::BfcShared::new(spec.ports.len()))),
        }
    }
}

/// Errors building the schemes of a switch.
#[derive(Debug, thiserror::Error)]
pub enum SchemeError {
    #[error("pfc: {0}")]
    Pfc(#[from] flowctl::PfcError),
    #[error("bfc: {0}")]
    Bfc(#[from] flowctl::BfcError),
    #[error("pyrrha: {0}")]
    Pyrrha(#[from] flowctl::PyrrhaError),
    #[error("aquarius: {0}")]
    Aquarius(#[from] flowctl::AquariusError),
}

/// One scheme of a switch.
#[derive(Debug)]
pub enum Scheme {
    /// PFC (802.1Qbb) and its watchdog.
    Pfc(Box<pfc::PfcScheme>),
    /// Backpressure Flow Control.
    Bfc(Box<bfc::BfcScheme>),
    /// Pyrrha: congestion roots and isolation queues.
    Pyrrha(Box<pyrrha::PyrrhaScheme>),
    /// Aquarius: contribution-aware pausing, opportunistic re-assigning.
    Aquarius(Box<aquarius::AquariusScheme>),
    /// Proteus: PFC-aware source routing over the topology's paths (a path scheme).
    Proteus(Box<proteus::ProteusScheme>),
    /// CONGA: flowlets on leaf-to-leaf congestion fed back on reverse traffic (a path scheme).
    Conga(Box<conga::CongaScheme>),
}

/// Typed counters of a pipe's schemes, serialized only at the control socket and in reports.
/// Fields are in alphabetical order: the JSON reads as it did when it was a sorted map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemeStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aquarius: Option<aquarius::AquariusStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfc: Option<bfc::BfcStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conga: Option<conga::CongaStats>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<pfc::PfcStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proteus: Option<proteus::ProteusStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pyrrha: Option<pyrrha::PyrrhaStats>,
}

/// The per-pipe scheme statistics of a switch: one pipe's, or one per pipe (several workers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatsSet {
    One(Box<SchemeStats>),
    PerPipe(Vec<SchemeStats>),
}

impl StatsSet {
    /// Collects the pipes' statistics (`None` if no pipe has any).
    pub fn collect(per: Vec<SchemeStats>) -> Option<Self> {
        match per.len() {
            0 => None,
            1 => per.into_iter().next().map(|s| StatsSet::One(Box::new(s))),
            _ => Some(StatsSet::PerPipe(per)),
        }
    }

    /// Every pipe's statistics.
    pub fn pipes(&self) -> &[SchemeStats] {
        match self {
            StatsSet::One(s) => std::slice::from_ref(&**s),
            StatsSet::PerPipe(v) => v,
        }
    }

    /// PFC frames of one kind sent or received on `port`, summed over pipes and priorities.
    pub fn pfc_total(&self, port: usize, what: pfc::PfcCount) -> u64 {
        self.pipes()
            .iter()
            .filter_map(|s| s.pfc.as_ref())
            .map(|p| p.total(port, what))
            .sum()
    }

    /// BFC counters of `port` (shared by the pipes: the first pipe that reports them).
    pub fn bfc_port(&self, port: usize) -> Option<&bfc::BfcPortStats> {
        self.pipes()
            .iter()
            .find_map(|s| s.bfc.as_ref().and_then(|b| b.ports.get(port)))
    }
}

/// The schemes of one pipe, in three slots, in hook order: a path scheme that routes by
/// itself (Proteus), the scheme that assigns data queues and keeps per-packet state (at most
/// one, as an ASIC has one queue-assignment pipeline: BFC, Pyrrha or Aquarius), then PFC and
/// its watchdog beside them as the link-level fallback. Slots rather than a `Vec`: each
/// per-packet hook goes straight to the scheme that has work there instead of looping over a
/// list (that loop cost ~100 instructions per packet, `bench/callgrind.sh`), and PFC, which has
/// no per-packet work, is only met by `veto` and the control-frame hooks.
#[derive(Debug, Default)]
pub struct Schemes {
    /// A scheme that chooses the path itself (Proteus), before the path policy.
    path: Option<Scheme>,
    queues: Option<Scheme>,
    pfc: Option<Scheme>,
}

impl Scheme {
    // One `match` per hook: adding a scheme adds one arm to each. PFC has no per-packet work.

    fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        match self {
            Scheme::Pfc(p) => p.on_control(port, ethertype, frame, afc, now),
            Scheme::Bfc(b) => b.on_control(port, ethertype, frame, afc, now),
            Scheme::Pyrrha(p) => p.on_control(port, ethertype, frame, afc, now),
            Scheme::Aquarius(a) => a.on_control(port, ethertype, frame, afc, now),
            Scheme::Proteus(p) => p.on_control(port, ethertype, frame, now),
            Scheme::Conga(_) => None,
        }
    }

    #[inline(always)]
    fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        match self {
            Scheme::Bfc(b) => b.on_ingress(mem, pkt),
            Scheme::Aquarius(a) => a.on_ingress(mem, pkt),
            Scheme::Proteus(p) => p.on_ingress(mem, pkt),
            Scheme::Conga(c) => c.on_ingress(mem, pkt),
            Scheme::Pfc(_) | Scheme::Pyrrha(_) => {}
        }
    }

    #[inline(always)]
    fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        match self {
            Scheme::Bfc(b) => b.on_parsed(pkt, meta),
            Scheme::Pyrrha(p) => p.on_parsed(pkt, meta),
            Scheme::Aquarius(a) => a.on_parsed(pkt, meta),
            Scheme::Pfc(_) | Scheme::Proteus(_) | Scheme::Conga(_) => {}
        }
    }

    #[inline(always)]
    fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        match self {
            Scheme::Bfc(b) => b.select_queue(pkt, view, now),
            Scheme::Pyrrha(p) => p.select_queue(pkt, view, now),
            Scheme::Aquarius(a) => a.select_queue(pkt, view, now),
            Scheme::Pfc(_) | Scheme::Proteus(_) | Scheme::Conga(_) => {}
        }
    }

    #[inline(always)]
    fn on_drop(&mut self, pkt: &Pkt, now: u64) {
        match self {
            Scheme::Bfc(b) => b.on_drop(pkt, now),
            Scheme::Aquarius(a) => a.on_drop(pkt, now),
            Scheme::Pfc(_) | Scheme::Pyrrha(_) | Scheme::Proteus(_) | Scheme::Conga(_) => {}
        }
    }

    #[inline(always)]
    fn on_enqueue(
        &mut self,
        pkt: &mut Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        match self {
            Scheme::Bfc(b) => b.on_enqueue(pkt, queue, queue_bytes, view, now),
            Scheme::Pyrrha(p) => p.on_enqueue(pkt, queue, queue_bytes, view, now),
            Scheme::Aquarius(a) => a.on_enqueue(pkt, queue, queue_bytes, view, now),
            Scheme::Pfc(_) | Scheme::Proteus(_) | Scheme::Conga(_) => {}
        }
    }

    #[inline(always)]
    fn on_dequeue(
        &mut self,
        pkt: &Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        match self {
            Scheme::Bfc(b) => b.on_dequeue(pkt, queue, queue_bytes, view, now),
            Scheme::Pyrrha(p) => p.on_dequeue(queue, queue_bytes, view, now),
            Scheme::Aquarius(a) => a.on_dequeue(pkt, queue, view, now),
            Scheme::Proteus(p) => p.on_dequeue(now),
            Scheme::Conga(c) => c.on_dequeue(now),
            Scheme::Pfc(_) => {}
        }
    }

    #[inline(always)]
    fn egress_rewrite<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &Pkt,
        len: u32,
        port: usize,
        queue: usize,
    ) -> u32 {
        match self {
            Scheme::Bfc(b) => b.egress_rewrite(mem, pkt.frame, len, port, queue),
            Scheme::Aquarius(a) => a.egress_rewrite(mem, pkt.frame, len, port, queue),
            Scheme::Proteus(p) => p.egress_rewrite(mem, pkt, len, port),
            Scheme::Conga(c) => c.egress_rewrite(mem, pkt, len, port),
            Scheme::Pfc(_) | Scheme::Pyrrha(_) => len,
        }
    }

    fn poll(&mut self, events: &[mmu::FcEvent], now: u64, out: &mut Vec<(usize, ControlFrame)>) {
        match self {
            Scheme::Pfc(p) => p.poll(events, now, out),
            Scheme::Bfc(b) => b.poll(now, out),
            Scheme::Pyrrha(p) => p.poll(out),
            Scheme::Aquarius(a) => a.poll(out),
            Scheme::Proteus(p) => p.poll(now, out),
            Scheme::Conga(_) => {}
        }
    }

    #[inline(always)]
    fn poll_due(&self, now: u64) -> bool {
        match self {
            Scheme::Pfc(p) => p.poll_due(now),
            Scheme::Bfc(b) => b.poll_due(now),
            Scheme::Pyrrha(p) => p.poll_due(),
            Scheme::Aquarius(a) => a.poll_due(),
            Scheme::Proteus(p) => p.poll_due(now),
            Scheme::Conga(_) => false,
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        match self {
            Scheme::Pfc(p) => p.next_deadline(),
            Scheme::Bfc(b) => b.next_deadline(),
            Scheme::Pyrrha(_) => None,
            Scheme::Aquarius(a) => a.next_deadline(),
            Scheme::Proteus(p) => p.next_deadline(),
            Scheme::Conga(_) => None,
        }
    }

    /// Timed work beyond `poll` is due (the PFC watchdog, Aquarius's deferred queue commands).
    fn timer_due(&self, now: u64) -> bool {
        match self {
            Scheme::Pfc(p) => p.watchdog_due(now),
            Scheme::Aquarius(a) => a.timer_due(now),
            Scheme::Bfc(_) | Scheme::Pyrrha(_) | Scheme::Proteus(_) | Scheme::Conga(_) => false,
        }
    }

    fn on_timer(&mut self, now: u64, ports: &[(usize, u128, usize)], afc: &Afc) {
        match self {
            Scheme::Pfc(p) => p.watchdog_tick(now, ports, afc),
            Scheme::Aquarius(a) => a.on_timer(now, afc),
            Scheme::Bfc(_) | Scheme::Pyrrha(_) | Scheme::Proteus(_) | Scheme::Conga(_) => {}
        }
    }
}

impl Schemes {
    /// The schemes `spec` configures. The queue scheme (if any) runs before PFC, so a pipe
    /// sends BFC's signals before the PFC frames raised in the same round. `first_pipe`: this
    /// pipe does a switch's once-per-switch work (BFC's pause-bitmap refresh).
    pub fn new(spec: &SwitchSpec, shared: &Shared, first_pipe: bool) -> Result<Self, SchemeError> {
        let queues = match bfc::BfcScheme::new(spec, shared.bfc.as_ref(), first_pipe)? {
            Some(b) => Some(Scheme::Bfc(Box::new(b))),
            None => match pyrrha::PyrrhaScheme::new(spec)? {
                Some(p) => Some(Scheme::Pyrrha(Box::new(p))),
                None => aquarius::AquariusScheme::new(spec)?.map(|a| Scheme::Aquarius(Box::new(a))),
            },
        };
        let pfc = pfc::PfcScheme::new(spec, queues.is_some())?.map(|p| Scheme::Pfc(Box::new(p)));
        let path = match proteus::ProteusScheme::new(spec) {
            Some(p) => Some(Scheme::Proteus(Box::new(p))),
            None => conga::CongaScheme::new(spec).map(|c| Scheme::Conga(Box::new(c))),
        };
        Ok(Schemes { path, queues, pfc })
    }

    /// The schemes, in hook order.
    pub fn list(&self) -> Vec<&Scheme> {
        self.each().collect()
    }

    fn each_mut(&mut self) -> impl Iterator<Item = &mut Scheme> {
        self.path
            .iter_mut()
            .chain(self.queues.iter_mut())
            .chain(self.pfc.iter_mut())
    }

    fn each(&self) -> impl Iterator<Item = &Scheme> {
        self.path
            .iter()
            .chain(self.queues.iter())
            .chain(self.pfc.iter())
    }

    /// The PFC scheme, if configured.
    pub fn pfc(&self) -> Option<&pfc::PfcScheme> {
        match &self.pfc {
            Some(Scheme::Pfc(p)) => Some(p),
            _ => None,
        }
    }

    /// A link-local control frame (`ethertype`) arrived on `port`. `Some(wake)` if a scheme
    /// consumed it (`wake`: it resumed queues of `port`, which may have work now); `None` if
    /// no scheme knows it (the pipeline counts and drops it).
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        self.each_mut()
            .find_map(|s| s.on_control(port, ethertype, frame, afc, now))
    }

    /// Before parsing: a scheme may strip a header it added upstream (the data shim).
    #[inline]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        // The outer header first: the queue scheme's shim is pushed last (`egress_rewrite`).
        if let Some(s) = &mut self.queues {
            s.on_ingress(mem, pkt);
        }
        if let Some(s) = &mut self.path {
            s.on_ingress(mem, pkt);
        }
    }

    /// After parsing: per-flow metadata.
    #[inline]
    pub fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        if let Some(s) = &mut self.queues {
            s.on_parsed(pkt, meta);
        }
    }

    /// Whether a path scheme routes packets itself (`route`).
    #[inline]
    pub fn routes(&self) -> bool {
        self.path.is_some()
    }

    /// A scheme that routes by itself (Proteus's source routing) picks among the `n`
    /// equal-cost candidates `view` describes; `None` leaves it to the path policy.
    #[inline]
    pub fn route(
        &mut self,
        pkt: &mut Pkt,
        t: &loadbal::FiveTuple,
        n: usize,
        view: impl Fn(usize) -> loadbal::Candidate,
        now: u64,
    ) -> Option<usize> {
        match &mut self.path {
            Some(Scheme::Proteus(p)) => p.route(pkt, t, n, &view, now),
            Some(Scheme::Conga(c)) => c.route(pkt, t, n, &view, now),
            _ => None,
        }
    }

    /// Chooses the data queue of `pkt` on its egress port (`pkt.queue` holds the static
    /// choice by priority; a scheme with dynamic queues overrides it).
    #[inline]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        if let Some(s) = &mut self.queues {
            s.select_queue(pkt, view, now);
        }
    }

    /// Whether a scheme refuses packets for (`port`, `queue`) (the PFC watchdog's drop action).
    #[inline]
    pub fn veto(&self, port: usize, queue: usize) -> Option<DropReason> {
        match &self.pfc {
            Some(Scheme::Pfc(p)) => p.veto(port, queue),
            _ => None,
        }
    }

    /// `pkt` was dropped after queue selection, before it was queued.
    #[inline]
    pub fn on_drop(&mut self, pkt: &Pkt, now: u64) {
        if let Some(s) = &mut self.queues {
            s.on_drop(pkt, now);
        }
    }

    /// `pkt` was admitted to `queue` (holding `queue_bytes` before it) of the viewed port.
    #[inline]
    pub fn on_enqueue(
        &mut self,
        pkt: &mut Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        if let Some(s) = &mut self.queues {
            s.on_enqueue(pkt, queue, queue_bytes, view, now);
        }
    }

    /// A two-level HIQ (Pyrrha, `iq_mode = "two-level"`): whether the scheduler's pick of
    /// data queue `queue` of `port` is an IQ, whose head moves on to the next level
    /// ([`Self::hiq_next`]) instead of going on the wire.
    #[inline]
    pub fn hiq_moves(&self, port: usize, queue: usize) -> bool {
        match &self.queues {
            Some(Scheme::Pyrrha(p)) => p.hiq_moves(port, queue),
            _ => false,
        }
    }

    /// A two-level HIQ: `pkt` left IQ `queue` (now `queue_bytes`); the queue it moves into.
    /// The caller enqueues it there with [`Self::on_enqueue`].
    pub fn hiq_next(
        &mut self,
        pkt: &Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) -> usize {
        match &mut self.queues {
            Some(Scheme::Pyrrha(p)) => p.hiq_next(pkt, queue, queue_bytes, view, now),
            _ => queue,
        }
    }

    /// `pkt` left `queue` (sent or flushed), which now holds `queue_bytes`; `view` is the port
    /// after it left.
    #[inline]
    pub fn on_dequeue(
        &mut self,
        pkt: &Pkt,
        queue: usize,
        queue_bytes: u64,
        view: &PortView<'_>,
        now: u64,
    ) {
        if let Some(s) = &mut self.queues {
            s.on_dequeue(pkt, queue, queue_bytes, view, now);
        }
        if let Some(s) = &mut self.path {
            s.on_dequeue(pkt, queue, queue_bytes, view, now);
        }
    }

    /// The frame of `pkt` goes on the wire of `port` from `queue`: returns its wire length
    /// (a scheme may push a header toward a peer that speaks it).
    #[inline]
    pub fn egress_rewrite<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &Pkt,
        port: usize,
        queue: usize,
    ) -> u32 {
        let mut len = pkt.len;
        if let Some(s) = &mut self.path {
            len = s.egress_rewrite(mem, pkt, len, port, queue);
        }
        if let Some(s) = &mut self.queues {
            len = s.egress_rewrite(mem, pkt, len, port, queue);
        }
        len
    }

    /// Feeds the MMU's flow-control events (drained by the caller) and collects the control
    /// frames the schemes want sent now.
    pub fn poll(
        &mut self,
        events: &mut Vec<mmu::FcEvent>,
        now: u64,
        out: &mut Vec<(usize, ControlFrame)>,
    ) {
        for s in self.each_mut() {
            s.poll(events, now, out);
        }
        events.clear();
    }

    /// Whether `poll` has work at `now` without MMU events (a frame or timer is due): lets
    /// the pipeline skip the poll on the common path.
    #[inline(always)]
    pub fn poll_due(&self, now: u64) -> bool {
        self.path.as_ref().is_some_and(|s| s.poll_due(now))
            || self.queues.as_ref().is_some_and(|s| s.poll_due(now))
            || self.pfc.as_ref().is_some_and(|s| s.poll_due(now))
    }

    /// Whether a queue or path scheme is configured (without one, the per-packet hooks have
    /// nothing to do and the stages skip building views for them).
    #[inline]
    pub fn per_packet(&self) -> bool {
        self.queues.is_some() || self.path.is_some()
    }

    /// When `on_timer` (or `poll`) next has work, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        self.each().filter_map(Scheme::next_deadline).min()
    }

    /// Whether a scheme has timed work at `now` beyond `poll` (the PFC watchdog).
    pub fn timer_due(&self, now: u64) -> bool {
        self.each().any(|s| s.timer_due(now))
    }

    /// Timed work over the queues of the ports this pipe owns (`ports`: port, non-empty
    /// bitmap, number of data queues).
    pub fn on_timer(&mut self, now: u64, ports: &[(usize, u128, usize)], afc: &Afc) {
        for s in self.each_mut() {
            s.on_timer(now, ports, afc);
        }
    }

    /// Typed counters (`None` when no scheme is configured). `mmu_events`: flow-control
    /// events the pipe's MMU raised.
    pub fn stats(&self, shared: &Shared, mmu_events: u64, now: u64) -> Option<SchemeStats> {
        let pfc = self.pfc().map(|p| p.stats(mmu_events, now));
        let bfc = shared.bfc.as_deref().map(bfc::BfcStats::of);
        let pyrrha = match &self.queues {
            Some(Scheme::Pyrrha(p)) => Some(p.pyrrha.stats().clone()),
            _ => None,
        };
        let aquarius = match &self.queues {
            Some(Scheme::Aquarius(a)) => Some(a.stats()),
            _ => None,
        };
        let proteus = match &self.path {
            Some(Scheme::Proteus(p)) => Some(p.stats()),
            _ => None,
        };
        let conga = match &self.path {
            Some(Scheme::Conga(c)) => Some(c.stats()),
            _ => None,
        };
        let any = pfc.is_some()
            || bfc.is_some()
            || conga.is_some()
            || pyrrha.is_some()
            || aquarius.is_some()
            || proteus.is_some();
        any.then_some(SchemeStats {
            aquarius,
            bfc,
            conga,
            pfc,
            proteus,
            pyrrha,
        })
    }
}

/// The flow identifier hash of a parsed frame (5-tuple, else the MAC addresses and
/// EtherType), shared by the schemes that keep per-flow state.
#[inline(always)]
pub fn flow_id(m: &PacketMeta) -> u32 {
    let ip = |a: &std::net::IpAddr| match a {
        std::net::IpAddr::V4(v) => u128::from(u32::from(*v)),
        std::net::IpAddr::V6(v) => u128::from(*v),
    };
    match m.five_tuple() {
        Some(t) => flowctl::bfc::fid_hash(ip(&t.src), ip(&t.dst), t.sport, t.dport, t.proto),
        None => {
            let mac = |a: [u8; 6]| a.iter().fold(0u128, |x, &b| (x << 8) | u128::from(b));
            flowctl::bfc::fid_hash(mac(m.src.0), mac(m.dst.0), m.ethertype, 0, 0)
        }
    }
}

/// Strips the Xoff data shim of a received frame, if it has one: (the upstream queue it
/// carries, the new length).
#[inline]
pub fn shim_pop(mem: &mut impl FrameMem, f: crate::FrameId, len: u32) -> Option<(u8, u32)> {
    use flowctl::wire::shim::{ShimRepr, ETHERTYPE_XOFF_SHIM};
    let d = mem.data(f);
    if len < 18 || d[12..14] != ETHERTYPE_XOFF_SHIM.to_be_bytes() {
        return None;
    }
    mem.with_mut(f, |d| {
        ShimRepr::pop(&mut d[..len as usize], len as usize)
            .ok()
            .map(|(r, n)| (r.upstream_q, n as u32))
    })
}

/// Pushes the Xoff data shim carrying `queue` into a frame; returns the new length (unchanged
/// if the chunk has no room).
#[inline]
pub fn shim_push(mem: &mut impl FrameMem, f: crate::FrameId, len: u32, queue: usize) -> u32 {
    let r = flowctl::wire::shim::ShimRepr {
        upstream_q: queue as u8,
    };
    mem.with_mut(f, |d| r.push(d, len as usize))
        .map_or(len, |n| n as u32)
}

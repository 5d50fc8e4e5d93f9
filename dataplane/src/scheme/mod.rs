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

pub mod bfc;
pub mod pfc;
// issue 18 (branch proteus)
pub mod proteus;

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

/// A control frame a scheme wants sent on a port's strict-priority control queue.
#[derive(Debug, Clone)]
pub enum ControlFrame {
    /// IEEE 802.1Qbb PFC.
    Pfc(PfcRepr),
    /// Xoff signal frame (EtherType 0x88B5).
    Signal(SignalRepr),
    /// Proteus feedback signal (EtherType 0x88B5, type 0x10; issue 18).
    Proteus(flowctl::wire::proteus::FeedbackRepr),
}

impl ControlFrame {
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        match self {
            ControlFrame::Pfc(r) => pfc::emit_pfc(r, buf),
            ControlFrame::Signal(r) => r.emit_into(buf),
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
}

/// One scheme of a switch.
#[derive(Debug)]
pub enum Scheme {
    /// PFC (802.1Qbb) and its watchdog.
    Pfc(Box<pfc::PfcScheme>),
    /// Backpressure Flow Control.
    Bfc(Box<bfc::BfcScheme>),
    /// Proteus load balancing (issue 18).
    Proteus(Box<proteus::ProteusScheme>),
}

/// Typed counters of a pipe's schemes, serialized only at the control socket and in reports.
/// Fields are in alphabetical order: the JSON reads as it did when it was a sorted map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemeStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfc: Option<bfc::BfcStats>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<pfc::PfcStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proteus: Option<proteus::ProteusStats>,
}

/// The per-pipe scheme statistics of a switch: one pipe's, or one per pipe (several workers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatsSet {
    One(SchemeStats),
    PerPipe(Vec<SchemeStats>),
}

impl StatsSet {
    /// Collects the pipes' statistics (`None` if no pipe has any).
    pub fn collect(per: Vec<SchemeStats>) -> Option<Self> {
        match per.len() {
            0 => None,
            1 => per.into_iter().next().map(StatsSet::One),
            _ => Some(StatsSet::PerPipe(per)),
        }
    }

    /// Every pipe's statistics.
    pub fn pipes(&self) -> &[SchemeStats] {
        match self {
            StatsSet::One(s) => std::slice::from_ref(s),
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

/// The schemes of one pipe, in the order their hooks run.
#[derive(Debug, Default)]
pub struct Schemes {
    list: Vec<Scheme>,
}

impl Schemes {
    /// The schemes `spec` configures. BFC (if any) runs before PFC, so a pipe sends BFC's
    /// signals before the PFC frames raised in the same round. `first_pipe`: this pipe does a
    /// switch's once-per-switch work (BFC's pause-bitmap refresh).
    pub fn new(spec: &SwitchSpec, shared: &Shared, first_pipe: bool) -> Result<Self, SchemeError> {
        let mut list = Vec::new();
        // Proteus first: its ingress hook pops the version-2 shim before anything reads it.
        if let Some(p) = proteus::ProteusScheme::new(spec) {
            list.push(Scheme::Proteus(Box::new(p)));
        }
        if let Some(b) = bfc::BfcScheme::new(spec, shared.bfc.as_ref(), first_pipe)? {
            list.push(Scheme::Bfc(Box::new(b)));
        }
        let dynamic_queues = list.iter().any(|s| matches!(s, Scheme::Bfc(_)));
        if let Some(p) = pfc::PfcScheme::new(spec, dynamic_queues)? {
            list.push(Scheme::Pfc(Box::new(p)));
        }
        Ok(Schemes { list })
    }

    /// The schemes, in hook order.
    pub fn list(&self) -> &[Scheme] {
        &self.list
    }

    /// The PFC scheme, if configured.
    pub fn pfc(&self) -> Option<&pfc::PfcScheme> {
        self.list.iter().find_map(|s| match s {
            Scheme::Pfc(p) => Some(&**p),
            _ => None,
        })
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
        self.list.iter_mut().find_map(|s| match s {
            Scheme::Pfc(p) => p.on_control(port, ethertype, frame, afc, now),
            Scheme::Bfc(b) => b.on_control(port, ethertype, frame, afc, now),
            Scheme::Proteus(p) => p.on_control(ethertype, frame, now),
        })
    }

    /// Before parsing: a scheme may strip a header it added upstream (the data shim).
    #[inline]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        for s in &mut self.list {
            match s {
                Scheme::Bfc(b) => b.on_ingress(mem, pkt),
                Scheme::Proteus(p) => p.on_ingress(mem, pkt),
                Scheme::Pfc(_) => {}
            }
        }
    }

    /// After parsing: per-flow metadata.
    #[inline]
    pub fn on_parsed(&mut self, pkt: &mut Pkt, meta: &PacketMeta) {
        for s in &mut self.list {
            if let Scheme::Bfc(b) = s {
                b.on_parsed(pkt, meta);
            }
        }
    }

    /// Chooses the data queue of `pkt` on its egress port (`pkt.queue` holds the static
    /// choice by priority; a scheme with dynamic queues overrides it).
    #[inline]
    pub fn select_queue(&mut self, pkt: &mut Pkt, view: &PortView<'_>, now: u64) {
        for s in &mut self.list {
            if let Scheme::Bfc(b) = s {
                b.select_queue(pkt, view, now);
            }
        }
    }

    /// Whether a scheme refuses packets for (`port`, `queue`) (the PFC watchdog's drop action).
    #[inline]
    pub fn veto(&self, port: usize, queue: usize) -> Option<DropReason> {
        self.list.iter().find_map(|s| match s {
            Scheme::Pfc(p) => p.veto(port, queue),
            Scheme::Bfc(_) | Scheme::Proteus(_) => None,
        })
    }

    /// `pkt` was dropped after queue selection, before it was queued.
    #[inline]
    pub fn on_drop(&mut self, pkt: &Pkt, now: u64) {
        for s in &mut self.list {
            if let Scheme::Bfc(b) = s {
                b.on_drop(pkt, now);
            }
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
        for s in &mut self.list {
            if let Scheme::Bfc(b) = s {
                b.on_enqueue(pkt, queue, queue_bytes, view, now);
            }
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
        for s in &mut self.list {
            match s {
                Scheme::Bfc(b) => b.on_dequeue(pkt, queue, queue_bytes, view, now),
                Scheme::Proteus(p) => p.on_dequeue(now),
                Scheme::Pfc(_) => {}
            }
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
        for s in &mut self.list {
            match s {
                Scheme::Bfc(b) => len = b.egress_rewrite(mem, pkt.frame, len, port, queue),
                Scheme::Proteus(p) => len = p.egress_rewrite(mem, pkt, len, port),
                Scheme::Pfc(_) => {}
            }
        }
        len
    }

    /// Issue 18: a scheme that routes by itself (Proteus's source routing) picks among the
    /// `n` equal-cost candidates `view` describes; `None` leaves it to the path policy.
    #[inline]
    pub fn route(
        &mut self,
        pkt: &mut Pkt,
        t: &loadbal::FiveTuple,
        n: usize,
        view: &impl Fn(usize) -> loadbal::Candidate,
        now: u64,
    ) -> Option<usize> {
        self.list.iter_mut().find_map(|s| match s {
            Scheme::Proteus(p) => p.route(pkt, t, n, view, now),
            _ => None,
        })
    }

    /// Feeds the MMU's flow-control events (drained by the caller) and collects the control
    /// frames the schemes want sent now.
    pub fn poll(
        &mut self,
        events: &mut Vec<mmu::FcEvent>,
        now: u64,
        out: &mut Vec<(usize, ControlFrame)>,
    ) {
        for s in &mut self.list {
            match s {
                Scheme::Pfc(p) => p.poll(events, now, out),
                Scheme::Bfc(b) => b.poll(now, out),
                Scheme::Proteus(p) => p.poll(now, out),
            }
        }
        events.clear();
    }

    /// Whether `poll` has work at `now` without MMU events (a frame or timer is due): lets
    /// the pipeline skip the poll on the common path.
    #[inline]
    pub fn poll_due(&self, now: u64) -> bool {
        self.list.iter().any(|s| match s {
            Scheme::Pfc(p) => p.poll_due(now),
            Scheme::Bfc(b) => b.poll_due(now),
            Scheme::Proteus(p) => p.poll_due(now),
        })
    }

    /// No scheme is configured: the hooks have nothing to do.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// When `on_timer` (or `poll`) next has work, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        self.list
            .iter()
            .filter_map(|s| match s {
                Scheme::Pfc(p) => p.next_deadline(),
                Scheme::Bfc(b) => b.next_deadline(),
                Scheme::Proteus(p) => p.next_deadline(),
            })
            .min()
    }

    /// Whether a scheme has timed work at `now` beyond `poll` (the PFC watchdog).
    pub fn timer_due(&self, now: u64) -> bool {
        self.list.iter().any(|s| match s {
            Scheme::Pfc(p) => p.watchdog_due(now),
            Scheme::Bfc(_) | Scheme::Proteus(_) => false,
        })
    }

    /// Timed work over the queues of the ports this pipe owns (`ports`: port, non-empty
    /// bitmap, number of data queues).
    pub fn on_timer(&mut self, now: u64, ports: &[(usize, u128, usize)], afc: &Afc) {
        for s in &mut self.list {
            if let Scheme::Pfc(p) = s {
                p.watchdog_tick(now, ports, afc);
            }
        }
    }

    /// Typed counters (`None` when no scheme is configured). `mmu_events`: flow-control
    /// events the pipe's MMU raised.
    pub fn stats(&self, shared: &Shared, mmu_events: u64, now: u64) -> Option<SchemeStats> {
        let pfc = self.pfc().map(|p| p.stats(mmu_events, now));
        let bfc = shared.bfc.as_deref().map(bfc::BfcStats::of);
        let proteus = self.list.iter().find_map(|s| match s {
            Scheme::Proteus(p) => Some(p.stats()),
            _ => None,
        });
        (pfc.is_some() || bfc.is_some() || proteus.is_some()).then_some(SchemeStats {
            bfc,
            pfc,
            proteus,
        })
    }
}

/// The flow identifier hash of a parsed frame (5-tuple, else the MAC addresses and
/// EtherType), shared by the schemes that keep per-flow state.
#[inline]
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

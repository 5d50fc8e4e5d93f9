//! End hosts that behave like the NICs of the papers: a sender with a per-flow in-flight cap,
//! cumulative ACKs and go-back-N retransmission on timeout, a receiver that tracks sequence
//! numbers (loss, duplicates, reordering) and ACKs every packet, per-priority NIC queues with
//! flows assigned to them as they start and released when they complete, and PFC honoured per
//! priority (quanta timers).
//!
//! BFC mode ([`StackConfig::bfc_queues`] > 0; BFC §3.3.2 and §5, a NIC that "inserts
//! `upstreamQ`" and is paused per queue): the NIC queues are [`nicq::NicQueues`] instead of one
//! per priority. A starting flow takes a free NIC queue (else joins the least-loaded one; see
//! [`nicq`] for the exact rule, which the fabric's constant-rate BFC NIC shares) and releases
//! it when its last packet is acknowledged. Every data frame carries the Xoff data shim
//! (EtherType 0x88B6, `flowctl::wire::shim`) with `upstreamQ` = its NIC queue
//! ([`Segment::upq`], pushed by [`wire::emit_segment`]); ACKs go without it, so the switch
//! never backpressures them (it counts no pause for frames without `upstreamQ`). Received
//! Xoff signal frames (EtherType 0x88B5: `Pause(q)`, `Resume(q)`, the `Bitmap` refresh) pause
//! and resume single NIC queues: the other queues keep sending. PFC still pauses priorities
//! (a flow waits if either its queue or its priority is paused). The receiver accepts data
//! frames with or without the shim (a switch pushes it only toward ports listed in
//! `shim_ports`).
//!
//! [`HostStack`] is pure: the caller passes the time in (ps) and moves frames. Two drivers run
//! it: [`fabric::StackHost`], a [`crate::fabric::HostModel`] in the virtual-time fabric, and
//! `xoff host` (tools/src/host.rs) on an AF_XDP port in a testbed namespace, with the
//! monotonic clock. One implementation, two clocks.
//!
//! The stack paces its own transmissions at the NIC rate, so frames wait in its NIC queues
//! (where a pause holds them), not in a FIFO behind a paused frame.
//!
//! Retransmission timer (go-back-N on expiry, RFC 6298 otherwise). Each flow has its own
//! [`rto::RtoEstimator`]: the configured RTO until the first RTT sample (§2.1), then
//! SRTT + 4·RTTVAR (§2.2, §2.3), never below [`StackConfig::rto_ps`] (§2.4) nor above
//! [`StackConfig::rto_max_ps`] (§2.5), doubled on each timeout (§5.5) until a valid sample.
//! One segment per flow is timed at a time, a new one (never a retransmission: Karn, §3); a
//! timeout drops the measurement. The timer starts when data is sent with none outstanding
//! (§5.1), restarts on each ACK of new data (§5.3) and stops when all is acknowledged (§5.2).
//! Unlike TCP, it is frozen while the flow's own priority (PFC) or NIC queue (BFC) is paused
//! at this host: a pause says the flow's packets are queued in a lossless hop, not lost, and
//! a PFC-paused 100 Mbit/s port builds tens of ms of queueing, which a fixed RTO mistook for
//! loss (spurious go-back-N in a lossless run). A pause cannot fire the timer; the time
//! paused is added to its deadline.
//!
//! In BFC mode the NIC also honours Aquarius's per-flow FLOW PAUSE / FLOW RESUME (§3.3):
//! the stack knows each flow at the NIC by the FID the switches compute from its data
//! frames ([`HostStack::set_addresses`], [`wire::data_fid`]), so the named flow moves into
//! the paused reserved queue and back ([`nicq::NicQueues::apply_flows`]) while the flows
//! sharing its queue keep sending.
//!
//! Pyrrha mode ([`StackConfig::pyrrha`]; Pyrrha §4.4 "Cooperation on end-hosts"): the NIC
//! honours PAUSE / RESUME / MERGE per congestion root ([`pyrrha::NicPyrrha`]). Its queues are
//! [`nicq::NicQueues`] again, queue 0 the OQ and the others IQs: each flow's onward path is
//! computed as the switches compute it, and a flow whose path crosses a paused root sits in
//! that root's IQ, which is paused, while every other flow keeps sending; its timer is frozen
//! meanwhile, as under a BFC pause. Frames carry no shim. ACKs are never held (a held ACK
//! would stop the ACK FIFO behind it; the switches isolate them if they must).

pub mod cc;
pub mod fabric;
pub mod nicq;
pub mod paths;
pub mod pyrrha;
pub mod report;
pub mod rto;
pub mod wire;

use crate::units::ser_ps;
use crate::workload::FlowSpec;
use cc::{AckEvent, CcKind, FlowCc};
use nicq::NicQueues;
use report::{RxRecord, TxRecord};
use rto::RtoEstimator;
use std::collections::{BTreeMap, VecDeque};
pub use wire::{Header, FRAME_OVERHEAD, HEADER_LEN};

/// Host stack parameters.
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// This host's index in the schedule's host list.
    pub host: u32,
    /// NIC rate the stack paces at, bit/s.
    pub rate_bps: u64,
    /// Payload bytes per data packet (frame = [`FRAME_OVERHEAD`] + payload).
    pub mss: u32,
    /// Per-flow cap on bytes in flight (1 BDP by default).
    pub window_bytes: u64,
    /// Retransmission timeout before a flow's first RTT sample and its floor, ps (RFC 6298
    /// §2.1 and §2.4, which use 1 s for both).
    pub rto_ps: u64,
    /// Ceiling of the RTO (RFC 6298 §2.5), ps; `None`: 64 × `rto_ps` (six doublings).
    pub rto_max_ps: Option<u64>,
    /// Priority of ACKs (`None`: the flow's own).
    pub ack_prio: Option<u8>,
    /// Pause priorities on received PFC frames.
    pub honor_pfc: bool,
    /// How far in the past a late real-time driver may start a frame (ps); 0 in virtual time.
    pub max_lag_ps: u64,
    /// The same for a flow's own rate limiter (DCQCN, HPCC), ps; 0 in virtual time. An RDMA
    /// NIC's limiter is never held up by the host's CPU, so a real-time driver lets it make
    /// up more than the NIC pacer: the flow catches up at the NIC's pace rather than lose
    /// its rate to a stall.
    pub rate_lag_ps: u64,
    /// BFC mode: this many NIC queues (1..=128) with dynamic flow assignment, the data shim
    /// and Xoff signal frames honoured per queue; 0: off (a NIC queue per priority).
    pub bfc_queues: usize,
    /// Pyrrha mode: the NIC honours PAUSE per congestion root ([`pyrrha`]; takes the NIC
    /// queues instead of BFC mode); `None`: off.
    pub pyrrha: Option<pyrrha::PyrrhaNicConfig>,
    /// Congestion control of this host's flows ([`cc`]; default `window`: the fixed
    /// `window_bytes` cap).
    pub cc: CcKind,
    /// Base RTT the defaults were derived from (HPCC's `T`), ps.
    pub base_rtt_ps: u64,
    /// DCQCN's timers and the notification point's CNP interval run this many times slower
    /// than the paper's (1: as the paper; [`cc::dcqcn::Params::time_scaled`]).
    pub dcqcn_time_scale: u32,
    /// What the receiver does with a data packet above the one it expects.
    pub out_of_order: OutOfOrder,
}

/// A receiver's answer to a data packet above the next one it expects (`[host] out_of_order`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutOfOrder {
    /// Keep it and ACK cumulatively: a reordering buffer, as the Proteus paper's evaluation
    /// gives every scheme (§V: "We use reordering buffer to mask packet reordering").
    #[default]
    Buffer,
    /// Drop it and NAK the expected packet once per hole; the sender goes back to it
    /// ([`wire::FLAG_NAK`]). The go-back-N of commodity RoCE NICs (the Proteus paper's
    /// footnote 2: "most commodity RDMA NICs still use go-back-N retransmission scheme to
    /// deal with out-of-order packets"; the IB transport's PSN sequence error NAK, after
    /// which the responder drops out-of-sequence packets until the expected one arrives).
    GoBackN,
    /// A reordering buffer that gives up on a hole open this long (ps, `buffer:TIME`): the
    /// resequencing buffers the Proteus paper cites for its baselines (§V, [24] Hermes,
    /// [26] Presto) wait a bounded time (Hermes's ns-3 `TcpResequenceBuffer`: 50 µs by
    /// default, 100 µs in its large-scale runs) and then hand the gap to the transport, which
    /// for RoCE is a NAK and go-back-N. Here: the buffered packets above the hole are
    /// dropped, the hole is NAKed once, and packets above it are dropped until it arrives (as
    /// [`Self::GoBackN`]); then the buffer works again. The wait is checked when the flow's
    /// next packet arrives (not by a timer: a hole with nothing behind it waits for its own
    /// packet, which a lossless network delivers).
    Timeout(u64),
}

impl std::str::FromStr for OutOfOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "buffer" => Ok(OutOfOrder::Buffer),
            "go-back-n" => Ok(OutOfOrder::GoBackN),
            o => match o.strip_prefix("buffer:") {
                Some(t) => match crate::units::parse_time(t) {
                    Ok(ps) if ps > 0 => Ok(OutOfOrder::Timeout(ps)),
                    Ok(_) => Err(format!("`{o}`: the wait must be above 0")),
                    Err(e) => Err(format!("`{o}`: {e}")),
                },
                None => Err(format!(
                    "`{o}`: expected `buffer`, `buffer:TIME` (e.g. `buffer:100us`) or `go-back-n`"
                )),
            },
        }
    }
}

impl StackConfig {
    /// Defaults: 1500-byte frames, window = `bdp_bytes`, initial and minimum RTO =
    /// max(1 ms, 4 × base RTT), ceiling 64 × that.
    pub fn new(host: u32, rate_bps: u64, base_rtt_ps: u64) -> Self {
        let bdp = (u128::from(rate_bps) * u128::from(base_rtt_ps) / 8 / 1_000_000_000_000) as u64;
        StackConfig {
            host,
            rate_bps,
            mss: 1500 - FRAME_OVERHEAD,
            window_bytes: bdp.max(u64::from(1500 - FRAME_OVERHEAD)),
            rto_ps: (4 * base_rtt_ps).max(1_000_000_000),
            rto_max_ps: None,
            ack_prio: None,
            honor_pfc: true,
            max_lag_ps: 0,
            rate_lag_ps: 0,
            bfc_queues: 0,
            pyrrha: None,
            cc: CcKind::default(),
            base_rtt_ps,
            dcqcn_time_scale: 1,
            out_of_order: OutOfOrder::Buffer,
        }
    }
}

/// A frame the driver must build and send ([`wire::emit_segment`]): to host `dst`, with
/// header `hdr` and `payload` zero bytes after it, behind the Xoff data shim carrying `upq`
/// if there is one; frame length = [`FRAME_OVERHEAD`] + `payload` (+ 4 with the shim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub dst: u32,
    pub prio: u8,
    pub hdr: Header,
    pub payload: u32,
    /// BFC mode: the NIC queue the frame leaves from (`upstreamQ` of the data shim).
    pub upq: Option<u8>,
    /// ECN-capable transport (ECT(0) in the IP header): data of flows whose congestion
    /// control reads ECN.
    pub ect: bool,
    /// HPCC data: asks the switches for INT records (an empty stack at the frame's end).
    pub int: bool,
    /// HPCC ACK: the INT stack of the acknowledged packet, echoed.
    pub int_echo: Option<crate::wire::int::IntStack>,
}

impl Segment {
    pub fn frame_len(&self) -> u32 {
        let shim = if self.upq.is_some() {
            flowctl::wire::shim::SHIM_LEN as u32
        } else {
            0
        };
        FRAME_OVERHEAD + self.body_len() + shim
    }

    /// Bytes after the host header: the payload, at least an INT stack if it carries one.
    pub fn body_len(&self) -> u32 {
        if self.int || self.int_echo.is_some() {
            self.payload.max(crate::wire::int::INT_LEN as u32)
        } else {
            self.payload
        }
    }
}

#[derive(Debug, Clone)]
struct TxFlow {
    spec: FlowSpec,
    pkts: u64,
    una: u64,
    nxt: u64,
    /// Highest sequence number sent + 1 (anything below it that is sent again is a RETX).
    high: u64,
    /// When the retransmission timer (running while `una < nxt`) was started or restarted.
    timer_start: u64,
    /// Time since `timer_start` the flow was paused, up to `frozen_to` (the timer's
    /// deadline moves by this much).
    frozen_ps: u64,
    frozen_to: u64,
    rto: RtoEstimator,
    /// The segment being timed for an RTT sample: (sequence number, sent at).
    timed: Option<(u64, u64)>,
    rec: TxRecord,
    /// BFC mode: the NIC queue the flow holds.
    queue: u8,
    /// BFC mode: the flow's key at the NIC: the FID hash the switches compute from its data
    /// frames' 5-tuple (so an Aquarius FlowPause names it), or its id when the stack does
    /// not know the addresses ([`HostStack::set_addresses`]).
    key: u32,
    /// Congestion control state, the in-flight cap it allows (packets) and, for rate-based
    /// control, when the flow's rate limiter lets its next packet out.
    cc: FlowCc,
    win_pkts: u64,
    next_tx_ps: u64,
    /// Pyrrha mode: the IPv4 destination and unseeded ECMP hash of its data frames (what
    /// the path calculation reads), if the stack knows the addresses.
    route: Option<(u32, u32)>,
}

impl TxFlow {
    /// (Re)starts the retransmission timer at `now`.
    fn restart_timer(&mut self, now: u64) {
        self.timer_start = now;
        self.frozen_ps = 0;
        self.frozen_to = now;
    }

    /// How long the timer has run at `now`, not counting `frozen` ps of pauses.
    fn timer_ran(&self, now: u64, frozen: u64) -> u64 {
        now.saturating_sub(self.timer_start).saturating_sub(frozen)
    }

    /// Whether the flow has a packet the window lets out.
    fn sendable(&self) -> bool {
        self.una < self.pkts && self.nxt < self.pkts && self.nxt - self.una < self.win_pkts
    }

    /// The in-flight cap in packets after a congestion-control change.
    fn refresh_window(&mut self, fixed_bytes: u64, mss: u32) {
        self.win_pkts = match self.cc.window_bytes(fixed_bytes) {
            Some(w) => w.div_ceil(u64::from(mss.max(1))).max(1),
            None => u64::MAX,
        };
    }
}

/// How long flow `f` was paused at this host from `f.frozen_to` to `now`: its NIC queue
/// (BFC) throughout, else its priority (PFC) until that pause lapses. Pauses change only
/// when a frame arrives, and the stack folds this span into the timer
/// ([`HostStack::freeze_timers`]) before applying one, so the state is the same throughout.
fn paused_span(
    bfc: Option<&NicQueues<usize>>,
    paused_until: &[u64; 8],
    f: &TxFlow,
    now: u64,
) -> u64 {
    let from = f.frozen_to;
    if now <= from {
        return 0;
    }
    if bfc.is_some_and(|b| b.blocks(usize::from(f.queue), f.key)) {
        return now - from;
    }
    paused_until[usize::from(f.spec.prio & 7)]
        .min(now)
        .saturating_sub(from)
}

#[derive(Debug, Clone, Default)]
struct RxFlow {
    expected: u64,
    /// Received above `expected` (out of order).
    ooo: std::collections::BTreeSet<u64>,
    /// Highest sequence number seen + 1.
    high: u64,
    /// When the last CNP went to this flow's sender (DCQCN notification point).
    last_cnp_ps: Option<u64>,
    /// Go-back-N: the packet last NAKed (one NAK per hole); packets that arrived and were
    /// dropped (their next copy is no recovery from loss); holes a retransmission filled
    /// before the original came (if it comes, it was late, not lost).
    naked: Option<u64>,
    dropped: std::collections::BTreeSet<u64>,
    refilled: std::collections::BTreeSet<u64>,
    /// [`OutOfOrder::Timeout`]: since when the hole at `expected` has had packets buffered
    /// above it.
    hole_ps: Option<u64>,
    rec: RxRecord,
}

/// Counters of the stack itself.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StackCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub pfc_rx: u64,
    /// Frames that were neither PFC, Xoff signal nor host-stack frames.
    pub rx_other: u64,
    pub acks_tx: u64,
    pub timeouts: u64,
    /// BFC mode: Xoff signal frames honoured, and the PAUSEs and RESUMEs among them (the
    /// others are pause-bitmap refreshes).
    pub signals_rx: u64,
    pub pauses_rx: u64,
    pub resumes_rx: u64,
    /// Xoff signal frames received with BFC mode off (not honoured).
    pub signals_ignored: u64,
    /// Pyrrha mode: MERGEs honoured (its PAUSEs and RESUMEs count in `pauses_rx` and
    /// `resumes_rx`, all in `signals_rx`).
    pub merges_rx: u64,
    /// Aquarius per-flow signals naming no flow this host is sending (a PAUSE of one is not
    /// honoured: nothing to hold).
    pub flow_signals_unknown: u64,
    /// Receiver: data frames that arrived CE-marked, and ACKs that carried a CNP.
    pub ce_rx: u64,
    pub cnp_tx: u64,
    /// Sender: ACKs that echoed CE (ECE) and that carried a CNP.
    pub ece_rx: u64,
    pub cnp_rx: u64,
    /// Go-back-N: data packets dropped above the expected one, NAKs sent (receiver) and
    /// received (sender).
    pub ooo_dropped: u64,
    pub naks_tx: u64,
    pub naks_rx: u64,
    /// [`OutOfOrder::Timeout`]: holes the receiver gave up on (each one NAK).
    pub resequence_timeouts: u64,
}

/// One host's sender and receiver.
#[derive(Debug)]
pub struct HostStack {
    pub cfg: StackConfig,
    /// Flows this host sends, in start order, not yet started.
    pending: VecDeque<FlowSpec>,
    tx: Vec<TxFlow>,
    tx_index: BTreeMap<u32, usize>,
    /// Per NIC queue (= priority): started flows with data left, round robin.
    queues: [VecDeque<usize>; 8],
    rr: usize,
    /// BFC and Pyrrha mode: the NIC queues (of indices into `tx`) instead of `queues`.
    bfc: Option<NicQueues<usize>>,
    /// Pyrrha mode: the per-root pause state and queue choice.
    pyrrha: Option<pyrrha::NicPyrrha>,
    /// This host's IPv4 address and every schedule host's, by index: the flows' FIDs.
    addrs: Option<(std::net::Ipv4Addr, Vec<std::net::Ipv4Addr>)>,
    acks: VecDeque<Segment>,
    rx: BTreeMap<u32, RxFlow>,
    /// Per priority: paused until (ps).
    pub paused_until: [u64; 8],
    tx_free_at: u64,
    window_pkts: u64,
    pub counters: StackCounters,
}

impl HostStack {
    /// A stack for `cfg.host` that sends its flows of `schedule` (others are ignored).
    pub fn new(cfg: StackConfig, schedule: &[FlowSpec]) -> Self {
        let mut mine: Vec<FlowSpec> = schedule
            .iter()
            .filter(|f| f.src == cfg.host)
            .copied()
            .collect();
        mine.sort_by_key(|f| (f.start_ps, f.id));
        let window_pkts = cfg.window_bytes.div_ceil(u64::from(cfg.mss.max(1))).max(1);
        HostStack {
            pending: mine.into(),
            tx: Vec::new(),
            tx_index: BTreeMap::new(),
            queues: Default::default(),
            rr: 0,
            bfc: match &cfg.pyrrha {
                Some(p) => Some(NicQueues::new(p.queues)),
                None => (cfg.bfc_queues > 0).then(|| NicQueues::new(cfg.bfc_queues)),
            },
            pyrrha: cfg.pyrrha.as_ref().map(pyrrha::NicPyrrha::new),
            addrs: None,
            acks: VecDeque::new(),
            rx: BTreeMap::new(),
            paused_until: [0; 8],
            tx_free_at: 0,
            window_pkts,
            counters: StackCounters::default(),
            cfg,
        }
    }

    fn paused(&self, prio: u8, now: u64) -> bool {
        self.paused_until[usize::from(prio & 7)] > now
    }

    /// BFC mode: the NIC queues (assignment, paused bits, signal counters).
    pub fn bfc(&self) -> Option<&NicQueues<usize>> {
        self.bfc.as_ref()
    }

    /// BFC mode: the NIC queue flow `id` holds, if it has one.
    pub fn queue_of(&self, id: u32) -> Option<u8> {
        let key = self.tx[*self.tx_index.get(&id)?].key;
        self.bfc.as_ref().and_then(|b| b.assigned(key))
    }

    /// Tells the stack its own IPv4 address and every schedule host's (by index), so a flow
    /// started afterwards is known at the NIC by the FID the switches compute from its data
    /// frames, and an Aquarius FlowPause(q, FID) holds exactly that flow (§3.3).
    pub fn set_addresses(&mut self, me: std::net::Ipv4Addr, hosts: Vec<std::net::Ipv4Addr>) {
        self.addrs = Some((me, hosts));
    }

    /// Handles any received frame of `len` bytes: PFC/PAUSE, Xoff signal, host-stack data or
    /// ACK (with or without the data shim); anything else is counted in `rx_other`.
    pub fn on_receive(&mut self, now: u64, frame: &[u8], len: u32) {
        if wire::is_mac_control(frame) {
            self.on_pfc(now, frame);
        } else if wire::is_xoff_signal(frame) {
            if !self.on_signal(now, frame) {
                self.counters.rx_other += 1;
            }
        } else if let Some((h, upq)) = Header::parse_shimmed(frame) {
            let ce = wire::ip_ecn(frame) == Some(3);
            let int = (h.flags & wire::FLAG_INT != 0)
                .then(|| {
                    let et = if upq.is_some() { 16 } else { 12 };
                    crate::wire::int::read(frame, et)
                })
                .flatten();
            self.on_frame_fb(now, &h, len, ce, int);
        } else {
            self.counters.rx_other += 1;
        }
    }

    /// Applies a received Xoff signal frame to the NIC queues (BFC mode; otherwise it is
    /// counted and ignored). Returns whether it was one.
    pub fn on_signal(&mut self, now: u64, frame: &[u8]) -> bool {
        if self.pyrrha.is_some() {
            return self.on_pyrrha_signal(now, frame);
        }
        let Some(sig) = nicq::parse_signal(frame) else {
            return false;
        };
        if self.bfc.is_some() {
            self.freeze_timers(now);
        }
        match self.bfc.as_mut() {
            Some(b) => {
                // Aquarius: a flow paused by FID is held, alone (nicq's module doc).
                b.apply_flows(&sig);
                self.counters.signals_rx = b.signals_rx;
                self.counters.flow_signals_unknown = b.unknown_flow_signals;
                self.counters.pauses_rx = b.pauses_rx;
                self.counters.resumes_rx = b.resumes_rx;
            }
            None => self.counters.signals_ignored += 1,
        }
        true
    }

    /// Pyrrha mode: applies a PAUSE / RESUME / MERGE and moves every flow to the NIC queue
    /// its path gets now (the IQ of the paused roots it crosses, else the OQ). Returns
    /// whether `frame` was a Pyrrha signal.
    fn on_pyrrha_signal(&mut self, now: u64, frame: &[u8]) -> bool {
        // The flows' timers freeze up to now under the pauses in force until now.
        self.freeze_timers(now);
        let (Some(p), Some(b)) = (self.pyrrha.as_mut(), self.bfc.as_mut()) else {
            return false;
        };
        if !p.on_frame(frame, now) {
            return false;
        }
        let tx = &mut self.tx;
        b.regroup(|&i| {
            let f = &mut tx[i];
            if let Some((d, h)) = f.route.filter(|_| f.una < f.pkts) {
                f.queue = p.select(d, h, now);
            }
            usize::from(f.queue)
        });
        p.apply(&mut b.paused);
        let c = &mut self.counters;
        c.signals_rx = p.signals_rx;
        c.pauses_rx = p.pauses_rx;
        c.resumes_rx = p.resumes_rx;
        c.merges_rx = p.merges_rx;
        true
    }

    /// Pyrrha mode: the NIC side's state (roots held, IQs, per-root hold time).
    pub fn pyrrha(&self) -> Option<&pyrrha::NicPyrrha> {
        self.pyrrha.as_ref()
    }

    /// Applies a received MAC control frame (PFC: per class; 802.3x PAUSE: all classes).
    /// Returns whether it was one.
    pub fn on_pfc(&mut self, now: u64, frame: &[u8]) -> bool {
        use flowctl::wire::pfc::{quanta_to_ps, Frame, PauseRepr, PfcRepr};
        let Ok(f) = Frame::new_checked(frame) else {
            return false;
        };
        let (mask, quanta) = if let Ok(r) = PfcRepr::parse(&f) {
            (r.class_enable, r.quanta)
        } else if let Ok(p) = PauseRepr::parse(&f) {
            (0xff, [p.quanta; 8])
        } else {
            return false;
        };
        self.counters.pfc_rx += 1;
        if !self.cfg.honor_pfc {
            return true;
        }
        self.freeze_timers(now);
        for (c, (until, &q)) in self.paused_until.iter_mut().zip(&quanta).enumerate() {
            if mask & (1 << c) != 0 {
                *until = match q {
                    0 => 0,
                    q => now.saturating_add(quanta_to_ps(q, self.cfg.rate_bps)),
                };
            }
        }
        true
    }

    /// Handles a received host-stack frame of `len` bytes (no congestion feedback on it).
    pub fn on_frame(&mut self, now: u64, h: &Header, len: u32) {
        self.on_frame_fb(now, h, len, false, None);
    }

    /// Handles a received host-stack frame of `len` bytes with its congestion feedback: it
    /// arrived CE-marked if `ce`; `int`: the INT stack it carries (data: collected on the
    /// way; ACK: echoed).
    pub fn on_frame_fb(
        &mut self,
        now: u64,
        h: &Header,
        len: u32,
        ce: bool,
        int: Option<crate::wire::int::IntStack>,
    ) {
        self.counters.rx_frames += 1;
        if h.is_ack() {
            self.on_ack(now, h, int);
        } else {
            self.on_data(now, h, len, ce, int);
        }
    }

    fn on_ack(&mut self, now: u64, h: &Header, int: Option<crate::wire::int::IntStack>) {
        let Some(&i) = self.tx_index.get(&h.flow) else {
            return;
        };
        let paused = paused_span(self.bfc.as_ref(), &self.paused_until, &self.tx[i], now);
        let (ece, cnp) = (h.flags & wire::FLAG_ECE != 0, h.flags & wire::FLAG_CNP != 0);
        self.counters.ece_rx += u64::from(ece);
        self.counters.cnp_rx += u64::from(cnp);
        let (fixed, mss) = (self.cfg.window_bytes, self.cfg.mss);
        let f = &mut self.tx[i];
        let una0 = f.una;
        f.rec.acks_rx += 1;
        f.rec.max_rtt_ps = f.rec.max_rtt_ps.max(now.saturating_sub(h.sent_ps));
        if h.ack > f.una {
            if f.una < f.nxt {
                f.rec.paused_ps += paused;
                let ran = f.timer_ran(now, f.frozen_ps + paused);
                f.rec.max_stall_ps = f.rec.max_stall_ps.max(ran);
            }
            // The timed segment is acknowledged: an RTT sample (never a retransmission's:
            // a timeout dropped the measurement, Karn).
            if let Some((_, sent)) = f.timed.filter(|&(seq, _)| h.ack > seq) {
                f.rto.sample(now.saturating_sub(sent));
                f.timed = None;
                f.rec.srtt_ps = f.rto.srtt().unwrap_or(0);
                f.rec.rto_ps = f.rto.rto();
                f.rec.max_rto_ps = f.rec.max_rto_ps.max(f.rec.rto_ps);
            }
            f.una = h.ack.min(f.pkts);
            // New data acknowledged: restart the timer (RFC 6298 §5.3).
            f.restart_timer(now);
            if f.nxt < f.una {
                f.nxt = f.una;
            }
            if f.una >= f.pkts && f.rec.done_ps.is_none() {
                f.rec.done_ps = Some(now);
                // All acknowledged: the flow gives its NIC queue back.
                if let Some(b) = self.bfc.as_mut() {
                    b.release(f.key);
                }
            }
        }
        // A go-back-N receiver dropped what came after `ack`: send it all again from there
        // (not for a NAK older than what is acknowledged by now). The RTT measurement goes
        // with it (Karn).
        if h.flags & wire::FLAG_NAK != 0 {
            self.counters.naks_rx += 1;
            if h.ack >= una0 && f.nxt > f.una {
                f.nxt = f.una;
                f.timed = None;
            }
        }
        let m = u64::from(mss);
        f.cc.on_ack(&AckEvent {
            now,
            acked_bytes: (f.una - una0.min(f.una)) * m,
            ack_seq_bytes: h.ack.min(f.pkts) * m,
            snd_nxt_bytes: f.high * m,
            ece,
            cnp,
            int: int.as_ref().map_or(&[], |s| s.hops()),
        });
        f.refresh_window(fixed, mss);
    }

    fn on_data(
        &mut self,
        now: u64,
        h: &Header,
        len: u32,
        ce: bool,
        int: Option<crate::wire::int::IntStack>,
    ) {
        let mss = u64::from(self.cfg.mss);
        let r = self.rx.entry(h.flow).or_insert_with(|| RxFlow {
            rec: RxRecord {
                id: h.flow,
                src: u32::from(h.src_host),
                dst: self.cfg.host,
                size: h.size,
                pkts: h.size.div_ceil(mss).max(1),
                first_ps: now,
                ..RxRecord::default()
            },
            ..RxFlow::default()
        });
        let rec = &mut r.rec;
        rec.rx_pkts += 1;
        rec.rx_bytes += u64::from(len);
        rec.last_ps = now;
        let s = h.seq;
        let retx = h.flags & wire::FLAG_RETX != 0;
        let wait = match self.cfg.out_of_order {
            OutOfOrder::Timeout(t) => Some(t),
            _ => None,
        };
        // A receiver that drops packets above the hole: go-back-N always, a timed buffer once
        // it gave up on this hole (until it arrives).
        let gbn = self.cfg.out_of_order == OutOfOrder::GoBackN
            || (wait.is_some() && r.naked == Some(r.expected));
        let mut flags = wire::FLAG_ACK;
        // Go-back-N: the original of a packet whose retransmission came first (by a faster
        // path) was late, not lost, whether it is kept or dropped now.
        if !retx && r.refilled.remove(&s) {
            rec.recovered -= 1;
            rec.reordered += 1;
        }
        if s < r.expected || r.ooo.contains(&s) {
            rec.duplicates += 1;
        } else {
            // A hole's accounting goes with the first copy that arrives, kept or not (a
            // go-back-N receiver may have dropped an earlier one).
            if !r.dropped.contains(&s) {
                if s > r.high {
                    rec.gaps += s - r.high;
                } else if s < r.high {
                    // Fills a hole: reordering if the original, recovery if a retransmission.
                    if retx {
                        rec.recovered += 1;
                        if gbn || wait.is_some() {
                            r.refilled.insert(s);
                        }
                    } else {
                        rec.reordered += 1;
                    }
                }
            }
            if gbn && s > r.expected {
                // Dropped: it comes again after the sender goes back. The first packet past
                // a hole NAKs it; the rest of the hole's packets are dropped without one.
                r.dropped.insert(s);
                self.counters.ooo_dropped += 1;
                if r.naked != Some(r.expected) {
                    r.naked = Some(r.expected);
                    flags |= wire::FLAG_NAK;
                    self.counters.naks_tx += 1;
                }
            } else {
                r.dropped.remove(&s);
                let e0 = r.expected;
                if s == r.expected {
                    r.expected += 1;
                    while r.ooo.remove(&r.expected) {
                        r.expected += 1;
                    }
                } else {
                    r.ooo.insert(s);
                }
                if r.expected >= rec.pkts && rec.complete_ps.is_none() {
                    rec.complete_ps = Some(now);
                }
                if let Some(t) = wait {
                    // The hole's wait starts with the first packet buffered above it (and
                    // again for the next hole once this one fills); past it, give up.
                    if r.ooo.is_empty() {
                        r.hole_ps = None;
                    } else if r.expected != e0 || r.hole_ps.is_none() {
                        r.hole_ps = Some(now);
                    }
                    if r.hole_ps.is_some_and(|h| now >= h + t) {
                        let n = r.ooo.len() as u64;
                        r.dropped.extend(std::mem::take(&mut r.ooo));
                        self.counters.ooo_dropped += n;
                        self.counters.resequence_timeouts += 1;
                        r.hole_ps = None;
                        r.naked = Some(r.expected);
                        flags |= wire::FLAG_NAK;
                        self.counters.naks_tx += 1;
                    }
                }
            }
        }
        r.high = r.high.max(s + 1);
        // Congestion feedback for whichever control the sender runs: the CE echo (DCTCP) and,
        // at most once per flow per 50 µs (times the time scale), a CNP (DCQCN §3.2's
        // notification point).
        if ce {
            self.counters.ce_rx += 1;
            flags |= wire::FLAG_ECE;
            if r.last_cnp_ps
                .is_none_or(|t| now >= t + cc::dcqcn::cnp_interval_ps(self.cfg.dcqcn_time_scale))
            {
                r.last_cnp_ps = Some(now);
                flags |= wire::FLAG_CNP;
                self.counters.cnp_tx += 1;
            }
        }
        if int.is_some() {
            flags |= wire::FLAG_INT;
        }
        let prio = self.cfg.ack_prio.unwrap_or(h.prio) & 7;
        self.acks.push_back(Segment {
            dst: u32::from(h.src_host),
            prio,
            hdr: Header {
                flow: h.flow,
                seq: r.expected,
                sent_ps: h.sent_ps,
                flags,
                prio,
                src_host: self.cfg.host as u16,
                size: h.size,
                ack: r.expected,
            },
            payload: 0,
            upq: None,
            ect: false,
            int: false,
            int_echo: int,
        });
    }

    /// Starts flows that are due and fires retransmission timeouts.
    pub fn on_tick(&mut self, now: u64) {
        let rto_max = self
            .cfg
            .rto_max_ps
            .unwrap_or(self.cfg.rto_ps.saturating_mul(64));
        while self.pending.front().is_some_and(|f| f.start_ps <= now) {
            let Some(spec) = self.pending.pop_front() else {
                break;
            };
            let i = self.tx.len();
            let pkts = spec.size.div_ceil(u64::from(self.cfg.mss)).max(1);
            self.tx.push(TxFlow {
                spec,
                pkts,
                una: 0,
                nxt: 0,
                high: 0,
                timer_start: now,
                frozen_ps: 0,
                frozen_to: now,
                rto: RtoEstimator::new(self.cfg.rto_ps, self.cfg.rto_ps, rto_max),
                timed: None,
                rec: TxRecord {
                    id: spec.id,
                    src: spec.src,
                    dst: spec.dst,
                    size: spec.size,
                    prio: spec.prio,
                    start_ps: spec.start_ps,
                    rto_ps: self.cfg.rto_ps,
                    max_rto_ps: self.cfg.rto_ps,
                    ..TxRecord::default()
                },
                queue: 0,
                key: match &self.addrs {
                    Some((me, ips)) => ips
                        .get(spec.dst as usize)
                        .map_or(spec.id, |&dst| wire::data_fid(*me, dst, spec.id)),
                    None => spec.id,
                },
                cc: FlowCc::new(
                    self.cfg.cc,
                    now,
                    self.cfg.rate_bps,
                    self.cfg.base_rtt_ps,
                    self.cfg.mss,
                    self.cfg.window_bytes,
                    self.cfg.dcqcn_time_scale,
                ),
                win_pkts: self.window_pkts,
                next_tx_ps: 0,
                route: None,
            });
            self.tx[i].refresh_window(self.cfg.window_bytes, self.cfg.mss);
            self.tx_index.insert(spec.id, i);
            match (self.bfc.as_mut(), self.pyrrha.as_mut()) {
                (Some(b), Some(p)) => {
                    let route = self.addrs.as_ref().and_then(|(me, ips)| {
                        let dst = *ips.get(spec.dst as usize)?;
                        Some((u32::from(dst), wire::data_hash(*me, dst, spec.id)))
                    });
                    let q = route.map_or(pyrrha::OQ, |(d, h)| p.select(d, h, now));
                    p.apply(&mut b.paused);
                    let f = &mut self.tx[i];
                    f.route = route;
                    f.queue = q;
                    b.push(usize::from(q), i);
                }
                (Some(b), None) => {
                    let q = b.start(self.tx[i].key);
                    self.tx[i].queue = q;
                    b.push(usize::from(q), i);
                }
                (None, _) => self.queues[usize::from(spec.prio & 7)].push_back(i),
            }
        }
        let (fixed, mss) = (self.cfg.window_bytes, self.cfg.mss);
        for f in self.tx.iter_mut().filter(|f| f.una < f.pkts) {
            if f.cc.next_timer().is_some_and(|t| t <= now) {
                f.cc.on_tick(now);
                f.refresh_window(fixed, mss);
            }
        }
        self.freeze_timers(now);
        for f in self.tx.iter_mut().filter(|f| f.una < f.nxt) {
            let ran = f.timer_ran(now, f.frozen_ps);
            if ran < f.rto.rto() {
                continue;
            }
            // Expired (RFC 6298 §5.4-5.6): go back to the oldest unacknowledged packet, drop
            // the RTT measurement (its segment is sent again: Karn), back off. The timer
            // restarts with the retransmission.
            f.rec.max_stall_ps = f.rec.max_stall_ps.max(ran);
            f.nxt = f.una;
            f.timed = None;
            f.rto.on_timeout();
            f.rec.rto_ps = f.rto.rto();
            f.rec.max_rto_ps = f.rec.max_rto_ps.max(f.rec.rto_ps);
            f.rec.timeouts += 1;
            self.counters.timeouts += 1;
        }
    }

    /// Adds the time each running retransmission timer's flow was paused, up to `now`, to
    /// the timer's freeze. Called before a pause changes and before timers are checked.
    fn freeze_timers(&mut self, now: u64) {
        let (bfc, until) = (self.bfc.as_ref(), &self.paused_until);
        for f in self.tx.iter_mut().filter(|f| f.una < f.nxt) {
            let p = paused_span(bfc, until, f, now);
            f.frozen_ps += p;
            f.rec.paused_ps += p;
            f.frozen_to = f.frozen_to.max(now);
        }
    }

    /// The next frame to send at `now`, if the pacer and the pauses allow one.
    pub fn poll_send(&mut self, now: u64) -> Option<Segment> {
        if now.saturating_add(self.cfg.max_lag_ps) < self.tx_free_at {
            return None;
        }
        let seg = self.pick(now)?;
        let start = self.tx_free_at.max(now.saturating_sub(self.cfg.max_lag_ps));
        self.tx_free_at = start + ser_ps(u64::from(seg.frame_len()), self.cfg.rate_bps);
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += u64::from(seg.frame_len());
        Some(seg)
    }

    fn pick(&mut self, now: u64) -> Option<Segment> {
        if let Some(a) = self.acks.front() {
            if !self.paused(a.prio, now) {
                self.counters.acks_tx += 1;
                return self.acks.pop_front();
            }
        }
        let i = match self.bfc.is_some() {
            false => self.pick_prio(now)?,
            true => self.pick_bfc(now)?,
        };
        Some(self.data_segment(i, now))
    }

    /// Per-priority NIC queues: round robin over unpaused priorities, and over the flows of
    /// each.
    fn pick_prio(&mut self, now: u64) -> Option<usize> {
        for k in 0..8 {
            let c = (self.rr + k) % 8;
            if self.queues[c].is_empty() || self.paused(c as u8, now) {
                continue;
            }
            let n = self.queues[c].len();
            for _ in 0..n {
                let Some(i) = self.queues[c].pop_front() else {
                    break;
                };
                let f = &self.tx[i];
                if f.una >= f.pkts {
                    continue; // done: leaves its queue
                }
                self.queues[c].push_back(i);
                if !f.sendable() || f.next_tx_ps > now {
                    continue;
                }
                self.rr = (c + 1) % 8;
                return Some(i);
            }
        }
        None
    }

    /// BFC NIC queues: round robin over the queues the switch has not paused, and over the
    /// flows of each whose priority PFC has not paused.
    fn pick_bfc(&mut self, now: u64) -> Option<usize> {
        let tx = &self.tx;
        let paused_until = &self.paused_until;
        self.bfc.as_mut()?.serve_held(|_, q, held| {
            for _ in 0..q.len() {
                let i = q.pop_front()?;
                let f = &tx[i];
                if f.una >= f.pkts {
                    continue; // done: leaves its queue
                }
                q.push_back(i);
                if f.sendable()
                    && f.next_tx_ps <= now
                    && paused_until[usize::from(f.spec.prio & 7)] <= now
                    && !held(f.key)
                {
                    return Some(i);
                }
            }
            None
        })
    }

    /// The next data packet of flow `i`.
    fn data_segment(&mut self, i: usize, now: u64) -> Segment {
        let upq = (self.bfc.is_some() && self.pyrrha.is_none()).then_some(self.tx[i].queue);
        let mss = u64::from(self.cfg.mss);
        let (ect, lag) = (self.cfg.cc.uses_ecn(), self.cfg.rate_lag_ps);
        let int = self.cfg.cc.uses_int();
        let f = &mut self.tx[i];
        let seq = f.nxt;
        if f.una == f.nxt {
            // Nothing outstanding: the timer starts with this packet (RFC 6298 §5.1).
            f.restart_timer(now);
        }
        f.nxt += 1;
        let retx = seq < f.high;
        if !retx && f.timed.is_none() {
            f.timed = Some((seq, now));
        }
        f.high = f.high.max(f.nxt);
        let payload = (f.spec.size - (seq * mss).min(f.spec.size)).min(mss) as u32;
        f.rec.tx_pkts += 1;
        if retx {
            f.rec.retx += 1;
        }
        if f.rec.first_tx_ps.is_none() {
            f.rec.first_tx_ps = Some(now);
        }
        let seg = Segment {
            dst: f.spec.dst,
            prio: f.spec.prio,
            hdr: Header {
                flow: f.spec.id,
                seq,
                sent_ps: now,
                flags: wire::FLAG_DATA
                    | if retx { wire::FLAG_RETX } else { 0 }
                    | if int { wire::FLAG_INT } else { 0 },
                prio: f.spec.prio,
                src_host: self.cfg.host as u16,
                size: f.spec.size,
                ack: 0,
            },
            payload,
            upq,
            ect,
            int,
            int_echo: None,
        };
        let frame = u64::from(seg.frame_len());
        f.cc.on_send(now, frame);
        if let Some(r) = f.cc.rate_bps() {
            // The flow's rate limiter: its next packet leaves one frame time at its rate later.
            let start = f.next_tx_ps.max(now.saturating_sub(lag));
            f.next_tx_ps = start + ser_ps(frame, r);
        }
        seg
    }

    /// Flows that have started and are not known to be done, in their NIC queues.
    fn queued(&self) -> impl Iterator<Item = usize> + '_ {
        let bfc_queues = self.bfc.iter().flat_map(|b| b.queues());
        self.queues.iter().chain(bfc_queues).flatten().copied()
    }

    /// Whether anything could be sent if the pacer and pauses allowed.
    fn has_work(&self) -> bool {
        !self.acks.is_empty() || self.queued().any(|i| self.tx[i].sendable())
    }

    /// When the stack next needs `on_tick`/`poll_send`, after `now` (None: only on receive).
    pub fn next_wakeup(&self, now: u64) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut upd = |x: u64| t = Some(t.map_or(x, |y: u64| y.min(x)));
        if let Some(f) = self.pending.front() {
            upd(f.start_ps);
        }
        if self.has_work() {
            let ready = self.tx_free_at.saturating_sub(self.cfg.max_lag_ps);
            match self.paced_until(now) {
                Some(p) => upd(ready.max(p)),
                // Everything that could send is paused: wait for the earliest PFC pause to
                // lapse; if only BFC pauses hold it, for a RESUME (or an ACK), which arrive as
                // frames. (Waking before then would find nothing to send, and a wake-up at
                // `now` is a spin: one event per picosecond until an ACK or a lapse.)
                None => {
                    let lapse = (0..8)
                        .filter(|&c| self.paused(c as u8, now))
                        .map(|c| self.paused_until[c])
                        .min();
                    if let Some(l) = lapse {
                        upd(ready.max(l));
                    }
                }
            }
        }
        // Congestion-control timers (DCQCN's α, decrease and increase timers).
        for f in self.tx.iter().filter(|f| f.una < f.pkts) {
            if let Some(t) = f.cc.next_timer() {
                upd(t);
            }
        }
        // Retransmission timers: a paused flow's timer is frozen until its pause ends (a PFC
        // pause lapses at a known time; a BFC pause ends with a frame, which wakes the stack).
        let bfc = self.bfc.as_ref();
        for f in self.tx.iter().filter(|f| f.una < f.nxt) {
            if bfc.is_some_and(|b| b.blocks(usize::from(f.queue), f.key)) {
                continue;
            }
            let frozen = f.frozen_ps + paused_span(bfc, &self.paused_until, f, now);
            let left = f.rto.rto().saturating_sub(f.timer_ran(now, frozen));
            let resume = self.paused_until[usize::from(f.spec.prio & 7)].max(now);
            upd(resume.saturating_add(left));
        }
        t.map(|x| x.max(now.saturating_add(1)))
    }

    /// When the earliest frame that could go is let out by its flow's rate limiter: `now`
    /// if an ACK waits or a flow is not rate-limited (always so without rate-based control);
    /// None if nothing could go (every ACK and sendable flow paused, held, or out of window).
    fn paced_until(&self, now: u64) -> Option<u64> {
        if self.acks.front().is_some_and(|a| !self.paused(a.prio, now)) {
            return Some(now);
        }
        let bfc = self.bfc.as_ref();
        self.queued()
            .map(|i| &self.tx[i])
            .filter(|f| {
                f.sendable()
                    && !self.paused(f.spec.prio, now)
                    && !bfc.is_some_and(|b| b.blocks(usize::from(f.queue), f.key))
            })
            .map(|f| f.next_tx_ps)
            .min()
    }

    /// The congestion-control state of flow `id` (started flows only).
    pub fn flow_cc(&self, id: u32) -> Option<&FlowCc> {
        self.tx_index.get(&id).map(|&i| &self.tx[i].cc)
    }

    /// Whether every flow of this host has started and been fully acknowledged.
    pub fn sender_done(&self) -> bool {
        self.pending.is_empty() && self.tx.iter().all(|f| f.una >= f.pkts)
    }

    /// Per-flow sender records (flows started so far, by id).
    pub fn tx_records(&self) -> Vec<TxRecord> {
        let mut v: Vec<TxRecord> = self.tx.iter().map(|f| f.rec.clone()).collect();
        v.sort_by_key(|r| r.id);
        v
    }

    /// Per-flow receiver records (by id).
    pub fn rx_records(&self) -> Vec<RxRecord> {
        self.rx.values().map(|r| r.rec.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: u32, size: u64) -> FlowSpec {
        FlowSpec {
            id,
            src: 0,
            dst: 1,
            size,
            start_ps: 0,
            prio: 3,
        }
    }

    /// Everything `s` sends over the next 50 frame times (no `on_tick`, so no timeouts).
    fn drain(s: &mut HostStack, t: &mut u64) -> Vec<Segment> {
        let mut v = Vec::new();
        for _ in 0..50 {
            *t += 10_000_000;
            v.extend(s.poll_send(*t));
        }
        v
    }

    #[test]
    fn window_acks_and_retransmission() {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 4 * u64::from(cfg.mss);
        let mut a = HostStack::new(cfg.clone(), &[flow(7, 20 * u64::from(cfg.mss))]);
        let mut b = HostStack::new(StackConfig { host: 1, ..cfg }, &[]);
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        assert_eq!(sent.len(), 4, "window caps in-flight packets");
        // Lose packet 1; deliver the others.
        for s in sent.iter().filter(|s| s.hdr.seq != 1) {
            b.on_frame(1, &s.hdr, s.frame_len());
        }
        let acks = drain(&mut b, &mut t);
        assert_eq!(acks.len(), 3);
        assert!(acks.iter().all(|a| a.hdr.ack == 1));
        for s in &acks {
            a.on_frame(2, &s.hdr, s.frame_len());
        }
        // Timeout: go back to 1.
        t += a.cfg.rto_ps;
        a.on_tick(t);
        let s = drain(&mut a, &mut t)[0];
        assert_eq!(
            (s.hdr.seq, s.hdr.flags & wire::FLAG_RETX),
            (1, wire::FLAG_RETX)
        );
        b.on_frame(3, &s.hdr, s.frame_len());
        let r = &b.rx_records()[0];
        assert_eq!((r.gaps, r.recovered, r.reordered, r.lost()), (1, 1, 0, 1));
        let ack = *drain(&mut b, &mut t).last().unwrap();
        assert_eq!(ack.hdr.ack, 4);
    }

    /// The packets the NAKs among `acks` ask for, in order.
    fn naked(acks: &[Segment]) -> Vec<u64> {
        acks.iter()
            .filter(|k| k.hdr.flags & wire::FLAG_NAK != 0)
            .map(|k| k.hdr.ack)
            .collect()
    }

    #[test]
    fn go_back_n_receiver_drops_past_a_hole_naks_once_and_the_sender_goes_back() {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 6 * u64::from(cfg.mss);
        let mut a = HostStack::new(cfg.clone(), &[flow(7, 6 * u64::from(cfg.mss))]);
        let rx = StackConfig {
            host: 1,
            out_of_order: OutOfOrder::GoBackN,
            ..cfg.clone()
        };
        let mut b = HostStack::new(rx.clone(), &[]);
        // The same arrivals at a buffering receiver: nothing dropped, no NAK.
        let mut buf = HostStack::new(StackConfig { host: 1, ..cfg }, &[]);
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        assert_eq!(sent.len(), 6);
        // Packet 1 is overtaken by 2..=4, then arrives; 5 after it.
        for &seq in &[0, 2, 3, 4, 1, 5] {
            let s = sent[seq as usize];
            b.on_frame(1, &s.hdr, s.frame_len());
            buf.on_frame(1, &s.hdr, s.frame_len());
        }
        let acks = drain(&mut b, &mut t);
        let naks = naked(&acks);
        // One NAK per hole: 2 NAKs 1 (3 and 4 are dropped without one); once 1 arrives, 5
        // finds the next hole, at 2 (2..=4 were dropped), and NAKs it.
        assert_eq!(naks, vec![1, 2]);
        assert_eq!((b.counters.ooo_dropped, b.counters.naks_tx), (4, 2));
        let r = &b.rx_records()[0];
        assert_eq!(
            (r.gaps, r.reordered, r.lost()),
            (1, 1, 0),
            "1 was late, not lost"
        );
        assert!(drain(&mut buf, &mut t)
            .iter()
            .all(|k| k.hdr.flags & wire::FLAG_NAK == 0));
        assert_eq!(buf.counters.ooo_dropped, 0);
        assert_eq!(buf.rx_records()[0].complete_ps, Some(1));
        assert_eq!(b.rx_records()[0].complete_ps, None, "2..=4 must come again");
        // The sender goes back to 1 on the first NAK, then the ACK of 1 moves it to 2, where
        // the second NAK finds it: 2..=5 again, as retransmissions.
        for k in &acks {
            a.on_frame(2, &k.hdr, k.frame_len());
        }
        assert_eq!(a.counters.naks_rx, 2);
        let again = drain(&mut a, &mut t);
        let seqs: Vec<u64> = again.iter().map(|s| s.hdr.seq).collect();
        assert_eq!(
            seqs,
            vec![2, 3, 4, 5],
            "from the first unacknowledged packet"
        );
        assert!(again.iter().all(|s| s.hdr.flags & wire::FLAG_RETX != 0));
        for s in &again {
            b.on_frame(3, &s.hdr, s.frame_len());
        }
        let r = &b.rx_records()[0];
        assert_eq!(r.complete_ps, Some(3));
        // 2..=5 had arrived (and were dropped): their copies recover nothing.
        assert_eq!((r.recovered, r.duplicates, r.lost()), (0, 0, 0));
    }

    #[test]
    fn a_timed_reordering_buffer_masks_a_short_hole_and_gives_up_on_a_long_one() {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 8 * u64::from(cfg.mss);
        let mut a = HostStack::new(cfg.clone(), &[flow(7, 8 * u64::from(cfg.mss))]);
        let us = 1_000_000;
        let rx = StackConfig {
            host: 1,
            out_of_order: "buffer:100us".parse().unwrap(),
            ..cfg
        };
        assert_eq!(rx.out_of_order, OutOfOrder::Timeout(100 * us));
        let mut b = HostStack::new(rx, &[]);
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        assert_eq!(sent.len(), 8);
        // 1 is overtaken by 2 and 3 and comes 60 µs after 2: masked, as by a plain buffer.
        // 4 is overtaken by 5, 6 and 7, and 7 finds it missing 100 µs after 5 came: the
        // receiver gives up on it (5..=7 dropped, one NAK).
        for (seq, at) in [
            (0, 1),
            (2, 2),
            (3, 50 * us),
            (1, 60 * us),
            (5, 70 * us),
            (6, 100 * us),
            (7, 170 * us),
        ] {
            b.on_frame(at, &sent[seq].hdr, sent[seq].frame_len());
        }
        let acks = drain(&mut b, &mut t);
        let naks = naked(&acks);
        assert_eq!(naks, vec![4]);
        let c = &b.counters;
        assert_eq!((c.resequence_timeouts, c.ooo_dropped, c.naks_tx), (1, 3, 1));
        assert_eq!(b.rx_records()[0].complete_ps, None, "5..=7 must come again");
        // The sender goes back to 4; the late original of 4 comes after its copy.
        for k in &acks {
            a.on_frame(t, &k.hdr, k.frame_len());
        }
        let again = drain(&mut a, &mut t);
        assert_eq!(
            again.iter().map(|s| s.hdr.seq).collect::<Vec<_>>(),
            [4, 5, 6, 7]
        );
        for s in &again {
            b.on_frame(200 * us, &s.hdr, s.frame_len());
        }
        assert_eq!(b.rx_records()[0].complete_ps, Some(200 * us));
        b.on_frame(210 * us, &sent[4].hdr, sent[4].frame_len());
        let r = &b.rx_records()[0];
        assert_eq!(
            (r.reordered, r.recovered, r.duplicates, r.lost()),
            (2, 0, 1, 0),
            "1 and 4 were late, not lost"
        );
        assert!("buffer:0us".parse::<OutOfOrder>().is_err());
        assert!("buffer:soon".parse::<OutOfOrder>().is_err());
    }

    #[test]
    fn go_back_n_a_retransmission_that_overtakes_the_late_original_is_no_loss() {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 3 * u64::from(cfg.mss);
        let mut a = HostStack::new(cfg.clone(), &[flow(7, 3 * u64::from(cfg.mss))]);
        let mut b = HostStack::new(
            StackConfig {
                host: 1,
                out_of_order: OutOfOrder::GoBackN,
                ..cfg
            },
            &[],
        );
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        // 1 is held somewhere; 0 and 2 arrive, 2 is dropped and NAKs 1.
        for i in [0, 2] {
            b.on_frame(1, &sent[i].hdr, sent[i].frame_len());
        }
        for k in drain(&mut b, &mut t) {
            a.on_frame(2, &k.hdr, k.frame_len());
        }
        let again = drain(&mut a, &mut t);
        assert_eq!(again.iter().map(|s| s.hdr.seq).collect::<Vec<_>>(), [1, 2]);
        // The retransmission of 1 (another path) comes before the original.
        for s in &again {
            b.on_frame(3, &s.hdr, s.frame_len());
        }
        let r = &b.rx_records()[0];
        assert_eq!((r.recovered, r.reordered, r.lost()), (1, 0, 1));
        assert!(r.complete_ps.is_some());
        b.on_frame(4, &sent[1].hdr, sent[1].frame_len());
        let r = &b.rx_records()[0];
        assert_eq!(
            (r.recovered, r.reordered, r.duplicates, r.lost()),
            (0, 1, 1, 0),
            "late, not lost"
        );
    }

    #[test]
    fn pfc_pauses_a_priority() {
        let cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        let mut a = HostStack::new(cfg, &[flow(1, 100_000)]);
        a.on_tick(0);
        let mut f = [0u8; 60];
        let r = flowctl::wire::pfc::PfcRepr {
            src_addr: [2, 0, 0, 0, 0, 9],
            class_enable: 8,
            quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0],
        };
        r.emit(&mut flowctl::wire::pfc::Frame::new_unchecked(&mut f[..]));
        assert!(a.on_pfc(0, &f));
        assert_eq!(a.poll_send(1), None);
        let lapse = a.next_wakeup(1).unwrap();
        assert!(lapse >= flowctl::wire::pfc::quanta_to_ps(0xffff, 10_000_000_000));
        assert!(a.poll_send(lapse).is_some());
    }

    // ---- Retransmission timer (RFC 6298, frozen while paused) ----

    const MS: u64 = 1_000_000_000;

    /// What `s` sends in one burst starting at `t` (a poll every 2 us), by sequence number.
    fn burst(s: &mut HostStack, t: u64) -> Vec<u64> {
        (0..8)
            .filter_map(|k| s.poll_send(t + k * 2_000_000))
            .map(|x| x.hdr.seq)
            .collect()
    }

    /// A sender of one 100-packet flow (priority 3) at 10 Gbit/s with a 4-packet window and
    /// a 1 ms initial and minimum RTO, at most 100 ms.
    fn timer_stack() -> HostStack {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 4 * u64::from(cfg.mss);
        cfg.rto_ps = MS;
        cfg.rto_max_ps = Some(100 * MS);
        let mss = u64::from(cfg.mss);
        HostStack::new(cfg, &[flow(7, 100 * mss)])
    }

    /// (SRTT, RTO, timeouts) of the only flow.
    fn timer_of(s: &HostStack) -> (u64, u64, u64) {
        let r = &s.tx_records()[0];
        (r.srtt_ps, r.rto_ps, r.timeouts)
    }

    #[test]
    fn rto_from_samples_karn_and_backoff() {
        let mut a = timer_stack();
        a.on_tick(0);
        assert_eq!(burst(&mut a, 0), vec![0, 1, 2, 3]);
        assert_eq!(timer_of(&a), (0, MS, 0), "initial RTO before a sample");
        // Segment 0 (timed at 0) is acknowledged at 10 ms: SRTT 10, RTTVAR 5, RTO 30.
        a.on_frame(10 * MS, &ack(7, 1), 0);
        assert_eq!(timer_of(&a), (10 * MS, 30 * MS, 0));
        // Segment 4 is timed from 10 ms, acknowledged at 28 ms (R 18): SRTT 11, RTTVAR 5.75,
        // RTO 11 + 23 = 34 ms.
        assert_eq!(burst(&mut a, 10 * MS), vec![4]);
        a.on_frame(28 * MS, &ack(7, 5), 0);
        assert_eq!(timer_of(&a), (11 * MS, 34 * MS, 0));
        // 5..8 leave at 28 ms (the timer starts, 5 is timed); nothing comes back. The timer
        // fires 34 ms later, not before; the RTO doubles.
        assert_eq!(burst(&mut a, 28 * MS), vec![5, 6, 7, 8]);
        a.on_tick(62 * MS - 1);
        assert_eq!(timer_of(&a).2, 0);
        assert_eq!(a.next_wakeup(62 * MS - 1), Some(62 * MS));
        a.on_tick(62 * MS);
        assert_eq!(timer_of(&a), (11 * MS, 68 * MS, 1), "backoff on timeout");
        // Go-back-N: 5..8 again. The ACK of 5 at 70 ms is ambiguous (original or
        // retransmission?): no sample, the backed-off RTO stays (Karn).
        assert_eq!(burst(&mut a, 62 * MS), vec![5, 6, 7, 8]);
        a.on_frame(70 * MS, &ack(7, 6), 0);
        assert_eq!(
            timer_of(&a),
            (11 * MS, 68 * MS, 1),
            "no sample from a retransmission"
        );
        // 9 is new: timed from 70 ms, acknowledged at 81 ms (R 11): SRTT 11, RTTVAR 4.3125,
        // RTO 28.25 ms, backoff over.
        assert_eq!(burst(&mut a, 70 * MS), vec![9]);
        a.on_frame(81 * MS, &ack(7, 10), 0);
        assert_eq!(timer_of(&a), (11 * MS, 28_250_000_000, 1));
        let r = &a.tx_records()[0];
        assert_eq!((r.max_rto_ps, r.retx, r.paused_ps), (68 * MS, 4, 0));
    }

    /// A PFC frame for priority 3 with `quanta` (0: XON).
    fn pfc3(quanta: u16) -> [u8; 60] {
        let mut f = [0u8; 60];
        flowctl::wire::pfc::PfcRepr {
            src_addr: [2, 0, 0, 0, 0, 9],
            class_enable: 8,
            quanta: [0, 0, 0, quanta, 0, 0, 0, 0],
        }
        .emit(&mut flowctl::wire::pfc::Frame::new_unchecked(&mut f[..]));
        f
    }

    #[test]
    fn pfc_pause_freezes_the_timer_until_xon() {
        use flowctl::wire::pfc::quanta_to_ps;
        let mut a = timer_stack();
        a.on_tick(0);
        assert_eq!(burst(&mut a, 0).len(), 4);
        // The timer runs 0.5 ms, then priority 3 is paused for the longest quanta (3.36 ms).
        let until = MS / 2 + quanta_to_ps(0xffff, 10_000_000_000);
        assert!(a.on_pfc(MS / 2, &pfc3(0xffff)));
        // Past the 1 ms RTO, paused: no timeout; the timer would fire 0.5 ms after the lapse.
        a.on_tick(2 * MS);
        assert_eq!(timer_of(&a).2, 0, "timeout while paused");
        assert_eq!(a.next_wakeup(2 * MS), Some(until + MS / 2));
        // XON at 3 ms: the timer resumes with 0.5 ms left.
        assert!(a.on_pfc(3 * MS, &pfc3(0)));
        assert_eq!(a.next_wakeup(3 * MS), Some(3 * MS + MS / 2));
        a.on_tick(3 * MS + MS / 2 - 1);
        assert_eq!(timer_of(&a).2, 0);
        a.on_tick(3 * MS + MS / 2);
        assert_eq!(timer_of(&a).2, 1, "the timer resumes after the pause");
        assert_eq!(a.tx_records()[0].paused_ps, 3 * MS - MS / 2);
    }

    #[test]
    fn pfc_pause_that_lapses_freezes_only_until_its_lapse() {
        use flowctl::wire::pfc::quanta_to_ps;
        let mut a = timer_stack();
        a.on_tick(0);
        assert_eq!(burst(&mut a, 0).len(), 4);
        // Paused at 0.5 ms for 10000 quanta (512 us at 10 Gbit/s), no XON.
        let p = quanta_to_ps(10_000, 10_000_000_000);
        assert!(a.on_pfc(MS / 2, &pfc3(10_000)));
        // The timer fires at 1 ms + the pause, not at the first tick after the lapse + 0.5.
        a.on_tick(MS / 2 + p + 1);
        assert_eq!(a.next_wakeup(MS / 2 + p + 1), Some(MS + p));
        a.on_tick(MS + p - 1);
        assert_eq!(timer_of(&a).2, 0);
        a.on_tick(MS + p);
        assert_eq!(timer_of(&a).2, 1);
        assert_eq!(a.tx_records()[0].paused_ps, p);
    }

    #[test]
    fn a_sender_idle_while_paused_starts_its_timer_when_it_sends() {
        // All acknowledged, then paused for 5 ms: the packets sent after the pause get a full
        // RTO from their own departure (RFC 6298 §5.1), not from the last ACK.
        let mut a = timer_stack();
        a.on_tick(0);
        assert_eq!(burst(&mut a, 0).len(), 4);
        a.on_frame(MS / 10, &ack(7, 4), 0);
        assert!(a.on_pfc(MS / 10, &pfc3(0xffff)));
        assert!(a.on_pfc(5 * MS, &pfc3(0)));
        assert_eq!(burst(&mut a, 5 * MS), vec![4, 5, 6, 7]);
        a.on_tick(5 * MS + 1);
        a.on_tick(6 * MS - 1);
        assert_eq!(timer_of(&a).2, 0);
        a.on_tick(6 * MS);
        assert_eq!(timer_of(&a).2, 1);
    }

    // ---- BFC mode ----

    use flowctl::wire::shim;
    use flowctl::wire::signal::{Signal, SignalRepr};

    /// A stack in BFC mode with `queues` NIC queues and a window that never limits.
    /// Host `i` of a /24: MAC 02:00:00:00:00:i, IP 10.0.0.i.
    fn host_info(i: u8) -> crate::config::HostInfo {
        crate::config::HostInfo {
            name: format!("h{i}"),
            index: usize::from(i),
            mac: crate::wire::MacAddr([2, 0, 0, 0, 0, i]),
            ip: std::net::Ipv4Addr::new(10, 0, 0, i),
            prefix_len: 24,
            gateway_mac: None,
            nic_rate_bps: 10_000_000_000,
            nic_delay_ps: 0,
        }
    }

    /// Host `i`'s addresses as a peer.
    fn peer_addr(i: u8) -> fabric::PeerAddr {
        let h = host_info(i);
        fabric::PeerAddr {
            mac: h.mac,
            ip: h.ip,
        }
    }

    fn bfc_stack(queues: usize, flows: &[FlowSpec]) -> HostStack {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 1000 * u64::from(cfg.mss);
        cfg.bfc_queues = queues;
        HostStack::new(cfg, flows)
    }

    /// An Xoff signal frame from the switch, as it arrives.
    fn signal(s: Signal) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        SignalRepr {
            dst_addr: [2, 0, 0, 0, 0, 1],
            src_addr: [2, 0, 0, 0, 0, 9],
            signal: s,
        }
        .emit_into(&mut f);
        f
    }

    fn ack(flow: u32, upto: u64) -> Header {
        Header {
            flow,
            seq: upto,
            flags: wire::FLAG_ACK,
            ack: upto,
            ..Header::default()
        }
    }

    fn at(f: FlowSpec, start_ps: u64) -> FlowSpec {
        FlowSpec { start_ps, ..f }
    }

    #[test]
    fn bfc_assigns_free_queues_then_least_loaded_and_releases_on_completion() {
        let mss = u64::from(StackConfig::new(0, 1, 0).mss);
        // A, B, C start together; A and C are one packet, B is long; D starts later.
        let flows = [
            flow(1, mss),
            flow(2, 50 * mss),
            flow(3, mss),
            at(flow(4, mss), 1_000_000_000),
        ];
        let mut a = bfc_stack(2, &flows);
        a.on_tick(0);
        // Two flows take the two empty queues, the third shares the least-loaded one.
        assert_eq!(
            (a.queue_of(1), a.queue_of(2), a.queue_of(3)),
            (Some(0), Some(1), Some(0))
        );
        let b = a.bfc().unwrap();
        assert_eq!((b.load(0), b.load(1)), (2, 1));
        // A and C complete (acknowledged): queue 0 is free again, B still holds queue 1.
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        assert!(sent.iter().any(|s| s.hdr.flow == 1) && sent.iter().any(|s| s.hdr.flow == 3));
        a.on_frame(t, &ack(1, 1), 0);
        a.on_frame(t, &ack(3, 1), 0);
        assert_eq!((a.queue_of(1), a.queue_of(3)), (None, None));
        let b = a.bfc().unwrap();
        assert_eq!((b.load(0), b.load(1)), (0, 1));
        // D takes the free queue, not B's.
        a.on_tick(1_000_000_000);
        assert_eq!(a.queue_of(4), Some(0));
        // B completes and gives queue 1 back.
        a.on_frame(t, &ack(2, 50), 0);
        assert_eq!(a.queue_of(2), None);
        assert_eq!(a.bfc().unwrap().load(1), 0);
    }

    #[test]
    fn bfc_pause_stops_one_queue_resume_and_bitmap_refresh() {
        let flows = [flow(1, 1_000_000), flow(2, 1_000_000)];
        let mut a = bfc_stack(4, &flows);
        a.on_tick(0);
        assert_eq!((a.queue_of(1), a.queue_of(2)), (Some(0), Some(1)));
        let mut t = 0;
        let flows_of = |v: &[Segment]| {
            let n1 = v.iter().filter(|s| s.hdr.flow == 1).count();
            (n1, v.len() - n1)
        };
        // Both flows share the NIC round robin.
        assert_eq!(flows_of(&drain(&mut a, &mut t)), (25, 25));
        // PAUSE(0) stops exactly flow 1 (queue 0); flow 2 gets the whole NIC.
        a.on_receive(t, &signal(Signal::Pause(0)), 60);
        assert_eq!(flows_of(&drain(&mut a, &mut t)), (0, 50));
        // RESUME(0) restarts it.
        a.on_receive(t, &signal(Signal::Resume(0)), 60);
        assert_eq!(flows_of(&drain(&mut a, &mut t)), (25, 25));
        // A bitmap refresh sets queue 1 and clears queue 0 (both covered).
        a.on_receive(t, &signal(Signal::Pause(0)), 60);
        a.on_receive(
            t,
            &signal(Signal::Bitmap {
                count: 4,
                bits: 0b10,
            }),
            60,
        );
        assert_eq!(a.bfc().unwrap().paused, 0b10);
        assert_eq!(flows_of(&drain(&mut a, &mut t)), (50, 0));
        // Everything paused: nothing to send and no wakeup at all (this asserted "none before
        // the retransmission timer"; the timers of paused queues are now frozen, so none
        // fires either): a RESUME arrives as a frame.
        a.on_receive(t, &signal(Signal::Pause(0)), 60);
        assert_eq!(a.poll_send(t + 10_000_000), None);
        assert_eq!(a.next_wakeup(t), None, "woken while paused");
        a.on_receive(t, &signal(Signal::Bitmap { count: 4, bits: 0 }), 60);
        assert_eq!(a.bfc().unwrap().paused, 0);
        assert_eq!(flows_of(&drain(&mut a, &mut t)), (25, 25));
        let c = a.counters;
        assert_eq!(
            (c.signals_rx, c.pauses_rx, c.resumes_rx, c.signals_ignored),
            (6, 3, 1, 0)
        );
        // A stack not in BFC mode counts signals and ignores them.
        let mut p = HostStack::new(StackConfig::new(0, 10_000_000_000, 10_000_000), &flows);
        p.on_tick(0);
        p.on_receive(0, &signal(Signal::Pause(0)), 60);
        assert_eq!((p.counters.signals_ignored, p.counters.signals_rx), (1, 0));
        assert!(p.poll_send(1).is_some());
    }

    #[test]
    fn bfc_queue_pause_freezes_the_timer_until_resume() {
        let mut a = bfc_stack(2, &[flow(1, 1_000_000)]);
        a.on_tick(0);
        assert_eq!(a.queue_of(1), Some(0));
        assert!(!burst(&mut a, 0).is_empty());
        // The timer runs 0.2 ms; queue 0 is paused for 5 ms (past the 1 ms RTO).
        a.on_receive(MS / 5, &signal(Signal::Pause(0)), 60);
        a.on_tick(5 * MS);
        assert_eq!(a.counters.timeouts, 0, "timeout while paused");
        assert_eq!(a.next_wakeup(5 * MS), None);
        // RESUME at 5.2 ms: 0.8 ms left.
        a.on_receive(5 * MS + MS / 5, &signal(Signal::Resume(0)), 60);
        a.on_tick(6 * MS - 1);
        assert_eq!(a.counters.timeouts, 0);
        a.on_tick(6 * MS);
        assert_eq!(a.counters.timeouts, 1, "the timer resumes after the pause");
        assert_eq!(a.tx_records()[0].paused_ps, 5 * MS);
    }

    #[test]
    fn bfc_data_frames_carry_the_shim_and_receivers_take_either() {
        let peer = peer_addr(1);
        let flows = [flow(1, 100_000), flow(2, 100_000), flow(3, 100_000)];
        let mut a = bfc_stack(8, &flows);
        let mut b = HostStack::new(
            StackConfig {
                host: 1,
                ..StackConfig::new(1, 10_000_000_000, 10_000_000)
            },
            &[],
        );
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        let mut buf = [0u8; 2048];
        for s in &sent {
            let q = a.queue_of(s.hdr.flow).unwrap();
            assert_eq!(s.upq, Some(q));
            let len = wire::emit_segment(&host_info(0), &peer, s, &mut buf);
            assert_eq!(len, s.frame_len());
            assert_eq!(len, FRAME_OVERHEAD + s.payload + shim::SHIM_LEN as u32);
            // The flowctl codec reads upstreamQ = the flow's NIC queue ...
            let f = shim::Frame::new_checked(&buf[..len as usize]).unwrap();
            let r = shim::ShimRepr::parse(&f).unwrap();
            assert_eq!(r.upstream_q, q);
            assert_eq!(f.inner_ethertype(), crate::wire::EtherType::IPV4);
            // ... and the receiver takes the frame with the shim ...
            b.on_receive(t, &buf[..len as usize], len);
            // ... and without it (a switch pops it unless the port is a shim port).
            let (_, n) = shim::ShimRepr::pop(&mut buf, len as usize).unwrap();
            assert_eq!(wire::Header::parse(&buf[..n]), Some(s.hdr));
        }
        assert_eq!(b.counters.rx_frames, sent.len() as u64);
        assert_eq!(b.counters.rx_other, 0);
        let rx = b.rx_records();
        assert_eq!(rx.len(), 3);
        assert!(rx.iter().all(|r| r.rx_pkts > 0 && r.lost() == 0));
        // ACKs go without the shim.
        let acks = drain(&mut b, &mut t);
        assert!(!acks.is_empty());
        for s in &acks {
            assert_eq!(s.upq, None);
            let len = wire::emit_segment(&host_info(1), &peer, s, &mut buf);
            assert_eq!(wire::upstream_q(&buf[..len as usize]), None);
            assert_eq!(&buf[12..14], &crate::wire::EtherType::IPV4.to_be_bytes());
            // An ACK returns to its flow's port (the reverse of the data's 5-tuple).
            let m = crate::parse::parse(&buf[..len as usize]).unwrap();
            let t5 = m.five_tuple().unwrap();
            assert_eq!(
                (t5.sport, t5.dport),
                (wire::PORT, wire::flow_port(s.hdr.flow))
            );
        }
        // Three flows between the same two hosts are three 5-tuples (ECMP, BFC's flow table).
        let mut tuples = std::collections::BTreeSet::new();
        for s in &sent {
            let len = wire::emit_segment(&host_info(0), &peer, s, &mut buf);
            let (_, n) = shim::ShimRepr::pop(&mut buf, len as usize).unwrap();
            let m = crate::parse::parse(&buf[..n]).unwrap();
            let t5 = m.five_tuple().unwrap();
            assert_eq!(t5.dport, wire::PORT);
            tuples.insert(t5.sport);
        }
        assert_eq!(tuples.len(), 3);
    }

    /// Aquarius §3.3 at the host: the NIC knows its flows by the FID the switch computes
    /// from their frames, so FlowPause(q, FID) holds exactly that flow, and no NIC queue,
    /// while the flow sharing its NIC queue keeps sending; FlowResume lets it go, from its
    /// own queue.
    #[test]
    fn aquarius_flow_pause_holds_exactly_the_named_flow() {
        let ips = vec![host_info(1).ip, host_info(2).ip];
        // Two NIC queues: 1 → 0, 2 → 1, 3 shares queue 0 with 1; 2 (one packet) completes.
        let mss = u64::from(StackConfig::new(0, 1, 0).mss);
        let flows = [flow(1, 1_000 * mss), flow(2, mss), flow(3, 1_000 * mss)];
        let mut a = bfc_stack(2, &flows);
        a.set_addresses(ips[0], ips.clone());
        a.on_tick(0);
        assert_eq!(
            (a.queue_of(1), a.queue_of(2), a.queue_of(3)),
            (Some(0), Some(1), Some(0))
        );
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        a.on_frame(t, &ack(2, 1), 0);
        assert_eq!(a.queue_of(2), None);
        // The FID the switch computes from flow 1's frames is the stack's key for it.
        let (me, peer) = (host_info(1), peer_addr(2));
        let mut buf = [0u8; 2048];
        let s1 = sent.iter().find(|s| s.hdr.flow == 1).unwrap();
        let len = wire::emit_segment(&me, &peer, s1, &mut buf);
        let (_, n) = shim::ShimRepr::pop(&mut buf, len as usize).unwrap();
        let fid1 = crate::scheme::flow_id(&crate::parse::parse(&buf[..n]).unwrap());
        assert_eq!(fid1, wire::data_fid(ips[0], ips[1], 1));
        // FlowPause(0, FID of 1): flow 1 is held; flow 3 keeps sending from queue 0.
        a.on_receive(
            t,
            &signal(Signal::FlowPause {
                queue: 0,
                fid: fid1,
            }),
            60,
        );
        assert!(a.bfc().unwrap().is_held(fid1));
        assert_eq!(a.bfc().unwrap().paused, 0, "no NIC queue paused");
        let held = drain(&mut a, &mut t);
        assert!(held.iter().all(|s| s.hdr.flow != 1), "flow 1 still sent");
        assert!(
            held.iter().any(|s| s.hdr.flow == 3),
            "the flow sharing its queue stopped"
        );
        // FlowResume: flow 1 sends again, from its own queue.
        a.on_receive(
            t,
            &signal(Signal::FlowResume {
                queue: 1,
                fid: fid1,
            }),
            60,
        );
        let back = drain(&mut a, &mut t);
        let s1 = back
            .iter()
            .find(|s| s.hdr.flow == 1)
            .expect("flow 1 resumed");
        assert_eq!(s1.upq, Some(0), "from its own queue");
        assert!(!a.bfc().unwrap().is_held(fid1));
        assert_eq!((a.counters.pauses_rx, a.counters.resumes_rx), (1, 1));
    }
}

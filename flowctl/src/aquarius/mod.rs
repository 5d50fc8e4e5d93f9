//! Aquarius (Li, Zeng, Hu, Chen, "Scaling Switch-driven Flow Control with Aquarius", APNet '23,
//! §3): per-hop flow control that controls the flows *within* a queue independently, so a
//! few queues per port (8) isolate flows as well as BFC with many (32).
//!
//! * **Dynamic flow mapping (§3.1, Alg. 1 lines 2–6).** BFC's flow table
//!   ([`crate::bfc::FlowTable`], indexed by ⟨egress port, hash(FID)⟩) with entries
//!   {mappedQ, size, pauseNum}: a flow with no packet in the switch (size 0) takes an empty
//!   queue, else the least occupied one; a flow with packets keeps its queue. No sticky time.
//!   While the port has no `rsvQ`, the mapping holds back the last queue one could be taken
//!   from (empty, holding no flow, unpaused): a new flow then joins the least occupied queue
//!   instead. The paper takes `rsvQ` "from empty queues when it is needed" (§3.3) and does
//!   not say what happens when none is empty; pausing the shared queue then (all that is
//!   left) stops its victims, which §3.3 exists to spare: in the §4 Web Server run (300 µs,
//!   seed 1) 731 PAUSEs found no empty queue and paused shared queues, and short flows to the
//!   other hosts of the incast receiver's rack took 56 µs on average against BFC-32's 12.
//!   The reserved queue `rsvQ` of the port (below) is never mapped to, nor are the queues the
//!   caller reserves ([`Aquarius::reserve`]: the port's strict-priority queues, an ACK class
//!   as the HPCC ns-3 simulator Aquarius was evaluated on keeps ACKs in a never-paused queue
//!   0): their packets keep their static queue and meet no hook, and `rsvQ` is never one.
//! * **Contribution-aware pausing (§3.2, Alg. 1 lines 7–16).** On enqueue into a queue of
//!   length `L` (bytes, this packet included): `L > Q_high` marks the packet; else if
//!   `L > Q_low` and `T_avg < T_min`, the packet is marked only if its flow's buffered bytes
//!   exceed `Occu_fair = ⌈L ≫ ⌈log2 N⌉⌉` (eq. 1; `N` the queue's active flows, so `N` not a
//!   power of two rounds the share down and the flow is not under-regulated). A mark adds
//!   one to the flow's `pauseNum` and sends PAUSE(upstreamQ, FID) to the ingress peer when
//!   none is outstanding for the entry (Alg. 1's 0→1 when the entry holds one data flow;
//!   [`FlowState`] says why not on 0→1 alone).
//!   `Q_low = HRTT·μ/NQ_active`, `Q_high = 3·HRTT·μ/NQ_active`, `T_min = MTU·NQ_active/μ`
//!   (precomputed per `NQ_active` as the paper's match-action table; `NQ_active` is taken as
//!   BFC's `N_active`, the port's non-empty unpaused queues, the entered one included, min
//!   1). Into a queue that is itself paused the caller passes `NQ_active` 0: the queue drains
//!   at 0, its share of `μ` over an HRTT is nothing, so both thresholds are 0 and every packet
//!   entering it is marked and pauses its flow upstream (with 1 there a paused queue took a
//!   full HRTT·μ from every flow before pausing any, and overflowed the ingress limit in the
//!   §4 Web Server run). `T_avg = α·T +
//!   (1−α)·T_avg` over the packet inter-arrival time `T` of the queue, updated on *every*
//!   arrival (Alg. 1 prints the update inside the `T_avg < T_min` branch, where it could
//!   never rise again once below: read as an indentation slip). The first sample seeds the
//!   average and `T` is capped at one HRTT (an idle gap); α is not given (default 1/8).
//! * **Dequeue (Alg. 2).** A marked packet leaving takes one off `pauseNum`; 1→0 sends
//!   RESUME to the port, upstream queue and FID the outstanding PAUSE named. (The algorithm
//!   names `packet.q`; the upstream acts on its own queue, the one the data shim carried, as
//!   for the PAUSE.)
//! * **Opportunistic re-assigning (§3.3)** on PAUSE/RESUME received: [`upstream`]. A flow
//!   alone in its queue has the queue paused; when dynamic mapping then puts another flow
//!   into that queue (every queue paused or held back), the queue is shared and §3.3's
//!   shared case applies from then on: the held flow's later packets go to `rsvQ`, the
//!   queue resumes ([`QueueTable::on_join`], `share_on_join`, default on). The paper decides
//!   "solely occupies" vs "sharing" when the PAUSE arrives and does not say what a flow
//!   mapped later into the paused queue meets; left paused, the newcomer waits for the held
//!   flow's RESUME, its packets enter a queue above `Q_high` and pause it upstream in turn,
//!   and so on to its sender. In the §4 Web Server run (1 ms, seed 1) short flows spent
//!   97 % of their switch sojourn in such queues (12.9 µs a packet at ToR uplinks), and
//!   their NICs ended with every queue paused; with it, Aquarius-8's short flows match
//!   BFC-32 (`deploy/experiments/aquarius-web.toml`).
//!
//! Units: bytes for `L`, the flow's size against `Occu_fair` and the thresholds (Alg. 1
//! counts packets for `size`; bytes keep one unit across mixed frame sizes). Pure: the caller
//! passes time (ps) and queue views and applies the returned frames and queue commands.

#[cfg(test)]
mod tests;
pub mod upstream;

pub use upstream::{PauseAction, QueueCmd, QueueTable, UpstreamStats};

use crate::bfc::assign::TableError;
use crate::bfc::{
    default_hrtt_ps, interval, threshold_bytes, BfcPort, FlowTable, MAX_INTERVAL_PS, NO_SLOT,
    NO_UPQ,
};
use crate::wire::signal::{Signal, SignalRepr, DST_SIGNAL};
use serde::{Deserialize, Serialize};

/// Parameters of Aquarius on one switch (times in ps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AquariusConfig {
    /// Flow-table entries per egress port, as a multiple of its queues (BFC's 100).
    pub table_factor: usize,
    /// One-hop RTT; default the largest [`default_hrtt_ps`] over the ports.
    pub hrtt_ps: Option<u64>,
    /// EWMA gain α of `T_avg` (the paper gives none; 1/8 as TCP's SRTT).
    pub alpha: f64,
    /// While no `rsvQ` is allocated, keep the last queue it could be taken from out of
    /// dynamic mapping (see the module doc); false: Alg. 1 line 4 as printed.
    pub hold_rsv: bool,
    /// A flow mapped to a queue paused for a flow alone in it makes the queue shared: the
    /// held flow moves to `rsvQ` and the queue resumes (§3.3's rule for a shared queue,
    /// [`QueueTable::on_join`]); false: the newcomer waits for the held flow's RESUME.
    pub share_on_join: bool,
}

impl Default for AquariusConfig {
    fn default() -> Self {
        AquariusConfig {
            table_factor: 100,
            hrtt_ps: None,
            alpha: 0.125,
            hold_rsv: true,
            share_on_join: true,
        }
    }
}

/// Invalid Aquarius parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AquariusError {
    #[error("port {0}: {1} queues, Aquarius supports 1..=128")]
    Queues(usize, usize),
    #[error("table_factor must be 1..=100000")]
    TableFactor,
    #[error("alpha must be in (0, 1], got {0}")]
    Alpha(f64),
    #[error("hrtt of {0} ps is longer than Aquarius allows ({MAX_INTERVAL_PS} ps, one hour)")]
    Hrtt(u64),
    #[error("port {0}: every data queue is strict, none left for Aquarius's mapping")]
    Reserved(usize),
}

/// `Occu_fair = ⌈L ≫ ⌈log2 N⌉⌉` (eq. 1): `L` bytes shared by `N` active flows (`N` 0 as 1).
#[inline]
pub fn occu_fair(l: u64, n: u32) -> u64 {
    let k = n.max(1).next_power_of_two().trailing_zeros();
    l.div_ceil(1u64 << k)
}

/// `T_min = MTU·NQ_active/μ` in ps.
pub fn t_min_ps(mtu_bytes: u32, rate_bps: u64, nq_active: u32) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    let bits = u128::from(mtu_bytes) * 8 * u128::from(nq_active.max(1));
    u64::try_from(bits * 1_000_000_000_000 / u128::from(rate_bps)).unwrap_or(u64::MAX)
}

/// Per-flow state in the flow-table entry: Alg. 1's `pauseNum`, the bytes the flow has
/// buffered (its size against `Occu_fair`), and whom the PAUSE of `pauseNum` 0→1 named.
///
/// The table has no collision resolution (§5), so two flows may share an entry and its
/// `pauseNum`, and one of them may be a flow without an upstream queue to pause (ACKs carry
/// no data shim): its marks count in `pauseNum` but raise no PAUSE. So the PAUSE goes out when
/// a mark finds none outstanding (Alg. 1's 0→1 when the entry is one data flow), and the
/// RESUME on `pauseNum` 1→0 goes exactly when one is outstanding, naming the flow, ingress
/// port and upstream queue the PAUSE named, not those of the packet that happens to leave
/// last. Keyed on 0→1 and 1→0 alone, such an entry sent RESUMEs for flows never paused and
/// none for paused ones, which then stayed held for good (seen in the §4 Web Server run).
///
/// Another data flow of the entry marked while that PAUSE is outstanding gets a PAUSE of its
/// own, and its RESUME goes with the entry's (`pauseNum` 1→0): the table keeps those flows
/// aside ([`Aquarius`]'s `sharers`, `others` here). With one PAUSE per entry such a flow was
/// never paused at all: its marks only held the first flow's RESUME back while it kept
/// sending, a whole window into the queue (170 KB of one flow in a paused queue, and the
/// ingress past its buffer threshold, in the §4 Web Server run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowState {
    pub pause_num: u32,
    pub bytes: u32,
    /// A PAUSE is outstanding for `paused_fid` (sent on `paused_port`, for `paused_upq`).
    pub paused: bool,
    /// PAUSEs are outstanding for other flows of the entry too.
    pub others: bool,
    pub paused_fid: u32,
    pub paused_port: u32,
    pub paused_upq: u8,
}

/// A flow paused through an entry whose PAUSE named another flow (see [`FlowState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sharer {
    slot: u32,
    fid: u32,
    port: u32,
    upq: u8,
}

/// Why a packet was marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// `L > Q_high`: every flow of the queue.
    QHigh,
    /// `Q_low < L`, `T_avg < T_min` and the flow above `Occu_fair`.
    Contribution,
}

/// Counters of one port (egress side: marks, signals sent for flows entering on it are
/// counted on the ingress port; upstream side in [`UpstreamStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub marked_qhigh: u64,
    pub marked_contribution: u64,
    /// PAUSEs sent on this port, by the reason of the mark that raised them.
    pub pauses_sent_qhigh: u64,
    pub pauses_sent_contribution: u64,
    pub resumes_sent: u64,
    pub assignments: u64,
    pub table_collisions: u64,
    /// Flows with packets in the port's queues now / at most.
    pub active_flows: u64,
    pub active_flows_max: u64,
    /// Bytes in `rsvQ` now / at most.
    pub rsv_bytes: u64,
    pub rsv_bytes_max: u64,
}

#[derive(Debug, Clone)]
struct Port {
    /// By `NQ_active` 0..=queues (0 as 1).
    q_low: Vec<u64>,
    q_high: Vec<u64>,
    t_min: Vec<u64>,
    /// Per queue: `T_avg`, last arrival, bytes queued.
    t_avg: Vec<u64>,
    last: Vec<u64>,
    bytes: Vec<u64>,
    qt: QueueTable,
    /// Queues dynamic mapping may use ([`Aquarius::limit_mapping`]).
    map: u128,
    src: [u8; 6],
    dst: [u8; 6],
    stats: PortStats,
}

/// Where [`Aquarius::assign`] put a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    pub queue: u8,
    pub slot: u32,
}

/// `T_avg` before the first inter-arrival sample (which then seeds the average).
const T_IDLE: u64 = u32::MAX as u64;

/// Aquarius on one pipe of a switch (or on a device's egress ports).
#[derive(Debug)]
pub struct Aquarius {
    cfg: AquariusConfig,
    table: FlowTable<FlowState>,
    ports: Vec<Port>,
    hrtt_ps: u64,
    /// α in 1/65536.
    alpha16: u64,
    /// Flows paused through an entry held by another flow's PAUSE (hash collisions: rare).
    sharers: Vec<Sharer>,
}

impl Aquarius {
    pub fn new(cfg: AquariusConfig, ports: &[BfcPort]) -> Result<Self, AquariusError> {
        if !(cfg.alpha > 0.0 && cfg.alpha <= 1.0) {
            return Err(AquariusError::Alpha(cfg.alpha));
        }
        let queues: Vec<usize> = ports.iter().map(|p| p.queues).collect();
        let table = FlowTable::new(&queues, cfg.table_factor, None).map_err(|e| match e {
            TableError::Queues(i, n) => AquariusError::Queues(i, n),
            TableError::Factor => AquariusError::TableFactor,
        })?;
        let hrtt_ps = cfg
            .hrtt_ps
            .unwrap_or_else(|| ports.iter().map(default_hrtt_ps).max().unwrap_or(0));
        // BFC's bound: timers add HRTT multiples to `now` (u64 ps).
        let hrtt_ps = interval(u128::from(hrtt_ps)).ok_or(AquariusError::Hrtt(hrtt_ps))?;
        let ports = ports
            .iter()
            .map(|p| {
                // Index 0: the entered queue is paused (drain rate 0, see `on_enqueue`).
                let n = 1..=p.queues as u32;
                Port {
                    q_low: std::iter::once(0)
                        .chain(n.clone().map(|k| threshold_bytes(hrtt_ps, p.rate_bps, k)))
                        .collect(),
                    q_high: std::iter::once(0)
                        .chain(
                            n.clone()
                                .map(|k| threshold_bytes(hrtt_ps, p.rate_bps, k).saturating_mul(3)),
                        )
                        .collect(),
                    t_min: std::iter::once(u64::MAX)
                        .chain(n.map(|k| t_min_ps(p.mtu_frame, p.rate_bps, k)))
                        .collect(),
                    t_avg: vec![T_IDLE; p.queues],
                    last: vec![u64::MAX; p.queues],
                    bytes: vec![0; p.queues],
                    qt: QueueTable::new(p.queues),
                    map: if p.queues >= 128 {
                        u128::MAX
                    } else {
                        (1u128 << p.queues) - 1
                    },
                    src: p.mac,
                    dst: p.peer_mac.unwrap_or(DST_SIGNAL),
                    stats: PortStats::default(),
                }
            })
            .collect();
        Ok(Aquarius {
            alpha16: ((cfg.alpha * 65536.0).round() as u64).clamp(1, 65536),
            cfg,
            table,
            ports,
            hrtt_ps,
            sharers: Vec::new(),
        })
    }

    pub fn config(&self) -> &AquariusConfig {
        &self.cfg
    }

    /// Forced placement for experiments: dynamic mapping on `port` uses only its first `n`
    /// queues (`rsvQ` may still be any empty queue). `n` 0 or above the port's queues: all.
    pub fn limit_mapping(&mut self, port: usize, n: usize) {
        let p = &mut self.ports[port];
        let queues = p.bytes.len();
        if (1..queues).contains(&n) {
            p.map = (1u128 << n) - 1;
        }
    }

    /// Takes the queues of `mask` on `port` out of Aquarius: out of dynamic mapping and out
    /// of `rsvQ` (see the module doc); the caller calls no hook for their packets.
    pub fn reserve(&mut self, port: usize, mask: u128) -> Result<(), AquariusError> {
        if self.table.reserve(port, mask) {
            Ok(())
        } else {
            Err(AquariusError::Reserved(port))
        }
    }

    /// The reserved queues of `port` (bit q).
    #[inline]
    pub fn reserved(&self, port: usize) -> u128 {
        self.table.reserved(port)
    }

    /// The one-hop RTT in use (ps).
    pub fn hrtt_ps(&self) -> u64 {
        self.hrtt_ps
    }

    /// `Q_low` of `egress` with `nq` active queues (bytes; `nq` 0: a paused queue, 0 B).
    pub fn q_low(&self, egress: usize, nq: u32) -> u64 {
        let p = &self.ports[egress];
        p.q_low[(nq as usize).min(p.q_low.len() - 1)]
    }

    /// `Q_high` of `egress` with `nq` active queues (bytes; `nq` 0: a paused queue, 0 B).
    pub fn q_high(&self, egress: usize, nq: u32) -> u64 {
        let p = &self.ports[egress];
        p.q_high[(nq as usize).min(p.q_high.len() - 1)]
    }

    /// `T_min` of `egress` with `nq` active queues (ps; `nq` 0: a paused queue, unbounded).
    pub fn t_min(&self, egress: usize, nq: u32) -> u64 {
        let p = &self.ports[egress];
        p.t_min[(nq as usize).min(p.t_min.len() - 1)]
    }

    /// `T_avg` of a queue (ps).
    pub fn t_avg(&self, egress: usize, queue: usize) -> u64 {
        self.ports[egress].t_avg[queue]
    }

    /// The flow state in `slot`.
    pub fn flow(&self, slot: u32) -> Option<(u8, u32, FlowState)> {
        self.table.entry(slot).map(|e| (e.queue, e.size, e.extra))
    }

    /// The upstream side (QueueTable) of `port`.
    pub fn queue_table(&self, port: usize) -> &QueueTable {
        &self.ports[port].qt
    }

    /// Counters of `port`.
    pub fn port_stats(&self, port: usize) -> &PortStats {
        &self.ports[port].stats
    }

    /// Ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Active flows of `queue` (Alg. 1's `N`): flows mapped there and not moved to `rsvQ`,
    /// or the held flows if it is `rsvQ`.
    #[inline]
    fn active_flows(p: &Port, queue: usize) -> u32 {
        p.qt.active(queue)
    }

    /// Alg. 1 lines 2–6 for a packet of `fid` to `egress`: its flow's queue (an empty one
    /// for a new flow, unpaused first, else the least occupied, never `rsvQ`), or `rsvQ` if
    /// the downstream paused the flow here (§3.3; a move may resume `rsvQ`: `cmds`).
    #[inline]
    pub fn assign(
        &mut self,
        egress: usize,
        fid: u32,
        nonempty: u128,
        paused: u128,
        now: u64,
        cmds: &mut Vec<QueueCmd>,
    ) -> Assigned {
        let p = &mut self.ports[egress];
        let rsv = p.qt.rsv_mask();
        // Never mapped to: rsvQ, and queues outside a forced placement.
        let off = rsv | !p.map;
        let (bytes, qt) = (&p.bytes, &p.qt);
        let hold_rsv = self.cfg.hold_rsv;
        let placed = self.table.place(egress, fid, now, |pick| {
            // A flow held by pausing its own queue goes back there (§3.3: it is paused).
            if let Some(h) = qt.paused_home(fid) {
                return usize::from(h);
            }
            // With no rsvQ allocated, the last queue a rsvQ could be taken from (empty, no
            // flow, unpaused, any but the reserved: as `on_signal` takes it) is held back for
            // it (see the module doc).
            let mut hold = 0u128;
            if hold_rsv && rsv == 0 {
                let spare = (0..bytes.len())
                    .filter(|&q| bytes[q] == 0 && qt.flows(q) == 0)
                    .fold(0u128, |m, q| m | 1 << q)
                    & pick.allowed()
                    & !nonempty
                    & !paused;
                if spare.count_ones() == 1 {
                    hold = spare;
                }
            }
            pick.empty(nonempty | off | hold, paused)
                .unwrap_or_else(|| {
                    pick.least_occupied(|q| {
                        if (off | hold) & (1 << q) != 0 {
                            u64::MAX
                        } else {
                            // Unpaused queues first (a new flow should not inherit a pause).
                            bytes[q] | (u64::from(paused & (1 << q) != 0) << 62)
                        }
                    })
                })
        });
        if placed.fresh {
            p.qt.flow_in(usize::from(placed.queue));
            p.stats.assignments += 1;
            p.stats.active_flows += 1;
            p.stats.active_flows_max = p.stats.active_flows_max.max(p.stats.active_flows);
            if let Some(x) = self.table.extra_mut(placed.slot) {
                *x = FlowState::default();
            }
        } else if placed.index_collision {
            p.stats.table_collisions += 1;
        }
        if placed.fresh
            && self.cfg.share_on_join
            && p.qt.lone_held(placed.queue)
            && p.qt.paused_home(fid).is_none()
        {
            let empty = Self::rsv_candidates(p, paused, self.table.reserved(egress));
            let table = &self.table;
            let qt = &p.qt;
            let pkts: Vec<(u32, u32)> = qt
                .lone_flows(placed.queue)
                .map(|f| (f, Self::old_pkts(table, qt, egress, f).1))
                .collect();
            let p = &mut self.ports[egress];
            p.qt.on_join(
                placed.queue,
                empty,
                |f| pkts.iter().find(|x| x.0 == f).map_or(0, |x| x.1),
                cmds,
            );
        }
        let p = &mut self.ports[egress];
        let queue = p.qt.steer(fid, cmds).unwrap_or(placed.queue);
        Assigned {
            queue,
            slot: placed.slot,
        }
    }

    /// Undoes [`assign`](Self::assign) for a packet of `fid` that was not queued in `queue`.
    pub fn unassign(&mut self, egress: usize, slot: u32, fid: u32, queue: u8, now: u64) {
        if slot == NO_SLOT {
            return;
        }
        self.table.unplace(slot, now);
        let p = &mut self.ports[egress];
        if let Some(e) = self.table.entry(slot) {
            if e.size == 0 {
                p.qt.flow_out(usize::from(e.queue));
                p.stats.active_flows = p.stats.active_flows.saturating_sub(1);
            }
        }
        if p.qt.rsv() == Some(queue) {
            p.qt.unsteer(fid);
        }
    }

    /// Alg. 1 lines 7–16: a packet of `len` bytes (flow `fid` in `slot`, from `in_port`
    /// carrying `upq`) entered `queue` of `egress`, which held `queue_bytes` before it, with
    /// `nq_active` active queues. Returns its mark and the PAUSE to send on 0→1.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_enqueue(
        &mut self,
        in_port: usize,
        upq: u8,
        egress: usize,
        queue: usize,
        slot: u32,
        fid: u32,
        len: u32,
        queue_bytes: u64,
        nq_active: u32,
        now: u64,
    ) -> (Option<Mark>, Option<(usize, SignalRepr)>) {
        let p = &mut self.ports[egress];
        p.bytes[queue] += u64::from(len);
        if p.qt.rsv() == Some(queue as u8) {
            p.stats.rsv_bytes += u64::from(len);
            p.stats.rsv_bytes_max = p.stats.rsv_bytes_max.max(p.stats.rsv_bytes);
        }
        let n_flows = Self::active_flows(p, queue);
        let Some(flow) = self.table.extra_mut(slot) else {
            return (None, None);
        };
        flow.bytes = flow.bytes.saturating_add(len);
        let l = queue_bytes + u64::from(len);
        let nq = (nq_active as usize).min(p.q_low.len() - 1);
        let mark = if l > p.q_high[nq] {
            Some(Mark::QHigh)
        } else if l > p.q_low[nq]
            && p.t_avg[queue] < p.t_min[nq]
            && u64::from(flow.bytes) > occu_fair(l, n_flows)
        {
            Some(Mark::Contribution)
        } else {
            None
        };
        // Line 14: T_avg = α·T + (1−α)·T_avg, on every arrival (see the module doc).
        let last = p.last[queue];
        if last != u64::MAX {
            // A gap longer than an HRTT only says "idle": capped there, so one idle period
            // does not hide the next burst for hundreds of packets.
            let t = now.saturating_sub(last).min(self.hrtt_ps.max(1));
            p.t_avg[queue] = if p.t_avg[queue] == T_IDLE {
                t
            } else {
                (self.alpha16 * t + (65536 - self.alpha16) * p.t_avg[queue]) >> 16
            };
        }
        p.last[queue] = now;
        let Some(m) = mark else {
            return (None, None);
        };
        match m {
            Mark::QHigh => p.stats.marked_qhigh += 1,
            Mark::Contribution => p.stats.marked_contribution += 1,
        }
        flow.pause_num += 1;
        if upq == NO_UPQ || in_port >= self.ports.len() {
            return (Some(m), None);
        }
        if flow.paused {
            // Outstanding for this flow already, or another flow of the entry: that one gets
            // a PAUSE of its own, once (see FlowState).
            if flow.paused_fid == fid && flow.paused_port == in_port as u32 {
                return (Some(m), None);
            }
            let sh = Sharer {
                slot,
                fid,
                port: in_port as u32,
                upq,
            };
            if self
                .sharers
                .iter()
                .any(|x| x.slot == slot && x.fid == fid && x.port == sh.port)
            {
                return (Some(m), None);
            }
            flow.others = true;
            self.sharers.push(sh);
        } else {
            flow.paused = true;
            (flow.paused_fid, flow.paused_port, flow.paused_upq) = (fid, in_port as u32, upq);
        }
        let ip = &mut self.ports[in_port];
        match m {
            Mark::QHigh => ip.stats.pauses_sent_qhigh += 1,
            Mark::Contribution => ip.stats.pauses_sent_contribution += 1,
        }
        let sig = SignalRepr {
            dst_addr: ip.dst,
            src_addr: ip.src,
            signal: Signal::FlowPause { queue: upq, fid },
        };
        (Some(m), Some((in_port, sig)))
    }

    /// Alg. 2: a packet (flow `fid` in `slot`, `len` bytes, `marked` at enqueue) left
    /// `queue` of `egress`. On `pauseNum` 1→0 the RESUMEs go to `sigs` if PAUSEs are
    /// outstanding, each to where its PAUSE went ([`FlowState`]: the leaving packet's own
    /// ingress port and upstream queue are not used); the upstream side of `egress` may
    /// resume or release `rsvQ` (`cmds`).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_dequeue(
        &mut self,
        egress: usize,
        queue: usize,
        slot: u32,
        fid: u32,
        len: u32,
        marked: bool,
        _in_port: usize,
        _upq: u8,
        now: u64,
        cmds: &mut Vec<QueueCmd>,
        sigs: &mut Vec<(usize, SignalRepr)>,
    ) {
        let p = &mut self.ports[egress];
        p.bytes[queue] = p.bytes[queue].saturating_sub(u64::from(len));
        if p.qt.rsv() == Some(queue as u8) {
            p.stats.rsv_bytes = p.stats.rsv_bytes.saturating_sub(u64::from(len));
        }
        if slot == NO_SLOT {
            return;
        }
        // A PAUSE received for the entry's flow counted the entry's packets in its queue as
        // the flow's old packets (`on_signal`), those of a flow sharing the entry (a hash
        // collision) included: their departures from that queue are counted for it too, or
        // `rsvQ` would wait for them forever (a deadlock). The cost: with a collision
        // `rsvQ` may resume before the held flow's own old packets have all left.
        let claimer = self.table.entry(slot).map_or(fid, |e| e.fid);
        let who = if claimer != fid && p.qt.rsv() != Some(queue as u8) {
            claimer
        } else {
            fid
        };
        self.table.depart(egress, slot, now);
        p.qt.departed(who, queue as u8, cmds);
        if p.qt.rsv().is_none() {
            p.stats.rsv_bytes = 0;
        }
        let (size, home) = self.table.entry(slot).map_or((1, 0), |e| (e.size, e.queue));
        if size == 0 {
            p.qt.flow_out(usize::from(home));
            p.stats.active_flows = p.stats.active_flows.saturating_sub(1);
        }
        let Some(flow) = self.table.extra_mut(slot) else {
            return;
        };
        flow.bytes = flow.bytes.saturating_sub(len);
        if !marked || flow.pause_num == 0 {
            return;
        }
        flow.pause_num -= 1;
        if flow.pause_num != 0 || !flow.paused {
            return;
        }
        // The flow the PAUSE named (see FlowState), whichever packet left last, and the
        // other flows of the entry paused since.
        flow.paused = false;
        let others = std::mem::take(&mut flow.others);
        let (fid, in_port, upq) = (flow.paused_fid, flow.paused_port as usize, flow.paused_upq);
        self.resume(in_port, upq, fid, sigs);
        if others {
            let mut i = 0;
            while i < self.sharers.len() {
                let x = self.sharers[i];
                if x.slot == slot {
                    self.sharers.swap_remove(i);
                    self.resume(x.port as usize, x.upq, x.fid, sigs);
                } else {
                    i += 1;
                }
            }
        }
    }

    /// RESUME(upq, fid) on `in_port`.
    fn resume(&mut self, in_port: usize, upq: u8, fid: u32, sigs: &mut Vec<(usize, SignalRepr)>) {
        let Some(ip) = self.ports.get_mut(in_port) else {
            return;
        };
        ip.stats.resumes_sent += 1;
        sigs.push((
            in_port,
            SignalRepr {
                dst_addr: ip.dst,
                src_addr: ip.src,
                signal: Signal::FlowResume { queue: upq, fid },
            },
        ));
    }

    /// The queue `fid` is mapped to on `port` and its packets there that must leave before
    /// `rsvQ` may run: its entry's, less those of flows sharing the entry (a hash collision,
    /// §5) that are held in rsvQ already. Those leave rsvQ, not the flow's queue, and are
    /// counted for their own flow there: left in, the count never reached 0 and rsvQ, paused
    /// until it did, held them for good (a deadlock that spread upstream through the marks
    /// it held; the §4 Web Server run, 1 ms). `(None, 0)`: no packet of `fid` here.
    fn old_pkts(
        table: &FlowTable<FlowState>,
        qt: &QueueTable,
        port: usize,
        fid: u32,
    ) -> (Option<u8>, u32) {
        let slot = table.slot_of(port, fid);
        match table.entry(slot) {
            Some(e) if e.size > 0 && e.fid == fid => {
                let in_rsv: u32 = qt
                    .held()
                    .filter(|&(f, _)| f != fid && table.slot_of(port, f) == slot)
                    .map(|(_, n)| n)
                    .sum();
                (Some(e.queue), e.size.saturating_sub(in_rsv))
            }
            _ => (None, 0),
        }
    }

    /// The queues of a port a `rsvQ` may be taken from: empty, holding no flow, unpaused,
    /// and never a reserved (strict, ACK) one.
    fn rsv_candidates(p: &Port, paused: u128, reserved: u128) -> u128 {
        let mut empty = 0u128;
        for (q, &b) in p.bytes.iter().enumerate() {
            if b == 0 && p.qt.flows(q) == 0 && paused & (1 << q) == 0 {
                empty |= 1 << q;
            }
        }
        empty & !reserved
    }

    /// §3.3: a PAUSE/RESUME(queue, FID) received on `port` (from its downstream) acts on
    /// `port`'s egress queues; `paused` is the port's paused-queue bitmap (a `rsvQ` is taken
    /// from queues that are empty, unpaused and hold no flow). Returns false for signals
    /// that are not Aquarius's.
    pub fn on_signal(
        &mut self,
        port: usize,
        signal: &Signal,
        paused: u128,
        cmds: &mut Vec<QueueCmd>,
    ) -> bool {
        let Some(p) = self.ports.get(port) else {
            return false;
        };
        match *signal {
            Signal::FlowPause { queue, fid } => {
                let (home, pkts) = Self::old_pkts(&self.table, &p.qt, port, fid);
                let empty = Self::rsv_candidates(p, paused, self.table.reserved(port));
                let p = &mut self.ports[port];
                let queue = queue.min((p.bytes.len() - 1) as u8);
                // A queue of a forced placement is shared by construction: every later flow
                // is mapped to it, so a flow alone there for now is treated as sharing it.
                let all = if p.bytes.len() >= 128 {
                    u128::MAX
                } else {
                    (1u128 << p.bytes.len()) - 1
                };
                let h = home.unwrap_or(queue);
                let forced = p.map != all && p.map & (1 << h) != 0;
                p.qt.on_pause(fid, queue, home, pkts, empty, forced, cmds);
                true
            }
            Signal::FlowResume { fid, .. } => {
                self.ports[port].qt.on_resume(fid, cmds);
                true
            }
            _ => false,
        }
    }
}

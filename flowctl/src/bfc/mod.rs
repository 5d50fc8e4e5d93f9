//! Backpressure Flow Control (BFC; Goyal et al., "Backpressure Flow Control", §3.3, App. A/B).
//!
//! Per-hop, per-flow flow control with bounded state:
//!
//! * **Queue assignment (§3.3.1).** A flow table indexed by ⟨egress port, hash(FID)⟩, sized
//!   `table_factor` (100) × the port's queues, with entries {queue, size in packets, timestamp}.
//!   A packet whose entry holds no packets and has been idle longer than the sticky threshold
//!   (2·HRTT) gets a new queue: an empty one from the port's bitmap of non-empty queues
//!   (searched from a rotating start; unpaused ones, and ones no sticky flow used within
//!   the sticky time, first: an extension so that a flow whose queue is momentarily empty
//!   does not find a new flow, and its pauses, in it), else a random one. Otherwise it
//!   follows the entry (sticky assignment). `Stochastic` hashes the FID to a fixed queue
//!   ("BFC + stochastic", §6.1, App. E.4); `Single` puts every flow in queue 0 ("BFC +
//!   single"). The paper's high-priority queue for PAUSE/RESUME is the port's control queue
//!   in Xoff, outside the data queues. Data queues the caller reserves ([`Bfc::reserve`]:
//!   the port's strict-priority queues, e.g. an ACK class as the HPCC ns-3 simulator keeps
//!   ACKs in its never-paused queue 0) take no part: their packets keep their static queue,
//!   are never marked and never paused, and no flow is assigned to them.
//! * **Backpressure (§3.3.2).** A pause counter per ⟨ingress port, upstreamQ⟩ ([`BfcShared`],
//!   atomic so every pipe of a switch shares it). On enqueue into a queue longer than `Th` the
//!   counter is incremented and the packet marked; when a marked packet leaves it is
//!   decremented. 0→1 sends PAUSE(upstreamQ) and 1→0 RESUME(upstreamQ) to the ingress port's
//!   peer ([`crate::wire::signal`]); a periodic pause-bitmap refresh repairs lost signals.
//!   [`Resume::BelowTh`] is the refinement §3.3.2 suggests but leaves out: a queue's marks
//!   stop counting once it has drained below `Th` (a per-queue epoch tells the marked
//!   packets still queued that they no longer count), which hides the HRTT the resume takes.
//! * **Threshold (§3.3.2).** `Th = HRTT · μ / N_active` per egress port, `μ` its rate,
//!   `N_active` its non-empty, non-paused queues (min 1), HRTT the largest one-hop RTT over
//!   the ingress ports (unless configured: 2 × propagation delay + the wire time of two
//!   full-size frames, [`default_hrtt_ps`]). Precomputed per port as a table indexed by
//!   `N_active`, as the paper's match-action table.
//! * **Deadlock guard (App. B).** ⟨ingress, egress⟩ pairs for which backpressure is elided
//!   (packets from a higher layer bouncing back up in a Clos).
//!
//! Pure logic: the caller passes queue views and time (ps) and turns the returned
//! [`SignalRepr`]s into frames; received signals become AFC commands ([`Bfc::apply_signal`]).
//!
//! The module follows those concerns: [`assign`] (the flow table and queue assignment, generic
//! so another scheme's table is the same code), `backpressure` (marks, `Th`, the deadlock
//! table), `shared` ([`BfcShared`]: pause counters and counters of all pipes) and `signals`
//! (PAUSE/RESUME/BITMAP out, received signals in). [`Bfc`] ties them together per pipe.

pub mod assign;
mod backpressure;
mod shared;
mod signals;
#[cfg(test)]
mod tests;

pub use assign::{fid_hash, FlowTable, Placed, NO_SLOT};
pub use backpressure::{default_hrtt_ps, threshold_bytes, NO_UPQ};
pub use shared::{BfcShared, Counter, PortStats, UPSTREAM_QUEUES};

use crate::afc::Afc;
use crate::wire::signal::{Signal, SignalRepr};
use assign::TableError;
use backpressure::Backpressure;
use serde::{Deserialize, Serialize};
use signals::Signals;
use std::sync::Arc;

/// How flows are mapped to queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assignment {
    /// §3.3.1: empty queue if any, else random; sticky while the flow is active.
    #[default]
    Dynamic,
    /// Static hash of the FID to a queue (SFQ-like).
    Stochastic,
    /// Every flow in queue 0 (PFC-like HoL blocking).
    Single,
}

/// When a paused upstream queue is resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resume {
    /// §3.3.2 pseudocode: once every packet that exceeded `Th` has left (the counter falls
    /// to 0). The queue then runs dry for an HRTT while the resume takes effect (App. A).
    #[default]
    Drained,
    /// §3.3.2's suggested refinement: as soon as every queue holding such packets has
    /// drained below `Th`. `Th` is one HRTT of the queue's drain, so the resumed data
    /// arrives as the queue runs dry instead of an HRTT after.
    BelowTh,
}

/// Parameters of BFC on one switch (times in ps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BfcConfig {
    pub assignment: Assignment,
    /// Flow-table entries per egress port, as a multiple of its queues (paper: 100).
    pub table_factor: usize,
    /// One-hop RTT; default the largest [`default_hrtt_ps`] over the ports.
    pub hrtt_ps: Option<u64>,
    /// Fixed pause threshold in bytes instead of `HRTT·μ/N_active` (Fig. 7b sweeps it).
    pub th_bytes: Option<u64>,
    /// Sticky threshold as a multiple of HRTT (paper: 2).
    pub sticky_hrtts: u64,
    /// Period of the pause-bitmap refresh; default 10 × HRTT (at least 10 µs). 0 disables it.
    pub refresh_ps: Option<u64>,
    /// Seed of the random queue choice.
    pub seed: u64,
    /// When a paused upstream queue is resumed.
    pub resume: Resume,
}

impl Default for BfcConfig {
    fn default() -> Self {
        BfcConfig {
            assignment: Assignment::Dynamic,
            table_factor: 100,
            hrtt_ps: None,
            th_bytes: None,
            sticky_hrtts: 2,
            refresh_ps: None,
            seed: 1,
            resume: Resume::Drained,
        }
    }
}

/// What BFC needs to know about a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfcPort {
    pub rate_bps: u64,
    pub delay_ps: u64,
    /// Data queues (1..=128).
    pub queues: usize,
    /// Largest frame (bytes, without FCS) the port sends.
    pub mtu_frame: u32,
    /// Source MAC of signals sent on this port.
    pub mac: [u8; 6],
    /// Destination MAC of signals sent on this port ([`DST_SIGNAL`] if unknown).
    pub peer_mac: Option<[u8; 6]>,
}

/// Invalid BFC parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BfcError {
    #[error("port {0}: {1} queues, BFC supports 1..=128")]
    Queues(usize, usize),
    #[error("table_factor must be 1..=100000")]
    TableFactor,
    #[error("deadlock table names port {0}, the switch has {1}")]
    ElidePort(usize, usize),
    #[error("sticky_hrtts must be > 0")]
    Sticky,
    #[error("{0} of {1} ps is longer than BFC allows ({MAX_INTERVAL_PS} ps, one hour)")]
    Interval(&'static str, u128),
    #[error("port {0}: every data queue is strict, none left for BFC's assignment")]
    Reserved(usize),
}

/// Longest HRTT, sticky time (`sticky_hrtts` × HRTT) or refresh period accepted: one hour.
/// Times are `u64` picoseconds (2^64 ps is 213 days) and timers add these intervals to `now`,
/// so they must leave room for any run; real HRTTs are microseconds to milliseconds. Without
/// the bound a fuzzed `hrtt = "8888888888888500us"` overflowed `sticky_hrtts * hrtt_ps`.
pub const MAX_INTERVAL_PS: u64 = 3_600 * 1_000_000_000_000;

/// `ps` if it is at most [`MAX_INTERVAL_PS`] (BFC's and Aquarius's timer intervals).
pub fn interval(ps: u128) -> Option<u64> {
    u64::try_from(ps).ok().filter(|&p| p <= MAX_INTERVAL_PS)
}

fn bounded(what: &'static str, ps: u128) -> Result<u64, BfcError> {
    interval(ps).ok_or(BfcError::Interval(what, ps))
}

/// The result of queue assignment for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    /// Data queue of the egress port.
    pub queue: u8,
    /// Flow-table slot (for [`Bfc::on_dequeue`] / [`Bfc::unassign`]).
    pub slot: u32,
}

/// xorshift64*: the random queue of a new flow that finds no empty one.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// BFC on one pipe of a switch: flow table, thresholds, signal generation.
#[derive(Debug)]
pub struct Bfc {
    cfg: BfcConfig,
    table: FlowTable<()>,
    rng: Rng,
    bp: Backpressure,
    sig: Signals,
    hrtt_ps: u64,
    shared: Arc<BfcShared>,
}

impl Bfc {
    /// BFC for a switch with `ports`; `elide` lists ⟨ingress, egress⟩ port pairs without
    /// backpressure; `signal_ports[p]` says whether the peer of `p` speaks BFC (refreshes are
    /// sent there). `shared` is the switch's [`BfcShared`]; `refresher` is true on one pipe.
    pub fn new(
        cfg: BfcConfig,
        ports: &[BfcPort],
        elide: &[(usize, usize)],
        signal_ports: Vec<bool>,
        shared: Arc<BfcShared>,
        refresher: bool,
    ) -> Result<Bfc, BfcError> {
        if !(1..=100_000).contains(&cfg.table_factor) {
            return Err(BfcError::TableFactor);
        }
        if cfg.sticky_hrtts == 0 {
            return Err(BfcError::Sticky);
        }
        let hrtt_ps = cfg
            .hrtt_ps
            .unwrap_or_else(|| ports.iter().map(default_hrtt_ps).max().unwrap_or(0));
        let hrtt_ps = bounded("hrtt", u128::from(hrtt_ps))?;
        let queues: Vec<usize> = ports.iter().map(|p| p.queues).collect();
        let sticky_ps = bounded(
            "sticky time",
            u128::from(cfg.sticky_hrtts) * u128::from(hrtt_ps),
        )?;
        let table =
            FlowTable::new(&queues, cfg.table_factor, Some(sticky_ps)).map_err(|e| match e {
                TableError::Queues(i, n) => BfcError::Queues(i, n),
                TableError::Factor => BfcError::TableFactor,
            })?;
        let bp = Backpressure::new(&cfg, ports, hrtt_ps, elide)?;
        let refresh_ps = bounded(
            "refresh",
            u128::from(
                cfg.refresh_ps
                    .unwrap_or_else(|| (10 * hrtt_ps).max(10_000_000)),
            ),
        )?;
        Ok(Bfc {
            rng: Rng::new(cfg.seed),
            table,
            bp,
            sig: Signals::new(ports, signal_ports, refresher, refresh_ps),
            hrtt_ps,
            shared,
            cfg,
        })
    }

    pub fn config(&self) -> &BfcConfig {
        &self.cfg
    }

    pub fn shared(&self) -> &Arc<BfcShared> {
        &self.shared
    }

    /// The one-hop RTT in use (ps).
    pub fn hrtt_ps(&self) -> u64 {
        self.hrtt_ps
    }

    /// The sticky threshold (ps).
    pub fn sticky_ps(&self) -> u64 {
        self.cfg.sticky_hrtts * self.hrtt_ps
    }

    /// `Th` of `egress` with `n_active` active queues (bytes).
    #[inline]
    pub fn threshold(&self, egress: usize, n_active: u32) -> u64 {
        self.bp.threshold(egress, n_active)
    }

    /// Flow-table entries of `egress`.
    pub fn table_len(&self, egress: usize) -> usize {
        self.table.port_len(egress)
    }

    /// Takes the data queues of `mask` on `egress` out of BFC (see the module doc); the
    /// caller leaves their packets in their static queue and calls no hook for them.
    pub fn reserve(&mut self, egress: usize, mask: u128) -> Result<(), BfcError> {
        if self.table.reserve(egress, mask) {
            Ok(())
        } else {
            Err(BfcError::Reserved(egress))
        }
    }

    /// The reserved queues of `egress` (bit q).
    #[inline]
    pub fn reserved(&self, egress: usize) -> u128 {
        self.table.reserved(egress)
    }

    /// Queue assignment of a packet of flow `fid` to `egress` (the flow-table half of the
    /// paper's `On Enqueue`): bumps the entry's size and timestamp. `nonempty` is the port's
    /// bitmap of non-empty data queues, `paused` of the queues the downstream has paused:
    /// an empty queue that is still paused (its last flow's marked packets are still
    /// downstream) is taken only when no empty unpaused queue is left, so a new flow does
    /// not inherit another flow's pause.
    #[inline]
    pub fn assign(
        &mut self,
        egress: usize,
        fid: u32,
        nonempty: u128,
        paused: u128,
        now: u64,
    ) -> Assigned {
        let (assignment, seed, rng) = (self.cfg.assignment, self.cfg.seed, &mut self.rng);
        let placed = self.table.place(egress, fid, now, |pick| match assignment {
            Assignment::Dynamic => pick
                .empty(nonempty, paused)
                .unwrap_or_else(|| pick.spread(rng.next())),
            Assignment::Stochastic => pick.spread(u64::from(fid_hash(
                u128::from(fid),
                u128::from(seed),
                0,
                0,
                0,
            ))),
            Assignment::Single => pick.spread(0),
        });
        // The counters are looked up only when one moves (most packets follow their entry).
        if placed.fresh {
            let stats = &self.shared.ports[egress];
            stats.assignments.add(1);
            if nonempty & (1 << placed.queue) != 0 {
                stats.collisions.add(1);
            }
        } else if placed.index_collision {
            self.shared.ports[egress].table_collisions.add(1);
        }
        Assigned {
            queue: placed.queue,
            slot: placed.slot,
        }
    }

    /// Undoes [`assign`](Self::assign) for a packet that was not enqueued (MMU drop).
    pub fn unassign(&mut self, slot: u32, now: u64) {
        self.table.unplace(slot, now);
    }

    /// Backpressure half of `On Enqueue`: a packet from `in_port` carrying `upq` (or
    /// [`NO_UPQ`]) enters `queue` of `egress` holding `queue_bytes` with `n_active` active
    /// queues. Returns the packet's mark (0: not marked; keep it for
    /// [`on_dequeue`](Self::on_dequeue)), and the PAUSE to send on `in_port` when its
    /// counter went 0→1.
    #[inline]
    pub fn on_enqueue(
        &mut self,
        in_port: usize,
        upq: u8,
        egress: usize,
        queue: usize,
        queue_bytes: u64,
        n_active: u32,
    ) -> (u16, Option<(usize, SignalRepr)>) {
        let stats = &self.shared.ports[egress];
        let n = n_active.max(1);
        stats.active_queues.set(u64::from(n));
        if u64::from(n) > stats.active_queues_max.get() {
            stats.active_queues_max.set(u64::from(n));
        }
        let mark = self.bp.mark(in_port, upq, egress, queue, queue_bytes, n);
        if mark == 0 {
            return (0, None);
        }
        stats.marked.add(1);
        let sig = self
            .shared
            .incr(in_port, upq)
            .then(|| self.sig.pause(&self.shared, in_port, upq));
        (mark, sig)
    }

    /// `On Dequeue`: a packet assigned to `slot`, with `mark` from
    /// [`on_enqueue`](Self::on_enqueue), leaves `queue` of `egress`; if its mark still
    /// counts, its ⟨in_port, upq⟩ counter is decremented and the RESUME returned on 1→0.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_dequeue(
        &mut self,
        egress: usize,
        queue: usize,
        slot: u32,
        mark: u16,
        in_port: usize,
        upq: u8,
        now: u64,
    ) -> Option<(usize, SignalRepr)> {
        self.table.depart(egress, slot, now);
        if !self.bp.counts_out(egress, queue, mark, in_port, upq) {
            return None;
        }
        self.sig.uncount(&self.shared, in_port, upq, 1)
    }

    /// [`Resume::BelowTh`]: after a departure from `queue` of `egress`, which now holds
    /// `queue_bytes` with `n_active` active queues: once it is below `Th`, the marks it
    /// holds stop counting, and the RESUMEs of counters that fell to 0 go to `out`.
    #[inline]
    pub fn after_dequeue(
        &mut self,
        egress: usize,
        queue: usize,
        queue_bytes: u64,
        n_active: u32,
        out: &mut Vec<(usize, SignalRepr)>,
    ) {
        let (sig, shared) = (&self.sig, &self.shared);
        self.bp
            .release_below_th(egress, queue, queue_bytes, n_active, |in_port, upq, n| {
                out.extend(sig.uncount(shared, in_port, upq, n));
            });
    }

    /// Marks `port` as leading to a BFC device (it sent a packet carrying upstreamQ), so the
    /// periodic refresh covers it even when the configuration did not say so. Shared by all
    /// pipes (the one that refreshes may not be the one that saw the packet).
    #[inline]
    pub fn note_signal_port(&mut self, port: usize) {
        self.shared.learn_peer(port);
    }

    /// When [`refresh`](Self::refresh) next has work (`now` anchors a newly armed timer).
    pub fn refresh_due(&mut self, now: u64) -> Option<u64> {
        self.sig.refresh_due(&self.shared, now)
    }

    /// The pending refresh deadline, if any (0: due as soon as anchored by
    /// [`refresh_due`](Self::refresh_due) or [`refresh`](Self::refresh)).
    pub fn pending_refresh(&self) -> Option<u64> {
        self.sig.pending_refresh(&self.shared)
    }

    /// The periodic pause-bitmap refresh: for every BFC port whose bitmap is non-zero, was
    /// at the last refresh, or that was sent a PAUSE since (so a lost RESUME is repaired by
    /// one all-clear bitmap), a BITMAP signal.
    pub fn refresh(&mut self, now: u64, out: &mut Vec<(usize, SignalRepr)>) {
        self.sig.refresh(&self.shared, now, out);
    }

    /// Applies a signal received on `port` to its egress queues through the AFC channel
    /// (untimed pause, resume; a bitmap pauses its set bits and resumes its clear ones), and
    /// counts it. Returns the number of AFC commands applied.
    pub fn apply_signal(
        shared: &BfcShared,
        port: usize,
        signal: &Signal,
        afc: &Afc,
        now: u64,
    ) -> usize {
        signals::apply(shared, port, signal, afc, now)
    }
}

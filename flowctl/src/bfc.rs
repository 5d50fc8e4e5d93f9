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
//!   single"). The highest-priority queue stays reserved for signal frames: in Xoff that is
//!   the port's strict-priority control queue, so every data queue takes part in assignment.
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

use crate::afc::{Afc, AfcCmd};
use crate::wire::signal::{Signal, SignalRepr, DST_SIGNAL};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Queues a pause counter row covers (the upstream's queue ids, 0..128).
pub const UPSTREAM_QUEUES: usize = 128;
/// `upstreamQ` value meaning "the packet carried none" (it came from a device without BFC).
pub const NO_UPQ: u8 = 0xFF;
/// Flow-table slot meaning "not assigned by BFC".
pub const NO_SLOT: u32 = u32::MAX;

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
}

/// A relaxed atomic counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
}

/// Per-port BFC counters.
#[derive(Debug, Default)]
pub struct PortStats {
    /// Egress: `N_active` at the last enqueue.
    pub active_queues: Counter,
    /// Egress: most active queues seen.
    pub active_queues_max: Counter,
    /// Egress: new assignments (a flow (re)entering the table).
    pub assignments: Counter,
    /// Egress: new assignments that landed on an occupied queue.
    pub collisions: Counter,
    /// Egress: packets whose table entry was held by another flow (index collision).
    pub table_collisions: Counter,
    /// Egress: packets marked (enqueued above `Th`).
    pub marked: Counter,
    /// Ingress: pause-bitmap refreshes sent on this port / received on it.
    pub refresh_sent: Counter,
    pub refresh_received: Counter,
    /// Ingress: per upstream queue, PAUSE/RESUME frames sent to the peer.
    pub pauses_sent: Box<[Counter]>,
    pub resumes_sent: Box<[Counter]>,
    /// Egress: per own queue, PAUSE/RESUME frames received from the peer.
    pub pauses_received: Box<[Counter]>,
    pub resumes_received: Box<[Counter]>,
}

impl PortStats {
    fn new() -> Self {
        let row = || (0..UPSTREAM_QUEUES).map(|_| Counter::default()).collect();
        PortStats {
            pauses_sent: row(),
            resumes_sent: row(),
            pauses_received: row(),
            resumes_received: row(),
            ..PortStats::default()
        }
    }
}

/// State of a switch shared by all its pipes: pause counters and statistics.
#[derive(Debug)]
pub struct BfcShared {
    counters: Box<[AtomicU32]>,
    /// Non-zero pause counters (so the refresh timer knows whether it is needed).
    nonzero: AtomicU32,
    pub ports: Box<[PortStats]>,
    /// Ports found to lead to a BFC device (a shimmed packet arrived on them).
    learned_peers: Box<[std::sync::atomic::AtomicBool]>,
}

impl BfcShared {
    pub fn new(ports: usize) -> Self {
        BfcShared {
            counters: (0..ports * UPSTREAM_QUEUES)
                .map(|_| AtomicU32::new(0))
                .collect(),
            nonzero: AtomicU32::new(0),
            ports: (0..ports).map(|_| PortStats::new()).collect(),
            learned_peers: (0..ports)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
        }
    }

    /// The pause counter of ⟨ingress port, upstreamQ⟩.
    pub fn pause_counter(&self, in_port: usize, upq: u8) -> u32 {
        self.counters
            .get(in_port * UPSTREAM_QUEUES + usize::from(upq))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Upstream queues of `in_port` that should be paused (counter > 0).
    pub fn pause_bitmap(&self, in_port: usize) -> u128 {
        let row = &self.counters[in_port * UPSTREAM_QUEUES..(in_port + 1) * UPSTREAM_QUEUES];
        row.iter().enumerate().fold(0u128, |m, (q, c)| {
            if c.load(Ordering::Relaxed) > 0 {
                m | (1 << q)
            } else {
                m
            }
        })
    }

    /// Whether any pause counter is non-zero.
    pub fn any_paused(&self) -> bool {
        self.nonzero.load(Ordering::Relaxed) > 0
    }

    /// Increments; true on 0→1.
    fn incr(&self, in_port: usize, upq: u8) -> bool {
        let c = &self.counters[in_port * UPSTREAM_QUEUES + usize::from(upq)];
        let first = c.fetch_add(1, Ordering::AcqRel) == 0;
        if first {
            self.nonzero.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Subtracts `n` (> 0); true when that brought the counter to 0.
    fn decr(&self, in_port: usize, upq: u8, n: u32) -> bool {
        let c = &self.counters[in_port * UPSTREAM_QUEUES + usize::from(upq)];
        let prev = c
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v > 0).then(|| v.saturating_sub(n))
            })
            .unwrap_or(0);
        let last = prev > 0 && prev <= n;
        if last {
            self.nonzero.fetch_sub(1, Ordering::Relaxed);
        }
        last
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// FID hash of the flow that (re)claimed the entry.
    fid: u32,
    /// Packets of the entry's flows in the switch.
    size: u32,
    /// Last enqueue or dequeue (ps).
    ts: u64,
    /// Assigned queue (`NO_UPQ`: never assigned).
    queue: u8,
}

const EMPTY: Entry = Entry {
    fid: 0,
    size: 0,
    ts: 0,
    queue: NO_UPQ,
};

#[derive(Debug, Clone)]
struct PortState {
    queues: usize,
    table_off: usize,
    table_len: usize,
    /// `th[n]` = threshold with n active queues (bytes), n in 0..=queues (0 treated as 1).
    th: Vec<u64>,
    /// Rotating start of the empty-queue search.
    rr: usize,
    /// Per queue: last enqueue or dequeue of a packet assigned to it (ps).
    last_use: Vec<u64>,
    /// [`Resume::BelowTh`], per queue: the mark epoch (never 0) and the marks of the epoch
    /// still counted, as (ingress port, upstreamQ, packets).
    epoch: Vec<u16>,
    held: Vec<Vec<(u16, u8, u32)>>,
    mac: [u8; 6],
    dst: [u8; 6],
}

/// The result of queue assignment for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    /// Data queue of the egress port.
    pub queue: u8,
    /// Flow-table slot (for [`Bfc::on_dequeue`] / [`Bfc::unassign`]).
    pub slot: u32,
}

/// BFC on one pipe of a switch: flow table, thresholds, signal generation.
#[derive(Debug)]
pub struct Bfc {
    cfg: BfcConfig,
    ports: Vec<PortState>,
    table: Vec<Entry>,
    hrtt_ps: u64,
    sticky_ps: u64,
    refresh_ps: u64,
    rng: u64,
    /// `elide[in * n + out]`: no backpressure for packets from `in` to `out`.
    elide: Vec<bool>,
    shared: Arc<BfcShared>,
    /// Whether this pipe sends the periodic refresh (one pipe per switch does).
    refresher: bool,
    next_refresh: u64,
    last_bitmap: Vec<u128>,
    /// Ports a PAUSE was sent on since the last refresh.
    touched: Vec<bool>,
    /// Ports whose peers speak BFC (refreshes go there).
    signal_ports: Vec<bool>,
}

/// `Th` in bytes for `hrtt_ps` at `rate_bps` shared by `n` queues.
pub fn threshold_bytes(hrtt_ps: u64, rate_bps: u64, n: u32) -> u64 {
    let bdp = u128::from(hrtt_ps) * u128::from(rate_bps) / 8 / 1_000_000_000_000;
    (bdp / u128::from(n.max(1))) as u64
}

/// The default one-hop RTT of a port: propagation both ways plus the wire time of one
/// full-size frame each way (the data packet in flight when a signal is sent, and the first
/// packet after a resume), 24 B of FCS, preamble and IFG included.
pub fn default_hrtt_ps(p: &BfcPort) -> u64 {
    let bits = 2 * (u128::from(p.mtu_frame) + 24) * 8;
    let ser = if p.rate_bps == 0 {
        0
    } else {
        (bits * 1_000_000_000_000).div_ceil(u128::from(p.rate_bps)) as u64
    };
    2 * p.delay_ps + ser
}

/// A 32-bit hash of a flow identifier (addresses as 128-bit integers, IPv4 mapped), the same
/// at every device (switches and fabric NICs).
pub fn fid_hash(src: u128, dst: u128, sport: u16, dport: u16, proto: u8) -> u32 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for w in [
        src as u64,
        (src >> 64) as u64,
        dst as u64,
        (dst >> 64) as u64,
        (u64::from(sport) << 24) | (u64::from(dport) << 8) | u64::from(proto),
    ] {
        h = (h ^ w).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 29;
    }
    (h ^ (h >> 32)) as u32
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
        let n = ports.len();
        let hrtt_ps = cfg
            .hrtt_ps
            .unwrap_or_else(|| ports.iter().map(default_hrtt_ps).max().unwrap_or(0));
        let mut st = Vec::with_capacity(n);
        let mut off = 0;
        for (i, p) in ports.iter().enumerate() {
            if !(1..=UPSTREAM_QUEUES).contains(&p.queues) {
                return Err(BfcError::Queues(i, p.queues));
            }
            let len = p.queues * cfg.table_factor;
            let th = (0..=p.queues as u32)
                .map(|k| {
                    cfg.th_bytes
                        .unwrap_or_else(|| threshold_bytes(hrtt_ps, p.rate_bps, k))
                })
                .collect();
            st.push(PortState {
                queues: p.queues,
                table_off: off,
                table_len: len,
                th,
                rr: 0,
                last_use: vec![0; p.queues],
                epoch: vec![1; p.queues],
                held: vec![Vec::new(); p.queues],
                mac: p.mac,
                dst: p.peer_mac.unwrap_or(DST_SIGNAL),
            });
            off += len;
        }
        let mut el = vec![false; n * n];
        for &(a, b) in elide {
            if a >= n || b >= n {
                return Err(BfcError::ElidePort(a.max(b), n));
            }
            el[a * n + b] = true;
        }
        let refresh_ps = cfg
            .refresh_ps
            .unwrap_or_else(|| (10 * hrtt_ps).max(10_000_000));
        Ok(Bfc {
            sticky_ps: cfg.sticky_hrtts * hrtt_ps,
            rng: cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cfg,
            ports: st,
            table: vec![EMPTY; off],
            hrtt_ps,
            refresh_ps,
            elide: el,
            shared,
            refresher,
            next_refresh: u64::MAX,
            last_bitmap: vec![0; n],
            touched: vec![false; n],
            signal_ports: {
                let mut s = signal_ports;
                s.resize(n, false);
                s
            },
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
        self.sticky_ps
    }

    /// `Th` of `egress` with `n_active` active queues (bytes).
    #[inline]
    pub fn threshold(&self, egress: usize, n_active: u32) -> u64 {
        let p = &self.ports[egress];
        p.th[(n_active.max(1) as usize).min(p.queues)]
    }

    /// Flow-table entries of `egress`.
    pub fn table_len(&self, egress: usize) -> usize {
        self.ports[egress].table_len
    }

    fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
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
        let (off, len, queues) = {
            let p = &self.ports[egress];
            (p.table_off, p.table_len, p.queues)
        };
        let slot = off + (fid as usize % len);
        let e = self.table[slot];
        let idle = e.queue == NO_UPQ
            || (e.size == 0 && now.saturating_sub(e.ts) > self.sticky_ps)
            || usize::from(e.queue) >= queues;
        let queue = if idle {
            let q = match self.cfg.assignment {
                Assignment::Dynamic => {
                    let all = if queues == 128 {
                        u128::MAX
                    } else {
                        (1u128 << queues) - 1
                    };
                    let mut empty = !nonempty & all;
                    if empty & !paused != 0 {
                        empty &= !paused;
                    }
                    if empty == 0 {
                        (self.random() % queues as u64) as usize
                    } else {
                        // From the rotating start, the first queue no sticky flow may come
                        // back to (idle longer than the sticky time), else the first one.
                        let p = &self.ports[egress];
                        let above = u128::MAX << p.rr;
                        let mut first = None;
                        let mut pick = None;
                        'scan: for part in [empty & above, empty & !above] {
                            let mut m = part;
                            while m != 0 {
                                let q = m.trailing_zeros() as usize;
                                m &= m - 1;
                                first.get_or_insert(q);
                                if now.saturating_sub(p.last_use[q]) > self.sticky_ps {
                                    pick = Some(q);
                                    break 'scan;
                                }
                            }
                        }
                        let q = pick.or(first).unwrap_or(0);
                        self.ports[egress].rr = (q + 1) % queues;
                        q
                    }
                }
                Assignment::Stochastic => {
                    (fid_hash(u128::from(fid), u128::from(self.cfg.seed), 0, 0, 0) as usize)
                        % queues
                }
                Assignment::Single => 0,
            };
            let stats = &self.shared.ports[egress];
            stats.assignments.add(1);
            if nonempty & (1 << q) != 0 {
                stats.collisions.add(1);
            }
            q as u8
        } else {
            if e.fid != fid && e.size > 0 {
                self.shared.ports[egress].table_collisions.add(1);
            }
            e.queue
        };
        self.ports[egress].last_use[usize::from(queue)] = now;
        let e = &mut self.table[slot];
        if idle {
            e.fid = fid;
        }
        e.queue = queue;
        e.size += 1;
        e.ts = now;
        Assigned {
            queue,
            slot: slot as u32,
        }
    }

    /// Undoes [`assign`](Self::assign) for a packet that was not enqueued (MMU drop).
    pub fn unassign(&mut self, slot: u32, now: u64) {
        if let Some(e) = self.table.get_mut(slot as usize) {
            e.size = e.size.saturating_sub(1);
            e.ts = now;
        }
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
        if upq == NO_UPQ || usize::from(upq) >= UPSTREAM_QUEUES {
            return (0, None);
        }
        let np = self.ports.len();
        if self.elide[in_port * np + egress] || queue_bytes <= self.threshold(egress, n) {
            return (0, None);
        }
        stats.marked.add(1);
        let mark = match self.cfg.resume {
            Resume::Drained => 1,
            Resume::BelowTh => {
                let p = &mut self.ports[egress];
                let held = &mut p.held[queue];
                let key = (in_port as u16, upq);
                match held.iter_mut().find(|h| (h.0, h.1) == key) {
                    Some(h) => h.2 += 1,
                    None => held.push((key.0, key.1, 1)),
                }
                p.epoch[queue]
            }
        };
        let sig = self.shared.incr(in_port, upq).then(|| {
            self.shared.ports[in_port].pauses_sent[usize::from(upq)].add(1);
            self.touched[in_port] = true;
            self.arm_refresh();
            (in_port, self.signal(in_port, Signal::Pause(upq)))
        });
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
        if let Some(e) = self.table.get_mut(slot as usize) {
            e.size = e.size.saturating_sub(1);
            e.ts = now;
            let q = usize::from(e.queue);
            if let Some(t) = self
                .ports
                .get_mut(egress)
                .and_then(|p| p.last_use.get_mut(q))
            {
                *t = now;
            }
        }
        if mark == 0 || upq == NO_UPQ {
            return None;
        }
        if self.cfg.resume == Resume::BelowTh {
            // Released with its queue's epoch already, or still held: count it out.
            let p = self.ports.get_mut(egress)?;
            if p.epoch.get(queue) != Some(&mark) {
                return None;
            }
            let held = &mut p.held[queue];
            let i = held
                .iter()
                .position(|h| (h.0, h.1) == (in_port as u16, upq))?;
            held[i].2 -= 1;
            if held[i].2 == 0 {
                held.swap_remove(i);
            }
        }
        self.uncount(in_port, upq, 1)
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
        if self.cfg.resume != Resume::BelowTh {
            return;
        }
        let th = self.threshold(egress, n_active);
        let Some(p) = self.ports.get_mut(egress) else {
            return;
        };
        if p.held.get(queue).is_none_or(|h| h.is_empty()) || queue_bytes >= th {
            return;
        }
        // Taken out and put back (emptied) to keep its allocation.
        let mut held = std::mem::take(&mut p.held[queue]);
        p.epoch[queue] = p.epoch[queue].wrapping_add(1).max(1);
        for &(in_port, upq, n) in &held {
            out.extend(self.uncount(usize::from(in_port), upq, n));
        }
        held.clear();
        self.ports[egress].held[queue] = held;
    }

    /// Takes `n` marks off ⟨in_port, upq⟩'s pause counter; the RESUME when it reached 0.
    fn uncount(&self, in_port: usize, upq: u8, n: u32) -> Option<(usize, SignalRepr)> {
        self.shared.decr(in_port, upq, n).then(|| {
            self.shared.ports[in_port].resumes_sent[usize::from(upq)].add(1);
            (in_port, self.signal(in_port, Signal::Resume(upq)))
        })
    }

    /// Marks `port` as leading to a BFC device (it sent a packet carrying upstreamQ), so the
    /// periodic refresh covers it even when the configuration did not say so. Shared by all
    /// pipes (the one that refreshes may not be the one that saw the packet).
    #[inline]
    pub fn note_signal_port(&mut self, port: usize) {
        if let Some(s) = self.shared.learned_peers.get(port) {
            if !s.load(Ordering::Relaxed) {
                s.store(true, Ordering::Relaxed);
            }
        }
    }

    fn signal(&self, port: usize, signal: Signal) -> SignalRepr {
        let p = &self.ports[port];
        SignalRepr {
            dst_addr: p.dst,
            src_addr: p.mac,
            signal,
        }
    }

    fn arm_refresh(&mut self) {
        if self.refresher && self.refresh_ps > 0 && self.next_refresh == u64::MAX {
            self.next_refresh = 0; // anchored to `now` by the next `refresh_due`/`refresh`
        }
    }

    /// When [`refresh`](Self::refresh) next has work (`now` anchors a newly armed timer).
    pub fn refresh_due(&mut self, now: u64) -> Option<u64> {
        if self.next_refresh == 0 {
            self.next_refresh = now + self.refresh_ps;
        }
        (self.next_refresh != u64::MAX).then_some(self.next_refresh)
    }

    /// The pending refresh deadline, if any (0: due as soon as anchored by
    /// [`refresh_due`](Self::refresh_due) or [`refresh`](Self::refresh)).
    pub fn pending_refresh(&self) -> Option<u64> {
        (self.next_refresh != u64::MAX).then_some(self.next_refresh)
    }

    /// The periodic pause-bitmap refresh: for every BFC port whose bitmap is non-zero, was
    /// at the last refresh, or that was sent a PAUSE since (so a lost RESUME is repaired by
    /// one all-clear bitmap), a BITMAP signal.
    pub fn refresh(&mut self, now: u64, out: &mut Vec<(usize, SignalRepr)>) {
        if self.next_refresh == 0 {
            self.next_refresh = now + self.refresh_ps;
        }
        if self.next_refresh == u64::MAX || now < self.next_refresh {
            return;
        }
        let mut any = false;
        for p in 0..self.ports.len() {
            if !self.signal_ports[p] && !self.shared.learned_peers[p].load(Ordering::Relaxed) {
                continue;
            }
            let bits = self.shared.pause_bitmap(p);
            if bits != 0 || self.last_bitmap[p] != 0 || self.touched[p] {
                out.push((
                    p,
                    self.signal(
                        p,
                        Signal::Bitmap {
                            count: UPSTREAM_QUEUES as u8,
                            bits,
                        },
                    ),
                ));
                self.shared.ports[p].refresh_sent.add(1);
            }
            any |= bits != 0;
            self.last_bitmap[p] = bits;
            self.touched[p] = false;
        }
        self.next_refresh = if any { now + self.refresh_ps } else { u64::MAX };
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
        let Some(st) = shared.ports.get(port) else {
            return 0;
        };
        let Some(r) = afc.regs().get(port) else {
            return 0;
        };
        let nq = r.queues();
        let mut n = 0;
        let mut cmd = |pause: bool, q: usize| {
            let c = if pause {
                AfcCmd::pause(port as u16, q as u8, 0)
            } else {
                AfcCmd::resume(port as u16, q as u8)
            };
            if let Ok(c) = c {
                if afc.apply(c, now, 1).is_ok() {
                    n += 1;
                }
            }
        };
        match *signal {
            Signal::Pause(q) => {
                st.pauses_received[usize::from(q) % UPSTREAM_QUEUES].add(1);
                cmd(true, usize::from(q));
            }
            Signal::Resume(q) => {
                st.resumes_received[usize::from(q) % UPSTREAM_QUEUES].add(1);
                cmd(false, usize::from(q));
            }
            Signal::Bitmap { count, bits } => {
                st.refresh_received.add(1);
                for q in 0..usize::from(count).min(nq) {
                    let want = bits & (1 << q) != 0;
                    if want != r.is_paused(q, now) {
                        cmd(want, q);
                    }
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::signal::{Frame, TYPE_PAUSE, TYPE_RESUME};

    const HRTT: u64 = 2_000_000; // 2 µs
    const G100: u64 = 100_000_000_000;

    fn ports(n: usize, queues: usize) -> Vec<BfcPort> {
        (0..n)
            .map(|i| BfcPort {
                rate_bps: G100,
                delay_ps: 1_000_000,
                queues,
                mtu_frame: 1514,
                mac: [2, 0, 0, 0, 0, i as u8],
                peer_mac: Some([2, 0, 0, 0, 1, i as u8]),
            })
            .collect()
    }

    fn bfc(cfg: BfcConfig, queues: usize) -> Bfc {
        let cfg = BfcConfig {
            hrtt_ps: cfg.hrtt_ps.or(Some(HRTT)),
            ..cfg
        };
        let p = ports(3, queues);
        Bfc::new(
            cfg,
            &p,
            &[(2, 1)],
            vec![true; 3],
            Arc::new(BfcShared::new(3)),
            true,
        )
        .unwrap()
    }

    #[test]
    fn threshold_is_hrtt_times_rate_over_active() {
        let b = bfc(BfcConfig::default(), 8);
        assert_eq!(b.hrtt_ps(), HRTT);
        assert_eq!(b.sticky_ps(), 2 * HRTT);
        // 2 µs × 100 Gbit/s = 25 000 B.
        assert_eq!(b.threshold(1, 1), 25_000);
        assert_eq!(b.threshold(1, 0), 25_000);
        assert_eq!(b.threshold(1, 2), 12_500);
        assert_eq!(b.threshold(1, 8), 3_125);
        assert_eq!(b.threshold(1, 100), 3_125, "clamped to the queue count");
        assert_eq!(threshold_bytes(20_000_000, 1_000_000_000, 1), 2_500);
        assert_eq!(b.table_len(0), 800);
        // Default HRTT: 2 × 1 µs + 2 × 1538 B at 100 Gbit/s (123.04 ns each).
        assert_eq!(default_hrtt_ps(&ports(1, 8)[0]), 2_000_000 + 246_080);
        let fixed = bfc(
            BfcConfig {
                th_bytes: Some(9_000),
                ..BfcConfig::default()
            },
            8,
        );
        assert_eq!(
            (fixed.threshold(1, 1), fixed.threshold(1, 8)),
            (9_000, 9_000)
        );
    }

    #[test]
    fn dynamic_assignment_empty_then_random_then_sticky() {
        let mut b = bfc(BfcConfig::default(), 4);
        let sh = b.shared().clone();
        let e = 1;
        // Flow A: table empty, all queues empty -> queue 0 (rotating start 0).
        let a = b.assign(e, 10, 0, 0, 0);
        assert_eq!(a.queue, 0);
        // Flow B, queue 0 busy -> next empty queue from the rotating pointer: 1.
        let bq = b.assign(e, 11, 0b0001, 0, 10);
        assert_eq!(bq.queue, 1);
        // A again: its entry has size 1 -> same queue, no new assignment.
        assert_eq!(b.assign(e, 10, 0b0011, 0, 20).queue, 0);
        assert_eq!(sh.ports[e].assignments.get(), 2);
        // C: queue 2 is empty but paused downstream -> the unpaused empty queue 3 first.
        assert_eq!(b.assign(e, 12, 0b0011, 0b0100, 30).queue, 3);
        // D: only queue 2 is empty (paused): taken anyway rather than sharing.
        assert_eq!(b.assign(e, 13, 0b1011, 0b0100, 40).queue, 2);
        assert_eq!(sh.ports[e].collisions.get(), 0);
        // E: no empty queue -> random queue, a collision.
        let q = b.assign(e, 14, 0b1111, 0, 50).queue;
        assert!(q < 4);
        assert_eq!(sh.ports[e].collisions.get(), 1);
        // Stickiness: A's two packets leave (size 0) at t = 100; within 2·HRTT it keeps queue
        // 0 even though queue 0 is now empty and others are too.
        assert_eq!(b.on_dequeue(e, 0, a.slot, 0, 0, 3, 100), None);
        assert_eq!(b.on_dequeue(e, 0, a.slot, 0, 0, 3, 100), None);
        assert_eq!(b.assign(e, 10, 0b1110, 0, 100 + 2 * HRTT).queue, 0);
        assert_eq!(sh.ports[e].assignments.get(), 5);
        b.on_dequeue(e, 0, a.slot, 0, 0, 3, 200);
        // Idle for longer than 2·HRTT with size 0 -> reassigned to an empty queue (rotating
        // pointer: after 3 comes 0; queue 0 is busy here, so 1 is taken).
        let t = 200 + 2 * HRTT + 1;
        assert_eq!(b.assign(e, 10, 0b1101, 0, t).queue, 1);
        assert_eq!(sh.ports[e].assignments.get(), 6);
        // Reservation: F arrives while queues 0 (A's, just used) and 3 are empty; 3 has been
        // idle longer than the sticky time, so F gets 3 and A can come back to 0.
        let t2 = t + 3 * HRTT;
        b.on_dequeue(e, 0, a.slot, 0, 0, 3, t2);
        assert_eq!(b.assign(e, 15, 0b0100, 0, t2 + 1).queue, 3);
        assert_eq!(b.assign(e, 10, 0b1100, 0, t2 + 2).queue, 1);
        let t = t2 + 2;
        // Index collision: a different FID hashing to A's slot while A has a packet there.
        let len = b.table_len(e) as u32;
        assert_eq!(b.assign(e, 10 + len, 0, 0, t).queue, 1);
        assert_eq!(sh.ports[e].table_collisions.get(), 1);
        // A dropped packet (MMU) is taken back out of the entry.
        let x = b.assign(e, 99, 0, 0, t);
        assert_eq!(sh.ports[e].assignments.get(), 8);
        b.unassign(x.slot, t);
        b.assign(e, 99, 0, 0, t + 2 * HRTT + 1);
        assert_eq!(
            sh.ports[e].assignments.get(),
            9,
            "the entry was empty again"
        );
    }

    #[test]
    fn stochastic_and_single_are_static() {
        let mut s = bfc(
            BfcConfig {
                assignment: Assignment::Stochastic,
                ..BfcConfig::default()
            },
            32,
        );
        let q1 = s.assign(0, 77, 0, 0, 0).queue;
        let mut s2 = bfc(
            BfcConfig {
                assignment: Assignment::Stochastic,
                ..BfcConfig::default()
            },
            32,
        );
        // Same FID, same queue whatever is occupied and whenever.
        assert_eq!(s2.assign(0, 77, u128::MAX, 0, 10 * HRTT).queue, q1);
        let mut one = bfc(
            BfcConfig {
                assignment: Assignment::Single,
                ..BfcConfig::default()
            },
            8,
        );
        assert_eq!(one.assign(0, 1, 0, 0, 0).queue, 0);
        assert_eq!(one.assign(0, 2, 1, 0, 0).queue, 0);
        assert_eq!(one.shared().ports[0].collisions.get(), 1);
    }

    #[test]
    fn pause_counter_0_1_0_and_exact_frames() {
        let mut b = bfc(BfcConfig::default(), 8);
        let sh = b.shared().clone();
        // Th with 2 active queues at port 1 = 12 500 B. Packets from port 0, upstreamQ 5.
        // Below/at Th: not marked.
        assert_eq!(b.on_enqueue(0, 5, 1, 0, 12_500, 2), (0, None));
        // Above Th: marked, counter 0 -> 1, PAUSE(5) on port 0.
        let (m1, s1) = b.on_enqueue(0, 5, 1, 0, 12_501, 2);
        assert_eq!(m1, 1);
        let (port, repr) = s1.unwrap();
        assert_eq!(port, 0);
        let mut buf = [0u8; 60];
        repr.emit_into(&mut buf);
        let mut want = [0u8; 60];
        want[..6].copy_from_slice(&[2, 0, 0, 0, 1, 0]); // peer of port 0
        want[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0]); // port 0
        want[12..20].copy_from_slice(&[0x88, 0xb5, 1, TYPE_PAUSE, 0, 5, 0, 0]);
        assert_eq!(buf, want);
        // Second marked packet: counter 1 -> 2, no frame.
        let (m2, s2) = b.on_enqueue(0, 5, 1, 0, 20_000, 2);
        assert!(m2 == 1 && s2.is_none());
        assert_eq!(sh.pause_counter(0, 5), 2);
        assert_eq!(sh.pause_bitmap(0), 1 << 5);
        // Unmarked packet leaving: nothing. First marked leaves: 2 -> 1, nothing.
        assert_eq!(b.on_dequeue(1, 0, NO_SLOT, 0, 0, 5, 1), None);
        assert_eq!(b.on_dequeue(1, 0, NO_SLOT, 1, 0, 5, 2), None);
        // Last marked leaves: 1 -> 0, RESUME(5).
        let (port, repr) = b.on_dequeue(1, 0, NO_SLOT, 1, 0, 5, 3).unwrap();
        assert_eq!(port, 0);
        repr.emit_into(&mut buf);
        want[15] = TYPE_RESUME;
        assert_eq!(buf, want);
        assert_eq!(sh.pause_counter(0, 5), 0);
        assert!(!sh.any_paused());
        assert_eq!(sh.ports[0].pauses_sent[5].get(), 1);
        assert_eq!(sh.ports[0].resumes_sent[5].get(), 1);
        assert_eq!(sh.ports[1].marked.get(), 2);
        // No upstreamQ (plain host) or an elided pair (2 -> 1): never marked.
        assert_eq!(b.on_enqueue(0, NO_UPQ, 1, 0, 1 << 30, 1), (0, None));
        assert_eq!(b.on_enqueue(2, 5, 1, 0, 1 << 30, 1), (0, None));
        // Active queues are recorded.
        assert_eq!(sh.ports[1].active_queues.get(), 1);
        assert_eq!(sh.ports[1].active_queues_max.get(), 2);
    }

    /// §3.3.2's refinement, by hand: Th(2 active) = 12 500 B at port 1. Marks of upstreamQ 5
    /// sit in queues 0 and 1 of port 1; the upstream is resumed when both have drained below
    /// Th, not when the last marked packet leaves.
    #[test]
    fn below_th_resumes_when_every_holding_queue_is_under_th() {
        let mut b = bfc(
            BfcConfig {
                resume: Resume::BelowTh,
                ..BfcConfig::default()
            },
            8,
        );
        let sh = b.shared().clone();
        let (m1, s1) = b.on_enqueue(0, 5, 1, 0, 13_000, 2);
        assert_eq!((m1, s1.map(|s| s.1.signal)), (1, Some(Signal::Pause(5))));
        let (m2, _) = b.on_enqueue(0, 5, 1, 0, 14_500, 2);
        let (m3, s3) = b.on_enqueue(0, 5, 1, 1, 13_000, 2);
        assert_eq!((m2, m3, s3), (1, 1, None));
        assert_eq!(sh.pause_counter(0, 5), 3);
        let mut out = Vec::new();
        // Queue 0 still at Th: nothing. Below Th: its two marks stop counting (3 -> 1).
        b.after_dequeue(1, 0, 12_500, 2, &mut out);
        assert_eq!(sh.pause_counter(0, 5), 3);
        b.after_dequeue(1, 0, 12_499, 2, &mut out);
        assert!(out.is_empty());
        assert_eq!(sh.pause_counter(0, 5), 1);
        // The released packets leave later: they no longer count (epoch moved on).
        assert_eq!(b.on_dequeue(1, 0, NO_SLOT, m1, 0, 5, 1), None);
        assert_eq!(sh.pause_counter(0, 5), 1);
        // A packet marked in queue 0's new epoch counts again and leaves normally.
        let (m4, s4) = b.on_enqueue(0, 5, 1, 0, 20_000, 2);
        assert!(m4 != m1 && m4 != 0 && s4.is_none());
        assert_eq!(b.on_dequeue(1, 0, NO_SLOT, m4, 0, 5, 2), None);
        assert_eq!(sh.pause_counter(0, 5), 1);
        // Queue 1 drains below Th (1 active queue: Th 25 000 B): counter 1 -> 0, RESUME(5).
        b.after_dequeue(1, 1, 24_999, 1, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, out[0].1.signal), (0, Signal::Resume(5)));
        assert_eq!(sh.pause_counter(0, 5), 0);
        assert_eq!(b.on_dequeue(1, 1, NO_SLOT, m3, 0, 5, 3), None);
        assert_eq!(sh.ports[0].resumes_sent[5].get(), 1);
        // Drained (the paper's pseudocode) ignores after_dequeue.
        let mut d = bfc(BfcConfig::default(), 8);
        let (m, _) = d.on_enqueue(0, 5, 1, 0, 13_000, 2);
        d.after_dequeue(1, 0, 0, 1, &mut out);
        assert_eq!(d.shared().pause_counter(0, 5), 1);
        assert!(d.on_dequeue(1, 0, NO_SLOT, m, 0, 5, 4).is_some());
    }

    /// A port not configured as a BFC peer gets refreshes once a shimmed packet came from it.
    #[test]
    fn refresh_reaches_learned_peers() {
        let sh = Arc::new(BfcShared::new(3));
        let p = ports(3, 8);
        let cfg = BfcConfig {
            hrtt_ps: Some(HRTT),
            ..BfcConfig::default()
        };
        let mut b = Bfc::new(cfg, &p, &[], vec![false; 3], sh, true).unwrap();
        b.on_enqueue(0, 3, 1, 0, 1 << 20, 1);
        let due = b.refresh_due(0).unwrap();
        let mut out = Vec::new();
        b.refresh(due, &mut out);
        assert!(out.is_empty(), "port 0 is not known to speak BFC");
        b.note_signal_port(0);
        b.on_enqueue(0, 4, 1, 0, 1 << 20, 1);
        let due = b.refresh_due(due).unwrap();
        b.refresh(due, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].0, out[0].1.signal),
            (
                0,
                Signal::Bitmap {
                    count: 128,
                    bits: (1 << 3) | (1 << 4)
                }
            )
        );
    }

    #[test]
    fn refresh_bitmap_then_one_all_clear() {
        let mut b = bfc(BfcConfig::default(), 8);
        let (_, s) = b.on_enqueue(0, 3, 1, 0, 1 << 20, 1);
        assert!(s.is_some());
        b.on_enqueue(0, 9, 1, 0, 1 << 20, 1);
        let due = b.refresh_due(1_000).unwrap();
        assert_eq!(due, 1_000 + 10 * HRTT); // 10 × HRTT = 20 µs
        let mut out = Vec::new();
        b.refresh(due - 1, &mut out);
        assert!(out.is_empty());
        b.refresh(due, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].1.signal,
            Signal::Bitmap {
                count: 128,
                bits: (1 << 3) | (1 << 9)
            }
        );
        out.clear();
        b.on_dequeue(1, 0, NO_SLOT, 1, 0, 3, 0);
        b.on_dequeue(1, 0, NO_SLOT, 1, 0, 9, 0);
        let due2 = b.refresh_due(due).unwrap();
        assert_eq!(due2, due + 10 * HRTT);
        b.refresh(due2, &mut out);
        assert_eq!(
            out[0].1.signal,
            Signal::Bitmap {
                count: 128,
                bits: 0
            }
        );
        assert_eq!(b.refresh_due(due2), None, "idle: no timer");
    }

    #[test]
    fn received_signals_drive_pause_registers() {
        let sh = BfcShared::new(2);
        let afc = Afc::new([8, 8]);
        let regs = afc.regs();
        assert_eq!(Bfc::apply_signal(&sh, 1, &Signal::Pause(4), &afc, 0), 1);
        assert!(regs[1].is_paused(4, u64::MAX - 1));
        Bfc::apply_signal(&sh, 1, &Signal::Resume(4), &afc, 5);
        assert!(!regs[1].is_paused(4, 6));
        Bfc::apply_signal(
            &sh,
            1,
            &Signal::Bitmap {
                count: 128,
                bits: 0b1010,
            },
            &afc,
            7,
        );
        assert_eq!(regs[1].paused_mask(8), 0b1010);
        Bfc::apply_signal(&sh, 1, &Signal::Bitmap { count: 8, bits: 0 }, &afc, 9);
        assert_eq!(regs[1].paused_mask(10), 0);
        assert_eq!(sh.ports[1].pauses_received[4].get(), 1);
        assert_eq!(sh.ports[1].resumes_received[4].get(), 1);
        assert_eq!(sh.ports[1].refresh_received.get(), 2);
        // The frame of a PAUSE parses back to the same signal.
        let r = SignalRepr {
            dst_addr: DST_SIGNAL,
            src_addr: [2; 6],
            signal: Signal::Pause(4),
        };
        let mut buf = [0u8; 60];
        r.emit_into(&mut buf);
        assert_eq!(
            SignalRepr::parse(&Frame::new_checked(&buf[..]).unwrap()).unwrap(),
            r
        );
    }

    #[test]
    fn rejects_bad_config() {
        let p = ports(2, 200);
        let sh = Arc::new(BfcShared::new(2));
        assert!(matches!(
            Bfc::new(BfcConfig::default(), &p, &[], vec![], sh.clone(), true),
            Err(BfcError::Queues(0, 200))
        ));
        let p = ports(2, 8);
        assert!(matches!(
            Bfc::new(BfcConfig::default(), &p, &[(0, 5)], vec![], sh, true),
            Err(BfcError::ElidePort(5, 2))
        ));
    }
}

//! State of a switch that all its pipes share: the pause counters of §3.3.2 (one per
//! ⟨ingress port, upstreamQ⟩), the ports found to speak BFC, and the counters. Atomic, so each
//! pipe holds an `Arc` of the same [`BfcShared`] and no lock is taken on the packet path.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Queues a pause counter row covers (the upstream's queue ids, 0..128).
pub const UPSTREAM_QUEUES: usize = 128;

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
    /// A PAUSE was sent since the refresher last looked: whichever pipe sent it, the one
    /// pipe that refreshes must arm its timer (`crate::bfc::signals`).
    refresh_wanted: AtomicBool,
    /// Per port: a PAUSE was sent on it since the last refresh (so a lost RESUME is repaired
    /// by one all-clear bitmap even when the pipe that paused is not the refresher).
    touched: Box<[AtomicBool]>,
    pub ports: Box<[PortStats]>,
    /// Ports found to lead to a BFC device (a shimmed packet arrived on them).
    learned_peers: Box<[AtomicBool]>,
}

impl BfcShared {
    pub fn new(ports: usize) -> Self {
        BfcShared {
            counters: (0..ports * UPSTREAM_QUEUES)
                .map(|_| AtomicU32::new(0))
                .collect(),
            nonzero: AtomicU32::new(0),
            refresh_wanted: AtomicBool::new(false),
            touched: (0..ports).map(|_| AtomicBool::new(false)).collect(),
            ports: (0..ports).map(|_| PortStats::new()).collect(),
            learned_peers: (0..ports).map(|_| AtomicBool::new(false)).collect(),
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

    /// A PAUSE went out on `port`: the refresh must cover it and be armed.
    pub(super) fn note_pause(&self, port: usize) {
        self.touched[port].store(true, Ordering::Relaxed);
        self.refresh_wanted.store(true, Ordering::Release);
    }

    /// Whether a PAUSE asked for the refresh since [`take_refresh_wanted`] last cleared it.
    pub(super) fn refresh_wanted(&self) -> bool {
        self.refresh_wanted.load(Ordering::Acquire)
    }

    /// Clears and returns the refresh request.
    pub(super) fn take_refresh_wanted(&self) -> bool {
        self.refresh_wanted.swap(false, Ordering::AcqRel)
    }

    /// Clears and returns whether a PAUSE went out on `port` since the last refresh.
    pub(super) fn take_touched(&self, port: usize) -> bool {
        self.touched[port].swap(false, Ordering::AcqRel)
    }

    /// Increments ⟨in_port, upq⟩'s pause counter; true on 0→1.
    pub(super) fn incr(&self, in_port: usize, upq: u8) -> bool {
        let c = &self.counters[in_port * UPSTREAM_QUEUES + usize::from(upq)];
        let first = c.fetch_add(1, Ordering::AcqRel) == 0;
        if first {
            self.nonzero.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Subtracts `n` (> 0) from ⟨in_port, upq⟩'s pause counter; true when that brought it
    /// to 0.
    pub(super) fn decr(&self, in_port: usize, upq: u8, n: u32) -> bool {
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

    /// Records that `port` leads to a BFC device.
    #[inline]
    pub(super) fn learn_peer(&self, port: usize) {
        if let Some(s) = self.learned_peers.get(port) {
            if !s.load(Ordering::Relaxed) {
                s.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether a shimmed packet has arrived on `port`.
    pub(super) fn is_learned_peer(&self, port: usize) -> bool {
        self.learned_peers
            .get(port)
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

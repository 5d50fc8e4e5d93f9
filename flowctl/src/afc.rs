//! The AFC control channel: per-port queue pause registers.
//!
//! Tofino2's "advanced flow control" lets the data plane pause and resume individual egress
//! queues. Xoff mirrors it with one `PauseRegs` per egress port: a bitmap of paused queues (one
//! bit per queue, up to 128) plus a per-queue deadline after which a timed pause (PFC quanta)
//! lapses on its own. All operations are single atomic stores or loads, so any worker or the
//! control plane may drive them while the port's scheduler reads them, without locks.

use std::sync::atomic::{AtomicU64, Ordering};

/// Largest queue set a port may have.
pub const MAX_QUEUES: usize = 128;

/// Deadline value meaning "paused until explicitly resumed".
pub const FOREVER: u64 = u64::MAX;

/// Pause state of the egress queues of one port.
#[derive(Debug)]
pub struct PauseRegs {
    bits: [AtomicU64; 2],
    deadline: Box<[AtomicU64]>,
}

impl PauseRegs {
    /// Registers for a port with `queues` queues (clamped to [`MAX_QUEUES`]).
    pub fn new(queues: usize) -> Self {
        let n = queues.clamp(1, MAX_QUEUES);
        PauseRegs {
            bits: [AtomicU64::new(0), AtomicU64::new(0)],
            deadline: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Number of queues covered.
    pub fn queues(&self) -> usize {
        self.deadline.len()
    }

    /// Pause queue `q` until time `until` (picoseconds; [`FOREVER`] for an untimed pause).
    /// Out-of-range queues are ignored.
    pub fn pause(&self, q: usize, until: u64) {
        if let Some(d) = self.deadline.get(q) {
            d.store(until, Ordering::Release);
            self.bits[q / 64].fetch_or(1 << (q % 64), Ordering::AcqRel);
        }
    }

    /// Resume queue `q` now.
    pub fn resume(&self, q: usize) {
        if q < self.deadline.len() {
            self.bits[q / 64].fetch_and(!(1 << (q % 64)), Ordering::AcqRel);
        }
    }

    /// Whether queue `q` is paused at time `now`. A lapsed timed pause reads as resumed.
    #[inline]
    pub fn is_paused(&self, q: usize, now: u64) -> bool {
        if q >= self.deadline.len() || self.bits[q / 64].load(Ordering::Acquire) & (1 << (q % 64)) == 0 {
            return false;
        }
        now < self.deadline[q].load(Ordering::Acquire)
    }

    /// Bitmap of queues paused at `now` (bit q set = paused).
    pub fn paused_mask(&self, now: u64) -> u128 {
        let raw = u128::from(self.bits[0].load(Ordering::Acquire))
            | (u128::from(self.bits[1].load(Ordering::Acquire)) << 64);
        if raw == 0 {
            return 0;
        }
        let mut m = 0u128;
        let mut r = raw;
        while r != 0 {
            let q = r.trailing_zeros() as usize;
            r &= r - 1;
            if self.is_paused(q, now) {
                m |= 1 << q;
            }
        }
        m
    }

    /// The earliest deadline among queues paused at `now`, if any is timed: when the scheduler
    /// must look again even if nothing else happens.
    pub fn next_expiry(&self, now: u64) -> Option<u64> {
        let m = self.paused_mask(now);
        (0..self.queues())
            .filter(|q| m & (1 << q) != 0)
            .map(|q| self.deadline[q].load(Ordering::Acquire))
            .filter(|&d| d != FOREVER)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_pause_lapses_and_resume_clears() {
        let r = PauseRegs::new(8);
        assert!(!r.is_paused(3, 0));
        r.pause(3, 1_000);
        assert!(r.is_paused(3, 999));
        assert!(!r.is_paused(3, 1_000));
        assert_eq!(r.next_expiry(10), Some(1_000));
        r.pause(5, FOREVER);
        assert_eq!(r.paused_mask(10), (1 << 3) | (1 << 5));
        r.resume(5);
        assert_eq!(r.paused_mask(10), 1 << 3);
        r.pause(100, FOREVER); // out of range: ignored
        assert_eq!(r.paused_mask(2_000), 0);
    }

    #[test]
    fn high_queues_use_second_word() {
        let r = PauseRegs::new(128);
        r.pause(127, FOREVER);
        assert!(r.is_paused(127, 5));
        assert_eq!(r.paused_mask(5), 1u128 << 127);
    }
}

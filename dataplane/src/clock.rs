//! Time for the pipeline, in picoseconds: the monotonic clock for real ports, a settable
//! virtual clock for the fabric. Decision code never reads a clock itself; it is handed `now`.

use std::cell::Cell;

/// A source of the current time in picoseconds.
pub trait Clock {
    fn now(&self) -> u64;
}

/// CLOCK_MONOTONIC, counted from an anchor shared by every process on the machine: the first
/// reading in this process rounded down to a multiple of [`MonoClock::EPOCH_NS`]. Every thread
/// reads the same timeline, and every process's timeline agrees with every other's modulo
/// `EPOCH_NS` (2^32 ns, 4.3 s), so time stamps of fewer bits that one switch puts in a frame
/// and another reads (Proteus's 24-bit send time, §III-A: one clock per testbed) mean the
/// same instant in both. Anchored at each process's own first reading, as it was, the
/// switches of a testbed (one process each) differed by their start times: every `t_pd`
/// leaf2 measured for leaf1's packets was off by that difference modulo 16.8 ms, which put
/// every path of a testbed above `RTT_low`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonoClock;

static ANCHOR_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

impl MonoClock {
    /// The anchors of all processes are multiples of this, ns.
    pub const EPOCH_NS: u64 = 1 << 32;
}

impl Clock for MonoClock {
    #[inline]
    fn now(&self) -> u64 {
        let t = crate::port::sys::monotonic_ns();
        let anchor = *ANCHOR_NS.get_or_init(|| t - t % Self::EPOCH_NS);
        t.saturating_sub(anchor) * 1_000
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Default)]
pub struct VirtualClock(Cell<u64>);

impl VirtualClock {
    pub fn new(start: u64) -> Self {
        VirtualClock(Cell::new(start))
    }

    /// Moves time forward (never backward).
    pub fn advance_to(&self, t: u64) {
        if t > self.0.get() {
            self.0.set(t);
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> u64 {
        self.0.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every process's `MonoClock` is CLOCK_MONOTONIC modulo `EPOCH_NS`: this one's is, and
    /// the anchor does not depend on when the process started.
    #[test]
    fn mono_clock_agrees_with_clock_monotonic_modulo_the_epoch() {
        for _ in 0..1000 {
            let a = crate::port::sys::monotonic_ns();
            let c = MonoClock.now() / 1000;
            let b = crate::port::sys::monotonic_ns();
            if a / MonoClock::EPOCH_NS != b / MonoClock::EPOCH_NS {
                continue;
            }
            let e = MonoClock::EPOCH_NS;
            assert!((a % e..=b % e).contains(&(c % e)), "{a} {c} {b}");
        }
    }
}

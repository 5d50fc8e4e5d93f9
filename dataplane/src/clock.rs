//! Time for the pipeline, in picoseconds: the monotonic clock for real ports, a settable
//! virtual clock for the fabric. Decision code never reads a clock itself; it is handed `now`.

use std::cell::Cell;

/// A source of the current time in picoseconds.
pub trait Clock {
    fn now(&self) -> u64;
}

/// CLOCK_MONOTONIC (through `Instant`), counted from the first use in this process so that
/// every thread reads the same timeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonoClock;

static ANCHOR: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

impl Clock for MonoClock {
    #[inline]
    fn now(&self) -> u64 {
        let d = ANCHOR.get_or_init(std::time::Instant::now).elapsed();
        d.as_secs() * 1_000_000_000_000 + u64::from(d.subsec_nanos()) * 1_000
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

//! Link emulation at an egress port: a shaper that starts each frame no earlier than the
//! previous one finished serializing at the configured rate, and a delay line that holds the
//! frame for serialization + propagation before it is handed to the port.
//!
//! Without this, veth would drain any queue instantly and congestion would never build inside
//! the switch. Real-time workers poll late by up to a batch; `max_lag` lets the shaper catch up
//! on that lateness (a frame may start in the recent past) without ever building a burst
//! credit larger than the lag. Only time the worker did not see counts as lateness: a port
//! seen with nothing eligible (empty or paused) is idle, and idle time earns no credit.

use crate::frame::FrameId;
use crate::ring::Ring;
use crate::units::ser_ps;

/// A frame on the emulated wire: all the far end needs of it (the packet's switch metadata
/// has been given back at departure).
#[derive(Debug, Clone, Copy)]
pub struct InFlight {
    /// When the last bit arrives at the far end (ps).
    pub release: u64,
    pub frame: FrameId,
    /// Bytes on the wire.
    pub len: u32,
}

/// Shaper + delay line of one egress port.
#[derive(Debug)]
pub struct Link {
    /// Fixed when the link is built (`last` caches wire times at this rate).
    pub rate_bps: u64,
    pub delay_ps: u64,
    /// When the wire is free for the next frame.
    free_at: u64,
    max_lag: u64,
    wire: Ring<InFlight>,
    /// The last frame length serialized and its wire time: runs of equal lengths (a flow of
    /// MTU frames, a burst of ACKs) skip the 64-bit division of `ser_ps`.
    last: (u32, u64),
}

impl Link {
    pub fn new(rate_bps: u64, delay_ps: u64, max_lag_ps: u64) -> Self {
        Link {
            rate_bps,
            delay_ps,
            free_at: 0,
            max_lag: max_lag_ps,
            wire: Ring::default(),
            last: (0, ser_ps(0, rate_bps)),
        }
    }

    /// Changes the catch-up window (a switch that measured its response term, `max_lag`
    /// being tied to it: `crate::switch::lossless_lag`).
    pub fn set_max_lag(&mut self, max_lag_ps: u64) {
        self.max_lag = max_lag_ps;
    }

    /// Whether a new frame may start serializing at `now`.
    #[inline]
    pub fn can_start(&self, now: u64) -> bool {
        self.free_at <= now
    }

    /// When the wire frees up (ps).
    pub fn free_at(&self) -> u64 {
        self.free_at
    }

    /// The port had nothing eligible to send at `now` (empty or paused queues): the wire sat
    /// idle until now, so no catch-up credit accrues for that time. Without this, a queue
    /// resumed after a long pause would start its backlog up to `max_lag` in the past: a burst
    /// far above line rate into a downstream whose headroom assumes line rate.
    #[inline]
    pub fn idle(&mut self, now: u64) {
        if self.free_at < now {
            self.free_at = now;
        }
    }

    /// Starts serializing `len` bytes of `frame` at `now`; returns its start time.
    #[inline]
    pub fn start(&mut self, frame: FrameId, len: u32, now: u64) -> u64 {
        let start = self.free_at.max(now.saturating_sub(self.max_lag));
        if self.last.0 != len {
            self.last = (len, ser_ps(u64::from(len), self.rate_bps));
        }
        let done = start + self.last.1;
        self.free_at = done;
        self.wire.push_back(InFlight {
            release: done + self.delay_ps,
            frame,
            len,
        });
        start
    }

    /// Pops the next frame whose last bit has arrived by `now`.
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<InFlight> {
        match self.wire.front() {
            Some(f) if f.release <= now => self.wire.pop_front(),
            _ => None,
        }
    }

    /// Release time of the oldest frame on the wire.
    pub fn next_release(&self) -> Option<u64> {
        self.wire.front().map(|f| f.release)
    }

    /// The frame the wire releases next.
    #[inline]
    pub fn next_frame(&self) -> Option<FrameId> {
        self.wire.front().map(|f| f.frame)
    }

    /// Frames on the wire.
    pub fn in_flight(&self) -> usize {
        self.wire.len()
    }

    /// Drains everything on the wire (port going away).
    pub fn drain(&mut self) -> impl Iterator<Item = InFlight> {
        self.wire.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;
    /// 10 µs on a 1 Gbit/s wire with the 20 B of preamble and gap.
    const LEN: u32 = 1230;

    /// Bytes whose last bit has reached the far end by `t`.
    fn released_by(l: &mut Link, t: u64) -> u64 {
        let mut b = 0;
        while let Some(f) = l.pop_due(t) {
            b += u64::from(f.len);
        }
        b
    }

    #[test]
    fn a_late_worker_catches_up_within_the_lag() {
        // 1 Gbit/s, 20 ms catch-up: frames queued at 0 but started by a worker that woke at
        // 5 ms start back-to-back from 0, so the rate holds over the stall.
        let mut l = Link::new(1_000_000_000, 0, 20 * MS);
        l.idle(0);
        for _ in 0..1000 {
            l.start(FrameId(0), LEN, 5 * MS);
        }
        assert_eq!(released_by(&mut l, 5 * MS), 500 * u64::from(LEN));
    }

    #[test]
    fn idle_time_earns_no_burst() {
        // The same backlog, but the worker saw the port with nothing eligible (a paused
        // queue) until 30 ms: after the resume the frames leave at line rate from 30 ms, not
        // 20 ms' worth at once.
        let mut l = Link::new(1_000_000_000, 0, 20 * MS);
        for t in 0..=30 {
            l.idle(t * MS);
        }
        for _ in 0..1000 {
            l.start(FrameId(0), LEN, 30 * MS);
        }
        assert_eq!(released_by(&mut l, 30 * MS), 0);
        assert_eq!(released_by(&mut l, 31 * MS), 100 * u64::from(LEN));
    }
}

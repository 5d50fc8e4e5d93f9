//! `response_ps = "auto"` (issue 20 item 5): the running switch measures how late it reacts
//! and sizes the headroom's software response term from that, once, at start.
//!
//! The response term (DSH paper Eq. (1)'s η plus `response_ps × C`, `mmu::headroom`) covers
//! the time from a threshold crossing to the PAUSE leaving. A software switch notices a
//! crossing only when its worker reads the frame: the time the frame waited in the RX ring
//! (the worker asleep or busy) plus one loop round. Every frame pays that wait, so each frame
//! of a calibration burst times it: from its kernel arrival stamp (`port::bpf`, as
//! `crate::reaction`) to the end of the loop round that read it, when an XOFF it triggered
//! would be on a TX ring. After [`SAMPLES`] frames, twice the 99.9th percentile (rounded up
//! to a microsecond) becomes `response_ps` ([`response_ps`]); once no frame has come for a
//! housekeeping round (100 ms: the burst is over), each worker re-sizes its MMU the first
//! time it finds its buffer empty (`mmu::Mmu::retune_response`). Until then the switch holds the
//! configured start value (`config::AUTO_START_RESPONSE_PS`, halved until it fits), so the
//! calibration burst itself is lossless. A measured term that does not fit the buffer (a
//! stall of tens of milliseconds in the burst) is reported (`error`) and measured again on
//! the next burst.
//!
//! After calibration the PFC XOFF frames the switch sends keep being timed (`nic.reaction`),
//! so whether the chosen term held under the experiment's load can be checked afterwards.

use crate::reaction::{ReactionHist, ReactionSnapshot};
use crate::stats::Counter;
use serde::{Deserialize, Serialize};

/// Frames timed before the term is chosen: below a few thousand the 99.9th percentile is a
/// handful of samples.
pub const SAMPLES: u64 = 2000;

/// The response term for measured reaction times `m`: twice their 99.9th percentile. The
/// term covers two software reactions in a row: this switch noticing the crossing and
/// sending XOFF, then the upstream (an `xoff host` NIC or another switch, a poll loop on the
/// same machine) noticing the XOFF and stopping. Only the first is measured here; the second
/// is taken to be as late. Measured on the 8:1 incast (`incast-pfc-auto.toml`), the XOFF
/// reactions during a cell reached 0.75–1.05× the calibration's p99.9, so the term with one
/// p99.9 alone would have been exceeded.
pub fn response_ps(m: &ReactionSnapshot) -> u64 {
    2 * m.recommended_response_ps().max(1_000_000)
}

/// The measurement as the log and the refusal message give it.
pub fn describe(m: &ReactionSnapshot) -> String {
    format!(
        "{} frames took p50 {} µs, p99 {} µs, p99.9 {} µs from the kernel to a TX ring",
        m.count,
        m.p50_ns / 1000,
        m.p99_ns / 1000,
        m.p999_ns / 1000
    )
}

/// One worker's calibration: its timed frames and the term it applied.
#[derive(Debug, Default)]
pub struct WorkerCalibration {
    pub hist: ReactionHist,
    /// The `response_ps` this worker's MMU now uses; 0 until applied.
    pub applied_ps: Counter,
}

/// What every worker reads to decide: the switch-wide histogram, once it holds enough.
pub fn measured(workers: &[WorkerCalibration]) -> Option<ReactionSnapshot> {
    let s = ReactionHist::snapshot(workers.iter().map(|w| &w.hist));
    (s.count >= SAMPLES).then_some(s)
}

/// `nic.calibration` in `xoff ctl stats --json` (`response_ps = "auto"` switches).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CalibrationSnapshot {
    /// The term reserved for until calibrated (the configured start value, halved to fit).
    pub start_response_ps: u64,
    /// Frames timed, and their percentiles (ns).
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// The measured term every worker applied; 0 while any has not yet.
    pub response_ps: u64,
    /// Why the last measured term was not applied (it did not fit the buffer); cleared when
    /// one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CalibrationSnapshot {
    pub fn new(
        start_response_ps: u64,
        workers: &[WorkerCalibration],
        error: Option<String>,
    ) -> Self {
        let s = ReactionHist::snapshot(workers.iter().map(|w| &w.hist));
        let applied: Vec<u64> = workers.iter().map(|w| w.applied_ps.get()).collect();
        CalibrationSnapshot {
            start_response_ps,
            samples: s.count,
            p50_ns: s.p50_ns,
            p99_ns: s.p99_ns,
            p999_ns: s.p999_ns,
            max_ns: s.max_ns,
            response_ps: if applied.iter().all(|&a| a > 0) {
                applied.iter().copied().max().unwrap_or(0)
            } else {
                0
            },
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decides_after_enough_frames_and_reports_only_when_every_worker_applied() {
        let w = [WorkerCalibration::default(), WorkerCalibration::default()];
        for _ in 0..SAMPLES - 1 {
            w[0].hist.record(20_000);
        }
        assert_eq!(measured(&w), None);
        w[1].hist.record(3_000_000);
        let m = measured(&w).expect("enough");
        assert_eq!(m.count, SAMPLES);
        // One frame in 2000 at 3 ms: the 99.9th percentile is still 20 µs.
        assert!(m.p999_ns < 25_000, "{m:?}");
        assert_eq!(response_ps(&m), 2 * m.p999_ns.div_ceil(1000) * 1_000_000);
        w[0].applied_ps.set(response_ps(&m));
        assert_eq!(CalibrationSnapshot::new(7, &w, None).response_ps, 0);
        w[1].applied_ps.set(response_ps(&m));
        let s = CalibrationSnapshot::new(7, &w, None);
        assert_eq!(s.response_ps, response_ps(&m));
        assert_eq!((s.start_response_ps, s.samples), (7, SAMPLES));
    }
}

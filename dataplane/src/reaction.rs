//! The switch's reaction time on real frames (issue 20 item 5): from a frame's arrival in the
//! kernel to the PFC XOFF it triggered being put on a TX ring. An ASIC reacts in about a
//! microsecond; a software switch reacts when its worker next runs, which is why the
//! headroom's response term (`response_ps`, DSH paper Eq. (1)) is large by default. Measured,
//! it can be set from data (`xoff bench reaction`).
//!
//! The arrival time is the XDP program's `bpf_ktime_get_ns` (`port::bpf::redirect_program`,
//! on with `xoff run --reaction`), so the time a frame waits in the RX ring while the worker
//! sleeps or runs something else is counted, as the upstream sees it. The histogram is
//! log-linear: 16 sub-buckets per power of two (at most 1/16 relative error), written by
//! one worker and read by any thread.

use crate::stats::Counter;
use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two.
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;
const BUCKETS: usize = 64 * SUB as usize;

/// One worker's reaction times, in nanoseconds.
#[derive(Debug)]
pub struct ReactionHist {
    buckets: Vec<Counter>,
    max: Counter,
}

impl Default for ReactionHist {
    fn default() -> Self {
        ReactionHist {
            buckets: (0..BUCKETS).map(|_| Counter::default()).collect(),
            max: Counter::default(),
        }
    }
}

/// The bucket of `v`: exact below 16, else (power of two, top 4 bits after the leading one).
fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    ((u64::from(e) - u64::from(SUB_BITS) + 1) * SUB + sub) as usize
}

/// The largest value bucket `i` holds (a percentile is reported as its bucket's upper end,
/// never below the true value).
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let sub = i % SUB;
    let lo = (SUB + sub) << (e - u64::from(SUB_BITS));
    lo + (1 << (e - u64::from(SUB_BITS))) - 1
}

impl ReactionHist {
    /// Records one reaction of `ns` nanoseconds (single writer).
    pub fn record(&self, ns: u64) {
        self.buckets[index(ns)].add(1);
        self.max.max(ns);
    }

    /// Forgets every reaction (its single writer only).
    pub fn reset(&self) {
        for b in &self.buckets {
            b.set(0);
        }
        self.max.set(0);
    }

    /// The histograms of several workers as one.
    pub fn snapshot<'a>(hists: impl IntoIterator<Item = &'a ReactionHist>) -> ReactionSnapshot {
        let mut sum = vec![0u64; BUCKETS];
        let mut max = 0;
        for h in hists {
            for (s, b) in sum.iter_mut().zip(&h.buckets) {
                *s += b.get();
            }
            max = max.max(h.max.get());
        }
        ReactionSnapshot::from_buckets(&sum, max)
    }
}

/// `nic.reaction` in `xoff ctl stats --json`: percentiles of the reaction time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReactionSnapshot {
    /// Reactions measured (PFC XOFF frames sent because a stamped frame crossed a threshold).
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl ReactionSnapshot {
    fn from_buckets(b: &[u64], max: u64) -> Self {
        let count: u64 = b.iter().sum();
        let pct = |q: f64| {
            if count == 0 {
                return 0;
            }
            // The smallest value with at least q of the samples at or below it.
            let want = ((q * count as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, &n) in b.iter().enumerate() {
                seen += n;
                if seen >= want {
                    return upper(i).min(max);
                }
            }
            max
        };
        ReactionSnapshot {
            count,
            p50_ns: pct(0.5),
            p99_ns: pct(0.99),
            p999_ns: pct(0.999),
            max_ns: max,
        }
    }

    /// The `response_ps` these measurements support: the 99.9th percentile, rounded up to
    /// the next microsecond (0 without measurements).
    pub fn recommended_response_ps(&self) -> u64 {
        self.p999_ns.div_ceil(1000) * 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_whose_upper_end_is_within_a_sixteenth() {
        for v in [
            0u64,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            4095,
            4096,
            1_000_000,
            u64::MAX / 2,
        ] {
            let i = index(v);
            assert!(upper(i) >= v, "{v}: bucket {i} ends at {}", upper(i));
            assert!(
                upper(i) - v <= v / 16,
                "{v}: bucket {i} ends at {}",
                upper(i)
            );
            if i > 0 {
                assert!(upper(i - 1) < v, "{v}: belongs in an earlier bucket");
            }
        }
        assert!(index(u64::MAX) < BUCKETS);
    }

    #[test]
    fn percentiles_of_a_known_sample() {
        let h = ReactionHist::default();
        // 990 reactions of 10 µs, 9 of 1 ms, 1 of 20 ms.
        for _ in 0..990 {
            h.record(10_000);
        }
        for _ in 0..9 {
            h.record(1_000_000);
        }
        h.record(20_000_000);
        let s = ReactionHist::snapshot([&h]);
        assert_eq!(s.count, 1000);
        assert!((10_000..=10_000 + 10_000 / 16).contains(&s.p50_ns), "{s:?}");
        assert!((10_000..=10_000 + 10_000 / 16).contains(&s.p99_ns), "{s:?}");
        assert!(
            (1_000_000..=1_000_000 + 1_000_000 / 16).contains(&s.p999_ns),
            "{s:?}"
        );
        assert_eq!(s.max_ns, 20_000_000);
        assert_eq!(
            s.recommended_response_ps(),
            s.p999_ns.div_ceil(1000) * 1_000_000
        );
    }

    #[test]
    fn workers_add_up_and_an_empty_histogram_says_zero() {
        let (a, b) = (ReactionHist::default(), ReactionHist::default());
        assert_eq!(ReactionHist::snapshot([&a]), ReactionSnapshot::default());
        a.record(5);
        b.record(7);
        b.record(7);
        let s = ReactionHist::snapshot([&a, &b]);
        assert_eq!((s.count, s.p50_ns, s.max_ns), (3, 7, 7));
    }
}

//! The retransmission timeout of one flow, after RFC 6298 ("Computing TCP's Retransmission
//! Timer"), in integer picoseconds.
//!
//! * §2.1: before the first RTT sample the RTO is the configured initial value.
//! * §2.2: the first sample R sets SRTT = R, RTTVAR = R/2.
//! * §2.3: each later sample R' sets RTTVAR = 3/4·RTTVAR + 1/4·|SRTT − R'|, then
//!   SRTT = 7/8·SRTT + 1/8·R'; RTO = SRTT + max(G, K·RTTVAR) with K = 4. G, the clock
//!   granularity, is one tick (1 ps): virtual time is exact, and the floor absorbs a real-time
//!   driver's jitter.
//! * §2.4: the RTO is never below a floor (the RFC's 1 s is far too long for a datacenter:
//!   the floor is configured, [`super::StackConfig::rto_ps`]).
//! * §2.5: it is never above a ceiling ([`super::StackConfig::rto_max_ps`]).
//! * §3 (Karn's rule): no sample from a retransmitted segment. The caller times one segment
//!   at a time and drops the measurement when a timeout resends it ([`super::HostStack`]).
//! * §5.5: each timeout doubles the RTO (up to the ceiling); the backed-off value stays until
//!   a valid sample arrives, which recomputes it from SRTT and RTTVAR (§5.7 with Karn).
//!
//! Pure: the caller measures the samples and runs the timer.

/// K of RFC 6298 §2.
const K: u64 = 4;
/// G of RFC 6298 §2 (ps).
const G: u64 = 1;

/// One flow's RTT estimate and RTO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoEstimator {
    /// SRTT (ps), once there is a sample.
    srtt: Option<u64>,
    /// RTTVAR (ps).
    rttvar: u64,
    /// The RTO before backoff and bounds (§2.1 initial, then §2.2/§2.3).
    base: u64,
    /// Timeouts since the last valid sample (§5.5: each doubles the RTO).
    backoff: u32,
    min: u64,
    max: u64,
}

impl RtoEstimator {
    /// An estimator with no sample yet: RTO = `initial`, kept within `min..=max` (a ceiling
    /// below the floor is raised to it).
    pub fn new(initial: u64, min: u64, max: u64) -> Self {
        RtoEstimator {
            srtt: None,
            rttvar: 0,
            base: initial,
            backoff: 0,
            min,
            max: max.max(min),
        }
    }

    /// Takes one RTT sample (ps) from a segment that was not retransmitted (§2.2, §2.3) and
    /// ends any backoff.
    pub fn sample(&mut self, r: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                self.rttvar = (3 * self.rttvar + s.abs_diff(r)) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        self.base = srtt.saturating_add(G.max(K.saturating_mul(self.rttvar)));
        self.backoff = 0;
    }

    /// The timer expired (§5.5): the next RTO is twice this one, up to the ceiling.
    pub fn on_timeout(&mut self) {
        if self.rto() < self.max {
            self.backoff += 1;
        }
    }

    /// The current RTO (ps): the base within the floor, doubled per timeout, at most the
    /// ceiling.
    pub fn rto(&self) -> u64 {
        let r = self.base.max(self.min);
        let doubled = r
            .checked_shl(self.backoff)
            .filter(|&d| d >> self.backoff == r);
        doubled.unwrap_or(u64::MAX).min(self.max)
    }

    /// SRTT (ps), if a sample has been taken.
    pub fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    /// RTTVAR (ps).
    pub fn rttvar(&self) -> u64 {
        self.rttvar
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    #[test]
    fn initial_rto_until_the_first_sample() {
        let e = RtoEstimator::new(50 * MS, MS, 1000 * MS);
        assert_eq!((e.srtt(), e.rto()), (None, 50 * MS));
    }

    #[test]
    fn first_sample_sets_srtt_and_half_rttvar() {
        // §2.2: R = 10 ms: SRTT 10, RTTVAR 5, RTO = 10 + 4·5 = 30 ms.
        let mut e = RtoEstimator::new(50 * MS, MS, 1000 * MS);
        e.sample(10 * MS);
        assert_eq!(
            (e.srtt(), e.rttvar(), e.rto()),
            (Some(10 * MS), 5 * MS, 30 * MS)
        );
    }

    #[test]
    fn several_samples_by_hand() {
        // §2.3, worked by hand (ms):
        //   R 10: SRTT 10,   RTTVAR 5,                         RTO 30
        //   R 18: RTTVAR 3/4·5 + 1/4·8 = 5.75,  SRTT 7/8·10 + 18/8 = 11,  RTO 11 + 23 = 34
        //   R 11: RTTVAR 3/4·5.75 + 0 = 4.3125, SRTT 11,                  RTO 11 + 17.25 = 28.25
        //   R 3:  RTTVAR 3/4·4.3125 + 2 = 5.234375, SRTT 77/8 + 3/8 = 10, RTO 10 + 20.9375
        let mut e = RtoEstimator::new(50 * MS, MS, 1000 * MS);
        let ms = |x: f64| (x * 1e9) as u64;
        e.sample(10 * MS);
        e.sample(18 * MS);
        assert_eq!(
            (e.srtt(), e.rttvar(), e.rto()),
            (Some(11 * MS), ms(5.75), 34 * MS)
        );
        e.sample(11 * MS);
        assert_eq!((e.srtt(), e.rttvar()), (Some(11 * MS), ms(4.3125)));
        assert_eq!(e.rto(), ms(28.25));
        e.sample(3 * MS);
        assert_eq!((e.srtt(), e.rttvar()), (Some(10 * MS), ms(5.234375)));
        assert_eq!(e.rto(), ms(30.9375));
    }

    #[test]
    fn floor_and_ceiling() {
        // A 100 us RTT computes 300 us; the 1 ms floor holds (§2.4).
        let mut e = RtoEstimator::new(MS, MS, 8 * MS);
        e.sample(MS / 10);
        assert_eq!(e.rto(), MS);
        // A 20 ms RTT computes 60 ms; the 8 ms ceiling holds (§2.5).
        let mut e = RtoEstimator::new(MS, MS, 8 * MS);
        e.sample(20 * MS);
        assert_eq!(e.rto(), 8 * MS);
        // A ceiling below the floor is the floor.
        assert_eq!(RtoEstimator::new(5 * MS, 10 * MS, MS).rto(), 10 * MS);
    }

    #[test]
    fn backoff_doubles_to_the_ceiling_and_a_sample_ends_it() {
        let mut e = RtoEstimator::new(50 * MS, MS, 300 * MS);
        e.sample(10 * MS); // RTO 30 ms
        let mut got = Vec::new();
        for _ in 0..5 {
            e.on_timeout();
            got.push(e.rto() / MS);
        }
        assert_eq!(got, vec![60, 120, 240, 300, 300]);
        // §5.7 with Karn: a valid sample recomputes from SRTT/RTTVAR (10, 5 -> R 10: 10, 3.75).
        e.sample(10 * MS);
        assert_eq!(e.rto(), 25 * MS);
        // Backoff with no ceiling in sight does not overflow.
        let mut e = RtoEstimator::new(MS, MS, u64::MAX);
        for _ in 0..200 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), u64::MAX);
    }
}

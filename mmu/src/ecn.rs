//! RED-style ECN marking per egress queue, as DCQCN configures it (Zhu et al., SIGCOMM'15;
//! HPCC's `SwitchMmu::ShouldSendCN`): below `K_min` never, above `K_max` always, in between with
//! probability `P_max·(q − K_min)/(K_max − K_min)` on the instantaneous queue length. DCQCN's
//! 100 Gbit/s defaults (100 KB, 400 KB, 0.2) are scaled linearly to each port's rate. Only
//! ECN-capable packets are marked. Randomness comes from a seeded SplitMix64 and is drawn only in
//! the probabilistic band, so runs are deterministic for a given seed and packet sequence.

use crate::config::EcnConfig;
use crate::Mmu;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, good enough for marking decisions.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// ECN thresholds of one egress port, already scaled to its rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EcnPort {
    pub enabled: bool,
    pub k_min: u64,
    pub k_max: u64,
    pub p_max: f64,
}

impl EcnPort {
    pub(crate) fn new(cfg: &EcnConfig, rate_bps: u64) -> Self {
        let scale = |k: u64| -> u64 {
            let v = u128::from(k) * u128::from(rate_bps) / u128::from(cfg.ref_rate_bps.max(1));
            u64::try_from(v).unwrap_or(u64::MAX)
        };
        EcnPort {
            enabled: cfg.enabled,
            k_min: scale(cfg.k_min_bytes),
            k_max: scale(cfg.k_max_bytes),
            p_max: cfg.p_max,
        }
    }
}

/// RED marking probability for an instantaneous queue of `q_bytes`.
pub fn red_probability(q_bytes: u64, k_min: u64, k_max: u64, p_max: f64) -> f64 {
    if q_bytes > k_max {
        1.0
    } else if q_bytes > k_min && k_max > k_min {
        p_max * (q_bytes - k_min) as f64 / (k_max - k_min) as f64
    } else {
        0.0
    }
}

impl EcnPort {
    /// Marking decision for a packet joining an egress queue of this port that holds
    /// `q_bytes`. The threshold checks are inlined into `Mmu::admit`; the draw in the RED
    /// band is not (a hint alone left the whole decision out of line, a call per admitted
    /// packet).
    #[inline(always)]
    pub(crate) fn decide(&self, q_bytes: u64, rng: &mut SplitMix64) -> bool {
        if !self.enabled || q_bytes <= self.k_min {
            return false;
        }
        if q_bytes > self.k_max {
            return true;
        }
        ecn_draw(rng, q_bytes, self.k_min, self.k_max, self.p_max)
    }
}

/// The random draw of a queue between `K_min` and `K_max`.
#[inline(never)]
fn ecn_draw(rng: &mut SplitMix64, q: u64, k_min: u64, k_max: u64, p_max: f64) -> bool {
    let p = red_probability(q, k_min, k_max, p_max);
    rng.next_f64() < p
}

impl Mmu {
    /// ECN thresholds `(K_min, K_max, P_max)` of egress `port`, bytes, after rate scaling.
    pub fn ecn_thresholds(&self, port: usize) -> Option<(u64, u64, f64)> {
        self.ports
            .get(port)
            .map(|p| (p.ecn.k_min, p.ecn.k_max, p.ecn.p_max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_probability_is_piecewise_linear() {
        assert_eq!(red_probability(50_000, 100_000, 400_000, 0.2), 0.0);
        assert_eq!(red_probability(100_000, 100_000, 400_000, 0.2), 0.0);
        assert!((red_probability(250_000, 100_000, 400_000, 0.2) - 0.1).abs() < 1e-12);
        assert!((red_probability(400_000, 100_000, 400_000, 0.2) - 0.2).abs() < 1e-12);
        assert_eq!(red_probability(400_001, 100_000, 400_000, 0.2), 1.0);
    }

    #[test]
    fn thresholds_scale_linearly_with_rate() {
        let cfg = EcnConfig::default();
        let p = EcnPort::new(&cfg, 25_000_000_000);
        assert_eq!((p.k_min, p.k_max), (25_000, 100_000));
        let p = EcnPort::new(&cfg, 400_000_000_000);
        assert_eq!((p.k_min, p.k_max), (400_000, 1_600_000));
    }

    #[test]
    fn prng_is_deterministic_and_uniformish() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
        let ys: Vec<f64> = (0..10_000).map(|_| b.next_f64()).collect();
        assert_eq!(xs, ys);
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.02);
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
    }
}

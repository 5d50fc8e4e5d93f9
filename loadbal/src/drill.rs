//! DRILL: per-packet micro load balancing on local queues (Ghorbani et al., "DRILL: Micro Load
//! Balancing for Low-latency Data Center Networks", SIGCOMM 2017).
//!
//! §3.1 of that paper: on every packet, a switch samples `d` random egress queues among the
//! packet's equal-cost next hops, adds the `m` least-loaded queues it remembered from its
//! previous decision, sends the packet to the least loaded of these `d + m` and remembers it.
//! DRILL(d = 2, m = 1) is the configuration the paper recommends (§3.1.1, "two random samples
//! and one unit of memory") and the one the Proteus paper (§II-B.3, §V) compares against.
//!
//! Load is the bytes in the packet's queue at each candidate egress (`Candidate::queue_bytes`):
//! DRILL reads nothing but the local queue, which is exactly why it cannot see a PFC pause two
//! hops away (Proteus §II-B.3) until the pause backs queue up into this switch.
//!
//! Choices here the paper leaves open, fixed so runs are reproducible:
//! - the `d` samples are distinct when there are at least `d` candidates (with two candidates
//!   DRILL(2, 1) therefore always compares both), drawn from a seeded SplitMix64 stream;
//! - the memory is one next-hop index per policy (one per pipe, as one forwarding engine in the
//!   paper), checked against its port so that a different group of the same size does not
//!   inherit it;
//! - ties go to the remembered queue, then to the earlier sample: staying put reorders less.

/// DRILL(d, m = 1) state of one forwarding engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drill {
    /// Random samples per packet (the paper's `d`).
    pub d: u8,
    rng: u64,
    /// The last choice: (index in its group, port).
    memory: Option<(usize, u16)>,
}

impl Drill {
    /// DRILL(d, 1), seeded (e.g. with the switch's seed).
    pub fn new(d: u8, seed: u64) -> Self {
        Drill {
            d: d.max(1),
            rng: seed,
            memory: None,
        }
    }

    /// The paper's recommended DRILL(2, 1).
    pub fn recommended(seed: u64) -> Self {
        Self::new(2, seed)
    }

    /// The remembered choice, if any (for tests and statistics).
    pub fn memory(&self) -> Option<(usize, u16)> {
        self.memory
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.rng)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (no division on the packet path).
    #[inline]
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Picks one of `n` candidates; `load(i)` is (port, queue bytes) of candidate `i`.
    #[inline]
    pub fn pick(&mut self, n: usize, load: impl Fn(usize) -> (u16, u64)) -> Option<usize> {
        if n == 0 {
            return None;
        }
        if n == 1 {
            self.memory = Some((0, load(0).0));
            return Some(0);
        }
        let mut best: Option<(usize, u16, u64)> = None;
        let mut consider = |i: usize, (port, bytes): (u16, u64)| {
            if best.is_none_or(|(_, _, b)| bytes < b) {
                best = Some((i, port, bytes));
            }
        };
        if let Some((i, port)) = self.memory {
            if i < n {
                let l = load(i);
                if l.0 == port {
                    consider(i, l);
                }
            }
        }
        let d = usize::from(self.d).min(n);
        // Distinct samples: a random start, then random further offsets among the rest, so
        // that d = n covers every candidate in a random order.
        let first = self.below(n);
        consider(first, load(first));
        let mut prev = first;
        for k in 1..d {
            let step = 1 + self.below(n - k);
            prev = (prev + step) % n;
            consider(prev, load(prev));
        }
        let (i, port, _) = best.expect("at least one sample");
        self.memory = Some((i, port));
        Some(i)
    }
}

/// One SplitMix64 step (Steele, Lea, Flood 2014) on `state`: spelled out so the seeded choices
/// of DRILL and CONGA never change with a dependency.
#[inline]
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(bytes: &'static [u64]) -> impl Fn(usize) -> (u16, u64) {
        move |i| (10 + i as u16, bytes[i])
    }

    #[test]
    fn two_candidates_picks_the_shorter_queue_and_remembers_it() {
        let mut d = Drill::recommended(7);
        // d = 2 samples with n = 2: both are always compared, whatever the draw.
        for _ in 0..50 {
            assert_eq!(d.pick(2, q(&[3000, 1500])), Some(1));
            assert_eq!(d.memory(), Some((1, 11)));
        }
        assert_eq!(d.pick(2, q(&[0, 1500])), Some(0));
        assert_eq!(d.memory(), Some((0, 10)));
    }

    #[test]
    fn memory_wins_ties_and_is_compared_with_fresh_samples() {
        let mut d = Drill::recommended(1);
        // Candidate 2 is the only empty queue; once sampled it is remembered.
        let loads = q(&[900, 900, 0, 900, 900, 900, 900, 900]);
        assert!(
            (0..100).any(|_| d.pick(8, &loads) == Some(2)),
            "two random samples of 8 find the empty queue"
        );
        assert_eq!(d.memory(), Some((2, 12)));
        // From then on the memory holds it: the fresh samples are never shorter.
        for _ in 0..100 {
            assert_eq!(d.pick(8, &loads), Some(2));
        }
        // All equal: the remembered queue wins the tie, whatever was sampled.
        let flat = q(&[500; 8]);
        for _ in 0..100 {
            assert_eq!(d.pick(8, &flat), Some(2));
        }
    }

    #[test]
    fn memory_of_another_group_is_ignored() {
        let mut d = Drill::recommended(3);
        assert_eq!(d.pick(2, q(&[5, 0])), Some(1));
        // Same size, different ports: index 1 is port 21 now, not the remembered port 11;
        // with equal loads the memory would have won, so the pick must come from samples,
        // which over many packets hit both candidates.
        let other = |i: usize| (20 + i as u16, 0u64);
        let mut seen = [false; 2];
        for _ in 0..64 {
            d.memory = Some((1, 11));
            seen[d.pick(2, other).unwrap()] = true;
        }
        assert_eq!(seen, [true, true]);
    }

    #[test]
    fn samples_are_distinct_and_cover_the_group() {
        let mut d = Drill::recommended(42);
        let n = 5;
        let mut hits = [0u32; 5];
        for _ in 0..5000 {
            d.memory = None;
            // Record which candidates are looked at, via a load function with side effects
            // kept in a Cell.
            let seen = std::cell::Cell::new(0u32);
            d.pick(n, |i| {
                seen.set(seen.get() | 1 << i);
                (i as u16, 1)
            });
            assert_eq!(seen.get().count_ones(), 2, "d = 2 distinct samples");
            for (i, h) in hits.iter_mut().enumerate() {
                *h += seen.get() >> i & 1;
            }
        }
        // Each candidate is sampled with probability 2/5: 2000 of 5000 expected.
        for h in hits {
            assert!((1800..2200).contains(&h), "{hits:?}");
        }
    }

    #[test]
    fn same_seed_same_choices() {
        let loads = q(&[4, 4, 2, 9, 2, 7]);
        let mut a = Drill::recommended(9);
        let mut b = Drill::recommended(9);
        let ca: Vec<_> = (0..200).map(|_| a.pick(6, &loads)).collect();
        let cb: Vec<_> = (0..200).map(|_| b.pick(6, &loads)).collect();
        assert_eq!(ca, cb);
        assert_eq!(Drill::recommended(9).pick(0, &loads), None);
        assert_eq!(Drill::recommended(9).pick(1, &loads), Some(0));
    }
}

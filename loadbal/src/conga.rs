//! CONGA: distributed congestion-aware load balancing (Alizadeh et al., "CONGA: Distributed
//! Congestion-Aware Load Balancing for Datacenters", SIGCOMM 2014), the baseline the Proteus
//! paper beats in Fig. 2 and 4 (§II-B.1: "link load cannot reflect PFC pausing correctly").
//!
//! The pieces, named as CONGA §3 names them:
//! - **DRE** (§3.3, "Discounting Rate Estimator"), one per fabric link: a register `X`
//!   incremented by each packet's bytes and multiplied by `(1 − α)` every `T_dre`; `X`
//!   tracks rate × τ with τ = `T_dre`/α, so `X / (C·τ)` is the link's utilisation, quantised
//!   to `Q` bits.
//! - **Leaf-to-leaf feedback** (§3.2): the source leaf writes `LBTag` (the uplink) and `CE = 0`
//!   into the overlay header; every switch raises `CE` to its egress link's quantised DRE; the
//!   destination leaf stores `CE` in Congestion-From-Leaf[src leaf][LBTag] and piggybacks one
//!   (`FB_LBTag`, `FB_Metric`) per packet on traffic back to that leaf, chosen round-robin
//!   among the entries, those that changed since last sent first; the source leaf writes it
//!   into Congestion-To-Leaf[dst leaf][FB_LBTag]. Entries not refreshed for `t_age` read 0
//!   (§3.3 ages stale remote metrics out so that a path that stopped being reported is not
//!   avoided forever).
//! - **Flowlets** (§3.4): a flowlet table indexed by a hash of the 5-tuple; a packet more than
//!   `T_fl` after its entry's last packet starts a new flowlet, which takes the uplink
//!   minimising max(local DRE of the uplink, Congestion-To-Leaf[dst][uplink]). Ties: the uplink
//!   the entry cached if it is among the best (CONGA: "a flow only moves if there is a strictly
//!   better uplink"), else one of the best at random from a seeded SplitMix64 stream.
//!
//! Parameters (§3.6): Q = 3 bits, τ = 160 µs, T_fl = 500 µs, for CONGA's testbed whose hosts
//! send at 10 Gbit/s. [`Params::scaled`] keeps those values in units of the link's time scale:
//! the flowlet gap must exceed the delay difference between paths, which is queueing delay, and
//! a given buffer drains `C / 10 Gbit/s` times faster at rate `C`; so T_fl = 500 µs × 10 G / C
//! (125 µs at 40 Gbit/s, 50 µs at 100 Gbit/s) and τ likewise (40 µs at 40 Gbit/s), with
//! α = 1/8 (a shift, as hardware does) and T_dre = τ/8. The age-out time `t_age` is not a
//! number this module could take from the paper; it is 10 ms × 10 G / C, far above τ and T_fl.
//!
//! Pure: no clocks (time in ps is passed in), no I/O, no formats (the overlay header lives in
//! `flowctl::wire::conga`).

/// Most uplinks a leaf may balance over (`LBTag` is 4 bits).
pub const MAX_UPLINKS: usize = 16;

/// CONGA's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Bits of a quantised congestion metric (`Q`).
    pub q_bits: u8,
    /// DRE decay period `T_dre`, ps.
    pub t_dre_ps: u64,
    /// α = 2^−`alpha_shift`.
    pub alpha_shift: u8,
    /// Flowlet inactivity gap `T_fl`, ps.
    pub t_fl_ps: u64,
    /// A Congestion-To-Leaf entry not refreshed for this long reads 0, ps.
    pub t_age_ps: u64,
}

/// The rate CONGA's §3.6 parameters were chosen for (its testbed's host links).
pub const PAPER_RATE_BPS: u64 = 10_000_000_000;

impl Params {
    /// §3.6's values at 10 Gbit/s: Q = 3, τ = 160 µs (α = 1/8, T_dre = 20 µs), T_fl = 500 µs.
    pub const PAPER: Params = Params {
        q_bits: 3,
        t_dre_ps: 20_000_000,
        alpha_shift: 3,
        t_fl_ps: 500_000_000,
        t_age_ps: 10_000_000_000,
    };

    /// The paper's values with every time scaled by 10 Gbit/s / `rate_bps` (module docs).
    pub fn scaled(rate_bps: u64) -> Params {
        let s = |ps: u64| {
            (u128::from(ps) * u128::from(PAPER_RATE_BPS) / u128::from(rate_bps.max(1))) as u64
        };
        let p = Self::PAPER;
        Params {
            t_dre_ps: s(p.t_dre_ps).max(1),
            t_fl_ps: s(p.t_fl_ps),
            t_age_ps: s(p.t_age_ps),
            ..p
        }
    }

    /// τ = T_dre / α, ps.
    pub fn tau_ps(&self) -> u64 {
        self.t_dre_ps << self.alpha_shift
    }

    /// Largest quantised metric, 2^Q − 1.
    pub fn q_max(&self) -> u8 {
        ((1u16 << self.q_bits) - 1) as u8
    }
}

/// Discounting Rate Estimator of one link (§3.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dre {
    /// The register `X`, bytes.
    pub x: u64,
    /// Time of the last decay step, ps.
    last: u64,
}

impl Dre {
    /// Applies the decay steps due by `now` (lazily: hardware decays on a timer; the result at
    /// any read is the same).
    #[inline]
    pub fn advance(&mut self, p: &Params, now: u64) {
        if now < self.last + p.t_dre_ps {
            return;
        }
        let k = (now - self.last) / p.t_dre_ps;
        self.last += k * p.t_dre_ps;
        let mut k = k;
        while k > 0 && self.x > 0 {
            self.x -= self.x >> p.alpha_shift;
            // x >> shift is 0 for x < 2^shift: the register would never reach 0.
            if self.x < 1 << p.alpha_shift {
                self.x = 0;
            }
            k -= 1;
        }
    }

    /// A packet of `bytes` left on the link at `now`.
    #[inline]
    pub fn on_send(&mut self, p: &Params, bytes: u64, now: u64) {
        self.advance(p, now);
        self.x += bytes;
    }

    /// The quantised utilisation at `now` for a link of `rate_bps`: ⌊X·2^Q / (C·τ)⌋, at most
    /// 2^Q − 1.
    #[inline]
    pub fn metric(&mut self, p: &Params, rate_bps: u64, now: u64) -> u8 {
        self.advance(p, now);
        quantise(p, self.x, rate_bps)
    }
}

/// ⌊x·2^Q / (C·τ)⌋ capped at 2^Q − 1; C·τ in bytes is rate_bps · τ_ps / 8·10^12.
#[inline]
pub fn quantise(p: &Params, x: u64, rate_bps: u64) -> u8 {
    let c_tau = u128::from(rate_bps) * u128::from(p.tau_ps()) / 8_000_000_000_000;
    if c_tau == 0 {
        return p.q_max();
    }
    let m = (u128::from(x) << p.q_bits) / c_tau;
    m.min(u128::from(p.q_max())) as u8
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ToLeaf {
    metric: u8,
    at: u64,
    valid: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FromLeaf {
    metric: u8,
    valid: bool,
    /// Changed since it was last fed back.
    changed: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flowlet {
    uplink: u8,
    valid: bool,
    last: u64,
}

/// What a leaf decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The uplink (`LBTag`).
    pub uplink: usize,
    /// The packet started a flowlet (the uplink was chosen now, not remembered).
    pub new_flowlet: bool,
}

/// One leaf's CONGA state: its Congestion-To-Leaf and Congestion-From-Leaf tables, its flowlet
/// table and its RNG. The local DREs are the caller's (one per link, [`Dre`]).
#[derive(Debug, Clone)]
pub struct CongaLeaf {
    pub params: Params,
    to_leaf: Vec<[ToLeaf; MAX_UPLINKS]>,
    from_leaf: Vec<[FromLeaf; MAX_UPLINKS]>,
    /// Per leaf, the next Congestion-From-Leaf entry to consider feeding back.
    fb_next: Vec<u8>,
    flowlets: Vec<Flowlet>,
    rng: u64,
}

impl CongaLeaf {
    /// State for a fabric of `leaves` leaves, `flowlet_slots` flowlet entries, seeded.
    pub fn new(params: Params, leaves: usize, flowlet_slots: usize, seed: u64) -> Self {
        CongaLeaf {
            params,
            to_leaf: vec![[ToLeaf::default(); MAX_UPLINKS]; leaves],
            from_leaf: vec![[FromLeaf::default(); MAX_UPLINKS]; leaves],
            fb_next: vec![0; leaves],
            flowlets: vec![Flowlet::default(); flowlet_slots.max(1)],
            rng: seed,
        }
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        crate::drill::splitmix64(&mut self.rng)
    }

    /// Congestion-To-Leaf[`leaf`][`uplink`] at `now` (0 if never set or aged out).
    pub fn to_leaf(&self, leaf: usize, uplink: usize, now: u64) -> u8 {
        match self.to_leaf.get(leaf).and_then(|r| r.get(uplink)) {
            Some(e) if e.valid && now.saturating_sub(e.at) <= self.params.t_age_ps => e.metric,
            _ => 0,
        }
    }

    /// Congestion-From-Leaf[`leaf`][`lbtag`] (0 if never set).
    pub fn from_leaf(&self, leaf: usize, lbtag: usize) -> u8 {
        self.from_leaf
            .get(leaf)
            .and_then(|r| r.get(lbtag))
            .map_or(0, |e| e.metric)
    }

    /// Destination leaf: a packet from `src_leaf` that left it by uplink `lbtag` arrived with
    /// path congestion `ce`.
    pub fn on_arrival(&mut self, src_leaf: usize, lbtag: usize, ce: u8) {
        if let Some(e) = self
            .from_leaf
            .get_mut(src_leaf)
            .and_then(|r| r.get_mut(lbtag))
        {
            e.changed |= !e.valid || e.metric != ce;
            e.metric = ce;
            e.valid = true;
        }
    }

    /// Source leaf: feedback (`fb_lbtag`, `fb_metric`) from `leaf` arrived at `now`.
    pub fn on_feedback(&mut self, leaf: usize, fb_lbtag: usize, fb_metric: u8, now: u64) {
        if let Some(e) = self.to_leaf.get_mut(leaf).and_then(|r| r.get_mut(fb_lbtag)) {
            *e = ToLeaf {
                metric: fb_metric,
                at: now,
                valid: true,
            };
        }
    }

    /// The (FB_LBTag, FB_Metric) to piggyback on a packet toward `leaf`: round-robin over the
    /// valid Congestion-From-Leaf entries, an entry that changed since last sent first.
    pub fn feedback_for(&mut self, leaf: usize) -> Option<(u8, u8)> {
        let row = self.from_leaf.get_mut(leaf)?;
        let start = usize::from(self.fb_next[leaf]);
        let order = (0..MAX_UPLINKS).map(|k| (start + k) % MAX_UPLINKS);
        let pick = order
            .clone()
            .find(|&i| row[i].valid && row[i].changed)
            .or_else(|| order.clone().find(|&i| row[i].valid))?;
        row[pick].changed = false;
        self.fb_next[leaf] = ((pick + 1) % MAX_UPLINKS) as u8;
        Some((pick as u8, row[pick].metric))
    }

    /// The uplink among `n` (≤ [`MAX_UPLINKS`]) for a packet of the flow hashed to `key`
    /// toward `dst_leaf` at `now`; `local(i)` is uplink `i`'s quantised local DRE. `None` if
    /// `n` is 0 or above [`MAX_UPLINKS`].
    #[inline]
    pub fn pick(
        &mut self,
        key: u32,
        dst_leaf: usize,
        n: usize,
        local: impl Fn(usize) -> u8,
        now: u64,
    ) -> Option<Choice> {
        if n == 0 || n > MAX_UPLINKS {
            return None;
        }
        let slot = key as usize % self.flowlets.len();
        let f = self.flowlets[slot];
        if f.valid && usize::from(f.uplink) < n && now.saturating_sub(f.last) <= self.params.t_fl_ps
        {
            self.flowlets[slot].last = now;
            return Some(Choice {
                uplink: usize::from(f.uplink),
                new_flowlet: false,
            });
        }
        let mut best = u8::MAX;
        let mut ties = 0u32;
        let mut metric = [0u8; MAX_UPLINKS];
        for (i, m) in metric.iter_mut().enumerate().take(n) {
            *m = local(i).max(self.to_leaf(dst_leaf, i, now));
            if *m < best {
                best = *m;
                ties = 0;
            }
            if *m == best {
                ties |= 1 << i;
            }
        }
        let cached = usize::from(f.uplink);
        let uplink = if f.valid && cached < n && ties >> cached & 1 == 1 {
            cached
        } else {
            let k = ((u128::from(self.next_u64()) * u128::from(ties.count_ones())) >> 64) as u32;
            let mut t = ties;
            for _ in 0..k {
                t &= t - 1;
            }
            t.trailing_zeros() as usize
        };
        self.flowlets[slot] = Flowlet {
            uplink: uplink as u8,
            valid: true,
            last: now,
        };
        Some(Choice {
            uplink,
            new_flowlet: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G40: u64 = 40_000_000_000;

    #[test]
    fn scaled_parameters() {
        let p = Params::scaled(G40);
        assert_eq!(p.t_fl_ps, 125_000_000, "500 µs × 10/40");
        assert_eq!(p.t_dre_ps, 5_000_000);
        assert_eq!(p.tau_ps(), 40_000_000, "160 µs × 10/40");
        assert_eq!(Params::scaled(100_000_000_000).t_fl_ps, 50_000_000);
        assert_eq!(Params::scaled(PAPER_RATE_BPS), Params::PAPER);
        assert_eq!(Params::PAPER.tau_ps(), 160_000_000);
        assert_eq!(p.q_max(), 7);
    }

    #[test]
    fn dre_decays_by_alpha_every_t_dre_and_quantises_against_c_tau() {
        let p = Params::scaled(G40);
        // C·τ at 40 Gbit/s, τ = 40 µs: 5·10^9 B/s × 40·10^-6 s = 200 000 B.
        let mut d = Dre::default();
        d.on_send(&p, 100_000, 0);
        // Half of C·τ: ⌊0.5 × 8⌋ = 4.
        assert_eq!(d.metric(&p, G40, 0), 4);
        assert_eq!(d.metric(&p, G40, p.t_dre_ps - 1), 4, "no step before T_dre");
        // One step: 100 000 − 12 500 = 87 500 → ⌊87 500 × 8 / 200 000⌋ = 3.
        assert_eq!(d.metric(&p, G40, p.t_dre_ps), 3);
        assert_eq!(d.x, 87_500);
        // Two more: 87 500 → 76 563 (87 500 − 10 937) → 66 993 (76 563 − 9 570).
        d.advance(&p, 3 * p.t_dre_ps + 7);
        assert_eq!(d.x, 66_993);
        // Saturates at 2^Q − 1.
        d.on_send(&p, 10_000_000, 3 * p.t_dre_ps);
        assert_eq!(d.metric(&p, G40, 3 * p.t_dre_ps), 7);
        // Long idle: the register reaches 0 (a paused link reads as idle).
        assert_eq!(d.metric(&p, G40, 10_000 * p.t_dre_ps), 0);
        assert_eq!(d.x, 0);
    }

    #[test]
    fn dre_of_a_steady_rate_converges_to_its_utilisation() {
        let p = Params::scaled(G40);
        let mut d = Dre::default();
        // 1500-byte packets at 20 Gbit/s (600 ns apart) for 20 τ.
        let gap = 600_000;
        let mut t = 0;
        while t < 20 * p.tau_ps() {
            d.on_send(&p, 1500, t);
            t += gap;
        }
        // Steady state: R·T_dre = 12 500 B arrive per step and X·α leaves, so X saws between
        // R·τ·(1 − α) = 87 500 B (just after a step) and R·τ = 100 000 B (just before one):
        // utilisation ½ reads 3 or 4 of 7 (⌊87 500 × 8 / 200 000⌋ = 3). Whole packets: a
        // step may see one 1500-byte packet more or less than 12 500 B.
        assert!((86_000..=101_500).contains(&d.x), "{}", d.x);
        assert!((3..=4).contains(&d.metric(&p, G40, t)));
        // An idle link's register right after the same traffic stays below.
        assert!(d.metric(&p, G40, t + 8 * p.t_dre_ps) <= 2);
    }

    #[test]
    fn feedback_loop_from_ce_to_congestion_to_leaf() {
        let p = Params::scaled(G40);
        let mut dst = CongaLeaf::new(p, 3, 64, 1);
        let mut src = CongaLeaf::new(p, 3, 64, 2);
        assert_eq!(dst.feedback_for(0), None, "nothing measured yet");
        // Leaf 0 → leaf 2 by uplinks 1 (CE 5) and 3 (CE 2).
        dst.on_arrival(0, 1, 5);
        dst.on_arrival(0, 3, 2);
        // Round-robin from 0: uplink 1, then 3, then (nothing changed) 1 again.
        assert_eq!(dst.feedback_for(0), Some((1, 5)));
        assert_eq!(dst.feedback_for(0), Some((3, 2)));
        assert_eq!(dst.feedback_for(0), Some((1, 5)));
        // A change goes first even when the pointer is past it.
        dst.on_arrival(0, 1, 6);
        assert_eq!(dst.feedback_for(0), Some((1, 6)));
        assert_eq!(dst.from_leaf(0, 1), 6);
        // Another leaf's row is separate.
        assert_eq!(dst.feedback_for(1), None);
        // At the source: Congestion-To-Leaf[2][1] = 6 until it ages out.
        src.on_feedback(2, 1, 6, 1_000);
        assert_eq!(src.to_leaf(2, 1, 1_000 + p.t_age_ps), 6);
        assert_eq!(src.to_leaf(2, 1, 1_001 + p.t_age_ps), 0, "aged out");
        assert_eq!(src.to_leaf(2, 0, 1_000), 0);
        assert_eq!(src.to_leaf(1, 1, 1_000), 0);
    }

    #[test]
    fn flowlet_keeps_its_uplink_within_t_fl_and_rechooses_after() {
        let p = Params::scaled(G40);
        let mut l = CongaLeaf::new(p, 2, 64, 7);
        // Uplink 1 idle, uplink 0 busy.
        let c = l.pick(9, 1, 2, |i| [6, 1][i], 0).unwrap();
        assert_eq!(
            c,
            Choice {
                uplink: 1,
                new_flowlet: true
            }
        );
        // Now uplink 1 is the busier one, but the flowlet continues within T_fl of its last
        // packet (each packet refreshes it).
        for k in 1..=4 {
            let c = l.pick(9, 1, 2, |i| [0, 7][i], k * p.t_fl_ps).unwrap();
            assert_eq!(
                c,
                Choice {
                    uplink: 1,
                    new_flowlet: false
                }
            );
        }
        // A gap longer than T_fl: a new flowlet, which moves.
        let c = l.pick(9, 1, 2, |i| [0, 7][i], 5 * p.t_fl_ps + 1).unwrap();
        assert_eq!(
            c,
            Choice {
                uplink: 0,
                new_flowlet: true
            }
        );
    }

    #[test]
    fn choice_takes_the_max_of_local_and_remote_and_breaks_ties() {
        let p = Params::scaled(G40);
        let mut l = CongaLeaf::new(p, 2, 1 << 12, 11);
        // Local DREs 1, 2, 1, 3; remote for leaf 1: uplink 0 at 4. Max: 4, 2, 1, 3 → uplink 2.
        l.on_feedback(1, 0, 4, 0);
        let local = |i: usize| [1, 2, 1, 3][i];
        assert_eq!(l.pick(1, 1, 4, local, 0).unwrap().uplink, 2);
        // Toward leaf 0 (no remote metrics), uplinks 0 and 2 tie at 1: random among the two,
        // both taken over many new flowlets, never another.
        let mut seen = [0u32; 4];
        for key in 0..4000u32 {
            seen[l.pick(key, 0, 4, local, 0).unwrap().uplink] += 1;
        }
        assert_eq!(seen[1] + seen[3], 0);
        assert!(seen[0] > 1700 && seen[2] > 1700, "{seen:?}");
        // A new flowlet whose cached uplink is among the best keeps it.
        let key = 77;
        let first = l.pick(key, 0, 4, local, 0).unwrap().uplink;
        for k in 1..50 {
            let c = l.pick(key, 0, 4, local, k * (p.t_fl_ps + 1)).unwrap();
            assert!(c.new_flowlet);
            assert_eq!(c.uplink, first);
        }
        assert_eq!(l.pick(1, 0, 0, local, 0), None);
        assert_eq!(l.pick(1, 0, MAX_UPLINKS + 1, |_| 0, 0), None);
    }

    #[test]
    fn same_seed_same_choices() {
        let p = Params::scaled(G40);
        let mut a = CongaLeaf::new(p, 1, 16, 5);
        let mut b = CongaLeaf::new(p, 1, 16, 5);
        for k in 0..200u32 {
            let t = u64::from(k) * 2 * p.t_fl_ps;
            assert_eq!(
                a.pick(k, 0, 3, |_| 2, t).unwrap(),
                b.pick(k, 0, 3, |_| 2, t).unwrap()
            );
        }
    }
}

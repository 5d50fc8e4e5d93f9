//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM'15,
//! §3.1-3.2): the switch (congestion point) marks ECN with RED (`mmu::ecn`); the receiver
//! (notification point) answers CE-marked packets with at most one CNP per flow per 50 µs
//! ([`CNP_INTERVAL_PS`]); the sender (reaction point) keeps a current rate `R_C` and a target
//! rate `R_T` per flow:
//!
//! * α, the congestion estimate, is updated every α interval: `α ← (1−g)α + g` if a CNP
//!   arrived in the interval, else `α ← (1−g)α`;
//! * a rate decrease is checked every decrease interval: if a CNP arrived, `R_T ← R_C` (unless
//!   no increase happened since the last decrease: the target is not clamped twice),
//!   `R_C ← max(R_min, R_C·(1−α/2))`, and the increase stages restart;
//! * every rate-increase timer period (and, if enabled, every `B` bytes sent: the byte
//!   counter) is an increase event: with `T` timer stages and `BC` byte-counter stages since
//!   the last decrease, fast recovery while `max(T, BC) < F` (`R_C ← (R_T+R_C)/2`), hyper
//!   increase once `min(T, BC) > F` (`R_T += R_HAI`), additive increase otherwise
//!   (`R_T += R_AI`), then `R_C ← (R_T+R_C)/2`. Without the byte counter `BC = T`.
//!
//! This is the structure of the "Mellanox version" in HPCC's ns-3 (`rdma-hw.cc`,
//! `cnp_received_mlx`, `CheckRateDecreaseMlx`, `RateIncEventMlx`), which the BFC and HPCC
//! papers compare against; [`Params::for_rate`] takes the values HPCC's `simulation/run.py`
//! runs DCQCN with in its `dcqcn_paper` profile (the DCQCN paper's timers).

/// At most one CNP per flow per this interval at the receiver (DCQCN §3.2, N = 50 µs).
pub const CNP_INTERVAL_PS: u64 = 50_000_000;

/// Reaction-point parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Line rate, bit/s (`R_C` starts here and never exceeds it).
    pub line_bps: f64,
    /// α gain `g`.
    pub g: f64,
    /// α update interval, ps.
    pub alpha_interval_ps: u64,
    /// Rate decrease check interval, ps.
    pub decrease_interval_ps: u64,
    /// Rate increase timer period, ps.
    pub increase_timer_ps: u64,
    /// Byte counter `B` (`None`: off, as in HPCC's ns-3).
    pub byte_counter: Option<u64>,
    /// Fast recovery stages `F`.
    pub fast_recovery: u32,
    /// Additive increase step `R_AI`, bit/s.
    pub rai_bps: f64,
    /// Hyper increase step `R_HAI`, bit/s.
    pub rhai_bps: f64,
    /// Floor of the rate, bit/s.
    pub min_bps: f64,
    /// `R_C` ← this × `R_C` on the first CNP.
    pub rate_on_first_cnp: f64,
    /// Clamp `R_T` to `R_C` on every decrease, even twice in a row.
    pub clamp_target: bool,
}

impl Params {
    /// HPCC's `simulation/run.py`, `--cc dcqcn_paper` (NIC rate `bw` Gbit/s): α interval
    /// 50 µs, decrease interval 50 µs, increase timer 55 µs, g = 1/256,
    /// `R_AI` = 5·bw/25 Mbit/s, `R_HAI` = 50·bw/25 Mbit/s (so line/5000 and line/500 here),
    /// no target clamp; F = 5 (ns-3's `FastRecoveryTimes` default). `MIN_RATE` 1000 Mbit/s,
    /// which it uses at 25-100 Gbit/s, is taken as 1 % of the line (1 Gbit/s at 100 Gbit/s)
    /// so slower links keep a floor below their rate; the first CNP keeps the rate
    /// (`RateOnFirstCnp` = 1, ns-3's default) and the byte counter is off (ns-3 has none).
    ///
    /// Why not run.py's `--cc dcqcn` timers (α 1 µs, decrease 4 µs, increase 300 µs): they
    /// go with ns-3's receiver, which puts a CNP in every ACK of a marked packet. With the
    /// paper's notification point (one CNP per 50 µs, [`CNP_INTERVAL_PS`]) a 1 µs α timer
    /// decays α to ≈ 0.02 between CNPs, each cut is ≈ 1 %, and a 16:1 incast at 100 Gbit/s
    /// was not brought under control in 10 ms (measured: more PFC pauses than without
    /// congestion control). The paper's timers match its 50 µs CNP interval.
    pub fn for_rate(line_bps: u64) -> Self {
        let line = line_bps as f64;
        Params {
            line_bps: line,
            g: 1.0 / 256.0,
            alpha_interval_ps: 50_000_000,
            decrease_interval_ps: 50_000_000,
            increase_timer_ps: 55_000_000,
            byte_counter: None,
            fast_recovery: 5,
            rai_bps: line / 5000.0,
            rhai_bps: line / 500.0,
            min_bps: line / 100.0,
            rate_on_first_cnp: 1.0,
            clamp_target: false,
        }
    }

    /// The same control `k` times slower: every timer (α, decrease, increase) `k` times
    /// longer, the per-event steps (`g`, `R_AI`, `R_HAI`, `F`) unchanged. For a loop whose
    /// feedback is `k` times slower than the µs fabric the paper tuned its timers for: at
    /// 100 Mbit/s a queue between DCQCN's marking thresholds is 1000 times longer in time
    /// than at 100 Gbit/s, and a host driven by a software loop sees its CNPs in batches a
    /// millisecond or more apart. The notification point's interval scales with it
    /// ([`cnp_interval_ps`]).
    pub fn time_scaled(mut self, k: u32) -> Self {
        let k = u64::from(k.max(1));
        self.alpha_interval_ps *= k;
        self.decrease_interval_ps *= k;
        self.increase_timer_ps *= k;
        self
    }
}

/// The notification point's minimum spacing of CNPs per flow for time scale `k`
/// ([`Params::time_scaled`]; 1: the paper's 50 µs).
pub fn cnp_interval_ps(k: u32) -> u64 {
    CNP_INTERVAL_PS * u64::from(k.max(1))
}

/// One flow's reaction point.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    pub p: Params,
    /// Current rate `R_C`, bit/s.
    pub rc: f64,
    /// Target rate `R_T`, bit/s.
    pub rt: f64,
    pub alpha: f64,
    alpha_cnp: bool,
    decrease_cnp: bool,
    /// Timer stages `T` and byte-counter stages `BC` since the last decrease.
    pub t_stage: u32,
    pub bc_stage: u32,
    bytes: u64,
    next_alpha: Option<u64>,
    next_decrease: Option<u64>,
    next_increase: Option<u64>,
    /// CNPs received.
    pub cnps: u64,
}

impl Dcqcn {
    /// A flow at line rate; no timer runs until the first CNP.
    pub fn new(p: Params) -> Self {
        Dcqcn {
            rc: p.line_bps,
            rt: p.line_bps,
            alpha: 1.0,
            alpha_cnp: false,
            decrease_cnp: false,
            t_stage: 0,
            bc_stage: 0,
            bytes: 0,
            next_alpha: None,
            next_decrease: None,
            next_increase: None,
            cnps: 0,
            p,
        }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rc.max(1.0) as u64
    }

    /// A CNP arrived at `now`. The first starts the α and decrease timers (α = 1).
    pub fn on_cnp(&mut self, now: u64) {
        self.cnps += 1;
        self.alpha_cnp = true;
        self.decrease_cnp = true;
        if self.next_alpha.is_none() {
            self.alpha = 1.0;
            self.alpha_cnp = false;
            self.next_alpha = Some(now + self.p.alpha_interval_ps);
            self.next_decrease = Some(now + self.p.decrease_interval_ps);
            self.rc *= self.p.rate_on_first_cnp;
            self.rt = self.rc;
        }
    }

    /// `bytes` left at `now`: the byte counter, if on (only once rate limiting started).
    pub fn on_send(&mut self, _now: u64, bytes: u64) {
        let Some(b) = self.p.byte_counter.filter(|&b| b > 0) else {
            return;
        };
        if self.next_alpha.is_none() {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= b {
            self.bytes -= b;
            self.increase();
            self.bc_stage += 1;
        }
    }

    /// Runs every timer due at or before `now`, in time order (α before decrease before
    /// increase at the same instant).
    pub fn on_tick(&mut self, now: u64) {
        loop {
            let a = self.next_alpha.filter(|&t| t <= now);
            let d = self.next_decrease.filter(|&t| t <= now);
            let i = self.next_increase.filter(|&t| t <= now);
            let first = [a, d, i].into_iter().flatten().min();
            let Some(t) = first else { break };
            if a == Some(t) {
                self.alpha_event(t);
            } else if d == Some(t) {
                self.decrease_event(t);
            } else {
                self.increase_event(t);
            }
        }
    }

    pub fn next_timer(&self) -> Option<u64> {
        [self.next_alpha, self.next_decrease, self.next_increase]
            .into_iter()
            .flatten()
            .min()
    }

    fn alpha_event(&mut self, t: u64) {
        let g = self.p.g;
        self.alpha = if self.alpha_cnp {
            (1.0 - g) * self.alpha + g
        } else {
            (1.0 - g) * self.alpha
        };
        self.alpha_cnp = false;
        self.next_alpha = Some(t + self.p.alpha_interval_ps);
    }

    fn decrease_event(&mut self, t: u64) {
        self.next_decrease = Some(t + self.p.decrease_interval_ps);
        if !self.decrease_cnp {
            return;
        }
        if self.p.clamp_target || self.t_stage != 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.p.min_bps);
        self.t_stage = 0;
        self.bc_stage = 0;
        self.bytes = 0;
        self.decrease_cnp = false;
        self.next_increase = Some(t + self.p.increase_timer_ps);
    }

    fn increase_event(&mut self, t: u64) {
        self.next_increase = Some(t + self.p.increase_timer_ps);
        self.increase();
        self.t_stage += 1;
    }

    fn increase(&mut self) {
        let (hi, lo) = match self.p.byte_counter {
            Some(_) => (
                self.t_stage.max(self.bc_stage),
                self.t_stage.min(self.bc_stage),
            ),
            None => (self.t_stage, self.t_stage),
        };
        let f = self.p.fast_recovery;
        if hi < f {
            // fast recovery: toward the target only
        } else if lo > f {
            self.rt = (self.rt + self.p.rhai_bps).min(self.p.line_bps);
        } else {
            self.rt = (self.rt + self.p.rai_bps).min(self.p.line_bps);
        }
        self.rc = (self.rc + self.rt) / 2.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;
    const G100: f64 = 100e9;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn rate_after_a_cnp_and_after_n_timer_periods() {
        let mut d = Dcqcn::new(Params::for_rate(100_000_000_000));
        assert_eq!(d.rate_bps(), 100_000_000_000);
        assert_eq!(d.next_timer(), None, "no timer before congestion");
        d.on_cnp(0);
        // α = 1 on the first CNP; at 50 µs it decays once (no further CNP), then the
        // decrease check cuts R_C by α/2. R_T stays at the line: no increase has happened
        // yet (no clamp).
        d.on_tick(50 * US - 1);
        assert!(close(d.rc, G100), "nothing before the decrease interval");
        d.on_tick(50 * US);
        let a = 255.0 / 256.0;
        assert!(close(d.alpha, a));
        let r0 = G100 * (1.0 - a / 2.0);
        assert!(close(d.rc, r0), "{} vs {r0}", d.rc);
        assert!(close(d.rt, G100));
        // Increase timer periods of 55 µs from 50 µs: fast recovery while T < F = 5, then
        // additive and hyper; R_T is capped at the line, so each period halves the
        // distance to it: R_C = line − (line − r0) / 2^n.
        for n in 1..=7u32 {
            d.on_tick(50 * US + u64::from(n) * 55 * US);
            let want = G100 - (G100 - r0) / 2f64.powi(n as i32);
            assert!(close(d.rc, want), "after {n} periods: {} vs {want}", d.rc);
            assert_eq!(d.t_stage, n);
        }
    }

    #[test]
    fn cnps_raise_alpha_and_second_decrease_clamps_target() {
        let mut p = Params::for_rate(100_000_000_000);
        p.line_bps = 40e9;
        let mut d = Dcqcn::new(p);
        d.on_cnp(0);
        d.on_cnp(25 * US);
        // The α update at 50 µs saw a CNP: α = (1−g)·1 + g = 1; the cut halves R_C.
        d.on_tick(50 * US);
        assert!(close(d.alpha, 1.0));
        assert!(close(d.rc, 20e9));
        // One fast-recovery period (105 µs): R_C = (20G + 40G)/2, T = 1.
        d.on_tick(105 * US);
        assert!(close(d.rc, 30e9));
        assert_eq!(d.t_stage, 1);
        // A CNP at 110 µs: α decayed once at 100 µs and rises at 150 µs; the decrease check
        // at 150 µs clamps R_T to R_C (T ≠ 0) and cuts by the new α/2.
        d.on_cnp(110 * US);
        d.on_tick(150 * US);
        let g = 1.0 / 256.0;
        let a = (1.0 - g) * (1.0 - g) + g;
        assert!(close(d.alpha, a));
        assert!(close(d.rt, 30e9), "target clamped to the current rate");
        assert!(close(d.rc, 30e9 * (1.0 - a / 2.0)));
        assert_eq!(d.t_stage, 0);
        assert_eq!(d.cnps, 3);
    }

    #[test]
    fn additive_then_hyper_increase_and_floor() {
        let mut p = Params::for_rate(100_000_000_000);
        p.rai_bps = 1e9;
        p.rhai_bps = 5e9;
        let mut d = Dcqcn::new(p);
        d.on_cnp(0);
        d.on_tick(50 * US);
        // Start from a known state below the line.
        d.rc = 20e9;
        d.rt = 30e9;
        // T = 0..4 < F: five fast-recovery steps toward 30G.
        d.on_tick(50 * US + 5 * 55 * US);
        assert_eq!(d.t_stage, 5);
        let fr = 30e9 - 10e9 / 32.0;
        assert!(close(d.rt, 30e9) && close(d.rc, fr));
        d.on_tick(50 * US + 6 * 55 * US); // T = 5 = F: additive
        assert!(close(d.rt, 31e9) && close(d.rc, (fr + 31e9) / 2.0));
        let r = d.rc;
        d.on_tick(50 * US + 7 * 55 * US); // T = 6 > F: hyper
        assert!(close(d.rt, 36e9) && close(d.rc, (r + 36e9) / 2.0));
        // Repeated CNPs bottom out at the floor (1 % of the line).
        let mut q = Dcqcn::new(Params::for_rate(100_000_000_000));
        for k in 0..100u64 {
            q.on_cnp(k * 50 * US);
            q.on_tick(k * 50 * US + 50 * US);
        }
        assert!(close(q.rc, 1e9), "{}", q.rc);
    }

    #[test]
    fn time_scaled_control_is_the_same_control_k_times_slower() {
        // The same CNPs at k-times-later instants give the same rates at k-times-later
        // ticks; the CNP interval stretches with it.
        let k = 100;
        let mut d = Dcqcn::new(Params::for_rate(100_000_000_000));
        let mut s = Dcqcn::new(Params::for_rate(100_000_000_000).time_scaled(k));
        let k = u64::from(k);
        let events = [
            (Some(0), 50),
            (Some(60), 100),
            (Some(70), 160),
            (Some(300), 400),
            (None, 900),
        ];
        for (cnp, tick) in events {
            if let Some(cnp) = cnp {
                d.on_cnp(cnp * US);
                s.on_cnp(cnp * US * k);
            }
            d.on_tick(tick * US);
            s.on_tick(tick * US * k);
            assert!(close(s.rc, d.rc) && close(s.rt, d.rt) && close(s.alpha, d.alpha));
            assert_eq!(s.t_stage, d.t_stage);
        }
        assert_eq!(s.next_timer(), d.next_timer().map(|t| t * k));
        assert_eq!(cnp_interval_ps(100), 5_000 * US);
        assert_eq!(cnp_interval_ps(0), CNP_INTERVAL_PS, "0 is taken as 1");
    }

    #[test]
    fn byte_counter_counts_stages_when_enabled() {
        let mut p = Params::for_rate(100_000_000_000);
        p.byte_counter = Some(1_000_000);
        let mut d = Dcqcn::new(p);
        d.on_send(0, 5_000_000);
        assert_eq!(d.bc_stage, 0, "no byte counter before the first CNP");
        d.on_cnp(0);
        d.on_tick(50 * US);
        let r0 = d.rc;
        // 2.5 MB: two byte-counter events, both fast recovery (max(T, BC) < F).
        d.on_send(60 * US, 2_500_000);
        assert_eq!((d.bc_stage, d.t_stage), (2, 0));
        assert!(close(d.rc, G100 - (G100 - r0) / 4.0));
    }
}

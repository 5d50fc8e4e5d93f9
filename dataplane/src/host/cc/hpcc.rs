//! HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM'19, §3.2-3.3,
//! Algorithm 1): every switch egress port on the path appends an INT record (queue length,
//! bytes transmitted, timestamp, link rate; [`super::IntHop`]) to each data packet, the
//! receiver echoes them in the ACK, and the sender computes per ACK
//!
//! * for each link `i`: `txRate = Δtx_bytes / Δts` against the records of the previous ACK and
//!   `u_i = min(qlen, qlen_prev) / (B_i·T) + txRate / B_i`; the most utilised link gives `u`
//!   and its `τ = Δts`;
//! * the EWMA `U ← (1 − τ/T)·U + (τ/T)·u` with `τ ≤ T` (T = base RTT);
//! * the window: if `U ≥ η` or `incStage ≥ maxStage`, `W = W_c / (U/η) + W_AI` (multiplicative
//!   decrease toward η; also the periodic multiplicative step), else `W = W_c + W_AI`; `W_c`
//!   and `incStage` change only once per RTT (when the ACK passes the `snd_nxt` of the last
//!   reference update), other ACKs only set `W` (fast reaction, §3.3);
//! * the pacing rate `R = W / T`.
//!
//! η = 0.95 and maxStage = 5 (§5.1); `W_AI` from HPCC's `simulation/run.py` (`--cc hp`:
//! `RATE_AI` = 10·bw/25 Mbit/s for a bw Gbit/s NIC, i.e. line/2500, times T). The window
//! starts at, and never exceeds, `W_init = B·T` (the line-rate BDP), and never falls below
//! the window of 1 % of the line (`MIN_RATE`, as DCQCN's floor). `U` starts at 1, as in
//! HPCC's ns-3 (`rdma-queue-pair.cc`): see [`Hpcc::new`].

use super::IntHop;

/// Sender parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub line_bps: f64,
    /// Base RTT `T`, ps.
    pub t_ps: u64,
    /// Target utilisation η.
    pub eta: f64,
    /// Additive stages before a multiplicative step.
    pub max_stage: u32,
    /// Additive increase `W_AI`, bytes.
    pub w_ai: f64,
    /// Floor of the window, bytes.
    pub w_min: f64,
}

impl Params {
    pub fn for_rate(line_bps: u64, base_rtt_ps: u64) -> Self {
        let line = line_bps as f64;
        let t = base_rtt_ps.max(1);
        let bdp = line * t as f64 / 8e12;
        Params {
            line_bps: line,
            t_ps: t,
            eta: 0.95,
            max_stage: 5,
            w_ai: line / 2500.0 * t as f64 / 8e12,
            w_min: bdp / 100.0,
        }
    }

    /// `W_init = B·T`, bytes.
    pub fn w_init(&self) -> f64 {
        self.line_bps * self.t_ps as f64 / 8e12
    }
}

/// One flow's HPCC sender.
#[derive(Debug, Clone)]
pub struct Hpcc {
    pub p: Params,
    pub w: f64,
    pub wc: f64,
    /// Normalised in-flight estimate `U`.
    pub u: f64,
    pub inc_stage: u32,
    last_update_seq: u64,
    /// The INT records of the previous ACK (empty before the first).
    hops: Vec<IntHop>,
}

impl Hpcc {
    pub fn new(p: Params, _now: u64) -> Self {
        let w = p.w_init();
        Hpcc {
            p,
            w,
            wc: w,
            // A new flow assumes a fully used path (HPCC's ns-3 `RdmaQueuePair`: `hp.u = 1`),
            // so it starts at line rate and cuts toward η with the first feedback. Starting
            // at U = 0, a flow joining a busy link read it as idle for the first ~T of its EWMA,
            // kept W_init and took more than its share; HPCC's additive term (W_AI = 21 B at
            // 100 Gbit/s, T = 4.3 µs) equalises windows so slowly that the split stayed
            // 51.8/43.1 Gbit/s through 30 ms (tests/cc.rs two flows); with U = 1 it is
            // 46.9/47.9 at 8-12 ms and 47.2/47.6 at 20-30 ms.
            u: 1.0,
            inc_stage: 0,
            last_update_seq: 0,
            hops: Vec::new(),
        }
    }

    pub fn window_bytes(&self) -> u64 {
        self.w.max(1.0) as u64
    }

    /// `R = W / T`, bit/s.
    pub fn rate_bps(&self) -> u64 {
        (self.w * 8e12 / self.p.t_ps as f64).max(1.0) as u64
    }

    pub fn on_ack(&mut self, ev: &super::AckEvent<'_>) {
        if ev.int.is_empty() {
            return;
        }
        if self.hops.len() != ev.int.len() {
            // First feedback (or the path changed): a reference, no update.
            self.hops = ev.int.to_vec();
            self.last_update_seq = ev.snd_nxt_bytes;
            return;
        }
        let update_wc = ev.ack_seq_bytes > self.last_update_seq;
        if self.measure_inflight(ev.int) {
            self.compute_wind(update_wc);
        }
        if update_wc {
            self.last_update_seq = ev.snd_nxt_bytes;
        }
    }

    /// Algorithm 1 `MeasureInflight`: folds the most utilised link into `U`; false if no
    /// record advanced in time (nothing to measure).
    fn measure_inflight(&mut self, int: &[IntHop]) -> bool {
        let t = self.p.t_ps as f64;
        let mut best: Option<(f64, f64)> = None;
        for (new, old) in int.iter().zip(&self.hops) {
            let dt = new.ts_ps.saturating_sub(old.ts_ps);
            if dt == 0 || new.rate_bps == 0 {
                continue;
            }
            let b = new.rate_bps as f64;
            let tx_rate = new.tx_bytes.saturating_sub(old.tx_bytes) as f64 * 8e12 / dt as f64;
            let q = new.qlen_bytes.min(old.qlen_bytes) as f64;
            let u = q / (b * t / 8e12) + tx_rate / b;
            if best.is_none_or(|(bu, _)| u > bu) {
                best = Some((u, dt as f64));
            }
        }
        self.hops = int.to_vec();
        let Some((u, tau)) = best else {
            return false;
        };
        let tau = tau.min(t);
        self.u = (1.0 - tau / t) * self.u + tau / t * u;
        true
    }

    /// Algorithm 1 `ComputeWind`.
    fn compute_wind(&mut self, update_wc: bool) {
        let p = self.p;
        let w = if self.u >= p.eta || self.inc_stage >= p.max_stage {
            if update_wc {
                self.inc_stage = 0;
            }
            self.wc / (self.u / p.eta) + p.w_ai
        } else {
            if update_wc {
                self.inc_stage += 1;
            }
            self.wc + p.w_ai
        };
        self.w = w.clamp(p.w_min, p.w_init());
        if update_wc {
            self.wc = self.w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::AckEvent;
    use super::*;

    const US: u64 = 1_000_000;

    fn ack(seq: u64, nxt: u64, int: &[IntHop]) -> AckEvent<'_> {
        AckEvent {
            now: 0,
            acked_bytes: 1000,
            ack_seq_bytes: seq,
            snd_nxt_bytes: nxt,
            ece: false,
            cnp: false,
            int,
        }
    }

    fn hop(q: u64, tx: u64, ts: u64) -> IntHop {
        IntHop {
            qlen_bytes: q,
            tx_bytes: tx,
            ts_ps: ts,
            rate_bps: 100_000_000_000,
        }
    }

    #[test]
    fn window_from_an_int_record() {
        // 100 Gbit/s, T = 10 µs: W_init = 125 000 B, W_AI = 40 Mbit/s · 10 µs = 50 B.
        let p = Params::for_rate(100_000_000_000, 10 * US);
        assert!((p.w_init() - 125_000.0).abs() < 1e-6);
        assert!((p.w_ai - 50.0).abs() < 1e-9);
        let mut h = Hpcc::new(p, 0);
        assert_eq!(h.rate_bps(), 100_000_000_000);
        // The first ACK is the reference.
        h.on_ack(&ack(1000, 20_000, &[hop(50_000, 0, 0)]));
        assert!((h.w - 125_000.0).abs() < 1e-6);
        // One T later the link sent 125 000 B (line rate: txRate/B = 1) and holds 25 000 B
        // (min with the previous 50 000): u = 25 000/125 000 + 1 = 1.2; τ = T, so U = 1.2.
        // U ≥ η: W = W_c/(U/η) + W_AI = 125 000·0.95/1.2 + 50; the ACK passes the reference
        // (20 000), so W_c follows.
        h.on_ack(&ack(21_000, 150_000, &[hop(25_000, 125_000, 10 * US)]));
        let w = 125_000.0 * 0.95 / 1.2 + 50.0;
        assert!((h.u - 1.2).abs() < 1e-12);
        assert!((h.w - w).abs() < 1e-6, "{}", h.w);
        assert!((h.wc - w).abs() < 1e-6);
        assert_eq!(h.inc_stage, 0);
        assert_eq!(h.rate_bps(), (w * 8e12 / 10e6) as u64);
        // Fast reaction within the same RTT: 2.5 µs later an idle link (U decays by τ/T =
        // 1/4 toward 0): U = 0.9 < η, W = W_c + W_AI, W_c unchanged.
        h.on_ack(&ack(22_000, 151_000, &[hop(0, 125_000, 12_500_000)]));
        assert!((h.u - 0.9).abs() < 1e-12);
        assert!((h.w - (w + 50.0)).abs() < 1e-6);
        assert!((h.wc - w).abs() < 1e-6);
        assert_eq!(h.inc_stage, 0);
    }

    #[test]
    fn additive_stages_then_multiplicative_step() {
        let p = Params::for_rate(100_000_000_000, 10 * US);
        let mut h = Hpcc::new(p, 0);
        h.wc = 50_000.0;
        h.w = 50_000.0;
        // Link at half rate, empty: u = 0.5 every RTT.
        h.on_ack(&ack(0, 0, &[hop(0, 0, 0)]));
        let mut seq = 1;
        let mut tx = 0;
        for k in 1..=5u64 {
            tx += 62_500;
            h.on_ack(&ack(seq, seq + 1, &[hop(0, tx, k * 10 * US)]));
            seq += 2;
            assert_eq!(h.inc_stage, k as u32);
            assert!((h.wc - (50_000.0 + 50.0 * k as f64)).abs() < 1e-6);
        }
        // maxStage reached: W = W_c/(U/η) + W_AI with U = 0.5.
        let wc = h.wc;
        tx += 62_500;
        h.on_ack(&ack(seq, seq + 1, &[hop(0, tx, 60 * US)]));
        assert_eq!(h.inc_stage, 0);
        assert!((h.w - (wc / (0.5 / 0.95) + 50.0)).abs() < 1e-6);
    }
}

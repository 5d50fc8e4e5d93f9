//! DCTCP (Alizadeh et al., "Data Center TCP", SIGCOMM'10, §3.1-3.2; the sender as RFC 8257
//! §3.3-3.4 spells it): switches mark CE when the instantaneous queue exceeds `K` (`mmu::ecn`
//! with `K_min = K_max = K`, `P_max = 1`); the receiver echoes each packet's mark (it ACKs
//! every packet, so no delayed-ACK state machine is needed); the sender keeps
//!
//! * α, the fraction of marked bytes, updated once per window of data (an observation window
//!   ends when the ACK passes what had been sent when it began): `α ← (1−g)α + g·F` with
//!   `g` = 1/16 (§3.1) and `F` = marked / acknowledged bytes of the window; α starts at 1
//!   (RFC 8257 §3.3; Linux `dctcp_alpha_on_init`);
//! * the congestion window: on an ECE, at most once per window, `cwnd ← cwnd·(1 − α/2)`
//!   (§3.1, Eq. 2); on unmarked ACKs, congestion avoidance, +1 MSS per window of ACKs.
//!
//! The window starts at the configured per-flow window (1 BDP: datacenter senders start at
//! line rate, as HPCC's ns-3 does for its window-based schemes) and never exceeds it nor
//! falls below one MSS.

/// α gain (DCTCP §3.1: g = 1/16).
pub const G: f64 = 1.0 / 16.0;

/// One flow's DCTCP sender.
#[derive(Debug, Clone)]
pub struct Dctcp {
    pub cwnd: f64,
    pub alpha: f64,
    mss: f64,
    max_cwnd: f64,
    /// End of the current observation window (bytes) and its counts.
    window_end: u64,
    acked: u64,
    marked: u64,
    /// No further cut until the ACK passes this (bytes).
    cwr_end: u64,
    /// Window cuts.
    pub cuts: u64,
}

impl Dctcp {
    pub fn new(init_window_bytes: u64, mss: u32) -> Self {
        let mss = f64::from(mss.max(1));
        let w = (init_window_bytes as f64).max(mss);
        Dctcp {
            cwnd: w,
            alpha: 1.0,
            mss,
            max_cwnd: w,
            window_end: w as u64,
            acked: 0,
            marked: 0,
            cwr_end: 0,
            cuts: 0,
        }
    }

    pub fn cwnd_bytes(&self) -> u64 {
        self.cwnd as u64
    }

    pub fn on_ack(&mut self, ev: &super::AckEvent<'_>) {
        self.acked += ev.acked_bytes;
        if ev.ece {
            self.marked += ev.acked_bytes;
        }
        if ev.ack_seq_bytes >= self.window_end {
            if self.acked > 0 {
                let f = self.marked as f64 / self.acked as f64;
                self.alpha = (1.0 - G) * self.alpha + G * f;
            }
            self.acked = 0;
            self.marked = 0;
            self.window_end = ev.snd_nxt_bytes.max(ev.ack_seq_bytes + 1);
        }
        if ev.ece {
            if ev.ack_seq_bytes >= self.cwr_end {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(self.mss);
                self.cwr_end = ev.snd_nxt_bytes.max(ev.ack_seq_bytes + 1);
                self.cuts += 1;
            }
        } else if ev.acked_bytes > 0 {
            let inc = self.mss * ev.acked_bytes as f64 / self.cwnd;
            self.cwnd = (self.cwnd + inc).min(self.max_cwnd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::AckEvent;
    use super::*;

    fn ack(seq: u64, nxt: u64, ece: bool) -> AckEvent<'static> {
        AckEvent {
            now: 0,
            acked_bytes: 1000,
            ack_seq_bytes: seq,
            snd_nxt_bytes: nxt,
            ece,
            cnp: false,
            int: &[],
        }
    }

    #[test]
    fn alpha_after_a_marked_window_and_one_cut_per_window() {
        // 10-packet window of 1000 B; the first 4 ACKs echo CE. The sender keeps a window in
        // flight: each ACK finds snd_nxt 10 packets ahead.
        let mut d = Dctcp::new(10_000, 1000);
        for k in 1..=10u64 {
            d.on_ack(&ack(k * 1000, k * 1000 + 10_000, k <= 4));
            if k == 1 {
                // α is still 1: the first ECE halves the window, once.
                assert_eq!(d.cwnd_bytes(), 5000);
            }
        }
        assert_eq!(d.cuts, 1, "one cut per window");
        // F = 4000/10000: α = 15/16·1 + 1/16·0.4 = 0.9625.
        assert!((d.alpha - 0.9625).abs() < 1e-12, "{}", d.alpha);
        // Six unmarked ACKs after the cut: +1000·1000/cwnd each, from 5000.
        let mut c = 5000.0f64;
        for _ in 0..6 {
            c += 1e6 / c;
        }
        assert!((d.cwnd - c).abs() < 1e-9);
        assert!(c > 6000.0 && c < 6200.0);
        // A window with no mark: α decays by 15/16; an ECE in the next window cuts by α/2.
        for k in 11..=20u64 {
            d.on_ack(&ack(k * 1000, k * 1000 + 10_000, false));
        }
        assert!((d.alpha - 0.9625 * 15.0 / 16.0).abs() < 1e-12);
        let before = d.cwnd;
        d.on_ack(&ack(21_000, 25_000, true));
        assert!((d.cwnd - before * (1.0 - d.alpha / 2.0)).abs() < 1e-9);
        assert_eq!(d.cuts, 2);
    }

    #[test]
    fn window_bounded_by_initial_and_mss() {
        let mut d = Dctcp::new(4000, 1000);
        for k in 1..=100 {
            d.on_ack(&ack(k * 1000, k * 1000 + 4000, false));
        }
        assert_eq!(d.cwnd_bytes(), 4000);
        for k in 101..=200 {
            d.alpha = 1.0;
            d.on_ack(&ack(k * 100_000, k * 100_000 + 1, true));
        }
        assert_eq!(d.cwnd_bytes(), 1000);
    }
}

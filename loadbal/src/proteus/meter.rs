//! Path measurement at the destination edge (§III-A.1, §IV-C): per path, the one-way delay
//! `t_pd` (from the send timestamp the source edge put in the shim; one clock per testbed and
//! in the fabric) and the link utilisation `u_link` (bytes received over the period against the
//! line rate), over a period of about an RTT, then fed back to the source edge on reverse
//! traffic or a feedback frame.
//!
//! `t_pd` is the mean over the period's packets. A period in which a path delivered nothing
//! reports `u_link = 0` and keeps the last `t_pd`: a path paused for a whole period looks like
//! an idle one by utilisation, which is why Table II needs the delay as well.

use super::path::PathId;

/// One path's measurement for the source edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback {
    pub path: PathId,
    pub t_pd_ps: u64,
    pub u_permille: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Acc {
    seen: bool,
    bytes: u64,
    delay_sum: u64,
    n: u64,
    t_pd: u64,
}

/// The destination edge's meters, one per path id that arrived here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMeter {
    /// Measurement period, ps (about an RTT).
    pub period_ps: u64,
    /// Rate of the path's bottleneck link into this edge, bit/s.
    pub rate_bps: u64,
    start: u64,
    acc: Vec<Acc>,
}

impl PathMeter {
    pub fn new(period_ps: u64, rate_bps: u64, now: u64) -> Self {
        PathMeter {
            period_ps: period_ps.max(1),
            rate_bps,
            start: now,
            acc: Vec::new(),
        }
    }

    /// A packet of `bytes` on `path`, sent at `sent_ps`, arrived at `now`.
    #[inline]
    pub fn on_packet(&mut self, path: PathId, sent_ps: u64, now: u64, bytes: u64) {
        let i = usize::from(path.0);
        if i >= self.acc.len() {
            self.acc.resize(i + 1, Acc::default());
        }
        let a = &mut self.acc[i];
        a.seen = true;
        a.bytes += bytes;
        a.delay_sum += now.saturating_sub(sent_ps);
        a.n += 1;
    }

    /// Starts a new period at `now`, forgetting what the current one holds (after an idle
    /// stretch, so the first period back is not averaged over the idle time).
    pub fn restart(&mut self, now: u64) {
        for a in &mut self.acc {
            a.bytes = 0;
            a.delay_sum = 0;
            a.n = 0;
        }
        self.start = now;
    }

    /// When the current period ends, ps.
    pub fn period_end(&self) -> u64 {
        self.start + self.period_ps
    }

    /// At or after the period's end: one [`Feedback`] per path seen so far into `out`, and a
    /// new period starts at `now`. Earlier: nothing.
    pub fn close(&mut self, now: u64, out: &mut Vec<Feedback>) {
        if now < self.period_end() {
            return;
        }
        let span = now - self.start;
        for (i, a) in self.acc.iter_mut().enumerate() {
            if !a.seen {
                continue;
            }
            if let Some(mean) = a.delay_sum.checked_div(a.n) {
                a.t_pd = mean;
            }
            let cap = u128::from(self.rate_bps) * u128::from(span);
            let u = (u128::from(a.bytes) * 8 * 1_000_000_000_000 * 1000)
                .checked_div(cap)
                .map_or(0, |u| u.min(1000) as u32);
            out.push(Feedback {
                path: PathId(i as u16),
                t_pd_ps: a.t_pd,
                u_permille: u,
            });
            a.bytes = 0;
            a.delay_sum = 0;
            a.n = 0;
        }
        self.start = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;

    #[test]
    fn delay_mean_and_utilisation_per_period() {
        // 10 us period at 40 Gbit/s: 50 KB fill it.
        let mut m = PathMeter::new(10 * US, 40_000_000_000, 0);
        let mut out = Vec::new();
        // Path 3: 25 KB (half), delays 4 and 6 us; path 1: 50 KB (full), 20 us.
        m.on_packet(PathId(3), 0, 4 * US, 12_500);
        m.on_packet(PathId(3), US, 7 * US, 12_500);
        m.on_packet(PathId(1), 0, 20 * US, 50_000);
        m.close(9 * US, &mut out);
        assert!(out.is_empty(), "period not over");
        m.close(10 * US, &mut out);
        out.sort_by_key(|f| f.path);
        assert_eq!(
            out,
            vec![
                Feedback {
                    path: PathId(1),
                    t_pd_ps: 20 * US,
                    u_permille: 1000
                },
                Feedback {
                    path: PathId(3),
                    t_pd_ps: 5 * US,
                    u_permille: 500
                },
            ]
        );
        // An empty period: utilisation 0, last delay kept (a fully paused path).
        out.clear();
        m.close(20 * US, &mut out);
        assert_eq!(out[1].u_permille, 0);
        assert_eq!(out[1].t_pd_ps, 5 * US);
        // After an idle stretch a restart measures the next period from its own start.
        m.restart(1000 * US);
        m.on_packet(PathId(1), 1000 * US, 1004 * US, 25_000);
        out.clear();
        m.close(1010 * US, &mut out);
        assert_eq!((out[0].t_pd_ps, out[0].u_permille), (4 * US, 500));
    }
}

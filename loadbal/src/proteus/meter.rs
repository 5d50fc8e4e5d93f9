//! Path measurement at the destination edge (§III-A.1, §IV-C): per path, the one-way delay
//! `t_pd` (from the send timestamp the source edge put in the shim; one clock per testbed and
//! in the fabric) and the link utilisation `u_link` ("the ratio of throughput to link speed",
//! §IV-C), over a period of about an RTT, then fed back to the source edge on reverse
//! traffic or a feedback frame.
//!
//! `t_pd` is the mean over the period's packets of the path. `u_link` is the utilisation of the
//! link the path arrives on at this edge: every byte that came in over that link in the period
//! (all paths that share it, from every source edge) against its line rate. Table II needs the
//! link's load, not the path's own share of it: the share of one source edge's path is a
//! fraction of the link even when the link is full, which would read every loaded path as
//! "PFC pausing" (`u_link` < 1) and never as congested, and would make SelectPath's
//! undetermined rule (max `u_link`) prefer the path this source already loads most.
//!
//! With each measurement goes the path's arrival frontier: the send time of the latest packet
//! that arrived on it. A path is one FIFO queue per hop (one lossless class), so every packet
//! sent on it before then has arrived too; the source edge's order rule uses it
//! ([`super::source`]).
//!
//! A period in which a path delivered nothing keeps its last `t_pd`; its `u_link` is its link's
//! (0 if nothing came over the link: a path paused for a whole period looks idle by
//! utilisation, which is why Table II needs the delay as well).

use super::path::PathId;

/// One path's measurement for the source edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback {
    pub path: PathId,
    pub t_pd_ps: u64,
    pub u_permille: u32,
    /// Send time of the latest packet of the path that arrived here, ps (the arrival
    /// frontier: a path is one FIFO queue per hop, so every packet sent on it before this one
    /// has arrived too).
    pub arrived_sent_ps: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Acc {
    seen: bool,
    /// The link (ingress port here) the path's last packet came in on.
    link: u16,
    delay_sum: u64,
    n: u64,
    t_pd: u64,
    /// Send time of the latest arrival, ps.
    last_sent: u64,
}

/// The destination edge's meters, one per path id that arrived here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMeter {
    /// Measurement period, ps (about an RTT).
    pub period_ps: u64,
    /// Line rate of the links into this edge from the fabric, bit/s.
    pub rate_bps: u64,
    start: u64,
    acc: Vec<Acc>,
    /// Bytes in the period per link (ingress port).
    link_bytes: Vec<u64>,
}

impl PathMeter {
    pub fn new(period_ps: u64, rate_bps: u64, now: u64) -> Self {
        PathMeter {
            period_ps: period_ps.max(1),
            rate_bps,
            start: now,
            acc: Vec::new(),
            link_bytes: Vec::new(),
        }
    }

    /// A packet of `bytes` on `path`, sent at `sent_ps`, came in over `link` at `now`.
    #[inline]
    pub fn on_packet(&mut self, path: PathId, link: u16, sent_ps: u64, now: u64, bytes: u64) {
        let i = usize::from(path.0);
        if i >= self.acc.len() {
            self.acc.resize(i + 1, Acc::default());
        }
        let a = &mut self.acc[i];
        a.seen = true;
        a.link = link;
        a.delay_sum += now.saturating_sub(sent_ps);
        a.n += 1;
        a.last_sent = a.last_sent.max(sent_ps);
        self.on_link_bytes(link, bytes);
    }

    /// Counts `bytes` that came in over `link` in this period.
    #[inline]
    fn on_link_bytes(&mut self, link: u16, bytes: u64) {
        let l = usize::from(link);
        if l >= self.link_bytes.len() {
            self.link_bytes.resize(l + 1, 0);
        }
        self.link_bytes[l] += bytes;
    }

    /// Starts a new period at `now`, forgetting what the current one holds (after an idle
    /// stretch, so the first period back is not averaged over the idle time).
    pub fn restart(&mut self, now: u64) {
        for a in &mut self.acc {
            a.delay_sum = 0;
            a.n = 0;
        }
        self.link_bytes.fill(0);
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
        let cap = u128::from(self.rate_bps) * u128::from(span);
        for (i, a) in self.acc.iter_mut().enumerate() {
            if !a.seen {
                continue;
            }
            if let Some(mean) = a.delay_sum.checked_div(a.n) {
                a.t_pd = mean;
            }
            let bytes = self
                .link_bytes
                .get(usize::from(a.link))
                .copied()
                .unwrap_or(0);
            let u = (u128::from(bytes) * 8 * 1_000_000_000_000 * 1000)
                .checked_div(cap)
                .map_or(0, |u| u.min(1000) as u32);
            out.push(Feedback {
                path: PathId(i as u16),
                t_pd_ps: a.t_pd,
                u_permille: u,
                arrived_sent_ps: a.last_sent,
            });
            a.delay_sum = 0;
            a.n = 0;
        }
        self.link_bytes.fill(0);
        self.start = now;
    }
}

/// The source edge's own first hops: the bytes it sent on each port over about the last
/// period (the current period and the one before it), for SelectPath's tie-break
/// ([`super::PathEntry::rank`]). Fresh where the fed-back `u_link` is a trip old or, before
/// the first feedback, absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkLoad {
    period_ps: u64,
    start: u64,
    cur: Vec<u64>,
    prev: Vec<u64>,
}

impl LinkLoad {
    pub fn new(period_ps: u64) -> Self {
        LinkLoad {
            period_ps: period_ps.max(1),
            start: 0,
            cur: Vec::new(),
            prev: Vec::new(),
        }
    }

    /// `bytes` left on `port` at `now` (times never decrease).
    #[inline]
    pub fn on_sent(&mut self, port: u16, bytes: u64, now: u64) {
        if now >= self.start + self.period_ps {
            if now >= self.start + 2 * self.period_ps {
                self.prev.fill(0);
            } else {
                std::mem::swap(&mut self.prev, &mut self.cur);
            }
            self.cur.fill(0);
            self.start = now;
        }
        let p = usize::from(port);
        if p >= self.cur.len() {
            self.cur.resize(p + 1, 0);
            self.prev.resize(p + 1, 0);
        }
        self.cur[p] += bytes;
    }

    /// Bytes sent on `port` in the current and the previous period, as seen at `now`.
    #[inline]
    pub fn recent(&self, port: u16, now: u64) -> u64 {
        let p = usize::from(port);
        let (c, v) = (
            self.cur.get(p).copied().unwrap_or(0),
            self.prev.get(p).copied().unwrap_or(0),
        );
        if now >= self.start + 2 * self.period_ps {
            0
        } else if now >= self.start + self.period_ps {
            c
        } else {
            c + v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Period 10 us: what a port sent counts for the period it was sent in and the next.
    #[test]
    fn link_load_covers_the_last_period() {
        let mut l = LinkLoad::new(10 * US);
        assert_eq!(l.recent(3, 0), 0);
        l.on_sent(3, 1500, US);
        l.on_sent(3, 1500, 2 * US);
        l.on_sent(1, 100, 2 * US);
        assert_eq!((l.recent(3, 5 * US), l.recent(1, 5 * US)), (3000, 100));
        assert_eq!(l.recent(7, 5 * US), 0, "a port never used");
        // 12 us: a new period starts; the old one still counts.
        l.on_sent(1, 200, 12 * US);
        assert_eq!((l.recent(3, 13 * US), l.recent(1, 13 * US)), (3000, 300));
        // Read 23 us without a send: only the period from 12 us counts.
        assert_eq!((l.recent(3, 23 * US), l.recent(1, 23 * US)), (0, 200));
        // Read past two periods: nothing.
        assert_eq!(l.recent(1, 32 * US), 0);
        // A send after a long idle stretch forgets both periods.
        l.on_sent(3, 1000, 100 * US);
        assert_eq!((l.recent(3, 101 * US), l.recent(1, 101 * US)), (1000, 0));
    }

    const US: u64 = 1_000_000;

    #[test]
    fn delay_mean_and_utilisation_per_period() {
        // 10 us period at 40 Gbit/s: 50 KB fill a link.
        let mut m = PathMeter::new(10 * US, 40_000_000_000, 0);
        let mut out = Vec::new();
        // Path 3 on link 0: 25 KB (half the link), delays 4 and 6 us; path 1 on link 1: 50 KB
        // (full), 20 us.
        m.on_packet(PathId(3), 0, 0, 4 * US, 12_500);
        m.on_packet(PathId(3), 0, US, 7 * US, 12_500);
        m.on_packet(PathId(1), 1, 0, 20 * US, 50_000);
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
                    u_permille: 1000,
                    arrived_sent_ps: 0,
                },
                Feedback {
                    path: PathId(3),
                    t_pd_ps: 5 * US,
                    u_permille: 500,
                    arrived_sent_ps: US,
                },
            ]
        );
        // An empty period: utilisation 0, last delay kept (a fully paused path).
        out.clear();
        m.close(20 * US, &mut out);
        assert_eq!(out[1].u_permille, 0);
        assert_eq!(out[1].t_pd_ps, 5 * US);
        assert_eq!(
            out[1].arrived_sent_ps, US,
            "the frontier stays where it was"
        );
        // After an idle stretch a restart measures the next period from its own start.
        m.restart(1000 * US);
        m.on_packet(PathId(1), 1, 1000 * US, 1004 * US, 25_000);
        out.clear();
        m.close(1010 * US, &mut out);
        assert_eq!((out[0].t_pd_ps, out[0].u_permille), (4 * US, 500));
    }

    /// `u_link` is the link's utilisation, not the path's share of it (Table II, §IV-C).
    /// Hand-worked: 10 us at 40 Gbit/s, 50 KB fill a link. Link 0 carries path 1 (from one
    /// source edge, 20 KB) and path 2 (from another, 30 KB): the link is full, so both paths
    /// read u = 1 (congested if their delay is high), though neither carried more than 60 %.
    /// Link 1 carries path 5 (10 KB) and 15 KB more (counted straight into the link: no
    /// delay sample): u = 0.5 for path 5. Path 5 then goes quiet while link 1 stays half busy:
    /// it keeps its last delay and reads its link's 0.5.
    #[test]
    fn utilisation_is_the_links_not_the_paths_share() {
        let mut m = PathMeter::new(10 * US, 40_000_000_000, 0);
        let mut out = Vec::new();
        m.on_packet(PathId(1), 0, 0, 3 * US, 20_000);
        m.on_packet(PathId(2), 0, 0, 5 * US, 30_000);
        m.on_packet(PathId(5), 1, 0, 2 * US, 10_000);
        m.on_link_bytes(1, 15_000);
        m.close(10 * US, &mut out);
        out.sort_by_key(|f| f.path);
        let u: Vec<(u16, u64, u32)> = out
            .iter()
            .map(|f| (f.path.0, f.t_pd_ps, f.u_permille))
            .collect();
        assert_eq!(
            u,
            vec![(1, 3 * US, 1000), (2, 5 * US, 1000), (5, 2 * US, 500)]
        );
        out.clear();
        m.on_link_bytes(1, 25_000);
        m.close(20 * US, &mut out);
        out.sort_by_key(|f| f.path);
        assert_eq!(
            (out[2].path, out[2].t_pd_ps, out[2].u_permille),
            (PathId(5), 2 * US, 500)
        );
        // Links 0 carried nothing this period: paths 1 and 2 read idle.
        assert_eq!((out[0].u_permille, out[1].u_permille), (0, 0));
    }
}

//! Algorithm 2 at every switch (§III-B.2): rerouting on the sub-RTT signal, the cumulative
//! sojourn time (CST).
//!
//! On arrival a packet predicts the minimum queuing delay `t_qd` at its egress (the bytes ahead
//! of it drained at line rate: the least it waits once the queue runs again; the switch adds
//! how long the egress has been PFC-paused, `dataplane::scheme::proteus`, so a pause older than
//! what the packet can still afford moves it at once). If the egress is
//! PFC-paused and its tolerable delay `t_td ≤ t_qd` it can no longer afford this path: it takes
//! the next alternative in its shim that this switch can reach and that is not itself kicked
//! out, and the path it left is marked inactive here until PFC resumes on that port (line 10).
//! Otherwise it waits, and on departure its sojourn time here is subtracted from `t_td`
//! (line 7), so `t_td` is what remains of `D_ps − D_po` after the CST so far. A packet
//! therefore never commits to a wait longer than what is left of `D_ps − D_po`: better late
//! than never (§III-C), whose competitive ratio is `2 − D_po / D_ps`.
//!
//! Choices the paper leaves open: after a reroute the shim's alternatives shift up by one and
//! `t_td` keeps its remainder (the shim has no delay difference for the next pair of paths,
//! so a second paused hop reroutes again only if its queue is at least as long); with no
//! usable alternative the packet stays ("rarely occurs", §III-B.2).

use super::path::PathId;
use super::source::Shim;

/// The least time `queue_bytes` ahead of a packet take to leave at `rate_bps`, ps.
#[inline]
pub fn min_queuing_delay(queue_bytes: u64, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    (u128::from(queue_bytes) * 8 * 1_000_000_000_000 / u128::from(rate_bps)) as u64
}

/// What Algorithm 2 decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopAction {
    /// Forward on the shim's path (not paused, or `t_td > t_qd`, or no usable alternative).
    Forward,
    /// The shim now names `to`; `from` was kicked out at this switch.
    Reroute { from: PathId, to: PathId },
}

/// Paths kicked out at one switch, each until PFC resumes on the port it left by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hop {
    inactive: Vec<(PathId, u16)>,
}

impl Hop {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `p` is kicked out here.
    #[inline]
    pub fn is_inactive(&self, p: PathId) -> bool {
        self.inactive.iter().any(|&(q, _)| q == p)
    }

    /// Paths kicked out here now.
    pub fn inactive(&self) -> impl Iterator<Item = PathId> + '_ {
        self.inactive.iter().map(|&(p, _)| p)
    }

    /// PFC resumed on `port`: the paths kicked out there are active again.
    pub fn resume(&mut self, port: u16) {
        self.inactive.retain(|&(_, q)| q != port);
    }

    /// Algorithm 2, lines 3–10, for a packet arriving with `shim` whose egress is `port`:
    /// `paused` is its queue's PFC state there, `t_qd_ps` the predicted minimum queuing delay
    /// (the caller's: queue drain, plus the pause's age at a paused egress),
    /// `reachable(p)` whether this switch has a route for path `p`.
    #[inline]
    pub fn on_arrival(
        &mut self,
        shim: &mut Shim,
        port: u16,
        paused: bool,
        t_qd_ps: u64,
        reachable: impl Fn(PathId) -> bool,
    ) -> HopAction {
        if !paused || shim.t_td_ps > t_qd_ps {
            return HopAction::Forward;
        }
        let Some(k) = shim
            .alts
            .iter()
            .position(|&a| !a.is_none() && !self.is_inactive(a) && reachable(a))
        else {
            return HopAction::Forward;
        };
        let from = shim.path;
        let to = shim.alts[k];
        shim.path = to;
        let mut alts = [PathId::NONE; 3];
        for (j, &a) in shim.alts[k + 1..].iter().enumerate() {
            alts[j] = a;
        }
        shim.alts = alts;
        if !self.is_inactive(from) {
            self.inactive.push((from, port));
        }
        HopAction::Reroute { from, to }
    }

    /// Algorithm 2, line 7: the sojourn time here comes off `t_td`.
    #[inline]
    pub fn on_departure(shim: &mut Shim, t_enqueue: u64, t_dequeue: u64) {
        shim.t_td_ps = shim
            .t_td_ps
            .saturating_sub(t_dequeue.saturating_sub(t_enqueue));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;
    const GBIT: u64 = 1_000_000_000;

    fn shim(t_td_us: u64) -> Shim {
        Shim {
            path: PathId(1),
            alts: [PathId(2), PathId(3), PathId(4)],
            t_td_ps: t_td_us * US,
        }
    }

    #[test]
    fn min_queuing_delay_is_line_rate_drain() {
        // 50 KB at 40 Gbit/s: 10 us.
        assert_eq!(min_queuing_delay(50_000, 40 * GBIT), 10 * US);
        assert_eq!(min_queuing_delay(0, 40 * GBIT), 0);
        assert_eq!(min_queuing_delay(1500, 0), 0);
    }

    #[test]
    fn not_paused_never_reroutes() {
        let mut h = Hop::new();
        let mut s = shim(0);
        assert_eq!(
            h.on_arrival(&mut s, 5, false, 100 * US, |_| true),
            HopAction::Forward
        );
        assert_eq!(s, shim(0));
    }

    #[test]
    fn paused_with_budget_waits_else_reroutes_and_kicks_out() {
        let mut h = Hop::new();
        // t_td 4 us > t_qd 3 us: tolerate the pause (line 5).
        let mut s = shim(4);
        assert_eq!(
            h.on_arrival(&mut s, 5, true, 3 * US, |_| true),
            HopAction::Forward
        );
        // t_td 4 us ≤ t_qd 4 us: reroute to the first alternative (line 9).
        let r = h.on_arrival(&mut s, 5, true, 4 * US, |_| true);
        assert_eq!(
            r,
            HopAction::Reroute {
                from: PathId(1),
                to: PathId(2)
            }
        );
        assert_eq!(s.path, PathId(2));
        assert_eq!(s.alts, [PathId(3), PathId(4), PathId::NONE]);
        // Path 1 is out here (line 10) until PFC resumes on port 5.
        assert!(h.is_inactive(PathId(1)));
        // A later packet rerouting elsewhere skips kicked-out and unreachable alternatives.
        let mut s2 = Shim {
            path: PathId(9),
            alts: [PathId(1), PathId(3), PathId(4)],
            t_td_ps: 0,
        };
        let r = h.on_arrival(&mut s2, 6, true, 1, |p| p != PathId(3));
        assert_eq!(
            r,
            HopAction::Reroute {
                from: PathId(9),
                to: PathId(4)
            }
        );
        assert_eq!(s2.alts, [PathId::NONE; 3]);
        h.resume(5);
        assert!(!h.is_inactive(PathId(1)));
        assert!(h.is_inactive(PathId(9)));
        assert_eq!(h.inactive().collect::<Vec<_>>(), vec![PathId(9)]);
    }

    #[test]
    fn no_usable_alternative_stays() {
        let mut h = Hop::new();
        let mut s = shim(0);
        s.alts = [PathId::NONE; 3];
        assert_eq!(
            h.on_arrival(&mut s, 0, true, US, |_| true),
            HopAction::Forward
        );
        assert_eq!(s.path, PathId(1));
        assert!(!h.is_inactive(PathId(1)));
    }

    #[test]
    fn cst_bookkeeping_subtracts_each_sojourn() {
        // t_td 10 us; sojourns 2.5 us, 4 us, then 7 us (more than is left: clamps at 0).
        let mut s = shim(10);
        Hop::on_departure(&mut s, 100 * US, 102 * US + US / 2);
        assert_eq!(s.t_td_ps, 7 * US + US / 2);
        Hop::on_departure(&mut s, 200 * US, 204 * US);
        assert_eq!(s.t_td_ps, 3 * US + US / 2);
        Hop::on_departure(&mut s, 300 * US, 307 * US);
        assert_eq!(s.t_td_ps, 0);
    }

    /// §III-C: D_po = 10 us, D_ps = 14 us, so t_td = 4 us. Along a path of paused hops a
    /// packet keeps waiting while the predicted wait fits what is left of the 4 us and
    /// reroutes at the first hop where it does not: it never commits to more than
    /// D_ps − D_po of predicted waiting.
    #[test]
    fn better_late_than_never() {
        let d_po = 10 * US;
        let d_ps = 14 * US;
        let mut h = Hop::new();
        let mut s = shim(0);
        s.t_td_ps = d_ps - d_po;
        // Hop 1: paused, 1 us of queue predicted: wait; it actually sits 1.5 us.
        assert_eq!(
            h.on_arrival(&mut s, 1, true, US, |_| true),
            HopAction::Forward
        );
        Hop::on_departure(&mut s, 0, 1500 * 1000);
        // Hop 2: paused, 2 us predicted < 2.5 us left: wait; sits 2 us.
        assert_eq!(
            h.on_arrival(&mut s, 2, true, 2 * US, |_| true),
            HopAction::Forward
        );
        Hop::on_departure(&mut s, 0, 2 * US);
        assert_eq!(s.t_td_ps, US / 2);
        // CST so far 3.5 us of the 4 us budget.
        assert_eq!((d_ps - d_po) - s.t_td_ps, 3 * US + US / 2);
        // Hop 3: paused, 1 us predicted ≥ 0.5 us left: reroute now.
        assert!(matches!(
            h.on_arrival(&mut s, 3, true, US, |_| true),
            HopAction::Reroute { .. }
        ));
    }
}

//! Path choice at dispatch time: after the FIB lookup has produced the equal-cost next hops
//! of a packet, the switch's [`PathPolicy`] picks one, seeing each candidate's pause state and
//! queue bytes (through a view the switch provides, read only by policies that use it) and
//! the time. ECMP looks at none of it, so it stays recomputable by any other switch (Pyrrha's
//! path calculation); congestion-aware policies (DRILL, Proteus) will.

use crate::ecmp::{ecmp_pick, FiveTuple};

/// What a policy may see of one candidate next hop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Candidate {
    /// Egress port.
    pub port: u16,
    /// The packet's queue on that port is paused (PFC or another scheme, via AFC).
    pub paused: bool,
    /// Bytes in the packet's queue on that port (0 if another pipe owns the port).
    pub queue_bytes: u64,
    /// Bytes in all data queues of that port (0 if another pipe owns the port).
    pub port_bytes: u64,
}

/// How a switch chooses among equal-cost next hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPolicy {
    /// Seeded CRC32 of the 5-tuple (`crate::ecmp`).
    Ecmp { seed: u32 },
}

impl PathPolicy {
    /// ECMP with the switch's seed.
    pub fn ecmp(seed: u32) -> Self {
        PathPolicy::Ecmp { seed }
    }

    /// Picks one of `n` candidates for a packet of flow `t` at `now`; `view(i)` describes
    /// candidate `i`. `None` if there is no candidate.
    #[inline]
    pub fn pick(
        &mut self,
        t: &FiveTuple,
        n: usize,
        view: impl Fn(usize) -> Candidate,
        now: u64,
    ) -> Option<usize> {
        let _ = (&view, now);
        match *self {
            PathPolicy::Ecmp { seed } => ecmp_pick(seed, t, n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn ecmp_ignores_the_view_and_matches_ecmp_pick() {
        let t = FiveTuple {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 3)),
            sport: 1000,
            dport: 5201,
            proto: 17,
        };
        let mut p = PathPolicy::ecmp(7);
        let busy = |i: usize| Candidate {
            port: i as u16,
            paused: i == 0,
            queue_bytes: 1 << 20,
            port_bytes: 1 << 20,
        };
        for n in 1..6 {
            assert_eq!(p.pick(&t, n, busy, 0), ecmp_pick(7, &t, n));
        }
        assert_eq!(p.pick(&t, 0, busy, 0), None);
    }
}

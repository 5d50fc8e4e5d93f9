//! Path choice at dispatch time: after the FIB lookup has produced the equal-cost next hops
//! of a packet, the switch's [`PathPolicy`] picks one, seeing each candidate's pause state and
//! queue bytes (through a view the switch provides, read only by policies that use it) and
//! the time. ECMP looks at none of it, so it stays recomputable by any other switch (Pyrrha's
//! path calculation); congestion-aware policies (DRILL, Proteus) will.

use crate::drill::Drill;
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
    /// DRILL(2, 1): per packet the shortest of 2 random + 1 remembered local queues
    /// (`crate::drill`).
    Drill(Drill),
}

impl PathPolicy {
    /// ECMP with the switch's seed.
    pub fn ecmp(seed: u32) -> Self {
        PathPolicy::Ecmp { seed }
    }

    /// DRILL(2, 1) seeded with the switch's seed and the pipe (one engine per pipe).
    pub fn drill(seed: u32, pipe: u16) -> Self {
        PathPolicy::Drill(Drill::recommended(u64::from(seed) << 16 | u64::from(pipe)))
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
        let _ = now;
        match self {
            PathPolicy::Ecmp { seed } => ecmp_pick(*seed, t, n),
            PathPolicy::Drill(d) => d.pick(n, |i| {
                let c = view(i);
                (c.port, c.queue_bytes)
            }),
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

    #[test]
    fn drill_reads_queue_bytes_and_not_the_pause_state() {
        let t = FiveTuple {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 3)),
            sport: 1000,
            dport: 5201,
            proto: 17,
        };
        let mut p = PathPolicy::drill(7, 0);
        // Candidate 0 is paused downstream-wise but has the shorter local queue: DRILL takes
        // it (Proteus §II-B.3: a local queue cannot sense a pause it has not yet felt).
        let view = |i: usize| Candidate {
            port: i as u16,
            paused: i == 0,
            queue_bytes: if i == 0 { 100 } else { 5000 },
            port_bytes: 0,
        };
        for _ in 0..20 {
            assert_eq!(p.pick(&t, 2, view, 0), Some(0));
        }
    }
}

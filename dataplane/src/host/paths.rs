//! The host-to-host paths of a topology, for the host stack's parameters: the base RTT of
//! each pair of hosts (fewest hops, [`super::report::base_rtt_ps`]) and the switches a pair's
//! traffic may cross. `xoff experiment` (virtual and real frames) and `xoff sim`'s
//! congestion-controlled flows derive their [`super::StackConfig`] from the same figures, so a
//! flow behaves the same in both.

use super::report::base_rtt_ps;
use crate::config::{Peer, ResolvedTopology};
use std::collections::VecDeque;

/// A link: rate bit/s, delay ps.
type Link = (u64, u64);

/// Per node of a breadth-first search: the hop count and the link it was first reached over
/// (from which node).
type Bfs = (Vec<Option<u32>>, Vec<Option<(usize, Link)>>);

/// The links of a topology: hosts are nodes `0..hosts`, switches follow. A link runs at its
/// switch ports' rate and delay (the slower and longer of the two between switches).
#[derive(Debug, Clone)]
pub struct HostGraph {
    pub hosts: usize,
    adj: Vec<Vec<(usize, (u64, u64))>>,
    /// Per host: its link to a switch (rate bit/s, delay ps), if linked.
    pub access: Vec<Option<(u64, u64)>>,
}

impl HostGraph {
    pub fn new(r: &ResolvedTopology) -> HostGraph {
        let nh = r.hosts.len();
        let node = |e: Peer| -> Option<(usize, Option<(u64, u64)>)> {
            match e {
                Peer::None => None,
                Peer::Host(h) => Some((h as usize, None)),
                Peer::Port(s, p) => {
                    let port = r.port(s, p);
                    Some((nh + s as usize, Some((port.rate_bps.max(1), port.delay_ps))))
                }
            }
        };
        let mut g = HostGraph {
            hosts: nh,
            adj: vec![Vec::new(); nh + r.switches.len()],
            access: vec![None; nh],
        };
        for &(a, b) in &r.links {
            let (Some((x, lx)), Some((y, ly))) = (node(a), node(b)) else {
                continue;
            };
            let l = match (lx, ly) {
                (Some(p), Some(q)) => (p.0.min(q.0), p.1.max(q.1)),
                (Some(p), None) | (None, Some(p)) => p,
                (None, None) => continue,
            };
            for h in [x, y] {
                if h < nh {
                    g.access[h] = Some(l);
                }
            }
            g.adj[x].push((y, l));
            g.adj[y].push((x, l));
        }
        g
    }

    /// Breadth first from node `src` (hosts do not forward).
    fn bfs(&self, src: usize) -> Bfs {
        let nh = self.hosts;
        let mut dist = vec![None; self.adj.len()];
        let mut via: Vec<Option<(usize, Link)>> = vec![None; self.adj.len()];
        dist[src] = Some(0);
        let mut q = VecDeque::from([src]);
        while let Some(x) = q.pop_front() {
            if x != src && x < nh {
                continue;
            }
            let d = dist[x].unwrap_or(0);
            for &(y, l) in &self.adj[x] {
                if dist[y].is_none() {
                    dist[y] = Some(d + 1);
                    via[y] = Some((x, l));
                    q.push_back(y);
                }
            }
        }
        (dist, via)
    }

    /// Base RTT of the path (fewest hops) between every two hosts, `[src][dst]` (`None`: the
    /// same host, or unreachable).
    pub fn rtts(&self, mss: u32) -> Vec<Vec<Option<u64>>> {
        let nh = self.hosts;
        let mut out = vec![vec![None; nh]; nh];
        for (src, row) in out.iter_mut().enumerate() {
            let (dist, via) = self.bfs(src);
            for (dst, cell) in row.iter_mut().enumerate() {
                if dst == src || dist[dst].is_none() {
                    continue;
                }
                let mut links = Vec::new();
                let mut y = dst;
                while let Some((x, l)) = via[y] {
                    links.push(l);
                    y = x;
                }
                *cell = Some(base_rtt_ps(&links, mss));
            }
        }
        out
    }

    /// The base RTT the stacks' defaults derive from: the longest host-to-host path's, or
    /// with no path between two hosts, two of the slowest and longest access links (with
    /// `fallback_rate` when no host is linked). The second value is every pair's, [`Self::rtts`].
    pub fn base_rtt(&self, mss: u32, fallback_rate: u64) -> (u64, Vec<Vec<Option<u64>>>) {
        let rtts = self.rtts(mss);
        let rtt = match rtts.iter().flatten().flatten().max() {
            Some(&r) => r,
            None => {
                // Two access links (sender's and receiver's), the slowest and longest.
                let l = self
                    .access
                    .iter()
                    .flatten()
                    .copied()
                    .min_by_key(|&(r, d)| (r, u64::MAX - d))
                    .unwrap_or((fallback_rate, 0));
                base_rtt_ps(&[l, l], mss)
            }
        };
        (rtt, rtts)
    }

    /// The switches (indices) on any fewest-hop path from host `src` to host `dst`: those
    /// ECMP may send the pair's packets through.
    pub fn path_switches(&self, src: usize, dst: usize) -> Vec<u32> {
        let (ds, _) = self.bfs(src);
        let (dd, _) = self.bfs(dst);
        let Some(total) = ds[dst] else {
            return Vec::new();
        };
        (self.hosts..self.adj.len())
            .filter(|&n| matches!((ds[n], dd[n]), (Some(a), Some(b)) if a + b == total))
            .map(|n| (n - self.hosts) as u32)
            .collect()
    }
}

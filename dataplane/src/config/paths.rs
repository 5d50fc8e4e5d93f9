//! Proteus's path model (issue 18, §III-A and §IV-C of the Proteus paper): every loop-free
//! route from one edge switch (a switch with hosts) to another gets a path id, found by walking
//! the resolved routes of the topology, so every switch agrees on what an id means.
//!
//! From the model each Proteus switch gets a [`ProteusSpec`]: the egress port each path id takes
//! at this switch (source routing), and at an edge switch its path tables (per destination
//! edge: path id, first egress port, base one-way delay), the destination edge of every host
//! address, and the port toward every other edge (to relay feedback). A path's base one-way
//! delay is what a full-size frame takes from the source edge's ingress to the destination
//! edge's ingress without queueing: per hop the serialisation at the port's rate plus its
//! propagation delay.

use super::resolved::{Peer, ResolvedTopology};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Most paths a topology may have (12-bit ids, 0xFFF meaning none).
pub const MAX_PATHS: usize = 0xFFF;

/// One path: its edges and its hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathDef {
    pub src_edge: u16,
    pub dst_edge: u16,
    /// (switch index, egress port) from the source edge to the last switch before the
    /// destination edge.
    pub hops: Vec<(u32, u16)>,
    /// Base one-way delay, ps.
    pub base_ps: u64,
}

/// All paths of a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathModel {
    /// Switch index of each edge (edge index order).
    pub edges: Vec<u32>,
    /// Path id = index.
    pub paths: Vec<PathDef>,
}

impl PathModel {
    /// Walks every route between every ordered pair of edges; `Err` if there are more paths
    /// than ids.
    pub fn new(r: &ResolvedTopology) -> Result<PathModel, String> {
        let edges = r.edge_switches();
        let mut paths = Vec::new();
        for (a, &sa) in edges.iter().enumerate() {
            for (b, &sb) in edges.iter().enumerate() {
                if a == b {
                    continue;
                }
                let Some(dst) = edge_address(r, sb) else {
                    continue;
                };
                let mut hops = Vec::new();
                walk(r, sa, sb, dst, &mut hops, &mut |hops| {
                    let base_ps = hops
                        .iter()
                        .map(|&(s, p)| {
                            let ps = r.port(s, p);
                            let frame = u64::from(ps.mtu) + 14 + 16;
                            frame * 8 * 1_000_000_000_000 / ps.rate_bps.max(1) + ps.delay_ps
                        })
                        .sum();
                    paths.push(PathDef {
                        src_edge: a as u16,
                        dst_edge: b as u16,
                        hops: hops.to_vec(),
                        base_ps,
                    });
                });
            }
        }
        if paths.len() > MAX_PATHS {
            return Err(format!(
                "{} paths between edge switches, at most {MAX_PATHS} fit the 12-bit path id",
                paths.len()
            ));
        }
        Ok(PathModel { edges, paths })
    }

    /// Edge index of switch `s`.
    pub fn edge_of(&self, s: u32) -> Option<u16> {
        self.edges.iter().position(|&e| e == s).map(|i| i as u16)
    }

    /// What switch `s` needs to run Proteus.
    pub fn spec_for(&self, r: &ResolvedTopology, s: u32) -> ProteusSpec {
        let mut route = vec![None; self.paths.len()];
        for (id, p) in self.paths.iter().enumerate() {
            if let Some(&(_, port)) = p.hops.iter().find(|h| h.0 == s) {
                route[id] = Some(port);
            }
        }
        let edge = self.edge_of(s);
        let mut tables = vec![Vec::new(); self.edges.len()];
        if let Some(e) = edge {
            for (id, p) in self.paths.iter().enumerate() {
                if p.src_edge == e {
                    tables[usize::from(p.dst_edge)].push((id as u16, p.hops[0].1, p.base_ps));
                }
            }
        }
        let mut host_edge = BTreeMap::new();
        for h in &r.hosts {
            if let Some((hs, _)) = h.port() {
                if let Some(e) = self.edge_of(hs) {
                    host_edge.insert(u32::from(h.ip), e);
                }
            }
        }
        let toward_edge = self
            .edges
            .iter()
            .map(|&se| {
                (se != s)
                    .then(|| edge_address(r, se))
                    .flatten()
                    .and_then(|a| r.switches[s as usize].candidates(a).first())
                    .map(|&(p, _)| p as u16)
            })
            .collect();
        let period_ps = 2 * self.paths.iter().map(|p| p.base_ps).max().unwrap_or(0);
        ProteusSpec {
            edge,
            route,
            path_ends: self
                .paths
                .iter()
                .map(|p| (p.src_edge, p.dst_edge))
                .collect(),
            tables,
            host_edge,
            toward_edge,
            period_ps,
            proteus_peer: Vec::new(),
        }
    }
}

/// Gives every `lb = "proteus"` switch of `r` its [`ProteusSpec`]; nothing without one.
pub fn attach(r: &mut ResolvedTopology) -> Result<(), String> {
    use super::LoadBalancer;
    let proteus: Vec<bool> = r
        .switches
        .iter()
        .map(|s| s.spec.lb == LoadBalancer::Proteus)
        .collect();
    if !proteus.contains(&true) {
        return Ok(());
    }
    let m = PathModel::new(r)?;
    for s in 0..r.switches.len() {
        if !proteus[s] {
            continue;
        }
        let mut spec = m.spec_for(r, s as u32);
        spec.proteus_peer = r.switches[s]
            .peers
            .iter()
            .map(|p| matches!(p, Peer::Port(x, _) if proteus[*x as usize]))
            .collect();
        r.switches[s].spec.proteus = Some(std::sync::Arc::new(spec));
    }
    Ok(())
}

/// An address behind edge switch `s` (its first host's).
fn edge_address(r: &ResolvedTopology, s: u32) -> Option<Ipv4Addr> {
    r.hosts
        .iter()
        .find(|h| h.port().is_some_and(|(hs, _)| hs == s))
        .map(|h| h.ip)
}

/// Depth-first over the routes from `s` toward `dst` (behind edge switch `to`), calling `found`
/// with the hops of every route that reaches `to`.
fn walk(
    r: &ResolvedTopology,
    s: u32,
    to: u32,
    dst: Ipv4Addr,
    hops: &mut Vec<(u32, u16)>,
    found: &mut impl FnMut(&[(u32, u16)]),
) {
    if hops.len() > r.switches.len() || hops.iter().any(|h| h.0 == s) {
        return; // a loop
    }
    for &(p, _) in r.switches[s as usize].candidates(dst) {
        let Peer::Port(next, _) = r.peer(s, p as u16) else {
            continue;
        };
        hops.push((s, p as u16));
        if next == to {
            found(hops);
        } else {
            walk(r, next, to, dst, hops, found);
        }
        hops.pop();
    }
}

/// Proteus settings of one switch, from the [`PathModel`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProteusSpec {
    /// This switch's edge index, if it has hosts.
    pub edge: Option<u16>,
    /// Per path id: the egress port here, if the path crosses this switch before its end.
    pub route: Vec<Option<u16>>,
    /// Per path id: (source edge, destination edge).
    pub path_ends: Vec<(u16, u16)>,
    /// At an edge, per destination edge: (path id, first egress port, base one-way delay ps).
    pub tables: Vec<Vec<(u16, u16, u64)>>,
    /// Host address → its edge.
    pub host_edge: BTreeMap<u32, u16>,
    /// Per edge: the port toward it (None for this switch).
    pub toward_edge: Vec<Option<u16>>,
    /// Measurement period at a destination edge: the largest base RTT (2 × one-way), ps.
    pub period_ps: u64,
    /// Per port: the peer runs Proteus too (push the shim toward it).
    pub proteus_peer: Vec<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;
    use std::path::Path;

    fn leafspine() -> ResolvedTopology {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/leafspine.toml");
        Topology::load(p).unwrap().resolve().unwrap()
    }

    #[test]
    fn leafspine_has_one_path_per_spine_and_leaf_pair() {
        let r = leafspine();
        let m = PathModel::new(&r).unwrap();
        // 4 leaves are the edges; 4 × 3 ordered pairs × 4 spines.
        assert_eq!(m.edges.len(), 4);
        assert_eq!(m.paths.len(), 48);
        let leaf1 = r.switch_index("leaf1").unwrap();
        let spine3 = r.switch_index("spine3").unwrap();
        for p in &m.paths {
            assert_eq!(p.hops.len(), 2, "leaf -> spine -> leaf");
            // 2 hops of 1 us at 100 Gbit/s with a 1530-byte frame (122.4 ns each).
            assert_eq!(p.base_ps, 2 * (1_000_000 + 122_400));
        }
        // Source routing: leaf1's paths to leaf2 leave by up1..up4 in route order; spine3
        // forwards exactly the paths that cross it, each to its destination leaf.
        let s = m.spec_for(&r, leaf1);
        assert_eq!(s.edge, Some(0));
        let to_leaf2: Vec<u16> = s.tables[1].iter().map(|t| t.1).collect();
        let up = |n: &str| r.switches[leaf1 as usize].port_index(n).unwrap();
        assert_eq!(to_leaf2, vec![up("up1"), up("up2"), up("up3"), up("up4")]);
        assert!(s.tables[0].is_empty());
        let sp = m.spec_for(&r, spine3);
        assert_eq!(sp.edge, None);
        let crossing = sp.route.iter().filter(|x| x.is_some()).count();
        assert_eq!(crossing, 12);
        for (id, port) in sp.route.iter().enumerate() {
            if let Some(port) = port {
                let dst_leaf = m.edges[usize::from(m.paths[id].dst_edge)];
                assert!(
                    matches!(r.peer(spine3, *port), Peer::Port(x, _) if x == dst_leaf),
                    "path {id}"
                );
            }
        }
        // Host addresses map to their leaf; leaf1 relays toward leaf3 by an uplink.
        assert_eq!(
            s.host_edge.get(&u32::from(Ipv4Addr::new(10, 0, 3, 2))),
            Some(&2)
        );
        assert!(s.toward_edge[0].is_none());
        assert!(s.toward_edge[2].is_some_and(|p| p >= up("up1")));
        assert_eq!(s.period_ps, 4 * (1_000_000 + 122_400));
    }
}

//! What a CONGA switch needs of the topology (issue 18's baseline, `loadbal::conga`,
//! `crate::scheme::conga`): its leaf index, the number of leaves, the leaf of every host
//! address, and which ports lead to another CONGA switch (the fabric links whose DRE it keeps
//! and toward which it pushes the data shim version 3).
//!
//! Leaves are the switches with hosts, numbered in switch order, exactly as Proteus's path
//! model numbers its edges (`super::paths::PathModel::edges`), so both agree on an index.

use super::resolved::{Peer, ResolvedTopology};
use super::LoadBalancer;
use std::collections::BTreeMap;
use std::sync::Arc;

/// CONGA settings of one switch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CongaSpec {
    /// This switch's leaf index, if it has hosts.
    pub leaf: Option<u16>,
    /// Leaves in the topology.
    pub leaves: u16,
    /// Host address → its leaf.
    pub host_leaf: BTreeMap<u32, u16>,
    /// Per port: the peer runs CONGA too (a fabric link: DRE, shim).
    pub conga_peer: Vec<bool>,
}

/// Gives every `lb = "conga"` switch of `r` its [`CongaSpec`].
pub fn attach(r: &mut ResolvedTopology) {
    let conga: Vec<bool> = r
        .switches
        .iter()
        .map(|s| s.spec.lb == LoadBalancer::Conga)
        .collect();
    if !conga.contains(&true) {
        return;
    }
    let leaves = r.edge_switches();
    let leaf_of = |s: u32| leaves.iter().position(|&l| l == s).map(|i| i as u16);
    let mut host_leaf = BTreeMap::new();
    for h in &r.hosts {
        if let Some((hs, _)) = h.port() {
            if let Some(l) = leaf_of(hs) {
                host_leaf.insert(u32::from(h.ip), l);
            }
        }
    }
    for s in 0..r.switches.len() {
        if !conga[s] {
            continue;
        }
        let spec = CongaSpec {
            leaf: leaf_of(s as u32),
            leaves: leaves.len() as u16,
            host_leaf: host_leaf.clone(),
            conga_peer: r.switches[s]
                .peers
                .iter()
                .map(|p| matches!(p, Peer::Port(x, _) if conga[*x as usize]))
                .collect(),
        };
        r.switches[s].spec.conga = Some(Arc::new(spec));
    }
}

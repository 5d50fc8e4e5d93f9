//! The congestion-root table (§4.2 "Matching and maintaining snapshot", §5.1 (ii), App. E.2):
//! one table per hop distance, the `k`th holding the roots `k` hops downstream of this switch,
//! keyed by ⟨switch-id, port-id⟩. A packet's onward path is matched hop by hop: the egress
//! port it will take `k` hops on is looked up only in the `k`th table.

use super::{RootId, MAX_HOPS};
use std::collections::BTreeMap;

/// How a root is known to this switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootState {
    /// A congestion root (paused on the ports in `paused_on`, or resumed with IQs still
    /// holding its flows).
    Active,
    /// A false-positive root merged into a downstream one (Fig. 6 soft-merging): it controls
    /// nothing; it is kept only so its flows keep to the soft-merging IQ until that drains.
    Merged,
}

/// One root of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEntry {
    pub state: RootState,
    /// Egress ports (bit p) on which a PAUSE for this root is in force.
    pub paused_on: u128,
    /// IQ slots (over all ports) whose key names this root.
    pub refs: u32,
    /// When the root was last paused on a port where it was not before (for paused time).
    pub paused_since: u64,
}

/// The hierarchical table: `tables[k - 1]` holds the roots `k` hops away.
#[derive(Debug, Clone, Default)]
pub struct RootTable {
    tables: Vec<BTreeMap<RootId, RootEntry>>,
    len: usize,
    /// Bumped whenever a root that IQs may name changes state (merged, or reactivated):
    /// flows then move between IQs already in use, which needs order marks (App. C).
    moves: u64,
}

impl RootTable {
    pub fn new() -> Self {
        RootTable {
            tables: vec![BTreeMap::new(); MAX_HOPS],
            len: 0,
            moves: 0,
        }
    }

    /// Roots known (any state).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No root is known: every packet is uncongested.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The root `root` at `hops` (1..=[`MAX_HOPS`]), if known.
    #[inline]
    pub fn get(&self, hops: u8, root: RootId) -> Option<&RootEntry> {
        self.tables
            .get(usize::from(hops).wrapping_sub(1))?
            .get(&root)
    }

    #[inline]
    pub fn get_mut(&mut self, hops: u8, root: RootId) -> Option<&mut RootEntry> {
        self.tables
            .get_mut(usize::from(hops).wrapping_sub(1))?
            .get_mut(&root)
    }

    /// The entry of `root` at `hops`, created active (not paused anywhere) if absent, or
    /// reactivated if it was merged. `None` if `hops` is out of range.
    pub fn entry(&mut self, hops: u8, root: RootId) -> Option<&mut RootEntry> {
        let t = self.tables.get_mut(usize::from(hops).wrapping_sub(1))?;
        let len = &mut self.len;
        let e = t.entry(root).or_insert_with(|| {
            *len += 1;
            RootEntry {
                state: RootState::Active,
                paused_on: 0,
                refs: 0,
                paused_since: 0,
            }
        });
        if e.state != RootState::Active {
            // A merged root is active again: the flows crossing it leave the IQs they used
            // while it was merged for IQs that may already be in use.
            e.state = RootState::Active;
            self.moves += 1;
        }
        Some(e)
    }

    /// Marks `root` (at `hops`) a false positive merged into a downstream root (Fig. 6):
    /// flows crossing it leave the IQs naming it for IQs that may already be in use.
    pub fn merge(&mut self, hops: u8, root: RootId) {
        if let Some(e) = self.get_mut(hops, root) {
            if e.state != RootState::Merged {
                e.state = RootState::Merged;
                self.moves += 1;
            }
        }
    }

    /// How many times flows may have moved between IQs in use (a root merged or
    /// reactivated); an IQ that has seen fewer puts order marks behind the flows joining it.
    /// A new root needs none here (its IQs are new and marked when assigned), nor does a
    /// root that is dropped (App. C case (i): every IQ naming it is empty).
    #[inline]
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Drops `root` if nothing needs it any more (no pause in force, no IQ naming it).
    pub fn gc(&mut self, hops: u8, root: RootId) -> bool {
        let Some(t) = self.tables.get_mut(usize::from(hops).wrapping_sub(1)) else {
            return false;
        };
        if t.get(&root)
            .is_some_and(|e| e.paused_on == 0 && e.refs == 0)
        {
            t.remove(&root);
            self.len -= 1;
            return true;
        }
        false
    }

    /// Every root, nearest table first.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &RootId, &RootEntry)> {
        self.tables
            .iter()
            .enumerate()
            .flat_map(|(k, t)| t.iter().map(move |(r, e)| (k as u8 + 1, r, e)))
    }
}

//! Isolation queues of one port (§4.3, App. C, App. E.3): the free-queue stack, the IQs in use
//! with the roots they are assigned to, their Fig. 6 state, and the order marks that hold a
//! new IQ until the packets its flows left in older queues have gone.

use super::roots::{RootState, RootTable};
use super::{RootId, MAX_HOPS, MAX_LEVELS};

/// The roots a packet crosses, near to far (the key of a single-tier IQ, App. C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Key {
    roots: [(u8, RootId); MAX_LEVELS],
    n: u8,
}

impl Key {
    /// A key of `roots` ((hops, root), near to far).
    pub fn of(roots: &[(u8, RootId)]) -> Key {
        let mut k = Key::default();
        for &(h, r) in roots {
            k.push_far(h, r);
        }
        k
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// (hops, root), near to far.
    #[inline]
    pub fn roots(&self) -> &[(u8, RootId)] {
        &self.roots[..usize::from(self.n)]
    }

    #[inline]
    pub fn contains(&self, root: RootId) -> bool {
        self.roots().iter().any(|&(_, r)| r == root)
    }

    /// One path can cross the roots of both keys: where both name a root at the same hop
    /// distance it is the same root (a path takes one egress port per hop). The flows now
    /// keyed `other` may have used an IQ keyed `self` before roots came, merged or went.
    #[inline]
    pub fn consistent_with(&self, other: &Key) -> bool {
        self.roots()
            .iter()
            .all(|&(h, r)| other.roots().iter().all(|&(h2, r2)| h2 != h || r2 == r))
    }

    /// Adds a root farther than those held; when full the nearest is dropped (App. C.2 keeps
    /// the roots nearest the destination).
    #[inline]
    fn push_far(&mut self, hops: u8, root: RootId) {
        if usize::from(self.n) == MAX_LEVELS {
            self.roots.copy_within(1.., 0);
            self.roots[MAX_LEVELS - 1] = (hops, root);
        } else {
            self.roots[usize::from(self.n)] = (hops, root);
            self.n += 1;
        }
    }

    fn hash(&self) -> u64 {
        self.roots()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &(d, r)| {
                let x = (u64::from(d) << 32) | (u64::from(r.switch) << 16) | u64::from(r.port);
                (h ^ x).wrapping_mul(0x0100_0000_01b3)
            })
    }
}

/// Matches an onward path (`path[k]`: the egress port `k` hops on) against the root table:
/// the active roots it crosses, and, if it crosses a merged root, the key of every root it
/// crosses, merged ones included (the key its flows had before the merge).
#[inline]
pub fn classify(roots: &RootTable, path: &[RootId]) -> (Key, Option<Key>) {
    let mut key = Key::default();
    let mut all = Key::default();
    let mut merged = false;
    for (k, &r) in path.iter().enumerate().take(MAX_HOPS + 1).skip(1) {
        if let Some(e) = roots.get(k as u8, r) {
            all.push_far(k as u8, r);
            match e.state {
                RootState::Active => key.push_far(k as u8, r),
                RootState::Merged => merged = true,
            }
        }
    }
    (key, merged.then_some(all))
}

/// The nearest active root a path crosses farther than `after` hops (two-level HIQ, §4.3: "it
/// matches the HIQ from-near-to-far": a packet enters the IQ of its nearest root, and the
/// HIQ scheduler moves it on to the next one), and the first merged root it crosses there.
#[inline]
pub fn classify_nearest(roots: &RootTable, path: &[RootId], after: u8) -> (Key, Option<RootId>) {
    let mut merged = None;
    let from = usize::from(after) + 1;
    for (k, &r) in path.iter().enumerate().take(MAX_HOPS + 1).skip(from) {
        if let Some(e) = roots.get(k as u8, r) {
            match e.state {
                RootState::Active => return (Key::of(&[(k as u8, r)]), merged),
                RootState::Merged => {
                    merged.get_or_insert(r);
                }
            }
        }
    }
    (Key::default(), merged)
}

/// State of an IQ (Fig. 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IqState {
    Unassigned,
    /// A root it serves is paused on this port, or an order mark is still ahead of it.
    Paused,
    Resumed,
    /// Assigned to a root that turned out a false positive: controlled by no root, unassigned
    /// once empty.
    SoftMerging,
}

/// An IQ in use.
#[derive(Debug, Clone)]
pub struct Slot {
    pub queue: u8,
    /// The roots it serves: one key, more once roots are hashed onto it (§4.5).
    pub keys: Vec<Key>,
    pub soft: bool,
    /// Order marks it waits for: (queue, that queue's enqueue count at the mark, this IQ's
    /// enqueue count when the mark was placed). A hold stops the IQ only once the IQ's own
    /// packets from before the mark have left: those belong to flows that did not move, and
    /// letting them go means two IQs holding behind each other's marks cannot deadlock.
    holds: Vec<(u8, u64, u64)>,
    /// [`RootTable::moves`] when its order marks were last placed.
    moves: u64,
    /// Bytes queued, as last reported.
    pub bytes: u64,
    afc_paused: bool,
}

impl Slot {
    /// Paused by a root it serves, or held by an order mark (`deq`: its dequeue count).
    fn paused(&self, port: u16, roots: &RootTable, deq: u64) -> bool {
        let bit = 1u128 << port;
        self.holds.iter().any(|&(_, _, from)| deq >= from)
            || self.keys.iter().any(|k| {
                k.roots()
                    .iter()
                    .any(|&(h, r)| roots.get(h, r).is_some_and(|e| e.paused_on & bit != 0))
            })
    }

    /// Every (hops, root) it serves.
    pub fn roots(&self) -> impl Iterator<Item = (u8, RootId)> + '_ {
        self.keys.iter().flat_map(|k| k.roots().iter().copied())
    }
}

/// Outcome of [`PortIqs::assign`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigned {
    /// A free IQ, held behind `marks` order marks.
    New { queue: u8, marks: u64 },
    /// No free IQ: the key was hashed onto this one in use, held behind `marks` order marks.
    Hashed { queue: u8, marks: u64 },
    /// The port has no IQs at all.
    None,
}

const NO_SLOT: u8 = u8::MAX;

/// The IQs of one port.
#[derive(Debug, Clone)]
pub struct PortIqs {
    /// Free-queue stack (top = last).
    free: Vec<u8>,
    slots: Vec<Slot>,
    /// Queue → index in `slots`.
    slot_of: Vec<u8>,
    /// Per queue: packets ever enqueued / dequeued (order marks compare them).
    enq: Vec<u64>,
    deq: Vec<u64>,
    /// Order marks outstanding on the port.
    holds: usize,
}

impl PortIqs {
    /// A port with `queues` data queues, of which `iqs` may serve as IQs (the first is handed
    /// out first).
    pub fn new(iqs: &[u8], queues: usize) -> Self {
        PortIqs {
            free: iqs.iter().rev().copied().collect(),
            slots: Vec::with_capacity(iqs.len()),
            slot_of: vec![NO_SLOT; queues],
            enq: vec![0; queues],
            deq: vec![0; queues],
            holds: 0,
        }
    }

    pub fn in_use(&self) -> usize {
        self.slots.len()
    }

    pub fn free(&self) -> usize {
        self.free.len()
    }

    #[inline]
    pub fn slot(&self, queue: u8) -> Option<&Slot> {
        let i = *self.slot_of.get(usize::from(queue))?;
        self.slots.get(usize::from(i))
    }

    #[inline]
    pub fn slot_mut(&mut self, queue: u8) -> Option<&mut Slot> {
        let i = *self.slot_of.get(usize::from(queue))?;
        self.slots.get_mut(usize::from(i))
    }

    fn deq_of(&self, queue: u8) -> u64 {
        self.deq.get(usize::from(queue)).copied().unwrap_or(0)
    }

    fn slot_paused(&self, s: &Slot, port: u16, roots: &RootTable) -> bool {
        s.paused(port, roots, self.deq_of(s.queue))
    }

    /// The IQ serving `key`.
    #[inline]
    pub fn find(&self, key: &Key) -> Option<u8> {
        self.slots
            .iter()
            .find(|s| s.keys.contains(key))
            .map(|s| s.queue)
    }

    /// The soft-merging IQ serving `root`.
    pub fn find_root(&self, root: RootId) -> Option<u8> {
        self.slots
            .iter()
            .find(|s| s.soft && s.keys.iter().any(|k| k.contains(root)))
            .map(|s| s.queue)
    }

    /// IQs serving `root`.
    pub fn queues_with(&self, root: RootId) -> Vec<u8> {
        self.slots
            .iter()
            .filter(|s| s.keys.iter().any(|k| k.contains(root)))
            .map(|s| s.queue)
            .collect()
    }

    /// IQs in use.
    pub fn assigned(&self) -> Vec<u8> {
        self.slots.iter().map(|s| s.queue).collect()
    }

    /// The longest IQ serving `root` (bytes).
    pub fn max_bytes_with(&self, root: RootId) -> u64 {
        self.slots
            .iter()
            .filter(|s| s.keys.iter().any(|k| k.contains(root)))
            .map(|s| s.bytes)
            .max()
            .unwrap_or(0)
    }

    /// Gives `key` an IQ: from the free stack, held behind order marks in the queues its
    /// flows may have used so far (the OQ `oq`, IQs of fewer of its roots, soft-merging IQs)
    /// if `marks` (single-tier IQs; a two-level HIQ keeps order by its structure); else
    /// hashed onto an IQ in use.
    pub fn assign(&mut self, key: Key, oq: u8, roots: &mut RootTable, marks: bool) -> Assigned {
        for &(h, r) in key.roots() {
            if let Some(e) = roots.get_mut(h, r) {
                e.refs += 1;
            }
        }
        let Some(queue) = self.free.pop() else {
            if self.slots.is_empty() {
                for &(h, r) in key.roots() {
                    if let Some(e) = roots.get_mut(h, r) {
                        e.refs -= 1;
                    }
                }
                return Assigned::None;
            }
            let i = (key.hash() % self.slots.len() as u64) as usize;
            self.slots[i].keys.push(key);
            let q = self.slots[i].queue;
            let marks = if marks {
                self.place_marks(q, oq, roots.moves())
            } else {
                0
            };
            return Assigned::Hashed { queue: q, marks };
        };
        self.slot_of[usize::from(queue)] = self.slots.len() as u8;
        self.slots.push(Slot {
            queue,
            keys: vec![key],
            soft: false,
            holds: Vec::new(),
            moves: roots.moves(),
            bytes: 0,
            afc_paused: false,
        });
        let marks = if marks {
            self.place_marks(queue, oq, roots.moves())
        } else {
            0
        };
        Assigned::New { queue, marks }
    }

    /// Order marks for the flows joining IQ `queue` (App. C): one behind the packets in
    /// every other queue those flows may have used so far, i.e. the OQ `oq` and the IQs
    /// whose roots one path can cross together with those of a key `queue` serves (a flow's
    /// key grows when a root comes, shrinks when one merges, and keeps only the farthest
    /// [`MAX_LEVELS`]; an IQ serves several keys once they are hashed onto it). `queue` waits
    /// for them all, after its own packets already queued. Returns the marks placed.
    pub fn place_marks(&mut self, queue: u8, oq: u8, moves: u64) -> u64 {
        let Some(dst) = self.slot(queue) else {
            return 0;
        };
        let mut holds = Vec::new();
        let mark = |q: u8, holds: &mut Vec<(u8, u64)>| {
            let i = usize::from(q);
            if q != queue && self.enq.get(i) > self.deq.get(i) {
                holds.push((q, self.enq[i]));
            }
        };
        mark(oq, &mut holds);
        for s in &self.slots {
            if s.keys
                .iter()
                .any(|k| dst.keys.iter().any(|d| k.consistent_with(d)))
            {
                mark(s.queue, &mut holds);
            }
        }
        let from = self.enq.get(usize::from(queue)).copied().unwrap_or(0);
        let n = holds.len();
        self.holds += n;
        if let Some(s) = self.slot_mut(queue) {
            s.moves = moves;
            s.holds
                .extend(holds.into_iter().map(|(q, seq)| (q, seq, from)));
        }
        n as u64
    }

    /// Whether the flows of IQ `queue` may have come from other queues since its marks were
    /// last placed (a root merged or came back since: [`RootTable::moves`]).
    #[inline]
    pub fn needs_marks(&self, queue: u8, moves: u64) -> bool {
        self.slot(queue).is_some_and(|s| s.moves < moves)
    }

    /// The pause `queue` should have, if it differs from what the AFC was last told.
    pub fn sync(&mut self, queue: u8, port: u16, roots: &RootTable) -> Option<bool> {
        let deq = self.deq_of(queue);
        let s = self.slot_mut(queue)?;
        let want = s.paused(port, roots, deq);
        (want != s.afc_paused).then(|| {
            s.afc_paused = want;
            want
        })
    }

    /// Whether `queue` is an IQ in use that is neither paused nor held: its packets may go
    /// on (the HIQ scheduler moves them to the next level).
    pub fn ready(&self, queue: u8, port: u16, roots: &RootTable) -> bool {
        self.slot(queue)
            .is_some_and(|s| !self.slot_paused(s, port, roots))
    }

    /// Fig. 6 state of `queue`.
    pub fn state(&self, queue: u8, port: u16, roots: &RootTable) -> IqState {
        match self.slot(queue) {
            None => IqState::Unassigned,
            Some(s) if self.slot_paused(s, port, roots) => IqState::Paused,
            Some(s) if s.soft => IqState::SoftMerging,
            Some(_) => IqState::Resumed,
        }
    }

    /// IQs serving `old` turn soft-merging (MERGE received).
    pub fn soft_merge(&mut self, old: RootId) {
        for s in &mut self.slots {
            if s.keys.iter().any(|k| k.contains(old)) {
                s.soft = true;
            }
        }
    }

    #[inline]
    pub fn count_enq(&mut self, queue: u8) {
        if let Some(c) = self.enq.get_mut(usize::from(queue)) {
            *c += 1;
        }
    }

    /// Counts a departure from `queue`; returns the IQs whose pause may have changed: those
    /// an order mark just left, and `queue` itself if a hold now applies to it (its packets
    /// from before the hold have gone).
    #[inline]
    pub fn count_deq(&mut self, queue: u8) -> Vec<u8> {
        let q = usize::from(queue);
        let Some(c) = self.deq.get_mut(q) else {
            return Vec::new();
        };
        *c += 1;
        if self.holds == 0 {
            return Vec::new();
        }
        let done = *c;
        let mut changed = Vec::new();
        for s in &mut self.slots {
            let before = s.holds.len();
            s.holds
                .retain(|&(hq, seq, _)| !(hq == queue && done >= seq));
            let gone = before - s.holds.len();
            self.holds -= gone;
            if gone > 0 || (s.queue == queue && s.holds.iter().any(|h| h.2 == done)) {
                changed.push(s.queue);
            }
        }
        changed
    }

    /// Unassigns `queue` if it is empty and neither paused nor held (Fig. 6: only a resumed
    /// or soft-merging IQ that is empty); returns the (hops, root) it served.
    pub fn unassign_if_idle(
        &mut self,
        queue: u8,
        port: u16,
        roots: &mut RootTable,
    ) -> Option<Vec<(u8, RootId)>> {
        let q = usize::from(queue);
        let i = usize::from(*self.slot_of.get(q)?);
        let s = self.slots.get(i)?;
        if self.enq[q] != self.deq[q] || self.slot_paused(s, port, roots) {
            return None;
        }
        let s = self.slots.swap_remove(i);
        self.slot_of[q] = NO_SLOT;
        if let Some(moved) = self.slots.get(i) {
            self.slot_of[usize::from(moved.queue)] = i as u8;
        }
        self.free.push(queue);
        let freed: Vec<(u8, RootId)> = s.roots().collect();
        for &(h, r) in &freed {
            if let Some(e) = roots.get_mut(h, r) {
                e.refs = e.refs.saturating_sub(1);
            }
        }
        Some(freed)
    }
}

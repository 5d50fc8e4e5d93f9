//! The flow table and queue assignment (BFC §3.3.1), written once for every scheme that maps
//! flows to the queues of an egress port through a table indexed by ⟨egress port, hash(FID)⟩.
//!
//! The table is the paper's: a fixed-size array per egress port, `factor` × its queues
//! entries, indexed by `hash(FID) mod len`. Flows whose hashes meet in an entry share it and
//! its queue (an *index collision*, which [`Placed::index_collision`] reports so the scheme can
//! count it, BFC's `table_collisions`). A hash map keyed by the flow would have no such
//! collisions and no bound on its size, so it would not be the model the paper evaluates
//! (BFC §3.3.1, App. E.5 "Size of flow table"); that is why this is not a `HashMap`.
//!
//! An entry holds {queue, size in packets, timestamp} plus a per-scheme `X`. What varies
//! between schemes is parameterised, not copied:
//!
//! * **Extra state per entry** (`X`): BFC needs none (`()`, so its entries stay 24 bytes);
//!   Aquarius (Alg. 1) keeps `pauseNum` there ([`FlowTable::extra_mut`]).
//! * **When an entry takes a new queue**: once it holds no packets and has been idle for the
//!   sticky time (BFC, `Some(2·HRTT)`), or as soon as it holds none (Aquarius, `None`).
//! * **Which queue a new flow gets**: a closure handed a [`Picker`], which offers the
//!   empty-queue search ([`Picker::empty`]) and the policies for when no queue is empty:
//!   BFC draws a random queue, Aquarius takes the least occupied one
//!   ([`Picker::least_occupied`]).
//!
//! So an Aquarius flow table is `FlowTable<u32>` with `sticky_ps = None`, placing with
//! `|p| p.empty(nonempty, 0).unwrap_or_else(|| p.least_occupied(|q| queue_bytes[q]))`.
//!
//! A port's *reserved* queues ([`FlowTable::reserve`]) take no part in assignment: no search,
//! policy or draw of the [`Picker`] returns one. They are the port's strict-priority classes
//! (ACKs and control), which keep their static queue and are never paused, as the
//! high-priority queue of the HPCC ns-3 simulator both BFC and Aquarius were evaluated on
//! (ACKs in queue 0 with `ACK_HIGH_PRIO`, assignment among the others) and BFC §3.3.2's
//! high-priority queue, which "reduces the number of queues available for dynamic queue
//! assignment by 1".

/// Flow-table slot meaning "not assigned by the table".
pub const NO_SLOT: u32 = u32::MAX;

/// Most queues a port can have: queue sets are `u128` bitmaps.
pub const MAX_QUEUES: usize = 128;

/// `Entry::queue` of an entry that was never assigned.
const UNASSIGNED: u8 = 0xFF;

/// A 32-bit hash of a flow identifier (addresses as 128-bit integers, IPv4 mapped), the same
/// at every device (switches and fabric NICs).
#[inline]
pub fn fid_hash(src: u128, dst: u128, sport: u16, dport: u16, proto: u8) -> u32 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for w in [
        src as u64,
        (src >> 64) as u64,
        dst as u64,
        (dst >> 64) as u64,
        (u64::from(sport) << 24) | (u64::from(dport) << 8) | u64::from(proto),
    ] {
        h = (h ^ w).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 29;
    }
    (h ^ (h >> 32)) as u32
}

/// Invalid flow-table dimensions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("port {0}: {1} queues, a flow table supports 1..=128")]
    Queues(usize, usize),
    #[error("table factor must be 1..=100000")]
    Factor,
}

/// One flow-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<X> {
    /// FID hash of the flow that (re)claimed the entry.
    pub fid: u32,
    /// Packets of the entry's flows in the switch.
    pub size: u32,
    /// Last enqueue or dequeue (ps).
    pub ts: u64,
    /// Assigned queue.
    pub queue: u8,
    /// The scheme's own state (not touched by the table).
    pub extra: X,
}

/// Per egress port: where its entries are, and its queues' assignment state.
#[derive(Debug, Clone)]
struct PortTable {
    off: usize,
    len: usize,
    queues: usize,
    /// Rotating start of the empty-queue search.
    rr: usize,
    /// Queues outside assignment (bit q), never all of them.
    reserved: u128,
    /// Per queue: last enqueue or dequeue of a packet assigned to it (ps).
    last_use: Vec<u64>,
}

/// Where [`FlowTable::place`] put a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Queue of the egress port.
    pub queue: u8,
    /// Entry of the packet's flow (for [`FlowTable::depart`] / [`FlowTable::unplace`]).
    pub slot: u32,
    /// The entry took a new queue (a flow (re)entering the table).
    pub fresh: bool,
    /// The entry is held by another flow with packets in the switch (shared index).
    pub index_collision: bool,
}

/// What the queue choice for a new flow may look at: the port's queues and the empty-queue
/// search over them.
#[derive(Debug)]
pub struct Picker<'a> {
    port: &'a mut PortTable,
    sticky_ps: Option<u64>,
    now: u64,
}

impl Picker<'_> {
    /// Queues of the port.
    #[inline]
    pub fn queues(&self) -> usize {
        self.port.queues
    }

    /// The queues assignment may use (bit q): all but the reserved ones.
    #[inline]
    pub fn allowed(&self) -> u128 {
        all_queues(self.port.queues) & !self.port.reserved
    }

    /// The `(x mod n)`-th of the `n` queues assignment may use: a uniform draw `x` (BFC's
    /// random queue) or a hash (stochastic assignment) spread over them. Without reserved
    /// queues that is queue `x mod queues`.
    #[inline]
    pub fn spread(&self, x: u64) -> usize {
        let allowed = self.allowed();
        if self.port.reserved == 0 {
            return (x % self.port.queues as u64) as usize;
        }
        let mut m = allowed;
        for _ in 0..x % u64::from(allowed.count_ones().max(1)) {
            m &= m - 1;
        }
        m.trailing_zeros() as usize
    }

    /// An empty queue (not in `nonempty`), if any: unpaused ones (not in `paused`) first, so a
    /// new flow does not inherit the pause of another flow's marked packets still downstream;
    /// among those, from a rotating start, the first queue no sticky flow may come back to
    /// (idle longer than the sticky time), else the first one.
    #[inline]
    pub fn empty(&mut self, nonempty: u128, paused: u128) -> Option<usize> {
        let queues = self.port.queues;
        let mut empty = !nonempty & self.allowed();
        if empty & !paused != 0 {
            empty &= !paused;
        }
        if empty == 0 {
            return None;
        }
        let p = &mut *self.port;
        let above = u128::MAX << p.rr;
        let mut first = None;
        let mut pick = None;
        'scan: for part in [empty & above, empty & !above] {
            let mut m = part;
            while m != 0 {
                let q = m.trailing_zeros() as usize;
                m &= m - 1;
                first.get_or_insert(q);
                let reserved = self
                    .sticky_ps
                    .is_some_and(|s| self.now.saturating_sub(p.last_use[q]) <= s);
                if !reserved {
                    pick = Some(q);
                    break 'scan;
                }
            }
        }
        let q = pick.or(first).unwrap_or(0);
        p.rr = (q + 1) % queues;
        Some(q)
    }

    /// The queue with the fewest bytes (`bytes(q)`), lowest index on ties: the choice when no
    /// queue is empty for a scheme that shares the least loaded one (Aquarius Alg. 1 line 4).
    #[inline]
    pub fn least_occupied(&self, bytes: impl Fn(usize) -> u64) -> usize {
        let reserved = self.port.reserved;
        (0..self.port.queues)
            .filter(|&q| reserved & (1 << q) == 0)
            .min_by_key(|&q| bytes(q))
            .unwrap_or(0)
    }
}

/// Bitmap of `queues` queues.
#[inline]
fn all_queues(queues: usize) -> u128 {
    if queues >= MAX_QUEUES {
        u128::MAX
    } else {
        (1u128 << queues) - 1
    }
}

/// The flow tables of every egress port of a switch (see the module doc).
#[derive(Debug, Clone)]
pub struct FlowTable<X> {
    ports: Vec<PortTable>,
    entries: Vec<Entry<X>>,
    sticky_ps: Option<u64>,
}

impl<X: Copy + Default> FlowTable<X> {
    /// Tables for ports with `queues[i]` queues each (1..=128), `factor` entries per queue;
    /// an entry takes a new queue once empty and idle for longer than `sticky_ps` (`None`:
    /// as soon as it is empty).
    pub fn new(
        queues: &[usize],
        factor: usize,
        sticky_ps: Option<u64>,
    ) -> Result<Self, TableError> {
        if !(1..=100_000).contains(&factor) {
            return Err(TableError::Factor);
        }
        let mut ports = Vec::with_capacity(queues.len());
        let mut off = 0;
        for (i, &n) in queues.iter().enumerate() {
            if !(1..=MAX_QUEUES).contains(&n) {
                return Err(TableError::Queues(i, n));
            }
            ports.push(PortTable {
                off,
                len: n * factor,
                queues: n,
                rr: 0,
                reserved: 0,
                last_use: vec![0; n],
            });
            off += n * factor;
        }
        let empty = Entry {
            fid: 0,
            size: 0,
            ts: 0,
            queue: UNASSIGNED,
            extra: X::default(),
        };
        Ok(FlowTable {
            ports,
            entries: vec![empty; off],
            sticky_ps,
        })
    }
}

impl<X> FlowTable<X> {
    /// Entries of `egress`'s table.
    pub fn port_len(&self, egress: usize) -> usize {
        self.ports[egress].len
    }

    /// Takes the queues of `mask` on `egress` out of assignment (see the module doc). False,
    /// and nothing reserved, if that would leave no queue to assign.
    pub fn reserve(&mut self, egress: usize, mask: u128) -> bool {
        let p = &mut self.ports[egress];
        let mask = mask & all_queues(p.queues);
        if mask == all_queues(p.queues) {
            return false;
        }
        p.reserved = mask;
        true
    }

    /// The reserved queues of `egress` (bit q).
    #[inline]
    pub fn reserved(&self, egress: usize) -> u128 {
        self.ports[egress].reserved
    }

    /// The sticky time in use (`None`: none).
    pub fn sticky_ps(&self) -> Option<u64> {
        self.sticky_ps
    }

    /// The entry at `slot`.
    pub fn entry(&self, slot: u32) -> Option<&Entry<X>> {
        self.entries.get(slot as usize)
    }

    /// The slot of flow `fid` in `egress`'s table (Aquarius: the entry a received
    /// PAUSE(queue, FID) names, looked up without placing a packet).
    #[inline]
    pub fn slot_of(&self, egress: usize, fid: u32) -> u32 {
        let p = &self.ports[egress];
        (p.off + fid as usize % p.len) as u32
    }

    /// The scheme's state in the entry at `slot`.
    pub fn extra_mut(&mut self, slot: u32) -> Option<&mut X> {
        self.entries.get_mut(slot as usize).map(|e| &mut e.extra)
    }

    /// A packet of flow `fid` to `egress` (the flow-table half of BFC's and Aquarius's
    /// `Enqueue`): an entry that may take a new queue gets `choose`'s (clamped to the port's
    /// queues), any other keeps its queue; the entry's size and timestamp are bumped.
    #[inline]
    pub fn place<F>(&mut self, egress: usize, fid: u32, now: u64, choose: F) -> Placed
    where
        F: FnOnce(&mut Picker<'_>) -> usize,
    {
        let sticky_ps = self.sticky_ps;
        let p = &mut self.ports[egress];
        let slot = p.off + (fid as usize % p.len);
        let e = &mut self.entries[slot];
        let fresh = e.queue == UNASSIGNED
            || (e.size == 0 && sticky_ps.is_none_or(|s| now.saturating_sub(e.ts) > s))
            || usize::from(e.queue) >= p.queues;
        let index_collision = !fresh && e.fid != fid && e.size > 0;
        if fresh {
            let q = choose(&mut Picker {
                port: &mut *p,
                sticky_ps,
                now,
            });
            e.queue = q.min(p.queues - 1) as u8;
            e.fid = fid;
        }
        p.last_use[usize::from(e.queue)] = now;
        e.size += 1;
        e.ts = now;
        Placed {
            queue: e.queue,
            slot: slot as u32,
            fresh,
            index_collision,
        }
    }

    /// A packet placed in `slot` left `egress` (dequeued): the entry holds one packet fewer,
    /// and the entry and its queue were last used `now`.
    #[inline]
    pub fn depart(&mut self, egress: usize, slot: u32, now: u64) {
        if let Some(e) = self.entries.get_mut(slot as usize) {
            e.size = e.size.saturating_sub(1);
            e.ts = now;
            let q = usize::from(e.queue);
            if let Some(t) = self
                .ports
                .get_mut(egress)
                .and_then(|p| p.last_use.get_mut(q))
            {
                *t = now;
            }
        }
    }

    /// Undoes [`place`](Self::place) for a packet that was not enqueued after all (dropped).
    pub fn unplace(&mut self, slot: u32, now: u64) {
        if let Some(e) = self.entries.get_mut(slot as usize) {
            e.size = e.size.saturating_sub(1);
            e.ts = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seam for a second scheme: per-entry extra state, reassignment as soon as an entry
    /// is empty, and the least occupied queue when none is empty (Aquarius Alg. 1 lines 2–6).
    #[test]
    fn table_with_extra_state_and_least_occupied() {
        let mut t: FlowTable<u32> = FlowTable::new(&[3], 10, None).unwrap();
        let bytes = [500u64, 200, 900];
        let place = |t: &mut FlowTable<u32>, fid, nonempty, now| {
            t.place(0, fid, now, |p| {
                p.empty(nonempty, 0)
                    .unwrap_or_else(|| p.least_occupied(|q| bytes[q]))
            })
        };
        // Queue 0 empty: taken. Then all busy: the least occupied (1).
        let a = place(&mut t, 1, 0b110, 0);
        assert_eq!((a.queue, a.fresh), (0, true));
        let b = place(&mut t, 2, 0b111, 1);
        assert_eq!((b.queue, b.fresh), (1, true));
        // Flow 1 again: follows its entry; the scheme's counter lives in the entry.
        let a2 = place(&mut t, 1, 0b111, 2);
        assert_eq!((a2.queue, a2.slot, a2.fresh), (0, a.slot, false));
        *t.extra_mut(a.slot).unwrap() += 1;
        assert_eq!(t.entry(a.slot).unwrap().extra, 1);
        assert_eq!(t.entry(a.slot).unwrap().size, 2);
        // Another flow on flow 1's index (fid + len) while it has packets: shared, reported.
        let c = place(&mut t, 1 + 30, 0b111, 3);
        assert!(c.index_collision && !c.fresh && c.queue == 0);
        // Emptied: with no sticky time the next packet is a new flow at once.
        for _ in 0..3 {
            t.depart(0, a.slot, 4);
        }
        let a3 = place(&mut t, 1, 0b111, 4);
        assert!(a3.fresh && a3.queue == 1);
    }

    /// Reserved queues (a strict ACK class) are never searched, shared or drawn; without
    /// any, a draw is the plain `x mod queues`; reserving every queue is refused.
    #[test]
    fn reserved_queues_take_no_part() {
        let mut t: FlowTable<()> = FlowTable::new(&[4, 4], 10, None).unwrap();
        assert!(t.reserve(0, 0b1000));
        assert_eq!((t.reserved(0), t.reserved(1)), (0b1000, 0));
        let mut picks = Vec::new();
        // Each placement is undone, so the next one is a fresh flow that meets the picker.
        let p = |t: &mut FlowTable<()>, port, f: &mut dyn FnMut(&mut Picker<'_>) -> usize| {
            let pl = t.place(port, 0, 0, |pk| f(pk));
            assert!(pl.fresh);
            t.unplace(pl.slot, 0);
            pl.queue
        };
        // Only queue 3 is empty, and it is reserved: no empty queue.
        p(&mut t, 0, &mut |pk| {
            picks.push(pk.empty(0b0111, 0));
            0
        });
        // All empty: never 3, whatever the rotating start.
        for _ in 0..8 {
            p(&mut t, 0, &mut |pk| {
                picks.push(pk.empty(0, 0));
                0
            });
        }
        assert_eq!(picks.len(), 9);
        assert_eq!(picks[0], None);
        assert!(picks[1..].iter().all(|q| matches!(q, Some(0..=2))));
        // The least occupied skips it though it holds the fewest bytes.
        let bytes = [500u64, 200, 900, 0];
        assert_eq!(p(&mut t, 0, &mut |pk| pk.least_occupied(|q| bytes[q])), 1);
        // A draw spreads over the three others; port 1 (nothing reserved) over all four.
        let mut d0 = Vec::new();
        let mut d1 = Vec::new();
        for x in 0..6 {
            p(&mut t, 0, &mut |pk| {
                d0.push(pk.spread(x));
                0
            });
            p(&mut t, 1, &mut |pk| {
                d1.push(pk.spread(x));
                0
            });
        }
        assert_eq!(d0, vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(d1, vec![0, 1, 2, 3, 0, 1]);
        assert!(!t.reserve(1, 0b1111), "no queue left");
        assert_eq!(t.reserved(1), 0);
        // A middle queue: the draws skip it.
        assert!(t.reserve(1, 0b0010));
        let mut d = Vec::new();
        for x in 0..3 {
            p(&mut t, 1, &mut |pk| {
                d.push(pk.spread(x));
                0
            });
        }
        assert_eq!(d, vec![0, 2, 3]);
    }

    #[test]
    fn sticky_time_reserves_entries_and_queues() {
        let mut t: FlowTable<()> = FlowTable::new(&[3], 1, Some(100)).unwrap();
        let a = t.place(0, 0, 1_000, |_| 0);
        assert_eq!((a.queue, a.fresh), (0, true));
        t.depart(0, a.slot, 1_050);
        // Empty but within the sticky time: keeps its queue.
        let a2 = t.place(0, 0, 1_150, |_| 2);
        assert_eq!((a2.queue, a2.fresh), (0, false));
        t.unplace(a.slot, 1_150);
        // A new flow while every queue is empty: the search starts at 0, but queue 0 was
        // used within the sticky time (its flow may come back), so queue 1 is taken.
        let b = t.place(0, 1, 1_200, |p| p.empty(0, 0).unwrap());
        assert_eq!((b.queue, b.fresh), (1, true));
        // The rotating start moved past it: queue 2 next.
        let c = t.place(0, 2, 1_201, |p| p.empty(0b010, 0).unwrap());
        assert_eq!(c.queue, 2);
        // Flow 0 idle for longer than the sticky time: a new queue. Only queue 0 is empty.
        let a3 = t.place(0, 0, 1_251, |p| p.empty(0b110, 0).unwrap());
        assert_eq!((a3.queue, a3.fresh), (0, true));
        // Out-of-range choices are clamped; bad dimensions refused.
        let mut u: FlowTable<()> = FlowTable::new(&[2], 1, None).unwrap();
        assert_eq!(u.place(0, 0, 0, |_| 7).queue, 1);
        assert_eq!(
            FlowTable::<()>::new(&[2, 129], 1, None).unwrap_err(),
            TableError::Queues(1, 129)
        );
        assert_eq!(
            FlowTable::<()>::new(&[2], 0, None).unwrap_err(),
            TableError::Factor
        );
    }
}

//! The NIC queues of a host that speaks BFC (BFC §3.3.2 and §5: "the NIC inserts its queue
//! number in `upstreamQ`" and is paused and resumed per queue by its first-hop switch).
//!
//! One implementation for both kinds of host: the fabric's constant-rate NIC
//! ([`crate::fabric::NicBfc`] = `NicQueues<(FrameId, u32)>`, queues of frames) and the host
//! stack ([`super::HostStack`], queues of flows whose packets it makes on demand). Pure: no
//! time, no I/O.
//!
//! * **Assignment.** A flow (keyed by a `u32`: the stack's flow id, the NIC's FID hash) takes
//!   a queue on first sight and keeps it until [`NicQueues::release`]. A new flow takes a
//!   *free* queue (no flow assigned) if there is one, searched from a rotating start (one
//!   past the last queue handed out, so a queue just released is taken last), preferring
//!   free queues that are not paused (the switch may still hold a paused queue's marked
//!   packets of a finished flow: a new flow there would inherit that pause, as the switch's
//!   own assignment avoids, §3.3.1 "sticky"). If every queue has flows, the new flow joins
//!   the **least-loaded** unpaused one (fewest flows; a paused queue only if all are), ties
//!   broken from the rotating start: as deterministic as the rest of the fabric, where the
//!   paper's switch draws a random queue. (Joining a paused queue while an unpaused one was
//!   free held a new short flow for the whole pause: up to 1 ms of sender wait in the
//!   Aquarius §4 Web Server run.)
//!   A NIC that never releases (the fabric's constant-rate sources) thus assigns flow k to
//!   queue k mod n.
//! * **Service.** Round robin over the queues that are not paused and have work
//!   ([`NicQueues::pop`], [`NicQueues::serve`]); the caller paces at its line rate.
//! * **Signals.** Xoff signal frames (EtherType 0x88B5, `flowctl::wire::signal`) set and clear
//!   the paused bits: `Pause(q)`, `Resume(q)`, and the periodic `Bitmap` refresh, which
//!   overwrites the bits of the queues it covers.
//! * **Per-flow pause (Aquarius §3.3).** `FlowPause(q, FID)` / `FlowResume(q, FID)` hold
//!   exactly the named flow: the NIC is an Aquarius upstream, with the same
//!   [`flowctl::aquarius::QueueTable`] as a switch port. A flow alone in its queue has that
//!   queue paused; a flow sharing it is steered into a reserved queue (`rsvQ`, taken from the
//!   free queues), which is paused while the other flows of its queue continue. The caller
//!   reports departures ([`NicQueues::departed`]) so `rsvQ` resumes only once the flow's
//!   earlier frames have left (in order). A NIC whose queues hold flows rather than frames
//!   (the host stack, which makes each packet when its flow is served: nothing of a flow
//!   waits in its queue) applies signals with [`NicQueues::apply_flows`], which holds the
//!   named flow itself ([`NicQueues::is_held`]) and pauses no queue: the other flows of its
//!   queue, and flows that start later in it, keep sending. (It used to pause the queue of a
//!   flow alone in it and move a sharing flow into `rsvQ`, as a switch must. But a NIC
//!   whose every queue had flows had no free queue for `rsvQ` and paused shared queues, and
//!   a flow starting later in a queue paused for another flow waited for that flow's
//!   RESUME: in the Aquarius §4 Web Server run, 1 ms, seed 1, 1 234 short flows started
//!   with all 8 NIC queues paused and waited 297 µs on average for their first packet, 44
//!   of the 64 µs by which short flows exceeded their ideal FCT. The paper says nothing of
//!   the NIC; the HPCC/BFC ns-3 NIC it ran on has a queue per flow.)

use flowctl::aquarius::{QueueCmd, QueueTable};
use flowctl::wire::signal::{Frame, Signal, SignalRepr};
use rustc_hash::FxBuildHasher;
use std::collections::VecDeque;

/// The most queues a NIC has (what a signal frame can name).
pub const MAX_QUEUES: usize = flowctl::wire::signal::BITMAP_QUEUES;

/// Per-queue FIFOs of `T`, the flow → queue assignment, the paused bits and the signal
/// counters of a BFC-speaking NIC.
#[derive(Debug)]
pub struct NicQueues<T> {
    queues: Vec<VecDeque<T>>,
    /// Flow key → NIC queue and the live flows with that key (looked up per packet, never
    /// iterated: a hash map). Two flows may share a key (the same 5-tuple once the stack's
    /// source ports wrap, or a FID collision): they share the queue, and the key leaves only
    /// with the last of them, or its twin would be taken for finished and dropped from its
    /// queue on the next per-flow pause.
    flows: hashbrown::HashMap<u32, (u8, u32), FxBuildHasher>,
    /// Per queue: flows assigned.
    load: Vec<u32>,
    /// Rotating start of the search for a queue for a new flow.
    next: usize,
    /// Round-robin pointer of the service.
    rr: usize,
    /// Bit q: queue q paused by the switch.
    pub paused: u128,
    /// Signal frames honoured.
    pub signals_rx: u64,
    pub pauses_rx: u64,
    pub resumes_rx: u64,
    /// Aquarius signals naming a flow no queue holds (finished, or not this NIC's): a PAUSE
    /// of one is not applied (nothing to hold), a RESUME is (it may settle `rsvQ`).
    pub unknown_flow_signals: u64,
    /// Aquarius per-flow pauses: the upstream QueueTable of the NIC's port.
    qt: QueueTable,
    cmds: Vec<QueueCmd>,
    /// Flows held by an Aquarius FlowPause ([`apply_flows`](Self::apply_flows)).
    held: hashbrown::HashSet<u32, FxBuildHasher>,
}

impl<T> Default for NicQueues<T> {
    fn default() -> Self {
        NicQueues {
            queues: Vec::new(),
            flows: hashbrown::HashMap::default(),
            load: Vec::new(),
            next: 0,
            rr: 0,
            paused: 0,
            signals_rx: 0,
            pauses_rx: 0,
            resumes_rx: 0,
            unknown_flow_signals: 0,
            qt: QueueTable::new(0),
            cmds: Vec::new(),
            held: hashbrown::HashSet::default(),
        }
    }
}

/// The signal an Xoff signal frame carries; `None` for anything else (or a malformed one).
pub fn parse_signal(frame: &[u8]) -> Option<Signal> {
    Frame::new_checked(frame)
        .and_then(|f| SignalRepr::parse(&f))
        .ok()
        .map(|r| r.signal)
}

impl<T> NicQueues<T> {
    /// A NIC with `queues` queues (clamped to 1..=128).
    pub fn new(queues: usize) -> Self {
        let n = queues.clamp(1, MAX_QUEUES);
        NicQueues {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            load: vec![0; n],
            qt: QueueTable::new(n),
            ..Self::default()
        }
    }

    /// Number of queues.
    pub fn count(&self) -> usize {
        self.queues.len()
    }

    /// The queue of flow `key`, assigning one on first sight (see the module doc); the
    /// reserved queue while an Aquarius pause holds the flow there.
    pub fn queue_of(&mut self, key: u32) -> u8 {
        let q = self.mapped(key);
        match self.qt.steer(key, &mut self.cmds) {
            Some(r) => r,
            None => {
                self.run_cmds();
                q
            }
        }
    }

    fn mapped(&mut self, key: u32) -> u8 {
        if let Some(&(q, _)) = self.flows.get(&key) {
            return q;
        }
        let n = self.queues.len();
        // rsvQ is never mapped to while allocated: its flows count in their home queues, so
        // it looks free, and a new flow there would wait for another flow's RESUME.
        let rsv = self.qt.rsv().map_or(usize::MAX, usize::from);
        let order = (0..n)
            .map(|i| (self.next + i) % n)
            .filter(move |&q| q != rsv);
        let free = |q: &usize| self.load[*q] == 0;
        let q = order
            .clone()
            .filter(free)
            .find(|&q| !self.is_paused(q))
            .or_else(|| order.clone().find(free))
            .or_else(|| order.min_by_key(|&q| (self.is_paused(q), self.load[q])))
            .unwrap_or(0);
        self.next = (q + 1) % n;
        self.load[q] += 1;
        self.qt.flow_in(q);
        self.flows.insert(key, (q as u8, 1));
        q as u8
    }

    /// Flow `key` starts (one more live flow with that key), in the queue
    /// [`queue_of`](Self::queue_of) gives it.
    pub fn start(&mut self, key: u32) -> u8 {
        if let Some((q, live)) = self.flows.get_mut(&key) {
            *live += 1;
            let q = usize::from(*q);
            self.load[q] += 1;
            self.qt.flow_in(q);
        }
        self.queue_of(key)
    }

    /// A frame of flow `key` left queue `q` (for the per-flow pause's in-order rule).
    #[inline]
    pub fn departed(&mut self, key: u32, q: usize) {
        if !self.qt.is_quiet() {
            self.qt.departed(key, q as u8, &mut self.cmds);
            self.run_cmds();
        }
    }

    /// The Aquarius QueueTable of the NIC.
    pub fn queue_table(&self) -> &QueueTable {
        &self.qt
    }

    fn run_cmds(&mut self) {
        for c in self.cmds.drain(..) {
            match c {
                QueueCmd::Pause(q) if usize::from(q) < MAX_QUEUES => self.paused |= 1 << q,
                QueueCmd::Resume(q) if usize::from(q) < MAX_QUEUES => self.paused &= !(1 << q),
                _ => {}
            }
        }
    }

    /// The queue flow `key` holds, if any.
    pub fn assigned(&self, key: u32) -> Option<u8> {
        self.flows.get(&key).map(|&(q, _)| q)
    }

    /// Flows assigned to queue `q`.
    pub fn load(&self, q: usize) -> u32 {
        self.load.get(q).copied().unwrap_or(0)
    }

    /// Flow `key` is done: its queue no longer counts it.
    pub fn release(&mut self, key: u32) {
        if let Some((q, live)) = self.flows.get_mut(&key) {
            let q = usize::from(*q);
            *live -= 1;
            if *live == 0 {
                self.flows.remove(&key);
                self.held.remove(&key);
            }
            let l = &mut self.load[q];
            *l = l.saturating_sub(1);
            self.qt.flow_out(q);
        }
    }

    /// Whether an Aquarius FlowPause holds flow `key` ([`apply_flows`](Self::apply_flows)).
    #[inline]
    pub fn is_held(&self, key: u32) -> bool {
        !self.held.is_empty() && self.held.contains(&key)
    }

    /// Whether flow `key` in queue `q` may not send: its queue paused, or the flow held.
    #[inline]
    pub fn blocks(&self, q: usize, key: u32) -> bool {
        self.is_paused(q) || self.is_held(key)
    }

    /// Whether the switch has paused queue `q`.
    pub fn is_paused(&self, q: usize) -> bool {
        q < MAX_QUEUES && self.paused & (1 << q) != 0
    }

    /// Appends `item` to queue `q`.
    pub fn push(&mut self, q: usize, item: T) {
        self.queues[q].push_back(item);
    }

    /// Queue `q`.
    pub fn queue(&self, q: usize) -> &VecDeque<T> {
        &self.queues[q]
    }

    /// Every queue, by index.
    pub fn queues(&self) -> impl Iterator<Item = &VecDeque<T>> {
        self.queues.iter()
    }

    /// Round robin from the service pointer over the queues that are not paused and not
    /// empty: `f(q, queue)` is offered each in turn until it returns something; the pointer
    /// then moves past `q`.
    pub fn serve<R>(
        &mut self,
        mut f: impl FnMut(usize, &mut VecDeque<T>) -> Option<R>,
    ) -> Option<R> {
        self.serve_held(|q, items, _| f(q, items))
    }

    /// [`serve`](Self::serve), with `f` also told which flows FlowPauses hold (`held(key)`).
    pub fn serve_held<R>(
        &mut self,
        mut f: impl FnMut(usize, &mut VecDeque<T>, &dyn Fn(u32) -> bool) -> Option<R>,
    ) -> Option<R> {
        let n = self.queues.len();
        let held = &self.held;
        let is_held = |k: u32| !held.is_empty() && held.contains(&k);
        for i in 0..n {
            let q = (self.rr + i) % n;
            if self.paused & (1 << q) != 0 || self.queues[q].is_empty() {
                continue;
            }
            if let Some(r) = f(q, &mut self.queues[q], &is_held) {
                self.rr = (q + 1) % n;
                return Some(r);
            }
        }
        None
    }

    /// The head of the next queue in round robin that is not paused and not empty.
    pub fn pop(&mut self) -> Option<T> {
        self.serve(|_, q| q.pop_front())
    }

    /// [`pop`](Self::pop), with the queue it came from.
    pub fn pop_indexed(&mut self) -> Option<(usize, T)> {
        self.serve(|i, q| q.pop_front().map(|x| (i, x)))
    }

    /// Whether some queue is not paused and not empty.
    pub fn has_eligible(&self) -> bool {
        self.queues
            .iter()
            .enumerate()
            .any(|(q, f)| !self.is_paused(q) && !f.is_empty())
    }

    /// Applies a signal from the switch.
    pub fn apply(&mut self, s: &Signal) {
        self.apply_keyed(s, |_| None);
    }

    /// [`apply`](Self::apply) where `key_of` reads an item's flow key: a FlowPause then
    /// counts the flow's frames still in its queue, which must leave before the reserved
    /// queue runs (without it, one is assumed).
    pub fn apply_keyed(&mut self, s: &Signal, key_of: impl Fn(&T) -> Option<u32>) {
        self.signals_rx += 1;
        match *s {
            Signal::Pause(q) => {
                self.pauses_rx += 1;
                if usize::from(q) < MAX_QUEUES {
                    self.paused |= 1 << q;
                }
            }
            Signal::Resume(q) => {
                self.resumes_rx += 1;
                if usize::from(q) < MAX_QUEUES {
                    self.paused &= !(1 << q);
                }
            }
            Signal::Bitmap { count, bits } => {
                let m = if usize::from(count) >= MAX_QUEUES {
                    u128::MAX
                } else {
                    (1u128 << count) - 1
                };
                self.paused = (self.paused & !m) | (bits & m);
            }
            Signal::FlowPause { queue, fid } => {
                self.pauses_rx += 1;
                let home = self.assigned(fid);
                let empty = (0..self.queues.len())
                    .filter(|&q| self.queues[q].is_empty() && self.load[q] == 0)
                    .fold(0u128, |m, q| m | 1 << q)
                    & !self.paused;
                let named = queue.min((self.queues.len().max(1) - 1) as u8);
                let pkts = home.map_or(0, |h| {
                    let queued = self.queues[usize::from(h)]
                        .iter()
                        .filter(|x| key_of(x) == Some(fid))
                        .count() as u32;
                    let keyed = self.queues[usize::from(h)]
                        .front()
                        .is_some_and(|x| key_of(x).is_some());
                    if keyed {
                        queued.max(1)
                    } else {
                        1
                    }
                });
                self.qt
                    .on_pause(fid, named, home, pkts, empty, false, &mut self.cmds);
                self.run_cmds();
            }
            Signal::FlowResume { fid, .. } => {
                self.resumes_rx += 1;
                self.qt.on_resume(fid, &mut self.cmds);
                self.run_cmds();
            }
        }
    }

    /// Applies `s` to a NIC whose queue items are flows, each making its packets when served
    /// (the host stack): a FlowPause holds exactly the named flow, a FlowResume lets it go
    /// again (see the module doc); no queue is paused and no flow moves. A FlowPause naming
    /// no live flow holds nothing. Other signals as [`apply`](Self::apply).
    pub fn apply_flows(&mut self, s: &Signal) {
        match *s {
            Signal::FlowPause { fid, .. } | Signal::FlowResume { fid, .. } => {
                self.signals_rx += 1;
                let pause = matches!(s, Signal::FlowPause { .. });
                if !self.flows.contains_key(&fid) {
                    self.unknown_flow_signals += 1;
                }
                if pause {
                    if self.flows.contains_key(&fid) {
                        self.pauses_rx += 1;
                        self.held.insert(fid);
                    }
                } else {
                    self.resumes_rx += 1;
                    self.held.remove(&fid);
                }
            }
            _ => self.apply(s),
        }
    }

    /// Moves every item to the queue `to` gives it (items keep their relative order; a
    /// moved one goes behind what its new queue holds). Pyrrha's NIC (`super::pyrrha`) moves
    /// its flows between the OQ and the IQs of the roots they cross this way.
    pub fn regroup(&mut self, mut to: impl FnMut(&T) -> usize) {
        let n = self.queues.len();
        let mut moves = Vec::new();
        for q in 0..n {
            let mut k = 0;
            while k < self.queues[q].len() {
                let t = to(&self.queues[q][k]).min(n - 1);
                if t == q {
                    k += 1;
                } else if let Some(item) = self.queues[q].remove(k) {
                    moves.push((t, item));
                }
            }
        }
        for (t, item) in moves {
            self.queues[t].push_back(item);
        }
    }

    /// Applies a received Xoff signal frame; false if it is not one.
    pub fn on_signal(&mut self, frame: &[u8]) -> bool {
        self.on_signal_keyed(frame, |_| None)
    }

    /// [`on_signal`](Self::on_signal) with [`apply_keyed`](Self::apply_keyed)'s `key_of`.
    pub fn on_signal_keyed(&mut self, frame: &[u8], key_of: impl Fn(&T) -> Option<u32>) -> bool {
        match parse_signal(frame) {
            Some(s) => {
                self.apply_keyed(&s, key_of);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(s: Signal) -> [u8; 60] {
        let mut f = [0u8; 60];
        SignalRepr {
            dst_addr: [2, 0, 0, 0, 0, 1],
            src_addr: [2, 0, 0, 0, 0, 2],
            signal: s,
        }
        .emit_into(&mut f);
        f
    }

    #[test]
    fn without_release_flow_k_gets_queue_k_mod_n() {
        let mut n: NicQueues<()> = NicQueues::new(3);
        let got: Vec<u8> = (100..107).map(|k| n.queue_of(k)).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(n.queue_of(101), 1, "sticky");
        assert_eq!((n.load(0), n.load(1), n.load(2)), (3, 2, 2));
    }

    #[test]
    fn free_unpaused_first_then_free_then_least_loaded() {
        let mut n: NicQueues<()> = NicQueues::new(4);
        for k in 0..4 {
            assert_eq!(n.queue_of(k), k as u8);
        }
        n.release(1);
        n.release(2);
        assert!(n.on_signal(&frame(Signal::Pause(1))));
        // Free: 1 (paused) and 2; the unpaused one first.
        assert_eq!(n.queue_of(10), 2);
        assert_eq!(n.queue_of(11), 1);
        // All taken: least loaded from the rotating start (past queue 1), but not the paused
        // queue 1 while unpaused ones are as loaded.
        n.release(0);
        n.queue_of(12); // free queue 0
        n.queue_of(13); // loads 1,1,1,1 -> from next = 1, paused 1 skipped
        assert_eq!(n.assigned(13), Some(2));
        n.queue_of(14); // loads 1,1,2,1 -> 3
        assert_eq!(n.assigned(14), Some(3));
        n.queue_of(15); // loads 1,1,2,2 -> 0
        assert_eq!(n.assigned(15), Some(0));
        // Every unpaused queue is more loaded than the paused one: still an unpaused one.
        n.queue_of(16); // loads 2,1,2,2 -> from next = 1, paused 1 skipped: 2
        assert_eq!(n.assigned(16), Some(2));
        // All paused: the least loaded.
        for q in [0, 2, 3] {
            assert!(n.on_signal(&frame(Signal::Pause(q))));
        }
        n.queue_of(17);
        assert_eq!(n.assigned(17), Some(1));
        assert_eq!(n.assigned(99), None);
    }

    #[test]
    fn signals_and_round_robin() {
        let mut n: NicQueues<u32> = NicQueues::new(3);
        for (q, x) in [(0, 1), (0, 2), (1, 3), (2, 4)] {
            n.push(q, x);
        }
        n.apply(&Signal::Pause(1));
        assert_eq!((n.pop(), n.pop(), n.pop()), (Some(1), Some(4), Some(2)));
        assert!(!n.has_eligible());
        n.apply(&Signal::Resume(1));
        assert_eq!(n.pop(), Some(3));
        n.apply(&Signal::Bitmap {
            count: 2,
            bits: 0b10,
        });
        assert_eq!(n.paused, 0b10);
        n.apply(&Signal::Pause(2));
        n.apply(&Signal::Bitmap { count: 2, bits: 0 });
        assert_eq!(n.paused, 0b100, "a bitmap leaves queues it does not cover");
        assert_eq!((n.signals_rx, n.pauses_rx, n.resumes_rx), (5, 2, 1));
        assert!(!n.on_signal(&[0u8; 60]));
    }

    /// Aquarius: the NIC holds exactly the paused flow. Alone in its queue: the queue is
    /// paused. Sharing it: the flow's later frames go to a reserved queue, paused, while the
    /// other flow of its queue continues; the reserved queue runs once the flow is resumed
    /// and its earlier frames have left.
    #[test]
    fn per_flow_pause_holds_exactly_that_flow() {
        let mut n: NicQueues<(u32, u32)> = NicQueues::new(4);
        // Flows 7 and 8 share queue 0 (2 queues' worth of flows into a 4-queue NIC: 7 → 0,
        // 9 → 1, 10 → 2, 11 → 3, then 8 → the least loaded from the rotating start, 0).
        for k in [7, 9, 10, 11, 8] {
            n.queue_of(k);
        }
        assert_eq!((n.assigned(7), n.assigned(8)), (Some(0), Some(0)));
        n.release(10); // queue 2 free: the reserved queue's candidate
        for (k, s) in [(7, 0), (8, 0), (7, 1), (9, 0)] {
            let q = n.queue_of(k);
            n.push(usize::from(q), (k, s));
        }
        // Flow 9 alone in queue 1: its queue is paused.
        assert!(n.on_signal(&frame(Signal::FlowPause { queue: 1, fid: 9 })));
        assert_eq!(n.paused, 0b10);
        // Flow 7 shares queue 0 with flow 8: moved to queue 2, which is paused.
        n.apply_keyed(&Signal::FlowPause { queue: 0, fid: 7 }, |x| Some(x.0));
        assert_eq!(n.queue_table().rsv(), Some(2));
        assert_eq!(n.paused, 0b110);
        let q = n.queue_of(7);
        assert_eq!(q, 2);
        n.push(2, (7, 2));
        let q8 = n.queue_of(8);
        n.push(usize::from(q8), (8, 1));
        assert_eq!(q8, 0, "the victim stays in its queue");
        // Service: queue 0 runs (7's frames already there leave, then 8's); 2 and 1 wait.
        let mut out = Vec::new();
        while let Some((q, (k, s))) = n.pop_indexed() {
            n.departed(k, q);
            out.push((k, s));
        }
        assert_eq!(out, vec![(7, 0), (8, 0), (7, 1), (8, 1)]);
        // Resumed before its two earlier frames left, the reserved queue would have waited;
        // they have left, so it runs at once, and flow 9's queue too.
        n.apply(&Signal::FlowResume { queue: 0, fid: 7 });
        n.apply(&Signal::FlowResume { queue: 1, fid: 9 });
        assert_eq!(n.paused, 0);
        let (q, x) = n.pop_indexed().unwrap();
        n.departed(x.0, q);
        assert_eq!((q, x), (1, (9, 0)));
        let (q, x) = n.pop_indexed().unwrap();
        n.departed(x.0, q);
        assert_eq!((q, x), (2, (7, 2)));
        // Flow 7 has left the reserved queue: it is released, the flow maps home again.
        assert_eq!(n.queue_table().rsv(), None);
        assert_eq!(n.queue_of(7), 0);
        assert_eq!((n.pauses_rx, n.resumes_rx), (2, 2));
    }

    #[test]
    fn regroup_moves_items_keeping_their_order() {
        let mut n: NicQueues<u32> = NicQueues::new(3);
        for (q, x) in [(0, 1), (0, 2), (0, 3), (1, 4), (2, 5)] {
            n.push(q, x);
        }
        // Odd items to queue 2 (behind 5), even ones to queue 0; 9 clamps to the last queue.
        n.regroup(|&x| if x % 2 == 1 { 9 } else { 0 });
        let q = |i: usize| n.queue(i).iter().copied().collect::<Vec<_>>();
        assert_eq!((q(0), q(1), q(2)), (vec![2, 4], vec![], vec![5, 1, 3]));
    }

    /// A 4-queue NIC whose queues hold flows (items are flow keys): 7 and 8 share queue 0
    /// (as above), 9 has queue 1, 11 queue 3; queue 2 is free (10 started there and is done).
    fn four_queues_of_flows() -> NicQueues<u32> {
        let mut n: NicQueues<u32> = NicQueues::new(4);
        for k in [7, 9, 10, 11, 8] {
            n.start(k);
        }
        n.release(10);
        for k in [7, 8, 9, 11] {
            let q = n.assigned(k).unwrap();
            n.push(usize::from(q), k);
        }
        n
    }

    /// The host stack's NIC, whose queues hold flows: a FlowPause holds exactly the named
    /// flow, alone in its queue or not, and pauses no queue, so the flow sharing its queue
    /// (and any flow joining it later) keeps being served; FlowResume lets it go; a PAUSE
    /// naming no live flow holds nothing; a done flow's hold goes with it.
    #[test]
    fn a_flow_pause_holds_exactly_that_flow() {
        let mut n = four_queues_of_flows();
        n.apply_flows(&Signal::FlowPause { queue: 1, fid: 9 });
        n.apply_flows(&Signal::FlowPause { queue: 0, fid: 7 });
        assert_eq!(n.paused, 0, "no queue paused");
        assert!(n.is_held(7) && n.is_held(9) && !n.is_held(8) && !n.is_held(11));
        assert!(n.blocks(0, 7) && !n.blocks(0, 8));
        // Served: 8 (queue 0) and 11 (queue 3) only, in turn; 9 alone in queue 1 is skipped.
        let served: Vec<u32> = (0..4)
            .filter_map(|_| n.serve_held(|_, q, held| q.iter().copied().find(|&k| !held(k))))
            .collect();
        assert_eq!(served, vec![8, 11, 8, 11]);
        // A duplicate PAUSE changes nothing; RESUME lets 7 go.
        n.apply_flows(&Signal::FlowPause { queue: 0, fid: 7 });
        n.apply_flows(&Signal::FlowResume { queue: 0, fid: 7 });
        assert!(!n.is_held(7) && n.is_held(9));
        assert_eq!((n.pauses_rx, n.resumes_rx), (3, 1));
        // A PAUSE naming no flow of this NIC holds nothing.
        n.apply_flows(&Signal::FlowPause { queue: 3, fid: 99 });
        assert!(!n.is_held(99));
        assert_eq!((n.pauses_rx, n.unknown_flow_signals), (3, 1));
        // Done: the hold goes with the flow.
        n.release(9);
        assert!(!n.is_held(9));
        // BFC's queue signals still pause queues.
        n.apply_flows(&Signal::Pause(2));
        assert_eq!(n.paused, 0b100);
    }

    /// While rsvQ is allocated (a NIC of frames, `apply_keyed`) no new flow is mapped to it
    /// (it looks free: its flows count in their home queues), and two live flows with one
    /// key keep it, and its hold, until both are done.
    #[test]
    fn rsvq_is_not_mapped_and_twin_keys_outlive_one_release() {
        let mut n = four_queues_of_flows();
        n.apply_keyed(&Signal::FlowPause { queue: 0, fid: 7 }, |&k| Some(k));
        assert_eq!(n.queue_table().rsv(), Some(2));
        // Queue 2 has no flow of its own, but it is rsvQ (paused): a new flow goes to the
        // least-loaded unpaused queue instead (1 or 3, one flow each).
        let q = n.start(20);
        assert!(q == 1 || q == 3, "new flow mapped to {q}");
        // A second live flow with key 11 (the same 5-tuple): one release keeps the key and its
        // queue, and the next per-flow pause does not take the other for finished.
        n.start(11);
        assert_eq!(n.load(3), 2 + u32::from(q == 3));
        n.apply_flows(&Signal::FlowPause { queue: 3, fid: 11 });
        n.release(11);
        assert_eq!(n.assigned(11), Some(3));
        assert!(n.is_held(11), "the live twin lost its hold");
        n.release(11);
        assert_eq!(n.assigned(11), None);
        assert!(!n.is_held(11));
    }
}

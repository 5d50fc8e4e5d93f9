//! The fabric's event queue: events in (time, sequence number) order. The sequence number
//! makes every key unique, so events due at the same instant come out in the order they were
//! scheduled and a run never depends on how the queue happens to break ties.
//!
//! The fabric never schedules an event before the one it is handling (a wakeup, timer or
//! arrival is due now or later), so every key pushed is larger than every key popped: a
//! monotone queue, which a calendar queue (a timing wheel, Brown 1988) serves in O(1). Events
//! due within [`HORIZON`] of the last one taken go to the wheel: one bucket per [`BUCKET_PS`]
//! of virtual time, each a list of events in key order (a new event almost always goes at the
//! end of its bucket: it has the largest sequence number), and a bitmap of the buckets that
//! hold any. The few due later (flow starts, pause and watchdog timers, slow links) wait in
//! a 4-ary min-heap. `pop` takes the smaller of the wheel's first event and the heap's, so the
//! order is exactly the (time, sequence) order of a single heap.
//!
//! The wheel stores no sequence numbers: a bucket keeps its events in time order and puts a
//! new one after every event due at the same time or earlier, which is sequence order among
//! equal times. Between the wheel and the heap a tie in time goes to the heap: an event goes
//! to the heap when it is due at least [`HORIZON`] after the floor's bucket, and the floor only
//! grows, so every heap event due at `t` was pushed before every wheel event due at `t`.
//!
//! The buckets' lists are linked through one pool of nodes, reused last-freed-first, so the
//! memory the wheel touches grows with the events pending (tens to hundreds), not with the
//! horizon: a bucket per vector kept one vector's worth of cold memory per bucket, and each
//! push and pop missed the cache on it (`perf` put 9 % of the fabric's cycles on one store
//! in `push`).
//!
//! Packet-level events at 100 Gbit/s come ~1 ns apart in virtual time and are scheduled at
//! most a few µs ahead (serialization + propagation, the next frame of a source), so nearly
//! all of them take the wheel.

/// Virtual time each wheel bucket covers, ps (2^12: about 4 ns).
pub const BUCKET_PS: u64 = 1 << SHIFT;
const SHIFT: u32 = 12;
/// Buckets in the wheel.
const BUCKETS: usize = 1024;
const WORDS: usize = BUCKETS / 64;
/// How far ahead of the last event taken an event may be due and still take the wheel, ps.
pub const HORIZON: u64 = (BUCKETS as u64) << SHIFT;
/// Where the earliest event is when it is in the far heap.
const FAR: usize = usize::MAX;
/// No node (end of a list).
const NIL: u32 = u32::MAX;

/// An event in the wheel: its time, the next node of its bucket's list (or of the free
/// list), the item.
#[derive(Debug, Clone, Copy)]
struct Node<T> {
    t: u64,
    next: u32,
    item: T,
}

/// A monotone priority queue of `(time, seq)`-keyed items.
#[derive(Debug, Clone)]
pub struct EventQueue<T> {
    /// Every bucket's first and last node (`NIL`: empty).
    ends: Box<[(u32, u32)]>,
    /// The wheel's nodes, pending or free.
    nodes: Vec<Node<T>>,
    /// The free list's first node.
    free: u32,
    /// Bit `b` set: bucket `b` holds an event.
    occupied: Box<[u64; WORDS]>,
    /// Events due at or after the wheel's horizon when they were pushed, keyed by
    /// (time, sequence number).
    far: Heap<T>,
    /// Time of the last event taken: nothing may be scheduled before it.
    floor: u64,
    /// Whether `first_t` and `first_at` name the earliest event (never while empty).
    known: bool,
    /// The earliest event's time and place (wheel bucket, or [`FAR`]), when `known`.
    first_t: u64,
    first_at: usize,
    /// Events in the wheel.
    in_wheel: usize,
    len: usize,
    /// Sequence numbers of the far heap's keys.
    seq: u64,
}

impl<T: Copy> Default for EventQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> EventQueue<T> {
    pub fn new() -> Self {
        EventQueue {
            ends: vec![(NIL, NIL); BUCKETS].into_boxed_slice(),
            nodes: Vec::new(),
            free: NIL,
            occupied: Box::new([0; WORDS]),
            far: Heap::default(),
            floor: 0,
            known: false,
            first_t: 0,
            first_at: FAR,
            in_wheel: 0,
            len: 0,
            seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A node holding `(t, item)`, the last one freed if any.
    #[inline]
    fn node(&mut self, t: u64, item: T) -> u32 {
        let n = Node { t, next: NIL, item };
        if self.free == NIL {
            self.nodes.push(n);
            (self.nodes.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = n;
            i
        }
    }

    /// Schedules `item` at time `t`, after everything already scheduled at `t`. `t` must not
    /// be before the last event popped.
    #[inline]
    pub fn push(&mut self, t: u64, item: T) {
        assert!(
            t >= self.floor,
            "event at {t} ps scheduled before {} ps",
            self.floor
        );
        let was_empty = self.len == 0;
        self.len += 1;
        // Every event in the wheel is due in [start of the floor's bucket, that + HORIZON):
        // one lap of the ring, so a bucket never holds events of two laps.
        let at = if t - (self.floor & !(BUCKET_PS - 1)) >= HORIZON {
            self.seq += 1;
            self.far
                .push((u128::from(t) << 64) | u128::from(self.seq), item);
            FAR
        } else {
            let b = ((t >> SHIFT) as usize) & (BUCKETS - 1);
            let n = self.node(t, item);
            let (head, tail) = self.ends[b];
            if tail == NIL {
                self.ends[b] = (n, n);
                self.occupied[b / 64] |= 1 << (b % 64);
            } else if self.nodes[tail as usize].t <= t {
                // After every event due at `t` or earlier: (time, push) order.
                self.nodes[tail as usize].next = n;
                self.ends[b].1 = n;
            } else if self.nodes[head as usize].t > t {
                self.nodes[n as usize].next = head;
                self.ends[b].0 = n;
            } else {
                // Between two: after the last event due at `t` or earlier (the tail is
                // due later, so there is a next node all along).
                let mut p = head as usize;
                loop {
                    let next = self.nodes[p].next as usize;
                    if self.nodes[next].t > t {
                        break;
                    }
                    p = next;
                }
                self.nodes[n as usize].next = self.nodes[p].next;
                self.nodes[p].next = n;
            }
            self.in_wheel += 1;
            b
        };
        // A tie leaves the known first event first: it was pushed earlier, and a heap
        // event never ties with an earlier-pushed wheel event (see the module docs).
        if was_empty || (self.known && t < self.first_t) {
            self.known = true;
            self.first_t = t;
            self.first_at = at;
        }
    }

    /// The first occupied bucket in ring order from the floor's.
    #[inline]
    fn first_bucket(&self) -> Option<usize> {
        if self.in_wheel == 0 {
            return None;
        }
        let cur = ((self.floor >> SHIFT) as usize) & (BUCKETS - 1);
        let (w0, bit) = (cur / 64, cur % 64);
        let here = self.occupied[w0] & (!0u64 << bit);
        if here != 0 {
            return Some(w0 * 64 + here.trailing_zeros() as usize);
        }
        for k in 1..=WORDS {
            let w = (w0 + k) % WORDS;
            let mut bits = self.occupied[w];
            if k == WORDS {
                // Back at the floor's word: only the buckets before the floor's (a lap on).
                bits &= !(!0u64 << bit);
            }
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
        }
        None
    }

    /// Finds the earliest event (`known`); false if the queue is empty.
    #[inline]
    fn find_first(&mut self) -> bool {
        self.known || self.find_first_slow()
    }

    #[inline(never)]
    fn find_first_slow(&mut self) -> bool {
        if self.len == 0 {
            return false;
        }
        let far = self.far.peek_key().map(|k| (k >> 64) as u64);
        let (t, at) = match self.first_bucket() {
            Some(b) => {
                let tw = self.nodes[self.ends[b].0 as usize].t;
                // A tie goes to the heap (pushed earlier).
                match far {
                    Some(tf) if tf <= tw => (tf, FAR),
                    _ => (tw, b),
                }
            }
            None => (far.expect("a non-empty queue"), FAR),
        };
        self.known = true;
        self.first_t = t;
        self.first_at = at;
        true
    }

    /// Time of the earliest item.
    #[inline]
    pub fn peek_time(&mut self) -> Option<u64> {
        self.find_first().then_some(self.first_t)
    }

    /// The earliest item and its time.
    #[inline]
    pub fn peek(&mut self) -> Option<(u64, T)> {
        if !self.find_first() {
            return None;
        }
        let item = if self.first_at == FAR {
            self.far.peek()?
        } else {
            self.nodes[self.ends[self.first_at].0 as usize].item
        };
        Some((self.first_t, item))
    }

    /// Removes the earliest item.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, T)> {
        if !self.find_first() {
            return None;
        }
        let (t, b) = (self.first_t, self.first_at);
        self.known = false;
        let item = if b == FAR {
            self.far.pop()?.1
        } else {
            let h = self.ends[b].0;
            let node = self.nodes[h as usize];
            self.ends[b].0 = node.next;
            if node.next == NIL {
                self.ends[b].1 = NIL;
                self.occupied[b / 64] &= !(1 << (b % 64));
            } else {
                // The bucket's next event is the wheel's earliest (its bucket is the first
                // occupied one from the floor's, and a bucket holds one lap): no search for
                // it, only the far heap's first to compare (a tie goes to the heap).
                let tw = self.nodes[node.next as usize].t;
                let far = self.far.peek_key().map(|k| (k >> 64) as u64);
                (self.first_t, self.first_at) = match far {
                    Some(tf) if tf <= tw => (tf, FAR),
                    _ => (tw, b),
                };
                self.known = true;
            }
            self.nodes[h as usize].next = self.free;
            self.free = h;
            self.in_wheel -= 1;
            node.item
        };
        self.len -= 1;
        self.floor = t;
        Some((t, item))
    }
}

/// A 4-ary min-heap on unique u128 keys.
#[derive(Debug, Clone)]
struct Heap<T> {
    heap: Vec<(u128, T)>,
}

impl<T> Default for Heap<T> {
    fn default() -> Self {
        Heap { heap: Vec::new() }
    }
}

impl<T: Copy> Heap<T> {
    #[inline]
    fn peek_key(&self) -> Option<u128> {
        self.heap.first().map(|e| e.0)
    }

    #[inline]
    fn peek(&self) -> Option<T> {
        self.heap.first().map(|e| e.1)
    }

    fn push(&mut self, key: u128, item: T) {
        let mut i = self.heap.len();
        self.heap.push((key, item));
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.heap[parent].0 <= key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = (key, item);
    }

    fn pop(&mut self) -> Option<(u128, T)> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(last);
        }
        let top = self.heap[0];
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let c = 4 * i + 1;
            if c >= n {
                break;
            }
            let end = (c + 4).min(n);
            let mut m = c;
            for j in c + 1..end {
                if self.heap[j].0 < self.heap[m].0 {
                    m = j;
                }
            }
            if self.heap[m].0 >= last.0 {
                break;
            }
            self.heap[i] = self.heap[m];
            i = m;
        }
        self.heap[i] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::rng::Rng;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        let mut r = Rng::new(3);
        let mut want = Vec::new();
        for i in 0..2000u32 {
            let t = r.upto(50);
            q.push(t, i);
            want.push((t, i));
        }
        want.sort();
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, want);
    }

    /// Pushes and pops interleaved as the fabric does them (never before the last pop), with
    /// delays from 0 to many horizons and many ties: the order is a reference heap's on
    /// (time, sequence), `len` and `peek_time` agree at every step.
    #[test]
    fn matches_a_heap_on_time_and_sequence() {
        for seed in 1..=8 {
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut r = Rng::new(seed);
            let (mut now, mut seq, mut popped) = (0u64, 0u64, 0);
            while popped < 20_000 {
                let pushes = r.upto(3);
                for _ in 0..pushes {
                    let d = match r.upto(10) {
                        0 => 0,
                        1 => r.upto(BUCKET_PS),
                        2 => HORIZON - BUCKET_PS + r.upto(2 * BUCKET_PS),
                        3 => r.upto(20 * HORIZON),
                        4 => BUCKET_PS * r.upto(4),
                        _ => r.upto(3 * HORIZON / 4),
                    };
                    seq += 1;
                    q.push(now + d, seq);
                    reference.push(Reverse((now + d, seq)));
                }
                assert_eq!(q.len(), reference.len());
                assert_eq!(q.peek_time(), reference.peek().map(|r| r.0 .0));
                if r.upto(4) != 0 || pushes == 0 {
                    let got = q.pop();
                    let want = reference.pop().map(|r| r.0);
                    assert_eq!(got, want, "seed {seed}, pop {popped}");
                    if let Some((t, _)) = got {
                        now = t;
                        popped += 1;
                    } else if pushes == 0 {
                        seq += 1;
                        q.push(now + 1, seq);
                        reference.push(Reverse((now + 1, seq)));
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "scheduled before")]
    fn refuses_an_event_in_the_past() {
        let mut q = EventQueue::new();
        q.push(5000, 1u32);
        q.push(9000, 2);
        assert_eq!(q.pop(), Some((5000, 1)));
        q.push(4999, 3);
    }
}

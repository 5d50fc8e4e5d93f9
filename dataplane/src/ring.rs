//! A FIFO of `Copy` items in a power-of-two array, for the per-packet queues of the egress
//! path (a port's data and control queues, its emulated wire).
//!
//! `std`'s `VecDeque` wraps an index with a compare against its capacity and reads the
//! capacity through its raw buffer on every push; here the capacity is a power of two and an
//! index wraps with one mask. On the decision path (`bench/callgrind.sh`) the deques of one
//! packet's enqueue, dequeue, wire start and wire release were ~90 instructions.

/// A growable ring buffer; grows by doubling, never shrinks (as `VecDeque`).
#[derive(Debug, Clone)]
pub struct Ring<T: Copy> {
    /// Empty, or a power-of-two number of slots.
    buf: Vec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            buf: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy> Ring<T> {
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn push_back(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        let i = (self.head + self.len) & (self.buf.len() - 1);
        self.buf[i] = v;
        self.len += 1;
    }

    /// Doubles the slots (at least 8), the items moved to the front in order; the new slots
    /// hold copies of `fill` until written.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, fill: T) {
        let cap = (self.buf.len() * 2).max(8);
        let mut b = Vec::with_capacity(cap);
        let mask = self.buf.len().wrapping_sub(1);
        b.extend((0..self.len).map(|i| self.buf[(self.head + i) & mask]));
        b.resize(cap, fill);
        self.buf = b;
        self.head = 0;
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        if self.len == 0 {
            None
        } else {
            Some(&self.buf[self.head])
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head];
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
        Some(v)
    }

    /// Removes the front item, which the caller knows is there (panics otherwise). (Not
    /// `pop_front().expect(..)`: the item comes back without an `Option` around it, which
    /// was re-copied in misaligned pieces, and the emptiness is checked once.)
    #[inline]
    pub fn take_front(&mut self) -> T {
        assert!(self.len != 0, "take_front on an empty ring");
        let v = self.buf[self.head];
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
        v
    }

    /// Takes every item out, oldest first.
    pub fn drain(&mut self) -> std::vec::IntoIter<T> {
        let mut v = Vec::with_capacity(self.len);
        while let Some(x) = self.pop_front() {
            v.push(x);
        }
        v.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Pushes, pops and takes in a pattern that wraps and grows the ring many times: it holds
    /// what a `VecDeque` fed the same operations holds.
    #[test]
    fn behaves_as_a_deque() {
        let mut r: Ring<u32> = Ring::default();
        let mut d: VecDeque<u32> = VecDeque::new();
        let mut x = 1u64;
        for i in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (x >> 33) % 5 < 3 {
                r.push_back(i);
                d.push_back(i);
            } else if i % 2 == 0 || d.is_empty() {
                assert_eq!(r.pop_front(), d.pop_front());
            } else {
                assert_eq!(Some(r.take_front()), d.pop_front());
            }
            assert_eq!((r.len(), r.front()), (d.len(), d.front()));
            if i % 4999 == 0 {
                assert!(r.drain().eq(d.drain(..)));
            }
        }
        assert!(r.drain().eq(d.drain(..)));
        assert!(r.is_empty());
    }
}

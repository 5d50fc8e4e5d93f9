//! The fabric's event queue: a 4-ary min-heap on (time, sequence number). The sequence number
//! makes every key unique, so events due at the same instant come out in the order they were
//! scheduled and a run never depends on how the heap happens to break ties.

/// A min-heap of `(time, seq)`-keyed items.
#[derive(Debug, Clone)]
pub struct EventQueue<T> {
    heap: Vec<(u128, T)>,
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
            heap: Vec::new(),
            seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Time of the earliest item.
    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.first().map(|e| (e.0 >> 64) as u64)
    }

    /// Schedules `item` at time `t`, after everything already scheduled at `t`.
    #[inline]
    pub fn push(&mut self, t: u64, item: T) {
        self.seq += 1;
        let key = (u128::from(t) << 64) | u128::from(self.seq);
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

    /// Removes the earliest item.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, T)> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(((last.0 >> 64) as u64, last.1));
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
        Some(((top.0 >> 64) as u64, top.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::rng::Rng;

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
}

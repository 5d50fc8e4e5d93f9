//! Per-port queue sets and the egress scheduler.
//!
//! Every port has a strict-priority control queue for signal frames (PFC, Xoff signals), never
//! paused and always served first, and 1–127 FIFO data queues. The scheduler serves the
//! configured strict queues (higher index first), then deficit round robin among the others,
//! skipping any queue whose bit is set in the port's AFC pause register.

use crate::config::{PortSpec, SchedKind};
use crate::frame::Pkt;
use crate::ring::Ring;
use flowctl::PauseRegs;

/// One FIFO with its byte count.
#[derive(Debug, Default)]
pub struct Fifo {
    pkts: Ring<Pkt>,
    bytes: u64,
}

impl Fifo {
    #[inline]
    pub fn push(&mut self, p: Pkt) {
        self.bytes += u64::from(p.len);
        self.pkts.push_back(p);
    }

    /// Removes the head, which the caller knows is there. (Copied out of the ring and then
    /// popped, not returned as `Option<Pkt>`: that wrapper was re-copied in misaligned
    /// pieces, a store-forwarding stall per packet on the egress path.)
    #[inline]
    fn take_head(&mut self) -> Pkt {
        let p = self.pkts.take_front();
        self.bytes -= u64::from(p.len);
        p
    }

    #[inline]
    pub fn head_len(&self) -> Option<u32> {
        self.pkts.front().map(|p| p.len)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    pub fn drain(&mut self) -> impl Iterator<Item = Pkt> {
        self.bytes = 0;
        self.pkts.drain()
    }
}

/// What the scheduler chose to serve: the control queue or data queue `q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Ctrl,
    Data(usize),
}

impl Pick {
    /// The data queue, `None` for the control queue.
    pub fn data(self) -> Option<usize> {
        match self {
            Pick::Ctrl => None,
            Pick::Data(q) => Some(q),
        }
    }
}

/// A bitmap of data queues, bit q for queue q: `u128` for up to 127 queues, `u64` for ports
/// with at most 64, where the scheduler's bit arithmetic then takes one word.
trait QueueBits: Copy + Eq + std::ops::BitAnd<Output = Self> {
    const ZERO: Self;
    /// The low bits of `x` (all of it for `u128`).
    fn from_u128(x: u128) -> Self;
    /// Queues `rr` and above (`rr` below the width).
    fn at_or_above(rr: usize) -> Self;
    /// The lowest set bit (not zero).
    fn lowest(self) -> usize;
    /// The highest set bit (not zero).
    fn highest(self) -> usize;
}

impl QueueBits for u64 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn from_u128(x: u128) -> Self {
        x as u64
    }
    #[inline(always)]
    fn at_or_above(rr: usize) -> Self {
        !0u64 << rr
    }
    #[inline(always)]
    fn lowest(self) -> usize {
        self.trailing_zeros() as usize
    }
    #[inline(always)]
    fn highest(self) -> usize {
        63 - self.leading_zeros() as usize
    }
}

impl QueueBits for u128 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn from_u128(x: u128) -> Self {
        x
    }
    #[inline(always)]
    fn at_or_above(rr: usize) -> Self {
        !0u128 << rr
    }
    #[inline(always)]
    fn lowest(self) -> usize {
        self.trailing_zeros() as usize
    }
    #[inline(always)]
    fn highest(self) -> usize {
        127 - self.leading_zeros() as usize
    }
}

/// The queues of one egress port and their scheduler state.
#[derive(Debug)]
pub struct QueueSet {
    pub ctrl: Fifo,
    pub data: Vec<Fifo>,
    /// Bitmap of non-empty data queues.
    nonempty: u128,
    strict_mask: u128,
    /// At most 64 data queues: the scheduler works on one 64-bit word.
    narrow: bool,
    kind: SchedKind,
    quantum: u64,
    deficit: Vec<u64>,
    rr: usize,
    granted: bool,
}

impl QueueSet {
    pub fn new(spec: &PortSpec) -> Self {
        let n = spec.queues;
        let strict_mask = match spec.scheduler {
            SchedKind::Sp => (0..n).fold(0u128, |m, q| m | (1 << q)),
            SchedKind::Drr => spec.strict.iter().fold(0u128, |m, &q| m | (1 << q)),
        };
        QueueSet {
            ctrl: Fifo::default(),
            data: (0..n).map(|_| Fifo::default()).collect(),
            nonempty: 0,
            strict_mask,
            narrow: n <= 64,
            kind: spec.scheduler,
            quantum: spec.quantum,
            deficit: vec![0; n],
            rr: 0,
            granted: false,
        }
    }

    #[inline]
    pub fn push(&mut self, q: usize, p: Pkt) {
        self.data[q].push(p);
        self.nonempty |= 1 << q;
    }

    /// Bitmap of non-empty data queues.
    pub fn nonempty(&self) -> u128 {
        self.nonempty
    }

    /// Whether any data queue holds a packet that is not paused at `now`.
    #[inline]
    pub fn has_eligible(&self, pause: &PauseRegs, now: u64) -> bool {
        !self.ctrl.is_empty() || self.eligible(pause, now) != 0
    }

    #[inline]
    fn eligible(&self, pause: &PauseRegs, now: u64) -> u128 {
        if self.nonempty == 0 {
            return 0;
        }
        self.nonempty & !pause.paused_mask(now)
    }

    /// The queue to serve next (control first, then strict, then DRR among the eligible data
    /// queues); `None` if nothing is eligible. Moves the DRR pointer, no packet.
    ///
    /// The checks that end most calls (a control frame waiting, no data queued: half the
    /// `service` calls of a port find it idle) are inlined into the caller; the data-queue
    /// choice, with the pause registers' scan and the 128-bit DRR pointer arithmetic, stays
    /// out of line. (All of it out of line, an idle port's call paid the prologue of the
    /// whole scheduler: six saved registers and a stack frame.)
    #[inline]
    pub fn pick(&mut self, pause: &PauseRegs, now: u64) -> Option<Pick> {
        if !self.ctrl.is_empty() {
            return Some(Pick::Ctrl);
        }
        if self.nonempty == 0 {
            return None;
        }
        self.pick_data(pause, now)
    }

    /// `pick` among the data queues, some of which are non-empty.
    #[inline(never)]
    fn pick_data(&mut self, pause: &PauseRegs, now: u64) -> Option<Pick> {
        let el = self.nonempty & !pause.paused_mask(now);
        if el == 0 {
            return None;
        }
        let q = if self.narrow {
            self.pick_in(el as u64)
        } else {
            self.pick_in(el)
        };
        Some(Pick::Data(q))
    }

    /// The data queue to serve among the eligible ones in `el` (not empty): the highest
    /// eligible strict queue, else DRR among the others. `W` is one word (`u64`) for ports
    /// with up to 64 data queues, where the 128-bit arithmetic would be wasted.
    #[inline(always)]
    fn pick_in<W: QueueBits>(&mut self, el: W) -> usize {
        let strict = el & W::from_u128(self.strict_mask);
        if strict != W::ZERO {
            // Strict queues go highest index first.
            return strict.highest();
        }
        debug_assert_eq!(self.kind, SchedKind::Drr);
        self.pick_drr(el)
    }

    /// Dequeues the head of the queue `pick` chose, charging it to the queue's DRR deficit.
    #[inline]
    pub fn take(&mut self, pick: Pick) -> Pkt {
        let q = match pick {
            Pick::Ctrl => return self.ctrl.take_head(),
            Pick::Data(q) => q,
        };
        let fifo = &mut self.data[q];
        let p = fifo.take_head();
        let emptied = fifo.is_empty();
        let bit = 1u128 << q;
        if emptied {
            self.nonempty &= !bit;
        }
        if self.strict_mask & bit == 0 {
            let d = &mut self.deficit[q];
            if emptied {
                // An emptied queue forfeits its deficit and the turn passes on.
                *d = 0;
                self.advance();
            } else {
                *d = d.saturating_sub(u64::from(p.len));
            }
        }
        p
    }

    fn advance(&mut self) {
        // (A compare, not `% len`: a division per emptied queue on the egress path.)
        self.rr += 1;
        if self.rr == self.data.len() {
            self.rr = 0;
        }
        self.granted = false;
    }

    /// Deficit round robin over the eligible (non-empty, unpaused, not strict) queues in `el`.
    /// The round-robin pointer jumps straight to the next eligible queue (bit scan), so a
    /// pick costs O(1) however many queues are idle. Emptied queues forfeit their deficit in
    /// `dequeue`; paused ones keep it.
    #[inline(always)]
    fn pick_drr<W: QueueBits>(&mut self, el: W) -> usize {
        loop {
            let above = el & W::at_or_above(self.rr);
            let q = if above != W::ZERO {
                above.lowest()
            } else {
                el.lowest()
            };
            if q != self.rr {
                self.rr = q;
                self.granted = false;
            }
            if !self.granted {
                self.deficit[q] += self.quantum;
                self.granted = true;
            }
            if let Some(h) = self.data[q].head_len() {
                if self.deficit[q] >= u64::from(h) {
                    return q;
                }
            }
            self.advance();
        }
    }

    /// Removes every packet of data queue `q`.
    pub fn drain_queue(&mut self, q: usize) -> Vec<Pkt> {
        let v: Vec<Pkt> = self.data[q].drain().collect();
        self.nonempty &= !(1 << q);
        self.deficit[q] = 0;
        v
    }

    /// Bytes queued in data queues.
    pub fn data_bytes(&self) -> u64 {
        self.data.iter().map(Fifo::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PrioSource, SchedKind};
    use crate::frame::FrameId;
    use crate::wire::MacAddr;

    fn spec(kind: SchedKind, strict: Vec<usize>, quantum: u64) -> PortSpec {
        PortSpec {
            name: "p".into(),
            iface: "p".into(),
            mac: MacAddr::default(),
            rate_bps: 1,
            delay_ps: 0,
            queues: 4,
            queue_limit: 1 << 20,
            scheduler: kind,
            quantum,
            strict,
            prio_source: PrioSource::Auto,
            prio_map: [0; 8],
            flood: true,
            mtu: 1500,
            peer_mac: None,
            queues_rx: 1,
            xdp_bind: Default::default(),
        }
    }

    fn pkt(len: u32, id: u32) -> Pkt {
        Pkt::new(FrameId(id), len, 0, 0)
    }

    /// `pick` then `take`, as `Switch::service` runs them: the packet and its data queue.
    fn dequeue(qs: &mut QueueSet, pause: &PauseRegs, now: u64) -> Option<(Pkt, Option<usize>)> {
        let pick = qs.pick(pause, now)?;
        Some((qs.take(pick), pick.data()))
    }

    #[test]
    fn drr_shares_bytes_equally_with_unequal_sizes() {
        let mut qs = QueueSet::new(&spec(SchedKind::Drr, vec![], 1500));
        let regs = PauseRegs::new(4);
        for i in 0..300 {
            qs.push(0, pkt(1500, i));
            qs.push(1, pkt(500, 1000 + i));
        }
        let mut bytes = [0u64; 4];
        for _ in 0..200 {
            let (p, q) = dequeue(&mut qs, &regs, 0).unwrap();
            bytes[q.unwrap()] += u64::from(p.len);
        }
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((0.9..1.1).contains(&ratio), "{bytes:?}");
    }

    #[test]
    fn strict_first_and_paused_skipped() {
        let mut qs = QueueSet::new(&spec(SchedKind::Drr, vec![3], 1500));
        let regs = PauseRegs::new(4);
        qs.push(0, pkt(100, 1));
        qs.push(3, pkt(100, 2));
        qs.push(3, pkt(100, 3));
        regs.pause(3, 1_000);
        assert_eq!(dequeue(&mut qs, &regs, 0).unwrap().1, Some(0));
        assert!(dequeue(&mut qs, &regs, 0).is_none(), "queue 3 is paused");
        assert!(!qs.has_eligible(&regs, 0));
        assert_eq!(dequeue(&mut qs, &regs, 1_000).unwrap().0.frame, FrameId(2));
        // The control queue goes first even when data is waiting.
        qs.ctrl.push(pkt(64, 9));
        let (p, q) = dequeue(&mut qs, &regs, 1_000).unwrap();
        assert_eq!((p.frame, q), (FrameId(9), None));
    }

    #[test]
    fn sp_serves_highest_index() {
        let mut qs = QueueSet::new(&spec(SchedKind::Sp, vec![], 1500));
        let regs = PauseRegs::new(4);
        qs.push(1, pkt(100, 1));
        qs.push(2, pkt(100, 2));
        assert_eq!(dequeue(&mut qs, &regs, 0).unwrap().1, Some(2));
        assert_eq!(dequeue(&mut qs, &regs, 0).unwrap().1, Some(1));
        assert!(dequeue(&mut qs, &regs, 0).is_none());
    }
}

//! The AFC control channel: per-port queue pause registers, the AFC command word and a
//! lock-free command ring.
//!
//! Tofino2's "advanced flow control" lets the data plane pause and resume individual egress
//! queues. Xoff mirrors it with one `PauseRegs` per egress port: a bitmap of paused queues (one
//! bit per queue, up to 128) plus a per-queue deadline after which a timed pause (PFC quanta)
//! lapses on its own. All operations are single atomic stores or loads, so any worker or the
//! control plane may drive them while the port's scheduler reads them, without locks.
//!
//! # The AFC command word
//!
//! On Tofino2 a P4 program requests a pause/resume by writing the 32-bit deparser metadata
//! `adv_flow_ctl` (declared `bit<32> adv_flow_ctl; // Advanced flow control for TM` in
//! `ingress_intrinsic_metadata_for_deparser_t` / `egress_intrinsic_metadata_for_deparser_t` of
//! `tofino2_base.p4`, included by `t2na.p4`; the header itself gives no sub-layout). Public
//! Tofino2 programs fill it as
//!
//! ```text
//!  31  30          22 21      15 14                0
//! +---+--------------+----------+-------------------+
//! |qfc|  port (9)    | qid (7)  |   credit (15)     |
//! +---+--------------+----------+-------------------+
//! ```
//!
//! (`adv_flow_ctl[31:31] = qfc; [30:22] = port; [21:15] = qid; [14:0] = credit` in the
//! `do_afc` actions of public Tofino2 driver test programs; community AFC examples for
//! bf-sde 9.11 split the same 9 port bits as `tm_pipe_id(2) | tm_mac_id(4) | pad(3)` and call
//! the 7-bit queue `tm_mac_qid`). [`AfcCmd`] uses the flat `port | qid` form, where `port` is
//! the Xoff egress port index and `qid` the queue within that port, so every P4 AFC write maps
//! to exactly one command.
//!
//! `qfc` = 1 pauses (Tofino2: "pause/credit"), `qfc` = 0 resumes. Xoff interprets `credit` as a
//! pause length: `credit` = 0 is an untimed pause that lasts until a resume; `credit` = n > 0
//! pauses for n × `pause_ps` picoseconds, where `pause_ps` (the credit unit) is chosen by the
//! caller of [`apply`] (passing `wire::pfc::quanta_to_ps(1, rate)` makes credits behave like PFC
//! quanta). The credit of a resume is carried but ignored.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;

/// Largest queue set a port may have.
pub const MAX_QUEUES: usize = 128;

/// Deadline value meaning "paused until explicitly resumed".
pub const FOREVER: u64 = u64::MAX;

/// One plane of pause state: a bitmap of paused queues plus a deadline per queue after which
/// a timed pause lapses on its own.
#[derive(Debug)]
struct Plane {
    bits: [AtomicU64; 2],
    deadline: Box<[AtomicU64]>,
}

impl Plane {
    fn new(n: usize) -> Self {
        Plane {
            bits: [AtomicU64::new(0), AtomicU64::new(0)],
            deadline: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn pause(&self, q: usize, until: u64) {
        if let Some(d) = self.deadline.get(q) {
            d.store(until, Ordering::Release);
            self.bits[q / 64].fetch_or(1 << (q % 64), Ordering::AcqRel);
        }
    }

    fn resume(&self, q: usize) {
        if q < self.deadline.len() {
            self.bits[q / 64].fetch_and(!(1 << (q % 64)), Ordering::AcqRel);
        }
    }

    #[inline]
    fn raw(&self) -> u128 {
        u128::from(self.bits[0].load(Ordering::Acquire))
            | (u128::from(self.bits[1].load(Ordering::Acquire)) << 64)
    }

    #[inline]
    fn is_paused(&self, q: usize, now: u64) -> bool {
        q < self.deadline.len()
            && self.bits[q / 64].load(Ordering::Acquire) & (1 << (q % 64)) != 0
            && now < self.deadline[q].load(Ordering::Acquire)
    }

    fn mask(&self, now: u64) -> u128 {
        let mut m = 0u128;
        let mut r = self.raw();
        while r != 0 {
            let q = r.trailing_zeros() as usize;
            r &= r - 1;
            if self.is_paused(q, now) {
                m |= 1 << q;
            }
        }
        m
    }

    fn next_expiry(&self, now: u64) -> Option<u64> {
        let m = self.mask(now);
        (0..self.deadline.len())
            .filter(|q| m & (1 << q) != 0)
            .map(|q| self.deadline[q].load(Ordering::Acquire))
            .filter(|&d| d != FOREVER)
            .min()
    }
}

/// Pause state of the egress queues of one port, in two planes as in a switch ASIC: per-queue
/// pauses (Tofino2's AFC: the schemes' queue pauses, external controllers, `xoff ctl`) and
/// link-level pauses (received PFC/PAUSE frames, per priority, mapped to queues). A queue is
/// paused while either plane pauses it, so a PFC XON never lifts a BFC pause and vice versa.
#[derive(Debug)]
pub struct PauseRegs {
    queue: Plane,
    link: Plane,
}

impl PauseRegs {
    /// Registers for a port with `queues` queues (clamped to [`MAX_QUEUES`]).
    pub fn new(queues: usize) -> Self {
        let n = queues.clamp(1, MAX_QUEUES);
        PauseRegs {
            queue: Plane::new(n),
            link: Plane::new(n),
        }
    }

    /// Number of queues covered.
    pub fn queues(&self) -> usize {
        self.queue.deadline.len()
    }

    /// Pause queue `q` until time `until` (picoseconds; [`FOREVER`] for an untimed pause).
    /// Out-of-range queues are ignored.
    pub fn pause(&self, q: usize, until: u64) {
        self.queue.pause(q, until);
    }

    /// Resume queue `q` now (its per-queue pause; a link-level pause stays).
    pub fn resume(&self, q: usize) {
        self.queue.resume(q);
    }

    /// Link-level (PFC) pause of queue `q` until `until`.
    pub fn pause_link(&self, q: usize, until: u64) {
        self.link.pause(q, until);
    }

    /// Lifts the link-level (PFC) pause of queue `q`.
    pub fn resume_link(&self, q: usize) {
        self.link.resume(q);
    }

    /// Whether queue `q` is paused at time `now`. A lapsed timed pause reads as resumed.
    #[inline]
    pub fn is_paused(&self, q: usize, now: u64) -> bool {
        self.queue.is_paused(q, now) || self.link.is_paused(q, now)
    }

    /// Bitmap of queues paused at `now` (bit q set = paused).
    #[inline]
    pub fn paused_mask(&self, now: u64) -> u128 {
        if self.queue.raw() | self.link.raw() == 0 {
            return 0;
        }
        self.queue.mask(now) | self.link.mask(now)
    }

    /// The earliest deadline among timed pauses in force at `now`, if any: when the scheduler
    /// must look again even if nothing else happens.
    pub fn next_expiry(&self, now: u64) -> Option<u64> {
        match (self.queue.next_expiry(now), self.link.next_expiry(now)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Bits of the port field of an AFC word.
pub const AFC_PORT_BITS: u32 = 9;
/// Bits of the queue field of an AFC word.
pub const AFC_QID_BITS: u32 = 7;
/// Bits of the credit field of an AFC word.
pub const AFC_CREDIT_BITS: u32 = 15;
/// Largest port an AFC word can address.
pub const AFC_MAX_PORT: u16 = (1 << AFC_PORT_BITS) - 1;
/// Largest queue an AFC word can address.
pub const AFC_MAX_QID: u8 = (1 << AFC_QID_BITS) - 1;
/// Largest credit an AFC word can carry.
pub const AFC_MAX_CREDIT: u16 = (1 << AFC_CREDIT_BITS) - 1;

const QFC_SHIFT: u32 = 31;
const PORT_SHIFT: u32 = AFC_QID_BITS + AFC_CREDIT_BITS;
const QID_SHIFT: u32 = AFC_CREDIT_BITS;

/// Errors of the AFC channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AfcError {
    /// A field does not fit its bits in the 32-bit word.
    #[error("AFC field out of range: port {port} (max 511), qid {qid} (max 127), credit {credit} (max 32767)")]
    FieldRange {
        /// Requested port.
        port: u16,
        /// Requested queue.
        qid: u8,
        /// Requested credit.
        credit: u16,
    },
    /// The command names a port without pause registers.
    #[error("AFC command for unknown port {0}")]
    NoSuchPort(u16),
    /// The command names a queue the port does not have.
    #[error("AFC command for unknown queue {qid} of port {port}")]
    NoSuchQueue {
        /// Port.
        port: u16,
        /// Queue.
        qid: u8,
    },
    /// The command ring is full; the command was not queued.
    #[error("AFC command ring full")]
    RingFull,
}

/// One AFC command: pause or resume one queue of one port. Fields are range-checked at
/// construction, so [`encode`](Self::encode) is lossless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AfcCmd {
    pause: bool,
    port: u16,
    qid: u8,
    credit: u16,
}

impl AfcCmd {
    /// Build a command (`pause` is the `qfc` bit).
    pub fn new(pause: bool, port: u16, qid: u8, credit: u16) -> Result<AfcCmd, AfcError> {
        if port > AFC_MAX_PORT || qid > AFC_MAX_QID || credit > AFC_MAX_CREDIT {
            return Err(AfcError::FieldRange { port, qid, credit });
        }
        Ok(AfcCmd {
            pause,
            port,
            qid,
            credit,
        })
    }

    /// Pause `qid` of `port` for `credit` units (0 = until resumed).
    pub fn pause(port: u16, qid: u8, credit: u16) -> Result<AfcCmd, AfcError> {
        Self::new(true, port, qid, credit)
    }

    /// Resume `qid` of `port`.
    pub fn resume(port: u16, qid: u8) -> Result<AfcCmd, AfcError> {
        Self::new(false, port, qid, 0)
    }

    /// The `qfc` bit: true = pause, false = resume.
    pub fn is_pause(&self) -> bool {
        self.pause
    }

    /// Egress port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Queue within the port.
    pub fn qid(&self) -> u8 {
        self.qid
    }

    /// Credit (pause length in caller-defined units; 0 = untimed).
    pub fn credit(&self) -> u16 {
        self.credit
    }

    /// The 32-bit Tofino2 `adv_flow_ctl` word.
    pub fn encode(&self) -> u32 {
        (u32::from(self.pause) << QFC_SHIFT)
            | (u32::from(self.port) << PORT_SHIFT)
            | (u32::from(self.qid) << QID_SHIFT)
            | u32::from(self.credit)
    }

    /// Decode a 32-bit word. Every word is a valid command with this layout (the fields fill
    /// all 32 bits); the `Result` keeps room for layouts with reserved bits.
    pub fn decode(word: u32) -> Result<AfcCmd, AfcError> {
        Ok(AfcCmd {
            pause: word >> QFC_SHIFT != 0,
            port: ((word >> PORT_SHIFT) & u32::from(AFC_MAX_PORT)) as u16,
            qid: ((word >> QID_SHIFT) & u32::from(AFC_MAX_QID)) as u8,
            credit: (word & u32::from(AFC_MAX_CREDIT)) as u16,
        })
    }
}

/// Apply one command to the per-port registers (`regs[port]`) at time `now_ps`.
///
/// A pause with credit 0 pauses until resumed ([`FOREVER`]); credit n > 0 pauses until
/// `now_ps + n × pause_ps` (saturating at [`FOREVER`]). A resume clears the queue's bit.
/// Commands for missing ports or queues change nothing and return an error.
pub fn apply(cmd: AfcCmd, regs: &[PauseRegs], now_ps: u64, pause_ps: u64) -> Result<(), AfcError> {
    let r = regs
        .get(usize::from(cmd.port))
        .ok_or(AfcError::NoSuchPort(cmd.port))?;
    let q = usize::from(cmd.qid);
    if q >= r.queues() {
        return Err(AfcError::NoSuchQueue {
            port: cmd.port,
            qid: cmd.qid,
        });
    }
    if cmd.pause {
        let until = if cmd.credit == 0 {
            FOREVER
        } else {
            now_ps.saturating_add(u64::from(cmd.credit).saturating_mul(pause_ps))
        };
        r.pause(q, until);
    } else {
        r.resume(q);
    }
    Ok(())
}

/// The AFC unit of a switch: the pause registers of every port and the count of commands
/// applied to them. Everything that pauses or resumes a queue (schemes, received PFC, `xoff
/// ctl`, external controllers through the command ring) goes through here, so the counters
/// account for every pause/resume and nothing writes a register behind the unit's back.
#[derive(Debug)]
pub struct Afc {
    regs: Box<[PauseRegs]>,
    applied: AtomicU64,
    refused: AtomicU64,
}

impl Afc {
    /// Registers for ports with the given number of data queues each.
    pub fn new(queues: impl IntoIterator<Item = usize>) -> Afc {
        Afc {
            regs: queues.into_iter().map(PauseRegs::new).collect(),
            applied: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Pause registers of every port (read side: schedulers, schemes' views).
    #[inline]
    pub fn regs(&self) -> &[PauseRegs] {
        &self.regs
    }

    /// Pause registers of one port.
    #[inline]
    pub fn port(&self, port: usize) -> &PauseRegs {
        &self.regs[port]
    }

    /// Applies one command word whose credit counts `credit_ps` picoseconds (see [`apply`]).
    /// A command for a missing port or queue is refused and counted.
    pub fn apply(&self, cmd: AfcCmd, now_ps: u64, credit_ps: u64) -> Result<(), AfcError> {
        let r = apply(cmd, &self.regs, now_ps, credit_ps);
        self.count(r.is_ok());
        r
    }

    /// Resumes `queue` of `port` (the command word with `qfc` = 0).
    pub fn resume(&self, port: usize, queue: usize) -> Result<(), AfcError> {
        let r = self.check(port, queue).map(|r| r.resume(queue));
        self.count(r.is_ok());
        r
    }

    /// Link-level pause of `queue` of `port` until the absolute time `until`, for a received
    /// PFC/PAUSE frame. PFC pause times are 16-bit quanta, one bit more than the word's 15-bit
    /// credit, so they take effect with their exact deadline here rather than through a word;
    /// they count as commands like any other.
    pub fn pfc_pause(&self, port: usize, queue: usize, until: u64) -> Result<(), AfcError> {
        let r = self.check(port, queue).map(|r| r.pause_link(queue, until));
        self.count(r.is_ok());
        r
    }

    /// Lifts the link-level pause of `queue` of `port` (PFC XON, or the watchdog).
    pub fn pfc_resume(&self, port: usize, queue: usize) -> Result<(), AfcError> {
        let r = self.check(port, queue).map(|r| r.resume_link(queue));
        self.count(r.is_ok());
        r
    }

    /// Commands applied so far.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Commands refused (unknown port or queue, or a full ring) so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Counts a command refused before it reached the unit (e.g. a full ring).
    pub fn count_refused(&self) {
        self.count(false);
    }

    fn check(&self, port: usize, queue: usize) -> Result<&PauseRegs, AfcError> {
        let r = self
            .regs
            .get(port)
            .ok_or(AfcError::NoSuchPort(port.min(usize::from(u16::MAX)) as u16))?;
        if queue >= r.queues() {
            return Err(AfcError::NoSuchQueue {
                port: port as u16,
                qid: queue.min(255) as u8,
            });
        }
        Ok(r)
    }

    fn count(&self, ok: bool) {
        let c = if ok { &self.applied } else { &self.refused };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Bounded lock-free multi-producer, multi-consumer ring of AFC words (crossbeam
/// `ArrayQueue<u32>`): workers and the control plane push, the owner of the registers drains.
#[derive(Debug)]
pub struct AfcRing {
    q: ArrayQueue<u32>,
}

impl AfcRing {
    /// A ring holding up to `capacity` commands (at least 1).
    pub fn new(capacity: usize) -> AfcRing {
        AfcRing {
            q: ArrayQueue::new(capacity.max(1)),
        }
    }

    /// Queue a command; fails with [`AfcError::RingFull`] when full (the command is dropped).
    pub fn push(&self, cmd: AfcCmd) -> Result<(), AfcError> {
        self.push_word(cmd.encode())
    }

    /// Queue a raw 32-bit word (as a P4 program would write it).
    pub fn push_word(&self, word: u32) -> Result<(), AfcError> {
        self.q.push(word).map_err(|_| AfcError::RingFull)
    }

    /// Take the oldest command, if any.
    pub fn pop(&self) -> Option<AfcCmd> {
        // `decode` accepts every word; skip any a future layout might reject.
        while let Some(w) = self.q.pop() {
            if let Ok(c) = AfcCmd::decode(w) {
                return Some(c);
            }
        }
        None
    }

    /// Apply up to `max` queued commands to `regs` (see [`apply`]). Returns how many were
    /// taken from the ring; commands for unknown ports/queues are consumed and skipped.
    pub fn drain(&self, regs: &[PauseRegs], now_ps: u64, pause_ps: u64, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(cmd) = self.pop() else { break };
            let _ = apply(cmd, regs, now_ps, pause_ps);
            n += 1;
        }
        n
    }

    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether no command is waiting.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Maximum number of waiting commands.
    pub fn capacity(&self) -> usize {
        self.q.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn afc_unit_counts_every_command() {
        let afc = Afc::new([8, 4]);
        afc.pfc_pause(1, 3, 500).unwrap();
        assert!(afc.port(1).is_paused(3, 499));
        assert!(!afc.port(1).is_paused(3, 500));
        afc.apply(AfcCmd::pause(0, 7, 0).unwrap(), 0, 1).unwrap();
        assert!(afc.port(0).is_paused(7, u64::MAX - 1));
        afc.resume(0, 7).unwrap();
        assert_eq!(afc.port(0).paused_mask(1), 0);
        assert_eq!(afc.applied(), 3);
        // Unknown queue, unknown port: refused, nothing changes.
        assert!(afc.resume(1, 4).is_err());
        assert!(afc.apply(AfcCmd::pause(2, 0, 0).unwrap(), 0, 1).is_err());
        afc.count_refused();
        assert_eq!((afc.applied(), afc.refused()), (3, 3));
    }

    #[test]
    fn link_and_queue_pauses_are_separate_planes() {
        let afc = Afc::new([8]);
        let r = afc.port(0);
        // A scheme pauses queue 3; PFC pauses queues 0..8 of the priority, then lifts them.
        afc.apply(AfcCmd::pause(0, 3, 0).unwrap(), 0, 1).unwrap();
        for q in 0..8 {
            afc.pfc_pause(0, q, 1_000).unwrap();
        }
        assert_eq!(r.paused_mask(10), 0xFF);
        assert_eq!(r.next_expiry(10), Some(1_000));
        for q in 0..8 {
            afc.pfc_resume(0, q).unwrap();
        }
        // The XON lifts only the link plane: queue 3 stays paused by the scheme.
        assert_eq!(r.paused_mask(20), 1 << 3);
        // A timed PFC pause lapses on its own; the untimed queue pause does not.
        afc.pfc_pause(0, 5, 100).unwrap();
        assert_eq!(r.paused_mask(99), (1 << 3) | (1 << 5));
        assert_eq!(r.paused_mask(100), 1 << 3);
        afc.resume(0, 3).unwrap();
        assert_eq!(r.paused_mask(101), 0);
        assert_eq!(r.next_expiry(101), None);
    }

    #[test]
    fn timed_pause_lapses_and_resume_clears() {
        let r = PauseRegs::new(8);
        assert!(!r.is_paused(3, 0));
        r.pause(3, 1_000);
        assert!(r.is_paused(3, 999));
        assert!(!r.is_paused(3, 1_000));
        assert_eq!(r.next_expiry(10), Some(1_000));
        r.pause(5, FOREVER);
        assert_eq!(r.paused_mask(10), (1 << 3) | (1 << 5));
        r.resume(5);
        assert_eq!(r.paused_mask(10), 1 << 3);
        r.pause(100, FOREVER); // out of range: ignored
        assert_eq!(r.paused_mask(2_000), 0);
    }

    #[test]
    fn high_queues_use_second_word() {
        let r = PauseRegs::new(128);
        r.pause(127, FOREVER);
        assert!(r.is_paused(127, 5));
        assert_eq!(r.paused_mask(5), 1u128 << 127);
    }

    #[test]
    fn afc_word_layout() {
        let c = AfcCmd::pause(0x1A5, 0x5A, 0x1234).unwrap();
        let w = c.encode();
        assert_eq!(w >> 31, 1);
        assert_eq!((w >> 22) & 0x1FF, 0x1A5);
        assert_eq!((w >> 15) & 0x7F, 0x5A);
        assert_eq!(w & 0x7FFF, 0x1234);
        assert_eq!(w, 0x8000_0000 | (0x1A5 << 22) | (0x5A << 15) | 0x1234);
        assert_eq!(AfcCmd::decode(w), Ok(c));
        let r = AfcCmd::resume(3, 7).unwrap();
        assert_eq!(r.encode(), (3 << 22) | (7 << 15));
        assert!(!AfcCmd::decode(r.encode()).unwrap().is_pause());
        assert_eq!(AfcCmd::decode(u32::MAX).unwrap().encode(), u32::MAX);
        assert!(matches!(
            AfcCmd::pause(512, 0, 0),
            Err(AfcError::FieldRange { .. })
        ));
        assert!(AfcCmd::pause(0, 128, 0).is_err());
        assert!(AfcCmd::pause(0, 0, 0x8000).is_err());
    }

    #[test]
    fn afc_apply_and_ring() {
        let regs: Vec<PauseRegs> = (0..2).map(|_| PauseRegs::new(8)).collect();
        // Timed: credit 10 at 5_120 ps per unit.
        apply(AfcCmd::pause(1, 2, 10).unwrap(), &regs, 1_000, 5_120).unwrap();
        assert!(regs[1].is_paused(2, 1_000 + 51_199));
        assert!(!regs[1].is_paused(2, 1_000 + 51_200));
        // Untimed until resume.
        apply(AfcCmd::pause(0, 7, 0).unwrap(), &regs, 0, 5_120).unwrap();
        assert!(regs[0].is_paused(7, u64::MAX - 1));
        assert_eq!(regs[0].next_expiry(5), None);
        apply(AfcCmd::resume(0, 7).unwrap(), &regs, 0, 5_120).unwrap();
        assert!(!regs[0].is_paused(7, 1));
        // Saturation.
        apply(
            AfcCmd::pause(0, 1, AFC_MAX_CREDIT).unwrap(),
            &regs,
            u64::MAX - 5,
            u64::MAX,
        )
        .unwrap();
        assert!(regs[0].is_paused(1, u64::MAX - 1));
        // Unknown port / queue.
        assert_eq!(
            apply(AfcCmd::pause(2, 0, 0).unwrap(), &regs, 0, 1),
            Err(AfcError::NoSuchPort(2))
        );
        assert_eq!(
            apply(AfcCmd::pause(0, 8, 0).unwrap(), &regs, 0, 1),
            Err(AfcError::NoSuchQueue { port: 0, qid: 8 })
        );

        let ring = AfcRing::new(2);
        assert!(ring.is_empty());
        ring.push(AfcCmd::pause(1, 3, 0).unwrap()).unwrap();
        ring.push_word(AfcCmd::pause(9, 3, 0).unwrap().encode())
            .unwrap();
        assert_eq!(
            ring.push(AfcCmd::resume(1, 3).unwrap()),
            Err(AfcError::RingFull)
        );
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.drain(&regs, 0, 1, 16), 2);
        assert!(regs[1].is_paused(3, 10));
        assert_eq!(ring.pop(), None);
        assert_eq!(AfcRing::new(0).capacity(), 1);
    }

    #[test]
    fn afc_ring_multi_producer() {
        let ring = std::sync::Arc::new(AfcRing::new(4096));
        let handles: Vec<_> = (0..4u16)
            .map(|p| {
                let ring = ring.clone();
                std::thread::spawn(move || {
                    for q in 0..100u8 {
                        ring.push(AfcCmd::pause(p, q, 0).unwrap()).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let regs: Vec<PauseRegs> = (0..4).map(|_| PauseRegs::new(128)).collect();
        assert_eq!(ring.drain(&regs, 0, 1, usize::MAX), 400);
        for r in &regs {
            assert_eq!(r.paused_mask(0), (1u128 << 100) - 1);
        }
    }

    proptest::proptest! {
        #[test]
        fn afc_word_roundtrip(w in proptest::prelude::any::<u32>()) {
            let c = AfcCmd::decode(w).unwrap();
            proptest::prop_assert_eq!(c.encode(), w);
            proptest::prop_assert_eq!(AfcCmd::new(c.is_pause(), c.port(), c.qid(), c.credit()), Ok(c));
        }
    }
}

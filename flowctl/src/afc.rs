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
//!
//! # The shared-memory command ring
//!
//! `xoff run` exposes each switch's AFC unit to other processes as a file (`NAME.afc` next to
//! the control socket, mode 0600) that a controller maps and writes command words into; the
//! switch drains it into [`Afc::apply`]. [`ShmRing`] is the protocol over that memory; the
//! mapping itself is `dataplane::port::shm`. All fields are little-endian and naturally
//! aligned; offsets are in bytes.
//!
//! ```text
//! header (64 bytes)
//!    0  u32  magic      0x43464158 ("XAFC")
//!    4  u32  version    1
//!    8  u32  lanes      L (1..=64)
//!   12  u32  capacity   C, words per lane (power of two, 2..=65536)
//!   16  u64  applied    ring words the switch applied          (switch writes)
//!   24  u64  refused    ring words naming no such port/queue   (switch writes)
//!   32  u64  poll_us    longest time an idle switch takes to look at the ring
//!   40  u64  sleeping   1 while the switch sleeps and wants the doorbell  (switch writes)
//!   48  ..64            reserved, zero
//! lane i at 64 + i × (128 + 4 × C)
//!   +0    u32  tail     words written into the lane (wrapping)  (producer writes)
//!   +4    u32  full     words refused because the lane was full (producer writes)
//!   +64   u32  head     words taken from the lane (wrapping)    (switch writes)
//!   +128  u32  slot[C]  word n lives in slot[n mod C]
//! ```
//!
//! **Why lanes.** Each lane is a single-producer/single-consumer ring, so a producer needs only
//! plain loads and stores: no compare-and-swap, which Python's `mmap` cannot do, and a producer
//! that dies mid-write leaves nothing half-claimed (a Vyukov-style MPMC slot claimed and never
//! published would stall the consumer forever). Several writers take one lane each: a writer
//! owns lane i while it holds an exclusive `fcntl` record lock on byte i of the file (Python
//! `fcntl.lockf(fd, LOCK_EX | LOCK_NB, 1, i)`; from Rust an open-file-description lock, so
//! threads of one process get distinct lanes). The kernel drops the lock when the writer exits,
//! and the next writer continues from the lane's `tail`.
//!
//! **Producer** (owner of lane i): read `tail` (its own), read `head` (acquire); if
//! `tail - head` (wrapping) `>= C` the lane is full: add one to `full` and drop the word —
//! nothing ever waits. Otherwise store the word in `slot[tail mod C]`, then store `tail + 1`
//! (release). On x86-64 (total store order) plain stores in program order suffice, which is
//! what the Python client relies on.
//!
//! **Doorbell.** An idle switch sleeps rather than spin on the ring (it wakes on frames, on
//! its shaper, and, while a writer holds a lane or opened the file within the last second,
//! at least every `poll_us`; opening the file wakes it). Beside the ring file it keeps a FIFO,
//! `NAME.afc.bell` (mode 0600). Before sleeping it stores `sleeping = 1` and looks at the
//! lanes once more; after waking it stores 0. A producer that finds `sleeping` = 1 after
//! publishing its words writes one byte to the FIFO (non-blocking: a full FIFO already holds
//! a wake-up), which wakes the switch at once, as AF_XDP's own need_wakeup flag does for its
//! rings. The two sides' store-then-load needs a full fence to be exact; a producer without
//! one (Python on x86) may miss the bell in a narrow race, and a producer that never rings
//! is still served: both wait at most `poll_us`.
//!
//! **Consumer** (the switch): per lane, read `tail` (acquire), take words from `head` up, then
//! store the new `head` (release) so the slots may be reused. Lanes are visited round-robin
//! with a budget per call. A lane whose `tail` is more than `C` ahead of its `head` was written
//! against the protocol: it is skipped to `tail` and counted as one refused word.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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

    /// No queue has its bit set (the common case: one pass over two words).
    #[inline]
    fn clear(&self) -> bool {
        (self.bits[0].load(Ordering::Acquire) | self.bits[1].load(Ordering::Acquire)) == 0
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

    /// Out of line: the scheduler inlines `PauseRegs::paused_mask`, whose common case (no
    /// bit set) never comes here, and the loop's registers cost every pick its saves.
    #[inline(never)]
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
        match (self.queue.clear(), self.link.clear()) {
            (true, true) => 0,
            (false, true) => self.queue.mask(now),
            (true, false) => self.link.mask(now),
            (false, false) => self.queue.mask(now) | self.link.mask(now),
        }
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
    /// Shared memory that does not hold a command ring of this layout.
    #[error("not an AFC command ring: {0}")]
    BadRing(&'static str),
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

/// Magic number of a shared-memory ring: the bytes "XAFC" read as a little-endian `u32`.
pub const SHM_MAGIC: u32 = u32::from_le_bytes(*b"XAFC");
/// Layout version of the shared-memory ring.
pub const SHM_VERSION: u32 = 1;
/// Bytes of the ring's header.
pub const SHM_HEADER_BYTES: usize = 64;
/// Bytes of a lane before its slots (producer and consumer fields on separate cache lines).
pub const SHM_LANE_HEADER_BYTES: usize = 128;
/// Most lanes a ring may have.
pub const SHM_MAX_LANES: u32 = 64;
/// Most words a lane may hold.
pub const SHM_MAX_CAPACITY: u32 = 1 << 16;

// Header fields, as indices into the `u64` view of the header.
const H_MAGIC_VERSION: usize = 0;
const H_LANES_CAPACITY: usize = 1;
const H_APPLIED: usize = 2;
const H_REFUSED: usize = 3;
const H_POLL_US: usize = 4;
const H_SLEEPING: usize = 5;
// Lane fields, as indices into the `u32` view of a lane.
const L_TAIL: usize = 0;
const L_FULL: usize = 1;
const L_HEAD: usize = 16;
const L_SLOTS: usize = SHM_LANE_HEADER_BYTES / 4;

/// Size of a shared-memory ring: `lanes` lanes of `capacity` words each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShmLayout {
    lanes: u32,
    capacity: u32,
}

impl ShmLayout {
    /// A layout; `capacity` must be a power of two in 2..=[`SHM_MAX_CAPACITY`] and `lanes` in
    /// 1..=[`SHM_MAX_LANES`].
    pub fn new(lanes: u32, capacity: u32) -> Result<ShmLayout, AfcError> {
        if !(1..=SHM_MAX_LANES).contains(&lanes) {
            return Err(AfcError::BadRing("lanes must be 1..=64"));
        }
        if !capacity.is_power_of_two() || !(2..=SHM_MAX_CAPACITY).contains(&capacity) {
            return Err(AfcError::BadRing(
                "capacity must be a power of two in 2..=65536",
            ));
        }
        Ok(ShmLayout { lanes, capacity })
    }

    /// Number of lanes (independent writers).
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    /// Words each lane holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Bytes of one lane.
    pub fn lane_bytes(&self) -> usize {
        SHM_LANE_HEADER_BYTES + 4 * self.capacity as usize
    }

    /// Bytes of the whole ring: header, then the lanes.
    pub fn bytes(&self) -> usize {
        SHM_HEADER_BYTES + self.lanes as usize * self.lane_bytes()
    }

    /// `u32` words of all lanes together (the length of the lanes view).
    pub fn lane_words(&self) -> usize {
        self.lanes as usize * self.lane_bytes() / 4
    }
}

/// The shared-memory command ring, over a view of its memory: `header` is the first
/// [`SHM_HEADER_BYTES`] as `u64`s, `lanes` the rest as `u32`s (see the module doc for the
/// byte layout). Both the switch (consumer) and Rust producers use it; the memory may be
/// written concurrently by other processes, so nothing here trusts what it reads beyond
/// bounds-checked indexing.
#[derive(Debug, Clone, Copy)]
pub struct ShmRing<'a> {
    header: &'a [AtomicU64],
    lanes: &'a [AtomicU32],
    layout: ShmLayout,
}

impl<'a> ShmRing<'a> {
    /// Writes a fresh ring's header into zeroed memory; `poll_us` is the consumer's promise of
    /// how long an idle switch may take to look at the ring.
    pub fn init(
        header: &'a [AtomicU64],
        lanes: &'a [AtomicU32],
        layout: ShmLayout,
        poll_us: u64,
    ) -> Result<ShmRing<'a>, AfcError> {
        Self::check_views(header, lanes, layout)?;
        for w in header {
            w.store(0, Ordering::Relaxed);
        }
        for w in lanes {
            w.store(0, Ordering::Relaxed);
        }
        header[H_LANES_CAPACITY].store(
            u64::from(layout.lanes) | u64::from(layout.capacity) << 32,
            Ordering::Relaxed,
        );
        header[H_POLL_US].store(poll_us, Ordering::Relaxed);
        // Magic last: a reader that sees it sees the rest.
        header[H_MAGIC_VERSION].store(
            u64::from(SHM_MAGIC) | u64::from(SHM_VERSION) << 32,
            Ordering::Release,
        );
        Ok(ShmRing {
            header,
            lanes,
            layout,
        })
    }

    /// The ring another process initialised in this memory; checks magic, version and that
    /// the views are as large as the header says.
    pub fn attach(
        header: &'a [AtomicU64],
        lanes: &'a [AtomicU32],
    ) -> Result<ShmRing<'a>, AfcError> {
        let mv = header
            .get(H_MAGIC_VERSION)
            .ok_or(AfcError::BadRing("short header"))?
            .load(Ordering::Acquire);
        if mv as u32 != SHM_MAGIC {
            return Err(AfcError::BadRing("bad magic"));
        }
        if (mv >> 32) as u32 != SHM_VERSION {
            return Err(AfcError::BadRing("unsupported version"));
        }
        let lc = header[H_LANES_CAPACITY].load(Ordering::Relaxed);
        let layout = ShmLayout::new(lc as u32, (lc >> 32) as u32)?;
        Self::check_views(header, lanes, layout)?;
        Ok(ShmRing {
            header,
            lanes,
            layout,
        })
    }

    /// The ring in memory this process initialised itself (with [`init`](Self::init)):
    /// checks only that the views fit `layout`, not the header, which others may overwrite.
    pub fn new(
        header: &'a [AtomicU64],
        lanes: &'a [AtomicU32],
        layout: ShmLayout,
    ) -> Result<ShmRing<'a>, AfcError> {
        Self::check_views(header, lanes, layout)?;
        Ok(ShmRing {
            header,
            lanes,
            layout,
        })
    }

    /// Length of the header's `u64` view.
    pub const HEADER_WORDS: usize = SHM_HEADER_BYTES / 8;

    fn check_views(
        header: &[AtomicU64],
        lanes: &[AtomicU32],
        layout: ShmLayout,
    ) -> Result<(), AfcError> {
        if header.len() != Self::HEADER_WORDS || lanes.len() != layout.lane_words() {
            return Err(AfcError::BadRing("memory smaller than the layout"));
        }
        Ok(())
    }

    /// The ring's size.
    pub fn layout(&self) -> ShmLayout {
        self.layout
    }

    /// Lane `i` (< lanes; a larger `i` panics).
    fn lane(&self, i: u32) -> &'a [AtomicU32] {
        let n = self.layout.lane_bytes() / 4;
        let i = i as usize;
        &self.lanes[i * n..(i + 1) * n]
    }

    /// The producer side of lane `i` (modulo the lane count). The caller must be the lane's
    /// only writer (see the module doc for how processes agree on that).
    pub fn producer(&self, i: u32) -> ShmProducer<'a> {
        ShmProducer {
            lane: self.lane(i % self.layout.lanes),
            mask: self.layout.capacity - 1,
        }
    }

    /// Consumer: takes up to `max` words, visiting lanes round-robin from `*cursor` (advanced
    /// past the last lane visited), and hands each to `apply`, which returns whether the
    /// word was applied. Counts applied and refused words in the header; returns the number
    /// of words taken.
    pub fn drain(&self, cursor: &mut u32, max: usize, mut apply: impl FnMut(u32) -> bool) -> usize {
        let cap = self.layout.capacity;
        let (mut taken, mut ok, mut bad) = (0usize, 0u64, 0u64);
        for _ in 0..self.layout.lanes {
            if taken >= max {
                break;
            }
            // No `%` on this path: it runs every worker round, and a division costs more
            // than looking at an idle lane.
            if *cursor >= self.layout.lanes {
                *cursor = 0;
            }
            let lane = self.lane(*cursor);
            *cursor += 1;
            let tail = lane[L_TAIL].load(Ordering::Acquire);
            let mut head = lane[L_HEAD].load(Ordering::Relaxed);
            let avail = tail.wrapping_sub(head);
            if avail == 0 {
                continue;
            }
            if avail > cap {
                // A writer broke the protocol; its words cannot be trusted.
                lane[L_HEAD].store(tail, Ordering::Release);
                bad += 1;
                continue;
            }
            let n = (avail as usize).min(max - taken);
            for _ in 0..n {
                let w = lane[L_SLOTS + (head & (cap - 1)) as usize].load(Ordering::Relaxed);
                head = head.wrapping_add(1);
                if apply(w) {
                    ok += 1;
                } else {
                    bad += 1;
                }
            }
            lane[L_HEAD].store(head, Ordering::Release);
            taken += n;
        }
        if ok > 0 {
            self.header[H_APPLIED].fetch_add(ok, Ordering::Relaxed);
        }
        if bad > 0 {
            self.header[H_REFUSED].fetch_add(bad, Ordering::Relaxed);
        }
        taken
    }

    /// Ring words the switch applied.
    pub fn applied(&self) -> u64 {
        self.header[H_APPLIED].load(Ordering::Relaxed)
    }

    /// Ring words the switch refused (no such port or queue, or a lane written against the
    /// protocol).
    pub fn refused(&self) -> u64 {
        self.header[H_REFUSED].load(Ordering::Relaxed)
    }

    /// Words producers could not write because their lane was full, over all lanes.
    pub fn full(&self) -> u64 {
        (0..self.layout.lanes)
            .map(|i| u64::from(self.lane(i)[L_FULL].load(Ordering::Relaxed)))
            .sum()
    }

    /// The consumer's bound on how long an idle switch takes to look at the ring, in µs.
    pub fn poll_us(&self) -> u64 {
        self.header[H_POLL_US].load(Ordering::Relaxed)
    }

    /// Consumer, before it sleeps: asks producers to ring the doorbell (`sleeping` = 1), then
    /// looks at the lanes once more. False if words are waiting (the flag is cleared again and
    /// the caller should not sleep): a producer that published before seeing the flag is
    /// caught here. The store and the loads are sequentially consistent (the fence that
    /// makes this exact against a producer that fences too).
    pub fn arm_doorbell(&self) -> bool {
        self.header[H_SLEEPING].store(1, Ordering::SeqCst);
        let waiting = (0..self.layout.lanes).any(|i| {
            let lane = self.lane(i);
            lane[L_TAIL].load(Ordering::SeqCst) != lane[L_HEAD].load(Ordering::Relaxed)
        });
        if waiting {
            self.disarm_doorbell();
        }
        !waiting
    }

    /// Consumer, awake again: producers need not ring.
    pub fn disarm_doorbell(&self) {
        self.header[H_SLEEPING].store(0, Ordering::SeqCst);
    }

    /// Producer, after publishing: whether the switch sleeps and wants the doorbell rung.
    pub fn wants_doorbell(&self) -> bool {
        self.header[H_SLEEPING].load(Ordering::SeqCst) != 0
    }
}

/// The writing end of one lane of a [`ShmRing`].
#[derive(Debug, Clone, Copy)]
pub struct ShmProducer<'a> {
    lane: &'a [AtomicU32],
    mask: u32,
}

impl ShmProducer<'_> {
    /// Writes one command; a full lane refuses it at once (and counts it in the header).
    pub fn push(&self, cmd: AfcCmd) -> Result<(), AfcError> {
        self.push_word(cmd.encode())
    }

    /// Writes one raw 32-bit word; a full lane refuses it at once (and counts it).
    pub fn push_word(&self, word: u32) -> Result<(), AfcError> {
        let tail = self.lane[L_TAIL].load(Ordering::Relaxed);
        let head = self.lane[L_HEAD].load(Ordering::Acquire);
        if tail.wrapping_sub(head) > self.mask {
            let f = &self.lane[L_FULL];
            f.store(f.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
            return Err(AfcError::RingFull);
        }
        self.lane[L_SLOTS + (tail & self.mask) as usize].store(word, Ordering::Relaxed);
        // SeqCst, not just Release: a producer's next load of `sleeping` must not pass this
        // store (see "Doorbell" in the module doc).
        self.lane[L_TAIL].store(tail.wrapping_add(1), Ordering::SeqCst);
        Ok(())
    }

    /// Words this lane refused because it was full.
    pub fn full(&self) -> u32 {
        self.lane[L_FULL].load(Ordering::Relaxed)
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

    fn shm(lanes: u32, cap: u32) -> (ShmLayout, Vec<AtomicU64>, Vec<AtomicU32>) {
        let l = ShmLayout::new(lanes, cap).unwrap();
        let h = (0..ShmRing::HEADER_WORDS)
            .map(|_| AtomicU64::new(7))
            .collect();
        let w = (0..l.lane_words()).map(|_| AtomicU32::new(7)).collect();
        (l, h, w)
    }

    #[test]
    fn shm_layout_matches_the_documented_bytes() {
        let (l, h, w) = shm(8, 1024);
        assert_eq!(l.bytes(), 64 + 8 * (128 + 4 * 1024));
        assert_eq!(l.bytes(), 64 + 4 * l.lane_words());
        let ring = ShmRing::init(&h, &w, l, 1000).unwrap();
        // Header bytes 0..16: magic, version, lanes, capacity as four LE u32s.
        let b0 = h[0].load(Ordering::Relaxed).to_le_bytes();
        let b1 = h[1].load(Ordering::Relaxed).to_le_bytes();
        assert_eq!(&b0[..4], b"XAFC");
        assert_eq!(u32::from_le_bytes(b0[4..].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b1[..4].try_into().unwrap()), 8);
        assert_eq!(u32::from_le_bytes(b1[4..].try_into().unwrap()), 1024);
        assert_eq!(h[4].load(Ordering::Relaxed), 1000); // byte 32: poll_us
        assert!(w.iter().all(|x| x.load(Ordering::Relaxed) == 0));
        // Lane 2 starts at byte 64 + 2 × 4224: tail at +0, head at +64, slot 0 at +128.
        let word = AfcCmd::pause(3, 1, 9).unwrap().encode();
        ring.producer(2).push_word(word).unwrap();
        let lane2 = 2 * (128 + 4096) / 4;
        assert_eq!(w[lane2].load(Ordering::Relaxed), 1);
        assert_eq!(w[lane2 + 128 / 4].load(Ordering::Relaxed), word);
        let mut cur = 0;
        assert_eq!(ring.drain(&mut cur, 1, |x| x == word), 1);
        assert_eq!(w[lane2 + 64 / 4].load(Ordering::Relaxed), 1);
        assert_eq!((h[2].load(Ordering::Relaxed), ring.applied()), (1, 1));
        assert_eq!(cur, 3, "a spent budget resumes after the lane it took from");
        let again = ShmRing::attach(&h, &w).unwrap();
        assert_eq!(again.layout(), l);
    }

    #[test]
    fn doorbell_is_wanted_only_while_armed_and_never_over_waiting_words() {
        let (l, h, w) = shm(2, 8);
        let ring = ShmRing::init(&h, &w, l, 10_000).unwrap();
        assert!(!ring.wants_doorbell());
        // Idle lanes: armed, and byte 40 says so to producers.
        assert!(ring.arm_doorbell());
        assert_eq!(h[5].load(Ordering::Relaxed), 1);
        assert!(ring.wants_doorbell());
        ring.disarm_doorbell();
        assert!(!ring.wants_doorbell());
        // A word published before arming: the consumer must not sleep over it.
        ring.producer(1).push_word(7).unwrap();
        assert!(!ring.arm_doorbell());
        assert!(!ring.wants_doorbell(), "cleared again when words wait");
        let mut cur = 0;
        assert_eq!(ring.drain(&mut cur, 8, |_| true), 1);
        assert!(ring.arm_doorbell());
    }

    #[test]
    fn shm_attach_rejects_foreign_memory() {
        let (l, h, w) = shm(2, 8);
        assert_eq!(
            ShmRing::attach(&h, &w).unwrap_err(),
            AfcError::BadRing("bad magic")
        );
        ShmRing::init(&h, &w, l, 1).unwrap();
        assert!(ShmRing::attach(&h, &w[1..]).is_err());
        assert!(ShmRing::init(&h[1..], &w, l, 1).is_err());
        h[0].fetch_add(1 << 32, Ordering::Relaxed);
        assert_eq!(
            ShmRing::attach(&h, &w).unwrap_err(),
            AfcError::BadRing("unsupported version")
        );
        assert!(ShmLayout::new(0, 8).is_err());
        assert!(ShmLayout::new(65, 8).is_err());
        assert!(ShmLayout::new(1, 6).is_err());
        assert!(ShmLayout::new(1, 1).is_err());
        assert!(ShmLayout::new(1, 1 << 17).is_err());
    }

    #[test]
    fn shm_full_lane_refuses_and_counts() {
        let (l, h, w) = shm(2, 4);
        let ring = ShmRing::init(&h, &w, l, 1).unwrap();
        let p = ring.producer(0);
        for i in 0..4 {
            p.push_word(i).unwrap();
        }
        assert_eq!(p.push_word(4), Err(AfcError::RingFull));
        assert_eq!(p.push_word(5), Err(AfcError::RingFull));
        assert_eq!((p.full(), ring.full()), (2, 2));
        // The other lane is independent.
        ring.producer(1).push_word(100).unwrap();
        let mut got = Vec::new();
        let mut cur = 0;
        assert_eq!(
            ring.drain(&mut cur, 3, |x| {
                got.push(x);
                true
            }),
            3
        );
        assert_eq!(got, [0, 1, 2]);
        p.push_word(6).unwrap();
        p.push_word(7).unwrap();
        p.push_word(8).unwrap();
        assert_eq!(p.push_word(9), Err(AfcError::RingFull));
        assert_eq!(
            ring.drain(&mut cur, 100, |x| {
                got.push(x);
                x != 7
            }),
            5
        );
        // Lane 1 first (the cursor moved past lane 0), then the rest of lane 0 in order.
        assert_eq!(got, [0, 1, 2, 100, 3, 6, 7, 8]);
        assert_eq!((ring.applied(), ring.refused(), ring.full()), (7, 1, 3));
    }

    #[test]
    fn shm_indices_wrap_around() {
        let (l, h, w) = shm(1, 4);
        let ring = ShmRing::init(&h, &w, l, 1).unwrap();
        // Start both indices just below 2^32 so they wrap during the test.
        w[L_TAIL].store(u32::MAX - 5, Ordering::Relaxed);
        w[L_HEAD].store(u32::MAX - 5, Ordering::Relaxed);
        let p = ring.producer(0);
        let mut got = Vec::new();
        let mut cur = 0;
        for round in 0..10u32 {
            for k in 0..3 {
                p.push_word(round * 10 + k).unwrap();
            }
            ring.drain(&mut cur, usize::MAX, |x| {
                got.push(x);
                true
            });
        }
        let want: Vec<u32> = (0..10)
            .flat_map(|r| (0..3).map(move |k| r * 10 + k))
            .collect();
        assert_eq!(got, want);
        assert_eq!(w[L_TAIL].load(Ordering::Relaxed), 24);
        // A tail more than a lane ahead of head is a broken writer: skipped, counted once.
        w[L_TAIL].store(1000, Ordering::Relaxed);
        assert_eq!(ring.drain(&mut cur, usize::MAX, |_| true), 0);
        assert_eq!(w[L_HEAD].load(Ordering::Relaxed), 1000);
        assert_eq!((ring.applied(), ring.refused()), (30, 1));
    }

    #[test]
    fn shm_producer_threads_lose_and_duplicate_nothing() {
        const PER: u32 = 50_000;
        let (l, h, w) = shm(4, 64);
        let ring = ShmRing::init(&h, &w, l, 1).unwrap();
        let afc = Afc::new([128; 4]);
        let (got, refused_by_full) = std::thread::scope(|s| {
            for t in 0..4u32 {
                s.spawn(move || {
                    let p = ring.producer(t);
                    for i in 0..PER {
                        // Word i of thread t: pause port t, queue i mod 128, credit i / 128.
                        let c = AfcCmd::pause(t as u16, (i % 128) as u8, (i / 128) as u16);
                        let w = c.unwrap().encode();
                        while p.push_word(w).is_err() {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            let consumer = s.spawn(|| {
                let mut got: Vec<Vec<u32>> = vec![Vec::new(); 4];
                let mut cur = 0;
                while got.iter().map(Vec::len).sum::<usize>() < 4 * PER as usize {
                    let n = ring.drain(&mut cur, 100, |x| {
                        let c = AfcCmd::decode(x).unwrap();
                        got[usize::from(c.port())].push(x);
                        afc.apply(c, 0, 1).is_ok()
                    });
                    if n == 0 {
                        std::thread::yield_now();
                    }
                }
                got
            });
            (consumer.join().unwrap(), ring.full())
        });
        for (t, words) in got.iter().enumerate() {
            let want: Vec<u32> = (0..PER)
                .map(|i| {
                    AfcCmd::pause(t as u16, (i % 128) as u8, (i / 128) as u16)
                        .unwrap()
                        .encode()
                })
                .collect();
            assert_eq!(
                words, &want,
                "lane {t}: words lost, duplicated or reordered"
            );
        }
        assert_eq!(ring.applied(), 4 * u64::from(PER));
        assert_eq!(afc.applied(), 4 * u64::from(PER));
        assert_eq!(ring.refused(), 0);
        // Every refusal was retried, so the full count is just how often producers outran
        // the consumer; it is consistent with what the lanes report.
        assert_eq!(refused_by_full, ring.full());
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

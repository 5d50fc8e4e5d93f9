//! Xoff signal frames: hop-by-hop flow-control messages between Xoff devices (BFC pause,
//! resume and pause-bitmap refresh; later Aquarius/Pyrrha types share the format).
//!
//! Carried in a full Ethernet frame with the IEEE local experimental EtherType 0x88B5:
//!
//! ```text
//!  0            6            12     14   15    16                                   60
//! +------------+------------+------+----+-----+-------------------------------------+
//! | dst        | src        | 88B5 | ver| type| type-specific fields ... zero padding|
//! +------------+------------+------+----+-----+-------------------------------------+
//!
//! ver  = 1
//! type = 0x01 PAUSE   16 queue (u16): pause this egress queue of the link's sender
//!                     18 reserved (u16, 0)                               -> 20 bytes
//!        0x02 RESUME  16 queue (u16): resume it
//!                     18 reserved (u16, 0)                               -> 20 bytes
//!        0x03 BITMAP  16 count (u16): queues 0..count are covered (<= 128)
//!                     18 bitmap (16 bytes): bit q set = queue q paused,
//!                        queue q is bit (q % 8) (LSB first) of byte 18 + q / 8
//!                                                                        -> 34 bytes
//!        0x20-0x2F    Pyrrha PAUSE / RESUME / MERGE (root ids, hops):
//!                     `crate::pyrrha::wire`
//!
//! Aquarius (type codes 0x10-0x1F, `crate::aquarius`):
//!        0x10 FLOW PAUSE   16 queue (u16): the upstream queue the flow's packets left from
//!                          18 reserved (u16, 0)
//!                          20 FID (u32): the flow's 32-bit FID hash (`bfc::fid_hash`)
//!                                                                        -> 24 bytes
//!        0x11 FLOW RESUME  same fields                                   -> 24 bytes
//!
//! Proteus (type codes 0x30-0x3F, `crate::wire::proteus`):
//!        0x30 FEEDBACK     per-path one-way delay and utilisation, relayed hop by hop
//!                          toward the source edge
//! ```
//!
//! All fields are big endian. The queue is the one the receiver of the frame (the upstream
//! device) sent the data from: BFC's `upstreamQ` (§3.3.2), as carried in the data shim
//! ([`super::shim`]). A BITMAP frame is the periodic refresh of §3.3.2: the receiver pauses
//! every covered queue whose bit is set and resumes every covered queue whose bit is clear,
//! so it repairs lost PAUSE/RESUME frames (the state it carries is idempotent).
//!
//! The destination is the link peer's MAC when known, else [`DST_SIGNAL`] (the 802.1D
//! nearest-bridge group address, which bridges never forward). Frames are padded to the
//! 60-byte Ethernet minimum; the FCS is not part of the buffer (see [`super`]).

use super::{Error, Result};

/// EtherType of Xoff signal frames (IEEE 802 local experimental 1).
pub const ETHERTYPE_XOFF_SIGNAL: u16 = 0x88B5;
/// Version carried in every frame.
pub const VERSION: u8 = 1;
/// Signal type: pause one queue.
pub const TYPE_PAUSE: u8 = 0x01;
/// Signal type: resume one queue.
pub const TYPE_RESUME: u8 = 0x02;
/// Signal type: pause-bitmap refresh.
pub const TYPE_BITMAP: u8 = 0x03;
/// Signal type: Aquarius PAUSE(queue, FID) (§3.3).
pub const TYPE_FLOW_PAUSE: u8 = 0x10;
/// Signal type: Aquarius RESUME(queue, FID) (Alg. 2).
pub const TYPE_FLOW_RESUME: u8 = 0x11;
/// Default destination: nearest-bridge group address (link-local, never forwarded).
pub const DST_SIGNAL: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E];
/// Ethernet minimum frame length without the FCS; emitted frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;
/// Queues a bitmap can cover.
pub const BITMAP_QUEUES: usize = 128;

mod field {
    pub type Field = core::ops::Range<usize>;

    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const VERSION: usize = 14;
    pub const TYPE: usize = 15;
    pub const QUEUE: Field = 16..18;
    pub const RESERVED: Field = 18..20;
    pub const COUNT: Field = 16..18;
    pub const BITMAP: Field = 18..34;
    pub const FID: Field = 20..24;
    pub const FID_END: usize = FID.end;
    pub const QUEUE_END: usize = RESERVED.end;
    pub const BITMAP_END: usize = BITMAP.end;
}

fn read_u16(b: &[u8], f: field::Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn write_u16(b: &mut [u8], f: field::Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// A read/write view of an Xoff signal frame, without FCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer and check that every accessor for its type is in bounds.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Ensure that no accessor panics: the header through the type byte and, for a known
    /// type, its fields. Padding is not required.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len <= field::TYPE {
            return Err(Error::Truncated);
        }
        let need = match self.signal_type() {
            TYPE_PAUSE | TYPE_RESUME => field::QUEUE_END,
            TYPE_BITMAP => field::BITMAP_END,
            TYPE_FLOW_PAUSE | TYPE_FLOW_RESUME => field::FID_END,
            _ => field::TYPE + 1,
        };
        if len < need {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Consume the view and return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// EtherType (0x88B5).
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Signal type byte.
    pub fn signal_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// PAUSE/RESUME: the queue.
    pub fn queue(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::QUEUE)
    }

    /// FLOW PAUSE/RESUME: the FID hash.
    pub fn fid(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::FID];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// BITMAP: number of queues covered.
    pub fn count(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::COUNT)
    }

    /// BITMAP: the bitmap (bit q = queue q).
    pub fn bitmap(&self) -> u128 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.buffer.as_ref()[field::BITMAP]);
        u128::from_le_bytes(b)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Set the destination MAC address.
    pub fn set_dst_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    /// Set the source MAC address.
    pub fn set_src_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, v);
    }

    /// Set the version byte.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    /// Set the type byte.
    pub fn set_signal_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Set the queue of a PAUSE/RESUME (and zero the reserved field).
    pub fn set_queue(&mut self, q: u16) {
        write_u16(self.buffer.as_mut(), field::QUEUE, q);
        write_u16(self.buffer.as_mut(), field::RESERVED, 0);
    }

    /// Set the FID of a FLOW PAUSE/RESUME.
    pub fn set_fid(&mut self, fid: u32) {
        self.buffer.as_mut()[field::FID].copy_from_slice(&fid.to_be_bytes());
    }

    /// Set the queue count of a BITMAP.
    pub fn set_count(&mut self, n: u16) {
        write_u16(self.buffer.as_mut(), field::COUNT, n);
    }

    /// Set the bitmap of a BITMAP.
    pub fn set_bitmap(&mut self, m: u128) {
        self.buffer.as_mut()[field::BITMAP].copy_from_slice(&m.to_le_bytes());
    }

    fn zero_from(&mut self, from: usize) {
        if let Some(rest) = self.buffer.as_mut().get_mut(from..) {
            rest.fill(0);
        }
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// What a signal frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Pause queue `q` (of the receiver's egress port on this link).
    Pause(u8),
    /// Resume queue `q`.
    Resume(u8),
    /// Queues `0..count` are paused exactly where `bits` has a 1.
    Bitmap {
        /// Queues covered.
        count: u8,
        /// Bit q = queue q paused.
        bits: u128,
    },
    /// Aquarius: pause flow `fid`, which the receiver sent from its queue `queue`.
    FlowPause { queue: u8, fid: u32 },
    /// Aquarius: resume flow `fid`.
    FlowResume { queue: u8, fid: u32 },
}

/// High-level representation of an Xoff signal frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalRepr {
    /// Destination MAC address (the link peer, or [`DST_SIGNAL`]).
    pub dst_addr: [u8; 6],
    /// Source MAC address (the sending port's).
    pub src_addr: [u8; 6],
    /// The message.
    pub signal: Signal,
}

impl SignalRepr {
    /// Parse a signal frame. Unknown versions and types are errors (`UnknownOpcode`); queue
    /// numbers above 127 and counts above 128 are `BadVector`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<SignalRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_XOFF_SIGNAL {
            return Err(Error::WrongEtherType);
        }
        if frame.version() != VERSION {
            return Err(Error::UnknownOpcode);
        }
        let signal = match frame.signal_type() {
            TYPE_PAUSE | TYPE_RESUME => {
                let q = frame.queue();
                if q >= BITMAP_QUEUES as u16 {
                    return Err(Error::BadVector);
                }
                if frame.signal_type() == TYPE_PAUSE {
                    Signal::Pause(q as u8)
                } else {
                    Signal::Resume(q as u8)
                }
            }
            TYPE_FLOW_PAUSE | TYPE_FLOW_RESUME => {
                let q = frame.queue();
                if q >= BITMAP_QUEUES as u16 {
                    return Err(Error::BadVector);
                }
                let (queue, fid) = (q as u8, frame.fid());
                if frame.signal_type() == TYPE_FLOW_PAUSE {
                    Signal::FlowPause { queue, fid }
                } else {
                    Signal::FlowResume { queue, fid }
                }
            }
            TYPE_BITMAP => {
                let count = frame.count();
                if count > BITMAP_QUEUES as u16 {
                    return Err(Error::BadVector);
                }
                let mask = if count == 128 {
                    u128::MAX
                } else {
                    (1u128 << count) - 1
                };
                Signal::Bitmap {
                    count: count as u8,
                    bits: frame.bitmap() & mask,
                }
            }
            _ => return Err(Error::UnknownOpcode),
        };
        Ok(SignalRepr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            signal,
        })
    }

    /// Length of the emitted frame: the 60-byte Ethernet minimum (FCS excluded).
    pub const fn buffer_len(&self) -> usize {
        MIN_FRAME_LEN
    }

    /// Emit into a buffer of at least [`buffer_len`](Self::buffer_len) bytes, padding included.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(ETHERTYPE_XOFF_SIGNAL);
        frame.set_version(VERSION);
        match self.signal {
            Signal::Pause(q) => {
                frame.set_signal_type(TYPE_PAUSE);
                frame.set_queue(u16::from(q));
                frame.zero_from(field::QUEUE_END);
            }
            Signal::Resume(q) => {
                frame.set_signal_type(TYPE_RESUME);
                frame.set_queue(u16::from(q));
                frame.zero_from(field::QUEUE_END);
            }
            Signal::Bitmap { count, bits } => {
                frame.set_signal_type(TYPE_BITMAP);
                frame.set_count(u16::from(count));
                frame.set_bitmap(bits);
                frame.zero_from(field::BITMAP_END);
            }
            Signal::FlowPause { queue, fid } | Signal::FlowResume { queue, fid } => {
                let t = if matches!(self.signal, Signal::FlowPause { .. }) {
                    TYPE_FLOW_PAUSE
                } else {
                    TYPE_FLOW_RESUME
                };
                frame.set_signal_type(t);
                frame.set_queue(u16::from(queue));
                frame.set_fid(fid);
                frame.zero_from(field::FID_END);
            }
        }
    }

    /// Emit into the front of `buf`, returning the length written (60).
    pub fn emit_into(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        self.emit(&mut Frame::new_unchecked(&mut buf[..n]));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// PAUSE of queue 5 from 02-00-00-00-00-0a to the nearest-bridge address.
    static PAUSE_BYTES: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // src
        0x88, 0xb5, // Xoff signal
        0x01, // version
        0x01, // PAUSE
        0x00, 0x05, // queue 5
        0x00, 0x00, // reserved
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn pause_bytes_roundtrip() {
        let f = Frame::new_checked(&PAUSE_BYTES[..]).unwrap();
        let r = SignalRepr::parse(&f).unwrap();
        assert_eq!(
            r,
            SignalRepr {
                dst_addr: DST_SIGNAL,
                src_addr: [2, 0, 0, 0, 0, 0x0a],
                signal: Signal::Pause(5)
            }
        );
        let mut buf = [0x55u8; 60];
        assert_eq!(r.emit_into(&mut buf), 60);
        assert_eq!(buf, PAUSE_BYTES);
        let mut res = PAUSE_BYTES;
        res[15] = TYPE_RESUME;
        let f = Frame::new_checked(&res[..20]).unwrap();
        assert_eq!(SignalRepr::parse(&f).unwrap().signal, Signal::Resume(5));
    }

    #[test]
    fn bitmap_layout() {
        let r = SignalRepr {
            dst_addr: [2, 0, 0, 0, 0, 1],
            src_addr: [2, 0, 0, 0, 0, 2],
            signal: Signal::Bitmap {
                count: 32,
                bits: (1 << 0) | (1 << 9) | (1 << 31),
            },
        };
        let mut buf = [0xEEu8; 60];
        r.emit_into(&mut buf);
        assert_eq!(&buf[12..18], &[0x88, 0xb5, 0x01, 0x03, 0x00, 0x20]);
        assert_eq!(&buf[18..22], &[0x01, 0x02, 0x00, 0x80]);
        assert!(buf[22..].iter().all(|&b| b == 0));
        assert_eq!(
            SignalRepr::parse(&Frame::new_checked(&buf[..]).unwrap()),
            Ok(r)
        );
    }

    #[test]
    fn malformed() {
        for n in 0..20 {
            let f = Frame::new_unchecked(&PAUSE_BYTES[..n]);
            assert_eq!(SignalRepr::parse(&f), Err(Error::Truncated), "len {n}");
        }
        let mut b = PAUSE_BYTES;
        b[12] = 0x08;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..])),
            Err(Error::WrongEtherType)
        );
        let mut b = PAUSE_BYTES;
        b[14] = 2;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..])),
            Err(Error::UnknownOpcode)
        );
        let mut b = PAUSE_BYTES;
        b[15] = 9;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..])),
            Err(Error::UnknownOpcode)
        );
        let mut b = PAUSE_BYTES;
        b[16] = 1;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..])),
            Err(Error::BadVector)
        );
        let mut b = PAUSE_BYTES;
        b[15] = TYPE_BITMAP;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..33])),
            Err(Error::Truncated)
        );
    }

    /// Aquarius FLOW PAUSE of flow 0xDEADBEEF, sent from the upstream's queue 3.
    static FLOW_PAUSE_BYTES: [u8; 60] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // src
        0x88, 0xb5, // Xoff signal
        0x01, // version
        0x10, // FLOW PAUSE
        0x00, 0x03, // queue 3
        0x00, 0x00, // reserved
        0xde, 0xad, 0xbe, 0xef, // FID
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn flow_pause_resume_bytes() {
        let f = Frame::new_checked(&FLOW_PAUSE_BYTES[..]).unwrap();
        assert_eq!(f.fid(), 0xDEAD_BEEF);
        let r = SignalRepr::parse(&f).unwrap();
        assert_eq!(
            r.signal,
            Signal::FlowPause {
                queue: 3,
                fid: 0xDEAD_BEEF
            }
        );
        let mut buf = [0x55u8; 60];
        r.emit_into(&mut buf);
        assert_eq!(buf, FLOW_PAUSE_BYTES);
        let mut res = FLOW_PAUSE_BYTES;
        res[15] = TYPE_FLOW_RESUME;
        let f = Frame::new_checked(&res[..24]).unwrap();
        assert_eq!(
            SignalRepr::parse(&f).unwrap().signal,
            Signal::FlowResume {
                queue: 3,
                fid: 0xDEAD_BEEF
            }
        );
        // The FID is required; a queue above 127 is refused.
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&FLOW_PAUSE_BYTES[..23])),
            Err(Error::Truncated)
        );
        let mut b = FLOW_PAUSE_BYTES;
        b[16] = 1;
        assert_eq!(
            SignalRepr::parse(&Frame::new_unchecked(&b[..])),
            Err(Error::BadVector)
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = SignalRepr::parse(&Frame::new_unchecked(&bytes[..]));
        }

        #[test]
        fn roundtrip(kind in 0u8..5, q in 0u8..128, count in 0u8..=128, bits in any::<u128>()) {
            let signal = match kind {
                0 => Signal::Pause(q),
                1 => Signal::Resume(q),
                3 => Signal::FlowPause { queue: q, fid: bits as u32 },
                4 => Signal::FlowResume { queue: q, fid: (bits >> 32) as u32 },
                _ => {
                    let mask = if count == 128 { u128::MAX } else { (1u128 << count) - 1 };
                    Signal::Bitmap { count, bits: bits & mask }
                }
            };
            let r = SignalRepr { dst_addr: [1; 6], src_addr: [2; 6], signal };
            let mut buf = [0xAAu8; 60];
            r.emit_into(&mut buf);
            prop_assert_eq!(SignalRepr::parse(&Frame::new_checked(&buf[..]).unwrap()), Ok(r));
        }
    }
}

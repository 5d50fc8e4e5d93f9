//! Pyrrha's flow-control frames (§4.4: PAUSE, RESUME, MERGE) as Xoff signal frames: EtherType
//! 0x88B5, version 1, types 0x20–0x2F (see [`crate::wire::signal`] for the common header).
//!
//! ```text
//!  0     6     12    14   15    16          18        20    21     22         24        26
//! +-----+-----+-----+----+-----+-----------+---------+-----+------+----------+---------+---
//! | dst | src |88B5 | 1  |type | switch    | port    |hops | rsvd |  (PAUSE/RESUME end) ... pad
//! +-----+-----+-----+----+-----+-----------+---------+-----+------+----------+---------+---
//!
//! type = 0x20 PAUSE   16 root switch-id (u16), 18 root port-id (u16), 20 hops (u8),
//!                     21 reserved (0)                                            -> 22 bytes
//!        0x21 RESUME  same fields
//!        0x22 MERGE   16 old root switch-id, 18 old root port-id, 20 old hops,
//!                     21 new hops, 22 new root switch-id, 24 new root port-id    -> 26 bytes
//! ```
//!
//! All fields are big endian. `hops` is the root's distance from the receiver in switch hops
//! (1: the egress port of the switch that sent the frame), the index of the receiver's
//! congestion-root table (App. E.2). Frames are padded to the 60-byte Ethernet minimum.
//! Order marks (App. C) never leave the switch that inserts them, so they have no frame.

use super::{Msg, RootId};
use crate::wire::signal::{DST_SIGNAL, ETHERTYPE_XOFF_SIGNAL, MIN_FRAME_LEN, VERSION};
use crate::wire::{Error, Result};

/// Signal type: PAUSE(root, hops).
pub const TYPE_PAUSE: u8 = 0x20;
/// Signal type: RESUME(root, hops).
pub const TYPE_RESUME: u8 = 0x21;
/// Signal type: MERGE(old root, old hops, new hops, new root).
pub const TYPE_MERGE: u8 = 0x22;

mod field {
    pub type Field = core::ops::Range<usize>;

    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const VERSION: usize = 14;
    pub const TYPE: usize = 15;
    pub const SWITCH: Field = 16..18;
    pub const PORT: Field = 18..20;
    pub const HOPS: usize = 20;
    pub const NEW_HOPS: usize = 21;
    pub const NEW_SWITCH: Field = 22..24;
    pub const NEW_PORT: Field = 24..26;
    pub const ROOT_END: usize = NEW_HOPS + 1;
    pub const MERGE_END: usize = NEW_PORT.end;
}

fn read_u16(b: &[u8], f: field::Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn write_u16(b: &mut [u8], f: field::Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Whether an Xoff signal type byte is one of Pyrrha's.
pub fn is_pyrrha_type(t: u8) -> bool {
    (0x20..=0x2F).contains(&t)
}

/// A read/write view of a Pyrrha signal frame, without FCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer and checks that every accessor of its type is in bounds.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len <= field::TYPE {
            return Err(Error::Truncated);
        }
        let need = match self.signal_type() {
            TYPE_PAUSE | TYPE_RESUME => field::ROOT_END,
            TYPE_MERGE => field::MERGE_END,
            _ => field::TYPE + 1,
        };
        if len < need {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    pub fn signal_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The root (MERGE: the old root).
    pub fn root(&self) -> RootId {
        let b = self.buffer.as_ref();
        RootId::new(read_u16(b, field::SWITCH), read_u16(b, field::PORT))
    }

    /// The root's hops (MERGE: the old root's).
    pub fn hops(&self) -> u8 {
        self.buffer.as_ref()[field::HOPS]
    }

    /// MERGE: the new root.
    pub fn new_root(&self) -> RootId {
        let b = self.buffer.as_ref();
        RootId::new(read_u16(b, field::NEW_SWITCH), read_u16(b, field::NEW_PORT))
    }

    /// MERGE: the new root's hops.
    pub fn new_hops(&self) -> u8 {
        self.buffer.as_ref()[field::NEW_HOPS]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    pub fn set_src_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    pub fn set_ethertype(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, v);
    }

    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    pub fn set_signal_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Sets the root and its hops (and zeroes the reserved byte of PAUSE/RESUME).
    pub fn set_root(&mut self, r: RootId, hops: u8) {
        let b = self.buffer.as_mut();
        write_u16(b, field::SWITCH, r.switch);
        write_u16(b, field::PORT, r.port);
        b[field::HOPS] = hops;
        b[field::NEW_HOPS] = 0;
    }

    /// MERGE: sets the new root and its hops.
    pub fn set_new_root(&mut self, r: RootId, hops: u8) {
        let b = self.buffer.as_mut();
        write_u16(b, field::NEW_SWITCH, r.switch);
        write_u16(b, field::NEW_PORT, r.port);
        b[field::NEW_HOPS] = hops;
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// High-level representation of a Pyrrha signal frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyrrhaRepr {
    /// Destination MAC (the link peer, or [`DST_SIGNAL`]).
    pub dst_addr: [u8; 6],
    /// Source MAC (the sending port's).
    pub src_addr: [u8; 6],
    pub msg: Msg,
}

impl PyrrhaRepr {
    /// Parses a Pyrrha frame; other Xoff signal types are `UnknownOpcode`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<PyrrhaRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_XOFF_SIGNAL {
            return Err(Error::WrongEtherType);
        }
        if frame.version() != VERSION {
            return Err(Error::UnknownOpcode);
        }
        // The root fields exist only in Pyrrha's types: `check_len` holds any other type to
        // the common header alone, so they are read only once the type is known (a 17-byte
        // BFC or Aquarius signal used to index past its end here).
        let msg = match frame.signal_type() {
            TYPE_PAUSE => Msg::Pause {
                root: frame.root(),
                hops: frame.hops(),
            },
            TYPE_RESUME => Msg::Resume {
                root: frame.root(),
                hops: frame.hops(),
            },
            TYPE_MERGE => Msg::Merge {
                old: frame.root(),
                old_hops: frame.hops(),
                new: frame.new_root(),
                new_hops: frame.new_hops(),
            },
            _ => return Err(Error::UnknownOpcode),
        };
        Ok(PyrrhaRepr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            msg,
        })
    }

    /// A frame from `src` to `dst` (or [`DST_SIGNAL`]).
    pub fn new(src: [u8; 6], dst: Option<[u8; 6]>, msg: Msg) -> Self {
        PyrrhaRepr {
            dst_addr: dst.unwrap_or(DST_SIGNAL),
            src_addr: src,
            msg,
        }
    }

    /// Length of the emitted frame: the 60-byte Ethernet minimum (FCS excluded).
    pub const fn buffer_len(&self) -> usize {
        MIN_FRAME_LEN
    }

    /// Emits into a buffer of at least [`buffer_len`](Self::buffer_len) bytes, padding
    /// included.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(ETHERTYPE_XOFF_SIGNAL);
        frame.set_version(VERSION);
        let end = match self.msg {
            Msg::Pause { root, hops } | Msg::Resume { root, hops } => {
                let t = if matches!(self.msg, Msg::Pause { .. }) {
                    TYPE_PAUSE
                } else {
                    TYPE_RESUME
                };
                frame.set_signal_type(t);
                frame.set_root(root, hops);
                field::ROOT_END
            }
            Msg::Merge {
                old,
                old_hops,
                new,
                new_hops,
            } => {
                frame.set_signal_type(TYPE_MERGE);
                frame.set_root(old, old_hops);
                frame.set_new_root(new, new_hops);
                field::MERGE_END
            }
        };
        if let Some(rest) = frame.buffer.as_mut().get_mut(end..MIN_FRAME_LEN) {
            rest.fill(0);
        }
    }

    /// Emits into `buf`; returns the frame length.
    pub fn emit_into(&self, buf: &mut [u8]) -> usize {
        let mut f = Frame::new_unchecked(&mut buf[..MIN_FRAME_LEN]);
        self.emit(&mut f);
        MIN_FRAME_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

    static PAUSE_BYTES: [u8; 22] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x88, 0xb5, // EtherType
        0x01, 0x20, // version, PAUSE
        0x00, 0x05, // root switch 5
        0x00, 0x03, // root port 3
        0x02, 0x00, // hops 2, reserved
    ];

    static MERGE_BYTES: [u8; 26] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x88, 0xb5, 0x01, 0x22, // EtherType, version, MERGE
        0x00, 0x01, 0x00, 0x04, // old root 1:4
        0x01, 0x03, // old hops 1, new hops 3
        0x01, 0x02, 0x00, 0x07, // new root 258:7
    ];

    #[test]
    fn pause_parses_from_static_bytes() {
        let f = Frame::new_checked(&PAUSE_BYTES[..]).unwrap();
        let r = PyrrhaRepr::parse(&f).unwrap();
        assert_eq!(r.dst_addr, DST);
        assert_eq!(r.src_addr, SRC);
        assert_eq!(
            r.msg,
            Msg::Pause {
                root: RootId::new(5, 3),
                hops: 2
            }
        );
    }

    #[test]
    fn merge_parses_from_static_bytes_and_emits_them_back() {
        let f = Frame::new_checked(&MERGE_BYTES[..]).unwrap();
        let r = PyrrhaRepr::parse(&f).unwrap();
        let want = Msg::Merge {
            old: RootId::new(1, 4),
            old_hops: 1,
            new: RootId::new(258, 7),
            new_hops: 3,
        };
        assert_eq!(r.msg, want);
        let mut buf = [0xffu8; 64];
        assert_eq!(r.emit_into(&mut buf), 60);
        assert_eq!(&buf[..26], &MERGE_BYTES[..]);
        assert!(buf[26..60].iter().all(|&b| b == 0), "padding");
        assert_eq!(buf[60], 0xff, "nothing written past 60 bytes");
    }

    #[test]
    fn emit_pause_and_resume_match_the_layout() {
        let root = RootId::new(5, 3);
        let mut buf = [0xffu8; 60];
        PyrrhaRepr::new(SRC, Some(DST), Msg::Pause { root, hops: 2 }).emit_into(&mut buf);
        assert_eq!(&buf[..22], &PAUSE_BYTES[..]);
        PyrrhaRepr::new(SRC, None, Msg::Resume { root, hops: 2 }).emit_into(&mut buf);
        assert_eq!(buf[15], TYPE_RESUME);
        assert_eq!(&buf[..6], &DST_SIGNAL);
        let f = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(
            PyrrhaRepr::parse(&f).unwrap().msg,
            Msg::Resume { root, hops: 2 }
        );
    }

    #[test]
    fn truncated_wrong_type_and_version_are_errors() {
        assert_eq!(
            Frame::new_checked(&PAUSE_BYTES[..21]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Frame::new_checked(&MERGE_BYTES[..25]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PAUSE_BYTES;
        b[15] = 0x01; // a BFC PAUSE is not Pyrrha's
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(PyrrhaRepr::parse(&f).unwrap_err(), Error::UnknownOpcode);
        let mut b = PAUSE_BYTES;
        b[14] = 2;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(PyrrhaRepr::parse(&f).unwrap_err(), Error::UnknownOpcode);
        let mut b = PAUSE_BYTES;
        b[13] = 0xb6;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(PyrrhaRepr::parse(&f).unwrap_err(), Error::WrongEtherType);
        assert!(is_pyrrha_type(TYPE_MERGE) && !is_pyrrha_type(0x10) && !is_pyrrha_type(0x30));
    }
}

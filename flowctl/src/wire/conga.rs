//! CONGA on the wire (issue 18's baseline, `loadbal::conga`): the data shim version 3, which
//! carries CONGA's overlay fields (CONGA §3.2, Fig. 4 of that paper: the VXLAN header's
//! LBTag, CE, FB_LBTag and FB_Metric) between leaf and spine switches.
//!
//! **Data shim, version 3** (EtherType 0x88B6 like versions 1 and 2, whose parsers reject it):
//!
//! ```text
//!  12     14           15              16                   17    18        20
//! +------+------------+---------------+--------------------+-----+---------+----------
//! | 88B6 | 3 | flags  | LBTag | 0|CE  | FB_LBTag | 0|FB_M  | 0   | src leaf| inner
//! |      | 4b | 4b    | 4b    | 1b|3b | 4b       | 1b|3b   |     | u16     | EtherType
//! +------+------------+---------------+--------------------+-----+---------+----------
//! ```
//!
//! - flags bit 0: FB valid (the FB fields carry a metric; else they are 0 and ignored);
//! - LBTag: the source leaf's uplink (0..15), CE: path congestion so far (0..7, Q = 3);
//! - FB_LBTag, FB_Metric: one Congestion-From-Leaf entry for the leaf this packet goes to;
//! - src leaf: the source leaf's index in the topology (CONGA takes it from the overlay's
//!   outer source address; Xoff has no overlay, so the shim names it).
//!
//! With the EtherType the shim adds 8 bytes, within the 16 the testbed's switch links leave for
//! the data shim. All fields big endian.

use super::{Error, Result};

/// EtherType of the data shim (all versions).
pub const ETHERTYPE_XOFF_SHIM: u16 = super::shim::ETHERTYPE_XOFF_SHIM;
/// Shim version carrying CONGA.
pub const SHIM_VERSION: u8 = 3;
/// Bytes the version-3 shim adds to a frame.
pub const SHIM_LEN: usize = 8;
/// Offset of the shim (after the MAC addresses).
pub const SHIM_OFF: usize = 12;
/// Flag: the FB fields are valid.
pub const FLAG_FB: u8 = 1;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const ETHERTYPE: Field = 12..14;
    pub const VER_FLAGS: usize = 14;
    pub const TAG_CE: usize = 15;
    pub const FB: usize = 16;
    pub const SRC_LEAF: Field = 18..20;
    pub const INNER_ETHERTYPE: Field = 20..22;
}

/// A view of a frame carrying the version-3 shim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer holding the MACs, the shim and the inner EtherType.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::INNER_ETHERTYPE.end {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    fn byte(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }

    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn version(&self) -> u8 {
        self.byte(field::VER_FLAGS) >> 4
    }

    pub fn flags(&self) -> u8 {
        self.byte(field::VER_FLAGS) & 0xF
    }

    pub fn lbtag(&self) -> u8 {
        self.byte(field::TAG_CE) >> 4
    }

    pub fn ce(&self) -> u8 {
        self.byte(field::TAG_CE) & 7
    }

    pub fn fb_lbtag(&self) -> u8 {
        self.byte(field::FB) >> 4
    }

    pub fn fb_metric(&self) -> u8 {
        self.byte(field::FB) & 7
    }

    pub fn src_leaf(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::SRC_LEAF];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn inner_ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::INNER_ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Writes the shim's 8 bytes (EtherType through source leaf).
    pub fn set_shim(&mut self, r: &ShimRepr) {
        let b = self.buffer.as_mut();
        b[field::ETHERTYPE].copy_from_slice(&ETHERTYPE_XOFF_SHIM.to_be_bytes());
        let (flags, fb) = match r.fb {
            Some((tag, m)) => (FLAG_FB, (tag & 0xF) << 4 | (m & 7)),
            None => (0, 0),
        };
        b[field::VER_FLAGS] = SHIM_VERSION << 4 | flags;
        b[field::TAG_CE] = (r.lbtag & 0xF) << 4 | (r.ce & 7);
        b[field::FB] = fb;
        b[field::FB + 1] = 0;
        b[field::SRC_LEAF].copy_from_slice(&r.src_leaf.to_be_bytes());
    }
}

/// The version-3 shim's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ShimRepr {
    /// The source leaf's uplink (4 bits).
    pub lbtag: u8,
    /// Path congestion so far (3 bits).
    pub ce: u8,
    /// Piggybacked feedback (FB_LBTag, FB_Metric) for the leaf the packet goes to.
    pub fb: Option<(u8, u8)>,
    /// The source leaf's index.
    pub src_leaf: u16,
}

impl ShimRepr {
    /// Parses the shim of a frame whose EtherType is 0x88B6, version 3.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<ShimRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_XOFF_SHIM {
            return Err(Error::WrongEtherType);
        }
        if frame.version() != SHIM_VERSION {
            return Err(Error::UnknownOpcode);
        }
        Ok(ShimRepr {
            lbtag: frame.lbtag(),
            ce: frame.ce(),
            fb: (frame.flags() & FLAG_FB != 0).then(|| (frame.fb_lbtag(), frame.fb_metric())),
            src_leaf: frame.src_leaf(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        SHIM_LEN
    }

    /// Inserts the shim after the MAC addresses of the `len`-byte frame in `buf`; the new
    /// length, or `None` (untouched) without room or EtherType.
    pub fn push(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        let n = super::shim::open_gap(buf, len, SHIM_LEN)?;
        Frame::new_unchecked(&mut *buf).set_shim(self);
        Some(n)
    }

    /// Parses and removes the shim; on error the frame is untouched.
    pub fn pop(buf: &mut [u8], len: usize) -> Result<(ShimRepr, usize)> {
        let len = len.min(buf.len());
        let r = Self::parse(&Frame::new_unchecked(&buf[..len]))?;
        Ok((r, super::shim::close_gap(buf, len, SHIM_LEN)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 72];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f
    }

    #[test]
    fn bytes_as_documented() {
        let r = ShimRepr {
            lbtag: 0xA,
            ce: 5,
            fb: Some((3, 6)),
            src_leaf: 0x0102,
        };
        let mut b = frame();
        let n = r.push(&mut b, 60).unwrap();
        assert_eq!(n, 68);
        assert_eq!(&b[12..22], &[0x88, 0xB6, 0x31, 0xA5, 0x36, 0, 1, 2, 8, 0]);
        assert_eq!(b[22], 0x45);
        let (back, m) = ShimRepr::pop(&mut b, n).unwrap();
        assert_eq!((back, m), (r, 60));
        assert_eq!(b[..60], frame()[..60]);
        // Without feedback the flag and FB byte are 0.
        let r = ShimRepr { fb: None, ..r };
        let mut b = frame();
        r.push(&mut b, 60).unwrap();
        assert_eq!(&b[14..17], &[0x30, 0xA5, 0]);
        assert_eq!(ShimRepr::pop(&mut b, 68).unwrap().0, r);
    }

    #[test]
    fn other_versions_and_short_frames_are_rejected() {
        let mut b = frame();
        (ShimRepr::default()).push(&mut b, 60).unwrap();
        b[14] = 0x20;
        assert_eq!(ShimRepr::pop(&mut b, 68), Err(Error::UnknownOpcode));
        assert_eq!(
            ShimRepr::parse(&Frame::new_unchecked(&frame()[..])),
            Err(Error::WrongEtherType)
        );
        assert_eq!(ShimRepr::pop(&mut b[..21], 21), Err(Error::Truncated));
        // Version-1 and version-2 parsers reject version 3.
        let mut b = frame();
        (ShimRepr::default()).push(&mut b, 60).unwrap();
        assert!(super::super::shim::ShimRepr::pop(&mut b.clone(), 68).is_err());
        assert!(super::super::proteus::ShimRepr::pop(&mut b, 68).is_err());
        // No room: untouched.
        let mut b = frame();
        assert_eq!(ShimRepr::default().push(&mut b, 68), None);
        assert_eq!(b, frame());
    }
}

//! The Xoff data shim: a 4-byte tag inserted after the MAC addresses of data frames sent
//! between Xoff devices that speak it (BFC switches, and hosts configured to), carrying the
//! queue the frame left from (BFC's `upstreamQ`, §3.3.2 and §5 "the NIC inserts upstreamQ").
//!
//! ```text
//!  0            6            12     14          15           16
//! +------------+------------+------+-----------+------------+------------------+----
//! | dst        | src        | 88B6 | ver|flags | upstreamQ  | original EtherType | ...
//! +------------+------------+------+-----------+------------+------------------+----
//!                                    4 bits 4 bits  u8
//! ```
//!
//! * EtherType 0x88B6 (IEEE 802 local experimental 2), like an 802.1Q TPID;
//! * `ver` (high nibble of byte 14) = 1; `flags` (low nibble) = 0, reserved;
//! * `upstreamQ` (byte 15): the sender's egress queue (0..=127);
//! * then the frame continues exactly as it was without the shim (a VLAN tag, IPv4, ...).
//!
//! The shim is 4 bytes so a shimmed full-size frame still fits a link whose MTU allows one
//! 802.1Q tag (Linux veth accepts MTU + 14 + 4 bytes), and so pushing and popping it is one
//! memmove of the frame behind the MAC addresses. Later versions may grow it (Proteus path
//! ids, timestamps); a version-1 parser rejects them rather than misreading them.

use super::{Error, Result};

/// EtherType of the Xoff data shim.
pub const ETHERTYPE_XOFF_SHIM: u16 = 0x88B6;
/// Shim version.
pub const VERSION: u8 = 1;
/// Bytes the shim adds to a frame.
pub const SHIM_LEN: usize = 4;
/// Offset of the shim (after destination and source MAC addresses).
pub const SHIM_OFF: usize = 12;

mod field {
    pub const ETHERTYPE: core::ops::Range<usize> = 12..14;
    pub const VER_FLAGS: usize = 14;
    pub const UPSTREAM_Q: usize = 15;
    pub const INNER_ETHERTYPE: core::ops::Range<usize> = 16..18;
}

/// A read/write view of a shimmed Ethernet frame (the shim and the EtherType after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer that holds at least the shim and the inner EtherType.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// The buffer must hold 18 bytes (MACs, shim, inner EtherType).
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::INNER_ETHERTYPE.end {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// EtherType at offset 12 (0x88B6 when shimmed).
    pub fn ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::ETHERTYPE.start], b[field::ETHERTYPE.start + 1]])
    }

    /// Version (high nibble of byte 14).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_FLAGS] >> 4
    }

    /// Flags (low nibble of byte 14).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::VER_FLAGS] & 0x0F
    }

    /// The sender's egress queue.
    pub fn upstream_q(&self) -> u8 {
        self.buffer.as_ref()[field::UPSTREAM_Q]
    }

    /// EtherType of what follows the shim.
    pub fn inner_ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([
            b[field::INNER_ETHERTYPE.start],
            b[field::INNER_ETHERTYPE.start + 1],
        ])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Write the shim's own four bytes (EtherType, version/flags, upstreamQ).
    pub fn set_shim(&mut self, ver: u8, flags: u8, upstream_q: u8) {
        let b = self.buffer.as_mut();
        b[field::ETHERTYPE].copy_from_slice(&ETHERTYPE_XOFF_SHIM.to_be_bytes());
        b[field::VER_FLAGS] = (ver << 4) | (flags & 0x0F);
        b[field::UPSTREAM_Q] = upstream_q;
    }
}

/// High-level representation of the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShimRepr {
    /// The queue the frame left from at the sender (BFC `upstreamQ`).
    pub upstream_q: u8,
}

impl ShimRepr {
    /// Parse the shim of a frame whose EtherType is 0x88B6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<ShimRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_XOFF_SHIM {
            return Err(Error::WrongEtherType);
        }
        if frame.version() != VERSION {
            return Err(Error::UnknownOpcode);
        }
        if frame.upstream_q() >= 128 {
            return Err(Error::BadVector);
        }
        Ok(ShimRepr {
            upstream_q: frame.upstream_q(),
        })
    }

    /// Bytes the shim adds.
    pub const fn buffer_len(&self) -> usize {
        SHIM_LEN
    }

    /// Inserts the shim into the `len`-byte frame at the front of `buf` (moving everything
    /// after the MAC addresses back by 4 bytes) and returns the new length, or `None` (frame
    /// untouched) if `buf` has no room or the frame has no EtherType.
    pub fn push(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        let n = open_gap(buf, len, SHIM_LEN)?;
        Frame::new_unchecked(&mut *buf).set_shim(VERSION, 0, self.upstream_q);
        Some(n)
    }

    /// Parses and removes the shim of the `len`-byte frame at the front of `buf`; returns the
    /// shim and the new length. On error the frame is untouched.
    pub fn pop(buf: &mut [u8], len: usize) -> Result<(ShimRepr, usize)> {
        let len = len.min(buf.len());
        let r = Self::parse(&Frame::new_unchecked(&buf[..len]))?;
        Ok((r, close_gap(buf, len, SHIM_LEN)))
    }
}

/// Opens `n` bytes after the MAC addresses of the `len`-byte frame in `buf`, where a shim
/// (of any version) goes; the new length, or `None` (untouched) without room or EtherType.
pub(crate) fn open_gap(buf: &mut [u8], len: usize, n: usize) -> Option<usize> {
    if len < SHIM_OFF + 2 || len + n > buf.len() {
        return None;
    }
    buf.copy_within(SHIM_OFF..len, SHIM_OFF + n);
    Some(len + n)
}

/// Closes the `n` bytes after the MAC addresses of the `len`-byte frame in `buf` (a parsed
/// shim, so `len` ≥ 12 + `n`); the new length.
pub(crate) fn close_gap(buf: &mut [u8], len: usize, n: usize) -> usize {
    buf.copy_within(SHIM_OFF + n..len, SHIM_OFF);
    len - n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn push_and_pop_bytes() {
        let mut f = [0u8; 64];
        f[..12].copy_from_slice(&[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[19] = 0x99;
        let orig = f;
        let n = ShimRepr { upstream_q: 7 }.push(&mut f, 20).unwrap();
        assert_eq!(n, 24);
        assert_eq!(&f[..12], &orig[..12]);
        assert_eq!(&f[12..18], &[0x88, 0xb6, 0x10, 0x07, 0x08, 0x00]);
        assert_eq!(&f[18..24], &orig[14..20]);
        let v = Frame::new_checked(&f[..n]).unwrap();
        assert_eq!(v.inner_ethertype(), 0x0800);
        assert_eq!((v.version(), v.flags()), (1, 0));
        let (r, m) = ShimRepr::pop(&mut f, n).unwrap();
        assert_eq!((r.upstream_q, m), (7, 20));
        assert_eq!(&f[..20], &orig[..20]);
    }

    #[test]
    fn refuses() {
        let mut f = [0u8; 20];
        assert_eq!(ShimRepr { upstream_q: 1 }.push(&mut f, 17), None);
        assert_eq!(ShimRepr { upstream_q: 1 }.push(&mut f, 13), None);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(ShimRepr::pop(&mut f, 20), Err(Error::WrongEtherType));
        f[12..16].copy_from_slice(&[0x88, 0xb6, 0x20, 0]);
        assert_eq!(ShimRepr::pop(&mut f, 20), Err(Error::UnknownOpcode));
        f[14] = 0x10;
        f[15] = 200;
        assert_eq!(ShimRepr::pop(&mut f, 20), Err(Error::BadVector));
        assert_eq!(ShimRepr::pop(&mut f, 17), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn roundtrip(body in proptest::collection::vec(any::<u8>(), 14..200), q in 0u8..128) {
            let mut buf = vec![0u8; body.len() + 8];
            buf[..body.len()].copy_from_slice(&body);
            let n = ShimRepr { upstream_q: q }.push(&mut buf, body.len()).unwrap();
            let (r, m) = ShimRepr::pop(&mut buf, n).unwrap();
            prop_assert_eq!(r.upstream_q, q);
            prop_assert_eq!(&buf[..m], &body[..]);
        }

        #[test]
        fn random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let n = bytes.len();
            let _ = ShimRepr::pop(&mut bytes, n);
        }
    }
}

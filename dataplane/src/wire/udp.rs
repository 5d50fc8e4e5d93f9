//! UDP headers (RFC 768): what Xoff's data frames carry their data header in.

use super::{Result, WireError};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the header and the length field covers it.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if usize::from(self.len()) < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        Ok(())
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Header plus payload bytes (the length field; a datagram is never empty).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
}

/// High-level UDP header. Xoff emits no checksum (0, allowed over IPv4): the frames are
/// generated and consumed by Xoff itself, and a checksum would cost every emitted frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header.
    pub payload_len: usize,
}

impl UdpRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<Self> {
        p.check_len()?;
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 8-byte header with checksum 0. The buffer must hold at least 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UdpPacket<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len((HEADER_LEN + self.payload_len) as u16);
        p.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_buffers() {
        let r = UdpRepr {
            src_port: 49152,
            dst_port: 4791,
            payload_len: 24,
        };
        let mut b = [0xffu8; 8];
        r.emit(&mut UdpPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, [0xc0, 0x00, 0x12, 0xb7, 0, 32, 0, 0]);
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).unwrap_err(),
            WireError::Truncated
        );
        b[5] = 7; // length shorter than the header
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}

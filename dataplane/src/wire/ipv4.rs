//! IPv4 headers: what the switch reads (addresses, protocol, DSCP/ECN, TTL) and rewrites (TTL,
//! ECN CE) with the header checksum kept valid.

use super::{ones_complement_sum, Result, WireError};
use std::net::Ipv4Addr;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the whole header (with options) and that the header is sane:
    /// version 4, IHL ≥ 5, total length covering the header and not exceeding the buffer.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 || self.header_len() < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if b.len() < self.header_len() || b.len() < usize::from(self.total_len()) {
            return Err(WireError::Truncated);
        }
        if usize::from(self.total_len()) < self.header_len() {
            return Err(WireError::Malformed);
        }
        Ok(())
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 3
    }

    pub fn total_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Whether the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        ones_complement_sum(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }

    /// The transport payload (after options, up to total length).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 3);
    }

    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = !ones_complement_sum(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }

    /// Decrements the TTL, updating the checksum incrementally (RFC 1624). The caller checks
    /// that the TTL is above 1 first.
    #[inline]
    pub fn decrement_ttl(&mut self) {
        let ttl = self.ttl();
        self.set_ttl(ttl.wrapping_sub(1));
        // The TTL is the high byte of the 16-bit word it shares with the protocol.
        let old = u16::from_be_bytes([ttl, self.protocol()]);
        let new = old.wrapping_sub(0x0100);
        self.adjust_checksum(old, new);
    }

    /// Sets ECN to Congestion Experienced (11), updating the checksum incrementally.
    pub fn set_ecn_ce(&mut self) {
        let b = self.buffer.as_ref()[field::DSCP_ECN];
        let old = u16::from_be_bytes([self.buffer.as_ref()[field::VER_IHL], b]);
        self.buffer.as_mut()[field::DSCP_ECN] = b | 3;
        let new = old | 3;
        self.adjust_checksum(old, new);
    }

    #[inline]
    fn adjust_checksum(&mut self, old: u16, new: u16) {
        // HC' = ~(~HC + ~m + m')
        let hc = self.checksum();
        let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        let c = !(sum as u16);
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// High-level IPv4 header (no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub payload_len: usize,
}

impl Ipv4Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ttl: p.ttl(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with a valid checksum. `buf` must hold at least 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) {
        let total = (HEADER_LEN + self.payload_len) as u16;
        let b = p.buffer.as_mut();
        b[..HEADER_LEN].fill(0);
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = (self.dscp << 2) | (self.ecn & 3);
        b[field::LENGTH].copy_from_slice(&total.to_be_bytes());
        b[6] = 0x40; // don't fragment
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = self.protocol;
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.0.1 -> 10.0.0.2, UDP, TTL 64, DSCP 26 (AF31), ECT(0), 28 bytes total; checksum by hand.
    static PKT: [u8; 28] = [
        0x45, 0x6a, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0x65, 10, 0, 0, 1, 10, 0,
        0, 2, 0x30, 0x39, 0x14, 0x51, 0x00, 0x08, 0x00, 0x00,
    ];

    #[test]
    fn parse_static_packet() {
        let p = Ipv4Packet::new_checked(&PKT[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.dst, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(
            (r.protocol, r.dscp, r.ecn, r.ttl, r.payload_len),
            (17, 26, 2, 64, 8)
        );
    }

    #[test]
    fn emit_matches_static_packet() {
        let mut buf = PKT;
        buf[..20].fill(0);
        let r = Ipv4Repr::parse(&Ipv4Packet::new_checked(&PKT[..]).unwrap()).unwrap();
        r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PKT);
    }

    #[test]
    fn incremental_updates_keep_checksum_valid() {
        let mut buf = PKT;
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.decrement_ttl();
        p.set_ecn_ce();
        assert_eq!((p.ttl(), p.ecn()), (63, 3));
        assert!(p.verify_checksum());
        let inc = p.checksum();
        p.fill_checksum();
        assert_eq!(inc, p.checksum());
    }

    #[test]
    fn malformed_headers_are_rejected() {
        assert_eq!(
            Ipv4Packet::new_checked(&PKT[..19]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = PKT;
        bad[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        bad[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        // total length beyond the buffer
        assert_eq!(
            Ipv4Packet::new_checked(&PKT[..27]).unwrap_err(),
            WireError::Truncated
        );
    }
}

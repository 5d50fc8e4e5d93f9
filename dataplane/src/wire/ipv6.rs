//! IPv6 fixed headers: addresses, next header, traffic class (DSCP/ECN), hop limit.

use super::{Result, WireError};
use std::net::Ipv6Addr;

mod field {
    use core::ops::Range;
    pub const VTC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(WireError::Malformed);
        }
        if b.len() < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    fn vtc_flow(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VTC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn traffic_class(&self) -> u8 {
        (self.vtc_flow() >> 20) as u8
    }

    pub fn flow_label(&self) -> u32 {
        self.vtc_flow() & 0x000f_ffff
    }

    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_vtc_flow(&mut self, v: u32) {
        self.buffer.as_mut()[field::VTC_FLOW].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_traffic_class(&mut self, tc: u8) {
        let v = (self.vtc_flow() & 0xf00f_ffff) | (u32::from(tc) << 20);
        self.set_vtc_flow(v);
    }

    /// Sets ECN to Congestion Experienced (no checksum in IPv6).
    pub fn set_ecn_ce(&mut self) {
        let tc = self.traffic_class() | 3;
        self.set_traffic_class(tc);
    }

    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }
}

/// High-level IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub payload_len: usize,
}

impl Ipv6Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Ipv6Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: p.next_header(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            payload_len: usize::from(p.payload_len()),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>) {
        let v =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff);
        let b = p.buffer.as_mut();
        b[field::VTC_FLOW].copy_from_slice(&v.to_be_bytes());
        b[field::LENGTH].copy_from_slice(&(self.payload_len as u16).to_be_bytes());
        b[field::NXT_HDR] = self.next_header;
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // fd00::1 -> fd00::2, TCP, traffic class 0x69 (DSCP 26, ECT(1)), flow 0x12345, 4 B payload.
    static PKT: [u8; 44] = [
        0x66, 0x91, 0x23, 0x45, 0x00, 0x04, 0x06, 0x40, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 1, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x30, 0x39, 0x14, 0x51,
    ];

    #[test]
    fn parse_and_emit_static_packet() {
        let p = Ipv6Packet::new_checked(&PKT[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.src, "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            (
                r.next_header,
                r.traffic_class,
                r.flow_label,
                r.hop_limit,
                r.payload_len
            ),
            (6, 0x69, 0x12345, 64, 4)
        );
        let mut buf = [0u8; 44];
        buf[40..].copy_from_slice(&PKT[40..]);
        r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PKT);
    }

    #[test]
    fn ce_marking_and_errors() {
        let mut buf = PKT;
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
        p.set_ecn_ce();
        assert_eq!(p.traffic_class(), 0x6b);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(
            Ipv6Packet::new_checked(&PKT[..39]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&PKT[..43]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = PKT;
        bad[0] = 0x46;
        assert_eq!(
            Ipv6Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}

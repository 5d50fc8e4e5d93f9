//! Xoff data frames: Ethernet (optionally 802.1Q) / IPv4 / UDP whose payload starts with the
//! 24-byte data header, all big-endian:
//!
//! ```text
//! 0 magic "XOFF" u32   4 flow id u32   8 sequence number u64   16 send time in ps u64
//! ```
//!
//! The fabric's sources and sinks and the host stack (which appends its own fields after
//! it) both speak this format, so it lives here rather than with either of them.

use super::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr, VlanRepr, VlanTag};
use super::ipv4::{Ipv4Packet, Ipv4Repr};
use super::udp::{self, UdpPacket, UdpRepr};
use super::{Result, WireError};
use std::net::Ipv4Addr;

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const FLOW: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..16;
    pub const SENT: Range<usize> = 16..24;
}

/// Magic at the start of the data header ("XOFF").
pub const DATA_MAGIC: u32 = 0x584f_4646;
/// Bytes of the data header in the UDP payload.
pub const DATA_HEADER_LEN: usize = 24;

/// A view of the data header at the start of a UDP payload.
#[derive(Debug, Clone)]
pub struct DataPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DataPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        DataPacket { buffer }
    }

    /// A view that checks the buffer holds the header and starts with the magic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < DATA_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if p.magic() != DATA_MAGIC {
            return Err(WireError::Malformed);
        }
        Ok(p)
    }

    fn u64_at(&self, r: core::ops::Range<usize>) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[r]);
        u64::from_be_bytes(b)
    }

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[r]);
        u32::from_be_bytes(b)
    }

    pub fn magic(&self) -> u32 {
        self.u32_at(field::MAGIC)
    }

    pub fn flow(&self) -> u32 {
        self.u32_at(field::FLOW)
    }

    pub fn seq(&self) -> u64 {
        self.u64_at(field::SEQ)
    }

    pub fn sent_ps(&self) -> u64 {
        self.u64_at(field::SENT)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DataPacket<T> {
    pub fn set_magic(&mut self) {
        self.buffer.as_mut()[field::MAGIC].copy_from_slice(&DATA_MAGIC.to_be_bytes());
    }

    pub fn set_flow(&mut self, v: u32) {
        self.buffer.as_mut()[field::FLOW].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_seq(&mut self, v: u64) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_sent_ps(&mut self, v: u64) {
        self.buffer.as_mut()[field::SENT].copy_from_slice(&v.to_be_bytes());
    }
}

/// Flow id, sequence number and send time carried in every data packet (the data header's
/// high-level representation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    pub flow: u32,
    pub seq: u64,
    pub sent_ps: u64,
}

impl DataHeader {
    /// Reads a data header view.
    pub fn parse_packet<T: AsRef<[u8]>>(p: &DataPacket<T>) -> Self {
        DataHeader {
            flow: p.flow(),
            seq: p.seq(),
            sent_ps: p.sent_ps(),
        }
    }

    /// Writes the header (magic included) into the first [`DATA_HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = DataPacket::new_unchecked(buf);
        p.set_magic();
        p.set_flow(self.flow);
        p.set_seq(self.seq);
        p.set_sent_ps(self.sent_ps);
    }

    /// Reads the data header of a data frame (Ethernet, optional 802.1Q tag, IPv4 without
    /// options or with, UDP); `None` for anything else.
    pub fn parse(frame: &[u8]) -> Option<DataHeader> {
        let p = magic_payload(frame, DATA_HEADER_LEN)?;
        DataPacket::new_checked(p)
            .ok()
            .map(|p| Self::parse_packet(&p))
    }
}

/// Addresses and marking of a flow's data frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub prio: u8,
    /// Carry the priority in an 802.1Q tag (PCP) rather than DSCP.
    pub vlan: bool,
    /// ECT(0).
    pub ecn: bool,
}

impl FrameTemplate {
    /// Offset of the data header in the frame.
    pub fn payload_off(&self) -> usize {
        14 + if self.vlan { 4 } else { 0 } + 20 + udp::HEADER_LEN
    }

    /// The shortest frame that carries the data header.
    pub fn min_len(&self) -> usize {
        self.payload_off() + DATA_HEADER_LEN
    }

    /// Writes the Ethernet, (VLAN), IPv4 and UDP headers of a `len`-byte frame into `buf`;
    /// returns the offset of the payload. `len` must be at least [`Self::min_len`].
    pub fn emit_headers(&self, buf: &mut [u8], len: usize) -> usize {
        let mut off = 14;
        EthernetRepr {
            src: self.src_mac,
            dst: self.dst_mac,
            ethertype: if self.vlan {
                EtherType::VLAN
            } else {
                EtherType::IPV4
            },
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        if self.vlan {
            VlanRepr {
                pcp: self.prio & 7,
                dei: false,
                vid: 0,
                ethertype: EtherType::IPV4,
            }
            .emit(&mut VlanTag::new_unchecked(&mut buf[off..off + 4]));
            off += 4;
        }
        let ip_payload = len - off - 20;
        Ipv4Repr {
            src: self.src_ip,
            dst: self.dst_ip,
            protocol: 17,
            dscp: if self.vlan { 0 } else { (self.prio & 7) << 3 },
            ecn: if self.ecn { 2 } else { 0 },
            ttl: 64,
            payload_len: ip_payload,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut buf[off..off + 20]));
        off += 20;
        UdpRepr {
            src_port: self.sport,
            dst_port: self.dport,
            payload_len: ip_payload - udp::HEADER_LEN,
        }
        .emit(&mut UdpPacket::new_unchecked(
            &mut buf[off..off + udp::HEADER_LEN],
        ));
        off + udp::HEADER_LEN
    }
}

/// The first `len` bytes of the UDP payload of an Ethernet (optionally 802.1Q) / IPv4 / UDP
/// frame, if they start with [`DATA_MAGIC`]: where every Xoff host header lives.
pub fn magic_payload(frame: &[u8], len: usize) -> Option<&[u8]> {
    magic_payload_at(frame, 12, len)
}

/// The UDP payload of an IPv4 frame (untagged or behind one VLAN tag) whose EtherType sits
/// at `et_off`, as `(start, end)` offsets (end: the IP packet's end), or `None` if it is not
/// one.
pub(crate) fn udp_payload(frame: &[u8], et_off: usize) -> Option<(usize, usize)> {
    let mut off = et_off + 2;
    let mut et = u16::from_be_bytes([*frame.get(et_off)?, *frame.get(et_off + 1)?]);
    if et == EtherType::VLAN {
        et = u16::from_be_bytes([*frame.get(off + 2)?, *frame.get(off + 3)?]);
        off += 4;
    }
    if et != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(frame.get(off..)?).ok()?;
    if ip.protocol() != 17 {
        return None;
    }
    Some((
        off + ip.header_len() + udp::HEADER_LEN,
        off + usize::from(ip.total_len()),
    ))
}

/// [`magic_payload`] of a frame whose EtherType sits at `et_off` (16 behind the Xoff data
/// shim).
pub fn magic_payload_at(frame: &[u8], et_off: usize, len: usize) -> Option<&[u8]> {
    let (start, end) = udp_payload(frame, et_off)?;
    if start + len > end {
        return None;
    }
    let p = frame.get(start..start + len)?;
    (p.get(field::MAGIC)? == DATA_MAGIC.to_be_bytes()).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn data_frames_parse_in_the_switch_and_the_sink() {
        for vlan in [false, true] {
            let t = FrameTemplate {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 0, 0, 2),
                sport: 5000,
                dport: 6000,
                prio: 5,
                vlan,
                ecn: true,
            };
            let mut f = vec![0u8; 200];
            let off = t.emit_headers(&mut f, 200);
            let h = DataHeader {
                flow: 7,
                seq: 1 << 40,
                sent_ps: 123_456_789,
            };
            h.emit(&mut f[off..]);
            assert_eq!(DataHeader::parse(&f), Some(h));
            let m = parse::parse(&f).unwrap();
            let tuple = m.five_tuple().unwrap();
            assert_eq!((tuple.sport, tuple.dport, tuple.proto), (5000, 6000, 17));
            assert!(m.ecn_capable());
            match (vlan, m.l3) {
                (true, _) => assert_eq!(m.pcp, Some(5)),
                (false, parse::L3::Ip { dscp, .. }) => assert_eq!(dscp >> 3, 5),
                (false, parse::L3::None) => panic!("not IP"),
            }
            let udp = UdpPacket::new_checked(&f[off - udp::HEADER_LEN..]).unwrap();
            assert_eq!(usize::from(udp.len()), 200 - off + udp::HEADER_LEN);
            f[off] ^= 1;
            assert_eq!(DataHeader::parse(&f), None);
        }
    }

    #[test]
    fn short_or_foreign_payloads_are_not_data_headers() {
        let mut b = [0u8; DATA_HEADER_LEN];
        DataHeader {
            flow: 1,
            seq: 2,
            sent_ps: 3,
        }
        .emit(&mut b);
        assert_eq!(&b[..4], b"XOFF");
        assert!(DataPacket::new_checked(&b[..]).is_ok());
        assert_eq!(
            DataPacket::new_checked(&b[..23]).unwrap_err(),
            WireError::Truncated
        );
        b[0] = b'Y';
        assert_eq!(
            DataPacket::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed
        );
    }
}

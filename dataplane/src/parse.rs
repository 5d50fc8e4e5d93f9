//! Per-packet parsing: everything later stages need, read once from the frame.
//!
//! Malformed frames are not errors of the switch: they become a [`DropReason`] that the caller
//! counts, and the frame is recycled.

use crate::stats::DropReason;
use crate::wire::{
    ethernet, ipv4, ipv6, EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr, VlanTag,
    WireError,
};
use loadbal::FiveTuple;
use std::net::IpAddr;

/// Minimum Ethernet frame without FCS. Linux veth does not pad short frames, so only formats
/// with a fixed size (ARP, MAC control) are held to their minimum; IP is checked by its own
/// length fields.
pub const MIN_FRAME: usize = 60;

/// What the pipeline knows about a frame after parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// PCP of the outer 802.1Q tag, if tagged.
    pub pcp: Option<u8>,
    /// EtherType after any VLAN tag.
    pub ethertype: u16,
    /// Offset of the L3 header in the frame.
    pub l3_off: u16,
    pub l3: L3,
}

/// The network layer, when the switch understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    None,
    Ip {
        tuple: FiveTuple,
        dscp: u8,
        ecn: u8,
        ttl: u8,
    },
}

impl PacketMeta {
    /// The 5-tuple, if this is an IP packet.
    pub fn five_tuple(&self) -> Option<&FiveTuple> {
        match &self.l3 {
            L3::Ip { tuple, .. } => Some(tuple),
            L3::None => None,
        }
    }

    /// ECN-capable transport (ECT(0), ECT(1), or already CE).
    pub fn ecn_capable(&self) -> bool {
        matches!(self.l3, L3::Ip { ecn, .. } if ecn != 0)
    }
}

fn l4_ports(proto: u8, payload: &[u8]) -> (u16, u16) {
    // TCP (6), UDP (17), SCTP (132), UDP-Lite (136) start with the two ports.
    if matches!(proto, 6 | 17 | 132 | 136) && payload.len() >= 4 {
        (
            u16::from_be_bytes([payload[0], payload[1]]),
            u16::from_be_bytes([payload[2], payload[3]]),
        )
    } else {
        (0, 0)
    }
}

/// Parses `frame` (without FCS).
#[inline]
pub fn parse(frame: &[u8]) -> Result<PacketMeta, DropReason> {
    match parse_plain_ipv4(frame) {
        Some(m) => Ok(m),
        None => parse_any(frame),
    }
}

/// The common case of [`parse`], read at fixed offsets after one length check: an untagged
/// IPv4 frame whose header has no options and whose total length the frame holds. It gives
/// exactly what `parse_any` gives such a frame (`None` for every other frame, which
/// `parse_any` then parses or refuses): the checks of `Ipv4Packet::check_len` are version 4,
/// IHL 5 and 20 <= total length <= bytes after the Ethernet header; the ports are read when
/// the payload (total length - 20) holds them. Spelled out, it costs a routed frame about a
/// third of `parse_any`'s instructions (`bench/callgrind.sh`).
#[inline]
fn parse_plain_ipv4(frame: &[u8]) -> Option<PacketMeta> {
    const IP: usize = ethernet::HEADER_LEN;
    let h: &[u8; IP + ipv4::HEADER_LEN] = frame.get(..IP + ipv4::HEADER_LEN)?.try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != EtherType::IPV4 || h[IP] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[IP + 2], h[IP + 3]]));
    if total < ipv4::HEADER_LEN || frame.len() - IP < total {
        return None;
    }
    let proto = h[IP + 9];
    let (sport, dport) = l4_ports(proto, &frame[IP + ipv4::HEADER_LEN..IP + total]);
    let addr = |o: usize| std::net::Ipv4Addr::new(h[o], h[o + 1], h[o + 2], h[o + 3]);
    let mac = |o: usize| MacAddr([h[o], h[o + 1], h[o + 2], h[o + 3], h[o + 4], h[o + 5]]);
    Some(PacketMeta {
        dst: mac(0),
        src: mac(6),
        pcp: None,
        ethertype: EtherType::IPV4,
        l3_off: IP as u16,
        l3: L3::Ip {
            tuple: FiveTuple {
                proto,
                src: IpAddr::V4(addr(IP + 12)),
                dst: IpAddr::V4(addr(IP + 16)),
                sport,
                dport,
            },
            dscp: h[IP + 1] >> 2,
            ecn: h[IP + 1] & 3,
            ttl: h[IP + 8],
        },
    })
}

/// [`parse`] of any frame.
fn parse_any(frame: &[u8]) -> Result<PacketMeta, DropReason> {
    if frame.len() < ethernet::HEADER_LEN {
        return Err(DropReason::Runt);
    }
    let eth = EthernetFrame::new_unchecked(frame);
    let (mut ethertype, mut off, mut pcp) = (eth.ethertype(), ethernet::HEADER_LEN, None);
    if ethertype == EtherType::VLAN {
        let tag = VlanTag::new_checked(&frame[off..]).map_err(|_| DropReason::Runt)?;
        pcp = Some(tag.pcp());
        ethertype = tag.ethertype();
        off += ethernet::VLAN_TAG_LEN;
    }
    let l3 = match ethertype {
        EtherType::IPV4 => {
            let p = Ipv4Packet::new_checked(&frame[off..]).map_err(|e| match e {
                WireError::Truncated => DropReason::TruncatedIpv4,
                WireError::Malformed => DropReason::BadIpv4Header,
            })?;
            let (sport, dport) = l4_ports(p.protocol(), p.payload());
            L3::Ip {
                tuple: FiveTuple {
                    proto: p.protocol(),
                    src: IpAddr::V4(p.src_addr()),
                    dst: IpAddr::V4(p.dst_addr()),
                    sport,
                    dport,
                },
                dscp: p.dscp(),
                ecn: p.ecn(),
                ttl: p.ttl(),
            }
        }
        EtherType::IPV6 => {
            let p = Ipv6Packet::new_checked(&frame[off..]).map_err(|e| match e {
                WireError::Truncated => DropReason::TruncatedIpv6,
                WireError::Malformed => DropReason::BadIpv6Header,
            })?;
            let (sport, dport) = l4_ports(p.next_header(), p.payload());
            let tc = p.traffic_class();
            L3::Ip {
                tuple: FiveTuple {
                    proto: p.next_header(),
                    src: IpAddr::V6(p.src_addr()),
                    dst: IpAddr::V6(p.dst_addr()),
                    sport,
                    dport,
                },
                dscp: tc >> 2,
                ecn: tc & 3,
                ttl: p.hop_limit(),
            }
        }
        EtherType::ARP | EtherType::MAC_CONTROL | EtherType::XOFF_SIGNAL | EtherType::XOFF_SHIM => {
            L3::None
        }
        _ => return Err(DropReason::UnknownEtherType),
    };
    // Non-IP frames have no length field to check against: require their fixed minimum.
    let min = match ethertype {
        EtherType::ARP => 28,
        EtherType::MAC_CONTROL => MIN_FRAME - ethernet::HEADER_LEN,
        _ => 0,
    };
    if frame.len() < off + min {
        return Err(DropReason::Runt);
    }
    Ok(PacketMeta {
        dst: eth.dst_addr(),
        src: eth.src_addr(),
        pcp,
        ethertype,
        l3_off: off as u16,
        l3,
    })
}

/// Rewrites a routed IP packet in place: TTL/hop limit minus one (checksum kept valid).
#[inline]
pub fn decrement_ttl(frame: &mut [u8], meta: &PacketMeta) {
    let l3 = &mut frame[usize::from(meta.l3_off)..];
    match meta.ethertype {
        EtherType::IPV4 => Ipv4Packet::new_unchecked(l3).decrement_ttl(),
        EtherType::IPV6 => {
            let mut p = Ipv6Packet::new_unchecked(l3);
            let h = p.hop_limit();
            p.set_hop_limit(h.saturating_sub(1));
        }
        _ => {}
    }
}

/// Marks ECN CE on an IP packet in place.
pub fn mark_ce(frame: &mut [u8], meta: &PacketMeta) {
    let l3 = &mut frame[usize::from(meta.l3_off)..];
    match meta.ethertype {
        EtherType::IPV4 if l3.len() >= ipv4::HEADER_LEN => {
            Ipv4Packet::new_unchecked(l3).set_ecn_ce()
        }
        EtherType::IPV6 if l3.len() >= ipv6::HEADER_LEN => {
            Ipv6Packet::new_unchecked(l3).set_ecn_ce()
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EthernetRepr, Ipv4Repr};
    use std::net::Ipv4Addr;

    pub(crate) fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(MIN_FRAME)];
        EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        let plen = f.len() - 14 - 20;
        Ipv4Repr {
            src: Ipv4Addr::from(src),
            dst: Ipv4Addr::from(dst),
            protocol: 17,
            dscp: 0,
            ecn: 1,
            ttl: 64,
            payload_len: plen,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn udp_five_tuple() {
        let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 100);
        let m = parse(&f).unwrap();
        let t = m.five_tuple().unwrap();
        assert_eq!((t.proto, t.sport, t.dport), (17, 1234, 80));
        assert!(m.ecn_capable());
        assert_eq!(m.l3_off, 14);
    }

    #[test]
    fn malformed_frames_have_reasons() {
        let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
        assert_eq!(parse(&f[..10]), Err(DropReason::Runt));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&EtherType::ARP.to_be_bytes());
        assert_eq!(parse(&arp[..30]), Err(DropReason::Runt));
        assert!(parse(&arp[..42]).is_ok());
        // IPv4 header cut short: a truncated header, even though the frame is a runt too.
        assert_eq!(parse(&f[..14 + 12]), Err(DropReason::TruncatedIpv4));
        let mut bad = f.clone();
        bad[14] = 0x43;
        assert_eq!(parse(&bad), Err(DropReason::BadIpv4Header));
        let mut unk = f.clone();
        unk[12..14].copy_from_slice(&0x1234u16.to_be_bytes());
        assert_eq!(parse(&unk), Err(DropReason::UnknownEtherType));
    }

    /// The fixed-offset IPv4 path gives what the general parser gives, over frames around
    /// every boundary it checks: header length and version, total length against the frame,
    /// payloads too short for ports, protocols with and without ports, VLAN tags, other
    /// EtherTypes, truncation.
    #[test]
    fn the_plain_ipv4_path_agrees_with_the_general_parser() {
        let (mut fast, mut declined) = (0, 0);
        for len in [34usize, 37, 38, 60, 100] {
            for proto in [6u8, 17, 1, 132, 136] {
                for ver_ihl in [0x45u8, 0x46, 0x44, 0x55, 0x4f, 0x35] {
                    for ethertype in [EtherType::IPV4, EtherType::VLAN, EtherType::IPV6] {
                        for total in 0..=len + 2 {
                            let mut f = udp4([10, 0, 0, 1], [10, 0, 9, 2], 4321, 80, len);
                            f.truncate(len);
                            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
                            f[14] = ver_ihl;
                            f[15] = 0x2e;
                            f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
                            f[23] = proto;
                            for cut in [f.len(), f.len() - 1, 34, 33, 20] {
                                let g = &f[..cut.min(f.len())];
                                match parse_plain_ipv4(g) {
                                    Some(m) => {
                                        fast += 1;
                                        assert_eq!(Ok(m), parse_any(g), "{g:02x?}");
                                    }
                                    None => declined += 1,
                                }
                                assert_eq!(parse(g), parse_any(g));
                            }
                        }
                    }
                }
            }
        }
        assert!(fast > 1000 && declined > 1000, "{fast} {declined}");
    }

    #[test]
    fn ttl_and_ce_rewrites() {
        let mut f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
        let m = parse(&f).unwrap();
        decrement_ttl(&mut f, &m);
        mark_ce(&mut f, &m);
        let p = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!((p.ttl(), p.ecn()), (63, 3));
        assert!(p.verify_checksum());
    }
}

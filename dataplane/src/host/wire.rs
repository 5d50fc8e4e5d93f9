//! The host stack's frames: Ethernet / IPv4 / UDP whose payload starts with a 44-byte header.
//!
//! The first 24 bytes are the data header of [`crate::wire::data`] (magic "XOFF", flow id,
//! sequence number, send time in ps), so fabric sinks and probes read these frames too. Then:
//!
//! ```text
//! 24 flags u8 (1 DATA, 2 ACK, 4 RETX, 8 ECE, 16 CNP, 32 INT)   25 prio u8   26 source host index u16
//! 28 flow size in bytes u64             36 cumulative ACK (next packet expected) u64
//! ```
//!
//! All big-endian. Sequence numbers count packets of the flow from 0.
//!
//! A host in BFC mode sends its data frames behind the 4-byte Xoff data shim
//! (`flowctl::wire::shim`, EtherType 0x88B6 after the MAC addresses, carrying `upstreamQ`);
//! [`Header::parse`] reads frames with or without it.

use super::fabric::PeerAddr;
use super::Segment;
use crate::config::HostInfo;
use crate::wire::data::{magic_payload_at, DataHeader, FrameTemplate, DATA_HEADER_LEN};
use crate::wire::EtherType;
use flowctl::wire::shim::{self, ShimRepr};
use std::net::Ipv4Addr;

/// Bytes of the host header in the UDP payload.
pub const HEADER_LEN: usize = DATA_HEADER_LEN + 20;
/// Ethernet + IPv4 + UDP + host header of an untagged frame.
pub const FRAME_OVERHEAD: u32 = 14 + 20 + 8 + HEADER_LEN as u32;
/// UDP port the host stack listens on: data goes to it, ACKs come from it.
pub const PORT: u16 = 4791;

/// The UDP port of flow `flow` at its sender (data leaves from it, ACKs return to it), so
/// each flow is its own 5-tuple to ECMP and to BFC's flow table, as connections are.
pub fn flow_port(flow: u32) -> u16 {
    49_152 + (flow % 16_384) as u16
}

/// The FID a switch computes for the data frames of flow `flow` from `src` to `dst`
/// (`crate::scheme::flow_id` of their 5-tuple): what an Aquarius FlowPause names.
pub fn data_fid(src: Ipv4Addr, dst: Ipv4Addr, flow: u32) -> u32 {
    flowctl::bfc::fid_hash(
        u128::from(u32::from(src)),
        u128::from(u32::from(dst)),
        flow_port(flow),
        PORT,
        17,
    )
}

/// The unseeded ECMP hash of the data frames of flow `flow` from `src` to `dst`
/// (`scheme::pyrrha::path::flow_hash` of their 5-tuple): what Pyrrha's path calculation
/// reads, at the switches and at a NIC that honours PAUSE per root.
pub fn data_hash(src: Ipv4Addr, dst: Ipv4Addr, flow: u32) -> u32 {
    crate::scheme::pyrrha::path::flow_hash(&loadbal::FiveTuple {
        proto: 17,
        src: std::net::IpAddr::V4(src),
        dst: std::net::IpAddr::V4(dst),
        sport: flow_port(flow),
        dport: PORT,
    })
}

pub const FLAG_DATA: u8 = 1;
pub const FLAG_ACK: u8 = 2;
pub const FLAG_RETX: u8 = 4;
/// ACK of a packet that arrived CE-marked (the DCTCP echo).
pub const FLAG_ECE: u8 = 8;
/// ACK that carries a DCQCN congestion notification (CNP), as HPCC's ns-3 sends it.
pub const FLAG_CNP: u8 = 16;
/// ACK from a go-back-N receiver ([`super::OutOfOrder::GoBackN`]) that met a packet above the
/// one it expects: send again from `ack` (the NAK of a RoCE NIC's PSN sequence error).
pub const FLAG_NAK: u8 = 64;
/// Data that asks the switches for INT records / ACK that echoes them
/// ([`crate::wire::int`]: the stack is the last `INT_LEN` bytes of the IP packet).
pub const FLAG_INT: u8 = crate::wire::int::FLAG_INT;

/// The host header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub flow: u32,
    pub seq: u64,
    pub sent_ps: u64,
    pub flags: u8,
    pub prio: u8,
    pub src_host: u16,
    pub size: u64,
    pub ack: u64,
}

impl Header {
    pub fn is_ack(&self) -> bool {
        self.flags & FLAG_ACK != 0
    }

    /// Writes the header into `buf` (at least [`HEADER_LEN`] bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        DataHeader {
            flow: self.flow,
            seq: self.seq,
            sent_ps: self.sent_ps,
        }
        .emit(&mut buf[..DATA_HEADER_LEN]);
        let b = &mut buf[DATA_HEADER_LEN..HEADER_LEN];
        b[0] = self.flags;
        b[1] = self.prio;
        b[2..4].copy_from_slice(&self.src_host.to_be_bytes());
        b[4..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..20].copy_from_slice(&self.ack.to_be_bytes());
    }

    /// Reads the header of a host-stack frame, skipping the data shim if it has one; `None`
    /// for any other frame.
    pub fn parse(frame: &[u8]) -> Option<Header> {
        Self::parse_shimmed(frame).map(|(h, _)| h)
    }

    /// [`Header::parse`], and the shim's `upstreamQ` if the frame carries one.
    pub fn parse_shimmed(frame: &[u8]) -> Option<(Header, Option<u8>)> {
        let (et_off, upq) = match upstream_q(frame) {
            Some(q) => (shim::SHIM_OFF + shim::SHIM_LEN, Some(q)),
            None => (shim::SHIM_OFF, None),
        };
        let p = magic_payload_at(frame, et_off, HEADER_LEN)?;
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let h = Header {
            flow: u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
            seq: u64_at(8),
            sent_ps: u64_at(16),
            flags: p[24],
            prio: p[25],
            src_host: u16::from_be_bytes([p[26], p[27]]),
            size: u64_at(28),
            ack: u64_at(36),
        };
        Some((h, upq))
    }
}

/// The `upstreamQ` of a frame's Xoff data shim, if it carries a valid one.
pub fn upstream_q(frame: &[u8]) -> Option<u8> {
    let f = shim::Frame::new_checked(frame).ok()?;
    (f.ethertype() == shim::ETHERTYPE_XOFF_SHIM)
        .then(|| ShimRepr::parse(&f).ok())
        .flatten()
        .map(|r| r.upstream_q)
}

/// Writes a whole frame of `len` bytes: headers from `tmpl`, then `h`, then zero payload.
pub fn emit_frame(tmpl: &FrameTemplate, h: &Header, buf: &mut [u8], len: usize) {
    let off = tmpl.emit_headers(buf, len);
    h.emit(&mut buf[off..off + HEADER_LEN]);
}

/// Writes the frame of `seg` from host `me` to `peer` into `buf`: Ethernet / IPv4 / UDP, the
/// header, zero payload, and (BFC mode, `seg.upq`) the Xoff data shim carrying the NIC queue.
/// Returns its length, [`Segment::frame_len`].
pub fn emit_segment(me: &HostInfo, peer: &PeerAddr, seg: &Segment, buf: &mut [u8]) -> u32 {
    let tmpl = FrameTemplate {
        src_mac: me.mac,
        dst_mac: peer.mac,
        src_ip: me.ip,
        dst_ip: peer.ip,
        sport: if seg.hdr.is_ack() {
            PORT
        } else {
            flow_port(seg.hdr.flow)
        },
        dport: if seg.hdr.is_ack() {
            flow_port(seg.hdr.flow)
        } else {
            PORT
        },
        prio: seg.prio,
        vlan: false,
        ecn: seg.ect,
    };
    let len = (FRAME_OVERHEAD + seg.body_len()) as usize;
    emit_frame(&tmpl, &seg.hdr, buf, len);
    if seg.int || seg.int_echo.is_some() {
        // HPCC: the INT stack at the end of the IP packet, empty on data (the switches fill
        // it), the echoed one on ACKs.
        let at = len - crate::wire::int::INT_LEN;
        seg.int_echo.unwrap_or_default().emit(&mut buf[at..len]);
    }
    match seg.upq {
        Some(q) => ShimRepr { upstream_q: q }
            .push(buf, len)
            .map_or(len as u32, |n| n as u32),
        None => len as u32,
    }
}

/// The ECN field of an IPv4 frame (with or without the data shim): 3 is CE.
pub fn ip_ecn(frame: &[u8]) -> Option<u8> {
    let et = if upstream_q(frame).is_some() {
        shim::SHIM_OFF + shim::SHIM_LEN
    } else {
        shim::SHIM_OFF
    };
    let tos = frame.get(et + 2 + 1)?;
    (frame.get(et..et + 2)? == EtherType::IPV4.to_be_bytes()).then_some(tos & 3)
}

/// Whether `frame` is an Xoff signal frame (EtherType 0x88B5).
pub fn is_xoff_signal(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == EtherType::XOFF_SIGNAL.to_be_bytes()
}

/// Whether `frame` is a MAC control (PFC/PAUSE) frame.
pub fn is_mac_control(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == EtherType::MAC_CONTROL.to_be_bytes()
}

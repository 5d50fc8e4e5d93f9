//! In-band network telemetry for HPCC (Li et al., SIGCOMM'19, §3.2 and Fig. 4): every switch
//! egress port configured for it (`int = true` on the switch) appends a record of its state
//! to each host-stack data packet that asks for one, and the receiver echoes the stack in its
//! ACK.
//!
//! The stack lives in the last [`INT_LEN`] bytes of the IPv4 packet (inside the UDP payload
//! of `crate::host` frames, which the sender reserves and zeroes), so a switch writes a
//! record in place: no length change, no shift of the headers, the buffer accounting and the
//! wire length unchanged. A packet asks for INT with [`FLAG_INT`] in its host header (byte 24
//! of the payload, after the 24-byte data header whose magic identifies it); an ACK with
//! `FLAG_INT` carries the echoed stack the same way.
//!
//! ```text
//! 0 hop count u8   1 reserved u8   2.. MAX_HOPS records of 24 bytes, first hop first:
//!   0 queue length in bytes u32   4 bytes transmitted by the port u64
//!  12 timestamp ps u64           20 link rate Mbit/s u32
//! ```
//! All big-endian. HPCC's ns-3 keeps at most 5 hops (`IntHeader::maxHop`).

use super::data::{DATA_HEADER_LEN, DATA_MAGIC};

/// Hops a stack holds.
pub const MAX_HOPS: usize = 5;
/// Bytes of one record.
pub const REC_LEN: usize = 24;
/// Bytes of the stack (count, reserved, records).
pub const INT_LEN: usize = 2 + MAX_HOPS * REC_LEN;
/// Host-header flag (byte 24 of the payload): the data packet asks for INT / the ACK echoes
/// it. (The host stack's other flags: 1 DATA, 2 ACK, 4 RETX, 8 ECE, 16 CNP.)
pub const FLAG_INT: u8 = 32;
const FLAG_DATA: u8 = 1;
/// Host header bytes: the data header, then flags at its end.
const HOST_HEADER_LEN: usize = DATA_HEADER_LEN + 20;

/// One INT record (HPCC §3.2: queue length, bytes transmitted, timestamp, link bandwidth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntHop {
    /// Egress queue length when the packet left, bytes.
    pub qlen_bytes: u64,
    /// Bytes the port had sent, this packet included (cumulative).
    pub tx_bytes: u64,
    /// When the packet left, ps.
    pub ts_ps: u64,
    /// Link rate of the port, bit/s (carried in Mbit/s).
    pub rate_bps: u64,
}

/// An INT stack: `n` records, first hop first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntStack {
    pub n: u8,
    pub hops: [IntHop; MAX_HOPS],
}

impl IntStack {
    pub fn hops(&self) -> &[IntHop] {
        &self.hops[..usize::from(self.n).min(MAX_HOPS)]
    }

    /// Writes the stack into `buf` (at least [`INT_LEN`] bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0] = self.n;
        buf[1] = 0;
        for (i, h) in self.hops.iter().enumerate() {
            emit_hop(&mut buf[2 + i * REC_LEN..2 + (i + 1) * REC_LEN], h);
        }
    }

    /// Reads a stack from `buf` (at least [`INT_LEN`] bytes); `None` if the count is bad.
    pub fn parse(buf: &[u8]) -> Option<IntStack> {
        let b = buf.get(..INT_LEN)?;
        let n = b[0];
        if usize::from(n) > MAX_HOPS {
            return None;
        }
        let mut s = IntStack {
            n,
            ..IntStack::default()
        };
        for (i, h) in s.hops.iter_mut().enumerate().take(usize::from(n)) {
            let r = &b[2 + i * REC_LEN..2 + (i + 1) * REC_LEN];
            let u32_at = |o: usize| u32::from_be_bytes([r[o], r[o + 1], r[o + 2], r[o + 3]]);
            let u64_at = |o: usize| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&r[o..o + 8]);
                u64::from_be_bytes(x)
            };
            *h = IntHop {
                qlen_bytes: u64::from(u32_at(0)),
                tx_bytes: u64_at(4),
                ts_ps: u64_at(12),
                rate_bps: u64::from(u32_at(20)) * 1_000_000,
            };
        }
        Some(s)
    }
}

fn emit_hop(r: &mut [u8], h: &IntHop) {
    r[0..4].copy_from_slice(&(h.qlen_bytes.min(u64::from(u32::MAX)) as u32).to_be_bytes());
    r[4..12].copy_from_slice(&h.tx_bytes.to_be_bytes());
    r[12..20].copy_from_slice(&h.ts_ps.to_be_bytes());
    let mbps = (h.rate_bps / 1_000_000).min(u64::from(u32::MAX)) as u32;
    r[20..24].copy_from_slice(&mbps.to_be_bytes());
}

/// Where the INT stack of a host-stack frame is, and the frame's host flags: `(offset,
/// flags)`, or `None` for a frame that is not one (or too short to hold a stack behind its
/// header). `et_off`: offset of the EtherType (12, or 16 behind the Xoff data shim).
pub fn locate(frame: &[u8], et_off: usize) -> Option<(usize, u8)> {
    let (payload, end) = super::data::udp_payload(frame, et_off)?;
    if end > frame.len() || end < payload + HOST_HEADER_LEN + INT_LEN {
        return None;
    }
    if frame.get(payload..payload + 4)? != DATA_MAGIC.to_be_bytes() {
        return None;
    }
    Some((end - INT_LEN, frame[payload + DATA_HEADER_LEN]))
}

/// The INT stack a frame carries (a data packet that asked for INT, or an ACK echoing one).
pub fn read(frame: &[u8], et_off: usize) -> Option<IntStack> {
    let (at, flags) = locate(frame, et_off)?;
    (flags & FLAG_INT != 0)
        .then(|| IntStack::parse(&frame[at..]))
        .flatten()
}

/// A switch port appends `hop` to a data packet that asked for INT (untagged or VLAN-tagged
/// IPv4 frame, EtherType at 12). Returns whether it did (a full stack keeps its first
/// [`MAX_HOPS`] records).
pub fn append_hop(frame: &mut [u8], hop: &IntHop) -> bool {
    let Some((at, flags)) = locate(frame, 12) else {
        return false;
    };
    if flags & (FLAG_INT | FLAG_DATA) != (FLAG_INT | FLAG_DATA) {
        return false;
    }
    let n = usize::from(frame[at]);
    if n >= MAX_HOPS {
        return false;
    }
    emit_hop(
        &mut frame[at + 2 + n * REC_LEN..at + 2 + (n + 1) * REC_LEN],
        hop,
    );
    frame[at] = n as u8 + 1;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::data::{DataHeader, FrameTemplate};
    use crate::wire::MacAddr;
    use std::net::Ipv4Addr;

    fn frame(flags: u8, len: usize) -> Vec<u8> {
        let t = FrameTemplate {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            sport: 50_000,
            dport: 4791,
            prio: 3,
            vlan: false,
            ecn: false,
        };
        let mut b = vec![0u8; len];
        let off = t.emit_headers(&mut b, len);
        DataHeader {
            flow: 1,
            seq: 0,
            sent_ps: 0,
        }
        .emit(&mut b[off..off + DATA_HEADER_LEN]);
        b[off + DATA_HEADER_LEN] = flags;
        b
    }

    #[test]
    fn switches_append_hops_in_place_and_receivers_read_them() {
        let mut f = frame(FLAG_DATA | FLAG_INT, 1000);
        let hop = |i: u64| IntHop {
            qlen_bytes: 1000 * i,
            tx_bytes: 1 << (30 + i),
            ts_ps: 7_000_000 * i,
            rate_bps: 100_000_000_000,
        };
        assert_eq!(read(&f, 12).unwrap().n, 0);
        for i in 1..=6 {
            assert_eq!(append_hop(&mut f, &hop(i)), i <= 5, "hop {i}");
        }
        assert_eq!(f.len(), 1000, "written in place");
        let s = read(&f, 12).unwrap();
        assert_eq!(s.hops(), &[hop(1), hop(2), hop(3), hop(4), hop(5)]);
        // The stack is the last INT_LEN bytes of the IP packet.
        assert_eq!(&f[1000 - INT_LEN], &5);
    }

    #[test]
    fn only_data_packets_that_ask_get_records() {
        let h = IntHop::default();
        let mut f = frame(FLAG_DATA, 1000);
        assert!(!append_hop(&mut f, &h));
        assert_eq!(read(&f, 12), None);
        // An ACK echoing a stack is not appended to.
        let mut a = frame(2 | FLAG_INT, 1000);
        assert!(!append_hop(&mut a, &h));
        // Too short to hold a stack behind the header; not a host-stack frame at all.
        let mut s = frame(FLAG_DATA | FLAG_INT, 14 + 20 + 8 + 44 + INT_LEN - 1);
        assert!(!append_hop(&mut s, &h));
        let mut x = frame(FLAG_DATA | FLAG_INT, 1000);
        x[42] ^= 0xff;
        assert!(!append_hop(&mut x, &h));
    }

    #[test]
    fn stack_round_trip() {
        let mut s = IntStack {
            n: 2,
            ..IntStack::default()
        };
        s.hops[0] = IntHop {
            qlen_bytes: 12_345,
            tx_bytes: u64::MAX - 1,
            ts_ps: 42,
            rate_bps: 400_000_000_000,
        };
        s.hops[1].rate_bps = 100_000_000;
        let mut b = [0u8; INT_LEN];
        s.emit(&mut b);
        assert_eq!(IntStack::parse(&b), Some(s));
        b[0] = 6;
        assert_eq!(IntStack::parse(&b), None);
    }
}

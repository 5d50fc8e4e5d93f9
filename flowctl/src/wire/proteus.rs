//! Proteus on the wire (issue 18): the data shim version 2 that carries the source route and
//! the tolerable delay, and the feedback signal that brings path measurements back to the
//! source edge.
//!
//! It lives here, beside the version-1 data shim ([`super::shim`]) and the signal frames
//! ([`super::signal`]), because it is the same kind of thing: a link-level header every Xoff
//! switch pops on ingress and pushes on egress, and a hop-by-hop signal; the decisions that
//! fill it are `loadbal::proteus`'s, which stays free of formats.
//!
//! **Data shim, version 2** (EtherType 0x88B6 like version 1, which rejects it):
//!
//! ```text
//!  12     14        15    16                              22        25        28
//! +------+---------+-----+-------------------------------+---------+---------+----------
//! | 88B6 | 2 |flags| 0   | path | alt1 | alt2 | alt3     | t_td    | sent    | inner
//! |      |         |     | 4 × 12 bits                   | 24 b ns | 24 b ns | EtherType
//! +------+---------+-----+-------------------------------+---------+---------+----------
//! ```
//!
//! The 9 bytes at 16..25 are §IV-A's: 12-bit selected path id, three 12-bit alternative ids
//! (0xFFF: none), 24-bit tolerable delay `t_td` in ns (saturates at 16.7 ms). Three more bytes
//! carry the low 24 bits of the source edge's send time in ns, from which the destination edge
//! measures the path's one-way delay `t_pd` (§III-A, §IV-C: "measured at the destination edge
//! switches"; the paper does not say how, and a one-way delay needs a send time; 24 bits of ns
//! wrap every 16.7 ms, far above any one-way delay, so the difference is taken modulo 2^24).
//! With the EtherType and version bytes the shim is 16 bytes.
//!
//! **Feedback signal** (EtherType 0x88B5, version 1, type 0x30), relayed hop by hop toward the
//! source edge it is addressed to:
//!
//! ```text
//!  14  15    16        18     19   20                                       20 + 8n
//! +---+-----+---------+------+----+--------------------------------------------------+ pad
//! | 1 | 10  | edge    | n    | 0  | n × (path u16, t_pd ns u32, u ‰ u16, arrived u32) | 60 B
//! +---+-----+---------+------+----+--------------------------------------------------+
//! ```
//!
//! `arrived` is the path's arrival frontier: the send time (the shim's 24 bits, high byte 0)
//! of the latest packet of the path that reached the destination edge; every packet sent on the
//! path before it has arrived too (one FIFO per hop). The source edge's order rule needs it
//! (issue 18, `loadbal::proteus::source`).
//!
//! All fields are big endian.

use super::{Error, Result};

/// EtherType of the data shim (both versions).
pub const ETHERTYPE_XOFF_SHIM: u16 = super::shim::ETHERTYPE_XOFF_SHIM;
/// Shim version carrying Proteus.
pub const SHIM_VERSION: u8 = 2;
/// Bytes the version-2 shim adds to a frame.
pub const SHIM_LEN: usize = 16;
/// Offset of the shim (after the MAC addresses).
pub const SHIM_OFF: usize = 12;
/// "No path" in an alternative slot.
pub const NO_PATH: u16 = 0xFFF;
/// Largest 24-bit field value.
pub const U24_MAX: u32 = 0xFF_FFFF;

/// EtherType of signal frames.
pub const ETHERTYPE_XOFF_SIGNAL: u16 = super::signal::ETHERTYPE_XOFF_SIGNAL;
/// Signal type of Proteus feedback.
pub const TYPE_FEEDBACK: u8 = 0x30;
/// Bytes per feedback entry.
pub const ENTRY_LEN: usize = 12;
/// Entries one feedback frame may carry (20 + 120 × 12 = 1460 bytes, under a 1500-byte MTU).
pub const MAX_ENTRIES: usize = 120;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const ETHERTYPE: Field = 12..14;
    pub const VER_FLAGS: usize = 14;
    pub const PATHS: Field = 16..22;
    pub const T_TD: Field = 22..25;
    pub const SENT: Field = 25..28;
    pub const INNER_ETHERTYPE: Field = 28..30;

    pub const SIG_VERSION: usize = 14;
    pub const SIG_TYPE: usize = 15;
    pub const EDGE: Field = 16..18;
    pub const COUNT: usize = 18;
    pub const ENTRIES: usize = 20;
}

fn u24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn put_u24(b: &mut [u8], v: u32) {
    b.copy_from_slice(&v.min(U24_MAX).to_be_bytes()[1..]);
}

/// A view of a frame carrying the version-2 shim.
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

    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_FLAGS] >> 4
    }

    /// The four path ids: selected, then the three alternatives.
    pub fn paths(&self) -> [u16; 4] {
        let b = &self.buffer.as_ref()[field::PATHS];
        let w = b.iter().fold(0u64, |w, &x| w << 8 | u64::from(x));
        [36, 24, 12, 0].map(|s| ((w >> s) & 0xFFF) as u16)
    }

    pub fn t_td_ns(&self) -> u32 {
        u24(&self.buffer.as_ref()[field::T_TD])
    }

    pub fn sent_ns(&self) -> u32 {
        u24(&self.buffer.as_ref()[field::SENT])
    }

    pub fn inner_ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::INNER_ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Writes the shim's 16 bytes (EtherType through send time).
    pub fn set_shim(&mut self, r: &ShimRepr) {
        let b = self.buffer.as_mut();
        b[field::ETHERTYPE].copy_from_slice(&ETHERTYPE_XOFF_SHIM.to_be_bytes());
        b[field::VER_FLAGS] = SHIM_VERSION << 4;
        b[field::VER_FLAGS + 1] = 0;
        let ids = [r.path, r.alts[0], r.alts[1], r.alts[2]];
        let w = ids
            .iter()
            .fold(0u64, |w, &id| w << 12 | u64::from(id & 0xFFF));
        b[field::PATHS].copy_from_slice(&w.to_be_bytes()[2..]);
        put_u24(&mut b[field::T_TD], r.t_td_ns);
        put_u24(&mut b[field::SENT], r.sent_ns & U24_MAX);
    }
}

/// The version-2 shim's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShimRepr {
    /// Selected path id (12 bits).
    pub path: u16,
    /// Alternatives in priority order ([`NO_PATH`]: none).
    pub alts: [u16; 3],
    /// Tolerable delay, ns (saturates at 2^24 − 1).
    pub t_td_ns: u32,
    /// Low 24 bits of the source edge's send time, ns.
    pub sent_ns: u32,
}

impl ShimRepr {
    /// Parses the shim of a frame whose EtherType is 0x88B6, version 2.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<ShimRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_XOFF_SHIM {
            return Err(Error::WrongEtherType);
        }
        if frame.version() != SHIM_VERSION {
            return Err(Error::UnknownOpcode);
        }
        let [path, a, b, c] = frame.paths();
        Ok(ShimRepr {
            path,
            alts: [a, b, c],
            t_td_ns: frame.t_td_ns(),
            sent_ns: frame.sent_ns(),
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

/// One path's measurement in a feedback frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FeedbackEntry {
    pub path: u16,
    /// One-way delay, ns.
    pub t_pd_ns: u32,
    /// Utilisation, per mille.
    pub u_permille: u16,
    /// Arrival frontier: low 24 bits of the send time of the path's latest arrival, ns.
    pub arrived_ns: u32,
}

/// A Proteus feedback signal frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeedbackRepr {
    pub dst_addr: [u8; 6],
    pub src_addr: [u8; 6],
    /// The source edge the measurements are for (its index in the topology's path model).
    pub edge: u16,
    pub entries: Vec<FeedbackEntry>,
}

impl FeedbackRepr {
    /// Whether `frame` is a Proteus feedback signal (EtherType, version and type match).
    pub fn is_feedback(frame: &[u8]) -> bool {
        frame.len() > field::SIG_TYPE
            && frame[field::ETHERTYPE] == ETHERTYPE_XOFF_SIGNAL.to_be_bytes()
            && frame[field::SIG_VERSION] == super::signal::VERSION
            && frame[field::SIG_TYPE] == TYPE_FEEDBACK
    }

    pub fn parse(frame: &[u8]) -> Result<FeedbackRepr> {
        if frame.len() < field::ENTRIES {
            return Err(Error::Truncated);
        }
        if frame[field::ETHERTYPE] != ETHERTYPE_XOFF_SIGNAL.to_be_bytes() {
            return Err(Error::WrongEtherType);
        }
        if frame[field::SIG_VERSION] != super::signal::VERSION
            || frame[field::SIG_TYPE] != TYPE_FEEDBACK
        {
            return Err(Error::UnknownOpcode);
        }
        let n = usize::from(frame[field::COUNT]);
        if n > MAX_ENTRIES {
            return Err(Error::BadVector);
        }
        let end = field::ENTRIES + n * ENTRY_LEN;
        if frame.len() < end {
            return Err(Error::Truncated);
        }
        let mac = |r: core::ops::Range<usize>| {
            let mut a = [0u8; 6];
            a.copy_from_slice(&frame[r]);
            a
        };
        let (dst_addr, src_addr) = (mac(0..6), mac(6..12));
        let entries = frame[field::ENTRIES..end]
            .chunks_exact(ENTRY_LEN)
            .map(|e| FeedbackEntry {
                path: u16::from_be_bytes([e[0], e[1]]),
                t_pd_ns: u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
                u_permille: u16::from_be_bytes([e[6], e[7]]),
                arrived_ns: u32::from_be_bytes([e[8], e[9], e[10], e[11]]) & U24_MAX,
            })
            .collect();
        Ok(FeedbackRepr {
            dst_addr,
            src_addr,
            edge: u16::from_be_bytes([frame[field::EDGE.start], frame[field::EDGE.start + 1]]),
            entries,
        })
    }

    /// Frame length: header and entries, padded to the Ethernet minimum.
    pub fn buffer_len(&self) -> usize {
        (field::ENTRIES + self.entries.len().min(MAX_ENTRIES) * ENTRY_LEN)
            .max(super::signal::MIN_FRAME_LEN)
    }

    /// Writes the frame into `buf` (at least [`Self::buffer_len`] bytes); returns its length.
    /// Entries beyond [`MAX_ENTRIES`] are left out.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let b = &mut buf[..len];
        b.fill(0);
        b[0..6].copy_from_slice(&self.dst_addr);
        b[6..12].copy_from_slice(&self.src_addr);
        b[field::ETHERTYPE].copy_from_slice(&ETHERTYPE_XOFF_SIGNAL.to_be_bytes());
        b[field::SIG_VERSION] = super::signal::VERSION;
        b[field::SIG_TYPE] = TYPE_FEEDBACK;
        b[field::EDGE].copy_from_slice(&self.edge.to_be_bytes());
        let n = self.entries.len().min(MAX_ENTRIES);
        b[field::COUNT] = n as u8;
        for (i, e) in self.entries.iter().take(n).enumerate() {
            let o = field::ENTRIES + i * ENTRY_LEN;
            b[o..o + 2].copy_from_slice(&e.path.to_be_bytes());
            b[o + 2..o + 6].copy_from_slice(&e.t_pd_ns.to_be_bytes());
            b[o + 6..o + 8].copy_from_slice(&e.u_permille.to_be_bytes());
            b[o + 8..o + 12].copy_from_slice(&(e.arrived_ns & U24_MAX).to_be_bytes());
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MACs, IPv4 EtherType, 6 bytes of IPv4 header.
    static PLAIN: [u8; 20] = [
        1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0x08, 0x00, 0x45, 0, 0, 0x54, 0, 0x99,
    ];

    /// The same frame with path 0x123, alternatives 0x456, 0x789, none; t_td 0x0A0B0C ns;
    /// sent 0x010203 ns.
    static SHIMMED: [u8; 36] = [
        1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, // MACs
        0x88, 0xb6, 0x20, 0x00, // EtherType, version 2, reserved
        0x12, 0x34, 0x56, 0x78, 0x9f, 0xff, // 0x123 0x456 0x789 0xFFF
        0x0a, 0x0b, 0x0c, // t_td
        0x01, 0x02, 0x03, // sent
        0x08, 0x00, 0x45, 0, 0, 0x54, 0, 0x99,
    ];

    fn repr() -> ShimRepr {
        ShimRepr {
            path: 0x123,
            alts: [0x456, 0x789, NO_PATH],
            t_td_ns: 0x0A0B0C,
            sent_ns: 0x010203,
        }
    }

    #[test]
    fn shim_parse_static_bytes() {
        let f = Frame::new_checked(&SHIMMED[..]).unwrap();
        assert_eq!(f.version(), 2);
        assert_eq!(f.paths(), [0x123, 0x456, 0x789, 0xFFF]);
        assert_eq!(f.inner_ethertype(), 0x0800);
        assert_eq!(ShimRepr::parse(&f), Ok(repr()));
    }

    #[test]
    fn shim_push_pop_round_trip() {
        let mut buf = [0u8; 64];
        buf[..20].copy_from_slice(&PLAIN);
        let n = repr().push(&mut buf, 20).unwrap();
        assert_eq!(n, 36);
        assert_eq!(&buf[..36], &SHIMMED[..]);
        let (r, m) = ShimRepr::pop(&mut buf, n).unwrap();
        assert_eq!((r, m), (repr(), 20));
        assert_eq!(&buf[..20], &PLAIN[..]);
    }

    #[test]
    fn shim_saturates_and_refuses() {
        let mut buf = [0u8; 64];
        buf[..20].copy_from_slice(&PLAIN);
        let big = ShimRepr {
            t_td_ns: u32::MAX,
            sent_ns: 0x1234_5678,
            ..repr()
        };
        let n = big.push(&mut buf, 20).unwrap();
        let f = Frame::new_checked(&buf[..n]).unwrap();
        assert_eq!(f.t_td_ns(), U24_MAX);
        assert_eq!(f.sent_ns(), 0x34_5678, "low 24 bits");
        // Version 1 shim, plain frame, short frame, no room.
        let mut v1 = SHIMMED;
        v1[14] = 0x10;
        assert_eq!(ShimRepr::pop(&mut v1, 36), Err(Error::UnknownOpcode));
        let mut p = [0u8; 36];
        p[..20].copy_from_slice(&PLAIN);
        assert_eq!(ShimRepr::pop(&mut p, 36), Err(Error::WrongEtherType));
        let mut s = SHIMMED;
        assert_eq!(ShimRepr::pop(&mut s, 29), Err(Error::Truncated));
        let mut small = [0u8; 30];
        small[..20].copy_from_slice(&PLAIN);
        assert_eq!(repr().push(&mut small, 20), None);
    }

    static FEEDBACK: [u8; 60] = {
        let mut f = [0u8; 60];
        let head = [
            0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 9, 0x88, 0xb5, 1, 0x30, 0, 3, 2, 0,
        ];
        let mut i = 0;
        while i < head.len() {
            f[i] = head[i];
            i += 1;
        }
        // path 7, 12 us, 0.5, arrived 0x010203 ns; path 0x0ABC, 1 ns, 1.0, arrived 0
        let e = [
            0, 7, 0, 0, 0x2e, 0xe0, 0x01, 0xf4, 0, 1, 2, 3, 0x0a, 0xbc, 0, 0, 0, 1, 0x03, 0xe8, 0,
            0, 0, 0,
        ];
        let mut j = 0;
        while j < e.len() {
            f[20 + j] = e[j];
            j += 1;
        }
        f
    };

    #[test]
    fn feedback_static_bytes_both_ways() {
        assert!(FeedbackRepr::is_feedback(&FEEDBACK));
        let r = FeedbackRepr::parse(&FEEDBACK).unwrap();
        assert_eq!(r.edge, 3);
        assert_eq!(r.src_addr, [2, 0, 0, 0, 0, 9]);
        assert_eq!(
            r.entries,
            vec![
                FeedbackEntry {
                    path: 7,
                    t_pd_ns: 12_000,
                    u_permille: 500,
                    arrived_ns: 0x01_0203,
                },
                FeedbackEntry {
                    path: 0xABC,
                    t_pd_ns: 1,
                    u_permille: 1000,
                    arrived_ns: 0,
                },
            ]
        );
        let mut out = [0xffu8; 100];
        assert_eq!(r.emit(&mut out), 60);
        assert_eq!(&out[..60], &FEEDBACK[..]);
        let mut bad = FEEDBACK;
        bad[15] = 0x01;
        assert!(!FeedbackRepr::is_feedback(&bad));
        assert_eq!(FeedbackRepr::parse(&bad), Err(Error::UnknownOpcode));
        bad = FEEDBACK;
        bad[18] = 4; // 4 entries need 68 bytes
        assert_eq!(FeedbackRepr::parse(&bad), Err(Error::Truncated));
    }
}

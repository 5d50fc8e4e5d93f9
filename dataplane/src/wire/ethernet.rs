//! Ethernet II frames and 802.1Q tags.

use super::{Result, WireError};
use core::fmt;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Group (multicast or broadcast) addresses have the I/G bit set.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    pub fn to_u64(self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.0);
        u64::from_be_bytes(b)
    }

    pub fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl core::str::FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> core::result::Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(format!(
                "`{s}` is not a MAC address (want aa:bb:cc:dd:ee:ff)"
            ));
        }
        let mut m = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            m[i] = u8::from_str_radix(p, 16).map_err(|_| format!("`{s}` is not a MAC address"))?;
        }
        Ok(MacAddr(m))
    }
}

impl<'de> serde::Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// EtherType values Xoff knows.
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
    /// MAC control (802.3x PAUSE, 802.1Qbb PFC).
    pub const MAC_CONTROL: u16 = 0x8808;
    /// Xoff signal frames (IEEE local experimental 1).
    pub const XOFF_SIGNAL: u16 = 0x88b5;
    /// Xoff data shim (IEEE local experimental 2).
    pub const XOFF_SHIM: u16 = 0x88b6;
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A read/write view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(m)
    }

    pub fn src_addr(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(m)
    }

    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    pub fn set_ethertype(&mut self, t: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&t.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// High-level Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub src: MacAddr,
    pub dst: MacAddr,
    pub ethertype: u16,
}

impl EthernetRepr {
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Result<Self> {
        f.check_len()?;
        Ok(EthernetRepr {
            src: f.src_addr(),
            dst: f.dst_addr(),
            ethertype: f.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut EthernetFrame<T>) {
        f.set_dst_addr(self.dst);
        f.set_src_addr(self.src);
        f.set_ethertype(self.ethertype);
    }
}

mod vfield {
    use core::ops::Range;
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
}

/// Length of an 802.1Q tag following the outer EtherType (TCI + inner EtherType).
pub const VLAN_TAG_LEN: usize = 4;

/// A view of the 4 bytes after an outer EtherType of 0x8100.
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < VLAN_TAG_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    fn tci(&self) -> u16 {
        let b = &self.buffer.as_ref()[vfield::TCI];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Priority code point (0..=7).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[vfield::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0fff);
        self.buffer.as_mut()[vfield::TCI].copy_from_slice(&tci.to_be_bytes());
    }

    pub fn set_ethertype(&mut self, t: u16) {
        self.buffer.as_mut()[vfield::ETHERTYPE].copy_from_slice(&t.to_be_bytes());
    }
}

/// High-level 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    pub ethertype: u16,
}

impl VlanRepr {
    pub fn parse<T: AsRef<[u8]>>(t: &VlanTag<T>) -> Result<Self> {
        t.check_len()?;
        Ok(VlanRepr {
            pcp: t.pcp(),
            dei: t.dei(),
            vid: t.vid(),
            ethertype: t.ethertype(),
        })
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, t: &mut VlanTag<T>) {
        t.set_tci(self.pcp, self.dei, self.vid);
        t.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TAGGED: [u8; 22] = [
        0x02, 0, 0, 0, 0, 2, // dst
        0x02, 0, 0, 0, 0, 1, // src
        0x81, 0x00, // 802.1Q
        0x60, 0x0a, // pcp 3, dei 0, vid 10
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn parse_tagged_frame() {
        let f = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        let r = EthernetRepr::parse(&f).unwrap();
        assert_eq!(r.dst, "02:00:00:00:00:02".parse().unwrap());
        assert_eq!(r.ethertype, EtherType::VLAN);
        let t = VlanRepr::parse(&VlanTag::new_checked(f.payload()).unwrap()).unwrap();
        assert_eq!(
            t,
            VlanRepr {
                pcp: 3,
                dei: false,
                vid: 10,
                ethertype: EtherType::IPV4
            }
        );
    }

    #[test]
    fn emit_round_trips() {
        let mut buf = [0u8; 18];
        let r = EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: 0x8100,
        };
        r.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        let v = VlanRepr {
            pcp: 3,
            dei: false,
            vid: 10,
            ethertype: 0x0800,
        };
        v.emit(&mut VlanTag::new_unchecked(&mut buf[14..]));
        assert_eq!(&buf[..], &TAGGED[..18]);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            EthernetFrame::new_checked(&TAGGED[..13]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            VlanTag::new_checked(&TAGGED[14..17]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn mac_text_and_group_bit() {
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr([2, 0, 0, 0, 0, 1]).is_multicast());
        assert!("zz:00:00:00:00:00".parse::<MacAddr>().is_err());
        let m = MacAddr([1, 2, 3, 4, 5, 6]);
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
    }
}

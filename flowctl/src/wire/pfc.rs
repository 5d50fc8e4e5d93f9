//! IEEE 802.1Qbb Priority-based Flow Control (PFC) and IEEE 802.3x PAUSE MAC control frames.
//!
//! Both are MAC control frames (IEEE 802.3 Annex 31B/31D), carried in a full Ethernet frame:
//!
//! ```text
//!  0                   6                  12      14      16
//! +-------------------+-------------------+-------+-------+------------------------------+
//! | dst 01-80-C2-00-00-01 | src           | 8808  | opcode| parameters ... zero padding  |
//! +-------------------+-------------------+-------+-------+------------------------------+
//!
//! PFC   (opcode 0x0101): 16 class-enable vector (u16, only bits 0..=7 valid)
//!                        18 time[0] .. time[7] (8 x u16 quanta)        -> 34 bytes
//! PAUSE (opcode 0x0001): 16 pause_time (u16 quanta)                    -> 18 bytes
//! ```
//!
//! All fields are big endian. A frame is padded with zeros to the 60-byte Ethernet minimum;
//! the 4-byte FCS that makes it 64 bytes on the wire is *not* part of the buffer here: the NIC
//! (or the veth/AF_XDP path, which has no FCS at all) adds it on transmit and strips it on
//! receive. Parsing only requires the bytes of the fields, so frames whose padding was
//! already trimmed still parse.
//!
//! One quantum is the time to transmit 512 bits at the port rate ([`quanta_to_ps`],
//! [`ps_to_quanta`]). In PFC a class with time 0 whose enable bit is set means "resume now"
//! (XON); a class whose enable bit is clear is not affected by the frame.

use super::{Error, Result};

/// EtherType of MAC control frames.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// Opcode of an 802.3x PAUSE frame.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// Opcode of an 802.1Qbb PFC frame.
pub const OPCODE_PFC: u16 = 0x0101;
/// Reserved multicast destination of PAUSE and PFC frames (not forwarded by bridges).
pub const DST_MAC_CONTROL: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x01];
/// Ethernet minimum frame length without the FCS; emitted frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;
/// Number of PFC classes (priorities).
pub const CLASSES: usize = 8;
/// Bits per pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

mod field {
    #![allow(non_snake_case)]
    pub type Field = core::ops::Range<usize>;

    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const OPCODE: Field = 14..16;
    /// PAUSE: the single pause time.
    pub const PAUSE_TIME: Field = 16..18;
    /// PFC: the class-enable vector.
    pub const CLASS_VECTOR: Field = 16..18;
    /// PFC: time of class `n`.
    pub const fn CLASS_TIME(n: usize) -> Field {
        18 + 2 * n..20 + 2 * n
    }
    pub const PFC_END: usize = CLASS_TIME(7).end;
    pub const PAUSE_END: usize = PAUSE_TIME.end;
}

fn read_u16(b: &[u8], f: field::Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn write_u16(b: &mut [u8], f: field::Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// A read/write view of a MAC control (PAUSE or PFC) Ethernet frame, without FCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer and check that every accessor for its opcode is in bounds.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Ensure that no accessor panics: the buffer must hold the header through the opcode and,
    /// for a PFC or PAUSE opcode, that opcode's parameters. Padding is not required.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::OPCODE.end {
            return Err(Error::Truncated);
        }
        let need = match self.opcode() {
            OPCODE_PFC => field::PFC_END,
            OPCODE_PAUSE => field::PAUSE_END,
            _ => field::OPCODE.end,
        };
        if len < need {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Consume the view and return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// EtherType (0x8808 for MAC control).
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// MAC control opcode.
    pub fn opcode(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::OPCODE)
    }

    /// PFC class-enable vector (the full 16-bit field, reserved bits included).
    pub fn class_enable_vector(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CLASS_VECTOR)
    }

    /// PFC time of every class, in quanta.
    pub fn class_quanta(&self) -> [u16; CLASSES] {
        let b = self.buffer.as_ref();
        core::array::from_fn(|n| read_u16(b, field::CLASS_TIME(n)))
    }

    /// PAUSE time, in quanta.
    pub fn pause_quanta(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PAUSE_TIME)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Set the destination MAC address.
    pub fn set_dst_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    /// Set the source MAC address.
    pub fn set_src_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, v);
    }

    /// Set the MAC control opcode.
    pub fn set_opcode(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::OPCODE, v);
    }

    /// Set the PFC class-enable vector.
    pub fn set_class_enable_vector(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::CLASS_VECTOR, v);
    }

    /// Set the PFC time of every class, in quanta.
    pub fn set_class_quanta(&mut self, q: [u16; CLASSES]) {
        let b = self.buffer.as_mut();
        for (n, v) in q.into_iter().enumerate() {
            write_u16(b, field::CLASS_TIME(n), v);
        }
    }

    /// Set the PAUSE time, in quanta.
    pub fn set_pause_quanta(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::PAUSE_TIME, v);
    }

    /// Zero every byte from `from` to the end of the buffer (padding).
    fn zero_from(&mut self, from: usize) {
        if let Some(rest) = self.buffer.as_mut().get_mut(from..) {
            rest.fill(0);
        }
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

fn check_mac_control<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>, opcode: u16) -> Result<()> {
    frame.check_len()?;
    if frame.ethertype() != ETHERTYPE_MAC_CONTROL {
        return Err(Error::WrongEtherType);
    }
    if frame.opcode() != opcode {
        return Err(Error::UnknownOpcode);
    }
    Ok(())
}

/// High-level representation of a PFC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PfcRepr {
    /// Source MAC address (the sending port's).
    pub src_addr: [u8; 6],
    /// Class-enable vector: bit n set = `quanta[n]` is valid.
    pub class_enable: u8,
    /// Pause time per class in quanta; 0 with the enable bit set = resume (XON).
    pub quanta: [u16; CLASSES],
}

impl PfcRepr {
    /// Parse a PFC frame. The destination address is not checked (any station may be
    /// addressed); the times of classes whose enable bit is clear are kept as they are.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<PfcRepr> {
        check_mac_control(frame, OPCODE_PFC)?;
        let vector = frame.class_enable_vector();
        if vector > 0xFF {
            return Err(Error::BadVector);
        }
        Ok(PfcRepr {
            src_addr: frame.src_addr(),
            class_enable: vector as u8,
            quanta: frame.class_quanta(),
        })
    }

    /// Length of the emitted frame: the 60-byte Ethernet minimum (FCS excluded).
    pub const fn buffer_len(&self) -> usize {
        MIN_FRAME_LEN
    }

    /// Emit into a buffer of at least [`buffer_len`](Self::buffer_len) bytes, zero padding
    /// included; the destination is 01-80-C2-00-00-01.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        frame.set_dst_addr(DST_MAC_CONTROL);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(ETHERTYPE_MAC_CONTROL);
        frame.set_opcode(OPCODE_PFC);
        frame.set_class_enable_vector(u16::from(self.class_enable));
        frame.set_class_quanta(self.quanta);
        frame.zero_from(field::PFC_END);
    }

    /// Classes this frame pauses (enabled with time > 0).
    pub fn xoff_mask(&self) -> u8 {
        (0..CLASSES).fold(0, |m, c| {
            if self.class_enable & (1 << c) != 0 && self.quanta[c] != 0 {
                m | (1 << c)
            } else {
                m
            }
        })
    }

    /// Classes this frame resumes (enabled with time 0).
    pub fn xon_mask(&self) -> u8 {
        self.class_enable & !self.xoff_mask()
    }
}

/// High-level representation of an 802.3x PAUSE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PauseRepr {
    /// Source MAC address.
    pub src_addr: [u8; 6],
    /// Pause time in quanta; 0 = resume.
    pub quanta: u16,
}

impl PauseRepr {
    /// Parse a PAUSE frame (destination not checked).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<PauseRepr> {
        check_mac_control(frame, OPCODE_PAUSE)?;
        Ok(PauseRepr {
            src_addr: frame.src_addr(),
            quanta: frame.pause_quanta(),
        })
    }

    /// Length of the emitted frame: the 60-byte Ethernet minimum (FCS excluded).
    pub const fn buffer_len(&self) -> usize {
        MIN_FRAME_LEN
    }

    /// Emit into a buffer of at least [`buffer_len`](Self::buffer_len) bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        frame.set_dst_addr(DST_MAC_CONTROL);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(ETHERTYPE_MAC_CONTROL);
        frame.set_opcode(OPCODE_PAUSE);
        frame.set_pause_quanta(self.quanta);
        frame.zero_from(field::PAUSE_END);
    }
}

/// Either kind of flow-control MAC control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacControlRepr {
    /// 802.1Qbb PFC.
    Pfc(PfcRepr),
    /// 802.3x PAUSE.
    Pause(PauseRepr),
}

impl MacControlRepr {
    /// Parse a PFC or PAUSE frame, dispatching on the opcode.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<MacControlRepr> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_MAC_CONTROL {
            return Err(Error::WrongEtherType);
        }
        match frame.opcode() {
            OPCODE_PFC => PfcRepr::parse(frame).map(MacControlRepr::Pfc),
            OPCODE_PAUSE => PauseRepr::parse(frame).map(MacControlRepr::Pause),
            _ => Err(Error::UnknownOpcode),
        }
    }

    /// Length of the emitted frame.
    pub const fn buffer_len(&self) -> usize {
        MIN_FRAME_LEN
    }

    /// Emit into a buffer of at least [`buffer_len`](Self::buffer_len) bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        match self {
            MacControlRepr::Pfc(r) => r.emit(frame),
            MacControlRepr::Pause(r) => r.emit(frame),
        }
    }
}

const PS_PER_S: u128 = 1_000_000_000_000;

/// Duration of `quanta` pause quanta (512 bit times each) at `rate_bps`, in picoseconds,
/// rounded up. A zero rate yields `u64::MAX` ("forever") for a non-zero pause.
///
/// Example: 65535 quanta at 100 Gbit/s = 65535 × 512 / 1e11 s = 335.5392 µs.
pub fn quanta_to_ps(quanta: u16, rate_bps: u64) -> u64 {
    if quanta == 0 {
        return 0;
    }
    if rate_bps == 0 {
        return u64::MAX;
    }
    let bits = u128::from(quanta) * u128::from(BITS_PER_QUANTUM);
    let ps = (bits * PS_PER_S).div_ceil(u128::from(rate_bps));
    u64::try_from(ps).unwrap_or(u64::MAX)
}

/// The number of quanta that covers at least `ps` picoseconds at `rate_bps` (rounded up),
/// saturating at 0xFFFF. A zero rate or zero time yields 0.
pub fn ps_to_quanta(ps: u64, rate_bps: u64) -> u16 {
    let bits_times_ps = u128::from(ps) * u128::from(rate_bps);
    let q = bits_times_ps.div_ceil(u128::from(BITS_PER_QUANTUM) * PS_PER_S);
    u16::try_from(q).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A PFC frame built by hand from IEEE 802.1Qbb clause 36 / Annex 31D: priorities 3 and 4
    /// paused for 0xFFFF quanta, priority 0 resumed (enabled, time 0), the rest not enabled,
    /// padded with zeros to 60 bytes.
    static PFC_BYTES: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // src
        0x88, 0x08, // MAC control
        0x01, 0x01, // PFC opcode
        0x00, 0x19, // class-enable vector: 0, 3, 4
        0x00, 0x00, // time[0] = 0 (XON)
        0x00, 0x00, // time[1]
        0x00, 0x00, // time[2]
        0xff, 0xff, // time[3]
        0xff, 0xff, // time[4]
        0x00, 0x00, // time[5]
        0x00, 0x00, // time[6]
        0x00, 0x00, // time[7]
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // pad
    ];

    /// An 802.3x PAUSE frame with pause_time 0x1234.
    static PAUSE_BYTES: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, // src
        0x88, 0x08, // MAC control
        0x00, 0x01, // PAUSE opcode
        0x12, 0x34, // pause_time
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // pad
    ];

    fn pfc_repr() -> PfcRepr {
        PfcRepr {
            src_addr: [0x02, 0, 0, 0, 0, 0x0a],
            class_enable: 0x19,
            quanta: [0, 0, 0, 0xffff, 0xffff, 0, 0, 0],
        }
    }

    #[test]
    fn deconstruct_pfc() {
        let f = Frame::new_checked(&PFC_BYTES[..]).unwrap();
        assert_eq!(f.dst_addr(), DST_MAC_CONTROL);
        assert_eq!(f.src_addr(), [0x02, 0, 0, 0, 0, 0x0a]);
        assert_eq!(f.ethertype(), 0x8808);
        assert_eq!(f.opcode(), 0x0101);
        assert_eq!(f.class_enable_vector(), 0x0019);
        assert_eq!(f.class_quanta()[3], 0xffff);
        let r = PfcRepr::parse(&f).unwrap();
        assert_eq!(r, pfc_repr());
        assert_eq!(r.xoff_mask(), 0x18);
        assert_eq!(r.xon_mask(), 0x01);
    }

    #[test]
    fn construct_pfc() {
        let mut buf = [0xAAu8; 60];
        let r = pfc_repr();
        assert_eq!(r.buffer_len(), 60);
        r.emit(&mut Frame::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PFC_BYTES);
    }

    #[test]
    fn pause_roundtrip_and_bytes() {
        let f = Frame::new_checked(&PAUSE_BYTES[..]).unwrap();
        let r = PauseRepr::parse(&f).unwrap();
        assert_eq!(r.quanta, 0x1234);
        assert_eq!(r.src_addr, [0x02, 0, 0, 0, 0, 0x0b]);
        let mut buf = [0x55u8; 60];
        r.emit(&mut Frame::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PAUSE_BYTES);
        assert_eq!(MacControlRepr::parse(&f).unwrap(), MacControlRepr::Pause(r));
        let f = Frame::new_checked(&PFC_BYTES[..]).unwrap();
        assert_eq!(
            MacControlRepr::parse(&f).unwrap(),
            MacControlRepr::Pfc(pfc_repr())
        );
    }

    #[test]
    fn parse_without_padding() {
        let f = Frame::new_checked(&PFC_BYTES[..34]).unwrap();
        assert_eq!(PfcRepr::parse(&f).unwrap(), pfc_repr());
        let f = Frame::new_checked(&PAUSE_BYTES[..18]).unwrap();
        assert_eq!(PauseRepr::parse(&f).unwrap().quanta, 0x1234);
    }

    #[test]
    fn malformed() {
        // Short.
        for n in 0..34 {
            assert_eq!(
                Frame::new_checked(&PFC_BYTES[..n]),
                Err(Error::Truncated),
                "len {n}"
            );
            let f = Frame::new_unchecked(&PFC_BYTES[..n]);
            assert_eq!(PfcRepr::parse(&f), Err(Error::Truncated));
            assert_eq!(MacControlRepr::parse(&f), Err(Error::Truncated));
        }
        for n in 0..18 {
            let f = Frame::new_unchecked(&PAUSE_BYTES[..n]);
            assert_eq!(PauseRepr::parse(&f), Err(Error::Truncated));
        }
        // Wrong EtherType.
        let mut b = PFC_BYTES;
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        let f = Frame::new_unchecked(&b[..]);
        assert_eq!(PfcRepr::parse(&f), Err(Error::WrongEtherType));
        assert_eq!(MacControlRepr::parse(&f), Err(Error::WrongEtherType));
        // Unknown opcode (e.g. 802.3 Annex 31C MPCP GATE 0x0002).
        let mut b = PFC_BYTES;
        b[14..16].copy_from_slice(&[0x00, 0x02]);
        let f = Frame::new_unchecked(&b[..]);
        assert_eq!(MacControlRepr::parse(&f), Err(Error::UnknownOpcode));
        // Right frame, wrong parser.
        let f = Frame::new_unchecked(&PAUSE_BYTES[..]);
        assert_eq!(PfcRepr::parse(&f), Err(Error::UnknownOpcode));
        let f = Frame::new_unchecked(&PFC_BYTES[..]);
        assert_eq!(PauseRepr::parse(&f), Err(Error::UnknownOpcode));
        // Reserved vector bits.
        let mut b = PFC_BYTES;
        b[16] = 0x01;
        let f = Frame::new_unchecked(&b[..]);
        assert_eq!(PfcRepr::parse(&f), Err(Error::BadVector));
        assert_eq!(MacControlRepr::parse(&f), Err(Error::BadVector));
        // A PAUSE-length frame relabelled as PFC is truncated.
        let mut b = PAUSE_BYTES;
        b[14..16].copy_from_slice(&[0x01, 0x01]);
        assert_eq!(
            MacControlRepr::parse(&Frame::new_unchecked(&b[..20])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn quanta_conversion() {
        // 65535 quanta at 100 Gbit/s = 335.5392 us.
        assert_eq!(quanta_to_ps(0xffff, 100_000_000_000), 335_539_200);
        // One quantum at 100G = 5.12 ns; at 25G = 20.48 ns; at 10G = 51.2 ns.
        assert_eq!(quanta_to_ps(1, 100_000_000_000), 5_120);
        assert_eq!(quanta_to_ps(1, 25_000_000_000), 20_480);
        assert_eq!(quanta_to_ps(1, 10_000_000_000), 51_200);
        // Rounds up: 512 bits at 3 bit/s.
        assert_eq!(quanta_to_ps(1, 3), 170_666_666_666_667);
        assert_eq!(quanta_to_ps(0, 100_000_000_000), 0);
        assert_eq!(quanta_to_ps(5, 0), u64::MAX);
        // Inverse, rounding up and saturating.
        assert_eq!(ps_to_quanta(335_539_200, 100_000_000_000), 0xffff);
        assert_eq!(ps_to_quanta(5_120, 100_000_000_000), 1);
        assert_eq!(ps_to_quanta(5_121, 100_000_000_000), 2);
        assert_eq!(ps_to_quanta(1, 100_000_000_000), 1);
        assert_eq!(ps_to_quanta(0, 100_000_000_000), 0);
        assert_eq!(ps_to_quanta(1_000_000_000, 100_000_000_000), 0xffff);
        assert_eq!(ps_to_quanta(u64::MAX, u64::MAX), 0xffff);
        assert_eq!(ps_to_quanta(1_000, 0), 0);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let f = Frame::new_unchecked(&bytes[..]);
            let _ = MacControlRepr::parse(&f);
            let _ = PfcRepr::parse(&f);
            let _ = PauseRepr::parse(&f);
            if let Ok(f) = Frame::new_checked(&bytes[..]) {
                let _ = (f.dst_addr(), f.src_addr(), f.opcode());
            }
        }

        #[test]
        fn mac_control_header_then_random(op in prop_oneof![Just(0x0101u16), Just(0x0001u16), any::<u16>()],
                                          tail in proptest::collection::vec(any::<u8>(), 0..50)) {
            let mut bytes = PFC_BYTES[..14].to_vec();
            bytes.extend_from_slice(&op.to_be_bytes());
            bytes.extend_from_slice(&tail);
            let f = Frame::new_unchecked(&bytes[..]);
            match MacControlRepr::parse(&f) {
                Ok(MacControlRepr::Pfc(r)) => {
                    prop_assert_eq!(op, OPCODE_PFC);
                    let mut out = [0u8; 60];
                    r.emit(&mut Frame::new_unchecked(&mut out[..]));
                    prop_assert_eq!(&out[..34], &bytes[..34]);
                }
                Ok(MacControlRepr::Pause(_)) => prop_assert_eq!(op, OPCODE_PAUSE),
                Err(Error::BadVector) => prop_assert!(op == OPCODE_PFC && tail[0] != 0),
                Err(Error::UnknownOpcode) => prop_assert!(op != OPCODE_PFC && op != OPCODE_PAUSE),
                Err(Error::Truncated) => prop_assert!(op == OPCODE_PFC || op == OPCODE_PAUSE),
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn pfc_roundtrip(src in any::<[u8; 6]>(), en in any::<u8>(), q in any::<[u16; 8]>()) {
            let r = PfcRepr { src_addr: src, class_enable: en, quanta: q };
            let mut buf = vec![0xEEu8; r.buffer_len()];
            r.emit(&mut Frame::new_unchecked(&mut buf[..]));
            let f = Frame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(PfcRepr::parse(&f), Ok(r));
            prop_assert!(buf[34..].iter().all(|&b| b == 0));
        }

        #[test]
        fn pause_roundtrip(src in any::<[u8; 6]>(), q in any::<u16>()) {
            let r = PauseRepr { src_addr: src, quanta: q };
            let mut buf = vec![0xEEu8; r.buffer_len()];
            MacControlRepr::Pause(r).emit(&mut Frame::new_unchecked(&mut buf[..]));
            let f = Frame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(MacControlRepr::parse(&f), Ok(MacControlRepr::Pause(r)));
        }

        #[test]
        fn quanta_roundtrip(q in any::<u16>(), rate in 1_000_000u64..1_000_000_000_000) {
            let ps = quanta_to_ps(q, rate);
            let back = ps_to_quanta(ps, rate);
            // Both directions round up: exact when the time is a whole number of ps.
            let rem = (u128::from(q) * 512 * PS_PER_S) % u128::from(rate);
            if rem == 0 {
                prop_assert_eq!(back, q);
            } else {
                prop_assert!(back == q || back == q.saturating_add(1));
            }
        }

        #[test]
        fn quanta_cover_time(ps in 0u64..1_000_000_000, rate in 1_000_000u64..1_000_000_000_000) {
            let q = ps_to_quanta(ps, rate);
            if q < u16::MAX {
                prop_assert!(quanta_to_ps(q, rate) >= ps);
            }
        }
    }
}

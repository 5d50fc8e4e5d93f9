//! Wire formats the data plane parses, in smoltcp's style: a typed view per format over any
//! `AsRef<[u8]>` buffer, `new_checked` so accessors never panic, and a `Repr` to parse and emit.

pub mod data;
pub mod ethernet;
pub mod int;
pub mod ipv4;
pub mod ipv6;
pub mod udp;

pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr, VlanRepr, VlanTag};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use udp::{UdpPacket, UdpRepr};

/// Why a buffer could not be read as a given format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("buffer too short")]
    Truncated,
    #[error("malformed header")]
    Malformed,
}

/// Result of a wire operation.
pub type Result<T> = core::result::Result<T, WireError>;

/// The Internet checksum (RFC 1071) over `data`, folded, not complemented.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

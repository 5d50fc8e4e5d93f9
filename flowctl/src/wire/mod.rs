//! Wire formats, in the style of smoltcp's `src/wire/`: 802.1Qbb PFC and 802.3x PAUSE
//! ([`pfc`]), Xoff signal frames (EtherType 0x88B5, [`signal`]) and the Xoff data shim
//! (EtherType 0x88B6, [`shim`]).
//!
//! Every format has a zero-copy view (`Frame<T: AsRef<[u8]>>`) whose accessors never panic once
//! [`pfc::Frame::new_checked`] (or `check_len`) has succeeded, setters for `T: AsMut<[u8]>`, and
//! a high-level `Repr` with `parse`, `emit` and `buffer_len`.
//!
//! Frames are handled without the trailing 4-byte FCS: AF_XDP (like most NICs) strips it on
//! receive and the NIC appends it on transmit.

// issue 18 (branch conga): CONGA data shim v3.
pub mod conga;
pub mod pfc;
// issue 18 (branch proteus): Proteus data shim v2 and feedback signal.
pub mod proteus;
pub mod shim;
pub mod signal;

pub use pfc::{
    ps_to_quanta, quanta_to_ps, Frame as MacControlFrame, MacControlRepr, PauseRepr, PfcRepr,
};

/// Why a frame could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the fields the format requires.
    #[error("truncated frame")]
    Truncated,
    /// The EtherType is not the one this format is carried in.
    #[error("wrong EtherType")]
    WrongEtherType,
    /// The MAC control opcode is neither PFC (0x0101) nor PAUSE (0x0001), or not the one
    /// expected.
    #[error("unknown MAC control opcode")]
    UnknownOpcode,
    /// The PFC class-enable vector has bits above bit 7 set.
    #[error("PFC class-enable vector has reserved bits set")]
    BadVector,
}

/// Result of parsing a wire format.
pub type Result<T> = core::result::Result<T, Error>;

//! Per-hop flow control for Xoff: wire codecs, per-scheme state machines and the AFC control
//! channel. Pure logic: no I/O, no threads of its own; time is passed in (picoseconds).

pub mod afc;

pub use afc::PauseRegs;

//! Per-hop flow control for Xoff: wire codecs, per-scheme state machines and the AFC control
//! channel. Pure logic: no I/O, no threads of its own; time is passed in (picoseconds).
//!
//! * [`wire`]: frame codecs (802.1Qbb PFC, 802.3x PAUSE), smoltcp style.
//! * [`afc`]: per-port queue pause registers, the Tofino2-style AFC command word and ring.
//! * [`pfc`]: the PFC sender state machine and receive side.
//! * [`watchdog`]: the PFC watchdog (SONiC pfcwd semantics).
//! * [`bfc`]: Backpressure Flow Control (queue assignment, pause counters, signals).
//! * [`pyrrha`]: Pyrrha (congestion roots, root table, isolation queues, order marks).
//! * [`aquarius`]: Aquarius (contribution-aware pausing, opportunistic re-assigning).

#![forbid(unsafe_code)]
// The shipped library obeys clippy.toml (no clocks, threads, files, sockets); unit tests may
// spawn threads to exercise the one object made to be shared across them (the AFC ring).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod afc;
// Aquarius (issue 16).
pub mod aquarius;
pub mod bfc;
pub mod pfc;
pub mod watchdog;
pub mod wire;

// --- Pyrrha (issue 17) ---
pub mod pyrrha;
pub use pyrrha::{Pyrrha, PyrrhaConfig, PyrrhaError, PyrrhaPort};
// --- end Pyrrha ---

pub use afc::{Afc, AfcCmd, AfcError, AfcRing, PauseRegs, ShmLayout, ShmProducer, ShmRing};
pub use aquarius::{Aquarius, AquariusConfig, AquariusError};
pub use bfc::{Assignment, Bfc, BfcConfig, BfcError, BfcPort, BfcShared};
pub use pfc::{Pfc, PfcConfig, PfcCounters, PfcError, PfcEvent, PfcPort, PfcTx};
pub use watchdog::{QueueView, Watchdog, WatchdogConfig, WdAction, WdCounters, WdEvent};

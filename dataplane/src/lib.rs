//! Xoff data plane: ports, frames, parsing, forwarding, queues, scheduling, link emulation and
//! the switch pipeline that ties them together. Scheme logic lives in `mmu`, `flowctl` and
//! `loadbal`; this crate calls it.

#![deny(unsafe_code)]

pub mod audit;
pub mod buffer;
pub mod calibrate;
pub mod clock;
pub mod config;
pub mod ctl;
pub mod fabric;
pub mod fib;
pub mod flowcache;
pub mod frame;
pub mod host;
pub mod link;
pub mod nicstats;
pub mod parse;
pub mod pipeline;
#[allow(unsafe_code)]
pub mod port;
pub mod queue;
pub mod reaction;
pub mod ring;
pub mod rng;
pub mod runtime;
pub mod scheme;
pub mod stats;
pub mod switch;
// issue 22 item 2: pcap taps through the control socket.
pub mod tap;
pub mod units;
pub mod wire;
pub mod workload;

pub use config::{ConfigError, SwitchSpec, Topology};
pub use frame::{FrameId, FrameMem, HeapMem, Pkt};
pub use switch::{Handoff, Switch, SwitchShared};

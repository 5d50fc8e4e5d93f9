//! Xoff MMU: shared-buffer accounting of a datacenter switch ASIC, as pure logic.
//!
//! No I/O, threads or clocks: the dataplane passes packet metadata and a timestamp (u64
//! picoseconds), gets a verdict and a [`Ticket`], and collects flow-control events with
//! [`Mmu::poll_events`]. The same code runs on real AF_XDP ports and in virtual time.
//!
//! Mechanisms, one module each (paper: Shan et al., "Less is More: Dynamic and Shared Headroom
//! Allocation in PFC-enabled Datacenter Networks", `shared/papers/dsh-dynamic-shared-headroom.md`):
//! * [`config`]: pools, cells, `α`, `φ`, `δ`, headroom mode, ECN, seed (§V-A defaults);
//! * [`headroom`]: `η` (Eq. 1) + software response term, SIH/DSH totals (Eq. 3, 4), table;
//! * [`ingress`]: SIH's four cases (§II-C) and the HPCC `switch-mmu.cc` preset;
//! * [`dsh`]: DSH queue/port-level flow control (§IV-B, Eq. 5, 6, Fig. 8);
//! * [`egress`]: lossy pool, per-queue DT with tail drop;
//! * [`ecn`]: RED/DCQCN marking per egress queue;
//! * [`stats`]: occupancy, watermarks, drops, pauses;
//! * [`theory`]: Theorem 1 (Eq. 7) and Theorem 2 (Eq. 20).
//!
//! Accounting is in cells (`ceil(len / cell_bytes)`); a packet is charged whole to one
//! ingress segment, recorded in its ticket.

#![forbid(unsafe_code)]

pub mod config;
pub mod dsh;
pub mod ecn;
pub mod egress;
pub mod error;
pub mod headroom;
pub mod ingress;
mod mmu;
pub mod stats;
pub mod theory;
pub mod types;

pub use config::{Alpha, EcnConfig, HeadroomMode, MmuConfig};
pub use error::MmuError;
pub use headroom::{format_headroom_table, HeadroomRow};
pub use mmu::Mmu;
pub use stats::{Counters, DropCounters, MmuStats, Occupancy, PgStats, PortStats, QueueStats};
pub use types::{
    Admission, DropReason, FcEvent, PacketInfo, PortParams, Segment, Ticket, MAX_PGS, MAX_QUEUES,
};

//! Path choice for Xoff: pure decision logic, no I/O.
//!
//! `ecmp` is the seeded CRC32 hash every Xoff switch uses to pick among equal-cost next hops. It is
//! deliberately simple and documented bit for bit so that another switch (Pyrrha's path calculation)
//! or an offline script can recompute which path a flow takes.

#![forbid(unsafe_code)]

pub mod conga;
pub mod drill;
pub mod ecmp;
pub mod policy;
pub mod proteus;

pub use conga::CongaLeaf;
pub use drill::Drill;
pub use ecmp::{ecmp_hash, ecmp_pick, FiveTuple};
pub use policy::{Candidate, PathPolicy};

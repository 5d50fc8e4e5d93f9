//! Benchmarks of Xoff: criterion micro-benchmarks live in `benches/`; this library holds the
//! line-rate harness behind `xoff bench line-rate` and its traffic tools (an AF_XDP generator,
//! a bare AF_XDP forwarder, sinks), all built on the data plane's port module.

#![forbid(unsafe_code)]

pub mod decision;
pub mod linerate;
pub mod reaction;
pub mod traffic;

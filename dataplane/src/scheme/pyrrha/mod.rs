//! Pyrrha (NSDI '25) as a scheme: path calculation ([`path`]) and, on top of it, the adapter
//! that moves packets, frames and queue pauses between the pipeline and `flowctl::pyrrha`.

pub mod path;

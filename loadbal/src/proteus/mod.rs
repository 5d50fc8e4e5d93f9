//! Proteus: PFC-aware load balancing with multi-level signals (Hu et al., "Load Balancing With
//! Multi-Level Signals for Lossless Datacenter Networks", `shared/papers/proteus-load-balancing.md`).
//!
//! The decision logic only; the data plane carries the shim and measures time.
//!
//! - [`path`]: the path table at an edge switch and the path states of Table II (§III-A.1),
//!   from the one-way delay `t_pd` and the link utilisation `u_link` of every leaf-to-leaf path,
//!   measured at the destination edge ([`meter`], §IV-C) and fed back to the source edge.
//! - [`source`]: Algorithm 1 at the source edge (§III-B.1): `SelectPath` for a new flow, an
//!   order-preserving reroute of an existing flow, and the shim's contents (chosen path id,
//!   3 alternative path ids in priority order, tolerable delay `t_td`, §III-B.2, §IV-A).
//! - [`hop`]: Algorithm 2 at every switch (§III-B.2): at a PFC-paused egress, compare the
//!   predicted minimum queuing delay `t_qd` with `t_td`; reroute to the next alternative and
//!   mark the path inactive until PFC resumes, or wait and subtract the sojourn time (the
//!   cumulative sojourn time, CST) from `t_td`. This is better-late-than-never (§III-C): a
//!   packet waits at most `D_ps − D_po` on the paused optimal path before it reroutes.
//!
//! Time is in picoseconds and always passed in; nothing here reads a clock.

pub mod hop;
pub mod meter;
pub mod path;
pub mod source;

pub use hop::{min_queuing_delay, Hop, HopAction};
pub use meter::{Feedback, LinkLoad, PathMeter};
pub use path::{Params, PathEntry, PathId, PathState, PathTable};
pub use source::{FlowRef, Prev, ProteusSource, Shim};

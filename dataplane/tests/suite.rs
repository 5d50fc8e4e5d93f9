//! The dataplane crate's integration tests as modules of one test binary.
//!
//! Each test binary is linked with the release profile's thin LTO, which re-optimises the
//! whole dataplane for every binary; one binary instead of sixteen saves fifteen of those
//! links in CI's test build. None of these tests builds namespaces or holds a lock; the
//! harness runs them side by side as it ran the tests of each file. `Cargo.toml` sets
//! `autotests = false`; tools/tests/suite.rs has the test that fails when a file of
//! `tests/` is in no target.

mod common;

mod aquarius_fidelity;
mod bfc_fidelity;
mod cc;
mod conga;
mod ctl;
mod fabric;
mod fuzz_regressions;
mod handoff;
mod host_bfc;
mod lb_fidelity;
mod pfc_fidelity;
mod pyrrha_fidelity;
mod schemes;
mod sim_cc;
mod tap;
mod workload;

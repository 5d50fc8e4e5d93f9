//! The dataplane crate's integration tests as modules of one test binary.
//!
//! Each test binary is linked with the release profile's thin LTO, which re-optimises the
//! whole dataplane for every binary; one binary instead of sixteen saves fifteen of those
//! links in CI's test build. None of these tests builds namespaces or holds a lock; the
//! harness runs them side by side as it ran the tests of each file. `Cargo.toml` sets
//! `autotests = false`; the last test below fails when a file of `tests/` is in no target.

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

/// A file of `tests/` that is neither a module here nor a `[[test]]` target of Cargo.toml
/// would never be built (`autotests = false`): fail instead.
#[test]
fn every_test_file_is_in_a_test_target() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let suite = include_str!("suite.rs");
    for e in std::fs::read_dir(dir.join("tests")).expect("tests/") {
        let file = e
            .expect("dir entry")
            .file_name()
            .into_string()
            .expect("UTF-8");
        let Some(m) = file.strip_suffix(".rs") else {
            continue;
        };
        assert!(
            file == "suite.rs"
                || suite.contains(&format!("\nmod {m};"))
                || manifest.contains(&format!("path = \"tests/{file}\"")),
            "tests/{file} is in no test target: add `mod {m};` to tests/suite.rs"
        );
    }
}

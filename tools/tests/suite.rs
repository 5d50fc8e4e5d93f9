//! The tools crate's integration tests that run one at a time, as modules of one test binary.
//!
//! Every test here holds `common::serial()` while it builds namespaces, starts switches or
//! runs a simulation (the three that do not only parse a file or read a table: dissector's
//! emitted frames, netns' bad config, repro's unknown paper), so one binary with one lock runs
//! them exactly as one-binary-per-file did: never two at a time. What one binary saves is the
//! link: each test binary is linked with the release profile's thin LTO, which re-optimises
//! the whole dataplane for every binary; 24 of them took most of CI's test build.
//!
//! `sweep.rs` (three CPU-heavy virtual-time tests that run side by side) and `reaction.rs`
//! (real frames, timing figures, no lock) keep their own binaries so they never overlap a test
//! of this one. `tools/Cargo.toml` lists the targets (`autotests = false`); the last test below
//! fails when a file of `tests/` is in no target.

mod common;

mod afc;
mod aquarius;
mod bfc;
mod cc;
mod clab;
mod dissector;
mod experiment;
mod faults;
mod host_aquarius;
mod host_bfc;
mod linkstate;
mod metrics;
mod mininet;
mod multiqueue;
mod netns;
mod pfc;
mod proteus;
mod pyrrha;
mod pyrrha_fig8;
mod repro;
mod response_auto;
mod tap;
mod top;
mod vxlan;

/// A file of `tests/` (of this crate or of dataplane, whose tests are one binary the same way)
/// that is neither a module of its `suite.rs` nor a `[[test]]` target of its Cargo.toml would
/// never be built (`autotests = false`): fail instead.
#[test]
fn every_test_file_is_in_a_test_target() {
    let root = common::repo();
    for krate in ["tools", "dataplane"] {
        let dir = root.join(krate);
        let read = |p: &str| std::fs::read_to_string(dir.join(p)).expect(p);
        let (manifest, suite) = (read("Cargo.toml"), read("tests/suite.rs"));
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
                "{krate}/tests/{file} is in no test target: add `mod {m};` to its tests/suite.rs"
            );
        }
    }
}

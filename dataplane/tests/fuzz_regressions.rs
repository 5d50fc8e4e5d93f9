//! Switch-level regression tests for inputs `tools/fuzz.sh` found crashing a decoder (the
//! decoder-level tests on the same bytes live with the decoder, e.g.
//! `flowctl/tests/fuzz_regressions.rs`): the frame reaches a running switch from any
//! neighbour, so the switch must count and drop it, not panic.

use dataplane::frame::HeapMem;
use dataplane::stats::DropReason;
use dataplane::switch::{Outputs, Switch};
use dataplane::Topology;
use std::path::Path;

const PYRRHA: &str = r#"
name = "fuzzreg"
[[switch]]
name = "s1"
scheme = "pyrrha"
defaults = { rate = "10Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
"#;

/// `fuzz/artifacts/signal/crash-ccc3e800…` with its type byte in Pyrrha's range (0x2F, a type
/// Pyrrha does not define): 17 bytes, so the root fields (16..20) are missing.
static SHORT_PYRRHA_TYPE: [u8; 17] = [
    0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // src
    0x88, 0xb5, // Xoff signal
    0x01, // version
    0x2f, // in Pyrrha's range, not one of its types
    0xff,
];

#[test]
fn pyrrha_switch_counts_and_drops_a_short_signal_of_an_unknown_type() {
    let t = Topology::parse(PYRRHA, Path::new("fuzzreg.toml")).unwrap();
    let mut sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
    let mut mem = HeapMem::new(8, 2048);
    let free = mem.available();
    for n in 16..=SHORT_PYRRHA_TYPE.len() {
        let f = mem.alloc_with(&SHORT_PYRRHA_TYPE[..n]).unwrap();
        let mut out = Outputs::new();
        sw.receive(&mut mem, 0, f, n as u32, 0, &mut out);
        assert!(out.tx.is_empty() && out.handoff.is_empty());
    }
    let drops = &sw.shared.counters[0].drops;
    assert_eq!(
        drops[DropReason::MacControl.index()].get(),
        2,
        "16 and 17 bytes"
    );
    assert_eq!(mem.available(), free, "every frame recycled");
}

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

/// `fuzz/artifacts/topology/crash-ae5d4903…` (target `topology`), byte for byte: the
/// chain-bfc example mutated to `hrtt = "8888888888888500us"`, which the time parser
/// saturated to `u64::MAX` ps and `flowctl::Bfc::new` then multiplied by `sticky_hrtts`
/// (overflow panic in checked builds, a wrapped sticky time otherwise). Both steps are now
/// configuration errors.
static HUGE_HRTT_TOPOLOGY: &str = r#"# Two switches in a line running BFC (Backpressure Flow Control, flowctl::bfc):
#   h1,h2 -- s1 ==== s2 -- h3,h4      h4's port iz shaped to 100 Mbit/s.
# s1 and s2 bflow toward h3 shares s1's uplink and keeps its rate.
# Kernel hosts do not speak the shim, so s1 cannot pause thollow it.
name = "chainbfc"

[[switch]]
name = "s1"
scheme = "bfc"
defaults = { rate = "1Gbit", delay = "10us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }]
bfc = { hrtt = "8888888888888500us" }

[[switch]]
name = "s2"
seed = 2
scheme = "bfc"
defaults = { rate = "1Gbit", delay = "10us", queues = 9 }
port = [{ name = "p1" }, { name = "p2", rate = "100Mbit" }, { name = "p3" }]
bfc = { hrtt = "500us" }

[[host]]
name = "h1"
ip = "10.0.0.1/24"

[[host]]
name = "h2"
ip = "10.0.0.2/24"

[[host]]
name = "h3"
ip = "10.0.0.3/24"

[[host]]
name = "h4"
ip = "10.0.0.4/24"

[[link]]
a = "h1"
b = "s1:p1"

[[link]]
a = "h2"
b = "s1:p2"

[[link]]
a = "s1:p3"
b = "s2:p3"

[[link]]
a = "h3"
b = "s2:p1"

[[link]]
a = "h4"
b = "s2:p2"
"#;

#[test]
fn huge_bfc_hrtt_is_a_config_error_not_a_panic() {
    // The fuzzer's file: the time parser refuses the value rather than saturating it.
    let err = Topology::parse(HUGE_HRTT_TOPOLOGY, Path::new("crash.toml")).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
    // The largest TOML integer as picoseconds (no saturation involved): the switch refuses
    // to build, naming the interval.
    let text = HUGE_HRTT_TOPOLOGY.replace("\"8888888888888500us\"", "9223372036854775807");
    let t = Topology::parse(&text, Path::new("crash.toml")).unwrap();
    let Err(err) = Switch::single(t.switch_spec("s1").unwrap(), 0) else {
        panic!("a 106-day HRTT was accepted");
    };
    assert!(err.to_string().contains("hrtt"), "{err}");
    // The other switch of the file is fine.
    assert!(Switch::single(t.switch_spec("s2").unwrap(), 0).is_ok());
}

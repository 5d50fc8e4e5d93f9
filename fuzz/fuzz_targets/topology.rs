//! The topology TOML loader (`Topology::parse`: TOML, then validation) and, for what it
//! accepts, resolving every switch's spec and building its pipeline, as `xoff run` and
//! `xoff sim` do: a bad file is a `ConfigError`, never a panic.
#![no_main]

use dataplane::{Switch, Topology};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(t) = Topology::parse(text, Path::new("fuzz.toml")) else {
        return;
    };
    let _ = t.endpoints();
    for s in &t.switches {
        if let Ok(spec) = t.switch_spec(&s.name) {
            // Bounded: a fuzzed file may ask for a huge buffer or many queues.
            if spec.ports.len() <= 64 && spec.ports.iter().all(|p| p.queues <= 128) {
                let _ = Switch::single(spec, 0);
            }
        }
    }
});

//! The full decision path of the criterion `pipeline`/`bfc` benches (`Switch::receive` → MMU
//! admit → enqueue → scheduler → shaper → delay line → release) for a fixed number of 64-byte
//! routed frames, without criterion's adaptive iteration counts, so that an instruction
//! counter (`bench/callgrind.sh`) gives the same total on every run of the same binary.
//!
//! `decision_path static|bfc PACKETS`

use bench::decision::{step, TOPO};
use dataplane::frame::HeapMem;
use dataplane::switch::Outputs;
use dataplane::Switch;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(scheme), Some(n)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: decision_path static|bfc PACKETS");
    };
    let n: u64 = n.parse()?;
    let text = match scheme.as_str() {
        "static" => TOPO.to_string(),
        "bfc" => TOPO.replace("name = \"s1\"\n", "name = \"s1\"\nscheme = \"bfc\"\n"),
        s => anyhow::bail!("unknown scheme `{s}`: static or bfc"),
    };
    let (spec, frames) = bench::decision::spec_and_frames(&text, "decision_path.toml")?;
    let mut sw = Switch::single(spec, 0)?;
    let mut mem = HeapMem::new(1024, 1792);
    let mut out = Outputs::new();
    let mut now = 0u64;
    let mut sent = 0u64;
    for i in 0..n {
        sent += step(
            &mut sw,
            &mut mem,
            &mut out,
            &frames[(i & 63) as usize],
            &mut now,
        ) as u64;
    }
    println!("{scheme}: {n} frames in, {sent} out");
    Ok(())
}

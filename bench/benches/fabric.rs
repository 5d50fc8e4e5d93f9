//! Speed of the virtual-time fabric: simulated packet-hops per wall-clock second on the
//! 16-host leaf-spine of `deploy/sim/leafspine.toml` (4 leaves, 4 spines, 100 Gbit/s, 1 µs
//! links, a line-rate permutation). A packet-hop is one frame crossing one link (host→leaf,
//! leaf→spine, spine→leaf, leaf→host: four per inter-leaf packet); every switch traversal
//! runs the full production pipeline.
//!
//! Run: `cargo bench -p bench --bench fabric` (optionally `-- --duration-us 2000 --runs 5`).

use dataplane::fabric::{Fabric, FabricOptions};
use std::path::Path;
use std::time::Instant;

fn main() {
    let mut duration_us = 2000u64;
    let mut runs = 3usize;
    let args: Vec<String> = std::env::args().collect();
    for w in args.windows(2) {
        match w[0].as_str() {
            "--duration-us" => duration_us = w[1].parse().unwrap_or(duration_us),
            "--runs" => runs = w[1].parse().unwrap_or(runs),
            _ => {}
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim/leafspine.toml");
    let mut rates = Vec::new();
    for run in 0..runs {
        let mut f = match Fabric::load(
            &path,
            &FabricOptions {
                seed: Some(1),
                duration: Some(duration_us * 1_000_000),
            },
        ) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let t = Instant::now();
        f.run();
        let secs = t.elapsed().as_secs_f64();
        let s = f.stats();
        let rate = s.link_hops as f64 / secs;
        rates.push(rate);
        println!(
            "fabric leafspine16 run {run}: {:.0} us virtual, {} packet-hops ({} switch traversals, {} events, at most {} pending) in {:.3} s wall = {:.2} M packet-hops/s, {:.2} M switch traversals/s",
            f.now() as f64 / 1e6,
            s.link_hops,
            s.switch_hops,
            s.events,
            s.max_pending,
            secs,
            rate / 1e6,
            s.switch_hops as f64 / secs / 1e6,
        );
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "fabric leafspine16: median {:.2} M packet-hops/s over {runs} runs (goal >= 5 M)",
        median / 1e6
    );
}

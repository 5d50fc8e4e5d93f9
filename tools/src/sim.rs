//! `xoff sim FILE`: runs a topology + traffic file in the virtual-time fabric and prints
//! per-flow throughput, FCT and delay, and per-port/queue statistics.

use anyhow::{Context, Result};
use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::units::parse_time;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `xoff sim`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Topology file with `[[flow]]`s and an optional `[sim]` section (see deploy/sim/).
    pub file: PathBuf,
    /// Print the report as JSON (byte-identical for the same file and seed).
    #[arg(long)]
    pub json: bool,
    /// Seed for flow start jitter, source ports (ECMP paths) and on/off periods; overrides
    /// `[sim] seed`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Traffic window, e.g. "200us"; overrides `[sim] duration`.
    #[arg(long)]
    pub duration: Option<String>,
    /// Write the probe samples (`[sim] probe`) to this CSV file.
    #[arg(long)]
    pub probes: Option<PathBuf>,
}

/// Runs `xoff sim`.
pub fn run(args: SimArgs) -> Result<()> {
    let duration = args
        .duration
        .as_deref()
        .map(parse_time)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let mut fabric = Fabric::load(
        &args.file,
        &FabricOptions {
            seed: args.seed,
            duration,
        },
    )?;
    let wall = Instant::now();
    fabric.run();
    let secs = wall.elapsed().as_secs_f64();
    let report = fabric.report();
    if let Some(p) = &args.probes {
        std::fs::write(p, fabric.probes().csv())
            .with_context(|| format!("writing probes to {}", p.display()))?;
    }
    let text = if args.json {
        format!("{}\n", report.to_json())
    } else {
        let hops = report.stats.link_hops as f64;
        format!(
            "{}\nwall clock {:.3} s: {:.2} M packet-hops/s\n",
            report.table(),
            secs,
            hops / secs.max(1e-9) / 1e6
        )
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A closed pipe (`| head`) is not an error of the simulation.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.context("writing the report to stdout")?,
    }
    Ok(())
}

//! `xoff experiment run FILE [--out DIR] [--json]`: runs an experiment file (see
//! `deploy/experiments/`): a topology, a workload, a duration, seeds and a matrix of switch
//! settings. Each cell of the matrix × seed runs either on real frames (the testbed is brought
//! up with the cell's settings, `xoff host` runs on every host that sends or receives, switch
//! counters are sampled over the control socket, the testbed is torn down) or in virtual time
//! (`mode = "virtual"`: the fabric with the same host stack, switch telemetry sampled by fabric
//! probes in virtual time). Results: `results.json` (with a pause and queue timeline per
//! cell), per-cell `flows.csv` and `timeline.csv` (every port), comparison tables (overall and
//! FCT slowdown by flow size), and plots (PNG + SVG): FCT slowdown vs flow size per cell, FCT
//! CDF, queue depth over time and pause signals (PFC XOFF frames, BFC pauses) over time for
//! the busiest ports.
//!
//! Sweeps (issue 23): `--jobs N` runs virtual-time cells on N threads (each cell builds its
//! own fabric from its own seed, so results equal `--jobs 1`; real-frame cells stay serial);
//! `--shard I/N` runs the cells whose table index is I mod N and writes a partial
//! results.json plus each cell's exact flows and series (`cell.json`); `xoff experiment merge`
//! checks the shards belong together and writes what one run would have. Cluster recipes:
//! `deploy/cluster/`.
//!
//! Schemes: `none` (no flow control), `pfc` (802.1Qbb on the lossless priority), the BFC
//! variants `bfc`, `bfc-stochastic`, `bfc-single`, and `aquarius` (the switch's `scheme`, PFC
//! off; BFC's switches share their whole buffer as one pool, which drops only when full, with
//! no lossless PG and no PFC headroom reserved). The hosts of BFC cells speak BFC with
//! `host.bfc_queues` NIC queues (default 32): `xoff host --bfc-queues` on real frames, the host
//! stack in BFC mode in virtual time (`[sim] honor_bfc`, unless the topology's `[sim]` already
//! chooses: `honor_bfc`, or the partial-deployment `inflight_cap` for hosts that do not speak
//! BFC). The hosts of Aquarius cells honour its per-flow pauses as well (`xoff host
//! --aquarius` on real frames).
//! Matrix key `queues` sets every switch's queues per port and the BFC hosts' NIC queues (BFC-8
//! vs BFC-32, Aquarius §2/§4); `exclude` drops the cells that match one of its entries.
//!
//! Matrix key `load` replaces a load workload's `workload.load` per cell (a load sweep in one
//! file, Proteus §V-B's 0.3–0.8); key `lb` sets every switch's path choice (ecmp, drill, conga,
//! proteus).
//!
//! A `load` workload may carry an incast on top (`[workload.incast]`: `load`, `fan_in`,
//! `size_min`, `size_max`; [`dataplane::workload::IncastMix`]), as Aquarius §4's "70 % load + 5 % 100-to-1
//! incast". `total` instead of `load` gives the incasts what the cell's background load leaves
//! of a total (DSH §V-B: total 0.9, background swept by matrix `load`); `senders =
//! "other-racks"` draws an event's senders outside its receiver's rack.
//!
//! End-host congestion control (issue 19): matrix key `cc` (or `host.cc` for every cell):
//! `none`, `window` (the default), `dcqcn`, `dctcp`, `hpcc` (`dataplane::host::cc`); `xoff
//! host --cc` on real frames, the stacks' `StackConfig::cc` in virtual time. DCTCP cells mark
//! ECN at one threshold K on switches whose buffer has no `ecn` table of its own: K = 30 KB
//! per 10 Gbit/s of port rate, `P_max` = 1 (HPCC's `simulation/run.py`, `--cc dctcp`); HPCC
//! cells turn INT on at every switch (`int = true`).
//!
//! Modules, in the order a run passes through them: [`spec`] (the experiment file as
//! written), [`plan`] (its cells and what each sets in the topology), [`schedule`] (a cell's
//! flows), [`virtual_time`] and [`real_frames`] (the two runners), [`results`] (what a cell
//! measured, typed as results.json carries it), [`report`] (results.json and the tables),
//! [`plots`], and [`shard`] (`--shard I/N` and `xoff experiment merge`).

mod plan;
mod plots;
mod real_frames;
mod report;
mod results;
mod schedule;
mod shard;
mod spec;
mod virtual_time;

pub use results::{CellResult, ExperimentResult};
pub use shard::{merge_dirs, ShardSpec};
pub use spec::Mode;

use anyhow::{anyhow, Context, Result};
use dataplane::config::Topology;
use dataplane::host::report::FlowResult;
use plan::{
    cell_cc, cell_dir_name, cell_load, cell_queues, patch_topology, CellSetup, CellSpec, Plan,
};
use results::CellOut;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug, Clone)]
pub enum ExperimentCmd {
    /// Run every cell of an experiment file.
    #[command(
        after_help = "Example:\n  xoff experiment run deploy/experiments/websearch-pfc.toml --shard 0/3 --out /tmp/ws-0"
    )]
    Run {
        file: PathBuf,
        /// Output directory (default: `results/<experiment name>`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the results as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Run up to N virtual-time cells at once (each stays deterministic for its seed:
        /// results equal --jobs 1). Real-frame (testbed) cells always run one at a time: they
        /// share this machine's CPUs and namespaces.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        jobs: u16,
        /// Run only shard I of N: the cells whose index in the results table is I modulo N
        /// (0 <= I < N). Writes a partial results.json; `xoff experiment merge` combines the
        /// N shards' directories.
        #[arg(long, value_name = "I/N")]
        shard: Option<ShardSpec>,
    },
    /// Combine the output directories of `run --shard I/N` (all N shards of one experiment
    /// file) into the full table, results.json and plots.
    #[command(
        after_help = "Example:\n  xoff experiment merge /tmp/ws-0 /tmp/ws-1 /tmp/ws-2 --out /tmp/ws"
    )]
    Merge {
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Output directory for the merged results.
        #[arg(long)]
        out: PathBuf,
        /// Print the results as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ExperimentCmd) -> Result<i32> {
    let (res, out, json) = match cmd {
        ExperimentCmd::Run {
            file,
            out,
            json,
            jobs,
            shard,
        } => {
            let opts = RunOpts {
                duration: None,
                seeds: None,
                jobs: usize::from(jobs),
                shard,
            };
            let (res, out) = run_file_with(&file, out, &opts)?;
            (res, out, json)
        }
        ExperimentCmd::Merge { dirs, out, json } => {
            let res = merge_dirs(&dirs, &out)?;
            (res, out, json)
        }
    };
    let mut o = std::io::stdout().lock();
    if json {
        writeln!(o, "{}", serde_json::to_string_pretty(&res)?)?;
    } else {
        write!(o, "{}", report::table(&res))?;
        if let Some(s) = &res.shard {
            writeln!(
                o,
                "shard {}/{}: {} of {} cells; combine the shards with `xoff experiment merge`",
                s.index,
                s.count,
                s.cells.len(),
                s.labels.len()
            )?;
        }
        writeln!(o, "results in {}", out.display())?;
    }
    // A cell that claims losslessness and cannot show it fails the run, whatever else it
    // measured.
    let failed: Vec<String> = res
        .cells
        .iter()
        .filter_map(|c| c.audit.failure().map(|w| format!("{}: {w}", c.cell)))
        .collect();
    for f in &failed {
        eprintln!("lossless audit failed in cell {f}");
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}

/// How to run an experiment file.
#[derive(Debug, Clone)]
pub struct RunOpts<'a> {
    /// Replaces the traffic window (`xoff repro --quick`).
    pub duration: Option<&'a str>,
    /// Replaces the file's seeds (`xoff repro --quick` runs one).
    pub seeds: Option<&'a [u64]>,
    /// Virtual-time cells run on up to this many threads (real-frame cells stay serial).
    pub jobs: usize,
    pub shard: Option<ShardSpec>,
}

/// Runs one cell into `out/<cell dir>`.
fn run_cell(p: &Plan, c: &CellSpec, out: &Path) -> Result<CellOut> {
    let dir = out.join(cell_dir_name(&c.label));
    std::fs::create_dir_all(&dir)?;
    let patched = patch_topology(&p.topo_text, &c.params, &p.exp)
        .map_err(|e| anyhow!("{}: {e}", p.topo_path.display()))?;
    let tpath = dir.join("topology.toml");
    std::fs::write(&tpath, patched)?;
    let topo = Topology::load(&tpath)?;
    // Matrix key `load`: this cell's offered load instead of the file's.
    let sched = schedule::schedule(p, &topo, c.seed, cell_load(&c.params)?)?;
    std::fs::write(
        dir.join("schedule.csv"),
        dataplane::workload::to_csv(&sched),
    )?;
    let setup = CellSetup {
        spec: c,
        cc: cell_cc(&p.exp, &c.params)?,
        queues: cell_queues(&c.params)?,
        dir,
        tpath,
        topo,
        sched,
    };
    let (mut r, flows, series) = match p.exp.mode {
        Mode::Virtual => virtual_time::run(p, &setup)?,
        Mode::Real => real_frames::run(p, &setup)?,
    };
    std::fs::write(
        setup.dir.join("flows.csv"),
        dataplane::host::report::flows_csv(&flows),
    )?;
    std::fs::write(setup.dir.join("timeline.csv"), series.csv())?;
    r.timeline = series.timeline();
    r.cell = c.label.clone();
    r.params = c.params.clone();
    r.seed = c.seed;
    r.dir = setup.dir.display().to_string();
    Ok((r, flows, series))
}

/// Runs the cells of the experiment `file` (all, or those of `opts.shard`) into `out` (default
/// `results/<name>`), writes results.json and the plots; returns the results and the output
/// directory.
pub fn run_file_with(
    file: &Path,
    out: Option<PathBuf>,
    opts: &RunOpts,
) -> Result<(ExperimentResult, PathBuf)> {
    let (res, out, _) = run_file_flows(file, out, opts)?;
    Ok((res, out))
}

/// [`run_file_with`], also returning every cell's flows (in the order of `cells`).
pub fn run_file_flows(
    file: &Path,
    out: Option<PathBuf>,
    opts: &RunOpts,
) -> Result<(ExperimentResult, PathBuf, Vec<Vec<FlowResult>>)> {
    let p = plan::plan(file, opts.duration, opts.seeds)?;
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&p.exp.name));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mine: Vec<&CellSpec> = p
        .cells
        .iter()
        .filter(|c| opts.shard.is_none_or(|s| s.owns(c.index)))
        .collect();
    let total = mine.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let step = |c: &CellSpec| -> Result<CellOut> {
        let r = run_cell(&p, c, &out).with_context(|| format!("cell `{}`", c.label))?;
        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(k, total, &c.label);
        Ok(r)
    };
    let jobs = opts.jobs.max(1);
    let ran: Vec<CellOut> = match p.exp.mode {
        // Real-frame cells share this machine's CPUs and its namespaces, and time their
        // traffic by the wall clock: parallel cells would disturb each other's results.
        Mode::Real => {
            if jobs > 1 {
                tracing::warn!("--jobs {jobs}: real-frame cells run one at a time");
            }
            mine.iter().map(|c| step(c)).collect::<Result<_>>()?
        }
        // Virtual-time cells share nothing (each builds its own fabric from its own seed),
        // so running them on several threads changes nothing but the wall-clock time.
        // `collect` keeps table order whatever order the cells finish in.
        Mode::Virtual if jobs > 1 => {
            use rayon::prelude::*;
            rayon::ThreadPoolBuilder::new()
                .num_threads(jobs)
                .build()
                .context("starting the --jobs thread pool")?
                .install(|| mine.par_iter().map(|c| step(c)).collect::<Result<_>>())?
        }
        Mode::Virtual => mine.iter().map(|c| step(c)).collect::<Result<_>>()?,
    };
    eprintln!();
    let shard = match opts.shard {
        None => None,
        Some(s) => Some(shard::record(s, &p, &mine, &ran)?),
    };
    let flows = ran.iter().map(|c| c.1.clone()).collect();
    let res = report::finish(&out, &p.exp.name, p.exp.mode, ran, shard)?;
    Ok((res, out, flows))
}

/// The progress bar on stderr: `k` of `total` cells done, the last one `label`.
fn progress(k: usize, total: usize, label: &str) {
    let w = 30;
    let filled = k * w / total.max(1);
    eprint!(
        "\r[{}{}] {}/{} {:<40}",
        "#".repeat(filled),
        ".".repeat(w - filled),
        k,
        total,
        label
    );
    let _ = std::io::stderr().flush();
}

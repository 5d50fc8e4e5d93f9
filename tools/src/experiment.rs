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
//! off). The hosts of BFC cells speak BFC with `host.bfc_queues` NIC queues (default 32):
//! `xoff host --bfc-queues` on real frames, the host stack in BFC mode in virtual time (`[sim]
//! honor_bfc`, unless the topology's `[sim]` already chooses: `honor_bfc`, or the
//! partial-deployment `inflight_cap` for hosts that do not speak BFC). The hosts of Aquarius
//! cells honour its per-flow pauses as well (`xoff host --aquarius` on real frames).
//! Matrix key `queues` sets every switch's queues per port and the BFC hosts' NIC queues (BFC-8
//! vs BFC-32, Aquarius §2/§4); `exclude` drops the cells that match one of its entries.
//!
//! Matrix key `load` replaces a load workload's `workload.load` per cell (a load sweep in one
//! file, Proteus §V-B's 0.3–0.8); key `lb` sets every switch's path choice (ecmp, drill, conga,
//! proteus).
//!
//! A `load` workload may carry an incast on top (`[workload.incast]`: `load`, `fan_in`,
//! `size_min`, `size_max`; [`workload::IncastMix`]), as Aquarius §4's "70 % load + 5 % 100-to-1
//! incast".
//!
//! End-host congestion control (issue 19): matrix key `cc` (or `host.cc` for every cell):
//! `none`, `window` (the default), `dcqcn`, `dctcp`, `hpcc` (`dataplane::host::cc`); `xoff
//! host --cc` on real frames, the stacks' `StackConfig::cc` in virtual time. DCTCP cells mark
//! ECN at one threshold K on switches whose buffer has no `ecn` table of its own: K = 30 KB
//! per 10 Gbit/s of port rate, `P_max` = 1 (HPCC's `simulation/run.py`, `--cc dctcp`); HPCC
//! cells turn INT on at every switch (`int = true`).

use crate::congestion::PortPauses;
use crate::plot::{write_chart, Axis, Bars, Chart, Unit};
use anyhow::{anyhow, bail, Context, Result};
use dataplane::config::Topology;
use dataplane::ctl::{self, Request, Response};
use dataplane::fabric::{Fabric, FabricOptions, FcCounter, PortCounter, ProbeTarget};
use dataplane::host::report::{
    ideal_fct_ps, merge, summarize, FlowResult, RxRecord, Summary, TxRecord,
};
use dataplane::host::{cc::CcKind, paths::HostGraph, StackConfig};
use dataplane::units::{parse_rate, parse_size, parse_time};
use dataplane::workload::{self, Arrival, Cdf, Dests, FlowSpec, IncastSpec, LoadSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

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

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Real,
    Virtual,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpFile {
    name: String,
    /// Topology file, relative to the experiment file.
    topology: String,
    #[serde(default)]
    mode: Mode,
    /// Traffic window (flows start within it).
    duration: String,
    /// Time after the window for flows to finish (default 1 s real, 10 ms virtual).
    drain: Option<String>,
    #[serde(default = "default_seeds")]
    seeds: Vec<u64>,
    workload: WorkloadCfg,
    #[serde(default)]
    host: HostCfg,
    /// Switch settings to vary: `scheme` (pfc, none, bfc, bfc-stochastic, bfc-single,
    /// aquarius), `headroom` (sih, dsh), `lb` (ecmp, drill, conga, proteus), `queues` (per
    /// port), `cc`, and `load` (a load workload's offered load, replacing `workload.load`).
    #[serde(default)]
    matrix: BTreeMap<String, Vec<String>>,
    /// Cells of the matrix not to run: a cell matching every key of one entry is skipped.
    #[serde(default)]
    exclude: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    sample: SampleCfg,
}

/// `[workload.incast]`: incast events on top of a load workload ([`workload::IncastMix`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncastMixCfg {
    /// Offered load per host, fraction of the NIC rate.
    load: f64,
    fan_in: u32,
    size_min: String,
    size_max: String,
}

fn default_seeds() -> Vec<u64> {
    vec![1]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadCfg {
    /// "incast" or "load".
    kind: String,
    senders: Option<Vec<String>>,
    receiver: Option<String>,
    size: Option<String>,
    rounds: Option<u32>,
    period: Option<String>,
    jitter: Option<String>,
    prio: Option<u8>,
    /// CDF file, relative to the experiment file.
    cdf: Option<String>,
    load: Option<f64>,
    /// "poisson" or "lognormal".
    arrival: Option<String>,
    sigma: Option<f64>,
    dests: Option<Vec<String>>,
    prios: Option<Vec<u8>>,
    /// Load workloads: incast on top.
    incast: Option<IncastMixCfg>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HostCfg {
    window: Option<String>,
    rto: Option<String>,
    /// Base RTT for windows and ideal FCT (default: computed from the access links).
    base_rtt: Option<String>,
    /// Host NIC pacing rate (default: the attached port's rate).
    rate: Option<String>,
    /// NIC queues of the hosts in BFC cells (default 32).
    bfc_queues: Option<usize>,
    /// Congestion control of every cell without a matrix `cc` (default `window`).
    cc: Option<String>,
}

/// NIC queues of a BFC host (the fabric's `[sim] nic_bfc_queues` default).
const BFC_QUEUES: usize = 32;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SampleCfg {
    /// Switch counter sampling interval (default 20 ms real, 10 us virtual).
    interval: Option<String>,
}

/// A cell's lossless audit (`dataplane::audit`): every switch's ledger summed, plus the
/// AF_XDP ring losses at the host ends on real frames. Taken after the traffic stopped, when
/// it is exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellAudit {
    /// Some switch claims lossless priorities (PFC on a priority, or a per-hop scheme).
    pub lossless_claimed: bool,
    /// Switches whose audit does not balance, or that did not answer.
    pub unbalanced: Vec<String>,
    /// Frames the switches dropped after classification, plus ring losses everywhere.
    pub lost: u64,
    /// Of those, frames of lossless priorities (and ring losses where lossless traffic runs,
    /// host ends included).
    pub lossless_lost: u64,
}

impl CellAudit {
    fn add(&mut self, a: &dataplane::audit::Audit, spec: &dataplane::SwitchSpec) {
        self.lossless_claimed |= dataplane::audit::lossless_prios(spec) != 0;
        if !a.balanced {
            self.unbalanced.push(a.switch.clone());
        }
        self.lost += a.lost;
        self.lossless_lost += a.lossless_lost;
    }

    /// Why a cell that claims losslessness fails its audit (None: it passes, or claims
    /// nothing).
    pub fn failure(&self) -> Option<String> {
        if !self.lossless_claimed {
            return None;
        }
        match (self.unbalanced.is_empty(), self.lossless_lost) {
            (true, 0) => None,
            (true, n) => Some(format!("{n} frames of lossless priorities lost")),
            (false, n) => Some(format!(
                "audit does not balance at {} ({n} lossless frames lost)",
                self.unbalanced.join(", ")
            )),
        }
    }
}

/// Aquarius counters of a cell, summed over every switch port (and host stacks): why it
/// paused, how often a congested flow was moved to `rsvQ` rather than its queue paused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AquariusTotals {
    /// PAUSEs sent because the queue passed Q_high, and by contribution (Alg. 1).
    pub pauses_qhigh: u64,
    pub pauses_contribution: u64,
    pub resumes: u64,
    /// Upstream side (switch ports): PAUSEs that paused the flow's own queue, moved it to
    /// `rsvQ`, or found no queue for `rsvQ`; `rsvQ` allocations.
    pub queue_pauses: u64,
    pub flows_reassigned: u64,
    pub no_rsv: u64,
    pub rsv_allocations: u64,
    /// Flow-table entries shared by two flows (hash collisions).
    pub table_collisions: u64,
    /// The most flows active on one egress port.
    pub active_flows_max: u64,
    /// Host stacks: per-flow PAUSEs honoured, and signals naming no running flow.
    pub host_pauses_rx: u64,
    pub host_unknown: u64,
}

/// One cell's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: String,
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    pub summary: Summary,
    /// Sequence-check losses at the receivers.
    pub receiver_lost: u64,
    /// XDP_STATISTICS losses (switch ports and host sockets).
    pub xdp_lost: u64,
    /// Drops the switches counted, by reason.
    pub switch_drops: BTreeMap<String, u64>,
    /// Where: drops per "switch:port" (ports that dropped anything).
    #[serde(default)]
    pub drops_by_port: BTreeMap<String, u64>,
    /// PFC XOFF frames the switches sent (including refreshes).
    pub pfc_pause_frames: u64,
    /// BFC PAUSE signals the switches sent (to upstream switches and BFC host NICs).
    pub bfc_pauses: u64,
    pub bfc_resumes: u64,
    /// BFC flow-to-queue assignments that landed on an occupied queue.
    pub bfc_collisions: u64,
    /// Highest watermark of any switch queue, bytes.
    pub max_queue_bytes: u64,
    /// PFC frames the host stacks received, and BFC PAUSEs they honoured (BFC mode).
    pub host_pfc_rx: u64,
    pub host_bfc_pauses_rx: u64,
    pub hosts_incomplete: Vec<String>,
    /// Pause signals each switch port sent (the congestion tree's edges).
    #[serde(default)]
    pub pauses: Vec<PortPauses>,
    /// The switches' lossless audit after the traffic stopped.
    #[serde(default)]
    pub audit: CellAudit,
    /// Aquarius cells: the mechanisms' counters over every switch port and host.
    #[serde(default)]
    pub aquarius: AquariusTotals,
    /// `lb = proteus` cells: every switch's Proteus counters summed (reroutes by Algorithm 1
    /// at the source edge and by Algorithm 2 at any hop, feedback applied).
    #[serde(default)]
    pub proteus: dataplane::scheme::proteus::ProteusStats,
    pub dir: String,
    /// Switch telemetry over time (all ports together, and the busiest ports).
    pub timeline: Timeline,
}

/// Switch telemetry of a cell over time, sampled every `[sample] interval` (virtual or real).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub interval_us: f64,
    /// Sample times, µs from the start of the run.
    pub t_us: Vec<f64>,
    /// Bytes in the fullest queue of any switch port.
    pub max_queue_bytes: Vec<u64>,
    /// Bytes queued in all switch ports.
    pub total_queue_bytes: Vec<u64>,
    /// Pause signals sent so far by all switch ports (PFC XOFF frames + BFC pauses).
    pub pauses: Vec<u64>,
    /// The busiest ports ("switch:port"): the highest queue peaks and the most pauses.
    pub ports: BTreeMap<String, PortTimeline>,
}

/// One port's telemetry over time (aligned with [`Timeline::t_us`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PortTimeline {
    /// Bytes queued in all the port's queues.
    pub depth_bytes: Vec<u64>,
    /// Bytes in the port's fullest queue.
    pub max_queue_bytes: Vec<u64>,
    /// Pause signals sent so far on the port (PFC XOFF frames + BFC pauses).
    pub pauses: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub name: String,
    pub mode: String,
    pub cells: Vec<CellResult>,
    pub plots: Vec<String>,
    pub notes: Vec<String>,
    /// Set in a shard's partial results (`--shard I/N`), absent from whole runs and merges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
}

/// What `xoff experiment merge` checks shards by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardInfo {
    /// I and N of `--shard I/N`.
    pub index: usize,
    pub count: usize,
    /// Indices (table order) of the cells this shard ran, matching `cells`.
    pub cells: Vec<usize>,
    /// Every cell of the experiment, in table order.
    pub labels: Vec<String>,
    /// FNV-1a 64 of the experiment file, its topology and workload CDF files.
    pub digest: String,
    pub xoff_version: String,
}

/// Time series gathered during a cell: every switch port, aligned with `t_ps`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Series {
    interval_ps: u64,
    t_ps: Vec<u64>,
    /// "switch:port" → samples.
    ports: BTreeMap<String, PortTimeline>,
}

/// Ports of each kind a timeline keeps in results.json and the plots.
const BUSIEST: usize = 4;

impl Series {
    fn push(&mut self, key: &str, depth: u64, maxq: u64, pauses: u64) {
        let p = self.ports.entry(key.to_string()).or_default();
        p.depth_bytes.push(depth);
        p.max_queue_bytes.push(maxq);
        p.pauses.push(pauses);
    }

    /// Ports with the highest queue peaks, then those with the most pauses (up to `BUSIEST`
    /// each, ports that never queued nor paused left out).
    fn busiest(&self) -> Vec<&String> {
        let top = |f: &dyn Fn(&PortTimeline) -> u64| {
            let mut v: Vec<(u64, &String)> = self
                .ports
                .iter()
                .map(|(k, p)| (f(p), k))
                .filter(|&(x, _)| x > 0)
                .collect();
            v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
            v.into_iter()
                .take(BUSIEST)
                .map(|(_, k)| k)
                .collect::<Vec<_>>()
        };
        let mut out = top(&|p| p.max_queue_bytes.iter().copied().max().unwrap_or(0));
        for k in top(&|p| p.pauses.last().copied().unwrap_or(0)) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    fn timeline(&self) -> Timeline {
        let n = self.t_ps.len();
        let mut t = Timeline {
            interval_us: self.interval_ps as f64 / 1e6,
            t_us: self.t_ps.iter().map(|&x| x as f64 / 1e6).collect(),
            max_queue_bytes: vec![0; n],
            total_queue_bytes: vec![0; n],
            pauses: vec![0; n],
            ports: BTreeMap::new(),
        };
        for p in self.ports.values() {
            for i in 0..n {
                t.max_queue_bytes[i] = t.max_queue_bytes[i].max(p.max_queue_bytes[i]);
                t.total_queue_bytes[i] += p.depth_bytes[i];
                t.pauses[i] += p.pauses[i];
            }
        }
        for k in self.busiest() {
            t.ports.insert(k.clone(), self.ports[k].clone());
        }
        t
    }

    /// CSV: `time_us` then depth, fullest queue and pauses of every port that queued or paused.
    fn csv(&self) -> String {
        use std::fmt::Write;
        let live: Vec<(&String, &PortTimeline)> = self
            .ports
            .iter()
            .filter(|(_, p)| {
                p.depth_bytes.iter().any(|&x| x > 0) || p.pauses.last().is_some_and(|&x| x > 0)
            })
            .collect();
        let mut s = String::from("time_us");
        for (k, _) in &live {
            let _ = write!(s, ",{k}:depth_bytes,{k}:max_queue_bytes,{k}:pauses");
        }
        s.push('\n');
        for (i, t) in self.t_ps.iter().enumerate() {
            let _ = write!(s, "{}", *t as f64 / 1e6);
            for (_, p) in &live {
                let _ = write!(
                    s,
                    ",{},{},{}",
                    p.depth_bytes[i], p.max_queue_bytes[i], p.pauses[i]
                );
            }
            s.push('\n');
        }
        s
    }
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
        write!(o, "{}", table(&res))?;
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

/// `--shard I/N`: this process runs the cells whose index (in the order of the results table:
/// matrix values in key order, then seeds) is I modulo N. The assignment depends only on the
/// experiment file, so N independent processes cover every cell exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}`: use I/N, e.g. 0/4"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|e| format!("`{s}`: shard index: {e}"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|e| format!("`{s}`: shard count: {e}"))?;
        if count == 0 || index >= count {
            return Err(format!("`{s}`: need 0 <= I < N"));
        }
        Ok(ShardSpec { index, count })
    }
}

impl ShardSpec {
    /// Whether cell `i` (0-based, table order) belongs to this shard.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }
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

/// Runs every cell of the experiment `file` into `out` (default `results/<name>`), with the
/// traffic window replaced by `duration` if given (`xoff repro --quick`); returns the results
/// and the output directory.
pub fn run_file(
    file: &Path,
    out: Option<PathBuf>,
    duration: Option<&str>,
) -> Result<(ExperimentResult, PathBuf)> {
    run_file_with(
        file,
        out,
        &RunOpts {
            duration,
            seeds: None,
            jobs: 1,
            shard: None,
        },
    )
}

/// One cell of the matrix × seeds, in table order.
struct CellSpec {
    index: usize,
    params: BTreeMap<String, String>,
    seed: u64,
    label: String,
}

/// An experiment file read and checked, with what every cell shares.
struct Plan {
    exp: ExpFile,
    fname: String,
    base: PathBuf,
    topo_path: PathBuf,
    topo_text: String,
    paths: Paths,
    cells: Vec<CellSpec>,
    /// FNV-1a of the experiment, topology and workload files (after `duration` overrides).
    digest: String,
}

fn plan(file: &Path, duration: Option<&str>, seeds: Option<&[u64]>) -> Result<Plan> {
    let fname = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {fname}"))?;
    let mut exp: ExpFile = toml::from_str(&text).map_err(|e| anyhow!("{fname}: {e}"))?;
    if let Some(d) = duration {
        exp.duration = d.to_string();
    }
    if let Some(v) = seeds {
        exp.seeds = v.to_vec();
    }
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let topo_path = base.join(&exp.topology);
    let topo_text = std::fs::read_to_string(&topo_path)
        .with_context(|| format!("{fname}: topology: reading {}", topo_path.display()))?;
    let topo0 = Topology::load(&topo_path)?;
    // Rates and delays do not change between cells.
    let paths = path_params(&exp, &topo0, &fname)?;
    for k in exp.matrix.keys() {
        if !["scheme", "headroom", "lb", "cc", "queues", "load"].contains(&k.as_str()) {
            bail!(
                "{fname}: matrix.{k}: unknown setting (use scheme, headroom, lb, cc, queues, load)"
            );
        }
    }
    if exp.matrix.contains_key("load") && exp.workload.kind != "load" {
        bail!("{fname}: matrix.load: only a `load` workload has an offered load");
    }
    for (i, e) in exp.exclude.iter().enumerate() {
        if let Some(k) = e.keys().find(|k| !exp.matrix.contains_key(*k)) {
            bail!("{fname}: exclude[{i}].{k}: not a matrix key");
        }
    }
    if exp.seeds.is_empty() {
        bail!("{fname}: seeds: give at least one seed");
    }
    let mut cells = Vec::new();
    for params in cells_of(&exp.matrix)
        .into_iter()
        .filter(|p| !excluded(&exp, p))
    {
        for &seed in &exp.seeds {
            cells.push(CellSpec {
                index: cells.len(),
                label: cell_label(&params, seed, exp.seeds.len()),
                params: params.clone(),
                seed,
            });
        }
    }
    // What a shard's results depend on: the files, not their paths (shards may run on
    // machines that keep the repository elsewhere).
    let mut h = Fnv::default();
    h.field(text.as_bytes());
    h.field(exp.duration.as_bytes());
    if seeds.is_some() {
        h.field(format!("{:?}", exp.seeds).as_bytes());
    }
    h.field(topo_text.as_bytes());
    if let Some(c) = &exp.workload.cdf {
        let p = base.join(c);
        h.field(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?);
    }
    Ok(Plan {
        digest: format!("{:016x}", h.0),
        exp,
        fname,
        base,
        topo_path,
        topo_text,
        paths,
        cells,
    })
}

/// 64-bit FNV-1a: a stable digest (std's hasher may change between Rust releases).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Hashes a length-prefixed field, so ("ab", "c") and ("a", "bc") differ.
    fn field(&mut self, b: &[u8]) {
        for &x in (b.len() as u64).to_le_bytes().iter().chain(b) {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A cell directory's name inside the output directory.
fn cell_dir_name(label: &str) -> String {
    label.replace([' ', '='], "_")
}

/// Runs one cell into `out/<cell dir>`.
fn run_cell(p: &Plan, c: &CellSpec, out: &Path) -> Result<CellOut> {
    let exp = &p.exp;
    let dir = out.join(cell_dir_name(&c.label));
    std::fs::create_dir_all(&dir)?;
    let patched = patch_topology(&p.topo_text, &c.params, exp)
        .map_err(|e| anyhow!("{}: {e}", p.topo_path.display()))?;
    let tpath = dir.join("topology.toml");
    std::fs::write(&tpath, patched)?;
    let topo = Topology::load(&tpath)?;
    let sched = match cell_load(&c.params)? {
        // Matrix key `load`: this cell's offered load instead of the file's.
        Some(l) => {
            let mut e = exp.clone();
            e.workload.load = Some(l);
            schedule(&e, &p.paths, &p.base, &topo, c.seed, &p.fname)?
        }
        None => schedule(exp, &p.paths, &p.base, &topo, c.seed, &p.fname)?,
    };
    std::fs::write(dir.join("schedule.csv"), workload::to_csv(&sched))?;
    let cc = cell_cc(exp, &c.params)?;
    let (res, flows, series) = match exp.mode {
        Mode::Virtual => run_virtual(exp, &p.paths, &topo, &sched, cc, &p.fname)?,
        Mode::Real => run_real(
            exp,
            cc,
            cell_queues(&c.params)?,
            &p.paths,
            &tpath,
            &topo,
            &sched,
            &dir,
            &p.fname,
            c.index + 1,
        )?,
    };
    std::fs::write(
        dir.join("flows.csv"),
        dataplane::host::report::flows_csv(&flows),
    )?;
    std::fs::write(dir.join("timeline.csv"), series.csv())?;
    let mut r = res;
    r.timeline = series.timeline();
    r.cell = c.label.clone();
    r.params = c.params.clone();
    r.seed = c.seed;
    r.dir = dir.display().to_string();
    Ok((r, flows, series))
}

/// The flows and switch series of a sharded cell, exactly, for `xoff experiment merge`'s
/// plots (flows.csv and timeline.csv round their numbers).
const CELL_DATA: &str = "cell.json";

#[derive(Serialize, Deserialize)]
struct CellData {
    flows: Vec<FlowResult>,
    series: Series,
}

pub fn run_file_with(
    file: &Path,
    out: Option<PathBuf>,
    opts: &RunOpts,
) -> Result<(ExperimentResult, PathBuf)> {
    let p = plan(file, opts.duration, opts.seeds)?;
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
        Some(s) => {
            for (r, flows, series) in &ran {
                let data = CellData {
                    flows: flows.clone(),
                    series: series.clone(),
                };
                std::fs::write(
                    Path::new(&r.dir).join(CELL_DATA),
                    serde_json::to_vec(&data)?,
                )?;
            }
            Some(ShardInfo {
                index: s.index,
                count: s.count,
                cells: mine.iter().map(|c| c.index).collect(),
                labels: p.cells.iter().map(|c| c.label.clone()).collect(),
                digest: p.digest.clone(),
                xoff_version: env!("CARGO_PKG_VERSION").to_string(),
            })
        }
    };
    let res = finish(&out, &p.exp.name, p.exp.mode, ran, shard)?;
    Ok((res, out))
}

/// Plots and results.json of a set of finished cells (in table order).
fn finish(
    out: &Path,
    name: &str,
    mode: Mode,
    ran: Vec<CellOut>,
    shard: Option<ShardInfo>,
) -> Result<ExperimentResult> {
    let mut results = Vec::new();
    let mut all_flows = Vec::new();
    let mut all_series = Vec::new();
    for (r, flows, series) in ran {
        all_flows.push((r.cell.clone(), flows));
        all_series.push((r.cell.clone(), series));
        results.push(r);
    }
    let mut notes = Vec::new();
    let mut plots = match plot_all(out, &all_flows, &all_series) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("plots failed: {e:#}"));
            Vec::new()
        }
    };
    let trees = results
        .iter()
        .map(|r| (r.cell.as_str(), Path::new(&r.dir), r.pauses.as_slice()));
    match crate::congestion::draw_cells(trees) {
        Ok(f) => plots.extend(f),
        Err(e) => notes.push(format!("congestion trees failed: {e:#}")),
    }
    let res = ExperimentResult {
        name: name.to_string(),
        mode: format!("{mode:?}").to_lowercase(),
        cells: results,
        plots,
        notes,
        shard,
    };
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&res)?,
    )?;
    Ok(res)
}

/// `xoff experiment merge DIR... --out OUT`: the shards' cells in table order, each cell
/// directory copied into `OUT`, then the table, plots and results.json of the whole
/// experiment, as one unsharded run would have written them. Refuses shards of different
/// experiments (name, files' digest, xoff version, cell list, shard count), a cell run by two
/// shards, and missing cells.
pub fn merge_dirs(dirs: &[PathBuf], out: &Path) -> Result<ExperimentResult> {
    if dirs.is_empty() {
        bail!("merge: give the shards' output directories");
    }
    let mut shards = Vec::new();
    for d in dirs {
        let p = d.join("results.json");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let r: ExperimentResult =
            serde_json::from_str(&text).with_context(|| format!("{}", p.display()))?;
        if r.shard.is_none() {
            bail!(
                "{}: not a shard (run with `--shard I/N`); nothing to merge",
                p.display()
            );
        }
        shards.push((d, r));
    }
    let (d0, r0) = &shards[0];
    let s0 = r0.shard.clone().expect("checked above");
    for (d, r) in &shards[1..] {
        let s = r.shard.as_ref().expect("checked above");
        let differ = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            anyhow!(
                "merge: {} and {} are shards of different experiments ({what}: {a:?} vs {b:?})",
                d0.display(),
                d.display()
            )
        };
        if r.name != r0.name {
            return Err(differ("name", &r0.name, &r.name));
        }
        if r.mode != r0.mode {
            return Err(differ("mode", &r0.mode, &r.mode));
        }
        if s.digest != s0.digest {
            return Err(differ(
                "digest of the experiment, topology and workload files",
                &s0.digest,
                &s.digest,
            ));
        }
        if s.xoff_version != s0.xoff_version {
            return Err(differ("xoff version", &s0.xoff_version, &s.xoff_version));
        }
        if s.labels != s0.labels {
            return Err(differ("cells", &s0.labels, &s.labels));
        }
        if s.count != s0.count {
            return Err(differ("shard count", &s0.count, &s.count));
        }
    }
    // Every cell exactly once.
    let n = s0.labels.len();
    let mut by_cell: Vec<Option<(usize, usize)>> = vec![None; n];
    for (si, (d, r)) in shards.iter().enumerate() {
        let s = r.shard.as_ref().expect("checked above");
        if s.cells.len() != r.cells.len() {
            bail!(
                "{}: results.json lists {} cells but {} results",
                d.display(),
                s.cells.len(),
                r.cells.len()
            );
        }
        for (ci, &g) in s.cells.iter().enumerate() {
            let Some(slot) = by_cell.get_mut(g) else {
                bail!("{}: cell index {g} out of range (0..{n})", d.display());
            };
            if let Some((other, _)) = *slot {
                bail!(
                    "merge: cell `{}` is in two shards: {} and {}",
                    s0.labels[g],
                    shards[other].0.display(),
                    d.display()
                );
            }
            if r.cells[ci].cell != s0.labels[g] {
                bail!(
                    "{}: cell {g} is `{}`, expected `{}`",
                    d.display(),
                    r.cells[ci].cell,
                    s0.labels[g]
                );
            }
            *slot = Some((si, ci));
        }
    }
    let missing: Vec<&str> = by_cell
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(g, _)| s0.labels[g].as_str())
        .collect();
    if !missing.is_empty() {
        let have: std::collections::BTreeSet<usize> = shards
            .iter()
            .filter_map(|(_, r)| r.shard.as_ref().map(|s| s.index))
            .collect();
        let absent: Vec<String> = (0..s0.count)
            .filter(|i| !have.contains(i))
            .map(|i| format!("{i}/{}", s0.count))
            .collect();
        bail!(
            "merge: {} of {n} cells missing ({}); shards not given: {}",
            missing.len(),
            missing.join(", "),
            if absent.is_empty() {
                "none".to_string()
            } else {
                absent.join(", ")
            }
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out_c = std::fs::canonicalize(out)?;
    for (d, _) in &shards {
        if std::fs::canonicalize(d)? == out_c {
            bail!("merge: --out {} is one of the shards", out.display());
        }
    }
    let mut ran = Vec::new();
    for (si, ci) in by_cell.into_iter().flatten() {
        let mut r = shards[si].1.cells[ci].clone();
        let src = shards[si].0.join(cell_dir_name(&r.cell));
        let dst = out.join(cell_dir_name(&r.cell));
        copy_cell(&src, &dst)?;
        let p = src.join(CELL_DATA);
        let data: CellData = serde_json::from_slice(
            &std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("{}", p.display()))?;
        r.dir = dst.display().to_string();
        ran.push((r, data.flows, data.series));
    }
    let mode = match r0.mode.as_str() {
        "virtual" => Mode::Virtual,
        _ => Mode::Real,
    };
    finish(out, &r0.name, mode, ran, None)
}

/// Copies a cell directory's files (not the shard-only `cell.json`) into `dst`.
fn copy_cell(src: &Path, dst: &Path) -> Result<()> {
    std::fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    for e in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_cell(&e.path(), &to)?;
        } else if e.file_name() != CELL_DATA {
            std::fs::copy(e.path(), &to)
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

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

fn cells_of(m: &BTreeMap<String, Vec<String>>) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![BTreeMap::new()];
    for (k, vs) in m {
        let mut next = Vec::new();
        for c in &out {
            for v in vs {
                let mut c2 = c.clone();
                c2.insert(k.clone(), v.clone());
                next.push(c2);
            }
        }
        out = next;
    }
    out
}

/// Whether the cell with settings `p` matches an entry of the file's `exclude` (not run).
fn excluded(exp: &ExpFile, p: &BTreeMap<String, String>) -> bool {
    exp.exclude
        .iter()
        .any(|e| e.iter().all(|(k, v)| p.get(k) == Some(v)))
}

/// A cell's congestion control: matrix `cc`, else `host.cc`, else `window`.
fn cell_cc(exp: &ExpFile, p: &BTreeMap<String, String>) -> Result<CcKind> {
    match p.get("cc").or(exp.host.cc.as_ref()) {
        Some(c) => c.parse().map_err(|e| anyhow!("cc: {e}")),
        None => Ok(CcKind::default()),
    }
}

fn cell_label(p: &BTreeMap<String, String>, seed: u64, seeds: usize) -> String {
    let mut s: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if seeds > 1 {
        s.push(format!("seed={seed}"));
    }
    if s.is_empty() {
        "base".into()
    } else {
        s.join(" ")
    }
}

/// The cell's `queues` (per port, as the topology allows: 1..=127 data queues).
fn cell_queues(p: &BTreeMap<String, String>) -> Result<Option<usize>> {
    match p.get("queues") {
        Some(q) => match q.parse::<usize>() {
            Ok(n) if (1..=127).contains(&n) => Ok(Some(n)),
            _ => bail!("matrix.queues: `{q}`: a number of queues per port, 1 to 127"),
        },
        None => Ok(None),
    }
}

/// The cell's `load` (a load workload's offered load per host, fraction of the NIC rate).
fn cell_load(p: &BTreeMap<String, String>) -> Result<Option<f64>> {
    match p.get("load") {
        Some(l) => match l.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.5 => Ok(Some(x)),
            _ => bail!("matrix.load: `{l}`: an offered load in (0, 1.5]"),
        },
        None => Ok(None),
    }
}

/// Applies a cell's settings to every switch of the topology text. BFC cells in virtual time
/// also make the host NICs speak BFC unless `[sim]` already chooses how hosts take part.
fn patch_topology(text: &str, p: &BTreeMap<String, String>, exp: &ExpFile) -> Result<String> {
    let prio = exp.workload.prio.unwrap_or(3);
    let mut v: toml::Value = toml::from_str(text)?;
    let scheme = p.get("scheme").map(String::as_str);
    let bfc = match scheme {
        None | Some("none" | "pfc") => false,
        Some("bfc" | "bfc-stochastic" | "bfc-single") => true,
        Some("aquarius") => true,
        Some(o) => bail!(
            "matrix.scheme: `{o}`: use none, pfc, bfc, bfc-stochastic, bfc-single or aquarius"
        ),
    };
    let queues = cell_queues(p)?.map(|n| n as i64);
    if let Some(h) = p.get("headroom") {
        if !["sih", "dsh"].contains(&h.as_str()) {
            bail!("matrix.headroom: `{h}`: use sih or dsh");
        }
    }
    // Issue 18: the switches' path policy.
    if let Some(lb) = p.get("lb") {
        if !["ecmp", "drill", "conga", "proteus"].contains(&lb.as_str()) {
            bail!("matrix.lb: `{lb}`: use ecmp, drill, conga or proteus");
        }
    }
    let cc = cell_cc(exp, p)?;
    let dctcp = cc == CcKind::Dctcp;
    let switches = v
        .get_mut("switch")
        .and_then(|s| s.as_array_mut())
        .ok_or_else(|| anyhow!("no [[switch]]"))?;
    for sw in switches.iter_mut() {
        let Some(t) = sw.as_table_mut() else { continue };
        match scheme {
            None => {}
            Some("none") => {
                t.remove("pfc");
                t.remove("watchdog");
                t.remove("scheme");
            }
            Some("pfc") => {
                t.remove("scheme");
                if !t.contains_key("pfc") {
                    let mut pfc = toml::Table::new();
                    pfc.insert("enable_mask".into(), toml::Value::Integer(1 << prio));
                    t.insert("pfc".into(), toml::Value::Table(pfc));
                }
            }
            Some(s) => {
                // BFC alone: PFC's class-wide pauses would stop every dynamically assigned
                // queue of the class.
                t.remove("pfc");
                t.remove("watchdog");
                t.insert("scheme".into(), toml::Value::String(s.into()));
            }
        }
        if let Some(h) = p.get("headroom") {
            if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
                b.insert("headroom_mode".into(), toml::Value::String(h.clone()));
            }
        }
        if let Some(lb) = p.get("lb") {
            t.insert("lb".into(), toml::Value::String(lb.clone()));
        }
        if let Some(n) = queues {
            let d = t
                .entry("defaults")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(d) = d.as_table_mut() {
                d.insert("queues".into(), toml::Value::Integer(n));
            }
        }
        if cc.uses_int() {
            // HPCC's senders read the INT records every switch appends.
            t.insert("int".into(), toml::Value::Boolean(true));
        }
        if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
            if dctcp && !b.contains_key("ecn") {
                // DCTCP §3.1: mark above one threshold K (HPCC's run.py: 30 KB per 10 Gbit/s).
                let mut e = toml::Table::new();
                e.insert("k_min_bytes".into(), toml::Value::Integer(30_000));
                e.insert("k_max_bytes".into(), toml::Value::Integer(30_000));
                e.insert("p_max".into(), toml::Value::Float(1.0));
                e.insert("ref_rate_bps".into(), toml::Value::Integer(10_000_000_000));
                b.insert("ecn".into(), toml::Value::Table(e));
            }
        }
    }
    if exp.mode == Mode::Virtual && scheme.is_some() {
        let root = v
            .as_table_mut()
            .ok_or_else(|| anyhow!("not a TOML table"))?;
        let sim = root
            .entry("sim")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let sim = sim
            .as_table_mut()
            .ok_or_else(|| anyhow!("sim: not a table"))?;
        if bfc {
            // BFC hosts: the host stack's BFC mode (`dataplane::host::fabric::install` turns
            // it on for NICs that honour BFC, with their queue count).
            if !sim.contains_key("honor_bfc") && !sim.contains_key("inflight_cap") {
                sim.insert("honor_bfc".into(), toml::Value::Boolean(true));
            }
            if let Some(n) = queues {
                // The NIC has as many queues as the switch ports (BFC-8: 8 everywhere).
                sim.insert("nic_bfc_queues".into(), toml::Value::Integer(n));
            } else if !sim.contains_key("nic_bfc_queues") {
                let q = exp.host.bfc_queues.unwrap_or(BFC_QUEUES);
                sim.insert("nic_bfc_queues".into(), toml::Value::Integer(q as i64));
            }
        } else {
            // A NIC pushing the BFC data shim toward a switch without BFC would confuse it.
            sim.insert("honor_bfc".into(), toml::Value::Boolean(false));
            if let Some(nics) = sim.get_mut("nic").and_then(|n| n.as_table_mut()) {
                for (_, n) in nics.iter_mut() {
                    if let Some(n) = n.as_table_mut() {
                        n.remove("honor_bfc");
                    }
                }
            }
        }
    }
    Ok(toml::to_string(&v)?)
}

fn host_index(topo: &Topology, name: &str, key: &str, f: &str) -> Result<u32> {
    topo.hosts
        .iter()
        .position(|h| h.name == name)
        .map(|i| i as u32)
        .ok_or_else(|| anyhow!("{f}: {key}: no host named `{name}` in the topology"))
}

fn time(s: &Option<String>, key: &str, f: &str, default: u64) -> Result<u64> {
    match s {
        Some(s) => parse_time(s).map_err(|e| anyhow!("{f}: {key}: {e}")),
        None => Ok(default),
    }
}

fn schedule(
    exp: &ExpFile,
    paths: &Paths,
    base: &Path,
    topo: &Topology,
    seed: u64,
    f: &str,
) -> Result<Vec<FlowSpec>> {
    let w = &exp.workload;
    let duration = parse_time(&exp.duration).map_err(|e| anyhow!("{f}: duration: {e}"))?;
    let names = |v: &Option<Vec<String>>, key: &str| -> Result<Option<Vec<u32>>> {
        v.as_ref()
            .map(|l| l.iter().map(|n| host_index(topo, n, key, f)).collect())
            .transpose()
    };
    match w.kind.as_str() {
        "incast" => {
            let rx = w
                .receiver
                .as_deref()
                .ok_or_else(|| anyhow!("{f}: workload.receiver: an incast needs a receiver"))?;
            let receiver = host_index(topo, rx, "workload.receiver", f)?;
            let senders = names(&w.senders, "workload.senders")?.unwrap_or_else(|| {
                (0..topo.hosts.len() as u32)
                    .filter(|&i| i != receiver)
                    .collect()
            });
            let size = parse_size(w.size.as_deref().unwrap_or("100KB"))
                .map_err(|e| anyhow!("{f}: workload.size: {e}"))?;
            Ok(IncastSpec {
                senders,
                receiver,
                size,
                period_ps: time(&w.period, "workload.period", f, 0)?,
                rounds: w.rounds.unwrap_or(1),
                start_ps: 0,
                jitter_ps: time(&w.jitter, "workload.jitter", f, 0)?,
                prio: w.prio.unwrap_or(3) & 7,
            }
            .generate(seed, 0))
        }
        "load" => {
            let cdf_path = base.join(
                w.cdf
                    .as_deref()
                    .ok_or_else(|| anyhow!("{f}: workload.cdf: a load workload needs a CDF"))?,
            );
            let cdf = Cdf::load(&cdf_path)?;
            let load = w.load.unwrap_or(0.5);
            if !(load > 0.0 && load <= 1.5) {
                bail!("{f}: workload.load: {load}: must be in (0, 1.5]");
            }
            let arrival = match w.arrival.as_deref().unwrap_or("poisson") {
                "poisson" => Arrival::Poisson,
                "lognormal" => Arrival::Lognormal {
                    sigma: w.sigma.unwrap_or(2.0),
                },
                o => bail!("{f}: workload.arrival: `{o}`: use poisson or lognormal"),
            };
            let senders = names(&w.senders, "workload.senders")?
                .unwrap_or_else(|| (0..topo.hosts.len() as u32).collect());
            let rate = match &exp.host.rate {
                Some(r) => parse_rate(r).map_err(|e| anyhow!("{f}: host.rate: {e}"))?,
                None => paths.nic_rate,
            };
            let flows = LoadSpec {
                cdf,
                load,
                rate_bps: rate.max(1),
                arrival,
                hosts: topo.hosts.len() as u32,
                senders,
                dests: match names(&w.dests, "workload.dests")? {
                    Some(l) => Dests::List(l),
                    None => Dests::Uniform,
                },
                prios: w.prios.clone().unwrap_or_else(|| vec![w.prio.unwrap_or(3)]),
                duration_ps: duration,
                start_ps: 0,
            }
            .generate(seed, 0);
            let Some(ic) = &w.incast else {
                return Ok(flows);
            };
            let size = |s: &str, k: &str| {
                parse_size(s).map_err(|e| anyhow!("{f}: workload.incast.{k}: {e}"))
            };
            let (lo, hi) = (
                size(&ic.size_min, "size_min")?,
                size(&ic.size_max, "size_max")?,
            );
            if lo == 0 || lo > hi {
                bail!("{f}: workload.incast: size_min must be positive and at most size_max");
            }
            if !(ic.load > 0.0 && ic.load <= 1.0) || ic.fan_in == 0 {
                bail!("{f}: workload.incast: load in (0, 1] and fan_in ≥ 1");
            }
            if ic.fan_in as usize >= topo.hosts.len() {
                bail!(
                    "{f}: workload.incast.fan_in: {} senders need more hosts",
                    ic.fan_in
                );
            }
            let incast = workload::IncastMix {
                hosts: topo.hosts.len() as u32,
                fan_in: ic.fan_in,
                size_min: lo,
                size_max: hi,
                load: ic.load,
                rate_bps: rate.max(1),
                prio: w.prio.unwrap_or(3) & 7,
                duration_ps: duration,
                start_ps: 0,
            }
            .generate(seed, 0);
            Ok(workload::combine(flows, incast, 0))
        }
        o => bail!("{f}: workload.kind: `{o}`: use incast or load"),
    }
}

/// Line rate and base RTTs of an experiment's topology (the same in every cell).
struct Paths {
    /// Line rate for ideal FCTs (the slowest host NIC, or `host.rate`).
    rate: u64,
    /// Base RTT for default windows (and every ideal FCT with `host.base_rtt`): the longest
    /// host-to-host path's, so a window of one BDP fills every path.
    rtt: u64,
    /// Per source and destination host (see [`HostGraph::rtts`]).
    rtts: Vec<Vec<Option<u64>>>,
    /// The first host's NIC rate (load workloads: the rate `load` is a fraction of).
    nic_rate: u64,
}

fn path_params(exp: &ExpFile, topo: &Topology, f: &str) -> Result<Paths> {
    let g = HostGraph::new(&topo.resolve()?);
    let rate = match &exp.host.rate {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("{f}: host.rate: {e}"))?,
        None => g
            .access
            .iter()
            .flatten()
            .map(|&(r, _)| r)
            .min()
            .unwrap_or(1),
    };
    let mss = StackConfig::new(0, rate, 0).mss;
    let (derived, rtts) = g.base_rtt(mss, rate);
    let rtt = match &exp.host.base_rtt {
        Some(s) => parse_time(s).map_err(|e| anyhow!("{f}: host.base_rtt: {e}"))?,
        None => derived,
    };
    Ok(Paths {
        rate,
        rtt,
        rtts,
        nic_rate: g.access.iter().flatten().next().map_or(0, |&(r, _)| r),
    })
}

/// Without `host.base_rtt`, each flow's ideal FCT (and slowdown) uses the base RTT of its own
/// path rather than the longest one.
fn per_path_ideal(exp: &ExpFile, paths: &Paths, flows: &mut [FlowResult], mss: u32) {
    if exp.host.base_rtt.is_some() {
        return;
    }
    let rate = paths.rate;
    for f in flows {
        let Some(&Some(r)) = paths
            .rtts
            .get(f.src as usize)
            .and_then(|row| row.get(f.dst as usize))
        else {
            continue;
        };
        f.ideal_ps = ideal_fct_ps(f.size, mss, rate, r);
        f.slowdown = f.fct_ps.map(|x| x as f64 / f.ideal_ps.max(1) as f64);
    }
}

fn stack_cfg(
    exp: &ExpFile,
    host: u32,
    rate: u64,
    rtt: u64,
    cc: CcKind,
    f: &str,
) -> Result<StackConfig> {
    let mut c = StackConfig::new(host, rate, rtt);
    c.cc = cc;
    if let Some(w) = &exp.host.window {
        c.window_bytes = parse_size(w)
            .map_err(|e| anyhow!("{f}: host.window: {e}"))?
            .max(1);
    }
    if let Some(r) = &exp.host.rto {
        c.rto_ps = parse_time(r).map_err(|e| anyhow!("{f}: host.rto: {e}"))?;
    }
    Ok(c)
}

type CellOut = (CellResult, Vec<FlowResult>, Series);

fn empty_result() -> CellResult {
    CellResult {
        cell: String::new(),
        params: BTreeMap::new(),
        seed: 0,
        summary: Summary::default(),
        receiver_lost: 0,
        xdp_lost: 0,
        switch_drops: BTreeMap::new(),
        drops_by_port: BTreeMap::new(),
        pfc_pause_frames: 0,
        bfc_pauses: 0,
        bfc_resumes: 0,
        bfc_collisions: 0,
        max_queue_bytes: 0,
        host_pfc_rx: 0,
        host_bfc_pauses_rx: 0,
        hosts_incomplete: Vec::new(),
        pauses: Vec::new(),
        audit: CellAudit::default(),
        aquarius: AquariusTotals::default(),
        proteus: Default::default(),
        dir: String::new(),
        timeline: Timeline::default(),
    }
}

/// Flow-control counters of one switch port.
#[derive(Debug, Clone, Copy, Default)]
struct FcPort {
    pfc_xoff: u64,
    bfc_pauses: u64,
    bfc_resumes: u64,
    bfc_collisions: u64,
}

impl FcPort {
    /// Pause signals sent: PFC XOFF frames and BFC pauses.
    fn pauses(&self) -> u64 {
        self.pfc_xoff + self.bfc_pauses
    }
}

/// The flow-control counters of `port` in a snapshot's scheme statistics.
fn fc_port(s: &dataplane::stats::SwitchSnapshot, port: usize) -> FcPort {
    use dataplane::scheme::pfc::PfcCount;
    let Some(st) = s.pfc.as_ref() else {
        return FcPort::default();
    };
    // BFC state is shared by a switch's pipes: every pipe reports the same counters.
    let bfc = st.bfc_port(port);
    FcPort {
        pfc_xoff: st.pfc_total(port, PfcCount::XoffSent),
        bfc_pauses: bfc.map_or(0, |b| b.pauses()),
        bfc_resumes: bfc.map_or(0, |b| b.resumes()),
        bfc_collisions: bfc.map_or(0, |b| b.collisions),
    }
}

fn switch_totals(r: &mut CellResult, snaps: &[dataplane::stats::SwitchSnapshot], xdp: bool) {
    r.pauses = crate::congestion::port_pauses(snaps);
    for s in snaps {
        let pipes = s.pfc.as_ref().map_or(&[][..], |st| st.pipes());
        for a in pipes.iter().filter_map(|st| st.aquarius.as_ref()) {
            let t = &mut r.aquarius;
            for p in &a.ports {
                t.pauses_qhigh += p.pauses_sent_qhigh;
                t.pauses_contribution += p.pauses_sent_contribution;
                t.resumes += p.resumes_sent;
                t.queue_pauses += p.queue_pauses;
                t.flows_reassigned += p.flows_reassigned;
                t.no_rsv += p.no_rsv;
                t.rsv_allocations += p.rsv_allocations;
                t.table_collisions += p.table_collisions;
                t.active_flows_max = t.active_flows_max.max(p.active_flows_max);
            }
            // The hosts' pauses are Aquarius's when a switch runs it (both runners sum the
            // host counters before calling this).
            t.host_pauses_rx = r.host_bfc_pauses_rx;
        }
        for p in pipes.iter().filter_map(|st| st.proteus.as_ref()) {
            let t = &mut r.proteus;
            t.routed += p.routed;
            t.source_reroutes += p.source_reroutes;
            t.hop_reroutes += p.hop_reroutes;
            t.metered += p.metered;
            t.feedback_sent += p.feedback_sent;
            t.feedback_applied += p.feedback_applied;
        }
        for (i, p) in s.ports.iter().enumerate() {
            for (k, v) in &p.drops {
                *r.switch_drops.entry(k.clone()).or_default() += v;
            }
            let n: u64 = p.drops.values().sum();
            if n > 0 {
                *r.drops_by_port
                    .entry(format!("{}:{}", s.switch, p.name))
                    .or_default() += n;
            }
            if xdp {
                r.xdp_lost += p.xdp.lost();
            }
            let fc = fc_port(s, i);
            r.pfc_pause_frames += fc.pfc_xoff;
            r.bfc_pauses += fc.bfc_pauses;
            r.bfc_resumes += fc.bfc_resumes;
            r.bfc_collisions += fc.bfc_collisions;
            for q in &p.queues {
                r.max_queue_bytes = r.max_queue_bytes.max(q.watermark_bytes);
            }
        }
    }
}

fn run_virtual(
    exp: &ExpFile,
    paths: &Paths,
    topo: &Topology,
    sched: &[FlowSpec],
    cc: CcKind,
    f: &str,
) -> Result<CellOut> {
    let (rate, rtt) = (paths.rate, paths.rtt);
    let duration = parse_time(&exp.duration).map_err(|e| anyhow!("{f}: duration: {e}"))?;
    let drain = time(&exp.drain, "drain", f, 10_000_000_000)?;
    let interval = time(&exp.sample.interval, "sample.interval", f, 10_000_000)?.max(1);
    let mut fab = Fabric::new(topo, &FabricOptions::default())?;
    let mut cfg_err = None;
    let stacks = dataplane::host::fabric::install(&mut fab, sched, |i| {
        let r = if exp.host.rate.is_some() {
            rate
        } else {
            i.nic_rate_bps
        };
        stack_cfg(exp, i.index as u32, r, rtt, cc, f).unwrap_or_else(|e| {
            cfg_err = Some(e);
            StackConfig::new(0, r, rtt)
        })
    });
    if let Some(e) = cfg_err {
        return Err(e);
    }
    // Telemetry of every switch port in virtual time: bytes queued (all queues, fullest
    // queue) and pause signals sent (PFC XOFF frames, BFC pauses).
    struct Cols {
        key: String,
        depth: usize,
        maxq: usize,
        pauses: Vec<usize>,
    }
    let mut targets = Vec::new();
    let mut cols = Vec::new();
    let base = fab.probes().names.len();
    for (si, n) in fab.nodes().iter().enumerate() {
        let sh = n.shared();
        for (pi, p) in sh.spec.ports.iter().enumerate() {
            let key = format!("{}:{}", n.name, p.name);
            let mut add = |what: &str, t: ProbeTarget| {
                targets.push((format!("{key}:{what}"), t));
                base + targets.len() - 1
            };
            let port = |counter| ProbeTarget::Port {
                shared: sh.clone(),
                port: pi,
                counter,
            };
            let fc = |counter| ProbeTarget::Fc {
                switch: si,
                port: pi,
                counter,
            };
            let depth = add("depth_bytes", port(PortCounter::DepthBytes));
            let maxq = add("max_queue_bytes", port(PortCounter::MaxQueueBytes));
            let mut pauses = Vec::new();
            if sh.spec.pfc.is_some() {
                pauses.push(add("pfc_xoff_sent", fc(FcCounter::PfcXoffSent)));
            }
            if sh.schemes.bfc.is_some() {
                pauses.push(add("bfc_pauses_sent", fc(FcCounter::BfcPausesSent)));
            }
            cols.push(Cols {
                key,
                depth,
                maxq,
                pauses,
            });
        }
    }
    fab.set_probe_interval(interval);
    for (name, t) in targets {
        fab.add_probe(name, t);
    }
    fab.run_until(duration + drain);
    let mut r = empty_result();
    let mut tx: Vec<TxRecord> = Vec::new();
    let mut rx: Vec<RxRecord> = Vec::new();
    for s in &stacks {
        let s = s.borrow();
        tx.extend(s.tx_records());
        rx.extend(s.rx_records());
        r.host_pfc_rx += s.counters.pfc_rx;
        r.host_bfc_pauses_rx += s.counters.pauses_rx;
        r.aquarius.host_unknown += s.counters.flow_signals_unknown;
    }
    let mss = StackConfig::new(0, rate, 0).mss;
    let mut flows = merge(&tx, &rx, mss, rate, rtt);
    per_path_ideal(exp, paths, &mut flows, mss);
    // Goodput over the virtual time the run took (it stops once every flow is done).
    r.summary = summarize(&flows, fab.now().clamp(1, duration + drain));
    r.receiver_lost = r.summary.lost;
    // Final counters, with each switch's flow-control statistics (PFC, BFC).
    let report = fab.report();
    switch_totals(&mut r, &report.switches, false);
    for (n, snap) in fab.nodes().iter().zip(&report.switches) {
        r.audit.add(&n.shared().audit(snap), &n.shared().spec);
    }
    let pr = fab.probes();
    let w = pr.names.len();
    let mut series = Series {
        interval_ps: interval,
        t_ps: pr.times.clone(),
        ports: BTreeMap::new(),
    };
    for c in &cols {
        let col = |i: usize| -> Vec<u64> {
            (0..pr.times.len())
                .map(|row| pr.values[row * w + i])
                .collect()
        };
        let mut pauses = vec![0; pr.times.len()];
        for &i in &c.pauses {
            for (p, v) in pauses.iter_mut().zip(col(i)) {
                *p += v;
            }
        }
        series.ports.insert(
            c.key.clone(),
            PortTimeline {
                depth_bytes: col(c.depth),
                max_queue_bytes: col(c.maxq),
                pauses,
            },
        );
    }
    Ok((r, flows, series))
}

#[allow(clippy::too_many_arguments)]
fn run_real(
    exp: &ExpFile,
    cc: CcKind,
    queues: Option<usize>,
    paths: &Paths,
    tpath: &Path,
    topo: &Topology,
    sched: &[FlowSpec],
    dir: &Path,
    f: &str,
    k: usize,
) -> Result<CellOut> {
    use deploy::testbed::{socket_path, Testbed};
    let (rate, rtt) = (paths.rate, paths.rtt);
    let duration = parse_time(&exp.duration).map_err(|e| anyhow!("{f}: duration: {e}"))?;
    let drain = time(&exp.drain, "drain", f, 1_000_000_000_000)?;
    let interval = time(&exp.sample.interval, "sample.interval", f, 20_000_000_000)?;
    let name = format!("xe{}{}", std::process::id() % 10_000, k);
    let tb = Testbed::load(tpath, Some(&name))?;
    tb.up(&[])?;
    let guard = Down(&tb);
    let xoff = std::env::current_exe()?;
    let mut involved: Vec<u32> = sched.iter().flat_map(|f| [f.src, f.dst]).collect();
    involved.sort_unstable();
    involved.dedup();
    let start_at = crate::host::unix_ns() + 1_500_000_000;
    let run_ps = duration + drain;
    let mut children: Vec<(String, Child)> = Vec::new();
    for &h in &involved {
        let hn = &topo.hosts[h as usize].name;
        let log = std::fs::File::create(dir.join(format!("{hn}.log")))?;
        let mut c = tb.command(hn, &xoff.display().to_string());
        c.args(["host", "--topology"])
            .arg(tpath)
            .args(["--host", hn, "--schedule"])
            .arg(dir.join("schedule.csv"))
            .arg("--out")
            .arg(dir)
            .args(["--start-at", &start_at.to_string()])
            .args(["--run", &format!("{}ns", run_ps / 1000)])
            .args(["--base-rtt", &format!("{}ns", rtt / 1000)])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(r) = &exp.host.rate {
            c.args(["--rate", r]);
        }
        if let Some(w) = &exp.host.window {
            c.args(["--window", w]);
        }
        if let Some(r) = &exp.host.rto {
            c.args(["--rto", r]);
        }
        if cc != CcKind::default() {
            c.args(["--cc", cc.as_str()]);
        }
        let aquarius = topo
            .switches
            .iter()
            .any(|s| s.scheme == dataplane::config::Scheme::Aquarius);
        if aquarius || topo.switches.iter().any(|s| s.scheme.is_bfc()) {
            // As many NIC queues as the cell gives the switch ports (BFC-8: 8 everywhere).
            let q = queues.or(exp.host.bfc_queues).unwrap_or(BFC_QUEUES);
            c.args(["--bfc-queues", &q.to_string()]);
        }
        if aquarius {
            c.arg("--aquarius");
        }
        children.push((hn.clone(), c.spawn().context("starting xoff host")?));
    }
    // Sample the switches until the hosts are done. Every port gets a sample each time (its
    // last known values if its switch did not answer).
    let mut series = Series {
        interval_ps: interval,
        ..Series::default()
    };
    let mut known: BTreeMap<String, (u64, u64, u64)> = topo
        .switches
        .iter()
        .flat_map(|s| {
            s.ports
                .iter()
                .map(move |p| (format!("{}:{}", s.name, p.name), (0, 0, 0)))
        })
        .collect();
    let t0 = Instant::now()
        + Duration::from_nanos(
            u64::try_from(start_at.saturating_sub(crate::host::unix_ns())).unwrap_or(0),
        );
    let deadline = t0 + Duration::from_nanos(run_ps / 1000) + Duration::from_secs(10);
    let mut last = Vec::new();
    loop {
        let t = Instant::now()
            .checked_duration_since(t0)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut snaps = Vec::new();
        for s in &topo.switches {
            if let Ok(Response::Stats(st)) =
                ctl::request(&socket_path(&name, &s.name), &Request::Stats)
            {
                snaps.push(*st);
            }
        }
        if Instant::now() >= t0 {
            for s in &snaps {
                for (i, p) in s.ports.iter().enumerate() {
                    let d: u64 = p.queues.iter().map(|q| q.depth_bytes).sum();
                    let m = p.queues.iter().map(|q| q.depth_bytes).max().unwrap_or(0);
                    if let Some(e) = known.get_mut(&format!("{}:{}", s.switch, p.name)) {
                        *e = (d, m, fc_port(s, i).pauses());
                    }
                }
            }
            series.t_ps.push((t * 1e12) as u64);
            for (k, &(d, m, n)) in &known {
                series.push(k, d, m, n);
            }
        }
        if !snaps.is_empty() {
            last = snaps;
        }
        let mut running = false;
        for (_, c) in children.iter_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                running = true;
            }
        }
        if !running {
            break;
        }
        if Instant::now() > deadline {
            for (_, c) in children.iter_mut() {
                let _ = c.kill();
            }
            break;
        }
        std::thread::sleep(Duration::from_nanos(interval / 1000));
    }
    for (_, c) in children.iter_mut() {
        let _ = c.wait();
    }
    // Final counters after the hosts stopped.
    let mut finals = Vec::new();
    for s in &topo.switches {
        if let Ok(Response::Stats(st)) = ctl::request(&socket_path(&name, &s.name), &Request::Stats)
        {
            finals.push(*st);
        }
    }
    if finals.is_empty() {
        finals = last;
    }
    let mut audit = CellAudit::default();
    for s in &topo.switches {
        let spec = topo.switch_spec(&s.name)?;
        match ctl::request(&socket_path(&name, &s.name), &Request::Audit) {
            Ok(Response::Audit(a)) => audit.add(&a, &spec),
            _ => {
                audit.lossless_claimed |= dataplane::audit::lossless_prios(&spec) != 0;
                audit.unbalanced.push(format!("{} (no answer)", s.name));
            }
        }
    }
    drop(guard);
    let mut r = empty_result();
    let mut tx = Vec::new();
    let mut rx = Vec::new();
    for (hn, _) in &children {
        let p = dir.join(format!("{hn}.json"));
        match std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str::<crate::host::HostOutput>(&t).ok())
        {
            Some(o) => {
                tx.extend(o.tx);
                rx.extend(o.rx);
                r.host_pfc_rx += o.counters.pfc_rx;
                r.host_bfc_pauses_rx += o.counters.pauses_rx;
                r.aquarius.host_unknown += o.counters.flow_signals_unknown;
                r.xdp_lost += o.xdp.map_or(0, |x| x.lost());
            }
            None => r.hosts_incomplete.push(hn.clone()),
        }
    }
    let mss = StackConfig::new(0, rate, 0).mss;
    // Flows that never started at their sender still count (as incomplete).
    let started: std::collections::BTreeSet<u32> = tx.iter().map(|t| t.id).collect();
    for s in sched.iter().filter(|s| !started.contains(&s.id)) {
        tx.push(TxRecord {
            id: s.id,
            src: s.src,
            dst: s.dst,
            size: s.size,
            prio: s.prio,
            start_ps: s.start_ps,
            ..TxRecord::default()
        });
    }
    let mut flows = merge(&tx, &rx, mss, rate, rtt);
    per_path_ideal(exp, paths, &mut flows, mss);
    r.summary = summarize(&flows, run_ps);
    r.receiver_lost = r.summary.lost;
    // Host ends' ring losses (the switches' are in their audits): a host carries the cell's
    // traffic, lossless or not.
    let host_ring = r.xdp_lost;
    switch_totals(&mut r, &finals, true);
    audit.lost += host_ring;
    if audit.lossless_claimed {
        audit.lossless_lost += host_ring;
    }
    r.audit = audit;
    Ok((r, flows, series))
}

/// Brings a testbed down when dropped.
struct Down<'a>(&'a deploy::testbed::Testbed);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.down() {
            tracing::warn!("testbed down: {e}");
        }
    }
}

fn table(r: &ExperimentResult) -> String {
    use std::fmt::Write;
    let w = r
        .cells
        .iter()
        .map(|c| c.cell.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let mut s = format!("\n{} ({})\n", r.name, r.mode);
    let _ = writeln!(
        s,
        "{:<w$} {:>6} {:>6} {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8}",
        "cell",
        "flows",
        "done",
        "rx_lost",
        "xdp_lost",
        "sw_drop",
        "retx",
        "pfc_xoff",
        "bfc_pause",
        "bfc_coll",
        "maxq_KB",
        "sd_avg",
        "sd_p50",
        "sd_p99",
        "Gbit/s"
    );
    for c in &r.cells {
        let drops: u64 = c.switch_drops.values().sum();
        let _ = writeln!(
            s,
            "{:<w$} {:>6} {:>6} {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8} {:>7.0} {:>7.2} {:>7.2} {:>7.2} {:>8.2}",
            c.cell,
            c.summary.flows,
            c.summary.completed,
            c.receiver_lost,
            c.xdp_lost,
            drops,
            c.summary.retx,
            c.pfc_pause_frames,
            c.bfc_pauses,
            c.bfc_collisions,
            c.max_queue_bytes as f64 / 1e3,
            c.summary.slowdown.avg,
            c.summary.slowdown.p50,
            c.summary.slowdown.p99,
            c.summary.goodput_gbps
        );
    }
    // FCT slowdown by flow size: the size buckets any cell has flows in.
    let mut edges: Vec<(u64, u64)> = r
        .cells
        .iter()
        .flat_map(|c| c.summary.buckets.iter().map(|b| (b.lo, b.hi)))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    if edges.is_empty() {
        return s;
    }
    let size = |b: u64| match b {
        b if b >= 1_000_000 => format!("{}M", b / 1_000_000),
        b if b >= 1_000 => format!("{}K", b / 1_000),
        b => b.to_string(),
    };
    let _ = writeln!(s, "\nFCT slowdown by flow size (bytes), p50 / p99 [flows]");
    let _ = write!(s, "{:<w$}", "cell");
    for &(lo, hi) in &edges {
        let h = if hi == u64::MAX {
            format!(">{}", size(lo))
        } else {
            format!("{}-{}", size(lo), size(hi))
        };
        let _ = write!(s, " {h:>20}");
    }
    s.push('\n');
    for c in &r.cells {
        let _ = write!(s, "{:<w$}", c.cell);
        for &(lo, hi) in &edges {
            let cell = match c.summary.buckets.iter().find(|b| b.lo == lo && b.hi == hi) {
                Some(b) => format!(
                    "{:.2} / {:.2} [{}]",
                    b.slowdown.p50, b.slowdown.p99, b.slowdown.flows
                ),
                None => "-".into(),
            };
            let _ = write!(s, " {cell:>20}");
        }
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Plots

fn plot_all(
    out: &Path,
    flows: &[(String, Vec<FlowResult>)],
    series: &[(String, Series)],
) -> Result<Vec<String>> {
    let mut files = Vec::new();
    // FCT slowdown: p50 and p99 per size bucket as grouped bars, on a log axis (a lossy cell's
    // p99 is often 10x the others').
    let mut edges: Vec<(u64, u64)> = Vec::new();
    let sums: Vec<_> = flows.iter().map(|(c, fl)| (c, summarize(fl, 1))).collect();
    for (_, s) in &sums {
        for b in &s.buckets {
            if !edges.contains(&(b.lo, b.hi)) {
                edges.push((b.lo, b.hi));
            }
        }
    }
    edges.sort_unstable();
    let size = |b: u64| crate::plot::tick(b as f64, Unit::Bytes);
    let categories = edges
        .iter()
        .map(|&(lo, hi)| match (lo, hi) {
            (0, h) => format!("< {}", size(h)),
            (l, u64::MAX) => format!("≥ {}", size(l)),
            (l, h) => format!("{}–{}", size(l), size(h)),
        })
        .collect();
    let groups = sums
        .iter()
        .map(|(cell, s)| {
            let v = edges
                .iter()
                .map(|&(lo, hi)| {
                    s.buckets
                        .iter()
                        .find(|b| b.lo == lo && b.hi == hi && b.slowdown.flows > 0)
                        .map(|b| (b.slowdown.p50, b.slowdown.p99))
                })
                .collect();
            (cell.to_string(), v)
        })
        .collect();
    write_chart(
        out,
        "fct_slowdown",
        &Bars {
            title: "FCT slowdown by flow size (solid: p50, light: p99)",
            x: "flow size",
            y: "FCT slowdown (log)",
            categories,
            groups,
            ylog: true,
        },
        &mut files,
    )?;
    // FCT CDF on a log time axis: flows span microseconds to seconds.
    let mut cdf = Vec::new();
    for (cell, fl) in flows {
        let mut v: Vec<f64> = fl
            .iter()
            .filter_map(|f| f.fct_ps)
            .map(|x| x as f64 / 1e6)
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len().max(1) as f64;
        cdf.push((
            cell.clone(),
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, (i + 1) as f64 / n))
                .collect(),
        ));
    }
    write_chart(
        out,
        "fct_cdf",
        &Chart {
            title: "FCT CDF",
            x: "flow completion time (log)",
            y: "fraction of flows",
            series: cdf,
            step: false,
            xaxis: Axis::log(Unit::Micros),
            ..Default::default()
        },
        &mut files,
    )?;
    // Switch telemetry: the busiest ports of each cell, and the fullest queue of any port.
    let mut depth = Vec::new();
    let mut maxq = Vec::new();
    let mut pauses = Vec::new();
    for (cell, s) in series {
        let ms: Vec<f64> = s.t_ps.iter().map(|&t| t as f64 / 1e9).collect();
        let line = |v: &[u64], scale: f64| -> Vec<(f64, f64)> {
            ms.iter()
                .zip(v)
                .map(|(&t, &x)| (t, x as f64 / scale))
                .collect()
        };
        let busiest = s.busiest();
        for k in &busiest {
            let p = &s.ports[*k];
            if p.depth_bytes.iter().any(|&d| d > 0) {
                depth.push((format!("{cell} {k}"), line(&p.depth_bytes, 1e3)));
            }
            if p.pauses.last().is_some_and(|&n| n > 0) {
                pauses.push((format!("{cell} {k}"), line(&p.pauses, 1.0)));
            }
        }
        let t = s.timeline();
        maxq.push((cell.clone(), line(&t.max_queue_bytes, 1e3)));
    }
    write_chart(
        out,
        "queue_depth",
        &Chart {
            title: "Bytes queued per port (busiest ports)",
            x: "time (ms)",
            y: "depth (KB)",
            series: depth,
            step: true,
            ..Default::default()
        },
        &mut files,
    )?;
    write_chart(
        out,
        "queue_max",
        &Chart {
            title: "Fullest queue of any switch port",
            x: "time (ms)",
            y: "depth (KB)",
            series: maxq,
            step: true,
            ..Default::default()
        },
        &mut files,
    )?;
    write_chart(
        out,
        "pause_timeline",
        &Chart {
            title: "Pause signals sent per port, cumulative (PFC XOFF frames, BFC pauses)",
            x: "time (ms)",
            y: "pause signals",
            series: pauses,
            step: true,
            ..Default::default()
        },
        &mut files,
    )?;
    Ok(files)
}

#[cfg(test)]
mod shard_tests {
    use super::ShardSpec;

    #[test]
    fn every_cell_has_exactly_one_shard() {
        for n in 1..=7 {
            let shards: Vec<ShardSpec> = (0..n)
                .map(|i| format!("{i}/{n}").parse().expect("valid shard"))
                .collect();
            for cell in 0..50 {
                let owners = shards.iter().filter(|s| s.owns(cell)).count();
                assert_eq!(owners, 1, "cell {cell} of {n} shards");
            }
        }
        for bad in ["1/1", "0/0", "2", "a/3", "1/b", "-1/3"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod matrix_tests {
    use super::*;

    const EXP: &str = r#"
name = "t"
topology = "t.toml"
mode = "virtual"
duration = "1ms"
[workload]
kind = "load"
cdf = "x.cdf"
[matrix]
scheme = ["bfc", "aquarius"]
queues = ["32", "8"]
[[exclude]]
scheme = "aquarius"
queues = "32"
"#;

    const TOPO: &str = r#"
name = "t"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", queues = 32 }
pfc = { enable_mask = 8 }
port = [{ name = "p1" }]
"#;

    /// `queues` sets every switch's queues per port and the BFC NICs' queues; `aquarius`
    /// drops PFC and makes the hosts honour the schemes' signals; `exclude` removes cells.
    #[test]
    fn queues_aquarius_and_exclude() {
        let exp: ExpFile = toml::from_str(EXP).unwrap();
        let p = |s: &str, q: &str| {
            BTreeMap::from([
                ("scheme".to_string(), s.into()),
                ("queues".into(), q.into()),
            ])
        };
        let t: toml::Value =
            toml::from_str(&patch_topology(TOPO, &p("aquarius", "8"), &exp).unwrap()).unwrap();
        let sw = &t["switch"][0];
        assert_eq!(sw["scheme"].as_str(), Some("aquarius"));
        assert_eq!(sw["defaults"]["queues"].as_integer(), Some(8));
        assert!(sw.get("pfc").is_none());
        assert_eq!(t["sim"]["honor_bfc"].as_bool(), Some(true));
        assert_eq!(t["sim"]["nic_bfc_queues"].as_integer(), Some(8));
        assert!(patch_topology(TOPO, &p("bfc", "0"), &exp).is_err());
        assert!(patch_topology(TOPO, &p("bfc", "128"), &exp).is_err());
        assert!(patch_topology(TOPO, &p("bfc", "127"), &exp).is_ok());
        // Real frames too: `xoff host --aquarius` honours the per-flow pauses.
        let real = ExpFile {
            mode: Mode::Real,
            ..exp.clone()
        };
        assert!(patch_topology(TOPO, &p("aquarius", "8"), &real).is_ok());
        assert_eq!(cell_queues(&p("aquarius", "8")).unwrap(), Some(8));
        let cells: Vec<_> = cells_of(&exp.matrix)
            .into_iter()
            .filter(|c| !excluded(&exp, c))
            .collect();
        assert_eq!(cells.len(), 3);
        assert!(!cells.contains(&p("aquarius", "32")));
    }

    /// `load` replaces the workload's offered load per cell; `lb = conga` is a path choice.
    #[test]
    fn load_and_conga() {
        let l = |v: &str| BTreeMap::from([("load".to_string(), v.to_string())]);
        assert_eq!(cell_load(&l("0.397")).unwrap(), Some(0.397));
        assert_eq!(cell_load(&BTreeMap::new()).unwrap(), None);
        for bad in ["0", "1.6", "x", "-0.2"] {
            assert!(cell_load(&l(bad)).is_err(), "{bad}");
        }
        let exp: ExpFile = toml::from_str(EXP).unwrap();
        let lb = BTreeMap::from([("lb".to_string(), "conga".to_string())]);
        let t: toml::Value = toml::from_str(&patch_topology(TOPO, &lb, &exp).unwrap()).unwrap();
        assert_eq!(t["switch"][0]["lb"].as_str(), Some("conga"));
        let bad = BTreeMap::from([("lb".to_string(), "hermes".to_string())]);
        assert!(patch_topology(TOPO, &bad, &exp).is_err());
    }
}

//! `xoff experiment run FILE [--out DIR] [--json]`: runs an experiment file (see
//! `deploy/experiments/`): a topology, a workload, a duration, seeds and a matrix of switch
//! settings. Each cell of the matrix × seed runs either on real frames (the testbed is brought
//! up with the cell's settings, `xoff host` runs on every host that sends or receives, switch
//! counters are sampled over the control socket, the testbed is torn down) or in virtual time
//! (`mode = "virtual"`: the fabric with the same host stack). Results: `results.json`,
//! per-cell `flows.csv`, a comparison table, and plots (PNG + SVG): FCT slowdown vs flow size
//! per cell, FCT CDF, queue depth over time, PFC pause frames over time per port.

use anyhow::{anyhow, bail, Context, Result};
use dataplane::config::Topology;
use dataplane::ctl::{self, Request, Response};
use dataplane::fabric::{Fabric, FabricOptions, ProbeTarget, QueueCounter};
use dataplane::host::report::{
    base_rtt_ps, merge, summarize, FlowResult, RxRecord, Summary, TxRecord,
};
use dataplane::host::StackConfig;
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
    Run {
        file: PathBuf,
        /// Output directory (default: `results/<experiment name>`).
        #[arg(long)]
        out: Option<PathBuf>,
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
    /// Switch settings to vary: `scheme` (pfc, none), `headroom` (sih, dsh).
    #[serde(default)]
    matrix: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    sample: SampleCfg,
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
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SampleCfg {
    /// Switch counter sampling interval (default 20 ms real, 10 us virtual).
    interval: Option<String>,
}

/// One cell's result.
#[derive(Debug, Clone, Serialize)]
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
    pub pfc_pause_frames: u64,
    pub hosts_incomplete: Vec<String>,
    pub dir: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExperimentResult {
    pub name: String,
    pub mode: String,
    pub cells: Vec<CellResult>,
    pub plots: Vec<String>,
    pub notes: Vec<String>,
}

/// Time series gathered during a cell.
#[derive(Default)]
struct Series {
    /// "switch:port" → (t s, depth bytes).
    depth: BTreeMap<String, Vec<(f64, f64)>>,
    /// "switch:port" → (t s, XOFF frames sent so far).
    pauses: BTreeMap<String, Vec<(f64, f64)>>,
}

pub fn run(cmd: ExperimentCmd) -> Result<i32> {
    let ExperimentCmd::Run { file, out, json } = cmd;
    let fname = file.display().to_string();
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {fname}"))?;
    let exp: ExpFile = toml::from_str(&text).map_err(|e| anyhow!("{fname}: {e}"))?;
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&exp.name));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let topo_path = base.join(&exp.topology);
    let topo_text = std::fs::read_to_string(&topo_path)
        .with_context(|| format!("{fname}: topology: reading {}", topo_path.display()))?;
    let topo0 = Topology::load(&topo_path)?;
    for k in exp.matrix.keys() {
        if !["scheme", "headroom"].contains(&k.as_str()) {
            bail!("{fname}: matrix.{k}: unknown setting (use scheme, headroom)");
        }
    }
    let cells = cells(&exp.matrix);
    let total = cells.len() * exp.seeds.len();
    let mut results = Vec::new();
    let mut all_flows: Vec<(String, Vec<FlowResult>)> = Vec::new();
    let mut all_series: Vec<(String, Series)> = Vec::new();
    let mut notes = Vec::new();
    let mut k = 0;
    for params in &cells {
        for &seed in &exp.seeds {
            k += 1;
            let label = cell_label(params, seed, exp.seeds.len());
            progress(k, total, &label);
            let dir = out.join(label.replace([' ', '='], "_"));
            std::fs::create_dir_all(&dir)?;
            let patched = patch_topology(&topo_text, params, exp.workload.prio.unwrap_or(3))
                .map_err(|e| anyhow!("{}: {e}", topo_path.display()))?;
            let tpath = dir.join("topology.toml");
            std::fs::write(&tpath, patched)?;
            let topo = Topology::load(&tpath)?;
            let sched = schedule(&exp, &base, &topo, seed, &fname)?;
            std::fs::write(dir.join("schedule.csv"), workload::to_csv(&sched))?;
            let (res, flows, series) = match exp.mode {
                Mode::Virtual => run_virtual(&exp, &topo, &sched, &dir, &fname)?,
                Mode::Real => run_real(&exp, &tpath, &topo, &sched, &dir, &fname, k)?,
            };
            std::fs::write(
                dir.join("flows.csv"),
                dataplane::host::report::flows_csv(&flows),
            )?;
            let mut r = res;
            r.cell = label.clone();
            r.params = params.clone();
            r.seed = seed;
            r.dir = dir.display().to_string();
            results.push(r);
            all_flows.push((label.clone(), flows));
            all_series.push((label, series));
        }
    }
    eprintln!();
    let plots = match plot_all(&out, &all_flows, &all_series) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("plots failed: {e:#}"));
            Vec::new()
        }
    };
    if exp.mode == Mode::Virtual {
        notes.push("virtual mode: pause timelines are not sampled (final counters only)".into());
    }
    let res = ExperimentResult {
        name: exp.name.clone(),
        mode: format!("{:?}", exp.mode).to_lowercase(),
        cells: results,
        plots,
        notes,
    };
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&res)?,
    )?;
    let mut o = std::io::stdout().lock();
    if json {
        writeln!(o, "{}", serde_json::to_string_pretty(&res)?)?;
    } else {
        write!(o, "{}", table(&res))?;
        writeln!(o, "results in {}", out.display())?;
    }
    let _ = topo0;
    Ok(0)
}

fn progress(k: usize, total: usize, label: &str) {
    let w = 30;
    let filled = (k - 1) * w / total.max(1);
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

fn cells(m: &BTreeMap<String, Vec<String>>) -> Vec<BTreeMap<String, String>> {
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

/// Applies a cell's settings to every switch of the topology text.
fn patch_topology(text: &str, p: &BTreeMap<String, String>, prio: u8) -> Result<String> {
    let mut v: toml::Value = toml::from_str(text)?;
    let switches = v
        .get_mut("switch")
        .and_then(|s| s.as_array_mut())
        .ok_or_else(|| anyhow!("no [[switch]]"))?;
    for sw in switches.iter_mut() {
        let Some(t) = sw.as_table_mut() else { continue };
        match p.get("scheme").map(String::as_str) {
            None => {}
            Some("none") => {
                t.remove("pfc");
                t.remove("watchdog");
            }
            Some("pfc") if !t.contains_key("pfc") => {
                let mut pfc = toml::Table::new();
                pfc.insert("enable_mask".into(), toml::Value::Integer(1 << prio));
                t.insert("pfc".into(), toml::Value::Table(pfc));
            }
            Some("pfc") => {}
            Some(o) => bail!("matrix.scheme: `{o}`: use pfc or none (bfc is not implemented yet)"),
        }
        if let Some(h) = p.get("headroom") {
            if !["sih", "dsh"].contains(&h.as_str()) {
                bail!("matrix.headroom: `{h}`: use sih or dsh");
            }
            if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
                b.insert("headroom_mode".into(), toml::Value::String(h.clone()));
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
    let infos = crate::host::host_infos(topo)?;
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
                None => infos.first().map_or(0, |h| h.nic_rate_bps),
            };
            Ok(LoadSpec {
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
            .generate(seed, 0))
        }
        o => bail!("{f}: workload.kind: `{o}`: use incast or load"),
    }
}

/// Line rate, MSS and base RTT used for ideal FCTs and default windows.
fn path_params(exp: &ExpFile, topo: &Topology, f: &str) -> Result<(u64, u64)> {
    let infos = crate::host::host_infos(topo)?;
    let rate = match &exp.host.rate {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("{f}: host.rate: {e}"))?,
        None => infos
            .iter()
            .map(|h| h.nic_rate_bps)
            .filter(|&r| r > 0)
            .min()
            .unwrap_or(1),
    };
    let mss = StackConfig::new(0, rate, 0).mss;
    let rtt = match &exp.host.base_rtt {
        Some(s) => parse_time(s).map_err(|e| anyhow!("{f}: host.base_rtt: {e}"))?,
        None => {
            // Two access links (sender's and receiver's), the slowest and longest of them.
            let l = infos
                .iter()
                .map(|h| (h.nic_rate_bps.max(1), h.nic_delay_ps))
                .min_by_key(|&(r, d)| (r, u64::MAX - d))
                .unwrap_or((rate, 0));
            base_rtt_ps(&[l, l], mss)
        }
    };
    Ok((rate, rtt))
}

fn stack_cfg(exp: &ExpFile, host: u32, rate: u64, rtt: u64, f: &str) -> Result<StackConfig> {
    let mut c = StackConfig::new(host, rate, rtt);
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
        pfc_pause_frames: 0,
        hosts_incomplete: Vec::new(),
        dir: String::new(),
    }
}

fn pfc_xoff(s: &dataplane::stats::SwitchSnapshot, port: usize) -> u64 {
    s.pfc
        .as_ref()
        .and_then(|p| p["ports"][port].as_array().cloned())
        .map_or(0, |cls| {
            cls.iter()
                .map(|c| c["xoff_sent"].as_u64().unwrap_or(0))
                .sum()
        })
}

fn switch_totals(r: &mut CellResult, snaps: &[dataplane::stats::SwitchSnapshot], xdp: bool) {
    for s in snaps {
        for (i, p) in s.ports.iter().enumerate() {
            for (k, v) in &p.drops {
                *r.switch_drops.entry(k.clone()).or_default() += v;
            }
            if xdp {
                r.xdp_lost += p.xdp.lost();
            }
            r.pfc_pause_frames += pfc_xoff(s, i);
        }
    }
}

fn run_virtual(
    exp: &ExpFile,
    topo: &Topology,
    sched: &[FlowSpec],
    _dir: &Path,
    f: &str,
) -> Result<CellOut> {
    let (rate, rtt) = path_params(exp, topo, f)?;
    let duration = parse_time(&exp.duration).map_err(|e| anyhow!("{f}: duration: {e}"))?;
    let drain = time(&exp.drain, "drain", f, 10_000_000_000)?;
    let interval = time(&exp.sample.interval, "sample.interval", f, 10_000_000)?;
    let mut fab = Fabric::new(topo, &FabricOptions::default())?;
    let mut cfg_err = None;
    let stacks = dataplane::host::fabric::install(&mut fab, sched, |i| {
        let r = if exp.host.rate.is_some() {
            rate
        } else {
            i.nic_rate_bps
        };
        stack_cfg(exp, i.index as u32, r, rtt, f).unwrap_or_else(|e| {
            cfg_err = Some(e);
            StackConfig::new(0, r, rtt)
        })
    });
    if let Some(e) = cfg_err {
        return Err(e);
    }
    let prio = exp.workload.prio.unwrap_or(3);
    let mut cols = Vec::new();
    for n in fab.nodes() {
        for (pi, p) in n.shared().spec.ports.iter().enumerate() {
            let q = n.shared().spec.ports[pi].prio_map[usize::from(prio & 7)]
                .min(p.queues.saturating_sub(1));
            cols.push((format!("{}:{}", n.name, p.name), n.shared().clone(), pi, q));
        }
    }
    fab.set_probe_interval(interval);
    for (name, shared, port, queue) in cols {
        fab.add_probe(
            name,
            ProbeTarget::Queue {
                shared,
                port,
                queue,
                counter: QueueCounter::DepthBytes,
            },
        );
    }
    fab.run_until(duration + drain);
    let mut tx: Vec<TxRecord> = Vec::new();
    let mut rx: Vec<RxRecord> = Vec::new();
    for s in &stacks {
        let s = s.borrow();
        tx.extend(s.tx_records());
        rx.extend(s.rx_records());
    }
    let mss = StackConfig::new(0, rate, 0).mss;
    let flows = merge(&tx, &rx, mss, rate, rtt);
    let mut r = empty_result();
    r.summary = summarize(&flows, duration + drain);
    r.receiver_lost = r.summary.lost;
    let rep = fab.report();
    switch_totals(&mut r, &rep.switches, false);
    let mut series = Series::default();
    let pr = fab.probes();
    for name in &pr.names {
        if let Some(v) = pr.series(name) {
            if v.iter().any(|&(_, d)| d > 0) {
                series.depth.insert(
                    name.clone(),
                    v.iter()
                        .map(|&(t, d)| (t as f64 / 1e12, d as f64))
                        .collect(),
                );
            }
        }
    }
    Ok((r, flows, series))
}

fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[allow(clippy::too_many_arguments)]
fn run_real(
    exp: &ExpFile,
    tpath: &Path,
    topo: &Topology,
    sched: &[FlowSpec],
    dir: &Path,
    f: &str,
    k: usize,
) -> Result<CellOut> {
    use deploy::testbed::{socket_path, Testbed};
    let (rate, rtt) = path_params(exp, topo, f)?;
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
    let start_at = unix_ns() + 1_500_000_000;
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
        children.push((hn.clone(), c.spawn().context("starting xoff host")?));
    }
    // Sample the switches until the hosts are done.
    let mut series = Series::default();
    let t0 = Instant::now()
        + Duration::from_nanos(u64::try_from(start_at.saturating_sub(unix_ns())).unwrap_or(0));
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
                    let key = format!("{}:{}", s.switch, p.name);
                    let d: u64 = p.queues.iter().map(|q| q.depth_bytes).sum();
                    series
                        .depth
                        .entry(key.clone())
                        .or_default()
                        .push((t, d as f64));
                    if s.pfc.is_some() {
                        series
                            .pauses
                            .entry(key)
                            .or_default()
                            .push((t, pfc_xoff(s, i) as f64));
                    }
                }
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
    let flows = merge(&tx, &rx, mss, rate, rtt);
    r.summary = summarize(&flows, run_ps);
    r.receiver_lost = r.summary.lost;
    switch_totals(&mut r, &finals, true);
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
    let mut s = format!(
        "\n{} ({})\n{:<28} {:>6} {:>6} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
        r.name,
        r.mode,
        "cell",
        "flows",
        "done",
        "rx_lost",
        "xdp_lost",
        "sw_drop",
        "pause_frm",
        "retx",
        "sd_avg",
        "sd_p50",
        "sd_p99",
        "Gbit/s"
    );
    for c in &r.cells {
        let drops: u64 = c.switch_drops.values().sum();
        s.push_str(&format!(
            "{:<28} {:>6} {:>6} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>9.3}\n",
            c.cell,
            c.summary.flows,
            c.summary.completed,
            c.receiver_lost,
            c.xdp_lost,
            drops,
            c.pfc_pause_frames,
            c.summary.retx,
            c.summary.slowdown.avg,
            c.summary.slowdown.p50,
            c.summary.slowdown.p99,
            c.summary.goodput_gbps
        ));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Plots

fn load_font() -> bool {
    use std::sync::OnceLock;
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let paths = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        ];
        for p in paths {
            if let Ok(b) = std::fs::read(p) {
                let b: &'static [u8] = Box::leak(b.into_boxed_slice());
                if plotters::style::register_font(
                    "sans-serif",
                    plotters::style::FontStyle::Normal,
                    b,
                )
                .is_ok()
                {
                    return true;
                }
            }
        }
        false
    })
}

struct Chart<'a> {
    title: &'a str,
    x: &'a str,
    y: &'a str,
    series: Vec<(String, Vec<(f64, f64)>)>,
    step: bool,
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart<'_>,
    text: bool,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    root.fill(&WHITE)?;
    let pts = c.series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y1) = (0.0, 1.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(c.title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(70);
    } else {
        b.x_label_area_size(5).y_label_area_size(5);
    }
    let mut ch = b.build_cartesian_2d(x0..x1, y0..y1 * 1.05)?;
    if text {
        ch.configure_mesh().x_desc(c.x).y_desc(c.y).draw()?;
    } else {
        ch.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    for (i, (name, v)) in c.series.iter().enumerate() {
        let col = Palette99::pick(i).to_rgba();
        let mut v = v.clone();
        if c.step {
            let mut s = Vec::with_capacity(v.len() * 2);
            for w in v.windows(2) {
                s.push(w[0]);
                s.push((w[1].0, w[0].1));
            }
            if let Some(&l) = v.last() {
                s.push(l);
            }
            v = s;
        }
        let series = ch.draw_series(LineSeries::new(v, col.stroke_width(2)))?;
        if text {
            series.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
            });
        }
    }
    if text && !c.series.is_empty() {
        ch.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn write_chart(out: &Path, stem: &str, c: &Chart<'_>, files: &mut Vec<String>) -> Result<()> {
    use plotters::prelude::*;
    let text = load_font();
    let png = out.join(format!("{stem}.png"));
    let svg = out.join(format!("{stem}.svg"));
    draw(
        BitMapBackend::new(&png, (900, 600)).into_drawing_area(),
        c,
        text,
    )
    .map_err(|e| anyhow!("{}: {e}", png.display()))?;
    draw(
        SVGBackend::new(&svg, (900, 600)).into_drawing_area(),
        c,
        text,
    )
    .map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    files.push(png.display().to_string());
    files.push(svg.display().to_string());
    Ok(())
}

fn plot_all(
    out: &Path,
    flows: &[(String, Vec<FlowResult>)],
    series: &[(String, Series)],
) -> Result<Vec<String>> {
    let mut files = Vec::new();
    // FCT slowdown (p50 and p99 per size bucket, log10 size).
    let mut sd = Vec::new();
    let mut cdf = Vec::new();
    for (cell, fl) in flows {
        let s = summarize(fl, 1);
        let pts = |f: fn(&dataplane::host::report::Slowdown) -> f64| -> Vec<(f64, f64)> {
            s.buckets
                .iter()
                .map(|b| {
                    let mid = if b.hi == u64::MAX {
                        b.lo as f64 * 10.0
                    } else {
                        b.hi as f64
                    };
                    (mid.max(1.0).log10(), f(&b.slowdown))
                })
                .collect()
        };
        sd.push((format!("{cell} p50"), pts(|x| x.p50)));
        sd.push((format!("{cell} p99"), pts(|x| x.p99)));
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
        "fct_slowdown",
        &Chart {
            title: "FCT slowdown by flow size",
            x: "log10 flow size bucket upper edge (B)",
            y: "slowdown",
            series: sd,
            step: false,
        },
        &mut files,
    )?;
    write_chart(
        out,
        "fct_cdf",
        &Chart {
            title: "FCT CDF",
            x: "FCT (us)",
            y: "fraction of flows",
            series: cdf,
            step: false,
        },
        &mut files,
    )?;
    let mut depth = Vec::new();
    let mut pauses = Vec::new();
    for (cell, s) in series {
        for (k, v) in &s.depth {
            if v.iter().any(|&(_, d)| d > 0.0) {
                depth.push((
                    format!("{cell} {k}"),
                    v.iter().map(|&(t, d)| (t, d / 1e3)).collect(),
                ));
            }
        }
        for (k, v) in &s.pauses {
            if v.iter().any(|&(_, d)| d > 0.0) {
                pauses.push((format!("{cell} {k}"), v.clone()));
            }
        }
    }
    write_chart(
        out,
        "queue_depth",
        &Chart {
            title: "Queue depth per port",
            x: "time (s)",
            y: "depth (KB)",
            series: depth,
            step: true,
        },
        &mut files,
    )?;
    write_chart(
        out,
        "pause_timeline",
        &Chart {
            title: "PFC XOFF frames sent per port (cumulative)",
            x: "time (s)",
            y: "XOFF frames",
            series: pauses,
            step: true,
        },
        &mut files,
    )?;
    Ok(files)
}

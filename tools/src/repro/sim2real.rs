//! `xoff repro sim2real`: does the virtual-time fabric agree with real frames? The same small
//! experiment runs on real frames (a netns testbed brought up by `xoff experiment`, a software
//! switch per switch, `xoff host` over AF_XDP on every host) and in virtual time (the fabric
//! with the same host stack), from one experiment file: the same topology, rates, delays,
//! buffers, workload and seed. The report gives the deltas: PFC PAUSE frames sent, peak
//! queue, FCT p50 / p99, losses.
//!
//! Two experiments at 100 Mbit/s, what real frames sustain on this 2-core machine:
//! `deploy/experiments/incast-pfc.toml` (8:1 incast of 1 MB flows on one switch) and
//! `deploy/experiments/chain-pfc.toml` (two switches in a line, three senders toward a receiver
//! behind the second: s2 pauses s1 and its own sender, s1 pauses its two senders).
//!
//! **The response time.** A virtual host stack or switch obeys a PAUSE the moment it arrives;
//! on real frames the switch's worker sends it through AF_XDP and a veth, and the upstream
//! (an `xoff host`, or the other switch's worker) obeys it at its next poll, on two cores
//! shared by every process of the testbed. The run measures that lateness on real frames, per
//! paused ingress port and PFC cell: what its lossless PGs admitted during one pause (the
//! longest, [`crate::experiment::CellResult::pause_absorbed_bytes`], and the mean,
//! `pause_absorbed_mean_bytes`) beyond what the same port admits in virtual time, over the
//! link's rate. Per PFC cell, from that cell's own pauses, the virtual twin then makes each
//! paused port's upstream late by what its mean pause absorbed, as more propagation delay
//! toward the port (`[sim.nic.HOST] delay` for a host, the upstream switch port's `delay`
//! for a switch): frames it sent during its lateness still arrive after the pause, and a
//! resume takes effect as late, as on real frames. That twin at the typical pace gives the
//! queue level, FCT and loss rows, and the PAUSE count (a median over lateness draws, see
//! [`TOL_PAUSES`]).
//!
//! **The peak queue** is not the typical pace's: a real process descheduled for milliseconds
//! makes its port's pause long once, and the run's peak is the typical level plus the
//! overshoot of whichever such stalls overlapped, which the real run does not record. So the
//! real peak is compared with two twins that bracket it: one upstream late by the cell's
//! longest pause (the others at their typical pace), and every upstream late by its own
//! longest pause at once (see [`TOL_QUEUE`]). Everything else is as written.

use super::{experiment_file, Check, Ctx, Row, Section};
use crate::experiment::{run_file_flows, CellResult, ExperimentResult, RunOpts};
use crate::plot::{write_chart, Chart};
use anyhow::{anyhow, bail, Context, Result};
use dataplane::host::report::{FlowResult, Slowdown};
use dataplane::Topology;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One experiment run on both sides.
struct Twin {
    /// What the report calls it.
    title: &'static str,
    /// `deploy/experiments/FILE`.
    file: &'static str,
    /// The matrix under `--quick` (the PFC cells: the lossless ones are where the two sides
    /// can be compared frame by frame).
    quick: &'static str,
}

const TWINS: &[Twin] = &[
    Twin {
        title: "8:1 incast",
        file: "incast-pfc.toml",
        quick: r#"scheme = ["pfc"]
headroom = ["sih", "dsh"]"#,
    },
    Twin {
        title: "2-switch PFC chain",
        file: "chain-pfc.toml",
        quick: r#"scheme = ["pfc"]"#,
    },
];

/// Agreement bands, virtual / real, from nine runs of `xoff repro sim2real` on this shared
/// 2-core machine (2026-11-27, README): FCT p50/p99 0.94-1.03 when no real process stalled
/// (0.29-1.17 when one did: the FCT rows then break, or differ for a checked timeout); peak
/// queue 0.57-1.34, DSH's incast cell once 0.38 and once 2.28. The FCT and queue bands fail a
/// model error of 2x.
///
/// The PAUSE count. A twin late by the median of the ports' *worst* pauses (0.5-3 ms) paused
/// 1.4-5x less often than real frames (ratio 0.19-0.71 over those nine runs): how often a
/// switch re-pauses is set by the typical pause, and a real upstream's lateness varies from
/// pause to pause (a typical pause absorbs 25-140 µs of traffic, a port's worst one up to
/// 3 ms). The chain in virtual time shows the dependence: 853, 574, 504, 303, 219 and 145
/// PAUSE frames at 0, 100, 200, 300, 500 and 983 µs of upstream lateness. So the count is
/// compared against a second twin whose upstreams are each late by their own mean pause
/// (`mmu::PgStats::absorbed_cells` over `xon`): ratio 0.62-1.45 in 11 of 12 cells over four
/// runs at load 12 (2026-11-27 15:20-15:45); the twelfth, 7.2 (88 real PAUSEs against
/// 527-761 in the other chain runs), came from a run that a stalled process broke (its chain
/// without flow control lost nothing on real frames). 0.6 (ratio 0.4-1.6) was 0.9 while the
/// gap was unexplained.
///
/// The twin's count is chaotic in the exact lateness, the real one is not: the chain's twin
/// at one run's mean-pause lateness (61, 31, 95, 92 µs) paused 1351 times, at 85 or 87 µs for
/// one of s2's upstreams 774-775, at all four 5 µs later 761-1351 (real: 677-902 PAUSEs over
/// nine runs of 2026-11-29). A real upstream's response varies from pause to pause around its
/// mean (from about none to the longest pause, 5-50x the mean); so the count compared is the
/// median over [`DRAWS`] twins, each port late by a uniform draw of 0-2x its mean (the first
/// twin 1x). On six runs' chain lateness, eight draws: median / real 0.82-1.31 (single twin
/// 0.64-1.76; draws of 0.5-1.5x: 0.82-1.48). The twin's count has two modes, ~500-700 and
/// ~1100-1200 (the second where s1's mean lateness toward s2 measures 0-40 µs), the real one
/// lies between (677-908 over 21 runs).
const TOL_PAUSES: f64 = 0.6;
/// Lateness draws of the PAUSE-count twin (see [`TOL_PAUSES`]).
const DRAWS: usize = 15;
/// The peak queue. The twin used to make every paused port's upstream late by the median of
/// the ports' longest pauses (123-1106 us from run to run, a worst-of-run statistic) in one
/// twin for every cell, and compared its peak with the real one within this band: on DSH's
/// 8:1 incast cell, whose queue is small, virtual / real came out 1.11-1.54 over six runs of
/// 2026-11-28, two of nine runs that day over the band. The real peak there is one event: the
/// 20 ms samples of the fullest queue read 34-51 KB on both sides (see [`TOL_LEVEL`]) and
/// the real peak 57-218 KB over 31 runs of 2026-11-29, the largest where every port's longest
/// pause was 1.7-2.5 ms (the switch itself descheduled: every port late at once), others at
/// 1.1 ms on every port and a peak of 89 KB. In virtual time that cell's peak rises by 12-14 KB
/// per upstream late by 1.1 ms (42 KB with none, 55.5, 69, 81, 93 with one to four, 136.5
/// with all eight). So the real peak is held between the twin with one upstream stalled and
/// the one with every upstream stalled, with this band around them (below the first by at
/// most the band, above the second by at most the band). Over twelve runs of 2026-11-29,
/// real / one stalled and real / all stalled: DSH 1.12-3.0 and 0.65-1.09, SIH 0.99-1.12 and
/// 0.91-1.00, the chain 1.04-1.33 and 0.98-1.23.
const TOL_QUEUE: f64 = 0.5;
const TOL_FCT: f64 = 0.25;
/// The queue level: the median over the run's 20 ms samples (while the queue is not empty)
/// of the fullest queue, real against the twin at the typical pace. Over eleven runs of
/// 2026-11-29, virtual / real: DSH 0.92-1.08, SIH 1.01-1.02, the chain 0.95-1.04 (a twin with
/// three upstreams stalled: DSH 1.18-1.85).
const TOL_LEVEL: f64 = 0.25;

/// The virtual twins of one real cell.
struct Twins {
    /// At the typical pace (1x the mean pauses' lateness), with its flows.
    typical: (CellResult, Vec<FlowResult>),
    /// The median PAUSE count over the DRAWS twins at the typical pace, and every count.
    pauses: u64,
    counts: Vec<u64>,
    /// Peak queue, bytes: one upstream stalled (the longest pause), and every one.
    one_stall: u64,
    all_stalled: u64,
}

/// What one side measured in one cell.
#[derive(Debug, Clone)]
struct Side {
    pauses: u64,
    peak_queue: u64,
    /// The median over the timeline's samples (while not idle) of the fullest queue.
    level: u64,
    /// FCT of completed flows, ms: p50 and p99.
    fct: Slowdown,
    /// Switch drops, XDP_STATISTICS drops, and the receivers' sequence-check losses (gaps
    /// that retransmissions filled).
    lost: u64,
    /// Retransmission timeouts of the senders.
    timeouts: u64,
    completed: usize,
    flows: usize,
}

impl Side {
    fn of(c: &CellResult, flows: &[FlowResult]) -> Side {
        Side {
            pauses: c.pfc_pause_frames,
            peak_queue: c.max_queue_bytes,
            level: median(
                c.timeline
                    .max_queue_bytes
                    .iter()
                    .copied()
                    .filter(|&q| q > 0)
                    .collect(),
            ),
            fct: Slowdown::of(
                flows
                    .iter()
                    .filter_map(|f| f.fct_ps)
                    .map(|x| x as f64 / 1e9)
                    .collect(),
            ),
            lost: c.switch_drops.values().sum::<u64>() + c.xdp_lost + c.receiver_lost,
            timeouts: c.summary.timeouts,
            completed: c.summary.completed,
            flows: c.summary.flows,
        }
    }
}

/// Whether this process runs as root (the testbed needs namespaces and XDP).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// The experiment `file` rewritten into `dir/NAME.toml`: `mode`, the topology (absolute), and
/// under `--quick` the matrix.
fn copy_experiment(
    file: &Path,
    dir: &Path,
    name: &str,
    mode: &str,
    topology: &Path,
    matrix: Option<&str>,
) -> Result<PathBuf> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    let mut v: toml::Value = toml::from_str(&text)?;
    let t = v.as_table_mut().context("experiment: not a table")?;
    t.insert("mode".into(), toml::Value::String(mode.into()));
    t.insert(
        "topology".into(),
        toml::Value::String(topology.display().to_string()),
    );
    if let Some(m) = matrix {
        t.insert("matrix".into(), toml::Value::Table(toml::from_str(m)?));
    }
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, toml::to_string(&v)?)?;
    Ok(p)
}

/// The topology of experiment `file` (absolute).
fn topology_of(file: &Path) -> Result<PathBuf> {
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(file)?)?;
    let rel = v
        .get("topology")
        .and_then(|t| t.as_str())
        .context("experiment: topology")?;
    let base = file.parent().unwrap_or(Path::new("."));
    std::fs::canonicalize(base.join(rel)).with_context(|| format!("topology {rel}"))
}

/// The upstreams' lateness on real frames, ps: per paused port ("switch:port") and PFC cell,
/// what the port admitted during a pause (`absorbed`: its longest, or its mean) beyond what
/// it admits in virtual time, over the port's rate. Returns every sample, keyed by cell and
/// port.
fn lateness(
    topo: &Topology,
    real: &ExperimentResult,
    virt: &ExperimentResult,
    absorbed: fn(&CellResult) -> &BTreeMap<String, u64>,
) -> Result<Vec<(String, String, u64)>> {
    let mut out = Vec::new();
    for (r, v) in real.cells.iter().zip(&virt.cells) {
        if r.cell != v.cell {
            bail!("cells differ: {} vs {}", r.cell, v.cell);
        }
        // Without PFC nothing is paused: the MMU's pause state there only counts arrivals.
        if r.params.get("scheme").map(String::as_str) != Some("pfc") {
            continue;
        }
        for (port, &bytes) in absorbed(r) {
            let extra = bytes.saturating_sub(absorbed(v).get(port).copied().unwrap_or(0));
            let (sw, p) = port.split_once(':').context("port key")?;
            let rate = topo
                .switch_spec(sw)?
                .ports
                .iter()
                .find(|x| x.name == p)
                .with_context(|| format!("{port}: no such port"))?
                .rate_bps;
            let ps = (extra as u128 * 8 * 1_000_000_000_000 / u128::from(rate.max(1))) as u64;
            out.push((r.cell.clone(), port.clone(), ps));
        }
    }
    Ok(out)
}

/// The median (the upper one of an even count; 0 of none).
fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The median of the samples' lateness, ps (0 without samples).
fn median_lateness(samples: &[(String, String, u64)]) -> u64 {
    median(samples.iter().map(|s| s.2).collect())
}

/// Lateness samples as "CELL PORT µs, ...".
fn list_us(samples: &[(String, String, u64)]) -> String {
    samples
        .iter()
        .map(|(c, p, ps)| format!("{c} {p} {:.0}", *ps as f64 / 1e6))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The topology text with each paused port's upstream `late` ps slower toward it: a host's
/// NIC (`[sim.nic.HOST] delay`) or the upstream switch port's `delay`.
fn delayed_topology(path: &Path, late: &BTreeMap<String, u64>) -> Result<String> {
    let topo = Topology::load(path)?;
    let mut v: toml::Value = toml::from_str(&std::fs::read_to_string(path)?)?;
    let root = v.as_table_mut().context("topology: not a table")?;
    for (port, &ps) in late.iter().filter(|(_, ps)| **ps > 0) {
        let (sw, p) = port.split_once(':').context("port key")?;
        let spec = topo.switch_spec(sw)?;
        let me = spec
            .ports
            .iter()
            .find(|x| x.name == p)
            .with_context(|| format!("{port}: no such port"))?;
        // The peer: the other end of the link that names this port.
        let here = format!("{sw}:{p}");
        let peer = topo
            .links
            .iter()
            .find_map(|l| {
                if l.a == here {
                    Some(l.b.clone())
                } else if l.b == here {
                    Some(l.a.clone())
                } else {
                    None
                }
            })
            .with_context(|| format!("{port}: no link"))?;
        match peer.split_once(':') {
            None => {
                // A host: its NIC's delay toward the switch (the port's delay by default).
                let sim = root
                    .entry("sim")
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .context("sim")?;
                let nic = sim
                    .entry("nic")
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .context("sim.nic")?
                    .entry(peer.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .context("sim.nic.HOST")?;
                nic.insert(
                    "delay".into(),
                    toml::Value::String(format!("{}ns", (me.delay_ps + ps) / 1000)),
                );
            }
            Some((usw, up)) => {
                let uspec = topo.switch_spec(usw)?;
                let base = uspec
                    .ports
                    .iter()
                    .find(|x| x.name == up)
                    .with_context(|| format!("{peer}: no such port"))?
                    .delay_ps;
                let sws = root
                    .get_mut("switch")
                    .and_then(|s| s.as_array_mut())
                    .context("switch")?;
                let s = sws
                    .iter_mut()
                    .filter_map(|s| s.as_table_mut())
                    .find(|s| s.get("name").and_then(|n| n.as_str()) == Some(usw))
                    .with_context(|| format!("switch {usw}"))?;
                let port = s
                    .get_mut("port")
                    .and_then(|p| p.as_array_mut())
                    .context("port")?
                    .iter_mut()
                    .filter_map(|p| p.as_table_mut())
                    .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(up))
                    .with_context(|| format!("{peer}: no such port"))?;
                port.insert(
                    "delay".into(),
                    toml::Value::String(format!("{}ns", (base + ps) / 1000)),
                );
            }
        }
    }
    Ok(toml::to_string(&v)?)
}

/// One agreement row: the virtual figure against the real one, within `tol`.
fn agree(figure: &str, metric: &str, real: f64, virt: f64, unit: &'static str, tol: f64) -> Row {
    let r = Row::new(
        figure,
        metric,
        &format!("real frames: {} {unit}", super::fmt_num(real)),
        virt,
        unit,
    );
    if real == 0.0 {
        r.check(Check::AtMost(0.0))
    } else {
        r.check(Check::Within { target: real, tol })
    }
}

/// An FCT agreement row. A real sender whose retransmission timer expired (the experiment's
/// RTO, 50 ms, against ACKs held up behind pauses when the shared machine stalls a process)
/// waits out its timer and sends again, which the virtual twin without a timeout never does:
/// then the FCT differs for that checked reason (and the lossless row says what it cost).
fn fct(figure: &str, metric: &str, real: f64, virt: f64, a: &Side, b: &Side) -> Row {
    let r = agree(figure, metric, real, virt, "ms", TOL_FCT);
    if a.timeouts > 0 && b.timeouts == 0 {
        r.differs(true).note(format!(
            "real senders timed out {} times (virtual: none)",
            a.timeouts
        ))
    } else {
        r
    }
}

pub fn run(ctx: &Ctx<'_>) -> Result<Section> {
    if !is_root() {
        bail!("repro sim2real: the real-frame half needs root (network namespaces, XDP)");
    }
    let mut rows = Vec::new();
    let mut log = String::new();
    let mut plots = Vec::new();
    let mut setup = String::new();
    for tw in TWINS {
        let file = experiment_file(tw.file);
        let dir = ctx
            .out
            .join("sim2real")
            .join(tw.file.trim_end_matches(".toml"));
        std::fs::create_dir_all(&dir)?;
        let topo_path = topology_of(&file)?;
        let topo = Topology::load(&topo_path)?;
        let matrix = ctx.quick.then_some(tw.quick);
        let run = |name: &str, mode: &str, topology: &Path, cell: Option<&CellResult>| {
            // A twin of one cell: that cell's settings and seed alone.
            let one = cell.map(|c| {
                let t: toml::Table = c
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), toml::Value::Array(vec![v.clone().into()])))
                    .collect();
                (toml::to_string(&t), [c.seed])
            });
            let m = match &one {
                Some((t, _)) => Some(t.as_ref().map_err(|e| anyhow!("{e}"))?.as_str()),
                None => matrix,
            };
            let opts = RunOpts {
                duration: None,
                seeds: one.as_ref().map(|(_, s)| &s[..]),
                jobs: 1,
                shard: None,
            };
            let f = copy_experiment(&file, &dir, name, mode, topology, m)?;
            let t0 = std::time::Instant::now();
            let (res, _, flows) = run_file_flows(&f, Some(dir.join(name)), &opts)
                .with_context(|| format!("{}: {name}", tw.file))?;
            Ok::<_, anyhow::Error>(((res, flows), t0.elapsed().as_secs_f64()))
        };
        let ((real, real_flows), t_real) = run("real", "real", &topo_path, None)?;
        let ((base, base_flows), _) = run("virtual-0", "virtual", &topo_path, None)?;
        let samples = lateness(&topo, &real, &base, |c| &c.pause_absorbed_bytes)?;
        let typical = lateness(&topo, &real, &base, |c| &c.pause_absorbed_mean_bytes)?;
        let _ = writeln!(
            log,
            "{}: real frames {t_real:.1} s; lateness measured on real frames (µs, per PFC cell \
             and paused port), worst pause: {}; mean pause: {}",
            tw.title,
            list_us(&samples),
            list_us(&typical)
        );
        let _ = write!(
            setup,
            "{}: `deploy/experiments/{}`{}; upstream lateness measured on real frames, per PFC \
             cell: ",
            tw.title,
            tw.file,
            if ctx.quick {
                " (`--quick`: its PFC cells)"
            } else {
                ""
            },
        );
        // Per PFC cell, from that cell's own pauses (module docs): the twins at the typical
        // pace (the first, 1x, is the one the level, FCT and loss rows compare; the median of
        // their PAUSE counts is compared), and the two that bracket the peak queue. Cells
        // without PFC are compared with the twin without lateness.
        let mut twins = Vec::new();
        for (i, r) in real.cells.iter().enumerate() {
            if r.params.get("scheme").map(String::as_str) != Some("pfc") {
                let c = &base.cells[i];
                twins.push(Twins {
                    typical: (c.clone(), base_flows[i].clone()),
                    pauses: 0,
                    counts: Vec::new(),
                    one_stall: c.max_queue_bytes,
                    all_stalled: c.max_queue_bytes,
                });
                continue;
            }
            let mine = |v: &[(String, String, u64)]| -> Vec<(String, String, u64)> {
                v.iter().filter(|s| s.0 == r.cell).cloned().collect()
            };
            let (worst, mean) = (mine(&samples), mine(&typical));
            let typical_late: BTreeMap<String, u64> =
                mean.iter().map(|s| (s.1.clone(), s.2)).collect();
            // Stalled upstreams, the longest pause first: late by it (at least their mean).
            let mut by = worst.clone();
            by.sort_by_key(|s| std::cmp::Reverse(s.2));
            let stalled = |n: usize| {
                let mut late = typical_late.clone();
                for (_, port, ps) in by.iter().take(n) {
                    let e = late.entry(port.clone()).or_default();
                    *e = (*e).max(*ps);
                }
                late
            };
            let slug: String = r
                .cell
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let twin = |name: &str, late: &BTreeMap<String, u64>| {
                let name = format!("{name}-{slug}");
                let vtopo = dir.join(format!("topology-{name}.toml"));
                std::fs::write(&vtopo, delayed_topology(&topo_path, late)?)?;
                // Absolute: the experiment file that names it lives in `dir`, and a
                // relative `--out` would be resolved twice.
                let ((mut res, mut flows), _) =
                    run(&name, "virtual", &std::fs::canonicalize(&vtopo)?, Some(r))?;
                match (res.cells.pop(), flows.pop()) {
                    (Some(c), Some(f)) => Ok((c, f)),
                    _ => Err(anyhow!("{}: {name}: no cell", tw.file)),
                }
            };
            // The typical pace: DRAWS twins, each port's lateness drawn from 0-2x its mean
            // pause's (the first: 1x), see TOL_PAUSES.
            let mut rng = dataplane::rng::Rng::new(1);
            let mut counts = Vec::with_capacity(DRAWS);
            let mut first = None;
            for k in 0..DRAWS {
                let late: BTreeMap<String, u64> = typical_late
                    .iter()
                    .map(|(p, &ps)| {
                        let f = if k == 0 { 1.0 } else { 2.0 * rng.unit() };
                        (p.clone(), (ps as f64 * f) as u64)
                    })
                    .collect();
                let t = twin(&format!("virtual-typical-{k}"), &late)?;
                counts.push(t.0.pfc_pause_frames);
                first.get_or_insert(t);
            }
            let (one, _) = twin("virtual-one-stall", &stalled(1))?;
            let (all, _) = twin("virtual-all-stalled", &stalled(worst.len()))?;
            let _ = write!(
                setup,
                "`{}` in the mean pause median {:.0} µs, in the longest pause median {:.0} µs, \
                 longest {:.0} µs; ",
                r.cell,
                median_lateness(&mean) as f64 / 1e6,
                median_lateness(&worst) as f64 / 1e6,
                by.first().map_or(0, |s| s.2) as f64 / 1e6,
            );
            twins.push(Twins {
                typical: first.context("no twin")?,
                pauses: median(counts.clone()),
                counts,
                one_stall: one.max_queue_bytes,
                all_stalled: all.max_queue_bytes,
            });
        }
        let mut queues = Vec::new();
        for (i, (r, t)) in real.cells.iter().zip(&twins).enumerate() {
            let v = &t.typical.0;
            let (a, b) = (Side::of(r, &real_flows[i]), Side::of(v, &t.typical.1));
            let _ = writeln!(
                log,
                "  {}: real {a:?}\n  {}: virtual {b:?}\n  {}: virtual at the typical pace, \
                 PAUSE frames per draw {:?}, median {}; peak queue with one upstream stalled \
                 {:.1} KB, with all {:.1} KB",
                r.cell,
                v.cell,
                r.cell,
                t.counts,
                t.pauses,
                t.one_stall as f64 / 1e3,
                t.all_stalled as f64 / 1e3
            );
            let fig = format!("{} `{}`", tw.title, r.cell);
            let pfc = r.params.get("scheme").map(String::as_str) == Some("pfc");
            if !pfc {
                rows.push(Row::holds(
                    &fig,
                    "no flow control: both sides lose frames",
                    &format!("real frames: {} lost", a.lost),
                    a.lost > 0 && b.lost > 0,
                ));
                continue;
            }
            let (lo, hi) = (t.one_stall as f64 / 1e3, t.all_stalled as f64 / 1e3);
            let peak = a.peak_queue as f64 / 1e3;
            rows.extend([
                agree(
                    &fig,
                    "PFC PAUSE frames sent (median of twins late by 0-2x the mean pause's \
                     lateness)",
                    a.pauses as f64,
                    t.pauses as f64,
                    "",
                    TOL_PAUSES,
                ),
                agree(
                    &fig,
                    "queue level (median over the 20 ms samples of the fullest queue)",
                    a.level as f64 / 1e3,
                    b.level as f64 / 1e3,
                    "KB",
                    TOL_LEVEL,
                ),
                Row::holds(
                    &fig,
                    &format!(
                        "peak queue between the twins with one upstream and with every \
                         upstream stalled ({lo:.1} and {hi:.1} KB), within the band ({:.1}-{:.1} \
                         KB)",
                        lo * (1.0 - TOL_QUEUE),
                        hi * (1.0 + TOL_QUEUE)
                    ),
                    &format!("real frames: {peak:.1} KB"),
                    peak >= lo * (1.0 - TOL_QUEUE) && peak <= hi * (1.0 + TOL_QUEUE),
                ),
                fct(&fig, "FCT p50", a.fct.p50, b.fct.p50, &a, &b),
                fct(&fig, "FCT p99", a.fct.p99, b.fct.p99, &a, &b),
                Row::holds(
                    &fig,
                    "lossless on both sides: no switch drop, no XDP drop, no receiver sequence \
                     gap; every flow completes",
                    "real frames: PFC loses nothing",
                    a.lost == 0 && b.lost == 0 && a.completed == a.flows && b.completed == b.flows,
                ),
            ]);
            let line = |c: &CellResult| -> Vec<(f64, f64)> {
                c.timeline
                    .t_us
                    .iter()
                    .zip(&c.timeline.max_queue_bytes)
                    .map(|(&t, &q)| (t / 1e3, q as f64 / 1e3))
                    .collect()
            };
            queues.push((format!("{} real", r.cell), line(r)));
            queues.push((format!("{} virtual", r.cell), line(v)));
        }
        let stem = format!("sim2real-{}", tw.file.trim_end_matches(".toml"));
        let mut files = Vec::new();
        write_chart(
            ctx.out,
            &stem,
            &Chart {
                title: &format!("{}: fullest queue, real frames vs virtual time", tw.title),
                x: "time (ms)",
                y: "queue (KB)",
                series: queues,
                step: true,
                ..Default::default()
            },
            &mut files,
        )
        .map_err(|e| anyhow!("{stem}: {e}"))?;
        plots.push(format!("{stem}.svg"));
    }
    Ok(Section {
        title: "Sim-to-real agreement (real frames vs virtual time)".into(),
        setup: format!(
            "Each experiment runs on real frames (netns testbed, one software switch per \
             switch, `xoff host` over AF_XDP on every host) and in virtual time from the same \
             file: topology, rates (100 Mbit/s), 10 µs links, buffers, workload and seed. The \
             virtual twin's upstreams are late by what the real run measured (module docs of \
             `tools/src/repro/sim2real.rs`). Rows: the real figure in the paper column, the \
             virtual one measured, within a band. {setup}"
        ),
        rows,
        plots,
        log,
        ..Section::default()
    })
}

//! `xoff bench reaction` (issue 20 item 5): how long the switch takes to react on real frames,
//! from the arrival in the kernel of the frame that crosses a PFC threshold to the XOFF it
//! triggers on the TX ring (`dataplane::reaction`; `xoff run --reaction`). That time is the
//! response term of the headroom (`response_ps`, DSH paper Eq. (1)): an ASIC's is about a
//! microsecond, a software switch's is whenever its worker next runs.
//!
//! Setup: `gen` ─ `dut` ─ `sink` (the line-rate harness's namespaces). `d2` drains at 1 Gbit/s
//! and priority 3 is lossless, so each burst of MTU frames from the generator fills the
//! ingress past XOFF once, and the gap after it lets the queue drain below XON: one reaction
//! per burst. Cases: `--poll busy` and `adaptive`, each with the DUT's core otherwise idle and
//! with a CPU hog (a busy loop) sharing it, as on a testbed whose cores are shared.

use crate::linerate::{sh, spawn_gen, spawn_in, spawn_xoff_run, Net, DUT_CORE};
use anyhow::{bail, Context, Result};
use dataplane::reaction::ReactionSnapshot;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Opts {
    pub xoff: PathBuf,
    /// Seconds of bursts per case.
    pub duration: f64,
}

/// Frames per burst: 600 KB of 1500 B frames, past the XOFF point of the 1 MB buffer below.
const BURST: &str = "400";
/// Gap between bursts: the queue drains at 1 Gbit/s (600 KB in 4.8 ms) and goes below XON.
const GAP_US: &str = "10000";

/// One case's measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub poll: String,
    /// `idle` or `hog` (a busy loop on the DUT's core).
    pub load: String,
    /// Bursts the generator sent (each should trigger one XOFF).
    pub bursts: u64,
    pub reaction: ReactionSnapshot,
    /// The `response_ps` these measurements support (p99.9 rounded up to a microsecond).
    pub recommended_response_ps: u64,
}

fn topology() -> String {
    crate::linerate::dut_file(
        "reaction",
        "defaults = { rate = \"10Gbit\", queues = 8 }\n\
         port = [{ name = \"d1\" }, { name = \"d2\", rate = \"1Gbit\" }]\n\
         buffer = { buffer_bytes = 1000000, lossless_pgs = [3], response_ps = 50000000 }\n\
         pfc = { enable_mask = 8 }\n",
    )
}

fn case(net: &Net, opts: &Opts, dir: &Path, poll: &str, hog: bool) -> Result<Case> {
    let xoff = opts.xoff.to_string_lossy().to_string();
    let cfg = dir.join("reaction.toml");
    std::fs::write(&cfg, topology())?;
    let sock = dir.join(format!("reaction-{poll}-{hog}.sock"));
    let log = dir.join(format!("dut-{poll}-{hog}.log"));
    let mut dut = spawn_xoff_run(
        net,
        &xoff,
        &cfg,
        &sock,
        &["--reaction", "--poll", poll, "--afc", "none"],
        &log,
    )?;
    let mut hog_child = if hog {
        let args = ["sh", "-c", "while :; do :; done"];
        Some(spawn_in(net, "dut", DUT_CORE, &args, &dir.join("hog.log"))?)
    } else {
        None
    };
    let dur = format!("{}", opts.duration);
    let glog = dir.join("gen.log");
    let gen = spawn_gen(
        net,
        &xoff,
        "1500",
        &dur,
        &["--dscp", "24", "--burst", BURST, "--gap-us", GAP_US],
        &glog,
    )
    .and_then(|mut g| Ok(g.wait()?));
    // Let the last XOFF leave before reading.
    std::thread::sleep(Duration::from_millis(200));
    let stats = dataplane::ctl::request(&sock, &dataplane::ctl::Request::Stats);
    if let Some(h) = &mut hog_child {
        let _ = h.kill();
        let _ = h.wait();
    }
    let _ = sh(&["kill", "-INT", &dut.id().to_string()]);
    let _ = dut.wait();
    std::thread::sleep(Duration::from_millis(200));
    if !gen?.success() {
        bail!("generator failed: {}", crate::linerate::tail(&glog));
    }
    let sent: u64 = std::fs::read_to_string(&glog)?
        .lines()
        .find_map(|l| l.strip_prefix("sent ")?.trim().parse().ok())
        .context("generator printed no count")?;
    let reaction = match stats? {
        dataplane::ctl::Response::Stats(s) => s
            .nic
            .and_then(|n| n.reaction)
            .context("the switch reported no reaction histogram")?,
        other => bail!("stats: {other:?}"),
    };
    Ok(Case {
        poll: poll.into(),
        load: if hog { "hog" } else { "idle" }.into(),
        bursts: sent / BURST.parse::<u64>()?,
        recommended_response_ps: reaction.recommended_response_ps(),
        reaction,
    })
}

/// Runs every case.
pub fn run(opts: &Opts) -> Result<Vec<Case>> {
    let dir = std::env::temp_dir().join(format!("xoff-reaction-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let net = Net::up(&format!("xr{}", std::process::id() % 100_000))?;
    let mut out = Vec::new();
    for poll in ["busy", "adaptive"] {
        for hog in [false, true] {
            eprintln!(
                "measuring --poll {poll}, {} ...",
                if hog {
                    "CPU hog on the DUT core"
                } else {
                    "DUT core idle"
                }
            );
            out.push(case(&net, opts, &dir, poll, hog)?);
        }
    }
    drop(net);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The cases as a table, with the `response_ps` to configure.
pub fn table(cases: &[Case]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<9} {:<5} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9}  recommended response_ps",
        "poll", "load", "bursts", "XOFFs", "p50 us", "p99 us", "p99.9 us", "max us"
    );
    for c in cases {
        let r = &c.reaction;
        let _ = writeln!(
            t,
            "{:<9} {:<5} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9}  {} ({} us)",
            c.poll,
            c.load,
            c.bursts,
            r.count,
            us(r.p50_ns),
            us(r.p99_ns),
            us(r.p999_ns),
            us(r.max_ns),
            c.recommended_response_ps,
            c.recommended_response_ps / 1_000_000
        );
    }
    t
}

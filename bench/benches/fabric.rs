//! Speed of the virtual-time fabric: simulated packet-hops per wall-clock second, on the
//! 16-host leaf-spine of `deploy/sim/leafspine.toml` (4 leaves, 4 spines, 100 Gbit/s, 1 µs
//! links, a line-rate permutation) and on the 128-host Clos of BFC §6.2
//! (`bench/sim/leafspine128.toml`: 8 leaves x 16 hosts, 8 spines, 2:1 oversubscribed, every
//! host sending to the next leaf at the core's fair share), so the cost of growth shows. A
//! packet-hop is one frame crossing one link (host→leaf, leaf→spine, spine→leaf, leaf→host:
//! four per inter-leaf packet); every switch traversal runs the full production pipeline.
//!
//! Beside each, the same scenario in ns-3 (`bench/ns3/run.py`: ns-3 from PyPI, installed on
//! first use, its PointToPoint links and IPv4 routers), run alternately with xoff so both see
//! the same machine; skipped with a message when ns-3 cannot be installed or `--no-ns3`.
//! ns-3 needs about 15 minutes for 2 ms of the 128-host fabric here (its global routing scans
//! every route per packet), so there it runs once, over a quarter of the window
//! (`--ns3-runs-128`, `--ns3-window-128-us` change that); packet-hops/s is a rate either way.
//!
//! Run: `cargo bench -p bench --bench fabric` (optionally `-- --duration-us 2000 --runs 5
//! --no-ns3 --only leafspine16 --ns3-runs-128 1 --ns3-window-128-us 500`).

use dataplane::fabric::{Fabric, FabricOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One xoff run: (packet-hops per wall second, the run's line).
fn xoff_run(name: &str, path: &Path, duration_us: u64) -> (f64, String) {
    let mut f = match Fabric::load(
        path,
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
    let line = format!(
        "xoff {name}: {:.0} us virtual, {} packet-hops ({} switch traversals, {} events, at most {} pending) in {:.3} s wall = {:.2} M packet-hops/s",
        f.now() as f64 / 1e6,
        s.link_hops,
        s.switch_hops,
        s.events,
        s.max_pending,
        secs,
        rate / 1e6,
    );
    (rate, line)
}

/// ns-3's script, if it can run here (installs ns-3 on first use).
fn ns3_setup(script: &Path) -> bool {
    match Command::new("python3").arg(script).arg("setup").output() {
        Ok(o) => {
            print!("{}", String::from_utf8_lossy(&o.stdout));
            if !o.status.success() {
                eprint!("{}", String::from_utf8_lossy(&o.stderr));
                if o.status.code() != Some(3) {
                    println!("ns-3: skipped (bench/ns3/run.py setup failed)");
                }
                return false;
            }
            true
        }
        Err(e) => {
            println!("ns-3: skipped (cannot run python3: {e})");
            false
        }
    }
}

/// One ns-3 run of the same file: (packet-hops per wall second, the run's line).
fn ns3_run(script: &Path, path: &Path, duration_us: u64) -> Option<(f64, String)> {
    let o = Command::new("python3")
        .arg(script)
        .arg("run")
        .arg(path)
        .args(["--runs", "1", "--duration-us", &duration_us.to_string()])
        .output()
        .ok()?;
    let out = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        print!("{out}");
        eprint!("{}", String::from_utf8_lossy(&o.stderr));
        return None;
    }
    let line = out.lines().find(|l| l.contains(" wall = "))?.to_string();
    let rate: f64 = line
        .split(" wall = ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((rate * 1e6, line))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut duration_us = 2000u64;
    let mut runs = 5usize;
    let mut ns3 = true;
    let mut only: Option<String> = None;
    let mut ns3_runs_128: Option<usize> = None;
    let mut ns3_window_128: Option<u64> = None;
    let args: Vec<String> = std::env::args().collect();
    for (i, a) in args.iter().enumerate() {
        let next = args.get(i + 1);
        match a.as_str() {
            "--duration-us" => {
                duration_us = next.and_then(|v| v.parse().ok()).unwrap_or(duration_us)
            }
            "--runs" => runs = next.and_then(|v| v.parse().ok()).unwrap_or(runs).max(1),
            "--only" => only = next.cloned(),
            "--no-ns3" => ns3 = false,
            "--ns3-runs-128" => ns3_runs_128 = next.and_then(|v| v.parse().ok()),
            "--ns3-window-128-us" => ns3_window_128 = next.and_then(|v| v.parse().ok()),
            _ => {}
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // (name, file, ns-3's window in us, ns-3 runs)
    let scenarios: Vec<(&str, PathBuf, u64, usize)> = [
        (
            "leafspine16",
            root.join("deploy/sim/leafspine.toml"),
            duration_us,
            runs,
        ),
        (
            "leafspine128",
            root.join("bench/sim/leafspine128.toml"),
            ns3_window_128.unwrap_or(duration_us / 4).max(1),
            ns3_runs_128.unwrap_or(1),
        ),
    ]
    .into_iter()
    .filter(|(n, ..)| only.as_deref().is_none_or(|o| o == *n))
    .collect();
    let script = root.join("bench/ns3/run.py");
    let ns3 = ns3 && ns3_setup(&script);
    if !ns3 {
        println!("ns-3: not run");
    }
    let mut xoff = vec![Vec::new(); scenarios.len()];
    let mut other = vec![Vec::new(); scenarios.len()];
    // Alternate: every round runs each scenario in xoff, then in ns-3.
    for run in 0..runs {
        for (i, (name, path, ns3_us, ns3_runs)) in scenarios.iter().enumerate() {
            let (r, line) = xoff_run(name, path, duration_us);
            println!("run {run}: {line}");
            xoff[i].push(r);
            if ns3 && run < *ns3_runs {
                match ns3_run(&script, path, *ns3_us) {
                    Some((r, line)) => {
                        println!("run {run}: {line}");
                        other[i].push(r);
                    }
                    None => println!("run {run}: ns-3 {name} failed"),
                }
            }
        }
    }
    println!(
        "\n{:<14} {:>28} {:>28} {:>10}",
        "fabric",
        format!("xoff M packet-hops/s"),
        "ns-3 M packet-hops/s",
        "xoff/ns-3"
    );
    for (i, (name, ..)) in scenarios.iter().enumerate() {
        let x = median(&xoff[i]);
        let (n, ratio) = if other[i].is_empty() {
            ("-".to_string(), "-".to_string())
        } else {
            let n = median(&other[i]);
            (
                format!("{:.4} (median of {})", n / 1e6, other[i].len()),
                format!("{:.1}x", x / n),
            )
        };
        println!(
            "{:<14} {:>28} {:>28} {:>10}",
            name,
            format!("{:.2} (median of {})", x / 1e6, xoff[i].len()),
            n,
            ratio
        );
    }
    if xoff.len() == 2 {
        println!(
            "leafspine16 / leafspine128 (xoff): {:.2}x (goal <= 1.5x); leafspine16 goal >= 10 M packet-hops/s",
            median(&xoff[0]) / median(&xoff[1])
        );
    }
}

//! The experiment runner: the virtual-time WebSearch runs (PFC on one switch; BFC vs PFC on
//! the paper-scale leaf-spine, shortened). The real-frame 8:1 incast (root) runs as the real
//! half of `xoff repro sim2real` (`tools/tests/repro.rs`).

use crate::common;

use common::{repo, serial};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A copy of experiment `file` in a temporary directory with `duration` (and the other
/// `key = value` lines in `set`, e.g. `scheme = [...]`) replaced; paths made absolute.
fn shortened(file: &str, duration: &str, set: &[(&str, &str)], tag: &str) -> PathBuf {
    let src = repo().join(file);
    let dir = src.parent().expect("experiment directory");
    let text = std::fs::read_to_string(&src).expect("read experiment");
    let mut out = String::new();
    for line in text.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let val = line.split_once('=').map_or("", |(_, v)| v.trim());
        let l = match key {
            "duration" => format!("duration = \"{duration}\""),
            "topology" | "cdf" => {
                let rel = val.trim_matches('"');
                format!("{key} = \"{}\"", dir.join(rel).display())
            }
            k => match set.iter().find(|(s, _)| *s == k) {
                Some((s, v)) => format!("{s} = {v}"),
                None => line.to_string(),
            },
        };
        out.push_str(&l);
        out.push('\n');
    }
    let path = std::env::temp_dir().join(format!("{}.toml", common::unique(tag)));
    std::fs::write(&path, out).expect("write experiment");
    path
}

fn run(file: &str, tag: &str) -> (Value, PathBuf) {
    run_path(&repo().join(file), tag)
}

fn run_path(file: &Path, tag: &str) -> (Value, PathBuf) {
    let out = std::env::temp_dir().join(common::unique(tag));
    let v = common::run_experiment(file, &out);
    for stem in [
        "fct_slowdown",
        "fct_cdf",
        "queue_depth",
        "queue_max",
        "pause_timeline",
    ] {
        for ext in ["png", "svg"] {
            let p = out.join(format!("{stem}.{ext}"));
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            assert!(len > 0, "missing plot {}", p.display());
        }
    }
    (v, out)
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn drops(c: &Value) -> u64 {
    c["switch_drops"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
}

/// The numbers of a timeline series in results.json.
fn series(c: &Value, k: &str) -> Vec<f64> {
    c["timeline"][k]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Virtual time: the WebSearch experiment runs every cell, completes every flow and is
/// deterministic (same seed, same results). Its cells differ: without PFC the switch drops and
/// flows retransmit, with PFC it pauses and drops nothing; the pause and queue timelines are
/// sampled in virtual time.
#[test]
fn websearch_virtual_runs_and_is_deterministic() {
    // Not root, but keeps the CPU off the real-frame run.
    let _g = serial();
    let (a, oa) = run("deploy/experiments/websearch-pfc.toml", "ew");
    let (b, ob) = run("deploy/experiments/websearch-pfc.toml", "ew");
    let cells = a["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 4);
    for c in cells {
        let s = &c["summary"];
        assert!(n(s, "flows") > 100, "{c}");
        assert_eq!(n(s, "flows"), n(s, "completed"), "{c}");
        assert!(s["slowdown"]["p50"].as_f64().unwrap_or(0.0) >= 1.0, "{c}");
        assert!(!series(c, "t_us").is_empty(), "no timeline: {c}");
        assert!(series(c, "max_queue_bytes").iter().any(|&x| x > 0.0));
        if c["params"]["scheme"] == "pfc" {
            assert_eq!(drops(c), 0, "{c}");
            assert!(n(c, "pfc_pause_frames") > 0, "PFC never paused: {c}");
            assert_eq!(n(&c["audit"], "lossless_lost"), 0, "{c}");
            assert!(series(c, "pauses").last().is_some_and(|&x| x > 0.0));
        } else {
            assert!(drops(c) > 0 && n(s, "retx") > 0, "no loss without PFC: {c}");
            assert_eq!(n(c, "pfc_pause_frames"), 0, "{c}");
        }
    }
    for (x, y) in cells.iter().zip(b["cells"].as_array().expect("cells")) {
        assert_eq!(x["summary"], y["summary"]);
        assert_eq!(x["timeline"], y["timeline"]);
        assert_eq!(x["pfc_pause_frames"], y["pfc_pause_frames"]);
    }
    let _ = std::fs::remove_dir_all(oa);
    let _ = std::fs::remove_dir_all(ob);
}

/// The paper-scale BFC experiment (128 hosts, leaf-spine, 100 Gbit/s), shortened to 300 µs
/// of arrivals: every cell completes its flows, BFC cells send BFC pauses (some to the host
/// stacks, which honour them) and no PFC frames, keep queues far below PFC's, the timelines
/// in results.json are non-empty, the per-cell timeline CSVs and the plots are written, and
/// the run is deterministic.
#[test]
fn websearch_bfc_virtual_pauses_and_is_deterministic() {
    let _g = serial();
    let file = shortened(
        "deploy/experiments/websearch-bfc.toml",
        "300us",
        &[("scheme", r#"["bfc", "bfc-stochastic", "pfc"]"#)],
        "ewb",
    );
    let (a, oa) = run_path(&file, "ewb");
    let (b, ob) = run_path(&file, "ewb");
    let cells = a["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 3, "{a}");
    let maxq = |scheme: &str| {
        cells
            .iter()
            .find(|c| c["params"]["scheme"] == scheme)
            .map_or(0, |c| n(c, "max_queue_bytes"))
    };
    for c in cells {
        let s = &c["summary"];
        let scheme = c["params"]["scheme"].as_str().unwrap_or("");
        eprintln!(
            "{scheme}: flows {} done {} drops {} pfc {} bfc {} coll {} maxq {} p99 {}",
            n(s, "flows"),
            n(s, "completed"),
            drops(c),
            n(c, "pfc_pause_frames"),
            n(c, "bfc_pauses"),
            n(c, "bfc_collisions"),
            n(c, "max_queue_bytes"),
            s["slowdown"]["p99"]
        );
        assert!(n(s, "flows") > 200, "{c}");
        assert_eq!(n(s, "flows"), n(s, "completed"), "{c}");
        let t = series(c, "t_us");
        assert!(t.len() > 10, "timeline not sampled: {c}");
        assert_eq!(series(c, "max_queue_bytes").len(), t.len());
        assert_eq!(series(c, "pauses").len(), t.len());
        assert!(series(c, "max_queue_bytes").iter().any(|&x| x > 0.0));
        assert!(
            c["timeline"]["ports"]
                .as_object()
                .is_some_and(|p| !p.is_empty()),
            "{c}"
        );
        let dir = Path::new(c["dir"].as_str().unwrap_or(""));
        let csv = std::fs::read_to_string(dir.join("timeline.csv")).unwrap_or_default();
        assert!(csv.lines().count() == t.len() + 1, "timeline.csv");
        if scheme.starts_with("bfc") {
            assert!(n(c, "bfc_pauses") > 0, "BFC never paused: {c}");
            assert!(n(c, "host_bfc_pauses_rx") > 0, "no host was paused: {c}");
            assert!(series(c, "pauses").last().is_some_and(|&x| x > 0.0));
            assert_eq!(n(c, "pfc_pause_frames"), 0, "{c}");
            assert_eq!(drops(c), 0, "{c}");
        } else {
            assert_eq!(n(c, "bfc_pauses"), 0, "{c}");
        }
    }
    assert!(
        maxq("bfc") * 2 < maxq("pfc"),
        "BFC should keep queues short: bfc {} pfc {}",
        maxq("bfc"),
        maxq("pfc")
    );
    for (x, y) in cells.iter().zip(b["cells"].as_array().expect("cells")) {
        for k in [
            "summary",
            "timeline",
            "bfc_pauses",
            "bfc_collisions",
            "switch_drops",
        ] {
            assert_eq!(x[k], y[k], "{k} differs between two runs of one seed");
        }
    }
    let _ = std::fs::remove_dir_all(oa);
    let _ = std::fs::remove_dir_all(ob);
    let _ = std::fs::remove_file(file);
}

//! The experiment runner: the real-frame 8:1 incast (root) and the virtual-time WebSearch run.

mod common;

use common::{repo, require_root, serial, xoff};
use serde_json::Value;
use std::process::Command;

fn run(file: &str, tag: &str) -> (Value, std::path::PathBuf) {
    let out = std::env::temp_dir().join(common::unique(tag));
    let o = Command::new(xoff())
        .args(["experiment", "run"])
        .arg(repo().join(file))
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .output()
        .expect("run xoff experiment");
    assert!(
        o.status.success(),
        "experiment failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("JSON: {e}: {}", String::from_utf8_lossy(&o.stdout));
    });
    for stem in ["fct_slowdown", "fct_cdf", "queue_depth", "pause_timeline"] {
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

/// PFC cells: every flow completes with zero loss by the receivers' sequence check and zero
/// XDP_STATISTICS drops (switch ports and host sockets), and no switch drops. The cell without
/// flow control loses packets.
#[test]
fn incast_pfc_is_lossless_and_no_flow_control_is_not() {
    let _g = serial();
    require_root();
    let (v, out) = run("deploy/experiments/incast-pfc.toml", "ei");
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 4, "{v}");
    for c in cells {
        let scheme = c["params"]["scheme"].as_str().unwrap_or("");
        let s = &c["summary"];
        let drops: u64 = c["switch_drops"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        eprintln!(
            "{}: flows {} done {} rx_lost {} xdp_lost {} drops {drops} pauses {} retx {}",
            c["cell"],
            n(s, "flows"),
            n(s, "completed"),
            n(c, "receiver_lost"),
            n(c, "xdp_lost"),
            n(c, "pfc_pause_frames"),
            n(s, "retx")
        );
        assert_eq!(n(s, "flows"), 8, "{c}");
        assert!(
            c["hosts_incomplete"]
                .as_array()
                .is_some_and(|a| a.is_empty()),
            "{c}"
        );
        if scheme == "pfc" {
            assert_eq!(n(s, "completed"), 8, "{c}");
            assert_eq!(n(c, "receiver_lost"), 0, "{c}");
            assert_eq!(n(c, "xdp_lost"), 0, "{c}");
            assert_eq!(drops, 0, "{c}");
            assert_eq!(n(s, "retx"), 0, "{c}");
            assert!(n(c, "pfc_pause_frames") > 0, "PFC never paused: {c}");
        } else {
            assert!(
                n(c, "receiver_lost") > 0 && drops > 0,
                "no loss without PFC: {c}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(out);
}

/// Virtual time: the WebSearch experiment runs every cell, completes every flow and is
/// deterministic (same seed, same results).
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
    }
    assert_eq!(a["cells"].to_string().len(), b["cells"].to_string().len());
    for (x, y) in cells.iter().zip(b["cells"].as_array().expect("cells")) {
        assert_eq!(x["summary"], y["summary"]);
    }
    let _ = std::fs::remove_dir_all(oa);
    let _ = std::fs::remove_dir_all(ob);
}

//! `xoff repro all --quick`: every reproduced row of every built paper holds (the binary exits
//! 0 only then), and the report names each paper. This is where the DSH §V-A / §V-B, BFC
//! §6.1, BFC §6.2 Fig. 9 / Fig. 10, Aquarius §4, Pyrrha §5.2 / App. B and Proteus §II fidelity
//! checks run (`tools/src/repro/`). And `xoff repro sim2real` (root): real frames and virtual
//! time agree, and the real-frame experiment runner's 8:1 incast is lossless with PFC.

use crate::common;

use common::{require_root, serial};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn repro_all_quick_has_no_broken_row() {
    let _g = serial();
    let out = std::env::temp_dir().join(format!("xoff-repro-{}", std::process::id()));
    // Two cells at once on the 2 cores this test holds alone (`serial`): the report equals
    // `--jobs 1`'s but for wall times, and CI waits 152 s instead of 258 s (2-vCPU EPYC).
    let o = Command::new(env!("CARGO_BIN_EXE_xoff"))
        .args(["repro", "all", "--quick", "--jobs", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    println!("{report}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "broken rows:\n{report}");
    assert_eq!(report.matches("**BROKEN**").count(), 0);
    for s in [
        "## DSH",
        "## PFC",
        "## BFC",
        "## Aquarius",
        "## Pyrrha",
        "## Proteus",
        // BFC §6.2 runs the 128-host Clos (shortened under --quick), with and without incast.
        "| §6.2.2 Fig. 9 |",
        "| §6.2.2 Fig. 10 |",
        // DSH §V-B (the 256-server leaf-spine) is too slow for --quick: the report says so.
        "§V-B (Fig. 14, `deploy/experiments/dsh-websearch.toml`) is not run under `--quick`",
        "`--quick`: flows start for",
    ] {
        assert!(report.contains(s), "{s}");
    }
    // Both §6.2 figures set BFC against the paper's own baselines, DCQCN, DCTCP and HPCC over PFC.
    for fig in ["9", "10"] {
        for cc in ["HPCC", "DCQCN", "DCTCP"] {
            let row = format!(
                "| §6.2.2 Fig. {fig} | short-flow (≤ 10 KB) p99 FCT slowdown, {cc} + PFC / BFC"
            );
            assert!(report.contains(&row), "{row}");
        }
    }
    // Fig. 9's variant with 64 queues per port, the one that matches at full length.
    assert!(
        report.contains(
            "| §6.2.2 Fig. 9, 64 queues per port | short-flow (≤ 10 KB) p99 FCT slowdown, HPCC \
             + PFC / BFC with 64 queues"
        ),
        "no 64-queue Fig. 9 row"
    );
    // Fig. 9 with the ACKs in their own class, BFC-32 against the baselines on those switches.
    assert!(
        report.contains(
            "| §6.2.2 Fig. 9, ACK class | short-flow (≤ 10 KB) p99 FCT slowdown, HPCC + PFC / BFC"
        ),
        "no ACK-class Fig. 9 row"
    );
    // Every built paper reports rows with the paper's number and a verdict; none is pending.
    assert!(report.matches("| ok |").count() >= 40, "{report}");
    assert!(!report.contains("not yet:"), "{report}");
}

#[test]
fn unknown_paper_is_a_clear_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_xoff"))
        .args(["repro", "nosuch", "--out", "/tmp/xoff-repro-unused"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("unknown paper `nosuch`"), "{e}");
    // The message lists every paper, the two latest included, and sim2real.
    assert!(e.contains("pyrrha, proteus"), "{e}");
    assert!(e.contains("sim2real"), "{e}");
}

/// `xoff repro sim2real --quick` (root): the 8:1 incast and the 2-switch chain on real frames
/// and in virtual time agree within the report's bands (the binary exits 0 only then).
/// `--quick` runs the PFC cells only (SIH and DSH for the incast; about 40 s where the full
/// run's eight cells take 80 s); the cells without flow control are rows of the full run.
///
/// Its real half is the real-frame experiment runner's 8:1 incast
/// (`deploy/experiments/incast-pfc.toml`), checked as it always was: PFC cells complete every
/// flow with zero loss by the receivers' sequence check, zero XDP_STATISTICS drops (switch
/// ports and host sockets), no switch drops and no retransmission; the switches' lossless
/// audit balances.
#[test]
fn sim2real_agrees_and_the_real_incast_is_lossless_with_pfc() {
    let _g = serial();
    require_root();
    let out = std::env::temp_dir().join(common::unique("s2r"));
    let o = Command::new(common::xoff())
        .args(["repro", "sim2real", "--quick", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap_or_default();
    println!("{report}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.status.success(),
        "sim2real: broken rows or failure:\n{report}"
    );
    assert_eq!(report.matches("**BROKEN**").count(), 0);
    for s in [
        "8:1 incast",
        "2-switch PFC chain",
        "PFC PAUSE frames sent",
        "queue level",
        "peak queue",
    ] {
        assert!(report.contains(s), "{s}");
    }
    let real: PathBuf = out.join("sim2real/incast-pfc/real/results.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&real).expect("real results.json"))
        .expect("results.json");
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{v}");
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
        print_senders(c);
        // The switches' lossless audit (taken after the hosts stopped) balances in every
        // cell and agrees with the independent counters: what it calls lost is what the
        // switches dropped plus what the AF_XDP rings dropped.
        let a = &c["audit"];
        eprintln!("  audit: {a}");
        assert!(
            a["unbalanced"].as_array().is_some_and(|u| u.is_empty()),
            "audit does not balance: {c}"
        );
        assert_eq!(n(a, "lost"), drops + n(c, "xdp_lost"), "{c}");
        assert_eq!(scheme, "pfc", "{c}");
        assert_eq!(a["lossless_claimed"].as_bool(), Some(true), "{c}");
        assert_eq!(n(s, "flows"), 8, "{c}");
        assert!(
            c["hosts_incomplete"]
                .as_array()
                .is_some_and(|a| a.is_empty()),
            "{c}"
        );
        assert_eq!(n(s, "completed"), 8, "{c}");
        assert_eq!(n(c, "receiver_lost"), 0, "{c}");
        assert_eq!(n(c, "xdp_lost"), 0, "{c}");
        assert_eq!(drops, 0, "{c}");
        assert_eq!(n(s, "retx"), 0, "{c}");
        assert!(n(c, "pfc_pause_frames") > 0, "PFC never paused: {c}");
        assert_eq!(n(a, "lossless_lost"), 0, "{c}");
    }
    let _ = std::fs::remove_dir_all(out);
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Diagnostics of a real-frame cell: each sender's per-flow timer record from its host JSON
/// (`<cell dir>/<host>.json`), so a spurious timeout shows how long the timer ran, against
/// which RTO, and how long it was frozen by pauses.
fn print_senders(c: &Value) {
    let Ok(rd) = std::fs::read_dir(c["dir"].as_str().unwrap_or("")) else {
        return;
    };
    let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let ms = |f: &Value, k: &str| n(f, k) as f64 / 1e9;
    for p in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let Some(h) = std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        for f in h["tx"].as_array().into_iter().flatten() {
            eprintln!(
                "  {} flow {}: timeouts {} retx {} max_rtt {:.1} ms max_stall {:.1} ms \
                 srtt {:.1} ms rto {:.1} ms max_rto {:.1} ms paused {:.1} ms",
                h["host"].as_str().unwrap_or("?"),
                n(f, "id"),
                n(f, "timeouts"),
                n(f, "retx"),
                ms(f, "max_rtt_ps"),
                ms(f, "max_stall_ps"),
                ms(f, "srtt_ps"),
                ms(f, "rto_ps"),
                ms(f, "max_rto_ps"),
                ms(f, "paused_ps"),
            );
        }
    }
}

//! `xoff repro all --quick`: every reproduced row of every built paper holds (the binary exits
//! 0 only then), and the report names each paper. This is where the DSH §V-A, BFC §6.1,
//! BFC §6.2 Fig. 10, Aquarius §4, Pyrrha §5.2 / App. B and Proteus §II fidelity checks run
//! (`tools/src/repro/`).

use std::process::Command;

#[test]
fn repro_all_quick_has_no_broken_row() {
    let out = std::env::temp_dir().join(format!("xoff-repro-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_xoff"))
        .args(["repro", "all", "--quick", "--out"])
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
        // BFC §6.2 runs the 128-host Clos (shortened under --quick).
        "| §6.2.2 Fig. 10 |",
        "`--quick`: flows start for",
    ] {
        assert!(report.contains(s), "{s}");
    }
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
    // The message lists every paper, the two latest included.
    assert!(e.contains("pyrrha, proteus"), "{e}");
}

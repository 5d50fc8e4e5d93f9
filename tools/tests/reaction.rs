//! `xoff bench reaction` on real frames (issue 20 item 5): the XDP program stamps every frame,
//! the switch times each PFC XOFF from the frame that crossed the threshold, and the harness
//! reports percentiles for busy and adaptive polling. Requires root. Timing figures are the
//! machine's, so only their consistency is checked here, never their size.

use std::process::Command;

#[test]
fn every_case_measures_reactions_and_its_percentiles_are_ordered() {
    let out = Command::new(env!("CARGO_BIN_EXE_xoff"))
        .args(["bench", "reaction", "--duration", "1.5", "--json"])
        .output()
        .expect("xoff bench reaction");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let cases: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let cases = cases.as_array().expect("cases");
    assert_eq!(cases.len(), 4, "busy/adaptive x idle/hog");
    for c in cases {
        let r = &c["reaction"];
        let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
        let bursts = c["bursts"].as_u64().unwrap();
        println!("{c}");
        // Every burst crosses XOFF at least once; a stamped trigger is what is timed.
        assert!(bursts > 0 && n("count") > 0, "no reaction measured: {c}");
        assert!(
            n("count") <= 4 * bursts,
            "more XOFFs timed than the bursts explain: {c}"
        );
        assert!(
            0 < n("p50_ns") && n("p50_ns") <= n("p99_ns") && n("p99_ns") <= n("p999_ns"),
            "{c}"
        );
        assert!(n("p999_ns") <= n("max_ns"), "{c}");
        assert_eq!(
            c["recommended_response_ps"].as_u64().unwrap(),
            n("p999_ns").div_ceil(1000) * 1_000_000
        );
    }
}

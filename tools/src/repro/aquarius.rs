//! Aquarius (Li et al., "Scaling Switch-driven Flow Control with Aquarius", APNet '23), §4
//! micro-benchmark (Fig. 4/5) in virtual time at the paper's scale: 100 Gbit/s, 1 µs links,
//! 8 queues per port, host NICs honouring per-flow pauses
//! (`deploy/sim/aquarius-microbenchmark.toml`). f1 (33 Gbit/s), f2 and f3 (line rate) go to
//! R1, f4 (line rate) to R2; f1–f3 are forced into one egress queue at L1 toward R1, f3 and f4
//! into one queue at L2 toward L1. BFC runs the same setup with `scheme = "bfc-single"`
//! (every flow in queue 0), which in this topology is exactly the paper's forcing.
//!
//! The paper's Fig. 5 is a bar chart without numbers; its text gives the shape: a "relatively
//! fair partition" of R1 among f1–f3 under Aquarius, f4 "not affected", BFC degrading f4.

use super::{sim_file, Check, Ctx, Row, Section};
use anyhow::{Context, Result};
use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use std::fmt::Write;

const G100: f64 = 100e9;

/// Receive rate (Gbit/s) of f1..f4 over 100–600 µs, and the fabric after the run.
fn run(text: &str) -> Result<([f64; 4], Fabric)> {
    let t = Topology::parse(text, &sim_file("aquarius-microbenchmark.toml"))?;
    let mut f = Fabric::new(&t, &FabricOptions::default())?;
    f.run();
    let (from, to) = (100_000_000u64, 600_000_000u64);
    let mut r = [0.0; 4];
    for (i, name) in ["f1", "f2", "f3", "f4"].iter().enumerate() {
        let s = f.probes().series(name).context("flow probe")?;
        let at = |t: u64| s.iter().find(|x| x.0 >= t).copied().context("probe window");
        let (a, b) = (at(from)?, at(to)?);
        r[i] = (b.1 - a.1) as f64 * 8.0 / ((b.0 - a.0) as f64 / 1e12) / 1e9;
    }
    Ok((r, f))
}

/// No loss, no drop, no reordering anywhere.
fn clean(f: &Fabric) -> bool {
    let rep = f.report();
    rep.flows.iter().all(|x| x.lost == 0 && x.reordered == 0)
        && rep
            .switches
            .iter()
            .all(|s| s.ports.iter().all(|p| p.drops.values().sum::<u64>() == 0))
}

/// The counters behind the result: contribution-aware pauses at L1 (none for Q_high), every
/// pause resumed, f3 moved to a reserved queue at L2 (allocated = released), and L2 heard
/// every PAUSE/RESUME L1 sent on that link.
fn mechanisms(f: &Fabric, log: &mut String) -> Result<bool> {
    let stats = |sw: &str| -> Result<serde_json::Value> {
        let st = f.switch(sw).and_then(|s| s.scheme_stats(f.now()));
        Ok(serde_json::to_value(
            st.and_then(|s| s.aquarius).context("aquarius stats")?,
        )?)
    };
    let (l1, l2) = (stats("l1")?, stats("l2")?);
    let port = |v: &serde_json::Value, i: usize, k: &str| v["ports"][i][k].as_u64().unwrap_or(0);
    let _ = writeln!(log, "l1 {l1}\nl2 {l2}");
    // l1 ports: s1, s2, down, r1, r2; l2 ports: s3, s4, up.
    let mut ok = port(&l1, 3, "marked_contribution") > 0 && port(&l1, 3, "marked_qhigh") == 0;
    for i in 0..3 {
        ok &= port(&l1, i, "pauses_sent_qhigh") == 0
            && port(&l1, i, "pauses_sent_contribution") == port(&l1, i, "resumes_sent");
    }
    ok &= port(&l2, 2, "flows_reassigned") > 0
        && port(&l2, 2, "rsv_allocations") > 0
        && port(&l2, 2, "rsv_allocations") == port(&l2, 2, "rsv_releases")
        && port(&l2, 2, "pauses_received")
            == port(&l1, 2, "pauses_sent_contribution") + port(&l1, 2, "pauses_sent_qhigh")
        && port(&l2, 2, "resumes_received") == port(&l1, 2, "resumes_sent");
    Ok(ok)
}

pub fn run_section(_ctx: &Ctx<'_>) -> Result<Section> {
    let text = std::fs::read_to_string(sim_file("aquarius-microbenchmark.toml"))?;
    let (aq, fa) = run(&text)?;
    let bfc_text = text
        .replace("scheme = \"aquarius\"", "scheme = \"bfc-single\"")
        .lines()
        .filter(|l| !l.starts_with("aquarius = "))
        .collect::<Vec<_>>()
        .join("\n");
    let (bfc, fb) = run(&bfc_text)?;
    let mut log = format!(
        "Gbit/s over 100–600 µs: Aquarius f1 {:.1} f2 {:.1} f3 {:.1} f4 {:.1}; BFC f1 {:.1} \
         f2 {:.1} f3 {:.1} f4 {:.1}\n",
        aq[0], aq[1], aq[2], aq[3], bfc[0], bfc[1], bfc[2], bfc[3]
    );
    let mech = mechanisms(&fa, &mut log)?;
    let third = G100 / 3.0 / 1e9;
    let fair4 = G100 / 1e9 - third;
    let mut rows = Vec::new();
    for (i, &r) in aq[..3].iter().enumerate() {
        rows.push(
            Row::new(
                "§4 Fig. 5(a)",
                &format!("Aquarius f{} throughput, a third of R1's link", i + 1),
                "\"a relatively fair partition of bottleneck link capacity between f1 to f3\"",
                r,
                "Gbit/s",
            )
            .check(Check::Within {
                target: third,
                tol: 0.2,
            }),
        );
    }
    rows.push(
        Row::new(
            "§4 Fig. 5(a)",
            "Aquarius f4 throughput",
            "\"ensuring the throughput of f4 is not affected\"",
            aq[3],
            "Gbit/s",
        )
        .check(Check::AtLeast(0.9 * fair4))
        .note(format!(
            "f3 and f4 share L2's 100 Gbit/s uplink and f3 is owed a third of R1, so f4's \
             max-min fair rate is {fair4:.1} Gbit/s, not line rate; the band is 90 % of that"
        )),
    );
    rows.push(
        Row::new(
            "§4 Fig. 5(b)",
            "BFC f4 / Aquarius f4 (same setup)",
            "\"BFC inevitably pauses f4\"",
            bfc[3] / aq[3],
            "x",
        )
        .check(Check::AtMost(0.5)),
    );
    rows.push(Row::holds(
        "§3.2–3.3",
        "contribution-aware pauses at L1, f3 moved to rsvQ at L2, every pause resumed",
        "the mechanisms of §3.2 and §3.3",
        mech,
    ));
    rows.push(Row::holds(
        "§4",
        "no loss, no drop, no reordering (Aquarius and BFC runs)",
        "Aquarius keeps per-hop flow control lossless and in order",
        clean(&fa) && clean(&fb),
    ));
    Ok(Section {
        title: "Aquarius (contribution-aware pausing, opportunistic re-assigning)".into(),
        setup: "§4 micro-benchmark (Fig. 4) as the paper: 100 Gbit/s, 1 µs links, 8 queues per \
                port, f1 at 33 Gbit/s and f2–f4 at line rate, f1–f3 forced into one queue at \
                L1, f3 and f4 into one queue at L2 (`deploy/sim/aquarius-microbenchmark.toml`, \
                600 µs, measured over 100–600 µs); BFC on the same setup. The §4 realistic \
                Web Server run is not here yet (issue 16). Not scaled."
            .into(),
        rows,
        log,
        ..Section::default()
    })
}

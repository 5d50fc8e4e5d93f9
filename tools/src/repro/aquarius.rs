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
//!
//! And §4's realistic run (Fig. 6, with §2.2.2's Fig. 2 for BFC-8 vs BFC-32):
//! `deploy/experiments/aquarius-web.toml`, the paper's 48-switch, 128-server 1:1 fat-tree at
//! 100 Gbit/s and 1 µs, 12 MB per switch, ECMP, Web Server sizes at 70 % load plus 5 % of
//! 100-to-1 incast (50–200 KB); BFC-32, BFC-8 and Aquarius-8 on short-flow (< 3 KB) average
//! and p99 FCT and large-flow average FCT, through the experiment machinery as BFC §6.2's
//! Fig. 10 (`super::bfc`).

use super::{experiment_duration, experiment_file, sim_file, Check, Ctx, Row, Section};
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

/// Traffic window of the Web Server run under `--quick` (the file's is longer).
const WEB_QUICK: &str = "200us";
/// §4: "short flows (< 3KB)".
const SHORT: u64 = 3_000;
/// Large flows. The paper's are "> 1MB", but the Web Server CDF shipped (Homa's, as the
/// Proteus and Pyrrha runs use) ends at exactly 1 MB, so none would be; its top 1.5 % (at
/// least 500 KB) stand in for them.
const LARGE: u64 = 500_000;

/// FCT figures of one cell (µs): short-flow mean and p99, large-flow mean, their counts.
#[derive(Debug, Clone, Copy)]
struct Fct {
    short_avg: f64,
    short_p99: f64,
    large_avg: f64,
    shorts: usize,
    larges: usize,
}

/// Reads a cell's `flows.csv` (completed flows only; incomplete ones fail the lossless row).
fn fct(dir: &str) -> Result<Fct> {
    let path = std::path::Path::new(dir).join("flows.csv");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines
        .next()
        .context("flows.csv: empty")?
        .split(',')
        .collect();
    let col = |n: &str| head.iter().position(|h| *h == n).context(n.to_string());
    let (size_c, fct_c) = (col("size")?, col("fct_ps")?);
    let (mut short, mut large) = (Vec::new(), Vec::new());
    for l in lines {
        let v: Vec<&str> = l.split(',').collect();
        let (Some(sz), Some(f)) = (v.get(size_c), v.get(fct_c)) else {
            continue;
        };
        let (Ok(sz), Ok(f)) = (sz.parse::<u64>(), f.parse::<f64>()) else {
            continue; // not completed: no FCT
        };
        if sz < SHORT {
            short.push(f / 1e6);
        } else if sz >= LARGE {
            large.push(f / 1e6);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    short.sort_by(f64::total_cmp);
    let p99 = short
        .get(((short.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0);
    Ok(Fct {
        short_avg: mean(&short),
        short_p99: p99,
        large_avg: mean(&large),
        shorts: short.len(),
        larges: large.len(),
    })
}

/// §4 Fig. 6 and §2.2.2 Fig. 2: runs `aquarius-web.toml` into `OUT/aquarius-web/`.
fn web(ctx: &Ctx<'_>, log: &mut String) -> Result<Vec<Row>> {
    let file = experiment_file("aquarius-web.toml");
    let (res, _) = crate::experiment::run_file(
        &file,
        Some(ctx.out.join("aquarius-web")),
        ctx.quick.then_some(WEB_QUICK),
    )?;
    let cells = [
        ("BFC-32", [("scheme", "bfc"), ("queues", "32")]),
        ("BFC-8", [("scheme", "bfc"), ("queues", "8")]),
        ("Aquarius-8", [("scheme", "aquarius"), ("queues", "8")]),
    ];
    let mut f = Vec::new();
    let mut clean = true;
    let mut lossy = Vec::new();
    for (name, want) in &cells {
        let c = super::cell(&res, want)?;
        let x = fct(&c.dir)?;
        let drops: u64 = c.switch_drops.values().sum();
        let ok = drops == 0
            && c.receiver_lost == 0
            && c.summary.completed == c.summary.flows
            && c.hosts_incomplete.is_empty()
            && c.audit.failure().is_none();
        clean &= ok;
        if !ok {
            lossy.push(format!(
                "{name}: {drops} frames dropped at {} ports ({:?}), {} of {} flows completed",
                c.drops_by_port.len(),
                c.switch_drops,
                c.summary.completed,
                c.summary.flows
            ));
        }
        let a = &c.aquarius;
        let _ = writeln!(
            log,
            "web {name}: {} flows, {} completed; short (< {SHORT} B, {}) FCT avg {:.2} µs p99 \
             {:.2} µs; large (≥ {LARGE} B, {}) avg {:.1} µs; switch drops {drops} {:?}, receiver \
             lost {}, audit {:?}; BFC pauses {} collisions {}; Aquarius PAUSEs Q_high {} \
             contribution {}, RESUMEs {}, upstream: own queue paused {} moved to rsvQ {} no rsvQ \
             {} (rsvQ allocations {}), table collisions {}, most active flows on a port {}; host \
             per-flow PAUSEs honoured {}, unknown {}; peak queue {} B",
            c.summary.flows,
            c.summary.completed,
            x.shorts,
            x.short_avg,
            x.short_p99,
            x.larges,
            x.large_avg,
            c.drops_by_port,
            c.receiver_lost,
            c.audit.failure(),
            c.bfc_pauses,
            c.bfc_collisions,
            a.pauses_qhigh,
            a.pauses_contribution,
            a.resumes,
            a.queue_pauses,
            a.flows_reassigned,
            a.no_rsv,
            a.rsv_allocations,
            a.table_collisions,
            a.active_flows_max,
            a.host_pauses_rx,
            a.host_unknown,
            c.max_queue_bytes
        );
        f.push(x);
    }
    let (b32, b8, aq) = (f[0], f[1], f[2]);
    let t = super::cell(&res, &cells[2].1)?.aquarius;
    // Why Aquarius-8 does not reach the paper's figures here, from the run's own counters.
    let why = format!(
        "not reproduced: Aquarius-8 stays close to BFC-8. In this run the upstream side paused \
         the flow's own queue for {} PAUSEs (the flow alone in it: what BFC does), moved a flow \
         sharing its queue to rsvQ {} times, and found no empty queue for rsvQ {} times (then \
         the shared queue is paused: BFC-8's head-of-line blocking); {} of the {} PAUSEs came \
         from L > Q_high, which marks every flow of the queue, the short victims included, and \
         {} from contribution. With 32 queues per port the same code matches BFC-32 (a \
         diagnostic run with matrix queues = 32 for the aquarius cell), so the per-flow \
         mechanisms work and the gap is the isolation with 8 queues that the paper credits to \
         them: its rsvQ may be reserved statically (§5 leaves static vs dynamic open), and its \
         Q_high marking may spare low-contribution flows; open (issue 16)",
        t.queue_pauses,
        t.flows_reassigned,
        t.no_rsv,
        t.pauses_qhigh,
        t.pauses_qhigh + t.pauses_contribution,
        t.pauses_contribution,
    );
    let pair = |a: f64, b: f64| format!("({a:.2} / {b:.2} µs)");
    Ok(vec![
        Row::new(
            "§4 Fig. 6a",
            &format!(
                "short-flow (< 3 KB) average FCT, BFC-8 / Aquarius-8 {}",
                pair(b8.short_avg, aq.short_avg)
            ),
            "\"approximately 5.5× lower average\" than BFC-8",
            b8.short_avg / aq.short_avg,
            "x",
        )
        .check(Check::AtLeast(2.0))
        .note(format!(
            "band: clearly below BFC-8, at least 2× (the paper 5.5×); {why}"
        )),
        Row::new(
            "§4 Fig. 6b",
            &format!(
                "short-flow p99 FCT, BFC-8 / Aquarius-8 {}",
                pair(b8.short_p99, aq.short_p99)
            ),
            "\"5× lower 99th percentile tail\" than BFC-8",
            b8.short_p99 / aq.short_p99,
            "x",
        )
        .check(Check::AtLeast(2.0))
        .note("band: clearly below BFC-8, at least 2× (the paper 5×); why: the row above"),
        Row::new(
            "§4 Fig. 6a",
            &format!(
                "short-flow average FCT, Aquarius-8 / BFC-32 {}",
                pair(aq.short_avg, b32.short_avg)
            ),
            "\"comparable FCT for both short and large flows, with 4× fewer queues\"",
            aq.short_avg / b32.short_avg,
            "x",
        )
        .check(Check::AtMost(1.5))
        .note("band: within 1.5× of BFC-32; why it is not: the first Fig. 6a row"),
        Row::new(
            "§4 Fig. 6b",
            &format!(
                "short-flow p99 FCT, Aquarius-8 / BFC-32 {}",
                pair(aq.short_p99, b32.short_p99)
            ),
            "\"comparable FCT for both short and large flows, with 4× fewer queues\"",
            aq.short_p99 / b32.short_p99,
            "x",
        )
        .check(Check::AtMost(1.5))
        .note("band: within 1.5× of BFC-32; why it is not: the first Fig. 6a row"),
        Row::new(
            "§4 Fig. 6c",
            &format!(
                "large-flow (≥ 500 KB) average FCT, BFC-8 / Aquarius-8 {}",
                pair(b8.large_avg, aq.large_avg)
            ),
            "\"Aquarius attains a 15% faster completion time for large flows\"",
            b8.large_avg / aq.large_avg,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note("ordering only (the paper's 1.15× is within run-to-run noise of this band)"),
        Row::new(
            "§2.2.2 Fig. 2a",
            &format!(
                "short-flow average FCT, BFC-8 / BFC-32 {}",
                pair(b8.short_avg, b32.short_avg)
            ),
            "\"BFC-8 gets ... about 7.6× higher average\" FCT for short flows",
            b8.short_avg / b32.short_avg,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note("ordering: BFC-8 worse than BFC-32 (the paper 7.6×)"),
        Row::new(
            "§2.2.2 Fig. 2b",
            &format!(
                "short-flow p99 FCT, BFC-8 / BFC-32 {}",
                pair(b8.short_p99, b32.short_p99)
            ),
            "\"6× higher tail\" FCT for short flows",
            b8.short_p99 / b32.short_p99,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note("ordering: BFC-8 worse than BFC-32 (the paper 6×)"),
        Row::new(
            "§2.2.2 Fig. 2c",
            &format!(
                "large-flow average FCT, BFC-8 / BFC-32 {}",
                pair(b8.large_avg, b32.large_avg)
            ),
            "\"a 20% higher average FCT for large flows\"",
            b8.large_avg / b32.large_avg,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note("ordering only (the paper 1.2×)"),
        Row::holds(
            "§4",
            "Web Server run: no drop, no loss, every flow completes, audit balanced (BFC-32, \
             BFC-8, Aquarius-8)",
            "per-hop flow control is lossless",
            clean,
        )
        .note(if lossy.is_empty() {
            String::new()
        } else {
            format!(
                "{}; the FCT rows above then compare completed flows only",
                lossy.join("; ")
            )
        }),
    ])
}

pub fn run_section(ctx: &Ctx<'_>) -> Result<Section> {
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
    rows.extend(web(ctx, &mut log)?);
    let window = if ctx.quick {
        format!(
            "`--quick`: flows start for {WEB_QUICK} instead of the file's {} (fewer flows, the \
             same network and load)",
            experiment_duration("aquarius-web.toml")?
        )
    } else {
        format!(
            "flows start for {} (scaled: the paper does not say how long it runs; a few \
             minutes per scheme here)",
            experiment_duration("aquarius-web.toml")?
        )
    };
    Ok(Section {
        title: "Aquarius (contribution-aware pausing, opportunistic re-assigning)".into(),
        setup: format!(
            "§4 micro-benchmark (Fig. 4) as the paper: 100 Gbit/s, 1 µs links, 8 queues per \
             port, f1 at 33 Gbit/s and f2–f4 at line rate, f1–f3 forced into one queue at L1, \
             f3 and f4 into one queue at L2 (`deploy/sim/aquarius-microbenchmark.toml`, 600 \
             µs, measured over 100–600 µs); BFC on the same setup. Not scaled. §4 realistic \
             Web Server run (Fig. 6; Fig. 2 of §2.2.2): `deploy/experiments/aquarius-web.toml`, \
             the paper's 3-layer fat-tree of 48 switches and 128 servers at 1:1 \
             (`topo/fattree128.toml`: 2 pods of 8 ToRs and 8 aggregation switches, 16 cores, 8 \
             servers per ToR), 100 Gbit/s, 1 µs, ECMP, 12 MB per switch; Web Server sizes with \
             Poisson arrivals at 70 % of every NIC plus 5 % of 100-to-1 incast events (50–200 \
             KB per sender); BFC-32, BFC-8, Aquarius-8 (queues per port = NIC queues); hosts \
             with a 1-BDP window and no end-to-end congestion control, honouring BFC's \
             per-queue and Aquarius's per-flow pauses; MTU 1500 B; {window}, then every flow \
             finishes; per-flow CSVs in `aquarius-web/`. Large flows: ≥ 500 KB (the Web \
             Server CDF here ends at 1 MB, the paper's \"> 1MB\" would be empty)."
        ),
        rows,
        log,
        ..Section::default()
    })
}

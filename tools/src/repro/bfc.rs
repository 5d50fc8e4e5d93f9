//! BFC (Goyal et al., "Backpressure Flow Control", NSDI'22), §6.1: the SwitchX testbed
//! experiments of Fig. 6–8 in virtual time at the paper's scale (100 Gbit/s, 16 queues per
//! port, 1 µs links, host NICs running BFC as §5), every switch on `scheme = "bfc"`.
//!
//! * Fig. 7: a group-2 flow (via switch 1) and a group-3 flow (via switch 3) compete at the
//!   switch 2 → receiver 2 link (`deploy/sim/bfc-two-flows.toml`). The queue of each stays near
//!   `Th = HRTT·μ/N_active`; each flow runs out of packets at most 20 % of the time (App. A);
//!   the link utilisation the paper reports is close to 100 %.
//! * Fig. 8: three flow groups (`deploy/sim/bfc-three-groups.toml`); dynamic queue assignment
//!   gives group-1 flows lower and tighter FCTs than stochastic assignment.
//!
//! And §6.2 Fig. 10 (`deploy/experiments/bfc-fig10.toml`): the 128-host, 8-leaf, 8-spine Clos
//! at 2:1 oversubscription, the Google workload with lognormal (σ = 2) arrivals at 60 % core
//! load, no incast; short-flow p99 FCT slowdown of BFC below PFC's and below no flow control's,
//! and below the paper's own baselines, PFC with DCQCN, DCTCP and HPCC on the hosts
//! (`deploy/experiments/bfc-fig10-cc.toml`, issue 19).

use super::{experiment_duration, experiment_file, sim_file, Check, Ctx, Row, Section};
use crate::plot::{write_chart, Chart};
use anyhow::{Context, Result};
use dataplane::config::Scheme;
use dataplane::fabric::{Fabric, FabricOptions, ProbeTarget, QueueCounter};
use dataplane::Topology;
use std::fmt::Write;

const G100: f64 = 100e9;
/// Default HRTT at 100 Gbit/s, 1 µs: 2 µs + 2 × 1538 B of wire time.
const HRTT_PS: u64 = 2_246_080;
/// Measurement window of the Fig. 7 runs (the flows are long-lived; 20 µs of start-up).
const WINDOW: std::ops::RangeInclusive<u64> = 20_000_000..=180_000_000;

fn port_index(f: &Fabric, sw: &str, port: &str) -> Result<usize> {
    f.switch(sw)
        .context(sw.to_string())?
        .shared
        .spec
        .ports
        .iter()
        .position(|p| p.name == port)
        .with_context(|| format!("{sw}:{port}"))
}

/// What one Fig. 7 run showed.
struct Fig7 {
    /// s2 → r utilisation (wire bits incl. preamble and gap / line rate).
    util: f64,
    /// Per queue: peak and mean depth (bytes) and the share of time out of packets.
    queues: Vec<(u64, f64, f64)>,
    /// Nothing lost or dropped anywhere; both flows delivered; signals balanced.
    sound: bool,
    /// Queue-0 depth over time (µs, KB), for the plot.
    trace: Vec<(f64, f64)>,
}

/// Fig. 7 with `resume` on every switch and `group3_delay` on switch 3's links (`None`: as
/// shipped, every link 1 µs).
fn fig7(resume: &str, group3_delay: Option<u64>, log: &mut String) -> Result<Fig7> {
    let p = sim_file("bfc-two-flows.toml");
    let text = std::fs::read_to_string(&p)?.replace(
        "scheme = \"bfc\"",
        &format!("scheme = \"bfc\"\nbfc = {{ resume = \"{resume}\" }}"),
    );
    let mut t = Topology::parse(&text, &p)?;
    if let Some(d) = group3_delay {
        for s in &mut t.switches {
            if s.name == "s3" {
                s.defaults.delay = Some(dataplane::units::Time(d));
            }
            if s.name == "s2" {
                let from3 = s.ports.iter_mut().find(|p| p.name == "from3");
                from3.context("s2:from3")?.settings.delay = Some(dataplane::units::Time(d));
            }
        }
    }
    let mut f = Fabric::new(&t, &FabricOptions::default())?;
    let shared = f.switch("s2").context("s2")?.shared.clone();
    let r = port_index(&f, "s2", "r")?;
    for q in 0..2 {
        f.add_probe(
            format!("d{q}"),
            ProbeTarget::Queue {
                shared: shared.clone(),
                port: r,
                queue: q,
                counter: QueueCounter::DeqPkts,
            },
        );
    }
    f.run();
    let rep = f.report();
    let mut sound = rep.flows.iter().all(|x| x.lost == 0 && x.rx_pkts > 1000)
        && rep
            .switches
            .iter()
            .all(|s| s.ports.iter().all(|p| p.drops.values().sum::<u64>() == 0));
    let bfc = f
        .switch("s2")
        .and_then(|s| s.scheme_stats(f.now()))
        .and_then(|s| s.bfc)
        .context("s2 BFC stats")?;
    for up in ["from1", "from3"] {
        let ps = &bfc.ports[port_index(&f, "s2", up)?];
        let sent = ps.pauses_sent.get("0").copied().unwrap_or(0);
        sound &= sent > 10 && ps.resumes_sent.get("0") == Some(&sent);
    }
    sound &= bfc.ports[r].collisions == 0 && bfc.ports[r].active_queues_max == 2;
    // The two senders' NICs were paused and resumed by their switches.
    for h in f.hosts().iter().take(2) {
        let nic = h.nic.bfc.as_ref().context("host NIC runs BFC")?;
        sound &= nic.pauses_rx > 10 && nic.pauses_rx == nic.resumes_rx;
    }
    // Dynamic assignment put the two flows in queues 0 and 1 of s2:r, and nothing else.
    let q = &rep.switches[2].ports[r].queues;
    sound &= q[0].enq_pkts > 0
        && q[1].enq_pkts > 0
        && q[0].enq_pkts + q[1].enq_pkts == rep.flows[0].rx_pkts + rep.flows[1].rx_pkts;
    let pr = f.probes();
    let window = |s: Vec<(u64, u64)>| -> Vec<(u64, u64)> {
        s.into_iter().filter(|(t, _)| WINDOW.contains(t)).collect()
    };
    let ser = (1538.0 * 8.0 / G100 * 1e12) as u64;
    let lag = ser.div_ceil(pr.interval_ps) as usize;
    let mut queues = Vec::new();
    let mut trace = Vec::new();
    for qn in 0..2 {
        let depth = window(pr.series(&format!("q{qn}")).context("probe q")?);
        let deq = window(pr.series(&format!("d{qn}")).context("probe d")?);
        let peak = depth.iter().map(|x| x.1).max().unwrap_or(0);
        let mean = depth.iter().map(|x| x.1 as f64).sum::<f64>() / depth.len() as f64;
        // Out of packets: nothing queued and no frame started within one wire time.
        let starved = (lag..depth.len())
            .filter(|&i| depth[i].1 == 0 && deq[i].1 == deq[i - lag].1)
            .count() as f64
            / (depth.len() - lag) as f64;
        if qn == 0 {
            trace = depth
                .iter()
                .step_by(10)
                .map(|&(t, b)| (t as f64 / 1e6, b as f64 / 1e3))
                .collect();
        }
        queues.push((peak, mean, starved));
    }
    let tx = window(pr.series("tx").context("probe tx")?);
    let txp = window(pr.series("txp").context("probe txp")?);
    let (a, b) = (tx.first().context("tx")?, tx.last().context("tx")?);
    let pk = txp.last().context("txp")?.1 - txp.first().context("txp")?.1;
    let util = ((b.1 - a.1) + 20 * pk) as f64 * 8.0 / ((b.0 - a.0) as f64 / 1e12 * G100);
    let _ = writeln!(
        log,
        "fig7 resume={resume} group3_delay={group3_delay:?}: utilisation {:.1} %, queues \
         (peak B, mean B, out of packets) {:?}, sound {sound}",
        util * 100.0,
        queues
    );
    Ok(Fig7 {
        util,
        queues,
        sound,
        trace,
    })
}

/// One Fig. 8 run: (mean group-1 FCT µs, collisions at s1:up, at s2:r2, every flow done).
fn three_groups(scheme: Scheme, seed: u64) -> Result<(f64, u64, u64, bool)> {
    let mut t = Topology::load(sim_file("bfc-three-groups.toml"))?;
    for s in &mut t.switches {
        s.scheme = scheme;
    }
    let opts = FabricOptions {
        seed: Some(seed),
        ..FabricOptions::default()
    };
    let mut f = Fabric::new(&t, &opts)?;
    f.run();
    let rep = f.report();
    let done = rep.flows.iter().all(|x| x.fct_ps.is_some());
    let g1: Vec<f64> = rep
        .flows
        .iter()
        .filter(|x| x.name.starts_with("g1"))
        .filter_map(|x| x.fct_ps)
        .map(|x| x as f64 / 1e6)
        .collect();
    let coll = |sw: &str, port: &str| -> Result<u64> {
        let i = port_index(&f, sw, port)?;
        let st = f.switch(sw).and_then(|s| s.scheme_stats(f.now()));
        Ok(st.and_then(|s| s.bfc).context("BFC stats")?.ports[i].collisions)
    };
    Ok((
        g1.iter().sum::<f64>() / g1.len().max(1) as f64,
        coll("s1", "up")?,
        coll("s2", "r2")?,
        done,
    ))
}

/// Traffic window of the Fig. 10 run under `--quick` (the file's is 3 ms).
const FIG10_QUICK: &str = "300us";
/// Traffic window of the Fig. 9 run under `--quick` (the file's is 3 ms). The incasts arrive
/// as a Poisson process of mean 500 µs; seed 1's first one starts at 148 µs, so 300 µs hold
/// one 20 MB incast (PFC has something to pause: a row checks it) beside about 50 000 Google
/// flows. At 1 ms the three cells took minutes of CPU, too long for CI.
const FIG9_QUICK: &str = "300us";
/// "Short" flows of Fig. 9/10's tail: the first size bucket of the experiment summary.
const SHORT: u64 = 10_000;

/// The short-flow (≤ [`SHORT`] B) p99 FCT slowdown of a cell, and how many short flows.
fn short_p99(c: &crate::experiment::CellResult) -> Result<(f64, usize)> {
    let b = c
        .summary
        .buckets
        .iter()
        .find(|b| b.lo == 0 && b.hi == SHORT)
        .with_context(|| format!("{}: no flow of at most {SHORT} B", c.cell))?;
    Ok((b.slowdown.p99, b.slowdown.flows))
}

/// No drop, no loss at a receiver, every flow complete: what a lossless scheme's cell owes.
fn clean(c: &crate::experiment::CellResult) -> bool {
    c.switch_drops.values().sum::<u64>() == 0
        && c.receiver_lost == 0
        && c.summary.completed == c.summary.flows
        && c.hosts_incomplete.is_empty()
}

/// What the paper says of Fig. 9's baselines HPCC, DCQCN and DCTCP against BFC (§6.2.2).
const FIG9_CC_QUOTES: [&str; 3] = [
    "\"Compared to BFC, however, HPCC has 5-30× worse tail latency for short flows with \
     incast\"",
    "\"the tail latency for short flows with BFC is still 5-30× better than existing schemes\"",
    "\"the tail latency for short flows with BFC is still 5-30× better than existing schemes\"",
];

/// The paper's PFC thresholds, quoted by the rows that hold PFC baselines to no loss.
const PFC_QUOTE: &str = "\"The dynamic PFC threshold is set to trigger when traffic from an \
                         input port occupies more than 11% of the free buffer (as in the HPCC \
                         paper)\"";

/// Runs `deploy/experiments/FILE` into `OUT/STEM/` (STEM: FILE less `.toml`, returned), with
/// the traffic window `quick` under `--quick`.
fn run_into<'f>(
    ctx: &Ctx<'_>,
    file: &'f str,
    quick: &str,
) -> Result<(crate::experiment::ExperimentResult, &'f str)> {
    let stem = file.trim_end_matches(".toml");
    let (res, _) = crate::experiment::run_file_with(
        &experiment_file(file),
        Some(ctx.out.join(stem)),
        &crate::experiment::RunOpts {
            duration: ctx.quick.then_some(quick),
            seeds: None,
            jobs: ctx.jobs,
            shard: None,
        },
    )?;
    Ok((res, stem))
}

/// One §6.2 run of BFC, PFC and no flow control on the 128-host Clos.
struct Clos {
    res: crate::experiment::ExperimentResult,
    /// Short-flow p99 FCT slowdown per scheme, and the BFC cell's short flows.
    bfc: f64,
    pfc: f64,
    none: f64,
    short_flows: usize,
    /// BFC: no drop, no loss, every flow completes.
    bfc_clean: bool,
    /// The same of the PFC cell.
    pfc_clean: bool,
}

/// Runs `deploy/experiments/FILE` (cells `scheme` = bfc, pfc, none) into `OUT/STEM/`, with the
/// traffic window `quick` under `--quick`; logs every cell and copies the slowdown-by-size plot
/// next to the report.
fn clos(
    ctx: &Ctx<'_>,
    file: &str,
    quick: &str,
    log: &mut String,
    plots: &mut Vec<String>,
) -> Result<Clos> {
    let (res, stem) = run_into(ctx, file, quick)?;
    let out = ctx.out.join(stem);
    for c in &res.cells {
        let drops: u64 = c.switch_drops.values().sum();
        let _ = writeln!(
            log,
            "{stem} {}: {} flows, {} completed; short (≤ {SHORT} B) p99 slowdown {:.2}; all \
             flows p99 {:.2}; switch drops {drops}, receiver lost {}; PFC frames {}, BFC \
             pauses {}, collisions {}; peak queue {} B",
            c.cell,
            c.summary.flows,
            c.summary.completed,
            short_p99(c)?.0,
            c.summary.slowdown.p99,
            c.receiver_lost,
            c.pfc_pause_frames,
            c.bfc_pauses,
            c.bfc_collisions,
            c.max_queue_bytes
        );
    }
    let cell = |scheme: &str| super::cell(&res, &[("scheme", scheme)]);
    let b = cell("bfc")?;
    let (bfc, short_flows) = short_p99(b)?;
    let bfc_clean = clean(b);
    let p = cell("pfc")?;
    let pfc_clean = clean(p);
    let (pfc, none) = (short_p99(p)?.0, short_p99(cell("none")?)?.0);
    let src = out.join("fct_slowdown.svg");
    if src.exists() {
        let name = format!("{stem}-slowdown.svg");
        std::fs::copy(&src, ctx.out.join(&name))?;
        plots.push(name);
    }
    Ok(Clos {
        res,
        bfc,
        pfc,
        none,
        short_flows,
        bfc_clean,
        pfc_clean,
    })
}

/// §6.2.2 Fig. 9: the Google workload at 55 % core load plus 5 % of 100-to-1 incasts of 20 MB
/// (`deploy/experiments/bfc-fig9.toml`).
fn fig9(ctx: &Ctx<'_>, log: &mut String, plots: &mut Vec<String>) -> Result<Vec<Row>> {
    let r = clos(ctx, "bfc-fig9.toml", FIG9_QUICK, log, plots)?;
    let pfc = super::cell(&r.res, &[("scheme", "pfc")])?;
    // The paper's Fig. 9 baselines: bfc-fig9-cc.toml, PFC with HPCC, DCQCN, DCTCP.
    let (mut cc_rows, cc_p99) = cc_baselines(
        ctx,
        "bfc-fig9-cc.toml",
        FIG9_QUICK,
        "§6.2.2 Fig. 9",
        r.bfc,
        FIG9_CC_QUOTES,
        log,
    )?;
    let why = "ordering only: the paper's Fig. 9 baselines are end-to-end transports over PFC \
               (DCQCN, DCTCP, HPCC: their rows follow, from bfc-fig9-cc.toml); these two are a \
               1-BDP window with PFC and with no flow control at all";
    let mut rows = vec![
        Row::new(
            "§6.2.2 Fig. 9",
            &format!(
                "short-flow (≤ 10 KB) p99 FCT slowdown with incast, PFC / BFC ({:.2} / {:.2})",
                r.pfc, r.bfc
            ),
            "\"the tail latency for short flows with BFC is still 5-30× better than existing \
             schemes\"",
            r.pfc / r.bfc,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note(format!(
            "{why}; {} short flows in the BFC cell",
            r.short_flows
        )),
        Row::new(
            "§6.2.2 Fig. 9",
            &format!(
                "short-flow (≤ 10 KB) p99 FCT slowdown with incast, no flow control / BFC \
                 ({:.2} / {:.2})",
                r.none, r.bfc
            ),
            "\"BFC achieves the best latency (both average and tail) among all the schemes\"",
            r.none / r.bfc,
            "x",
        )
        .check(Check::AtLeast(1.0))
        // The paper orders BFC against the rest, not PFC against no flow control (its Fig. 9
        // has no run without flow control). With incast, PFC's pauses spread to victim short
        // flows and can cost them more than the drops do: `--quick` measured PFC at 1.04x
        // no flow control's tail. An earlier version of this row asserted none ≥ PFC, which
        // the paper does not state; it broke on that run.
        .note(format!(
            "{why}; PFC / no flow control {:.2} (the paper states no such ordering)",
            r.pfc / r.none
        )),
        Row::holds(
            "§6.2.2 Fig. 9",
            "PFC paused with incast (the incasts reached their receivers' ports)",
            "\"the fraction of time links were paused due to PFC\"",
            pfc.pfc_pause_frames > 0,
        ),
        Row::holds(
            "§6.2",
            "BFC with incast: no drop, no loss, every flow completes",
            "\"BFC never incurred drops except under a 2000-to-1 incast\"",
            r.bfc_clean,
        ),
        Row::holds(
            "§6.2.1",
            "PFC with incast (1-BDP window): no drop, no loss, every flow completes",
            PFC_QUOTE,
            r.pfc_clean,
        ),
    ];
    // With the paper's 32 queues a transport's row that fails at full length is explained when
    // the run shows the reason: the same baseline against BFC with 64 queues holds (the rows
    // of `fig9_q64`, in the same transport order, the last row being no loss).
    let q64 = fig9_q64(ctx, &cc_p99, log)?;
    for (row, with64) in cc_rows.iter_mut().zip(&q64).take(cc_p99.len()) {
        if !row.passes() {
            let note = format!(
                "{}. Not reproduced at full length with the paper's 32 queues per port; the \
                 run checks the reason: against BFC with 64 queues the same baseline is \
                 {:.2}x (row below). With 32 the incasts outlast their 500 µs spacing and \
                 about 300 incast flows share the 8 × 32 spine queues toward one leaf \
                 (bfc-fig9-q64.toml's header)",
                row.note, with64.measured
            );
            *row = row.clone().note(note).differs(with64.passes());
        }
    }
    rows.extend(cc_rows);
    rows.extend(q64);
    rows.extend(fig9_ack(ctx, log)?);
    Ok(rows)
}

/// Logs a BFC cell of a Fig. 9 variant; its short-flow p99 FCT slowdown.
fn log_bfc_cell(log: &mut String, stem: &str, c: &crate::experiment::CellResult) -> Result<f64> {
    let (bfc, _) = short_p99(c)?;
    let _ = writeln!(
        log,
        "{stem} {}: {} flows, {} completed; short (≤ {SHORT} B) p99 slowdown {bfc:.2}; all \
         flows p99 {:.2}; switch drops {}, receiver lost {}; BFC pauses {}, collisions {}; \
         peak queue {} B",
        c.cell,
        c.summary.flows,
        c.summary.completed,
        c.summary.slowdown.p99,
        c.switch_drops.values().sum::<u64>(),
        c.receiver_lost,
        c.bfc_pauses,
        c.bfc_collisions,
        c.max_queue_bytes
    );
    Ok(bfc)
}

/// Fig. 9 with the ACKs in a strict, never-paused class on every switch, for BFC with the
/// paper's 32 queues (`bfc-fig9-ack.toml`) and for the baselines (`bfc-fig9-cc-ack.toml`). In
/// bfc-fig9.toml a BFC switch gives ACK streams queues as it gives data flows, and the ACKs of
/// flows leaving an incast's leaf wait behind the paused incast in the spine queues toward it
/// (helper review; the files' headers). The paper does not say how its ACKs travel.
fn fig9_ack(ctx: &Ctx<'_>, log: &mut String) -> Result<Vec<Row>> {
    let (res, stem) = run_into(ctx, "bfc-fig9-ack.toml", FIG9_QUICK)?;
    let c = super::cell(&res, &[("scheme", "bfc")])?;
    let bfc = log_bfc_cell(log, stem, c)?;
    let (mut rows, _) = cc_baselines(
        ctx,
        "bfc-fig9-cc-ack.toml",
        FIG9_QUICK,
        "§6.2.2 Fig. 9, ACK class",
        bfc,
        FIG9_CC_QUOTES,
        log,
    )?;
    rows.push(Row::holds(
        "§6.2, ACK class",
        "BFC with incast: no drop, no loss, every flow completes",
        "\"BFC never incurred drops except under a 2000-to-1 incast\"",
        clean(c),
    ));
    Ok(rows)
}

/// Fig. 9's BFC cell with 64 queues per switch port and NIC (`bfc-fig9-q64.toml`), against the
/// same baselines (`cc_p99`: each transport's short-flow p99 slowdown). At full length the
/// 32 queues of the paper's setup are too few here: incasts outlast their spacing and share
/// the spine queues toward their leaf with everything else (the file's header), and BFC's
/// tail lead is lost; this is the variant that matches.
fn fig9_q64(ctx: &Ctx<'_>, cc_p99: &[(&str, f64)], log: &mut String) -> Result<Vec<Row>> {
    let (res, stem) = run_into(ctx, "bfc-fig9-q64.toml", FIG9_QUICK)?;
    let c = super::cell(&res, &[("scheme", "bfc"), ("queues", "64")])?;
    let bfc = log_bfc_cell(log, stem, c)?;
    let mut rows: Vec<Row> = cc_p99
        .iter()
        .map(|&(cc, p)| {
            Row::new(
                "§6.2.2 Fig. 9, 64 queues per port",
                &format!(
                    "short-flow (≤ 10 KB) p99 FCT slowdown, {} + PFC / BFC with 64 queues \
                     ({p:.2} / {bfc:.2})",
                    cc.to_uppercase()
                ),
                "\"the tail latency for short flows with BFC is still 5-30× better than \
                 existing schemes\"",
                p / bfc,
                "x",
            )
            .check(Check::AtLeast(1.0))
            .note(
                "the variant that matches at full length: with the paper's 32 queues per \
                 port the incasts outlast their 500 µs spacing here and about 300 incast \
                 flows share the 8 × 32 spine queues toward one leaf (§3.3.1: \"as long as \
                 the total number of flows does not exceed the total number of queues\"); \
                 deploy/experiments/bfc-fig9-q64.toml's header",
            )
        })
        .collect();
    rows.push(Row::holds(
        "§6.2, 64 queues per port",
        "BFC with incast: no drop, no loss, every flow completes",
        "\"BFC never incurred drops except under a 2000-to-1 incast\"",
        clean(c),
    ));
    Ok(rows)
}

/// A baseline transport (`cc`) and its short-flow p99 FCT slowdown.
type CcSlowdown = (&'static str, f64);

/// The paper's end-to-end baselines of a §6.2 figure: runs `deploy/experiments/FILE` (PFC with
/// `cc` = HPCC, DCQCN, DCTCP on the hosts, the figure's workload) into `OUT/STEM/` with the
/// traffic window `quick` under `--quick`, logs every cell, and returns one row per transport
/// (quoting `quotes[i]`): its short-flow p99 FCT slowdown over BFC's `bfc`, in the paper's
/// ordering (BFC lowest); with each transport's short-flow p99 slowdown.
fn cc_baselines(
    ctx: &Ctx<'_>,
    file: &str,
    quick: &str,
    figure: &str,
    bfc: f64,
    quotes: [&str; 3],
    log: &mut String,
) -> Result<(Vec<Row>, Vec<CcSlowdown>)> {
    let (res, stem) = run_into(ctx, file, quick)?;
    let mut rows = Vec::new();
    let mut slowdowns = Vec::new();
    let mut unclean = Vec::new();
    for (cc, quote) in ["hpcc", "dcqcn", "dctcp"].into_iter().zip(quotes) {
        let c = super::cell(&res, &[("cc", cc)])?;
        if !clean(c) {
            unclean.push(format!(
                "{}: {} dropped, {} lost, {} of {} flows complete",
                cc.to_uppercase(),
                c.switch_drops.values().sum::<u64>(),
                c.receiver_lost,
                c.summary.completed,
                c.summary.flows
            ));
        }
        let p = short_p99(c)?.0;
        slowdowns.push((cc, p));
        let _ = writeln!(
            log,
            "{stem} {}: {} flows, {} completed; short (≤ {SHORT} B) p99 slowdown {p:.2}; all \
             flows p99 {:.2}; switch drops {}, receiver lost {}; PFC frames {}; peak queue {} B",
            c.cell,
            c.summary.flows,
            c.summary.completed,
            c.summary.slowdown.p99,
            c.switch_drops.values().sum::<u64>(),
            c.receiver_lost,
            c.pfc_pause_frames,
            c.max_queue_bytes
        );
        rows.push(
            Row::new(
                figure,
                &format!(
                    "short-flow (≤ 10 KB) p99 FCT slowdown, {} + PFC / BFC ({p:.2} / {bfc:.2})",
                    cc.to_uppercase()
                ),
                quote,
                p / bfc,
                "x",
            )
            .check(Check::AtLeast(1.0))
            .note(
                "ordering only (the paper's ratio comes from its own host and switch models); \
                 the paper's baselines as Xoff's hosts run them (dataplane::host::cc)",
            ),
        );
    }
    let mut row = Row::holds(
        &format!("{figure}, §6.2.1"),
        "HPCC, DCQCN, DCTCP over PFC: no drop, no loss, every flow completes",
        PFC_QUOTE,
        unclean.is_empty(),
    );
    if !unclean.is_empty() {
        row = row.note(unclean.join("; "));
    }
    rows.push(row);
    Ok((rows, slowdowns))
}

/// §6.2 Fig. 10: runs `deploy/experiments/bfc-fig10.toml` (BFC, PFC, none) into
/// `OUT/bfc-fig10/` and its cc baselines into `OUT/bfc-fig10-cc/`, and returns their rows.
fn fig10(ctx: &Ctx<'_>, log: &mut String, plots: &mut Vec<String>) -> Result<Vec<Row>> {
    let Clos {
        bfc,
        pfc,
        none,
        short_flows: n,
        bfc_clean,
        pfc_clean,
        ..
    } = clos(ctx, "bfc-fig10.toml", FIG10_QUICK, log, plots)?;
    let why = "ordering only: the paper's Fig. 10 compares BFC with end-to-end congestion \
               control (DCQCN, DCTCP, HPCC, all with PFC, which \"was never triggered\"); these \
               two baselines are a 1-BDP window with PFC, and no flow control at all, and the \
               ratio is not the paper's";
    // The paper's own baselines (issue 19): bfc-fig10-cc.toml, PFC with DCQCN, DCTCP, HPCC.
    let (cc_rows, _) = cc_baselines(
        ctx,
        "bfc-fig10-cc.toml",
        FIG10_QUICK,
        "§6.2.2 Fig. 10",
        bfc,
        [
            "\"Compared to BFC, however, HPCC has 5-30× worse tail latency for short flows \
             with incast, and 2.3-3× worse without\"",
            "\"BFC achieves the best latency (both average and tail) among all the schemes\"",
            "\"BFC achieves the best latency (both average and tail) among all the schemes\"",
        ],
        log,
    )?;
    let mut rows = vec![
        Row::new(
            "§6.2.2 Fig. 10",
            &format!("short-flow (≤ 10 KB) p99 FCT slowdown, PFC / BFC ({pfc:.2} / {bfc:.2})"),
            "\"Compared to BFC, however, HPCC has 5-30× worse tail latency for short flows with \
             incast, and 2.3-3× worse without\"",
            pfc / bfc,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note(format!("{why}; {n} short flows in the BFC cell")),
        Row::new(
            "§6.2.2 Fig. 10",
            &format!(
                "short-flow (≤ 10 KB) p99 FCT slowdown, no flow control / BFC ({none:.2} / \
                 {bfc:.2})"
            ),
            "\"BFC achieves the best latency (both average and tail) among all the schemes\"",
            none / bfc,
            "x",
        )
        .check(Check::AtLeast(1.0))
        .note(why),
        Row::holds(
            "§6.2",
            "BFC: no drop, no loss, every flow completes",
            "\"BFC never incurred drops except under a 2000-to-1 incast\"",
            bfc_clean,
        ),
        Row::holds(
            "§6.2.1",
            "PFC (1-BDP window): no drop, no loss, every flow completes",
            PFC_QUOTE,
            pfc_clean,
        ),
    ];
    rows.extend(cc_rows);
    Ok(rows)
}

pub fn run(ctx: &Ctx<'_>) -> Result<Section> {
    let mut log = String::new();
    let bdp = HRTT_PS as f64 * G100 / 8.0 / 1e12; // HRTT·μ = 28 076 B
    let th2 = (bdp / 2.0).floor(); // Th with both queues active
    let paper_rule = fig7("drained", None, &mut log)?;
    let unlocked = fig7("drained", Some(3_000_000), &mut log)?;
    let early = fig7("below-th", None, &mut log)?;
    let near_th = paper_rule.queues.iter().all(|&(peak, mean, _)| {
        peak as f64 >= th2 && peak as f64 <= th2 + bdp && mean <= 1.5 * th2
    });
    // Appendix A's model is one hop with Th = that hop's HRTT·μ/N: the shipped setup (every
    // link 1 µs), with both resume rules.
    let app_a = [&paper_rule, &early]
        .iter()
        .all(|r| r.queues.iter().all(|q| q.2 <= 0.20));
    let mean_kb = paper_rule.queues.iter().map(|q| q.1).sum::<f64>() / 2.0 / 1e3;
    let early_kb = early.queues.iter().map(|q| q.1).sum::<f64>() / 2.0 / 1e3;
    let mut rows =
        vec![
        Row::holds(
            "§6.1 Fig. 7a",
            "each queue reaches Th, peaks ≤ Th + HRTT·μ, mean ≤ 1.5 Th",
            "\"able to limit the queue length near the pause threshold\"",
            near_th,
        )
        .note(format!(
            "Th = HRTT·μ/N_active = {th2:.0} B with 2 active queues, HRTT·μ = {bdp:.0} B"
        )),
        Row::new(
            "§6.1 Fig. 7b",
            "mean queue length per flow at Th ≈ 2 µs, early resume (100 % busy)",
            "\"average queue length of 15 KB\"",
            early_kb,
            "KB",
        )
        .check(Check::Within { target: 15.0, tol: 0.15 })
        .note(format!(
            "the paper's 15 KB comes with a link close to 100 % busy; with the pseudocode's \
             resume rule and identical paths the flows lock into step (see the utilisation \
             rows) and the mean is {mean_kb:.1} KB, as the queues run dry together {:.0} % of \
             the time",
            paper_rule.queues[0].2 * 100.0
        )),
        Row::new(
            "§6.1 Fig. 7b",
            "utilisation, flows not in lock-step (group-3 path 3 µs)",
            "\"close to 100% utilization\"",
            unlocked.util * 100.0,
            "%",
        )
        .check(Check::Within { target: 100.0, tol: 0.05 }),
        Row::new(
            "§6.1 Fig. 7b",
            "utilisation, identical 1 µs paths (lock-step)",
            "\"close to 100% utilization\"",
            paper_rule.util * 100.0,
            "%",
        )
        .check(Check::AtLeast(80.0))
        .note(
            "two identical line-rate flows in a deterministic fabric lock into step (a resumed \
             flow alone arrives as fast as it drains), so both queues run dry together and \
             the link idles an HRTT per cycle: Appendix A's worst case 1 − E_f(2, Th) = 80 % \
             is the band here. The paper's hardware (queues after the egress pipeline, \
             generator jitter) breaks the lock-step; the row above, with different path \
             delays, and §3.3.2's early resume below reach the paper's figure",
        ),
        Row::new(
            "§3.3.2 / Fig. 7b",
            "utilisation with early resume (below Th), identical paths",
            "\"close to 100% utilization\"",
            early.util * 100.0,
            "%",
        )
        .check(Check::Within { target: 100.0, tol: 0.05 }),
        Row::holds(
            "App. A",
            "each flow out of packets ≤ 20 % of the time (1 µs links, both resume rules)",
            "\"runs out of packets at most 20% of the time when Th is 1-hop BDP\"",
            app_a,
        ),
        Row::holds(
            "§6.1",
            "no loss, no drop, pauses = resumes, no collisions (every Fig. 7 run)",
            "BFC is lossless with BFC NICs",
            paper_rule.sound && unlocked.sound && early.sound,
        ),
    ];
    // Fig. 8: the paper reports four runs; we run 8 seeds (they take a second).
    let seeds = 8;
    let (mut d, mut s) = (Vec::new(), Vec::new());
    let mut dyn_collisions = 0;
    let mut done = true;
    for seed in 1..=seeds {
        let (fd, dc1, dc2, ok1) = three_groups(Scheme::Bfc, seed)?;
        let (fs, sc1, sc2, ok2) = three_groups(Scheme::BfcStochastic, seed)?;
        let _ = writeln!(
            log,
            "fig8 seed {seed}: group-1 mean FCT dynamic {fd:.1} µs (collisions {dc1}, {dc2}), \
             stochastic {fs:.1} µs (collisions {sc1}, {sc2})"
        );
        dyn_collisions += dc1 + dc2;
        done &= ok1 && ok2;
        d.push(fd);
        s.push(fs);
    }
    let stats = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt();
        (m, sd, v.iter().copied().fold(0.0, f64::max))
    };
    let (dm, dsd, dmax) = stats(&d);
    let (sm, ssd, smax) = stats(&s);
    let _ = writeln!(
        log,
        "fig8: dynamic mean {dm:.1} sd {dsd:.1} max {dmax:.1} µs; stochastic mean {sm:.1} sd \
         {ssd:.1} max {smax:.1} µs"
    );
    rows.extend([
        Row::new(
            "§6.1 Fig. 8",
            "group-1 mean FCT, stochastic / dynamic",
            "dynamic \"achieves the lowest average FCT\"",
            sm / dm,
            "x",
        )
        .check(Check::AtLeast(1.0)),
        Row::holds(
            "§6.1 Fig. 8",
            "dynamic: smaller spread (sd) and max over seeds than stochastic",
            "dynamic has \"the best tail performance\", sd close to 0",
            dsd < ssd && dmax < smax,
        ),
        Row::holds(
            "§6.1 Fig. 8",
            "dynamic: no queue collision while flows < queues; every flow completes",
            "\"group 1 flows consistently incur no collisions\"",
            dyn_collisions == 0 && done,
        ),
    ]);
    let mut files = Vec::new();
    write_chart(
        ctx.out,
        "bfc-fig7a",
        &Chart {
            title: "BFC §6.1 Fig. 7a: queue of one flow at s2→r (lock-step run)",
            x: "time (µs)",
            y: "queue (KB)",
            series: vec![
                ("queue 0".into(), paper_rule.trace),
                ("Th".into(), vec![(20.0, th2 / 1e3), (180.0, th2 / 1e3)]),
            ],
            step: true,
            ..Default::default()
        },
        &mut files,
    )?;
    let mut plots = vec!["bfc-fig7a.svg".to_string()];
    rows.extend(fig9(ctx, &mut log, &mut plots)?);
    rows.extend(fig10(ctx, &mut log, &mut plots)?);
    Ok(Section {
        title: "BFC (backpressure flow control)".into(),
        setup: format!(
            "§6.1 testbed (Fig. 6) in virtual time: 100 Gbit/s, 16 queues per port, 1 µs links \
             (HRTT 2.25 µs with serialization), host NICs run BFC; the paper's on-chip \
             generator sends without end-to-end congestion control, so do the hosts here. \
             Fig. 7: `deploy/sim/bfc-two-flows.toml`, 200 µs, measured over 20–180 µs. \
             Fig. 8: `deploy/sim/bfc-three-groups.toml`, {seeds} seeds (the paper: four runs). \
             §6.2 Fig. 10: `deploy/experiments/bfc-fig10.toml`, the paper's 128-host Clos (8 \
             leaves × 16 hosts, 8 spines, 2:1 oversubscribed, 100 Gbit/s, 1 µs, 12 MB buffers, \
             32 queues per port), Google RPC sizes, lognormal σ = 2 arrivals at 60 % core load, \
             MTU 1500 B (the paper: 1 KB), hosts with a 1-BDP window and no congestion control; \
             {}, then every flow finishes; per-flow CSVs in `bfc-fig10/`. Fig. 9: \
             `deploy/experiments/bfc-fig9.toml`, the same at 55 % plus 5 % of 100-to-1 \
             incasts of 20 MB. The paper's baselines, PFC with DCQCN, DCTCP or HPCC on the \
             hosts: `deploy/experiments/bfc-fig10-cc.toml` and `bfc-fig9-cc.toml` (same \
             workloads and window), in `bfc-fig10-cc/` and `bfc-fig9-cc/`. Fig. 9 again \
             with 64 queues per switch port and NIC: `bfc-fig9-q64.toml`, in `bfc-fig9-q64/`; \
             and with 32 queues and the ACKs in a strict, never-paused class on every switch \
             (queue and priority 7), BFC and the baselines: `bfc-fig9-ack.toml` and \
             `bfc-fig9-cc-ack.toml`.",
            if ctx.quick {
                format!(
                    "`--quick`: flows start for {FIG10_QUICK} instead of the file's {} (fewer \
                     flows, the same network and load)",
                    experiment_duration("bfc-fig10.toml")?
                )
            } else {
                format!(
                    "flows start for {} (the paper runs longer)",
                    experiment_duration("bfc-fig10.toml")?
                )
            }
        ),
        rows,
        plots,
        log,
        ..Section::default()
    })
}

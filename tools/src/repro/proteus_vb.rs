//! Proteus §V-B (large-scale simulation, Fig. 10 Web Search) in virtual time:
//! `deploy/experiments/proteus-vb.toml`, the paper's 8 × 8 leaf-spine with 128 hosts at
//! 100 Gbit/s, 12 MB buffers with PFC, DCQCN, Web Search flow sizes with Poisson arrivals,
//! ECMP vs DRILL vs CONGA vs Proteus at network load 0.3, 0.5, 0.7 and 0.8. The run length is
//! scaled, not the topology: 3 ms of arrivals and two seeds (`--quick`: 1 ms, one seed).
//!
//! Then the same cells with go-back-N receivers (`proteus-vb-gbn.toml`, the paper's
//! footnote 2), where DRILL's reordering is no longer masked, and with reordering buffers
//! that wait at most 100 µs for a hole (`proteus-vb-resequence.toml`: the resequencing buffer
//! of [24] Hermes, which the paper cites for its baselines; the main file's buffers wait for
//! ever).
//!
//! AFCT and p99 FCT are absolute flow completion times over all completed flows of a load's
//! seeds (as Fig. 10 plots them). Each ordering row takes the smallest reduction of Proteus
//! against the baseline over the four loads: the paper's claim holds at every load iff it is
//! above 0.

use super::{cell, experiment_file, Check, Ctx, Row};
use crate::experiment::{run_file_with, CellResult, ExperimentResult, RunOpts};
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;

/// (network load as the paper gives it, the NIC load the experiment file's matrix uses).
const LOADS: [(f64, &str); 4] = [
    (0.3, "0.170"),
    (0.5, "0.284"),
    (0.7, "0.397"),
    (0.8, "0.454"),
];
const LBS: [&str; 4] = ["ecmp", "drill", "conga", "proteus"];
/// Proteus's index in [`LBS`].
const P: usize = 3;
/// `--quick`: arrivals for 1 ms (the file: 3 ms), the first seed only (~40 s of one core).
const QUICK_DURATION: &str = "1ms";
const QUICK_SEEDS: [u64; 1] = [1];
/// Web Search's short flows (§V: "flows less than 100KB").
const SHORT: u64 = 100_000;
/// Large flows ("larger than 1MB", §V-A).
const LARGE: u64 = 1_000_000;

/// One (load, lb) over its seeds.
#[derive(Debug, Default, Clone)]
struct Agg {
    fcts_us: Vec<f64>,
    /// (size, FCT µs) of every completed flow.
    sized: Vec<(u64, f64)>,
    short_us: Vec<f64>,
    flows: usize,
    completed: usize,
    reordered: u64,
    retx: u64,
    timeouts: u64,
    pfc: u64,
    /// PFC frames the spines sent (fabric congestion a load balancer can route around).
    spine_pfc: u64,
    /// Time leaves held their own hosts paused, summed over ports, µs (the pauses that stop
    /// senders; under ECMP, CONGA and Proteus they come from fabric congestion too).
    host_paused_us: f64,
    /// Frames the switches dropped (any class) and data packets the receivers never got.
    drops: u64,
    lost: u64,
    /// Where the switches dropped, "cell: switch:port × n".
    drop_at: Vec<String>,
    source_reroutes: u64,
    hop_reroutes: u64,
}

impl Agg {
    fn add(&mut self, c: &CellResult) -> Result<()> {
        let csv = Path::new(&c.dir).join("flows.csv");
        let text = std::fs::read_to_string(&csv).with_context(|| format!("{}", csv.display()))?;
        let mut lines = text.lines();
        let head: Vec<&str> = lines
            .next()
            .context("flows.csv: header")?
            .split(',')
            .collect();
        let col = |n: &str| head.iter().position(|h| *h == n).context(n.to_string());
        let (size, fct, done) = (col("size")?, col("fct_ps")?, col("completed")?);
        for l in lines {
            let v: Vec<&str> = l.split(',').collect();
            if v.get(done) != Some(&"true") {
                continue;
            }
            let us = v[fct].parse::<u64>()? as f64 / 1e6;
            self.fcts_us.push(us);
            self.sized.push((v[size].parse::<u64>()?, us));
            if v[size].parse::<u64>()? <= SHORT {
                self.short_us.push(us);
            }
        }
        self.flows += c.summary.flows;
        self.completed += c.summary.completed;
        self.reordered += c.summary.reordered;
        self.retx += c.summary.retx;
        self.timeouts += c.summary.timeouts;
        self.pfc += c.pfc_pause_frames;
        for p in &c.pauses {
            if p.switch.starts_with("spine") {
                self.spine_pfc += p.pfc_xoff;
            } else if p.port.starts_with('h') {
                self.host_paused_us += p.pfc_pause_s * 1e6;
            }
        }
        self.drops += c.switch_drops.values().sum::<u64>();
        self.lost += c.receiver_lost;
        for (port, n) in &c.drops_by_port {
            self.drop_at.push(format!("{}: {port} × {n}", c.cell));
        }
        self.source_reroutes += c.proteus.source_reroutes;
        self.hop_reroutes += c.proteus.hop_reroutes;
        Ok(())
    }

    fn afct(&self) -> f64 {
        mean(&self.fcts_us)
    }

    fn p99(&self) -> f64 {
        p99(&self.fcts_us)
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::INFINITY;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// The 99th percentile (nearest rank).
fn p99(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::INFINITY;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let k = ((0.99 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[k - 1]
}

/// Per load (in [`LOADS`] order), per lb (in [`LBS`] order).
fn aggregate(res: &ExperimentResult) -> Result<Vec<Vec<Agg>>> {
    let mut out = Vec::new();
    for (_, nic) in LOADS {
        let mut per = Vec::new();
        for lb in LBS {
            let mut a = Agg::default();
            let mut n = 0;
            for c in res.cells.iter().filter(|c| {
                c.params.get("load").map(String::as_str) == Some(nic)
                    && c.params.get("lb").map(String::as_str) == Some(lb)
            }) {
                a.add(c)?;
                n += 1;
            }
            if n == 0 {
                // Names the missing cell.
                cell(res, &[("load", nic), ("lb", lb)])?;
            }
            per.push(a);
        }
        out.push(per);
    }
    Ok(out)
}

/// Runs `deploy/experiments/NAME.toml` (shortened under `--quick`) into `OUT/NAME`; the
/// results and their per load, per lb aggregates.
fn run(ctx: &Ctx<'_>, name: &str) -> Result<(ExperimentResult, Vec<Vec<Agg>>)> {
    let file = experiment_file(&format!("{name}.toml"));
    let opts = RunOpts {
        duration: ctx.quick.then_some(QUICK_DURATION),
        seeds: ctx.quick.then_some(&QUICK_SEEDS[..]),
        jobs: ctx.jobs,
        shard: None,
    };
    let (res, _) = run_file_with(&file, Some(ctx.out.join(name)), &opts)?;
    let agg = aggregate(&res)?;
    Ok((res, agg))
}

/// Runs the §V-B experiment into `OUT/proteus-vb` and returns its rows, then its go-back-N
/// variant ([`gbn_rows`]).
pub fn rows(ctx: &Ctx<'_>, log: &mut String) -> Result<Vec<Row>> {
    let (res, agg) = run(ctx, "proteus-vb")?;
    let seeds: Vec<u64> = {
        let mut s: Vec<u64> = res.cells.iter().map(|c| c.seed).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    let _ = writeln!(
        log,
        "§V-B Web Search, DCQCN + PFC, {} of arrivals, seeds {seeds:?}: per network load and \
         lb: AFCT / p99 FCT (µs), short-flow (≤ 100 KB) AFCT, flows completed, reordered \
         packets, PFC XOFF frames (of them the spines', and the time leaves held their hosts paused), retransmissions; Proteus: Algorithm 1 / Algorithm 2 reroutes",
        if ctx.quick {
            QUICK_DURATION
        } else {
            "the file's window"
        }
    );
    for (li, (load, _)) in LOADS.iter().enumerate() {
        for (bi, lb) in LBS.iter().enumerate() {
            let a = &agg[li][bi];
            let _ = writeln!(
                log,
                "load {load}: {lb:8} AFCT {:7.1} p99 {:8.1} short {:6.1}  {}/{} flows  \
                 reordered {:7}  PFC {:6} (spines {:5}, hosts paused {:6.0} µs)  retx {}{}",
                a.afct(),
                a.p99(),
                mean(&a.short_us),
                a.completed,
                a.flows,
                a.reordered,
                a.pfc,
                a.spine_pfc,
                a.host_paused_us,
                a.retx,
                if *lb == "proteus" {
                    format!("  reroutes {} / {}", a.source_reroutes, a.hop_reroutes)
                } else {
                    String::new()
                }
            );
        }
    }
    let p = P;
    let red = |m: fn(&Agg) -> f64, b: usize| reductions(&agg, b, m);
    let show = |v: &[f64]| {
        LOADS
            .iter()
            .zip(v)
            .map(|((l, _), r)| format!("{l}: {r:.0} %"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let all = |f: &dyn Fn(&[Agg]) -> bool| agg.iter().all(|per| f(per));
    // Why Proteus is not below DRILL here, checked at every load: DRILL's reordering costs it
    // nothing (the receivers buffer out-of-order packets; no retransmission, no timeout), and
    // leaves hold their own hosts paused for less time under DRILL than under Proteus: a
    // sender's packets are sprayed over the 8 uplinks, so a paused or loaded uplink holds
    // back an eighth of them at the source leaf, where a flow-level choice holds back the
    // whole flow. The pause counts are no reason: DRILL's cells sent more PFC frames than
    // Proteus's at 0.8 (42 003 vs 26 274, spines 11 516 vs 7 197, full run) and still had the
    // lower AFCT; the host-side pause time is the measured difference
    // that follows the FCTs at every load (a correlate: the mechanism is our reading).
    let drill_why = all(&|per| {
        per[1].reordered > 0
            && per[1].retx == 0
            && per[1].timeouts == 0
            && per[1].host_paused_us < per[p].host_paused_us
    });
    // Why Proteus can be above ECMP or CONGA at a load (since issue 18 it reorders nothing, so
    // stale delays no longer explain it): its flows stay where SelectPath put them at their
    // start (a known flow moves only once its previous packet is confirmed arrived, which a
    // line-rate stream never gives it), so two large flows that meet on a spine downlink
    // stay together. Checked where Proteus is above the baseline in a metric: its flows slower
    // than the baseline's figure (AFCT or p99) that make the difference are large (> 1 MB
    // carry ≥ 80 % of the excess FCT); how few flows moved is in the log (reroutes).
    let stuck = |b: usize, m: fn(&Agg) -> f64| stuck(&agg, b, m);
    let mut rows = Vec::new();
    let fig = "§V-B Fig. 10 (Web Search)";
    for (b, name, afct_q, p99_q) in [
        (
            0,
            "ECMP",
            "– (§V-B gives no ECMP figure; the testbed, §V-A Fig. 8a: \"Proteus performs \
             increasingly better (2x-3x) FCT compared to ECMP\")",
            "– (§V-A Fig. 8d: \"Proteus also achieves the lowest 99th percentile FCT\")",
        ),
        (
            2,
            "CONGA",
            "up to 35 % (\"Proteus outperforms CONGA, DRILL, Hermes and MP-RDMA on AFCT and \
             99th percentile FCT by up to 35%, 31%, 28%, 22% and 46%, 42%, 34%, 29%\"; testbed \
             Fig. 8a: \"up to 37% lower overall FCT at 0.7 load compared to CONGA\")",
            "up to 46 % (same sentence)",
        ),
        (
            1,
            "DRILL",
            "up to 31 % (the same sentence; testbed Fig. 8a: \"Proteus outperforms DRILL by \
             up to 30% in terms of AFCT\")",
            "up to 42 % (same sentence)",
        ),
    ] {
        for (metric, quote, m) in [
            ("AFCT", afct_q, Agg::afct as fn(&Agg) -> f64),
            ("p99 FCT", p99_q, Agg::p99 as fn(&Agg) -> f64),
        ] {
            let r = red(m, b);
            let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut row = Row::new(
                fig,
                &format!("{metric}, Proteus vs {name}: smallest reduction over loads 0.3-0.8"),
                quote,
                min(&r),
                "%",
            )
            .check(Check::AtLeast(0.0));
            let mut note = format!(
                "Proteus below {name} at every load iff ≥ 0 (the paper: below at every \
                 load). Per load: {}; largest {max:.0} %.",
                show(&r)
            );
            if b == 1 {
                row = row.differs(drill_why && stuck(b, m));
                note.push_str(
                    " Not reproduced, for a reason the run checks at every load: DRILL's \
                     per-packet choice reorders (the receivers buffer out-of-order packets, \
                     as the paper's reordering buffer does: DRILL has no retransmission and \
                     no timeout), and leaves hold their hosts paused for less time under DRILL than \
                     under Proteus at every load (a sender's packets are spread over the 8 \
                     uplinks, so a paused or loaded uplink holds back an eighth of them at the \
                     source leaf; a flow-level choice holds back the whole flow). Not fewer \
                     pauses: at high load DRILL's cells send as many PFC frames as Proteus's \
                     or more, spines included (per load and tier in the log below). Checked \
                     too: flows over 1 MB carry at least 80 % of Proteus's FCT above DRILL's \
                     figure at every load (issue 18's per-flow breakdown: large flows with no \
                     other flow at their hosts, so only the fabric slows them, have slowdown \
                     1.0-1.3 under DRILL and 1.2-1.7 under Proteus, whose flows keep the path \
                     they started on)",
                );
            } else {
                row = row.differs(stuck(b, m));
                note.push_str(
                    " Where it is below 0, the checked reason: Proteus's flows stay on the \
                     path SelectPath gave them at their start (a known flow moves only once \
                     its previous packet is confirmed arrived, which a line-rate stream never \
                     gives; Algorithm 1 / 2 reroutes per load in the log), so large flows \
                     that meet on a \
                     spine downlink stay together: flows over 1 MB carry at least 80 % of \
                     Proteus's FCT above the baseline's figure at that load. \
                     deploy/experiments/proteus-vb.toml's header has the per-flow breakdown",
                );
            }
            rows.push(row.note(note));
        }
    }
    let reord: u64 = agg.iter().map(|per| per[p].reordered).sum();
    let drill_reord: u64 = agg.iter().map(|per| per[1].reordered).sum();
    let rx: u64 = res
        .cells
        .iter()
        .filter(|c| c.params.get("lb").map(String::as_str) == Some("proteus"))
        .map(|c| c.summary.rx_pkts)
        .sum();
    rows.push(
        Row::new(
            "§V-C Fig. 12b",
            "Proteus: reordered packets, all loads",
            "\"Proteus effectively avoid packet reordering\" (issue 18: 0)",
            reord as f64,
            "pkts",
        )
        .check(Check::AtMost(0.0))
        .note(format!(
            "{reord} of {rx} packets ({:.2} %; DRILL {drill_reord}). Issue 18: a flow \
             moves (Algorithm 1 or 2) only off a path that is not non-congested (§III-B.1's \
             trigger), once its previous packet has left the source edge, and once the \
             destination edge has confirmed that packet arrived (the path's arrival frontier, \
             fed back with its delay: lines 6-8's inequality then holds whatever the delays); \
             a flow table miss evicts a settled flow first. Before: 8.0 % of the packets (full \
             run), then 0.21 % quick with lines 6-8 on fed-back delays (their error is ten \
             times the packet gap the rule works with), then 99 packets of two flows sharing \
             a direct-mapped flow table slot",
            reord as f64 * 100.0 / rx.max(1) as f64
        )),
    );
    rows.push(
        Row::holds(
            "§II-A, §V-B",
            "PFC triggers with DCQCN at every load (ECMP cells)",
            "\"PFC is triggered even with congestion control\"",
            all(&|per| per[0].pfc > 0),
        )
        .note(format!(
            "PFC XOFF frames under ECMP per load: {}",
            counts_per_load(&agg, |per| per[0].pfc)
        )),
    );
    rows.push(Row::holds(
        "§V-B",
        "every flow of every cell completes, no data packet lost",
        "PFC-enabled lossless network",
        all(&|per| per.iter().all(|a| a.completed == a.flows && a.lost == 0)),
    ));
    let drops: u64 = agg.iter().flatten().map(|a| a.drops).sum();
    let at: Vec<&String> = agg.iter().flatten().flat_map(|a| &a.drop_at).collect();
    rows.push(
        Row::new(
            "§V-B",
            "frames the switches dropped, all cells",
            "none: PFC-enabled lossless network",
            drops as f64,
            "frames",
        )
        .check(Check::AtMost(0.0))
        .note(if at.is_empty() {
            "the switches' lossless audit".to_string()
        } else {
            format!(
                "lossless-class overflows, not a load-balancing result (every data packet \
                 arrived: the row above): {}",
                at.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
            )
        }),
    );
    for v in &VARIANTS {
        rows.extend(variant_rows(ctx, log, &agg, v)?);
    }
    Ok(rows)
}

/// Where Proteus is above baseline `b` in metric `m` at a load, whether its flows over 1 MB
/// carry at least 80 % of its FCT above the baseline's figure (at every load).
fn stuck(agg: &[Vec<Agg>], b: usize, m: fn(&Agg) -> f64) -> bool {
    agg.iter().all(|per| {
        let (pr, base) = (&per[P], &per[b]);
        if m(pr) <= m(base) {
            return true;
        }
        let line = m(base);
        let excess = |big: bool| -> f64 {
            pr.sized
                .iter()
                .filter(|(sz, us)| *us > line && (*sz > LARGE) == big)
                .map(|(_, us)| us - line)
                .sum()
        };
        let (big, small) = (excess(true), excess(false));
        big >= 0.8 * (big + small)
    })
}

/// A count per load (in [`LOADS`] order), as "a, b, c, d".
fn counts_per_load(agg: &[Vec<Agg>], f: impl Fn(&[Agg]) -> u64) -> String {
    agg.iter()
        .map(|per| f(per).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per load, Proteus's reduction of metric `m` against baseline `b`, %.
fn reductions(agg: &[Vec<Agg>], b: usize, m: fn(&Agg) -> f64) -> Vec<f64> {
    agg.iter()
        .map(|per| (1.0 - m(&per[P]) / m(&per[b])) * 100.0)
        .collect()
}

/// A variant of §V-B: the same cells with other receivers.
struct Variant {
    /// `deploy/experiments/FILE.toml`.
    file: &'static str,
    fig: &'static str,
    /// The paper's words the variant tests.
    quote: &'static str,
    /// What the receivers do, for the notes.
    how: &'static str,
    /// Whether the paper says DRILL gets slower with these receivers (footnote 2, of
    /// go-back-N): a row holds DRILL's AFCT to at least the unbounded buffer's.
    penalty: bool,
}

const VARIANTS: [Variant; 2] = [
    // The paper's footnote 2 (`proteus-vb-gbn.toml`: receivers that go back N instead of
    // buffering, as commodity RoCE NICs).
    Variant {
        file: "proteus-vb-gbn",
        fig: "§V-B, footnote 2 (go-back-N receivers)",
        quote: "\"the baseline performance will be worse due to the severe penalty incurred by \
                out-of-order packets, while Proteus can remain the same performance\"",
        how: "The receivers drop a packet above the one they expect and NAK it once; the \
              sender goes back to it (`[host] out_of_order = \"go-back-n\"`, \
              `dataplane::host::OutOfOrder`)",
        penalty: true,
    },
    // The reordering buffer the paper cites for its baselines ([24] Hermes, [26] Presto)
    // waits a bounded time for a hole (`proteus-vb-resequence.toml`: 100 µs, Hermes's
    // large-scale setting), then the gap goes to the transport: for RoCE a NAK and go-back-N.
    Variant {
        file: "proteus-vb-resequence",
        fig: "§V-B, reordering buffer with a 100 µs wait ([24] Hermes)",
        quote: "\"We use reordering buffer to mask packet reordering [24], [26]\"; Proteus \
                outperforms DRILL and CONGA on AFCT and p99 FCT",
        how: "The receivers buffer packets above a hole for up to 100 µs (Hermes's ns-3 \
              resequencing buffer in its large-scale runs; 50 µs by default), then drop what \
              they buffered and NAK the hole once; the sender goes back to it \
              (`[host] out_of_order = \"buffer:100us\"`, `dataplane::host::OutOfOrder`)",
        penalty: false,
    },
];

/// The rows of a §V-B variant `v`. `buffered`: the main run's aggregates, to compare Proteus
/// with itself.
fn variant_rows(
    ctx: &Ctx<'_>,
    log: &mut String,
    buffered: &[Vec<Agg>],
    v: &Variant,
) -> Result<Vec<Row>> {
    let (_, agg) = run(ctx, v.file)?;
    let _ = writeln!(
        log,
        "{}: per network load and lb: AFCT / p99 FCT (µs), reordered packets, \
         retransmissions",
        v.fig
    );
    for (li, (load, _)) in LOADS.iter().enumerate() {
        for (bi, lb) in LBS.iter().enumerate() {
            let a = &agg[li][bi];
            let _ = writeln!(
                log,
                "load {load}: {lb:8} AFCT {:7.1} p99 {:8.1}  {}/{} flows  reordered {:7}  \
                 retx {}",
                a.afct(),
                a.p99(),
                a.completed,
                a.flows,
                a.reordered,
                a.retx
            );
        }
    }
    let p = P;
    let (fig, quote) = (v.fig, v.quote);
    let mut rows = Vec::new();
    // ECMP never reorders, so its cells are the main run's. CONGA reorders a little (a
    // flowlet moving to a faster path): it keeps its rows here.
    for (b, name) in [(2, "CONGA"), (1, "DRILL")] {
        for (metric, m) in [
            ("AFCT", Agg::afct as fn(&Agg) -> f64),
            ("p99 FCT", Agg::p99 as fn(&Agg) -> f64),
        ] {
            let r = reductions(&agg, b, m);
            let worst = r.iter().copied().fold(f64::INFINITY, f64::min);
            let per_load = LOADS
                .iter()
                .zip(&r)
                .zip(&agg)
                .map(|(((l, _), x), per)| {
                    format!(
                        "{l}: {x:.0} % ({name} {:.0} µs, {} retransmissions)",
                        m(&per[b]),
                        per[b].retx
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut note = format!(
                "Proteus below {name} at every load iff ≥ 0. Per load: {per_load}. {}",
                v.how
            );
            if !v.penalty {
                // What the bounded wait cost the baseline: its holes that outlived it.
                let _ = write!(
                    note,
                    ". {name}'s reordered packets per load {} and retransmissions (holes \
                     still open after the wait) {}",
                    counts_per_load(&agg, |per| per[b].reordered),
                    counts_per_load(&agg, |per| per[b].retx)
                );
            }
            if worst < 0.0 {
                note.push_str(
                    ". Where it is below 0, the main run's checked reason holds here too: \
                     flows over 1 MB carry at least 80 % of Proteus's FCT above the \
                     baseline's figure (they keep the path they started on)",
                );
            }
            rows.push(
                Row::new(
                    fig,
                    &format!("{metric}, Proteus vs {name}: smallest reduction over loads 0.3-0.8"),
                    quote,
                    worst,
                    "%",
                )
                .check(Check::AtLeast(0.0))
                .differs(stuck(&agg, b, m))
                .note(note),
            );
        }
    }
    if v.penalty {
        let pen: Vec<f64> = agg
            .iter()
            .zip(buffered)
            .map(|(g, bu)| g[1].afct() / bu[1].afct())
            .collect();
        rows.push(
            Row::new(
                fig,
                "DRILL: AFCT with these receivers over AFCT with unbounded reordering buffers, \
                 smallest over loads",
                quote,
                pen.iter().copied().fold(f64::INFINITY, f64::min),
                "x",
            )
            .check(Check::AtLeast(1.0))
            .note(format!(
                "the penalty of DRILL's reordering once the receivers stop masking it; per load: \
                 {}",
                LOADS
                    .iter()
                    .zip(&pen)
                    .map(|((l, _), x)| format!("{l}: {x:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        );
    }
    // Proteus reorders nothing, so its receivers never drop a packet: its cells must be the
    // buffered run's, exactly (the fabric is deterministic).
    let same = agg.iter().zip(buffered).all(|(g, b)| {
        g[p].retx == b[p].retx && g[p].fcts_us == b[p].fcts_us && g[p].reordered == 0
    });
    rows.push(
        Row::holds(
            fig,
            "Proteus: every flow's FCT the same as with unbounded reordering buffers",
            quote,
            same,
        )
        .note(format!(
            "Proteus's cells with these receivers against the main run's, flow by flow; \
             retransmissions per load: {}",
            counts_per_load(&agg, |per| per[p].retx)
        )),
    );
    rows.push(Row::holds(
        fig,
        "every flow of every cell completes, no frame dropped by a switch",
        "PFC-enabled lossless network",
        agg.iter()
            .flatten()
            .all(|a| a.completed == a.flows && a.drops == 0 && a.lost == 0),
    ));
    Ok(rows)
}

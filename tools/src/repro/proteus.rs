//! Proteus (Hu et al., "Proteus: PFC-aware load balancing with sub-RTT rerouting"), the §II-B.3
//! case study (Fig. 1 and 4) in virtual time, time-scaled: a 40 Gbit/s Clos, leaves L1 and L3,
//! spines C1 and C2, 1 µs links, a 9 MB shared buffer with PFC on priority 3 everywhere, hosts
//! honouring PFC (`deploy/sim/proteus-fig4.toml`; `drill-fig4.toml` is the same with DRILL,
//! and ECMP runs the same file with `lb = "ecmp"`).
//!
//! The victim f1 (S1 → R1, 2 MB at line rate) shares L1 with S2, whose bursts to R2 meet 14
//! bursting hosts under L3: R2's port backs up, L3 pauses its ingress ports, the spine carrying
//! S2's bursts pauses, and the pause reaches L1. The paper (§V-B, on Fig. 4(d)): f1's FCT is
//! 34 % lower under Proteus than under DRILL and 39 % lower than under CONGA (Fig. 2: f1 under
//! CONGA stays on the paused path). CONGA runs `conga-fig4.toml`: the same file with
//! `lb = "conga"` and ACK streams back to L1, which carry CONGA's feedback. Hermes is not
//! built.
//!
//! Transport: the fabric's constant-rate UDP flows with PFC-honouring NICs; the paper's is
//! DCQCN, which the §V-B rows ([`super::proteus_vb`]: the large-scale Web Search runs of
//! Fig. 10) use.

use super::{sim_file, Check, Ctx, Row, Section};
use crate::plot::{write_chart, Chart};
use anyhow::{Context, Result};
use dataplane::fabric::{Fabric, FabricOptions, SimReport};
use dataplane::scheme::conga::{CongaStats, FlowletChoice};
use dataplane::scheme::proteus::ProteusStats;
use dataplane::Topology;
use std::fmt::Write;

/// f1's progress samples for the plot, ps.
const BUCKET: u64 = 10_000_000;

/// One Fig. 4 run.
struct Fig4 {
    report: SimReport,
    /// L1's Proteus counters (Proteus only).
    l1: Option<ProteusStats>,
    /// L1's CONGA counters and flowlet decisions (CONGA only).
    conga: Option<CongaStats>,
    /// How long each spine's port toward L3 was PFC-paused, µs.
    paused: [f64; 2],
    /// f1's received MB over time (µs, MB).
    progress: Vec<(f64, f64)>,
}

impl Fig4 {
    fn f1(&self) -> Result<&dataplane::fabric::FlowReport> {
        self.report
            .flows
            .iter()
            .find(|f| f.name == "f1")
            .context("flow f1")
    }

    /// f1's FCT in µs (`None`: it did not complete).
    fn fct_us(&self) -> Result<Option<f64>> {
        Ok(self.f1()?.fct_ps.map(|p| p as f64 / 1e6))
    }

    fn reordered(&self) -> Result<u64> {
        Ok(self.f1()?.reordered)
    }
}

/// Runs `file`, with `lb` on every switch when given.
fn fig4(file: &str, lb: Option<&str>) -> Result<Fig4> {
    let p = sim_file(file);
    let mut text = std::fs::read_to_string(&p).with_context(|| format!("{}", p.display()))?;
    if let Some(lb) = lb {
        text = text.replace("\nlb = \"proteus\"", &format!("\nlb = \"{lb}\""));
    }
    let t = Topology::parse(&text, &p)?;
    let mut f = Fabric::new(&t, &FabricOptions::default())?;
    let mut progress = Vec::new();
    let mut at = 0;
    loop {
        let done = f
            .flows()
            .by_name("f1")
            .context("flow f1")?
            .fct_ps()
            .is_some();
        let rx = f.flows().by_name("f1").context("flow f1")?.rx_bytes;
        progress.push((at as f64 / 1e6, rx as f64 / 1e6));
        if done || at >= 3_000_000_000 {
            break;
        }
        at += BUCKET;
        f.run_until(at);
    }
    f.run();
    let now = f.now();
    let l1s = f.switch("L1").and_then(|s| s.scheme_stats(now));
    let conga = l1s.as_ref().and_then(|s| s.conga.clone());
    let l1 = l1s.and_then(|s| s.proteus);
    let mut paused = [0.0; 2];
    for (i, c) in ["C1", "C2"].iter().enumerate() {
        let sw = f.switch(c).context(c.to_string())?;
        let l3 = sw
            .shared
            .spec
            .ports
            .iter()
            .position(|p| p.name == "l3")
            .context("spine port l3")?;
        let pfc = sw
            .scheme_stats(now)
            .and_then(|s| s.pfc)
            .context("PFC stats")?;
        paused[i] = pfc.ports[l3]
            .iter()
            .find(|c| c.prio == 3)
            .context("priority 3")?
            .rx_pause_us;
    }
    Ok(Fig4 {
        report: f.report(),
        l1,
        conga,
        paused,
        progress,
    })
}

pub fn run(ctx: &Ctx<'_>) -> Result<Section> {
    let e = fig4("proteus-fig4.toml", Some("ecmp"))?;
    let d = fig4("drill-fig4.toml", None)?;
    let p = fig4("proteus-fig4.toml", None)?;
    let c = fig4("conga-fig4.toml", None)?;
    let mut log = String::new();
    let mut complete = true;
    for (n, r) in [("ECMP", &e), ("DRILL", &d), ("Proteus", &p), ("CONGA", &c)] {
        let _ = writeln!(
            log,
            "{n}: f1 FCT {:?} µs, reordered {} of {} packets; C1:l3 paused {:.0} µs, C2:l3 {:.0} \
             µs; lost (all flows) {}",
            r.fct_us()?,
            r.reordered()?,
            r.f1()?.rx_pkts,
            r.paused[0],
            r.paused[1],
            r.report.flows.iter().map(|f| f.lost).sum::<u64>()
        );
        complete &= r.report.flows.iter().all(|f| f.lost == 0) && r.fct_us()?.is_some();
    }
    let st = p.l1.clone().context("L1 Proteus stats")?;
    let _ = writeln!(log, "Proteus L1: {st:?}");
    let cs = c.conga.clone().context("L1 CONGA stats")?;
    // CONGA's new-flowlet decisions at L1 for the flows leaving it: what each uplink read
    // (max of local DRE and Congestion-To-Leaf, Q = 3) when the flowlet chose.
    let show = |ch: &FlowletChoice| {
        format!(
            "t = {:.1} µs sport {} → uplink {} (local DRE {:?}, to-leaf {:?}, paused {:?})",
            ch.t_ps as f64 / 1e6,
            ch.sport,
            ch.uplink,
            ch.local,
            ch.remote,
            ch.paused
        )
    };
    for ch in &cs.choices {
        let _ = writeln!(log, "CONGA L1 flowlet: {}", show(ch));
    }
    let _ = writeln!(
        log,
        "CONGA L1: {} routed, {} new flowlets, {} feedback sent, {} applied",
        cs.routed, cs.new_flowlets, cs.feedback_sent, cs.feedback_applied
    );
    let f1_sport = 49152;
    let s2_sport = 49155;
    let f1_choices: Vec<&FlowletChoice> =
        cs.choices.iter().filter(|x| x.sport == f1_sport).collect();
    let s2_first = cs
        .choices
        .iter()
        .find(|x| x.sport == s2_sport)
        .context("CONGA: S2's first burst flowlet")?;
    let f1_on_s2_path = f1_choices.iter().any(|x| x.uplink == s2_first.uplink);
    // Why CONGA's f1 misses the pause here (the margin row's note): one flowlet, on the
    // uplink S2's bursts did not take.
    let explained = !f1_on_s2_path && f1_choices.len() == 1;
    // A flow that did not complete shows as infinite FCT, so every comparison below fails.
    let fct = |r: &Fig4| -> Result<f64> { Ok(r.fct_us()?.unwrap_or(f64::INFINITY)) };
    let (fe, fd, fp, fc) = (fct(&e)?, fct(&d)?, fct(&p)?, fct(&c)?);
    let c_complete = c.report.flows.iter().all(|f| f.lost == 0) && c.fct_us()?.is_some();
    let (long, short) = (p.paused[0].max(p.paused[1]), p.paused[0].min(p.paused[1]));
    let (re, rd, rp) = (e.reordered()?, d.reordered()?, p.reordered()?);
    let fcts =
        format!("f1 FCT: ECMP {fe:.0} µs, DRILL {fd:.0} µs, Proteus {fp:.0} µs, CONGA {fc:.0} µs");
    let f1_seen = f1_choices
        .iter()
        .map(|x| show(x))
        .collect::<Vec<_>>()
        .join("; ");
    let mut rows = vec![
        Row::new(
            "§V-B on §II-B.3 Fig. 4(d)",
            "f1 FCT, Proteus vs DRILL: reduction",
            "\"the FCT of the victim flow f1 is reduced by … 34% over … DRILL\"",
            (1.0 - fp / fd) * 100.0,
            "%",
        )
        .check(Check::AtLeast(25.0))
        .note(format!(
            "{fcts}. \"Roughly the paper's margin\" (issue 18): at least 25 %. DRILL sprays \
             S2's bursts over both spines, so both spines' ports toward L3 pause and f1, \
             sprayed too, waits whichever it takes; Proteus keeps S2 on one spine and f1 on \
             the other (row §III-B below)"
        )),
        Row::new(
            "§V-B on §II-B.3 Fig. 4(d)",
            "f1 FCT, Proteus vs CONGA: reduction",
            "\"the FCT of the victim flow f1 is reduced by 39% … over CONGA\"",
            (1.0 - fp / fc) * 100.0,
            "%",
        )
        // The same band as DRILL's row; it does not hold here, for the reason in the note,
        // which the run checks (the next row): the verdict reads "differs (explained)" while
        // that reason holds and BROKEN if it stops holding.
        .check(Check::AtLeast(25.0))
        .differs(explained)
        .note(format!(
            "{fcts}. Not reproduced: the paper's mechanism (Fig. 2d: CONGA keeps putting f1 on \
             the path whose utilisation PFC pausing lowered) needs f1 to start flowlets while \
             S2's bursts pause its path. Here f1 is one gapless line-rate UDP stream, so it has \
             one flowlet (T_fl = 125 µs at 40 Gbit/s), chosen at t = 0 on a tie: {f1_seen}. \
             S2's first burst flowlet then chose the less utilised uplink: {}; f1 at line \
             rate keeps its own uplink reading near 7 of 7, so no later flowlet of S2 (or of \
             anything) joins it while the other uplink is below, the pause builds on the spine \
             f1 is not on, and CONGA's f1 never meets it: CONGA here does what it is designed \
             to. So does Proteus since issue 18's fix (the queue f1 builds on its uplink counts \
             in that path's delay at once, so S2's burst flows take the other one), and the two \
             tie; before, Proteus's f1 waited behind the pause until Algorithm 2 moved it. \
             With the paper's DCQCN transport f1's rate (and gaps) would vary; that transport \
             is not wired into this case (issue 19)",
            show(s2_first)
        )),
        Row::holds(
            "§II-B.1 Fig. 2(d)",
            "CONGA: f1 and S2's bursts on different uplinks (why the row above differs)",
            "CONGA \"always allocates the packets of f1 to Path2\", the paused one",
            explained,
        )
        .note(
            "holds = the explanation above holds: f1 had one flowlet and S2's bursts took the \
             other uplink. tests/conga.rs shows the paper's point where new flowlets do meet a \
             pause: a PFC-paused uplink reads idle to CONGA and takes them",
        ),
        Row::holds(
            "§II-B.3",
            "CONGA: PFC lossless, f1 completes, feedback reached L1",
            "PFC-enabled lossless network; CONGA's leaf-to-leaf feedback",
            c_complete && cs.feedback_applied > 0,
        )
        .note(format!(
            "L1 applied {} piggybacked metrics from L3's ACK streams",
            cs.feedback_applied
        )),
        Row::new(
            "§II-B.3 Fig. 4",
            "f1 FCT, Proteus vs ECMP: reduction",
            "– (ECMP is not in Fig. 4; the paper's other baselines: 39 % vs CONGA, 21 % vs \
             Hermes)",
            (1.0 - fp / fe) * 100.0,
            "%",
        )
        .check(Check::AtLeast(25.0))
        .note(
            "ECMP keeps each flow on one spine and with this seed hashes f1 onto the spine \
             S2's bursts pause: the CONGA case of Fig. 2, where f1 stays on the paused path",
        ),
        Row::holds(
            "§II-B.3 Fig. 4(a–b)",
            "DRILL: both spines' ports toward L3 paused > 500 µs",
            "PFC pauses the path DRILL keeps choosing",
            d.paused.iter().all(|&us| us > 500.0),
        )
        .note(format!(
            "C1 {:.0} µs, C2 {:.0} µs of 400 µs of bursts and their drain",
            d.paused[0], d.paused[1]
        )),
        Row::holds(
            "§III-B",
            "Proteus: one spine paused > 500 µs, the other < 200 µs; f1 not slowed by the \
             pause (FCT ≤ 1.1 × CONGA's, whose f1 never meets it), feedback reached L1",
            "Proteus routes around the paused path",
            long > 500.0 && short < 200.0 && fp <= 1.1 * fc && st.feedback_applied > 0,
        )
        .note(format!(
            "spines paused {long:.0} and {short:.0} µs; f1 {fp:.0} µs, CONGA's {fc:.0} µs; L1: \
             {} Algorithm 1 and {} Algorithm 2 reroutes, {} Algorithm 2 reroutes held for \
             order, {} feedback signals applied. Since issue 18's order fix the queue on an \
             uplink counts in its paths' delay at once, so S2's burst flows (new flows) take \
             the uplink f1 does not fill and f1 keeps its spine; Algorithm 2 no longer moves \
             f1 past its own packets waiting at a paused uplink (before: 1 such reroute, 6 \
             reordered packets, f1 987 µs)",
            st.source_reroutes, st.hop_reroutes, st.hop_reroutes_held, st.feedback_applied
        )),
        Row::holds(
            "§II-B.3",
            "PFC lossless, f1 completes (ECMP, DRILL, Proteus)",
            "PFC-enabled lossless network",
            complete,
        ),
        Row::holds(
            "§II-B.3",
            "ECMP: f1 not reordered",
            "one path per flow",
            re == 0,
        ),
        Row::new(
            "§II-B.3 Fig. 4",
            "DRILL: f1 packets reordered",
            "per-packet rerouting reorders (§I)",
            rd as f64,
            "pkts",
        )
        .check(Check::AtLeast(100.0)),
        Row::new(
            "§III-B",
            "Proteus: f1 packets reordered",
            "none (issue 18: \"none of Proteus's reroutes may reorder\")",
            rp as f64,
            "pkts",
        )
        .check(Check::AtMost(0.0))
        .note(format!(
            "{rp} of f1's {} packets. A packet of a flow moves (Algorithm 1 or 2) only once the \
             flow's previous packet has left the source edge, and by less than the time since \
             (issue 18; before, 6 packets that Algorithm 2 moved past f1's packets waiting \
             behind the pause)",
            p.f1()?.rx_pkts
        )),
    ];
    rows.extend(super::proteus_vb::rows(ctx, &mut log)?);
    let mut files = Vec::new();
    write_chart(
        ctx.out,
        "proteus-fig4d",
        &Chart {
            title: "Proteus §II-B.3 Fig. 4: victim f1's received MB",
            x: "time (µs)",
            y: "f1 received (MB)",
            series: vec![
                ("ECMP".into(), e.progress.clone()),
                ("DRILL".into(), d.progress.clone()),
                ("Proteus".into(), p.progress.clone()),
                ("CONGA".into(), c.progress.clone()),
            ],
            step: false,
            ..Default::default()
        },
        &mut files,
    )?;
    Ok(Section {
        title: "Proteus (PFC-aware load balancing)".into(),
        setup: "§II-B.3 case study (Fig. 1 and 4), time-scaled: 40 Gbit/s Clos (L1, L3, spines \
                C1, C2), 1 µs links, 9 MB shared buffer with PFC on priority 3, hosts honour \
                PFC. f1: S1 → R1, 2 MB at line rate from t = 0 (the paper: 20 MB); background \
                B1 → D1, B2 → D2 at 15 Gbit/s until 1 ms; 5 bursts to R2 from 100 to 500 µs, \
                S2 at line rate 80 µs on / 20 µs off and 14 hosts under L3 20 µs on / 80 µs off \
                (the paper gives flow counts, not timings). `deploy/sim/proteus-fig4.toml`, \
                `drill-fig4.toml`, `conga-fig4.toml` (with 1 Gbit/s ACK streams back to L1 for \
                CONGA's feedback), and ECMP on the same file. Transport: constant-rate UDP, \
                not the paper's DCQCN. Hermes is not built.\n\n§V-B large-scale Web Search \
                (Fig. 10): `deploy/experiments/proteus-vb.toml`, the paper's 8 × 8 leaf-spine \
                with 128 hosts, 100 Gbit/s, 12 MB buffers, PFC, DCQCN hosts, Web Search sizes \
                with Poisson arrivals at network load 0.3, 0.5, 0.7, 0.8 (NIC load 0.170, \
                0.284, 0.397, 0.454: 16 hosts per leaf over 8 uplinks), ECMP, DRILL, CONGA, \
                Proteus. Run length scaled, not the topology: 3 ms of arrivals, seeds 1 and 2 \
                (`--quick`: 1 ms, seed 1); AFCT and p99 are absolute FCTs of every completed \
                flow of a load; every receiver's reordering buffer waits for ever. The same \
                cells again with go-back-N receivers (`deploy/experiments/proteus-vb-gbn.toml`, \
                the paper's footnote 2: commodity RoCE NICs), and with reordering buffers that \
                give up on a hole after 100 µs, as the buffer the paper cites for its \
                baselines ([24] Hermes) does, the gap then costing a NAK and go-back-N \
                (`deploy/experiments/proteus-vb-resequence.toml`)."
            .into(),
        rows,
        plots: vec!["proteus-fig4d.svg".into()],
        log,
        ..Section::default()
    })
}

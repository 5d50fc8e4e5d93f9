//! Results aggregation: what one cell measured (flows, host counters, switch counters and
//! audits, switch telemetry over time), typed as results.json carries it, and how the runners
//! fold their raw records into it.

use super::plan::Plan;
use super::spec::Mode;
use crate::congestion::PortPauses;
use dataplane::host::report::{
    ideal_fct_ps, merge, summarize, FlowResult, RxRecord, Summary, TxRecord,
};
use dataplane::host::StackCounters;
use dataplane::stats::SwitchSnapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A cell's lossless audit (`dataplane::audit`): every switch's ledger summed, plus the
/// AF_XDP ring losses at the host ends on real frames. Taken after the traffic stopped, when
/// it is exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellAudit {
    /// Some switch claims lossless priorities (PFC on a priority, or a per-hop scheme).
    pub lossless_claimed: bool,
    /// Switches whose audit does not balance, or that did not answer.
    pub unbalanced: Vec<String>,
    /// Frames the switches dropped after classification, plus ring losses everywhere.
    pub lost: u64,
    /// Of those, frames of lossless priorities (and ring losses where lossless traffic runs,
    /// host ends included).
    pub lossless_lost: u64,
}

impl CellAudit {
    pub(super) fn add(&mut self, a: &dataplane::audit::Audit, spec: &dataplane::SwitchSpec) {
        self.lossless_claimed |= dataplane::audit::lossless_prios(spec) != 0;
        if !a.balanced {
            self.unbalanced.push(a.switch.clone());
        }
        self.lost += a.lost;
        self.lossless_lost += a.lossless_lost;
    }

    /// Why a cell that claims losslessness fails its audit (None: it passes, or claims
    /// nothing).
    pub fn failure(&self) -> Option<String> {
        if !self.lossless_claimed {
            return None;
        }
        match (self.unbalanced.is_empty(), self.lossless_lost) {
            (true, 0) => None,
            (true, n) => Some(format!("{n} frames of lossless priorities lost")),
            (false, n) => Some(format!(
                "audit does not balance at {} ({n} lossless frames lost)",
                self.unbalanced.join(", ")
            )),
        }
    }
}

/// Aquarius counters of a cell, summed over every switch port (and host stacks): why it
/// paused, how often a congested flow was moved to `rsvQ` rather than its queue paused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AquariusTotals {
    /// PAUSEs sent because the queue passed Q_high, and by contribution (Alg. 1).
    pub pauses_qhigh: u64,
    pub pauses_contribution: u64,
    pub resumes: u64,
    /// Upstream side (switch ports): PAUSEs that paused the flow's own queue, moved it to
    /// `rsvQ`, or found no queue for `rsvQ`; `rsvQ` allocations.
    pub queue_pauses: u64,
    pub flows_reassigned: u64,
    pub no_rsv: u64,
    pub rsv_allocations: u64,
    /// Flow-table entries shared by two flows (hash collisions).
    pub table_collisions: u64,
    /// The most flows active on one egress port.
    pub active_flows_max: u64,
    /// Host stacks: per-flow PAUSEs honoured, and signals naming no running flow.
    pub host_pauses_rx: u64,
    pub host_unknown: u64,
}

/// One cell's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: String,
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    pub summary: Summary,
    /// Sequence-check losses at the receivers.
    pub receiver_lost: u64,
    /// XDP_STATISTICS losses (switch ports and host sockets).
    pub xdp_lost: u64,
    /// Drops the switches counted, by reason.
    pub switch_drops: BTreeMap<String, u64>,
    /// Where: drops per "switch:port" (ports that dropped anything).
    #[serde(default)]
    pub drops_by_port: BTreeMap<String, u64>,
    /// PFC XOFF frames the switches sent (including refreshes).
    pub pfc_pause_frames: u64,
    /// BFC PAUSE signals the switches sent (to upstream switches and BFC host NICs).
    pub bfc_pauses: u64,
    pub bfc_resumes: u64,
    /// BFC flow-to-queue assignments that landed on an occupied queue.
    pub bfc_collisions: u64,
    /// Highest watermark of any switch queue, bytes.
    pub max_queue_bytes: u64,
    /// Per switch ingress port ("switch:port") whose lossless priority groups were paused:
    /// the most bytes one of them admitted during one pause (from its XOFF to its XON, in
    /// buffer cells × cell size). What arrived after the pause was decided: the data in
    /// flight on the link plus what the upstream sent before it obeyed.
    #[serde(default)]
    pub pause_absorbed_bytes: BTreeMap<String, u64>,
    /// Per paused ingress port: the bytes its lossless PGs admitted in the mean ended pause
    /// (all pauses' absorption over their count), beside the worst pause's above.
    #[serde(default)]
    pub pause_absorbed_mean_bytes: BTreeMap<String, u64>,
    /// PFC frames the host stacks received, and BFC PAUSEs they honoured (BFC mode).
    pub host_pfc_rx: u64,
    pub host_bfc_pauses_rx: u64,
    pub hosts_incomplete: Vec<String>,
    /// Pause signals each switch port sent (the congestion tree's edges).
    #[serde(default)]
    pub pauses: Vec<PortPauses>,
    /// The switches' lossless audit after the traffic stopped.
    #[serde(default)]
    pub audit: CellAudit,
    /// Aquarius cells: the mechanisms' counters over every switch port and host.
    #[serde(default)]
    pub aquarius: AquariusTotals,
    /// `lb = proteus` cells: every switch's Proteus counters summed (reroutes by Algorithm 1
    /// at the source edge and by Algorithm 2 at any hop, feedback applied).
    #[serde(default)]
    pub proteus: dataplane::scheme::proteus::ProteusStats,
    /// `response_ps = "auto"` switches (real frames): per switch the calibration and the PFC
    /// XOFF reaction times measured during the cell, which the calibrated term should cover.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub response: BTreeMap<String, ResponseAuto>,
    pub dir: String,
    /// Switch telemetry over time (all ports together, and the busiest ports).
    pub timeline: Timeline,
}

/// One `response_ps = "auto"` switch of a real-frame cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseAuto {
    pub calibration: dataplane::calibrate::CalibrationSnapshot,
    #[serde(default)]
    pub reaction: dataplane::reaction::ReactionSnapshot,
    /// The calibration is the experiment's first cell's, reused here.
    #[serde(default)]
    pub reused: bool,
}

/// Switch telemetry of a cell over time, sampled every `[sample] interval` (virtual or real).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub interval_us: f64,
    /// Sample times, µs from the start of the run.
    pub t_us: Vec<f64>,
    /// Bytes in the fullest queue of any switch port.
    pub max_queue_bytes: Vec<u64>,
    /// Bytes queued in all switch ports.
    pub total_queue_bytes: Vec<u64>,
    /// Pause signals sent so far by all switch ports (PFC XOFF frames + BFC pauses).
    pub pauses: Vec<u64>,
    /// The busiest ports ("switch:port"): the highest queue peaks and the most pauses.
    pub ports: BTreeMap<String, PortTimeline>,
}

/// One port's telemetry over time (aligned with [`Timeline::t_us`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PortTimeline {
    /// Bytes queued in all the port's queues.
    pub depth_bytes: Vec<u64>,
    /// Bytes in the port's fullest queue.
    pub max_queue_bytes: Vec<u64>,
    /// Pause signals sent so far on the port (PFC XOFF frames + BFC pauses).
    pub pauses: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub name: String,
    pub mode: Mode,
    pub cells: Vec<CellResult>,
    pub plots: Vec<String>,
    pub notes: Vec<String>,
    /// Set in a shard's partial results (`--shard I/N`), absent from whole runs and merges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
}

/// What `xoff experiment merge` checks shards by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardInfo {
    /// I and N of `--shard I/N`.
    pub index: usize,
    pub count: usize,
    /// Indices (table order) of the cells this shard ran, matching `cells`.
    pub cells: Vec<usize>,
    /// Every cell of the experiment, in table order.
    pub labels: Vec<String>,
    /// FNV-1a 64 of the experiment file, its topology and workload CDF files.
    pub digest: String,
    pub xoff_version: String,
}

/// Time series gathered during a cell: every switch port, aligned with `t_ps`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Series {
    pub(super) interval_ps: u64,
    pub(super) t_ps: Vec<u64>,
    /// "switch:port" → samples.
    pub(super) ports: BTreeMap<String, PortTimeline>,
}

/// Ports of each kind a timeline keeps in results.json and the plots.
const BUSIEST: usize = 4;

impl Series {
    pub(super) fn push(&mut self, key: &str, depth: u64, maxq: u64, pauses: u64) {
        let p = self.ports.entry(key.to_string()).or_default();
        p.depth_bytes.push(depth);
        p.max_queue_bytes.push(maxq);
        p.pauses.push(pauses);
    }

    /// Ports with the highest queue peaks, then those with the most pauses (up to `BUSIEST`
    /// each, ports that never queued nor paused left out).
    pub(super) fn busiest(&self) -> Vec<&String> {
        let top = |f: &dyn Fn(&PortTimeline) -> u64| {
            let mut v: Vec<(u64, &String)> = self
                .ports
                .iter()
                .map(|(k, p)| (f(p), k))
                .filter(|&(x, _)| x > 0)
                .collect();
            v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
            v.into_iter()
                .take(BUSIEST)
                .map(|(_, k)| k)
                .collect::<Vec<_>>()
        };
        let mut out = top(&|p| p.max_queue_bytes.iter().copied().max().unwrap_or(0));
        for k in top(&|p| p.pauses.last().copied().unwrap_or(0)) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    pub(super) fn timeline(&self) -> Timeline {
        let n = self.t_ps.len();
        let mut t = Timeline {
            interval_us: self.interval_ps as f64 / 1e6,
            t_us: self.t_ps.iter().map(|&x| x as f64 / 1e6).collect(),
            max_queue_bytes: vec![0; n],
            total_queue_bytes: vec![0; n],
            pauses: vec![0; n],
            ports: BTreeMap::new(),
        };
        for p in self.ports.values() {
            for i in 0..n {
                t.max_queue_bytes[i] = t.max_queue_bytes[i].max(p.max_queue_bytes[i]);
                t.total_queue_bytes[i] += p.depth_bytes[i];
                t.pauses[i] += p.pauses[i];
            }
        }
        for k in self.busiest() {
            t.ports.insert(k.clone(), self.ports[k].clone());
        }
        t
    }

    /// CSV: `time_us` then depth, fullest queue and pauses of every port that queued or paused.
    pub(super) fn csv(&self) -> String {
        use std::fmt::Write;
        let live: Vec<(&String, &PortTimeline)> = self
            .ports
            .iter()
            .filter(|(_, p)| {
                p.depth_bytes.iter().any(|&x| x > 0) || p.pauses.last().is_some_and(|&x| x > 0)
            })
            .collect();
        let mut s = String::from("time_us");
        for (k, _) in &live {
            let _ = write!(s, ",{k}:depth_bytes,{k}:max_queue_bytes,{k}:pauses");
        }
        s.push('\n');
        for (i, t) in self.t_ps.iter().enumerate() {
            let _ = write!(s, "{}", *t as f64 / 1e6);
            for (_, p) in &live {
                let _ = write!(
                    s,
                    ",{},{},{}",
                    p.depth_bytes[i], p.max_queue_bytes[i], p.pauses[i]
                );
            }
            s.push('\n');
        }
        s
    }
}

/// The flows of a cell from its senders' and receivers' records, each flow's ideal FCT (and
/// slowdown) on its own path's base RTT unless the file sets `host.base_rtt`.
pub(super) fn flow_results(p: &Plan, tx: &[TxRecord], rx: &[RxRecord]) -> Vec<FlowResult> {
    let (rate, rtt, mss) = (p.paths.rate, p.paths.rtt, p.paths.mss);
    let mut flows = merge(tx, rx, mss, rate, rtt);
    if p.exp.host.base_rtt.is_some() {
        return flows;
    }
    for f in &mut flows {
        let Some(&Some(r)) = p
            .paths
            .rtts
            .get(f.src as usize)
            .and_then(|row| row.get(f.dst as usize))
        else {
            continue;
        };
        f.ideal_ps = ideal_fct_ps(f.size, mss, rate, r);
        f.slowdown = f.fct_ps.map(|x| x as f64 / f.ideal_ps.max(1) as f64);
    }
    flows
}

/// Flow-control counters of one switch port.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FcPort {
    pfc_xoff: u64,
    bfc_pauses: u64,
    bfc_resumes: u64,
    bfc_collisions: u64,
}

impl FcPort {
    /// The flow-control counters of `port` in a snapshot's scheme statistics.
    pub(super) fn of(s: &SwitchSnapshot, port: usize) -> FcPort {
        use dataplane::scheme::pfc::PfcCount;
        let Some(st) = s.pfc.as_ref() else {
            return FcPort::default();
        };
        // BFC state is shared by a switch's pipes: every pipe reports the same counters.
        let bfc = st.bfc_port(port);
        FcPort {
            pfc_xoff: st.pfc_total(port, PfcCount::XoffSent),
            bfc_pauses: bfc.map_or(0, |b| b.pauses()),
            bfc_resumes: bfc.map_or(0, |b| b.resumes()),
            bfc_collisions: bfc.map_or(0, |b| b.collisions),
        }
    }

    /// Pause signals sent: PFC XOFF frames and BFC pauses.
    pub(super) fn pauses(&self) -> u64 {
        self.pfc_xoff + self.bfc_pauses
    }
}

impl CellResult {
    /// Adds one host stack's counters (before [`CellResult::add_switches`], which reads them).
    pub(super) fn add_host(&mut self, c: &StackCounters) {
        self.host_pfc_rx += c.pfc_rx;
        self.host_bfc_pauses_rx += c.pauses_rx;
        self.aquarius.host_unknown += c.flow_signals_unknown;
    }

    /// The flows' summary over `elapsed_ps`, and the receivers' sequence-check losses.
    pub(super) fn set_flows(&mut self, flows: &[FlowResult], elapsed_ps: u64) {
        self.summary = summarize(flows, elapsed_ps);
        self.receiver_lost = self.summary.lost;
    }

    /// Adds the switches' final counters: drops (by reason and by port), pause signals, the
    /// deepest queue, Aquarius and Proteus counters, and (real frames, `xdp`) AF_XDP ring
    /// losses at the switch ports.
    pub(super) fn add_switches(&mut self, snaps: &[SwitchSnapshot], xdp: bool) {
        let r = self;
        r.pauses = crate::congestion::port_pauses(snaps);
        for s in snaps {
            if let Some(n) = &s.nic {
                if let Some(c) = &n.calibration {
                    r.response.insert(
                        s.switch.clone(),
                        ResponseAuto {
                            calibration: c.clone(),
                            reaction: n.reaction.clone().unwrap_or_default(),
                            reused: false,
                        },
                    );
                }
            }
            let pipes = s.pfc.as_ref().map_or(&[][..], |st| st.pipes());
            for a in pipes.iter().filter_map(|st| st.aquarius.as_ref()) {
                let t = &mut r.aquarius;
                for p in &a.ports {
                    t.pauses_qhigh += p.pauses_sent_qhigh;
                    t.pauses_contribution += p.pauses_sent_contribution;
                    t.resumes += p.resumes_sent;
                    t.queue_pauses += p.queue_pauses;
                    t.flows_reassigned += p.flows_reassigned;
                    t.no_rsv += p.no_rsv;
                    t.rsv_allocations += p.rsv_allocations;
                    t.table_collisions += p.table_collisions;
                    t.active_flows_max = t.active_flows_max.max(p.active_flows_max);
                }
                // The hosts' pauses are Aquarius's when a switch runs it (both runners sum the
                // host counters before calling this).
                t.host_pauses_rx = r.host_bfc_pauses_rx;
            }
            for p in pipes.iter().filter_map(|st| st.proteus.as_ref()) {
                let t = &mut r.proteus;
                t.routed += p.routed;
                t.source_reroutes += p.source_reroutes;
                t.hop_reroutes += p.hop_reroutes;
                t.metered += p.metered;
                t.feedback_sent += p.feedback_sent;
                t.feedback_applied += p.feedback_applied;
            }
            for (i, p) in s.ports.iter().enumerate() {
                for (k, v) in &p.drops {
                    *r.switch_drops.entry(k.clone()).or_default() += v;
                }
                let n: u64 = p.drops.values().sum();
                if n > 0 {
                    *r.drops_by_port
                        .entry(format!("{}:{}", s.switch, p.name))
                        .or_default() += n;
                }
                if xdp {
                    r.xdp_lost += p.xdp.lost();
                }
                let fc = FcPort::of(s, i);
                r.pfc_pause_frames += fc.pfc_xoff;
                r.bfc_pauses += fc.bfc_pauses;
                r.bfc_resumes += fc.bfc_resumes;
                r.bfc_collisions += fc.bfc_collisions;
                for q in &p.queues {
                    r.max_queue_bytes = r.max_queue_bytes.max(q.watermark_bytes);
                }
            }
            // Per port: (bytes, pauses) summed over its lossless PGs and pipes.
            let mut ended: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for m in s.mmu.iter().flat_map(MmuView::of) {
                for pg in m.pgs.iter().filter(|g| g.lossless && g.absorbed_peak > 0) {
                    if let Some(p) = s.ports.get(pg.port) {
                        let key = format!("{}:{}", s.switch, p.name);
                        let e = r.pause_absorbed_bytes.entry(key.clone()).or_default();
                        *e = (*e).max(pg.absorbed_peak * m.cell_bytes);
                        let t = ended.entry(key).or_default();
                        t.0 += pg.absorbed_cells * m.cell_bytes;
                        t.1 += pg.xon;
                    }
                }
            }
            for (port, (bytes, n)) in ended.into_iter().filter(|e| e.1 .1 > 0) {
                r.pause_absorbed_mean_bytes.insert(port, bytes / n);
            }
        }
    }
}

/// What a cell keeps of a switch's MMU statistics (`mmu::MmuStats`, which a snapshot carries
/// as JSON: one object, or one per pipe).
#[derive(Deserialize)]
struct MmuView {
    cell_bytes: u64,
    pgs: Vec<PgView>,
}

/// One (ingress port, priority group) of [`MmuView`].
#[derive(Deserialize)]
struct PgView {
    port: usize,
    lossless: bool,
    absorbed_peak: u64,
    #[serde(default)]
    absorbed_cells: u64,
    #[serde(default)]
    xon: u64,
}

impl MmuView {
    fn of(v: &serde_json::Value) -> Vec<MmuView> {
        match v {
            serde_json::Value::Array(pipes) => pipes
                .iter()
                .filter_map(|p| MmuView::deserialize(p).ok())
                .collect(),
            one => MmuView::deserialize(one).ok().into_iter().collect(),
        }
    }
}

/// A cell's result, its flows and its switch telemetry, as a runner returns them.
pub(super) type CellOut = (CellResult, Vec<FlowResult>, Series);

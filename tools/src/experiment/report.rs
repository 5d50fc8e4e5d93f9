//! What a run leaves: results.json with the plots (`finish`), and the comparison tables it
//! prints.

use super::plots::plot_all;
use super::results::{CellOut, ExperimentResult, ShardInfo};
use super::spec::Mode;
use anyhow::Result;
use std::path::Path;

/// Plots and results.json of a set of finished cells (in table order).
pub(super) fn finish(
    out: &Path,
    name: &str,
    mode: Mode,
    ran: Vec<CellOut>,
    shard: Option<ShardInfo>,
) -> Result<ExperimentResult> {
    let mut results = Vec::new();
    let mut all_flows = Vec::new();
    let mut all_series = Vec::new();
    for (r, flows, series) in ran {
        all_flows.push((r.cell.clone(), flows));
        all_series.push((r.cell.clone(), series));
        results.push(r);
    }
    let mut notes = Vec::new();
    let mut plots = match plot_all(out, &all_flows, &all_series) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("plots failed: {e:#}"));
            Vec::new()
        }
    };
    let trees = results
        .iter()
        .map(|r| (r.cell.as_str(), Path::new(&r.dir), r.pauses.as_slice()));
    match crate::congestion::draw_cells(trees) {
        Ok(f) => plots.extend(f),
        Err(e) => notes.push(format!("congestion trees failed: {e:#}")),
    }
    let res = ExperimentResult {
        name: name.to_string(),
        mode,
        cells: results,
        plots,
        notes,
        shard,
    };
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&res)?,
    )?;
    Ok(res)
}

/// The comparison tables `xoff experiment` prints: every cell's counters and FCT slowdowns,
/// then FCT slowdown by flow size.
pub(super) fn table(r: &ExperimentResult) -> String {
    use std::fmt::Write;
    let w = r
        .cells
        .iter()
        .map(|c| c.cell.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let mut s = format!("\n{} ({})\n", r.name, r.mode);
    let _ = writeln!(
        s,
        "{:<w$} {:>6} {:>6} {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8}",
        "cell",
        "flows",
        "done",
        "rx_lost",
        "xdp_lost",
        "sw_drop",
        "retx",
        "pfc_xoff",
        "bfc_pause",
        "bfc_coll",
        "maxq_KB",
        "sd_avg",
        "sd_p50",
        "sd_p99",
        "Gbit/s"
    );
    for c in &r.cells {
        let drops: u64 = c.switch_drops.values().sum();
        let _ = writeln!(
            s,
            "{:<w$} {:>6} {:>6} {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8} {:>7.0} {:>7.2} {:>7.2} {:>7.2} {:>8.2}",
            c.cell,
            c.summary.flows,
            c.summary.completed,
            c.receiver_lost,
            c.xdp_lost,
            drops,
            c.summary.retx,
            c.pfc_pause_frames,
            c.bfc_pauses,
            c.bfc_collisions,
            c.max_queue_bytes as f64 / 1e3,
            c.summary.slowdown.avg,
            c.summary.slowdown.p50,
            c.summary.slowdown.p99,
            c.summary.goodput_gbps
        );
    }
    // `response_ps = "auto"`: what each switch measured and applied, against the reaction
    // times of the XOFFs it then sent.
    if r.cells.iter().any(|c| !c.response.is_empty()) {
        let _ = writeln!(
            s,
            "\nresponse_ps = \"auto\": calibration frames (µs, kernel to TX ring), the term applied, then the cell's PFC XOFF reactions (µs)"
        );
        for c in &r.cells {
            for (sw, a) in &c.response {
                let k = &a.calibration;
                let x = &a.reaction;
                let _ = writeln!(
                    s,
                    "{:<w$} {sw}: {}{} frames p50 {} p99 {} p99.9 {} -> response_ps {} µs (start {} µs); {} XOFFs p50 {} p99 {} p99.9 {} max {}",
                    c.cell,
                    if a.reused { "first cell's: " } else { "" },
                    k.samples,
                    k.p50_ns / 1000,
                    k.p99_ns / 1000,
                    k.p999_ns / 1000,
                    k.response_ps / 1_000_000,
                    k.start_response_ps / 1_000_000,
                    x.count,
                    x.p50_ns / 1000,
                    x.p99_ns / 1000,
                    x.p999_ns / 1000,
                    x.max_ns / 1000,
                );
            }
        }
    }
    // FCT slowdown by flow size: the size buckets any cell has flows in.
    let mut edges: Vec<(u64, u64)> = r
        .cells
        .iter()
        .flat_map(|c| c.summary.buckets.iter().map(|b| (b.lo, b.hi)))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    if edges.is_empty() {
        return s;
    }
    let size = |b: u64| match b {
        b if b >= 1_000_000 => format!("{}M", b / 1_000_000),
        b if b >= 1_000 => format!("{}K", b / 1_000),
        b => b.to_string(),
    };
    let _ = writeln!(s, "\nFCT slowdown by flow size (bytes), p50 / p99 [flows]");
    let _ = write!(s, "{:<w$}", "cell");
    for &(lo, hi) in &edges {
        let h = if hi == u64::MAX {
            format!(">{}", size(lo))
        } else {
            format!("{}-{}", size(lo), size(hi))
        };
        let _ = write!(s, " {h:>20}");
    }
    s.push('\n');
    for c in &r.cells {
        let _ = write!(s, "{:<w$}", c.cell);
        for &(lo, hi) in &edges {
            let cell = match c.summary.buckets.iter().find(|b| b.lo == lo && b.hi == hi) {
                Some(b) => format!(
                    "{:.2} / {:.2} [{}]",
                    b.slowdown.p50, b.slowdown.p99, b.slowdown.flows
                ),
                None => "-".into(),
            };
            let _ = write!(s, " {cell:>20}");
        }
        s.push('\n');
    }
    s
}

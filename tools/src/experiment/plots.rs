//! An experiment's plots (PNG + SVG, drawn with [`crate::plot`]): FCT slowdown by flow size
//! per cell, the FCT CDF, queue depth over time and pause signals over time for the busiest
//! ports, and the fullest queue of any port.

use super::results::Series;
use crate::plot::{write_chart, Axis, Bars, Chart, Unit};
use anyhow::Result;
use dataplane::host::report::{summarize, FlowResult};
use std::path::Path;

/// Draws every plot of the cells' `flows` and switch `series` into `out`; returns the files.
pub(super) fn plot_all(
    out: &Path,
    flows: &[(String, Vec<FlowResult>)],
    series: &[(String, Series)],
) -> Result<Vec<String>> {
    let mut files = Vec::new();
    fct_slowdown(out, flows, &mut files)?;
    fct_cdf(out, flows, &mut files)?;
    telemetry(out, series, &mut files)?;
    Ok(files)
}

/// FCT slowdown: p50 and p99 per size bucket as grouped bars, on a log axis (a lossy cell's
/// p99 is often 10x the others').
fn fct_slowdown(
    out: &Path,
    flows: &[(String, Vec<FlowResult>)],
    files: &mut Vec<String>,
) -> Result<()> {
    let mut edges: Vec<(u64, u64)> = Vec::new();
    let sums: Vec<_> = flows.iter().map(|(c, fl)| (c, summarize(fl, 1))).collect();
    for (_, s) in &sums {
        for b in &s.buckets {
            if !edges.contains(&(b.lo, b.hi)) {
                edges.push((b.lo, b.hi));
            }
        }
    }
    edges.sort_unstable();
    let size = |b: u64| crate::plot::tick(b as f64, Unit::Bytes);
    let categories = edges
        .iter()
        .map(|&(lo, hi)| match (lo, hi) {
            (0, h) => format!("< {}", size(h)),
            (l, u64::MAX) => format!("≥ {}", size(l)),
            (l, h) => format!("{}–{}", size(l), size(h)),
        })
        .collect();
    let groups = sums
        .iter()
        .map(|(cell, s)| {
            let v = edges
                .iter()
                .map(|&(lo, hi)| {
                    s.buckets
                        .iter()
                        .find(|b| b.lo == lo && b.hi == hi && b.slowdown.flows > 0)
                        .map(|b| (b.slowdown.p50, b.slowdown.p99))
                })
                .collect();
            (cell.to_string(), v)
        })
        .collect();
    write_chart(
        out,
        "fct_slowdown",
        &Bars {
            title: "FCT slowdown by flow size (solid: p50, light: p99)",
            x: "flow size",
            y: "FCT slowdown (log)",
            categories,
            groups,
            ylog: true,
        },
        files,
    )?;
    Ok(())
}

/// FCT CDF on a log time axis: flows span microseconds to seconds.
fn fct_cdf(out: &Path, flows: &[(String, Vec<FlowResult>)], files: &mut Vec<String>) -> Result<()> {
    let mut cdf = Vec::new();
    for (cell, fl) in flows {
        let mut v: Vec<f64> = fl
            .iter()
            .filter_map(|f| f.fct_ps)
            .map(|x| x as f64 / 1e6)
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len().max(1) as f64;
        cdf.push((
            cell.clone(),
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, (i + 1) as f64 / n))
                .collect(),
        ));
    }
    write_chart(
        out,
        "fct_cdf",
        &Chart {
            title: "FCT CDF",
            x: "flow completion time (log)",
            y: "fraction of flows",
            series: cdf,
            step: false,
            xaxis: Axis::log(Unit::Micros),
            ..Default::default()
        },
        files,
    )?;
    Ok(())
}

/// Switch telemetry: the busiest ports of each cell, and the fullest queue of any port.
fn telemetry(out: &Path, series: &[(String, Series)], files: &mut Vec<String>) -> Result<()> {
    let mut depth = Vec::new();
    let mut maxq = Vec::new();
    let mut pauses = Vec::new();
    for (cell, s) in series {
        let ms: Vec<f64> = s.t_ps.iter().map(|&t| t as f64 / 1e9).collect();
        let line = |v: &[u64], scale: f64| -> Vec<(f64, f64)> {
            ms.iter()
                .zip(v)
                .map(|(&t, &x)| (t, x as f64 / scale))
                .collect()
        };
        let busiest = s.busiest();
        for k in &busiest {
            let p = &s.ports[*k];
            if p.depth_bytes.iter().any(|&d| d > 0) {
                depth.push((format!("{cell} {k}"), line(&p.depth_bytes, 1e3)));
            }
            if p.pauses.last().is_some_and(|&n| n > 0) {
                pauses.push((format!("{cell} {k}"), line(&p.pauses, 1.0)));
            }
        }
        let t = s.timeline();
        maxq.push((cell.clone(), line(&t.max_queue_bytes, 1e3)));
    }
    write_chart(
        out,
        "queue_depth",
        &Chart {
            title: "Bytes queued per port (busiest ports)",
            x: "time (ms)",
            y: "depth (KB)",
            series: depth,
            step: true,
            ..Default::default()
        },
        files,
    )?;
    write_chart(
        out,
        "queue_max",
        &Chart {
            title: "Fullest queue of any switch port",
            x: "time (ms)",
            y: "depth (KB)",
            series: maxq,
            step: true,
            ..Default::default()
        },
        files,
    )?;
    write_chart(
        out,
        "pause_timeline",
        &Chart {
            title: "Pause signals sent per port, cumulative (PFC XOFF frames, BFC pauses)",
            x: "time (ms)",
            y: "pause signals",
            series: pauses,
            step: true,
            ..Default::default()
        },
        files,
    )?;
    Ok(())
}

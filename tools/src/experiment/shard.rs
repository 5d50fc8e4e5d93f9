//! Sweeps across machines: `--shard I/N` runs every N-th cell and leaves what `xoff
//! experiment merge` needs to write what one whole run would have (issue 23).

use super::plan::{cell_dir_name, CellSpec, Plan};
use super::report::finish;
use super::results::{CellOut, ExperimentResult, Series, ShardInfo};
use anyhow::{anyhow, bail, Context, Result};
use dataplane::host::report::FlowResult;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `--shard I/N`: this process runs the cells whose index (in the order of the results table:
/// matrix values in key order, then seeds) is I modulo N. The assignment depends only on the
/// experiment file, so N independent processes cover every cell exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}`: use I/N, e.g. 0/4"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|e| format!("`{s}`: shard index: {e}"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|e| format!("`{s}`: shard count: {e}"))?;
        if count == 0 || index >= count {
            return Err(format!("`{s}`: need 0 <= I < N"));
        }
        Ok(ShardSpec { index, count })
    }
}

impl ShardSpec {
    /// Whether cell `i` (0-based, table order) belongs to this shard.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }
}

/// The flows and switch series of a sharded cell, exactly, for `xoff experiment merge`'s
/// plots (flows.csv and timeline.csv round their numbers).
const CELL_DATA: &str = "cell.json";

#[derive(Serialize, Deserialize)]
struct CellData {
    flows: Vec<FlowResult>,
    series: Series,
}

/// What shard `s` of plan `p` ran (`mine`, table order): each cell's exact flows and series
/// saved next to it for `xoff experiment merge`, and the shard's part of results.json.
pub(super) fn record(
    s: ShardSpec,
    p: &Plan,
    mine: &[&CellSpec],
    ran: &[CellOut],
) -> Result<ShardInfo> {
    for (r, flows, series) in ran {
        let data = CellData {
            flows: flows.clone(),
            series: series.clone(),
        };
        std::fs::write(
            Path::new(&r.dir).join(CELL_DATA),
            serde_json::to_vec(&data)?,
        )?;
    }
    Ok(ShardInfo {
        index: s.index,
        count: s.count,
        cells: mine.iter().map(|c| c.index).collect(),
        labels: p.cells.iter().map(|c| c.label.clone()).collect(),
        digest: p.digest.clone(),
        xoff_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// `xoff experiment merge DIR... --out OUT`: the shards' cells in table order, each cell
/// directory copied into `OUT`, then the table, plots and results.json of the whole
/// experiment, as one unsharded run would have written them. Refuses shards of different
/// experiments (name, files' digest, xoff version, cell list, shard count), a cell run by two
/// shards, and missing cells.
pub fn merge_dirs(dirs: &[PathBuf], out: &Path) -> Result<ExperimentResult> {
    if dirs.is_empty() {
        bail!("merge: give the shards' output directories");
    }
    let mut shards = Vec::new();
    for d in dirs {
        let p = d.join("results.json");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let r: ExperimentResult =
            serde_json::from_str(&text).with_context(|| format!("{}", p.display()))?;
        if r.shard.is_none() {
            bail!(
                "{}: not a shard (run with `--shard I/N`); nothing to merge",
                p.display()
            );
        }
        shards.push((d, r));
    }
    let (d0, r0) = &shards[0];
    let s0 = r0.shard.clone().expect("checked above");
    for (d, r) in &shards[1..] {
        let s = r.shard.as_ref().expect("checked above");
        let differ = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            anyhow!(
                "merge: {} and {} are shards of different experiments ({what}: {a:?} vs {b:?})",
                d0.display(),
                d.display()
            )
        };
        if r.name != r0.name {
            return Err(differ("name", &r0.name, &r.name));
        }
        if r.mode != r0.mode {
            return Err(differ("mode", &r0.mode, &r.mode));
        }
        if s.digest != s0.digest {
            return Err(differ(
                "digest of the experiment, topology and workload files",
                &s0.digest,
                &s.digest,
            ));
        }
        if s.xoff_version != s0.xoff_version {
            return Err(differ("xoff version", &s0.xoff_version, &s.xoff_version));
        }
        if s.labels != s0.labels {
            return Err(differ("cells", &s0.labels, &s.labels));
        }
        if s.count != s0.count {
            return Err(differ("shard count", &s0.count, &s.count));
        }
    }
    // Every cell exactly once.
    let n = s0.labels.len();
    let mut by_cell: Vec<Option<(usize, usize)>> = vec![None; n];
    for (si, (d, r)) in shards.iter().enumerate() {
        let s = r.shard.as_ref().expect("checked above");
        if s.cells.len() != r.cells.len() {
            bail!(
                "{}: results.json lists {} cells but {} results",
                d.display(),
                s.cells.len(),
                r.cells.len()
            );
        }
        for (ci, &g) in s.cells.iter().enumerate() {
            let Some(slot) = by_cell.get_mut(g) else {
                bail!("{}: cell index {g} out of range (0..{n})", d.display());
            };
            if let Some((other, _)) = *slot {
                bail!(
                    "merge: cell `{}` is in two shards: {} and {}",
                    s0.labels[g],
                    shards[other].0.display(),
                    d.display()
                );
            }
            if r.cells[ci].cell != s0.labels[g] {
                bail!(
                    "{}: cell {g} is `{}`, expected `{}`",
                    d.display(),
                    r.cells[ci].cell,
                    s0.labels[g]
                );
            }
            *slot = Some((si, ci));
        }
    }
    let missing: Vec<&str> = by_cell
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(g, _)| s0.labels[g].as_str())
        .collect();
    if !missing.is_empty() {
        let have: std::collections::BTreeSet<usize> = shards
            .iter()
            .filter_map(|(_, r)| r.shard.as_ref().map(|s| s.index))
            .collect();
        let absent: Vec<String> = (0..s0.count)
            .filter(|i| !have.contains(i))
            .map(|i| format!("{i}/{}", s0.count))
            .collect();
        bail!(
            "merge: {} of {n} cells missing ({}); shards not given: {}",
            missing.len(),
            missing.join(", "),
            if absent.is_empty() {
                "none".to_string()
            } else {
                absent.join(", ")
            }
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out_c = std::fs::canonicalize(out)?;
    for (d, _) in &shards {
        if std::fs::canonicalize(d)? == out_c {
            bail!("merge: --out {} is one of the shards", out.display());
        }
    }
    let mut ran = Vec::new();
    for (si, ci) in by_cell.into_iter().flatten() {
        let mut r = shards[si].1.cells[ci].clone();
        let src = shards[si].0.join(cell_dir_name(&r.cell));
        let dst = out.join(cell_dir_name(&r.cell));
        copy_cell(&src, &dst)?;
        let p = src.join(CELL_DATA);
        let data: CellData = serde_json::from_slice(
            &std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("{}", p.display()))?;
        r.dir = dst.display().to_string();
        ran.push((r, data.flows, data.series));
    }
    finish(out, &r0.name, r0.mode, ran, None)
}

/// Copies a cell directory's files (not the shard-only `cell.json`) into `dst`.
fn copy_cell(src: &Path, dst: &Path) -> Result<()> {
    std::fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    for e in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_cell(&e.path(), &to)?;
        } else if e.file_name() != CELL_DATA {
            std::fs::copy(e.path(), &to)
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod shard_tests {
    use super::ShardSpec;

    #[test]
    fn every_cell_has_exactly_one_shard() {
        for n in 1..=7 {
            let shards: Vec<ShardSpec> = (0..n)
                .map(|i| format!("{i}/{n}").parse().expect("valid shard"))
                .collect();
            for cell in 0..50 {
                let owners = shards.iter().filter(|s| s.owns(cell)).count();
                assert_eq!(owners, 1, "cell {cell} of {n} shards");
            }
        }
        for bad in ["1/1", "0/0", "2", "a/3", "1/b", "-1/3"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }
}

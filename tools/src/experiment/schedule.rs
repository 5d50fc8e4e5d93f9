//! The workload schedule: an experiment file's `[workload]` (an incast, or flow sizes from a
//! CDF at an offered load, optionally with incasts on top) as the flows of one cell
//! (`dataplane::workload`), written to each cell's `schedule.csv`.

use super::plan::Plan;
use super::spec::time;
use anyhow::{anyhow, bail, Result};
use dataplane::config::Topology;
use dataplane::units::{parse_rate, parse_size};
use dataplane::workload::{self, Arrival, Cdf, Dests, FlowSpec, IncastSpec, LoadSpec};

fn host_index(topo: &Topology, name: &str, key: &str, f: &str) -> Result<u32> {
    topo.hosts
        .iter()
        .position(|h| h.name == name)
        .map(|i| i as u32)
        .ok_or_else(|| anyhow!("{f}: {key}: no host named `{name}` in the topology"))
}

/// The rack of every host: the index of the switch its link attaches to (hosts without a link
/// each get a rack of their own).
fn host_racks(topo: &Topology) -> Result<Vec<u32>> {
    let r = topo.resolve()?;
    let n = r.switches.len() as u32;
    Ok(r.hosts
        .iter()
        .enumerate()
        .map(|(i, h)| h.port().map_or(n + i as u32, |(s, _)| s))
        .collect())
}

/// The flows of one cell: the plan's workload on the cell's topology `topo`, for `seed`, with
/// a load workload's offered load replaced by `load` (matrix key `load`) if given.
pub(super) fn schedule(
    p: &Plan,
    topo: &Topology,
    seed: u64,
    load: Option<f64>,
) -> Result<Vec<FlowSpec>> {
    let (exp, paths, f) = (&p.exp, &p.paths, p.fname.as_str());
    let w = &exp.workload;
    let duration = p.timing.duration;
    let names = |v: &Option<Vec<String>>, key: &str| -> Result<Option<Vec<u32>>> {
        v.as_ref()
            .map(|l| l.iter().map(|n| host_index(topo, n, key, f)).collect())
            .transpose()
    };
    match w.kind.as_str() {
        "incast" => {
            let rx = w
                .receiver
                .as_deref()
                .ok_or_else(|| anyhow!("{f}: workload.receiver: an incast needs a receiver"))?;
            let receiver = host_index(topo, rx, "workload.receiver", f)?;
            let senders = names(&w.senders, "workload.senders")?.unwrap_or_else(|| {
                (0..topo.hosts.len() as u32)
                    .filter(|&i| i != receiver)
                    .collect()
            });
            let size = parse_size(w.size.as_deref().unwrap_or("100KB"))
                .map_err(|e| anyhow!("{f}: workload.size: {e}"))?;
            Ok(IncastSpec {
                senders,
                receiver,
                size,
                period_ps: time(&w.period, "workload.period", f, 0)?,
                rounds: w.rounds.unwrap_or(1),
                start_ps: 0,
                jitter_ps: time(&w.jitter, "workload.jitter", f, 0)?,
                prio: w.prio.unwrap_or(3) & 7,
            }
            .generate(seed, 0))
        }
        "load" => {
            let cdf_path = p.base.join(
                w.cdf
                    .as_deref()
                    .ok_or_else(|| anyhow!("{f}: workload.cdf: a load workload needs a CDF"))?,
            );
            let cdf = Cdf::load(&cdf_path)?;
            let load = load.or(w.load).unwrap_or(0.5);
            if !(load > 0.0 && load <= 1.5) {
                bail!("{f}: workload.load: {load}: must be in (0, 1.5]");
            }
            let arrival = match w.arrival.as_deref().unwrap_or("poisson") {
                "poisson" => Arrival::Poisson,
                "lognormal" => Arrival::Lognormal {
                    sigma: w.sigma.unwrap_or(2.0),
                },
                o => bail!("{f}: workload.arrival: `{o}`: use poisson or lognormal"),
            };
            let senders = names(&w.senders, "workload.senders")?
                .unwrap_or_else(|| (0..topo.hosts.len() as u32).collect());
            let rate = match &exp.host.rate {
                Some(r) => parse_rate(r).map_err(|e| anyhow!("{f}: host.rate: {e}"))?,
                None => paths.nic_rate,
            };
            let flows = LoadSpec {
                cdf,
                load,
                rate_bps: rate.max(1),
                arrival,
                hosts: topo.hosts.len() as u32,
                senders,
                dests: match names(&w.dests, "workload.dests")? {
                    Some(l) => Dests::List(l),
                    None => Dests::Uniform,
                },
                prios: w.prios.clone().unwrap_or_else(|| vec![w.prio.unwrap_or(3)]),
                duration_ps: duration,
                start_ps: 0,
            }
            .generate(seed, 0);
            let Some(ic) = &w.incast else {
                return Ok(flows);
            };
            let size = |s: &str, k: &str| {
                parse_size(s).map_err(|e| anyhow!("{f}: workload.incast.{k}: {e}"))
            };
            let (lo, hi) = (
                size(&ic.size_min, "size_min")?,
                size(&ic.size_max, "size_max")?,
            );
            if lo == 0 || lo > hi {
                bail!("{f}: workload.incast: size_min must be positive and at most size_max");
            }
            let ic_load = match (ic.load, ic.total) {
                (Some(l), None) => l,
                (None, Some(t)) => t - load,
                _ => bail!("{f}: workload.incast: give either load or total"),
            };
            if !(ic_load > 0.0 && ic_load <= 1.0) || ic.fan_in == 0 {
                bail!(
                    "{f}: workload.incast: load {ic_load} (total minus the background load) \
                     must be in (0, 1], and fan_in ≥ 1"
                );
            }
            let racks = match ic.senders.as_deref().unwrap_or("any") {
                "any" => None,
                "other-racks" => Some(host_racks(topo)?),
                o => bail!("{f}: workload.incast.senders: `{o}`: use any or other-racks"),
            };
            if ic.fan_in as usize >= topo.hosts.len() {
                bail!(
                    "{f}: workload.incast.fan_in: {} senders need more hosts",
                    ic.fan_in
                );
            }
            let incast = workload::IncastMix {
                hosts: topo.hosts.len() as u32,
                fan_in: ic.fan_in,
                racks,
                size_min: lo,
                size_max: hi,
                load: ic_load,
                rate_bps: rate.max(1),
                prio: w.prio.unwrap_or(3) & 7,
                duration_ps: duration,
                start_ps: 0,
            }
            .generate(seed, 0);
            Ok(workload::combine(flows, incast, 0))
        }
        o => bail!("{f}: workload.kind: `{o}`: use incast or load"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host's rack is the switch its link attaches to.
    #[test]
    fn racks_follow_links() {
        let text = r#"
name = "r"
[[switch]]
name = "leaf1"
port = [{ name = "a" }, { name = "b" }]
[[switch]]
name = "leaf2"
port = [{ name = "a" }]
[[host]]
name = "x"
ip = "10.0.1.1/24"
[[host]]
name = "y"
ip = "10.0.2.1/24"
[[host]]
name = "z"
ip = "10.0.1.2/24"
[[link]]
a = "x"
b = "leaf1:a"
[[link]]
a = "leaf2:a"
b = "y"
[[link]]
a = "z"
b = "leaf1:b"
"#;
        let topo = Topology::parse(text, std::path::Path::new("r.toml")).unwrap();
        assert_eq!(host_racks(&topo).unwrap(), vec![0, 1, 0]);
    }
}

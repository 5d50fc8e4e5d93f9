//! Datacenter workloads: flow sizes drawn from the empirical CDFs the papers use
//! (`deploy/workloads/*.cdf`, sources in `deploy/workloads/SOURCES.md`), arrivals that offer a
//! target load (Poisson, or lognormal inter-arrival times with σ = 2 as in the BFC and
//! Pyrrha evaluations), destinations uniform or from a list, and an incast generator.
//!
//! A schedule is a pure function of its spec and seed: the same seed gives the same flows,
//! byte for byte, in real time and in virtual time.
//!
//! CDF files hold one point per line, `<flow size in bytes> <cumulative percent>`, increasing
//! in both columns and ending at 100. Sizes are sampled by inverting the piecewise-linear
//! CDF, as the ns-3 traffic generators of HPCC and BFC do.

use crate::rng::Rng;
use crate::units::PS_PER_S;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {key}: {reason}")]
pub struct WorkloadError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

/// A piecewise-linear empirical CDF of flow sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    /// (size in bytes, cumulative probability in 0..=1), strictly increasing probability
    /// steps allowed to be flat in size only where probability jumps.
    pub points: Vec<(f64, f64)>,
    pub name: String,
}

impl Cdf {
    /// Reads a `.cdf` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Cdf, WorkloadError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| WorkloadError {
            file: file.clone(),
            key: "-".into(),
            reason: format!("cannot read: {e}"),
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::parse(&text, &file, &name)
    }

    /// Parses CDF text; `file` names it in errors.
    pub fn parse(text: &str, file: &str, name: &str) -> Result<Cdf, WorkloadError> {
        let err = |line: usize, reason: String| WorkloadError {
            file: file.to_string(),
            key: format!("line {line}"),
            reason,
        };
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut it = l.split_whitespace();
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(err(i + 1, format!("`{l}`: expected `<bytes> <percent>`")));
            };
            let size: f64 = a
                .parse()
                .map_err(|_| err(i + 1, format!("`{a}` is not a size")))?;
            let pct: f64 = b
                .parse()
                .map_err(|_| err(i + 1, format!("`{b}` is not a percentage")))?;
            if !(size.is_finite() && size >= 0.0 && (0.0..=100.0).contains(&pct)) {
                return Err(err(i + 1, format!("`{l}`: size >= 0, percent in 0..=100")));
            }
            if let Some(&(ps, pp)) = points.last() {
                if size < ps || pct * 0.01 < pp {
                    return Err(err(i + 1, "sizes and percentages must not decrease".into()));
                }
            }
            points.push((size, pct * 0.01));
        }
        match points.last() {
            None => return Err(err(0, "no points".into())),
            Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => {
                return Err(err(
                    points.len(),
                    "the last point must be at 100 percent".into(),
                ))
            }
            _ => {}
        }
        if points[0].1 > 0.0 {
            // Mass at the first size: start the curve there.
            let s = points[0].0;
            points.insert(0, (s, 0.0));
        }
        Ok(Cdf {
            points,
            name: name.to_string(),
        })
    }

    /// Inverse CDF at `u` in (0, 1].
    pub fn quantile(&self, u: f64) -> f64 {
        let p = &self.points;
        // First point with cumulative probability >= u.
        let i = p.partition_point(|&(_, c)| c < u);
        if i == 0 {
            return p[0].0;
        }
        if i >= p.len() {
            return p[p.len() - 1].0;
        }
        let (x0, c0) = p[i - 1];
        let (x1, c1) = p[i];
        if c1 <= c0 {
            return x1;
        }
        x0 + (x1 - x0) * (u - c0) / (c1 - c0)
    }

    /// The CDF at size `x` (piecewise linear).
    pub fn at(&self, x: f64) -> f64 {
        let p = &self.points;
        if x < p[0].0 {
            return 0.0;
        }
        // Last point with size <= x.
        let i = p.partition_point(|&(s, _)| s <= x);
        if i >= p.len() {
            return 1.0;
        }
        let (x0, c0) = p[i - 1];
        let (x1, c1) = p[i];
        if x1 <= x0 {
            return c1;
        }
        c0 + (c1 - c0) * (x - x0) / (x1 - x0)
    }

    /// A flow size in bytes (at least 1).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        self.quantile(rng.unit()).round().max(1.0) as u64
    }

    /// Mean of the piecewise-linear distribution, bytes.
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
            .sum()
    }

    /// Kolmogorov–Smirnov distance between this CDF and the empirical CDF of `samples`.
    pub fn ks_distance(&self, samples: &[u64]) -> f64 {
        let mut v: Vec<u64> = samples.to_vec();
        v.sort_unstable();
        let n = v.len() as f64;
        let mut d: f64 = 0.0;
        let mut i = 0;
        while i < v.len() {
            let x = v[i];
            let mut j = i;
            while j < v.len() && v[j] == x {
                j += 1;
            }
            // Samples are rounded to whole bytes: compare at the rounding cell's edges.
            let f_hi = self.at(x as f64 + 0.5);
            let f_lo = self.at(x as f64 - 0.5);
            d = d.max((j as f64 / n - f_hi).abs());
            d = d.max((i as f64 / n - f_lo).abs());
            i = j;
        }
        d
    }
}

/// Inter-arrival time distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Arrival {
    /// Exponential inter-arrival times.
    #[default]
    Poisson,
    /// Lognormal inter-arrival times with shape `sigma` (BFC/Pyrrha use σ = 2).
    Lognormal { sigma: f64 },
}

impl Arrival {
    /// An inter-arrival time with mean `mean_ps`.
    pub fn draw(&self, rng: &mut Rng, mean_ps: f64) -> f64 {
        match *self {
            Arrival::Poisson => -rng.unit().ln() * mean_ps,
            Arrival::Lognormal { sigma } => {
                let mu = mean_ps.ln() - sigma * sigma / 2.0;
                (mu + sigma * normal(rng)).exp()
            }
        }
    }
}

/// A standard normal deviate (Box–Muller).
fn normal(rng: &mut Rng) -> f64 {
    let (u1, u2) = (rng.unit(), rng.unit());
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One flow of a schedule. Host indices are into the spec's host list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    /// Start time relative to the experiment start, ps.
    pub start_ps: u64,
    pub prio: u8,
}

/// Where flows go.
#[derive(Debug, Clone, PartialEq)]
pub enum Dests {
    /// Any host of `hosts` other than the source, uniformly.
    Uniform,
    /// Uniformly among these host indices (other than the source).
    List(Vec<u32>),
}

/// A load-driven workload: every sender host starts flows with sizes from `cdf` at a rate
/// that offers `load` × `rate_bps` of flow bytes, for `duration_ps`.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub cdf: Cdf,
    /// Offered load per sender, fraction of `rate_bps` (0 < load).
    pub load: f64,
    pub rate_bps: u64,
    pub arrival: Arrival,
    /// Number of hosts (indices 0..hosts).
    pub hosts: u32,
    /// Hosts that send (indices).
    pub senders: Vec<u32>,
    pub dests: Dests,
    /// Priorities flows draw uniformly from.
    pub prios: Vec<u8>,
    pub duration_ps: u64,
    pub start_ps: u64,
}

/// An incast: `senders` each send `size` bytes to `receiver`, every `period_ps` (once if 0).
#[derive(Debug, Clone)]
pub struct IncastSpec {
    pub senders: Vec<u32>,
    pub receiver: u32,
    pub size: u64,
    pub period_ps: u64,
    pub rounds: u32,
    pub start_ps: u64,
    /// Seeded uniform start jitter per flow, ps.
    pub jitter_ps: u64,
    pub prio: u8,
}

/// Mean inter-arrival time (ps) that offers `load` of `rate_bps` with flows of mean size
/// `mean_bytes`.
pub fn mean_interarrival_ps(mean_bytes: f64, load: f64, rate_bps: u64) -> f64 {
    mean_bytes * 8.0 * PS_PER_S as f64 / (load * rate_bps as f64)
}

impl LoadSpec {
    /// The flows, sorted by start time (ties by sender), ids from `first_id`.
    pub fn generate(&self, seed: u64, first_id: u32) -> Vec<FlowSpec> {
        let gap = mean_interarrival_ps(self.cdf.mean(), self.load, self.rate_bps);
        let mut flows = Vec::new();
        for &s in &self.senders {
            let mut rng = Rng::stream(seed, 0x5000_0000 + u64::from(s));
            let dsts: Vec<u32> = match &self.dests {
                Dests::Uniform => (0..self.hosts).filter(|&d| d != s).collect(),
                Dests::List(l) => l.iter().copied().filter(|&d| d != s).collect(),
            };
            if dsts.is_empty() {
                continue;
            }
            let mut t = self.arrival.draw(&mut rng, gap);
            while t < self.duration_ps as f64 {
                let size = self.cdf.sample(&mut rng);
                let dst = dsts[rng.upto(dsts.len() as u64 - 1) as usize];
                let prio = if self.prios.is_empty() {
                    0
                } else {
                    self.prios[rng.upto(self.prios.len() as u64 - 1) as usize]
                };
                flows.push(FlowSpec {
                    id: 0,
                    src: s,
                    dst,
                    size,
                    start_ps: self.start_ps + t as u64,
                    prio,
                });
                t += self.arrival.draw(&mut rng, gap);
            }
        }
        finish(flows, first_id)
    }
}

impl IncastSpec {
    pub fn generate(&self, seed: u64, first_id: u32) -> Vec<FlowSpec> {
        let mut rng = Rng::stream(seed, 0x1c_a500);
        let mut flows = Vec::new();
        for r in 0..self.rounds.max(1) {
            for &s in &self.senders {
                let j = if self.jitter_ps > 0 {
                    rng.upto(self.jitter_ps)
                } else {
                    0
                };
                flows.push(FlowSpec {
                    id: 0,
                    src: s,
                    dst: self.receiver,
                    size: self.size,
                    start_ps: self.start_ps + u64::from(r) * self.period_ps + j,
                    prio: self.prio,
                });
            }
        }
        finish(flows, first_id)
    }
}

/// Incast as background load (the HPCC/BFC/Aquarius evaluations' "X % load N-to-1 incast"):
/// events arrive as a Poisson process offering `load` × `rate_bps` per host (over all
/// `hosts`); each event picks a receiver and `fan_in` distinct other senders uniformly, and
/// every sender sends one flow of a size drawn uniformly from `size_min..=size_max` (one size
/// per event: a synchronised request's responses).
#[derive(Debug, Clone)]
pub struct IncastMix {
    pub hosts: u32,
    pub fan_in: u32,
    /// The rack (leaf) of every host: when given, an event's senders are drawn only from other
    /// racks than its receiver's (DSH §V-B: "in different racks from the receiver").
    pub racks: Option<Vec<u32>>,
    pub size_min: u64,
    pub size_max: u64,
    /// Offered load per host, fraction of `rate_bps`.
    pub load: f64,
    pub rate_bps: u64,
    pub prio: u8,
    pub duration_ps: u64,
    pub start_ps: u64,
}

impl IncastMix {
    /// The incast flows, sorted by start time, ids from `first_id`; none if there are not
    /// `fan_in` + 1 hosts.
    pub fn generate(&self, seed: u64, first_id: u32) -> Vec<FlowSpec> {
        let mut flows = Vec::new();
        let n = self.fan_in.min(self.hosts.saturating_sub(1));
        if n == 0 || self.load <= 0.0 {
            return flows;
        }
        let other_rack = |h: u32, rx: u32| {
            self.racks
                .as_ref()
                .is_none_or(|r| r.get(h as usize) != r.get(rx as usize))
        };
        let mean_event = f64::from(n) * (self.size_min + self.size_max) as f64 / 2.0;
        // Events share the load of every host: one event every mean_event bytes of it.
        let gap =
            mean_interarrival_ps(mean_event, self.load * f64::from(self.hosts), self.rate_bps);
        let mut rng = Rng::stream(seed, 0x1c_a501);
        let mut t = Arrival::Poisson.draw(&mut rng, gap);
        while t < self.duration_ps as f64 {
            let rx = rng.upto(u64::from(self.hosts) - 1) as u32;
            let size = self.size_min + rng.upto(self.size_max.saturating_sub(self.size_min));
            // `n` distinct senders other than the receiver (and outside its rack if `racks`):
            // a partial Fisher-Yates shuffle.
            let mut pool: Vec<u32> = (0..self.hosts)
                .filter(|&h| h != rx && other_rack(h, rx))
                .collect();
            for k in 0..(n as usize).min(pool.len()) {
                let j = k + rng.upto((pool.len() - 1 - k) as u64) as usize;
                pool.swap(k, j);
                flows.push(FlowSpec {
                    id: 0,
                    src: pool[k],
                    dst: rx,
                    size,
                    start_ps: self.start_ps + t as u64,
                    prio: self.prio,
                });
            }
            t += Arrival::Poisson.draw(&mut rng, gap);
        }
        finish(flows, first_id)
    }
}

/// Two schedules as one, sorted by start time (ties by sender), renumbered from `first_id`.
pub fn combine(mut a: Vec<FlowSpec>, b: Vec<FlowSpec>, first_id: u32) -> Vec<FlowSpec> {
    a.extend(b);
    finish(a, first_id)
}

fn finish(mut flows: Vec<FlowSpec>, first_id: u32) -> Vec<FlowSpec> {
    flows.sort_by_key(|f| (f.start_ps, f.src, f.dst));
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = first_id + i as u32;
    }
    flows
}

/// Offered load of a schedule: flow bytes over `duration_ps` at `senders` × `rate_bps`.
pub fn offered_load(flows: &[FlowSpec], senders: usize, rate_bps: u64, duration_ps: u64) -> f64 {
    let bits: f64 = flows.iter().map(|f| f.size as f64 * 8.0).sum();
    bits * PS_PER_S as f64 / (duration_ps as f64 * senders as f64 * rate_bps as f64)
}

/// Schedule as CSV (`id,src,dst,size,start_ps,prio`).
pub fn to_csv(flows: &[FlowSpec]) -> String {
    let mut s = String::from("id,src,dst,size,start_ps,prio\n");
    for f in flows {
        s.push_str(&format!(
            "{},{},{},{},{},{}\n",
            f.id, f.src, f.dst, f.size, f.start_ps, f.prio
        ));
    }
    s
}

/// Parses [`to_csv`] output; `file` names it in errors.
pub fn from_csv(text: &str, file: &str) -> Result<Vec<FlowSpec>, WorkloadError> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate().skip(1) {
        if l.trim().is_empty() {
            continue;
        }
        let v: Vec<&str> = l.split(',').collect();
        let err = |reason: String| WorkloadError {
            file: file.to_string(),
            key: format!("line {}", i + 1),
            reason,
        };
        if v.len() != 6 {
            return Err(err(format!("`{l}`: expected 6 fields")));
        }
        let n = |k: usize| -> Result<u64, WorkloadError> {
            v[k].trim()
                .parse()
                .map_err(|_| err(format!("field {}: `{}` is not a number", k + 1, v[k])))
        };
        out.push(FlowSpec {
            id: n(0)? as u32,
            src: n(1)? as u32,
            dst: n(2)? as u32,
            size: n(3)?,
            start_ps: n(4)?,
            prio: (n(5)? & 7) as u8,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_inverts_at() {
        let c = Cdf::parse("0 0\n100 50\n1000 100\n", "t", "t").unwrap();
        assert_eq!(c.quantile(0.5), 100.0);
        assert!((c.at(550.0) - 0.75).abs() < 1e-12);
        assert!((c.mean() - (0.5 * 50.0 + 0.5 * 550.0)).abs() < 1e-9);
        assert!(Cdf::parse("0 0\n100 50\n", "t", "t").is_err());
        assert!(Cdf::parse("0 0\n100 60\n50 100\n", "t", "t").is_err());
    }

    /// Events of `fan_in` distinct senders to one receiver, one size per event within the
    /// range, offering the asked load (over a long window, within sampling noise).
    #[test]
    fn incast_mix_offers_its_load_in_fan_in_events() {
        let m = IncastMix {
            hosts: 128,
            fan_in: 100,
            racks: None,
            size_min: 50_000,
            size_max: 200_000,
            load: 0.05,
            rate_bps: 100_000_000_000,
            prio: 3,
            duration_ps: 50_000_000_000, // 50 ms: about 320 events
            start_ps: 0,
        };
        let f = m.generate(7, 0);
        assert_eq!(f.len() % 100, 0);
        for ev in f.chunks(100) {
            let (rx, size, t) = (ev[0].dst, ev[0].size, ev[0].start_ps);
            assert!((50_000..=200_000).contains(&size));
            let mut src: Vec<u32> = ev.iter().map(|x| x.src).collect();
            src.sort_unstable();
            src.dedup();
            assert_eq!(src.len(), 100, "distinct senders");
            assert!(ev
                .iter()
                .all(|x| x.dst == rx && x.size == size && x.start_ps == t));
            assert!(!src.contains(&rx));
        }
        let load = offered_load(&f, 128, m.rate_bps, m.duration_ps);
        assert!((load / 0.05 - 1.0).abs() < 0.15, "offered {load}");
        assert_eq!(f, m.generate(7, 0), "a pure function of the seed");
        let c = combine(f.clone(), vec![], 5);
        assert_eq!((c[0].id, c.len()), (5, f.len()));
    }

    /// With racks, every event's senders sit outside its receiver's rack (DSH §V-B).
    #[test]
    fn incast_mix_senders_from_other_racks() {
        let m = IncastMix {
            hosts: 32,
            fan_in: 16,
            racks: Some((0..32).map(|h| h / 16).collect()),
            size_min: 64_000,
            size_max: 64_000,
            load: 0.1,
            rate_bps: 100_000_000_000,
            prio: 1,
            duration_ps: 1_000_000_000,
            start_ps: 0,
        };
        let f = m.generate(3, 0);
        assert!(f.len() >= 16 * 10, "{} flows", f.len());
        assert!(f.iter().all(|x| x.src / 16 != x.dst / 16));
        // Without racks, the same draws pick same-rack senders too.
        let any = IncastMix { racks: None, ..m }.generate(3, 0);
        assert!(any.iter().any(|x| x.src / 16 == x.dst / 16));
    }
}

//! The experiment file (`deploy/experiments/*.toml`) as written: what `xoff experiment run`
//! reads, before any cell is planned.

use anyhow::{anyhow, Result};
use dataplane::units::parse_time;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a cell runs: on real frames (a netns testbed) or in the virtual-time fabric.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Real,
    Virtual,
}

impl std::fmt::Display for Mode {
    /// As results.json spells it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Real => "real",
            Mode::Virtual => "virtual",
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// An experiment file as written (`deploy/experiments/*.toml`).
pub(super) struct ExpFile {
    pub(super) name: String,
    /// Topology file, relative to the experiment file.
    pub(super) topology: String,
    #[serde(default)]
    pub(super) mode: Mode,
    /// Traffic window (flows start within it).
    pub(super) duration: String,
    /// Time after the window for flows to finish (default 1 s real, 10 ms virtual).
    pub(super) drain: Option<String>,
    #[serde(default = "default_seeds")]
    pub(super) seeds: Vec<u64>,
    pub(super) workload: WorkloadCfg,
    #[serde(default)]
    pub(super) host: HostCfg,
    /// Switch settings to vary: `scheme` (pfc, none, bfc, bfc-stochastic, bfc-single,
    /// aquarius), `headroom` (sih, dsh), `lb` (ecmp, drill, conga, proteus), `queues` (per
    /// port), `cc`, and `load` (a load workload's offered load, replacing `workload.load`).
    #[serde(default)]
    pub(super) matrix: BTreeMap<String, Vec<String>>,
    /// Cells of the matrix not to run: a cell matching every key of one entry is skipped.
    #[serde(default)]
    pub(super) exclude: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    pub(super) sample: SampleCfg,
    /// `[buffer]`: MMU settings (keys of `mmu::MmuConfig`) merged into every switch's `buffer`
    /// of the topology, for every cell: a paper's own thresholds without a topology of its
    /// own (BFC §6.2.1's PFC "as in the HPCC paper"). A cell's scheme still has the last word
    /// (BFC cells share the whole buffer).
    #[serde(default)]
    pub(super) buffer: toml::Table,
}

/// `[workload.incast]`: incast events on top of a load workload ([`workload::IncastMix`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IncastMixCfg {
    /// Offered load per host, fraction of the NIC rate.
    pub(super) load: Option<f64>,
    /// Instead of `load`: the total offered load, the incasts taking what the background
    /// load (the cell's) leaves (DSH §V-B Fig. 14: total 0.9, background swept).
    pub(super) total: Option<f64>,
    pub(super) fan_in: u32,
    pub(super) size_min: String,
    pub(super) size_max: String,
    /// `any` (default) or `other-racks`: senders outside the receiver's rack (the switch its
    /// link attaches to).
    pub(super) senders: Option<String>,
}

fn default_seeds() -> Vec<u64> {
    vec![1]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkloadCfg {
    /// "incast" or "load".
    pub(super) kind: String,
    pub(super) senders: Option<Vec<String>>,
    pub(super) receiver: Option<String>,
    pub(super) size: Option<String>,
    pub(super) rounds: Option<u32>,
    pub(super) period: Option<String>,
    pub(super) jitter: Option<String>,
    pub(super) prio: Option<u8>,
    /// CDF file, relative to the experiment file.
    pub(super) cdf: Option<String>,
    pub(super) load: Option<f64>,
    /// "poisson" or "lognormal".
    pub(super) arrival: Option<String>,
    pub(super) sigma: Option<f64>,
    pub(super) dests: Option<Vec<String>>,
    pub(super) prios: Option<Vec<u8>>,
    /// Load workloads: incast on top.
    pub(super) incast: Option<IncastMixCfg>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HostCfg {
    pub(super) window: Option<String>,
    pub(super) rto: Option<String>,
    /// Base RTT for windows and ideal FCT (default: computed from the access links).
    pub(super) base_rtt: Option<String>,
    /// Host NIC pacing rate (default: the attached port's rate).
    pub(super) rate: Option<String>,
    /// Payload bytes of a full data packet (default: a 1500-B frame's,
    /// `1500 − dataplane::host::FRAME_OVERHEAD`), for windows, segmentation and ideal FCTs.
    /// BFC §6.2.1 runs "an MTU of 1KB": the HPCC simulator's 1000-B packet payload.
    pub(super) mss: Option<u32>,
    /// NIC queues of the hosts in BFC cells (default 32).
    pub(super) bfc_queues: Option<usize>,
    /// Congestion control of every cell without a matrix `cc` (default `window`).
    pub(super) cc: Option<String>,
    /// Priority (0..=7) of the ACKs the hosts send (default: the acknowledged flow's). With
    /// switch ports whose `strict` queues take that priority, ACKs ride a never-paused
    /// strict class that BFC and Aquarius leave alone (virtual time only).
    pub(super) ack_prio: Option<u8>,
    /// What the receivers do with a packet above the one they expect: `buffer` (default, a
    /// reordering buffer), `buffer:TIME` (one that gives up on a hole after TIME and NAKs
    /// it) or `go-back-n` (drop it and NAK, as commodity RoCE NICs;
    /// `dataplane::host::OutOfOrder`).
    pub(super) out_of_order: Option<String>,
}

/// NIC queues of a BFC host (the fabric's `[sim] nic_bfc_queues` default).
pub(super) const BFC_QUEUES: usize = 32;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SampleCfg {
    /// Switch counter sampling interval (default 20 ms real, 10 us virtual).
    pub(super) interval: Option<String>,
}

pub(super) fn time(s: &Option<String>, key: &str, f: &str, default: u64) -> Result<u64> {
    match s {
        Some(s) => parse_time(s).map_err(|e| anyhow!("{f}: {key}: {e}")),
        None => Ok(default),
    }
}

/// A run's clock in picoseconds: the traffic window, the drain after it, the switch sampling
/// interval, each with its mode's default (virtual time: 10 ms drain, 10 µs samples; real
/// frames: 1 s drain, 20 ms samples).
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) duration: u64,
    pub(super) drain: u64,
    pub(super) interval: u64,
}

impl ExpFile {
    /// The file's `duration`, `drain` and `[sample] interval` (`f`: the file's name, for errors).
    pub(super) fn timing(&self, f: &str) -> Result<Timing> {
        let (drain, interval) = match self.mode {
            Mode::Virtual => (10_000_000_000, 10_000_000),
            Mode::Real => (1_000_000_000_000, 20_000_000_000),
        };
        Ok(Timing {
            duration: parse_time(&self.duration).map_err(|e| anyhow!("{f}: duration: {e}"))?,
            drain: time(&self.drain, "drain", f, drain)?,
            interval: time(&self.sample.interval, "sample.interval", f, interval)?.max(1),
        })
    }
}

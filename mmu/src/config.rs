//! MMU configuration (`[mmu]` table of a switch), with defaults from the DSH paper's evaluation.
//!
//! Defaults follow DSH §V-A (Broadcom Tomahawk emulation): 16 MiB buffer, `α = 1/16`,
//! 3 KiB private buffer per queue, `X_qon = X_qoff` and `X_pon = X_poff` (`δ = 0`). Two choices
//! are ours and documented here:
//!
//! * `lossless_pgs = [3, 4]`: the two lossless classes of common RoCE deployments (Guo et al.,
//!   "RDMA over Commodity Ethernet at Scale", the DSH paper's [3]). The paper's microbenchmark
//!   has 7 lossless queues per port; use [`MmuConfig::dsh_microbenchmark`] for it.
//! * `response_ps = 10 µs`: Xoff is a software switch; a threshold crossing is noticed and a
//!   received pause obeyed only after a poll/batch period, during which the link keeps
//!   delivering at line rate. Set it to the worst poll-to-transmit latency you measured.
//! * `small_packet_percentage = 100`: the headroom reservations (SIH headroom, DSH insurance)
//!   hold line-rate arrivals of the smallest frames, each taking a whole cell (SONiC's default
//!   for its lossless traffic pattern; see [`crate::headroom::eta_cells`]); DSH's queue
//!   threshold keeps the paper's `η`. The paper presets use 0, Eq. (1) in bytes as the paper.

use serde::{Deserialize, Serialize};

use crate::error::MmuError;

/// Dynamic Threshold control parameter `α` (DSH Eq. 2), as a fraction or as a right shift
/// (`α = 2^-shift`, how ASICs and HPCC's ns-3 MMU express it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Alpha {
    /// `α` as a positive number, e.g. `{ fraction = 0.0625 }`.
    Fraction(f64),
    /// `α = 2^-shift`, e.g. `{ shift = 4 }` for 1/16.
    Shift(u8),
}

impl Alpha {
    /// Largest accepted fraction: beyond it DT degenerates into complete sharing anyway.
    pub const MAX_FRACTION: f64 = 256.0;

    /// `α` as a floating-point number.
    pub fn value(&self) -> f64 {
        match *self {
            Alpha::Fraction(f) => f,
            Alpha::Shift(s) => 1.0 / f64::from(1u32 << s.min(31)),
        }
    }

    /// `α` in 16.16 fixed point, so that `T = (free × α_q16) >> 16` is one multiply on the
    /// per-packet path. Exact for shifts up to 16.
    pub(crate) fn q16(&self) -> u64 {
        match *self {
            Alpha::Fraction(f) => (f * 65536.0).round().max(1.0) as u64,
            Alpha::Shift(s) => (1u64 << 16) >> s.min(16),
        }
    }

    fn check(&self, key: &str) -> Result<(), MmuError> {
        match *self {
            Alpha::Fraction(f) if !(f.is_finite() && f > 0.0 && f <= Self::MAX_FRACTION) => {
                Err(MmuError::config(
                    key,
                    format!("fraction must be in (0, {}], got {f}", Self::MAX_FRACTION),
                ))
            }
            Alpha::Fraction(f) if f * 65536.0 < 0.5 => Err(MmuError::config(
                key,
                format!("fraction {f} is below the 1/65536 resolution"),
            )),
            Alpha::Shift(s) if s > 16 => Err(MmuError::config(
                key,
                format!("shift must be at most 16 (α ≥ 1/65536), got {s}"),
            )),
            _ => Ok(()),
        }
    }
}

/// How lossless headroom is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeadroomMode {
    /// Static and Independent Headroom: `η` reserved per (port, PG) up front (DSH §II-C, Eq. 3).
    Sih,
    /// Dynamic and Shared Headroom: insurance `η` per port (Eq. 4), `X_qoff = T − η` (Eq. 5),
    /// `X_poff = N_q·T` (Eq. 6) (DSH §IV-B).
    Dsh,
    /// HPCC ns-3 `switch-mmu.cc` behaviour (see [`crate::ingress`] for the exact rules).
    Hpcc,
}

/// RED-style ECN marking per egress queue (DCQCN parameters), thresholds given at
/// `ref_rate_bps` and scaled linearly with each port's rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EcnConfig {
    /// Mark at all. When false, `mark_ecn` is always false.
    pub enabled: bool,
    /// `K_min` at `ref_rate_bps`, bytes of egress queue.
    pub k_min_bytes: u64,
    /// `K_max` at `ref_rate_bps`, bytes of egress queue.
    pub k_max_bytes: u64,
    /// `P_max`: marking probability at `K_max`; above `K_max` every ECN-capable packet is marked.
    pub p_max: f64,
    /// Link rate at which `K_min`/`K_max` are given.
    pub ref_rate_bps: u64,
}

impl Default for EcnConfig {
    /// DCQCN at 100 Gbit/s: K_min = 100 KB, K_max = 400 KB, P_max = 0.2.
    fn default() -> Self {
        EcnConfig {
            enabled: true,
            k_min_bytes: 100_000,
            k_max_bytes: 400_000,
            p_max: 0.2,
            ref_rate_bps: 100_000_000_000,
        }
    }
}

/// A named preset of [`MmuConfig::PRESETS`]: its name and the configuration it reads from.
pub type Preset = (&'static str, fn() -> MmuConfig);

/// Configuration of one switch's MMU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MmuConfig {
    /// Total buffer `B`, bytes (Tomahawk: 16 MiB; Trident2: 12 MiB; 22 MiB parts exist too).
    pub buffer_bytes: u64,
    /// Allocation unit; a packet occupies `ceil(len / cell_bytes)` cells.
    pub cell_bytes: u32,
    /// Fraction of the buffer given to the lossless pool; the rest is the lossy pool.
    /// Pools are hard-partitioned for isolation (DSH §II-B, Fig. 2).
    pub lossless_share: f64,
    /// Priority groups that are lossless (get headroom and XOFF/XON), 0..=7.
    pub lossless_pgs: Vec<u8>,
    /// Headroom allocation scheme.
    pub headroom_mode: HeadroomMode,
    /// DT `α` of the lossless (ingress) pool.
    pub alpha: Alpha,
    /// DT `α` of the lossy (egress) pool.
    pub egress_alpha: Alpha,
    /// Private buffer per lossless (port, PG) `φ`, bytes.
    pub private_bytes: u32,
    /// SIH/HPCC resume offset `δ`: `X_on = X_off − δ`, bytes.
    pub delta_bytes: u32,
    /// DSH queue-level resume offset `δ_q`: `X_qon = X_qoff − δ_q`, bytes.
    pub delta_q_bytes: u32,
    /// DSH port-level resume offset `δ_p`: `X_pon = X_poff − δ_p`, bytes.
    pub delta_p_bytes: u32,
    /// Software response time added to the headroom as `response_ps × C` bytes.
    pub response_ps: u64,
    /// Add one MTU to every SIH headroom / DSH insurance reservation for the packet that
    /// crosses the threshold while the shared segment is physically full (see `ingress`).
    /// Needed for a strict no-loss guarantee; the paper presets turn it off to reserve exactly
    /// Eq. (3)/(4).
    pub headroom_mtu_slack: bool,
    /// Share (%) of the headroom's line-rate arrivals assumed to be minimum-size frames, each
    /// taking a whole cell; the rest are MTU frames (SONiC `small_packet_percentage`). 100 is
    /// the worst case and needed for a no-loss guarantee whatever the frame sizes; 0 sizes
    /// `η` in bytes as the DSH paper's Eq. (1).
    pub small_packet_percentage: u8,
    /// ECN marking.
    pub ecn: EcnConfig,
    /// Seed of the internal PRNG (ECN marking), for deterministic runs.
    pub seed: u64,
}

impl Default for MmuConfig {
    fn default() -> Self {
        MmuConfig {
            buffer_bytes: 16 * 1024 * 1024,
            cell_bytes: 256,
            lossless_share: 0.75,
            lossless_pgs: vec![3, 4],
            headroom_mode: HeadroomMode::Dsh,
            alpha: Alpha::Shift(4),
            egress_alpha: Alpha::Shift(0),
            private_bytes: 3 * 1024,
            delta_bytes: 0,
            delta_q_bytes: 0,
            delta_p_bytes: 0,
            response_ps: 10_000_000,
            headroom_mtu_slack: true,
            small_packet_percentage: 100,
            ecn: EcnConfig::default(),
            seed: 1,
        }
    }
}

impl MmuConfig {
    /// DSH §V-A microbenchmark switch: Tomahawk-like 16 MiB, 7 lossless DWRR queues per port
    /// (PG 1..=7; queue 0 carries ACKs/pauses and is lossy), 3 KiB private per lossless queue,
    /// `α = 1/16`, `δ = 0`, no software response term, no lossy pool reservation beyond what
    /// is left over (all of the buffer is lossless), reservations exactly as Eq. (3)/(4).
    pub fn dsh_microbenchmark(mode: HeadroomMode) -> Self {
        MmuConfig {
            buffer_bytes: 16 * 1024 * 1024,
            lossless_share: 1.0,
            lossless_pgs: (1..=7).collect(),
            headroom_mode: mode,
            response_ps: 0,
            headroom_mtu_slack: false,
            small_packet_percentage: 0,
            ..MmuConfig::default()
        }
    }

    /// HPCC ns-3 preset (`simulation/src/point-to-point/model/switch-mmu.cc` + `third.cc`):
    /// 12 MiB buffer, reserve 4 KiB per queue, resume offset 3 KiB, headroom `3·C·D` per port,
    /// PFC threshold `(B − Σheadroom − Σreserve − shared_used) >> shift` with shift 3 lowered by
    /// one per rate doubling above the slowest port, byte accounting (1-byte cells), all of
    /// the buffer lossless, no software response term, ECN as DCQCN's defaults.
    pub fn hpcc() -> Self {
        MmuConfig {
            buffer_bytes: 12 * 1024 * 1024,
            cell_bytes: 1,
            lossless_share: 1.0,
            lossless_pgs: (1..=7).collect(),
            headroom_mode: HeadroomMode::Hpcc,
            alpha: Alpha::Shift(3),
            private_bytes: 4 * 1024,
            delta_bytes: 3 * 1024,
            response_ps: 0,
            headroom_mtu_slack: false,
            small_packet_percentage: 0,
            ..MmuConfig::default()
        }
    }

    /// The presets by name, each with the configuration its [`MmuConfig::PRESET_KEYS`] are
    /// read from: `hpcc` is [`MmuConfig::hpcc`], the PFC thresholds BFC §6.2.1 gives its
    /// baselines ("as in the HPCC paper").
    pub const PRESETS: &'static [Preset] = &[("hpcc", MmuConfig::hpcc)];

    /// The keys a preset sets (`preset = "hpcc"` in a `[buffer]` table): the thresholds, the
    /// headroom and the accounting. Not the buffer's size or which PGs are lossless: those are
    /// the switch's own, and a topology states them beside the preset.
    pub const PRESET_KEYS: &'static [&'static str] = &[
        "cell_bytes",
        "lossless_share",
        "headroom_mode",
        "alpha",
        "private_bytes",
        "delta_bytes",
        "response_ps",
        "headroom_mtu_slack",
        "small_packet_percentage",
    ];

    /// The configuration of preset `name` ([`MmuConfig::PRESETS`]).
    pub fn preset(name: &str) -> Option<MmuConfig> {
        MmuConfig::PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f())
    }

    /// Bitmask of lossless PGs (bit `pg`).
    pub fn lossless_mask(&self) -> u8 {
        self.lossless_pgs
            .iter()
            .filter(|&&pg| usize::from(pg) < crate::MAX_PGS)
            .fold(0u8, |m, &pg| m | (1 << pg))
    }

    /// Checks every key on its own (port-independent). [`crate::Mmu::new`] additionally checks
    /// that the reservations fit the buffer for the given ports.
    pub fn validate(&self) -> Result<(), MmuError> {
        if self.buffer_bytes == 0 {
            return Err(MmuError::config("buffer_bytes", "must be positive"));
        }
        if self.cell_bytes == 0 {
            return Err(MmuError::config("cell_bytes", "must be positive"));
        }
        let cells = self.buffer_bytes.div_ceil(u64::from(self.cell_bytes));
        if cells > u64::from(u32::MAX) {
            return Err(MmuError::config(
                "cell_bytes",
                format!(
                    "{} B of buffer in {} B cells is {cells} cells, more than 2^32",
                    self.buffer_bytes, self.cell_bytes
                ),
            ));
        }
        if !(self.lossless_share.is_finite() && (0.0..=1.0).contains(&self.lossless_share)) {
            return Err(MmuError::config(
                "lossless_share",
                format!("must be within [0, 1], got {}", self.lossless_share),
            ));
        }
        let mut seen = 0u8;
        for &pg in &self.lossless_pgs {
            if usize::from(pg) >= crate::MAX_PGS {
                return Err(MmuError::config(
                    "lossless_pgs",
                    format!("PG {pg} out of range 0..={}", crate::MAX_PGS - 1),
                ));
            }
            if seen & (1 << pg) != 0 {
                return Err(MmuError::config(
                    "lossless_pgs",
                    format!("PG {pg} listed twice"),
                ));
            }
            seen |= 1 << pg;
        }
        if !self.lossless_pgs.is_empty() && self.lossless_share == 0.0 {
            return Err(MmuError::config(
                "lossless_share",
                "is 0 but lossless_pgs is not empty: lossless traffic needs a pool",
            ));
        }
        if self.small_packet_percentage > 100 {
            return Err(MmuError::config(
                "small_packet_percentage",
                format!(
                    "must be within 0..=100, got {}",
                    self.small_packet_percentage
                ),
            ));
        }
        self.alpha.check("alpha")?;
        self.egress_alpha.check("egress_alpha")?;
        if self.headroom_mode == HeadroomMode::Hpcc && !matches!(self.alpha, Alpha::Shift(_)) {
            return Err(MmuError::config(
                "alpha",
                "hpcc mode takes alpha as a shift (`{ shift = 3 }`), as switch-mmu.cc does",
            ));
        }
        let e = &self.ecn;
        if e.enabled {
            if e.k_min_bytes > e.k_max_bytes {
                return Err(MmuError::config(
                    "ecn.k_min_bytes",
                    format!(
                        "K_min {} B is above K_max {} B",
                        e.k_min_bytes, e.k_max_bytes
                    ),
                ));
            }
            if !(e.p_max.is_finite() && (0.0..=1.0).contains(&e.p_max)) {
                return Err(MmuError::config(
                    "ecn.p_max",
                    format!("must be within [0, 1], got {}", e.p_max),
                ));
            }
            if e.ref_rate_bps == 0 {
                return Err(MmuError::config("ecn.ref_rate_bps", "must be positive"));
            }
        }
        Ok(())
    }
}

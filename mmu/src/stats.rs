//! Counters and watermarks: occupancy per segment (private/shared/headroom/insurance/lossy),
//! per PG, per egress queue and per pool; peaks since the last [`Mmu::clear_watermarks`];
//! drops by reason; pause events and paused time. All occupancies are in cells.

use serde::Serialize;

use crate::config::HeadroomMode;
use crate::types::{DropReason, MAX_PGS};
use crate::Mmu;

/// Cells per segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    /// Private buffer (`φ` per lossless queue).
    pub private: u64,
    /// Shared buffer (DSH: footroom + shared headroom).
    pub shared: u64,
    /// SIH/HPCC static headroom.
    pub headroom: u64,
    /// DSH insurance headroom.
    pub insurance: u64,
    /// Lossy pool.
    pub lossy: u64,
}

/// Drops by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropCounters {
    pub invalid: u64,
    pub headroom_exhausted: u64,
    pub insurance_exhausted: u64,
    pub lossless_pool_full: u64,
    pub egress_threshold: u64,
    pub lossy_pool_full: u64,
}

impl DropCounters {
    pub(crate) fn bump(&mut self, r: DropReason) {
        match r {
            DropReason::Invalid => self.invalid += 1,
            DropReason::HeadroomExhausted => self.headroom_exhausted += 1,
            DropReason::InsuranceExhausted => self.insurance_exhausted += 1,
            DropReason::LosslessPoolFull => self.lossless_pool_full += 1,
            DropReason::EgressThreshold => self.egress_threshold += 1,
            DropReason::LossyPoolFull => self.lossy_pool_full += 1,
        }
    }

    /// Drops of lossless packets (should be zero when upstreams honour pauses in time).
    pub fn lossless(&self) -> u64 {
        self.headroom_exhausted + self.insurance_exhausted + self.lossless_pool_full
    }
}

/// Switch-wide event counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub admitted_packets: u64,
    pub admitted_cells: u64,
    pub released_packets: u64,
    pub released_cells: u64,
    pub ecn_marked: u64,
    pub xoff: u64,
    pub xon: u64,
    pub port_xoff: u64,
    pub port_xon: u64,
    /// Releases that did not match what was charged (wrong ticket/packet). Should stay 0.
    pub accounting_errors: u64,
    pub drops: DropCounters,
}

/// One (ingress port, PG).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgStats {
    pub port: usize,
    pub pg: usize,
    pub lossless: bool,
    pub private: u32,
    pub shared: u32,
    /// Static headroom (SIH/HPCC) or this PG's use of the port insurance (DSH).
    pub headroom: u32,
    pub lossy: u32,
    pub peak: u32,
    /// Peak of `headroom` since the last clear.
    pub headroom_peak: u32,
    /// Most cells admitted during one XOFF (from the XOFF decision, the crossing packet
    /// excluded, until XON) since the last clear: what arrived after the pause was decided,
    /// which `η` (Eq. 1) must cover.
    pub absorbed_peak: u32,
    /// Cells admitted during all the pauses that ended (each from its XOFF to its XON);
    /// over `xon`, the mean pause's absorption. Not cleared with the watermarks.
    pub absorbed_cells: u64,
    pub paused: bool,
    pub xoff: u64,
    pub xon: u64,
    /// Time spent paused, closed intervals only (an ongoing pause started at `paused_since_ps`).
    pub paused_ps: u64,
    pub paused_since_ps: Option<u64>,
}

/// One ingress port (DSH port-level state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortStats {
    pub port: usize,
    pub shared: u32,
    pub insurance: u32,
    /// Peak of `insurance` since the last clear (DSH).
    pub insurance_peak: u32,
    pub eta_cells: u32,
    pub headroom_cap_cells: u32,
    pub threshold_cells: u64,
    pub paused: bool,
    pub port_xoff: u64,
    pub port_xon: u64,
    pub paused_ps: u64,
    pub paused_since_ps: Option<u64>,
}

/// One egress queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub port: usize,
    pub queue: usize,
    pub cells: u32,
    pub bytes: u64,
    pub lossy: u32,
    pub peak: u32,
    pub ecn_marked: u64,
}

/// Snapshot of the whole MMU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MmuStats {
    pub mode: HeadroomMode,
    pub cell_bytes: u32,
    pub total_cells: u64,
    pub lossless_pool_cells: u64,
    pub lossy_pool_cells: u64,
    /// `B_s`.
    pub shared_cells: u64,
    pub private_reserved_cells: u64,
    pub headroom_reserved_cells: u64,
    pub occupancy: Occupancy,
    pub peak: Occupancy,
    pub lossless_used: u64,
    pub lossless_peak: u64,
    pub lossy_used: u64,
    pub lossy_peak: u64,
    pub counters: Counters,
    pub pgs: Vec<PgStats>,
    pub ports: Vec<PortStats>,
    pub queues: Vec<QueueStats>,
}

impl Mmu {
    /// Snapshot of counters, occupancies and watermarks.
    pub fn stats(&self) -> MmuStats {
        let pgs = self
            .pgs
            .iter()
            .enumerate()
            .map(|(i, s)| PgStats {
                port: i / MAX_PGS,
                pg: i % MAX_PGS,
                lossless: self.is_lossless_pg(i % MAX_PGS),
                private: s.private,
                shared: s.shared,
                headroom: s.headroom,
                lossy: s.lossy,
                peak: s.peak,
                headroom_peak: s.headroom_peak,
                absorbed_peak: s.absorbed_peak,
                absorbed_cells: s.absorbed_cells,
                paused: s.paused,
                xoff: s.xoff,
                xon: s.xon,
                paused_ps: s.paused_ps,
                paused_since_ps: s.paused.then_some(s.pause_since_ps),
            })
            .collect();
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortStats {
                port: i,
                shared: p.shared,
                insurance: p.insurance,
                insurance_peak: p.insurance_peak,
                eta_cells: p.eta_cells,
                headroom_cap_cells: p.hdrm_cap,
                threshold_cells: self.threshold_cells(i),
                paused: p.paused,
                port_xoff: p.port_xoff,
                port_xon: p.port_xon,
                paused_ps: p.paused_ps,
                paused_since_ps: p.paused.then_some(p.pause_since_ps),
            })
            .collect();
        let mut queues = Vec::with_capacity(self.queues.len());
        for (i, p) in self.ports.iter().enumerate() {
            for q in 0..p.params.queues {
                let s = &self.queues[p.queue_base as usize + q];
                queues.push(QueueStats {
                    port: i,
                    queue: q,
                    cells: s.cells,
                    bytes: s.bytes,
                    lossy: s.lossy,
                    peak: s.peak,
                    ecn_marked: s.ecn_marked,
                });
            }
        }
        MmuStats {
            mode: self.mode,
            cell_bytes: self.cell_bytes,
            total_cells: self.total_cells,
            lossless_pool_cells: self.lossless_pool,
            lossy_pool_cells: self.lossy_pool,
            shared_cells: self.shared_cap,
            private_reserved_cells: self.private_reserved,
            headroom_reserved_cells: self.headroom_reserved,
            occupancy: self.occ,
            peak: self.peak,
            lossless_used: self.lossless_used(),
            lossless_peak: self.lossless_peak,
            lossy_used: self.occ.lossy,
            lossy_peak: self.peak.lossy,
            counters: self.counters,
            pgs,
            ports,
            queues,
        }
    }

    /// Resets every peak to the current occupancy.
    pub fn clear_watermarks(&mut self) {
        self.peak = self.occ;
        self.lossless_peak = self.lossless_used();
        for s in &mut self.pgs {
            s.peak = s.total();
            s.headroom_peak = s.headroom;
            s.absorbed_peak = if s.paused { s.absorbed } else { 0 };
        }
        for p in &mut self.ports {
            p.insurance_peak = p.insurance;
        }
        for q in &mut self.queues {
            q.peak = q.cells;
        }
    }
}

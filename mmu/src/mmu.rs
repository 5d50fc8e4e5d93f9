//! The [`Mmu`]: state, construction (buffer partition, DSH §II-B and Fig. 7) and the per-packet
//! entry points. Scheme-specific placement and XOFF/XON rules live in [`crate::ingress`]
//! (SIH, HPCC) and [`crate::dsh`]; lossy admission in [`crate::egress`]; marking in
//! [`crate::ecn`].

use crate::config::{HeadroomMode, MmuConfig};
use crate::ecn::{EcnPort, SplitMix64};
use crate::error::MmuError;
use crate::headroom::{self, HeadroomRow};
use crate::stats::{Counters, Occupancy};
use crate::types::{
    Admission, DropReason, FcEvent, PacketInfo, PortParams, Segment, Ticket, MAX_PGS, MAX_QUEUES,
};

/// Per (ingress port, PG) accounting and PFC state. `repr(C)` keeps the order: what every
/// admission and release reads or writes (the cell counts, peaks and `paused`) comes first
/// and, the struct being line-aligned, on one cache line (Rust's own layout put the `u64`
/// statistics first and the counts across a line boundary in some slots).
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub(crate) struct PgState {
    /// Cells in the private segment (`≤ φ`).
    pub private: u32,
    /// Cells in the shared segment: `ω_s^{i,j}` (DSH Eq. 2).
    pub shared: u32,
    /// Cells in static headroom (SIH/HPCC) or this PG's share of the port's insurance (DSH).
    pub headroom: u32,
    /// Cells of lossy packets that entered on this PG (statistics only).
    pub lossy: u32,
    /// Peak of `private + shared + headroom + lossy` since the last clear.
    pub peak: u32,
    /// Peak of `headroom` since the last clear.
    pub headroom_peak: u32,
    /// Cells admitted since the last XOFF while it is asserted (what the upstream sent after
    /// being told to pause, the quantity `η` budgets), and its peak since the last clear.
    pub absorbed: u32,
    pub absorbed_peak: u32,
    /// XOFF asserted toward the upstream (PFC OFF / DSH QOFF).
    pub paused: bool,
    /// Cells absorbed over every pause that ended (summed at XON): with `xon`, the typical
    /// pause's absorption beside the worst one's (`absorbed_peak`).
    pub absorbed_cells: u64,
    pub pause_since_ps: u64,
    pub paused_ps: u64,
    pub xoff: u64,
    pub xon: u64,
}

impl PgState {
    #[inline]
    pub(crate) fn total(&self) -> u32 {
        self.private + self.shared + self.headroom + self.lossy
    }
}

/// Per ingress port: sizing, DSH port-level state, ECN thresholds of its egress side.
/// `repr(C)`, line-aligned: an admission reads its egress port's `params` and `queue_base`
/// and its ingress port's threshold and DSH state, all in the first cache line (the ECN
/// thresholds, read for ECN-capable packets only, and the statistics follow).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(crate) struct PortState {
    pub params: PortParams,
    /// DT `α` for this port, 16.16 fixed point (per port because HPCC scales it with rate).
    pub alpha_q16: u64,
    /// First index of this port's egress queues in `Mmu::queues` (`u32`: `Mmu::new` keeps
    /// the table within `u32` indices).
    pub queue_base: u32,
    /// `η` of this port in cells (Eq. 1 + response term; `3·C·D` for HPCC), bytes / cell as
    /// the paper sizes it: DSH's `X_qoff = T − η` (Eq. 5).
    pub eta_cells: u32,
    /// Static headroom per PG (SIH, HPCC) or insurance per port (DSH), cells: `η` for
    /// small frames ([`headroom::eta_cells`]) plus the MTU slack.
    pub hdrm_cap: u32,
    /// `Σ_j ω_s^{i,j}`: shared occupancy of all PGs of this port (DSH Eq. 6 compares it).
    pub shared: u32,
    /// DSH insurance cells in use.
    pub insurance: u32,
    /// DSH POFF.
    pub paused: bool,
    pub ecn: EcnPort,
    /// Peak of `insurance` since the last clear.
    pub insurance_peak: u32,
    pub pause_since_ps: u64,
    pub paused_ps: u64,
    pub port_xoff: u64,
    pub port_xon: u64,
    pub eta_formula_bytes: u64,
    pub response_bytes: u64,
}

/// Per egress queue (32 B; aligned so that none straddles two cache lines).
#[derive(Debug, Clone, Default)]
#[repr(align(32))]
pub(crate) struct QueueState {
    pub cells: u32,
    pub bytes: u64,
    pub lossy: u32,
    pub peak: u32,
    pub ecn_marked: u64,
}

/// Shared-buffer switch MMU: pure accounting and decisions; time is passed in.
#[derive(Debug, Clone)]
pub struct Mmu {
    pub(crate) cfg: MmuConfig,
    pub(crate) mode: HeadroomMode,
    pub(crate) cell_bytes: u32,
    /// `log2(cell_bytes)` when it is a power of two (fast path).
    pub(crate) cell_shift: Option<u32>,
    pub(crate) lossless_mask: u8,
    /// `N_q`: lossless PGs per port.
    pub(crate) n_q: u32,
    /// `φ` in cells.
    pub(crate) phi: u32,
    pub(crate) delta: u32,
    pub(crate) delta_q: u32,
    pub(crate) delta_p: u32,
    pub(crate) total_cells: u64,
    pub(crate) lossless_pool: u64,
    pub(crate) lossy_pool: u64,
    /// `B_s`: shared segment of the lossless pool, cells.
    pub(crate) shared_cap: u64,
    pub(crate) private_reserved: u64,
    pub(crate) headroom_reserved: u64,
    pub(crate) egress_alpha_q16: u64,
    pub(crate) ports: Vec<PortState>,
    pub(crate) pgs: Vec<PgState>,
    pub(crate) queues: Vec<QueueState>,
    pub(crate) occ: Occupancy,
    pub(crate) peak: Occupancy,
    pub(crate) lossless_peak: u64,
    pub(crate) counters: Counters,
    pub(crate) events: Vec<FcEvent>,
    pub(crate) rng: SplitMix64,
}

fn cells_for(bytes: u64, cell: u32) -> u64 {
    bytes.div_ceil(u64::from(cell))
}

impl Mmu {
    /// Builds the MMU for `ports`, partitioning the buffer as the mode prescribes:
    ///
    /// * lossless pool `= lossless_share × B`, lossy pool = the rest (§II-B);
    /// * SIH: `B_s = pool − N_p·N_q·φ − N_p·N_q·η` (Eq. 3);
    /// * DSH: `B_s = pool − N_p·N_q·φ − N_p·η` (Eq. 4);
    /// * HPCC: `B_s = pool − N_p·reserve − Σ_i η_i` (as `switch-mmu.cc`, see [`crate::ingress`]).
    pub fn new(cfg: &MmuConfig, ports: &[PortParams]) -> Result<Mmu, MmuError> {
        cfg.validate()?;
        if ports.is_empty() {
            return Err(MmuError::config(
                "ports",
                "a switch needs at least one port",
            ));
        }
        if ports.len() > u32::MAX as usize / MAX_QUEUES {
            // A ticket holds its queue and (port, PG) indices in `u32`s.
            return Err(MmuError::config(
                "ports",
                format!("at most {} ports", u32::MAX as usize / MAX_QUEUES),
            ));
        }
        let cell = cfg.cell_bytes;
        let mode = cfg.headroom_mode;
        let min_rate = ports.iter().map(|p| p.rate_bps).min().unwrap_or(0);
        for (i, p) in ports.iter().enumerate() {
            if p.rate_bps == 0 {
                return Err(MmuError::config(
                    format!("ports[{i}].rate_bps"),
                    "must be positive",
                ));
            }
            if p.mtu == 0 || cells_for(u64::from(p.mtu), cell) > u64::from(u16::MAX) {
                return Err(MmuError::config(
                    format!("ports[{i}].mtu"),
                    format!(
                        "must be in 1..={} B with {cell} B cells, got {}",
                        u64::from(u16::MAX) * u64::from(cell),
                        p.mtu
                    ),
                ));
            }
            if p.queues == 0 || p.queues > MAX_QUEUES {
                return Err(MmuError::config(
                    format!("ports[{i}].queues"),
                    format!("must be in 1..={MAX_QUEUES}, got {}", p.queues),
                ));
            }
        }

        let lossless_mask = cfg.lossless_mask();
        let n_q = lossless_mask.count_ones();
        let n_p = ports.len() as u64;
        let total_cells = cells_for(cfg.buffer_bytes, cell);
        let lossless_pool = ((total_cells as f64) * cfg.lossless_share).floor() as u64;
        let lossy_pool = total_cells - lossless_pool;
        let phi = cells_for(u64::from(cfg.private_bytes), cell);
        let to_cells32 =
            |bytes: u64| -> u32 { u32::try_from(cells_for(bytes, cell)).unwrap_or(u32::MAX) };

        let mut states = Vec::with_capacity(ports.len());
        let mut queue_base = 0usize;
        let mut headroom_reserved = 0u64;
        for p in ports {
            let response_bytes = headroom::response_bytes(p.rate_bps, cfg.response_ps);
            let (eta_formula_bytes, alpha) = match mode {
                HeadroomMode::Sih | HeadroomMode::Dsh => (
                    headroom::eta_eq1(p.rate_bps, p.delay_ps, p.mtu),
                    cfg.alpha.q16(),
                ),
                HeadroomMode::Hpcc => {
                    // third.cc: shift lowered by one per rate doubling above the NIC rate.
                    let mut shift = match cfg.alpha {
                        crate::config::Alpha::Shift(s) => u32::from(s),
                        crate::config::Alpha::Fraction(_) => 3,
                    };
                    let mut rate = p.rate_bps;
                    while rate > min_rate && shift > 0 {
                        shift -= 1;
                        rate /= 2;
                    }
                    (
                        headroom::eta_hpcc(p.rate_bps, p.delay_ps),
                        (1u64 << 16) >> shift,
                    )
                }
            };
            // `η` as the paper sizes it, in cells: DSH's queue-level threshold `X_qoff = T − η`
            // (Eq. 5) keeps it, so a paused queue has that much of shared headroom.
            let eta_cells = to_cells32(eta_formula_bytes + response_bytes);
            // The reservation, which is what guarantees no loss (SIH's per-PG headroom, DSH's
            // insurance, HPCC's headroom), holds `η` of line-rate arrivals in cells even when
            // they are small frames. Eq. (1)'s upstream finishes one MTU frame; HPCC's `3·C·D`
            // is all line-rate time.
            let one_frame = match mode {
                HeadroomMode::Sih | HeadroomMode::Dsh => p.mtu,
                HeadroomMode::Hpcc => 0,
            };
            let reserve_cells = u32::try_from(headroom::eta_cells(
                eta_formula_bytes + response_bytes,
                one_frame,
                p.mtu,
                cell,
                cfg.small_packet_percentage,
            ))
            .unwrap_or(u32::MAX);
            let mtu_cells = to_cells32(u64::from(p.mtu));
            let hdrm_cap = match mode {
                // One MTU of crossing slack: see `ingress` module docs.
                HeadroomMode::Sih | HeadroomMode::Dsh if cfg.headroom_mtu_slack => {
                    reserve_cells.saturating_add(mtu_cells)
                }
                _ => reserve_cells,
            };
            headroom_reserved += match mode {
                HeadroomMode::Sih => u64::from(n_q) * u64::from(hdrm_cap),
                HeadroomMode::Dsh | HeadroomMode::Hpcc => {
                    if n_q == 0 {
                        0
                    } else {
                        u64::from(hdrm_cap)
                    }
                }
            };
            states.push(PortState {
                params: *p,
                eta_cells,
                hdrm_cap,
                alpha_q16: alpha,
                shared: 0,
                insurance: 0,
                insurance_peak: 0,
                paused: false,
                pause_since_ps: 0,
                paused_ps: 0,
                port_xoff: 0,
                port_xon: 0,
                // Fits: at most `u32::MAX / MAX_QUEUES` ports of at most `MAX_QUEUES` queues.
                queue_base: queue_base as u32,
                ecn: EcnPort::new(&cfg.ecn, p.rate_bps),
                eta_formula_bytes,
                response_bytes,
            });
            queue_base += p.queues;
        }
        let private_reserved = match mode {
            HeadroomMode::Sih | HeadroomMode::Dsh => n_p * u64::from(n_q) * phi,
            HeadroomMode::Hpcc => {
                if n_q == 0 {
                    0
                } else {
                    n_p * phi
                }
            }
        };
        let reserved = private_reserved + headroom_reserved;
        if reserved > lossless_pool {
            let b = |c: u64| c * u64::from(cell);
            let what = match mode {
                HeadroomMode::Sih => format!(
                    "{n_p} ports × {n_q} PGs × (η {} B = {} cells at small_packet_percentage \
                     {}, with MTU slack) = {} B",
                    states[0].eta_formula_bytes + states[0].response_bytes,
                    states[0].hdrm_cap,
                    cfg.small_packet_percentage,
                    b(headroom_reserved)
                ),
                HeadroomMode::Dsh => format!(
                    "{n_p} ports × insurance (η {} B = {} cells at small_packet_percentage \
                     {}, with MTU slack) = {} B",
                    states[0].eta_formula_bytes + states[0].response_bytes,
                    states[0].hdrm_cap,
                    cfg.small_packet_percentage,
                    b(headroom_reserved)
                ),
                HeadroomMode::Hpcc => format!(
                    "{n_p} ports × 3·C·D ({} B) = {} B",
                    states[0].eta_formula_bytes,
                    b(headroom_reserved)
                ),
            };
            return Err(MmuError::config(
                "headroom_mode",
                format!(
                    "headroom exceeds the buffer: {what} + private {} B > lossless pool {} B \
                     ({} B × lossless_share {}); lower response_ps or small_packet_percentage, \
                     or raise buffer_bytes",
                    b(private_reserved),
                    b(lossless_pool),
                    cfg.buffer_bytes,
                    cfg.lossless_share
                ),
            ));
        }
        let shared_cap = lossless_pool - reserved;

        Ok(Mmu {
            cfg: cfg.clone(),
            mode,
            cell_bytes: cell,
            cell_shift: cell.is_power_of_two().then(|| cell.trailing_zeros()),
            lossless_mask,
            n_q,
            phi: u32::try_from(phi).unwrap_or(u32::MAX),
            delta: to_cells32(u64::from(cfg.delta_bytes)),
            delta_q: to_cells32(u64::from(cfg.delta_q_bytes)),
            delta_p: to_cells32(u64::from(cfg.delta_p_bytes)),
            total_cells,
            lossless_pool,
            lossy_pool,
            shared_cap,
            private_reserved,
            headroom_reserved,
            egress_alpha_q16: cfg.egress_alpha.q16(),
            ports: states,
            pgs: vec![PgState::default(); ports.len() * MAX_PGS],
            queues: vec![QueueState::default(); queue_base],
            occ: Occupancy::default(),
            peak: Occupancy::default(),
            lossless_peak: 0,
            counters: Counters::default(),
            events: Vec::with_capacity(64),
            rng: SplitMix64::new(cfg.seed),
        })
    }

    /// Cells a packet of `bytes` occupies: `ceil(bytes / cell)`.
    #[inline]
    pub fn cells(&self, bytes: u32) -> u32 {
        match self.cell_shift {
            Some(s) => (bytes + ((1u32 << s) - 1)) >> s,
            None => bytes.div_ceil(self.cell_bytes),
        }
    }

    /// Whether `pg` is configured lossless.
    #[inline]
    pub fn is_lossless_pg(&self, pg: usize) -> bool {
        pg < MAX_PGS && self.lossless_mask & (1 << pg) != 0
    }

    /// Number of ports.
    pub fn num_ports(&self) -> usize {
        self.ports.len()
    }

    /// The configuration the MMU was built from.
    pub fn config(&self) -> &MmuConfig {
        &self.cfg
    }

    /// Dynamic Threshold `T(t) = α·(B_s − Σω)` (DSH Eq. 2) seen by ingress `port`, in cells.
    #[inline]
    pub fn threshold_cells(&self, port: usize) -> u64 {
        let free = self.shared_cap.saturating_sub(self.occ.shared);
        let a = self.ports.get(port).map_or(0, |p| p.alpha_q16);
        (free * a) >> 16
    }

    /// Admits or drops one packet. Charges ingress (lossless: private/shared/headroom/insurance)
    /// and egress accounting, may queue flow-control events and decide an ECN mark.
    pub fn admit(&mut self, pkt: &PacketInfo, now_ps: u64) -> Admission {
        let n = self.ports.len();
        if pkt.in_port >= n
            || pkt.out_port >= n
            || pkt.pg >= MAX_PGS
            || pkt.queue >= self.ports[pkt.out_port].params.queues
            || pkt.bytes == 0
        {
            return self.drop(DropReason::Invalid);
        }
        let c = self.cells(pkt.bytes);
        if c > u32::from(u16::MAX) {
            return self.drop(DropReason::Invalid);
        }
        let qi = self.ports[pkt.out_port].queue_base as usize + pkt.queue;
        let pgi = pkt.in_port * MAX_PGS + pkt.pg;
        // Each placement has its own copy of the bookkeeping below: on the lossy path the
        // segment is known and the queue and PG entries are the ones `admit_lossy` just
        // indexed, so their bounds checks and the peak's segment match fold away.
        if pkt.lossless && self.is_lossless_pg(pkt.pg) {
            match self.admit_lossless(pkt.in_port, pkt.pg, c, now_ps) {
                Ok(seg) => self.admitted(pkt, qi, pgi, c, seg),
                Err(reason) => self.drop(reason),
            }
        } else {
            match self.admit_lossy(pgi, qi, c) {
                Ok(seg) => self.admitted(pkt, qi, pgi, c, seg),
                Err(reason) => self.drop(reason),
            }
        }
    }

    /// The egress and statistics side of an admission whose ingress placement (`seg`)
    /// succeeded: ECN, queue occupancy, peaks, counters; the verdict.
    #[inline(always)]
    fn admitted(
        &mut self,
        pkt: &PacketInfo,
        qi: usize,
        pgi: usize,
        c: u32,
        seg: Segment,
    ) -> Admission {
        // The queue's bytes before this packet decide the mark.
        let q = &mut self.queues[qi];
        let mark_ecn =
            pkt.ecn_capable && self.ports[pkt.out_port].ecn.decide(q.bytes, &mut self.rng);
        q.cells += c;
        q.bytes += u64::from(pkt.bytes);
        q.peak = q.peak.max(q.cells);
        if mark_ecn {
            q.ecn_marked += 1;
            self.counters.ecn_marked += 1;
        }
        let pg = &mut self.pgs[pgi];
        pg.peak = pg.peak.max(pg.total());
        self.counters.admitted_packets += 1;
        self.counters.admitted_cells += u64::from(c);
        self.update_peaks(seg);
        Admission::Admitted {
            // Both indices fit: `new` refuses tables longer than `u32::MAX`.
            ticket: Ticket {
                queue: qi as u32,
                pg: pgi as u32,
                cells: c as u16,
                seg,
            },
            mark_ecn,
        }
    }

    /// The lossless placement of the mode. Out of line: the lossy path through `admit` then
    /// needs fewer registers saved.
    #[inline(never)]
    fn admit_lossless(
        &mut self,
        port: usize,
        pg: usize,
        c: u32,
        now_ps: u64,
    ) -> Result<Segment, DropReason> {
        match self.mode {
            HeadroomMode::Sih | HeadroomMode::Hpcc => self.admit_static(port, pg, c, now_ps),
            HeadroomMode::Dsh => self.admit_dsh(port, pg, c, now_ps),
        }
    }

    /// Gives back what `admit` charged for a packet of `bytes` (the length it was admitted
    /// with) when it leaves the switch (or is discarded after admission): the ticket says
    /// where. May queue XON events. A ticket this MMU did not issue counts an accounting
    /// error.
    pub fn release(&mut self, ticket: Ticket, bytes: u32, now_ps: u64) {
        let (qi, pgi) = (ticket.queue as usize, ticket.pg as usize);
        if qi >= self.queues.len() || pgi >= self.pgs.len() {
            self.counters.accounting_errors += 1;
            return;
        }
        let c = u32::from(ticket.cells);
        let q = &mut self.queues[qi];
        let mut bad = q.cells < c;
        q.cells = q.cells.saturating_sub(c);
        q.bytes = q.bytes.saturating_sub(u64::from(bytes));
        if ticket.seg == Segment::Lossy {
            bad |= q.lossy < c;
            q.lossy = q.lossy.saturating_sub(c);
            bad |= !self.release_lossy(pgi, c);
        } else {
            bad |= !self.release_lossless(pgi, ticket.seg, c, now_ps);
        }
        if bad {
            self.counters.accounting_errors += 1;
        }
        self.counters.released_packets += 1;
        self.counters.released_cells += u64::from(c);
    }

    /// Whether flow-control events are pending (a cheap check before `poll_events`).
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Moves pending flow-control events into `out` (in the order they happened).
    pub fn poll_events(&mut self, out: &mut Vec<FcEvent>) {
        out.append(&mut self.events);
    }

    /// XOFF currently asserted toward the upstream of `port` for `pg`: queue-level pause of
    /// that PG or (DSH) port-level pause.
    pub fn is_paused(&self, port: usize, pg: usize) -> bool {
        if port >= self.ports.len() || pg >= MAX_PGS {
            return false;
        }
        self.pgs[port * MAX_PGS + pg].paused || self.ports[port].paused
    }

    /// DSH port-level pause (POFF) asserted toward the upstream of `port`.
    pub fn is_port_paused(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|p| p.paused)
    }

    /// Whether nothing is buffered: no cell in any pool, no ingress queue paused.
    pub fn is_empty(&self) -> bool {
        let o = &self.occ;
        o.private + o.shared + o.headroom + o.insurance + o.lossy == 0
            && !self.pgs.iter().any(|g| g.paused)
            && !self.ports.iter().any(|p| p.paused)
    }

    /// Re-sizes the headroom for a new software response term `response_ps` (a switch that
    /// measured its own reaction time, `response_ps = "auto"`). Only an empty MMU is re-sized,
    /// so no buffered packet is charged to a pool that changed under it: returns `Ok(false)`
    /// and changes nothing otherwise. Counters, peaks and pause times carry over; an
    /// error (the new headroom does not fit) leaves the MMU as it was.
    pub fn retune_response(&mut self, response_ps: u64) -> Result<bool, MmuError> {
        if !self.is_empty() {
            return Ok(false);
        }
        let mut cfg = self.cfg.clone();
        cfg.response_ps = response_ps;
        let params: Vec<PortParams> = self.ports.iter().map(|p| p.params).collect();
        let new = Mmu::new(&cfg, &params)?;
        for (old, p) in self.ports.iter_mut().zip(new.ports) {
            old.eta_cells = p.eta_cells;
            old.hdrm_cap = p.hdrm_cap;
            old.response_bytes = p.response_bytes;
        }
        self.shared_cap = new.shared_cap;
        self.headroom_reserved = new.headroom_reserved;
        self.cfg = cfg;
        Ok(true)
    }

    /// Per-port headroom sizing, for the start-up banner (see
    /// [`crate::headroom::format_headroom_table`]).
    pub fn headroom_table(&self) -> Vec<HeadroomRow> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let reserved_cells = match self.mode {
                    HeadroomMode::Sih => u64::from(self.n_q) * u64::from(p.hdrm_cap),
                    _ if self.n_q == 0 => 0,
                    _ => u64::from(p.hdrm_cap),
                };
                HeadroomRow {
                    port: i,
                    rate_bps: p.params.rate_bps,
                    delay_ps: p.params.delay_ps,
                    mtu: p.params.mtu,
                    eta_formula_bytes: p.eta_formula_bytes,
                    response_bytes: p.response_bytes,
                    eta_bytes: p.eta_formula_bytes + p.response_bytes,
                    eta_cells: p.eta_cells,
                    reserved_cells,
                    reserved_bytes: reserved_cells * u64::from(self.cell_bytes),
                    mode: self.mode,
                }
            })
            .collect()
    }

    #[inline]
    fn drop(&mut self, reason: DropReason) -> Admission {
        self.counters.drops.bump(reason);
        Admission::Dropped(reason)
    }

    // ---- shared helpers for the scheme modules -------------------------------------------

    #[inline]
    pub(crate) fn lossless_used(&self) -> u64 {
        self.occ.private + self.occ.shared + self.occ.headroom + self.occ.insurance
    }

    #[inline]
    pub(crate) fn charge(&mut self, port: usize, pg: usize, seg: Segment, c: u32) {
        let st = &mut self.pgs[port * MAX_PGS + pg];
        let c64 = u64::from(c);
        if st.paused && seg != Segment::Lossy {
            st.absorbed += c;
            st.absorbed_peak = st.absorbed_peak.max(st.absorbed);
        }
        match seg {
            Segment::Private => {
                st.private += c;
                self.occ.private += c64;
            }
            Segment::Shared => {
                st.shared += c;
                self.ports[port].shared += c;
                self.occ.shared += c64;
            }
            Segment::Headroom => {
                st.headroom += c;
                st.headroom_peak = st.headroom_peak.max(st.headroom);
                self.occ.headroom += c64;
            }
            Segment::Insurance => {
                st.headroom += c;
                st.headroom_peak = st.headroom_peak.max(st.headroom);
                let p = &mut self.ports[port];
                p.insurance += c;
                p.insurance_peak = p.insurance_peak.max(p.insurance);
                self.occ.insurance += c64;
            }
            Segment::Lossy => self.charge_lossy(port * MAX_PGS + pg, c),
        }
    }

    /// Undoes a lossless charge. Private tickets come back from the private segment (except in
    /// HPCC mode); everything else drains headroom/insurance first, then shared, then private,
    /// the way ASIC counters (and `switch-mmu.cc`) do: a PG leaves headroom as soon as it
    /// drains, so XON is not held back by packets that happen to sit at the tail.
    /// Returns false on an accounting mismatch (more released than held). Then XON if the
    /// mode's resume condition holds. (Out of line, as `admit_lossless`.)
    #[inline(never)]
    fn release_lossless(&mut self, pgi: usize, seg: Segment, c: u32, now_ps: u64) -> bool {
        let (port, pg) = (pgi / MAX_PGS, pgi % MAX_PGS);
        let ok = self.give_back_lossless(port, pg, seg, c);
        match self.mode {
            HeadroomMode::Sih | HeadroomMode::Hpcc => self.static_check_resume(port, pg, now_ps),
            HeadroomMode::Dsh => self.dsh_check_resume(port, pg, now_ps),
        }
        ok
    }

    /// The cell accounting of `release_lossless`.
    #[inline]
    fn give_back_lossless(&mut self, port: usize, pg: usize, seg: Segment, c: u32) -> bool {
        let dsh = self.mode == HeadroomMode::Dsh;
        let st = &mut self.pgs[port * MAX_PGS + pg];
        let mut rest = c;
        if seg == Segment::Private && self.mode != HeadroomMode::Hpcc {
            let p = rest.min(st.private);
            st.private -= p;
            self.occ.private -= u64::from(p);
            rest -= p;
            return rest == 0;
        }
        let h = rest.min(st.headroom);
        st.headroom -= h;
        if dsh {
            self.ports[port].insurance -= h;
            self.occ.insurance -= u64::from(h);
        } else {
            self.occ.headroom -= u64::from(h);
        }
        rest -= h;
        let s = rest.min(st.shared);
        st.shared -= s;
        self.ports[port].shared -= s;
        self.occ.shared -= u64::from(s);
        rest -= s;
        let p = rest.min(st.private);
        st.private -= p;
        self.occ.private -= u64::from(p);
        rest -= p;
        rest == 0
    }

    pub(crate) fn pg_xoff(&mut self, port: usize, pg: usize, now_ps: u64) {
        let st = &mut self.pgs[port * MAX_PGS + pg];
        st.paused = true;
        st.pause_since_ps = now_ps;
        st.absorbed = 0;
        st.xoff += 1;
        self.counters.xoff += 1;
        self.events.push(FcEvent::Xoff { port, pg });
    }

    pub(crate) fn pg_xon(&mut self, port: usize, pg: usize, now_ps: u64) {
        let st = &mut self.pgs[port * MAX_PGS + pg];
        st.paused = false;
        st.paused_ps += now_ps.saturating_sub(st.pause_since_ps);
        st.absorbed_cells += u64::from(st.absorbed);
        st.xon += 1;
        self.counters.xon += 1;
        self.events.push(FcEvent::Xon { port, pg });
    }

    pub(crate) fn port_xoff(&mut self, port: usize, now_ps: u64) {
        let p = &mut self.ports[port];
        p.paused = true;
        p.pause_since_ps = now_ps;
        p.port_xoff += 1;
        self.counters.port_xoff += 1;
        self.events.push(FcEvent::PortXoff { port });
    }

    pub(crate) fn port_xon(&mut self, port: usize, now_ps: u64) {
        let p = &mut self.ports[port];
        p.paused = false;
        p.paused_ps += now_ps.saturating_sub(p.pause_since_ps);
        p.port_xon += 1;
        self.counters.port_xon += 1;
        self.events.push(FcEvent::PortXon { port });
    }

    /// Raises the peaks an admission into `seg` can raise: occupancy grows only in `charge`,
    /// one segment at a time, so the other segments' peaks already hold. (Forced inline: a
    /// hint was not enough, and the call cost each admission ~8 instructions.)
    #[inline(always)]
    fn update_peaks(&mut self, seg: Segment) {
        let o = &self.occ;
        let p = &mut self.peak;
        match seg {
            Segment::Lossy => {
                p.lossy = p.lossy.max(o.lossy);
                return;
            }
            Segment::Private => p.private = p.private.max(o.private),
            Segment::Shared => p.shared = p.shared.max(o.shared),
            Segment::Headroom => p.headroom = p.headroom.max(o.headroom),
            Segment::Insurance => p.insurance = p.insurance.max(o.insurance),
        }
        let ll = o.private + o.shared + o.headroom + o.insurance;
        self.lossless_peak = self.lossless_peak.max(ll);
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// What one packet touches of its PG, its ports and its queue stays on one cache line
    /// each (the layouts' docs say why): a field moved behind the first line fails here.
    #[test]
    fn per_packet_state_stays_on_one_line() {
        assert_eq!(align_of::<PgState>(), 64);
        assert!(offset_of!(PgState, paused) < 64);
        assert_eq!(align_of::<PortState>(), 64);
        for end in [
            offset_of!(PortState, params) + size_of::<PortParams>(),
            offset_of!(PortState, queue_base) + 4,
            offset_of!(PortState, alpha_q16) + 8,
            offset_of!(PortState, insurance) + 4,
            offset_of!(PortState, paused) + 1,
        ] {
            assert!(end <= 64, "{end}");
        }
        assert_eq!(size_of::<QueueState>(), 32);
        assert_eq!(align_of::<QueueState>(), 32);
    }
}

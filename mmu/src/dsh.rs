//! Dynamic and Shared Headroom (DSH paper §IV-B, Fig. 7–9; implementation notes §IV-D).
//!
//! Buffer: private `φ` per queue, insurance headroom `η` per *port* (`B_i = N_p·η`, Eq. 4), and
//! one shared segment holding both footroom and shared headroom, governed by DT
//! (`T = α·(B_s − Σω)`, Eq. 2, with `ω` counting both).
//!
//! Queue level (QON/QOFF): XOFF when `ω_s^{i,j} > X_qoff = T − η` (Eq. 5), XON when
//! `ω + δ_q ≤ X_qoff` (`X_qon = X_qoff − δ_q`) or `ω = 0`. A queue in QOFF keeps putting its
//! in-flight packets into the shared segment — that is the dynamically allocated headroom.
//!
//! Port level (PON/POFF): port XOFF when `Σ_j ω_s^{i,j} > X_poff = N_q·T` (Eq. 6), pausing every
//! class of the upstream; while POFF, arriving packets go to the port's insurance headroom.
//! Port XON when the insurance is empty and `Σ_j ω + δ_p ≤ X_poff` (`X_pon = X_poff − δ_p`).
//! Waiting for an empty insurance is our choice: it guarantees a full `η` for the next POFF.
//! `N_q` is the number of lossless PGs per port (the queues that share the port's buffer).
//!
//! Private buffer is used first in every state (it is reserved per queue anyway). If the
//! shared segment is physically full while PON, the packet goes to insurance and POFF is
//! raised; that crossing packet is why insurance is `η` plus one MTU (see [`crate::ingress`]).

use crate::types::{DropReason, Segment, MAX_PGS};
use crate::Mmu;

impl Mmu {
    pub(crate) fn admit_dsh(
        &mut self,
        port: usize,
        pg: usize,
        c: u32,
        now_ps: u64,
    ) -> Result<Segment, DropReason> {
        if self.lossless_used() + u64::from(c) > self.lossless_pool {
            return Err(DropReason::LosslessPoolFull);
        }
        let idx = port * MAX_PGS + pg;
        let st = &self.pgs[idx];
        let p = &self.ports[port];
        let seg = if st.private + c <= self.phi {
            Segment::Private
        } else if !p.paused && self.occ.shared + u64::from(c) <= self.shared_cap {
            Segment::Shared
        } else if p.insurance + c <= p.hdrm_cap {
            Segment::Insurance
        } else {
            return Err(DropReason::InsuranceExhausted);
        };
        self.charge(port, pg, seg, c);

        let t = self.threshold_cells(port);
        self.dsh_queue_state(port, pg, t, now_ps);
        let p = &self.ports[port];
        if !p.paused {
            if seg == Segment::Insurance || u64::from(p.shared) > self.x_poff(t) {
                self.port_xoff(port, now_ps);
            }
        } else {
            self.dsh_port_resume(port, t, now_ps);
        }
        Ok(seg)
    }

    /// `X_qoff(t) = T(t) − η` (Eq. 5), may be negative.
    #[inline]
    fn x_qoff(&self, port: usize, t: u64) -> i64 {
        t as i64 - i64::from(self.ports[port].eta_cells)
    }

    /// `X_poff(t) = N_q·T(t)` (Eq. 6).
    #[inline]
    fn x_poff(&self, t: u64) -> u64 {
        u64::from(self.n_q) * t
    }

    fn dsh_queue_state(&mut self, port: usize, pg: usize, t: u64, now_ps: u64) {
        let x_qoff = self.x_qoff(port, t);
        let st = &self.pgs[port * MAX_PGS + pg];
        let w = i64::from(st.shared);
        if !st.paused {
            if w > 0 && w > x_qoff {
                self.pg_xoff(port, pg, now_ps);
            }
        } else if w == 0 || w + i64::from(self.delta_q) <= x_qoff {
            self.pg_xon(port, pg, now_ps);
        }
    }

    fn dsh_port_resume(&mut self, port: usize, t: u64, now_ps: u64) {
        let p = &self.ports[port];
        if p.paused
            && p.insurance == 0
            && (p.shared == 0 || u64::from(p.shared) + u64::from(self.delta_p) <= self.x_poff(t))
        {
            self.port_xon(port, now_ps);
        }
    }

    /// State changes on departure: QOFF → QON, POFF → PON.
    pub(crate) fn dsh_check_resume(&mut self, port: usize, pg: usize, now_ps: u64) {
        let t = self.threshold_cells(port);
        if self.pgs[port * MAX_PGS + pg].paused {
            self.dsh_queue_state(port, pg, t, now_ps);
        }
        self.dsh_port_resume(port, t, now_ps);
    }
}

//! Ingress admission with static headroom: SIH (DSH paper §II-C) and the HPCC ns-3 preset.
//!
//! # SIH — the four cases of §II-C
//! For a lossless packet of `c` cells at (port `i`, PG `j`), with `ω = ω_s^{i,j}` and
//! `T = α·(B_s − Σω)` (Eq. 2):
//! 1. private has room (`private + c ≤ φ`): private buffer;
//! 2. XON and shared has room, or XOFF but `ω < T` again: shared buffer;
//! 3. otherwise headroom (`η` per (port, PG), reserved up front, Eq. 3);
//! 4. headroom full: drop (only happens if the upstream overran the headroom budget).
//!
//! XOFF is raised as soon as `ω ≥ X_off = T` after the placement (or anything sits in
//! headroom), XON when the headroom is empty and `ω + δ ≤ T` (`X_on = X_off − δ`) or `ω = 0`.
//!
//! One deliberate detail: while XON, the packet that crosses `T` is put in *shared* (it
//! overshoots `T` by less than a packet) and raises XOFF, so the headroom only ever receives
//! what arrives *after* the XOFF — exactly what Eq. (1) budgets. The only exception is a
//! physically full shared segment, where the crossing packet has to go to headroom; every
//! reservation therefore carries one MTU of "crossing slack" on top of `η`.
//!
//! # HPCC preset — `switch-mmu.cc` (HPCC, SIGCOMM'19, ns-3 simulator)
//! * reserve 4 KiB per (port, queue), resume offset 3 KiB, headroom `3·C·D` per port
//!   (`third.cc`), PFC threshold `(B − total_hdrm − total_rsrv − shared_used) >> shift` with
//!   shift 3 lowered by one per rate doubling above the NIC rate;
//! * `total_hdrm`/`total_rsrv` count **one** headroom and **one** reserve per port, although every
//!   queue may use a full `headroom[port]`: HPCC overbooks. We keep that, and additionally
//!   never admit beyond the physical lossless pool ([`DropReason::LosslessPoolFull`]);
//! * placement: `ω + c > T` → headroom, else shared; drop if neither has room;
//! * XOFF if `hdrm > 0 || ω ≥ T` on enqueue; XON if `hdrm = 0 && (ω = 0 || ω + δ ≤ T)` on
//!   dequeue; release drains headroom first, then shared, then private.
//!
//! Unlike HPCC's byte counters a packet is placed whole (no split between reserve and shared);
//! with the preset's 1-byte cells the difference is at most one packet per queue.

use crate::config::HeadroomMode;
use crate::types::{DropReason, Segment, MAX_PGS};
use crate::Mmu;

impl Mmu {
    pub(crate) fn admit_static(
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
        let seg = if st.private + c <= self.phi {
            Segment::Private
        } else {
            let t = self.threshold_cells(port);
            let hdrm_room = st.headroom + c <= self.ports[port].hdrm_cap;
            let shared_room = self.occ.shared + u64::from(c) <= self.shared_cap;
            let to_shared = match self.mode {
                HeadroomMode::Hpcc => u64::from(st.shared + c) <= t,
                _ => !st.paused || u64::from(st.shared) < t,
            };
            if to_shared && shared_room {
                Segment::Shared
            } else if hdrm_room {
                Segment::Headroom
            } else {
                return Err(DropReason::HeadroomExhausted);
            }
        };
        self.charge(port, pg, seg, c);

        let t = self.threshold_cells(port);
        let st = &self.pgs[idx];
        if !st.paused {
            if st.headroom > 0 || (st.shared > 0 && u64::from(st.shared) >= t) {
                self.pg_xoff(port, pg, now_ps);
            }
        } else if self.mode == HeadroomMode::Sih {
            // Case ②: an arrival below X_on resumes.
            self.static_check_resume(port, pg, now_ps);
        }
        Ok(seg)
    }

    /// XON when headroom is empty and `ω + δ ≤ X_off` (or `ω = 0`).
    pub(crate) fn static_check_resume(&mut self, port: usize, pg: usize, now_ps: u64) {
        let st = &self.pgs[port * MAX_PGS + pg];
        if !st.paused || st.headroom != 0 {
            return;
        }
        let t = self.threshold_cells(port);
        if st.shared == 0 || u64::from(st.shared) + u64::from(self.delta) <= t {
            self.pg_xon(port, pg, now_ps);
        }
    }
}

//! Lossy pool: egress admission per egress queue with its own Dynamic Threshold
//! (Choudhury & Hahne, the DSH paper's [43]; DSH §II-B: lossy traffic lives in a hard-partitioned
//! pool and may be dropped). `T_e = α_e·(B_lossy − Σ lossy occupancy)`; a packet is
//! tail-dropped if its queue's lossy occupancy would exceed `T_e` or the pool is full.
//! Lossless packets are counted in egress queues (for ECN and statistics) but never
//! dropped at egress: ingress flow control is what keeps them.

use crate::types::{DropReason, Segment};
use crate::Mmu;

impl Mmu {
    /// Lossy admission of `c` cells that entered on (port, PG) `pgi` (index into `pgs`) for
    /// egress queue `qi`.
    #[inline(always)]
    pub(crate) fn admit_lossy(
        &mut self,
        pgi: usize,
        qi: usize,
        c: u32,
    ) -> Result<Segment, DropReason> {
        let c64 = u64::from(c);
        let used = self.occ.lossy;
        if used + c64 > self.lossy_pool {
            return Err(DropReason::LossyPoolFull);
        }
        let t = ((self.lossy_pool - used) * self.egress_alpha_q16) >> 16;
        let q = &mut self.queues[qi];
        if u64::from(q.lossy) + c64 > t {
            return Err(DropReason::EgressThreshold);
        }
        q.lossy += c;
        self.charge_lossy(pgi, c);
        Ok(Segment::Lossy)
    }

    /// Charges `c` lossy cells to (port, PG) `pgi` and the lossy pool; `release_lossy` gives
    /// them back.
    #[inline(always)]
    pub(crate) fn charge_lossy(&mut self, pgi: usize, c: u32) {
        self.pgs[pgi].lossy += c;
        self.occ.lossy += u64::from(c);
    }

    /// Gives back `c` lossy cells of (port, PG) `pgi`; false on an accounting mismatch.
    #[inline]
    pub(crate) fn release_lossy(&mut self, pgi: usize, c: u32) -> bool {
        let st = &mut self.pgs[pgi];
        let ok = st.lossy >= c && self.occ.lossy >= u64::from(c);
        st.lossy = st.lossy.saturating_sub(c);
        self.occ.lossy = self.occ.lossy.saturating_sub(u64::from(c));
        ok
    }

    /// Lossy dynamic threshold of the egress side right now, cells.
    pub fn egress_threshold_cells(&self) -> u64 {
        (self.lossy_pool.saturating_sub(self.occ.lossy) * self.egress_alpha_q16) >> 16
    }
}

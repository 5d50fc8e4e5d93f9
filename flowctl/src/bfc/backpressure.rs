//! Backpressure (BFC §3.3.2): which packets count toward their upstream queue's pause counter.
//!
//! A packet enqueued into a queue holding more than `Th` is *marked*; its mark is taken off
//! the counter of ⟨ingress port, upstreamQ⟩ when it leaves ([`Resume::Drained`]), or as soon
//! as its queue has drained below `Th` ([`Resume::BelowTh`]: a per-queue epoch tells the
//! marked packets still queued that they no longer count). `Th = HRTT · μ / N_active` per
//! egress port, precomputed as a table indexed by `N_active` (the paper's match-action
//! table). ⟨ingress, egress⟩ pairs in the deadlock table (App. B) are never marked.
//!
//! The counters themselves live in [`BfcShared`](super::BfcShared) (shared by the pipes);
//! turning their 0→1 and 1→0 edges into frames is [`signals`](super::signals)'.

use super::{BfcConfig, BfcError, BfcPort, Resume, UPSTREAM_QUEUES};

/// `upstreamQ` value meaning "the packet carried none" (it came from a device without BFC).
pub const NO_UPQ: u8 = 0xFF;

/// `Th` in bytes for `hrtt_ps` at `rate_bps` shared by `n` queues (saturating: a threshold
/// beyond `u64` bytes is no threshold at all, not a wrapped small one).
pub fn threshold_bytes(hrtt_ps: u64, rate_bps: u64, n: u32) -> u64 {
    let bdp = u128::from(hrtt_ps) * u128::from(rate_bps) / 8 / 1_000_000_000_000;
    u64::try_from(bdp / u128::from(n.max(1))).unwrap_or(u64::MAX)
}

/// The default one-hop RTT of a port: propagation both ways plus the wire time of one
/// full-size frame each way (the data packet in flight when a signal is sent, and the first
/// packet after a resume), 24 B of FCS, preamble and IFG included.
pub fn default_hrtt_ps(p: &BfcPort) -> u64 {
    let bits = 2 * (u128::from(p.mtu_frame) + 24) * 8;
    let ser = if p.rate_bps == 0 {
        0
    } else {
        (bits * 1_000_000_000_000).div_ceil(u128::from(p.rate_bps)) as u64
    };
    2 * p.delay_ps + ser
}

/// Marks one egress port holds.
#[derive(Debug, Clone)]
struct PortMarks {
    queues: usize,
    /// `th[n]` = threshold with n active queues (bytes), n in 0..=queues (0 treated as 1).
    th: Vec<u64>,
    /// [`Resume::BelowTh`], per queue: the mark epoch (never 0) and the marks of the epoch
    /// still counted, as (ingress port, upstreamQ, packets).
    epoch: Vec<u16>,
    held: Vec<Vec<(u16, u8, u32)>>,
}

/// Thresholds, the deadlock table and the marks of one pipe.
#[derive(Debug, Clone)]
pub(super) struct Backpressure {
    resume: Resume,
    ports: Vec<PortMarks>,
    /// `elide[in * n + out]`: no backpressure for packets from `in` to `out`.
    elide: Vec<bool>,
}

impl Backpressure {
    pub(super) fn new(
        cfg: &BfcConfig,
        ports: &[BfcPort],
        hrtt_ps: u64,
        elide: &[(usize, usize)],
    ) -> Result<Self, BfcError> {
        let n = ports.len();
        let marks = ports
            .iter()
            .map(|p| PortMarks {
                queues: p.queues,
                th: (0..=p.queues as u32)
                    .map(|k| {
                        cfg.th_bytes
                            .unwrap_or_else(|| threshold_bytes(hrtt_ps, p.rate_bps, k))
                    })
                    .collect(),
                epoch: vec![1; p.queues],
                held: vec![Vec::new(); p.queues],
            })
            .collect();
        let mut el = vec![false; n * n];
        for &(a, b) in elide {
            if a >= n || b >= n {
                return Err(BfcError::ElidePort(a.max(b), n));
            }
            el[a * n + b] = true;
        }
        Ok(Backpressure {
            resume: cfg.resume,
            ports: marks,
            elide: el,
        })
    }

    /// `Th` of `egress` with `n_active` active queues (bytes).
    #[inline]
    pub(super) fn threshold(&self, egress: usize, n_active: u32) -> u64 {
        let p = &self.ports[egress];
        p.th[(n_active.max(1) as usize).min(p.queues)]
    }

    /// The mark of a packet from `in_port` carrying `upq` entering `queue` of `egress`, which
    /// holds `queue_bytes` with `n_active` (≥ 1) active queues: 0 when it does not count
    /// toward a pause counter, else the value to hand back to [`counts_out`](Self::counts_out).
    #[inline]
    pub(super) fn mark(
        &mut self,
        in_port: usize,
        upq: u8,
        egress: usize,
        queue: usize,
        queue_bytes: u64,
        n_active: u32,
    ) -> u16 {
        if upq == NO_UPQ || usize::from(upq) >= UPSTREAM_QUEUES {
            return 0;
        }
        let np = self.ports.len();
        if self.elide[in_port * np + egress] || queue_bytes <= self.threshold(egress, n_active) {
            return 0;
        }
        match self.resume {
            Resume::Drained => 1,
            Resume::BelowTh => {
                let p = &mut self.ports[egress];
                let held = &mut p.held[queue];
                let key = (in_port as u16, upq);
                match held.iter_mut().find(|h| (h.0, h.1) == key) {
                    Some(h) => h.2 += 1,
                    None => held.push((key.0, key.1, 1)),
                }
                p.epoch[queue]
            }
        }
    }

    /// Whether a departing packet's `mark` still counts toward ⟨in_port, upq⟩'s counter (it
    /// was marked and, under [`Resume::BelowTh`], its queue's epoch has not moved on); if so
    /// it is no longer held.
    #[inline]
    pub(super) fn counts_out(
        &mut self,
        egress: usize,
        queue: usize,
        mark: u16,
        in_port: usize,
        upq: u8,
    ) -> bool {
        if mark == 0 || upq == NO_UPQ {
            return false;
        }
        if self.resume == Resume::Drained {
            return true;
        }
        let Some(p) = self.ports.get_mut(egress) else {
            return false;
        };
        if p.epoch.get(queue) != Some(&mark) {
            return false;
        }
        let held = &mut p.held[queue];
        let Some(i) = held
            .iter()
            .position(|h| (h.0, h.1) == (in_port as u16, upq))
        else {
            return false;
        };
        held[i].2 -= 1;
        if held[i].2 == 0 {
            held.swap_remove(i);
        }
        true
    }

    /// [`Resume::BelowTh`]: after a departure from `queue` of `egress`, which now holds
    /// `queue_bytes` with `n_active` active queues: once it is below `Th`, a new epoch
    /// starts and every (ingress port, upstreamQ, marks) it held goes to `release`.
    #[inline]
    pub(super) fn release_below_th(
        &mut self,
        egress: usize,
        queue: usize,
        queue_bytes: u64,
        n_active: u32,
        mut release: impl FnMut(usize, u8, u32),
    ) {
        if self.resume != Resume::BelowTh {
            return;
        }
        let th = self.threshold(egress, n_active);
        let Some(p) = self.ports.get_mut(egress) else {
            return;
        };
        if p.held.get(queue).is_none_or(|h| h.is_empty()) || queue_bytes >= th {
            return;
        }
        p.epoch[queue] = p.epoch[queue].wrapping_add(1).max(1);
        // Drained in place, so the row keeps its allocation.
        for (in_port, upq, n) in p.held[queue].drain(..) {
            release(usize::from(in_port), upq, n);
        }
    }
}

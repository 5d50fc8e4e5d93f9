//! Buffer admission behind one call: either a plain per-queue tail-drop limit, or the shared
//! buffer MMU from the `mmu` crate. The pipeline calls `admit` when a packet is enqueued and
//! `release` when it leaves the queue (or is flushed), whichever manager is configured.

use crate::config::PortSpec;
use crate::stats::DropReason;

/// What was charged for a packet, to be given back when it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufTag {
    /// Not accounted (control frames).
    None,
    /// Counted against the queue's byte limit only.
    Limit,
    /// Admitted by the MMU.
    Mmu(mmu::Ticket),
}

/// The configured buffer manager of one pipeline.
#[derive(Debug)]
pub enum Buffer {
    /// Tail drop at each port's `queue_limit`.
    Limit(Vec<u64>),
    /// Shared-buffer MMU.
    Mmu(Box<mmu::Mmu>),
}

impl Buffer {
    /// Builds the manager for `ports`; `share` divides the MMU's buffer among pipelines.
    /// `auto` (`response_ps = "auto"`, not yet measured): the configured response term is
    /// only a start value, halved (down to 1 µs) until the headroom fits this pipe's buffer.
    pub fn new(
        cfg: Option<&mmu::MmuConfig>,
        ports: &[PortSpec],
        share: u64,
        auto: bool,
    ) -> Result<Self, mmu::MmuError> {
        match cfg {
            None => Ok(Buffer::Limit(ports.iter().map(|p| p.queue_limit).collect())),
            Some(c) => {
                let mut c = c.clone();
                c.buffer_bytes /= share.max(1);
                let params: Vec<mmu::PortParams> = ports
                    .iter()
                    .map(|p| mmu::PortParams {
                        rate_bps: p.rate_bps,
                        delay_ps: p.delay_ps,
                        mtu: p.mtu,
                        queues: p.queues,
                    })
                    .collect();
                loop {
                    match mmu::Mmu::new(&c, &params) {
                        Ok(m) => return Ok(Buffer::Mmu(Box::new(m))),
                        Err(_) if auto && c.response_ps > 1_000_000 => c.response_ps /= 2,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Admits or refuses a packet (`r`: what the MMU is told; `lossless` is ignored by the
    /// tail-drop limit); on admission, writes what was charged to `tag` and says whether to
    /// mark it CE. `queue_bytes`, the bytes already in the destination queue, is asked only by
    /// the tail-drop limit. (The tag is written in place, not returned beside the mark:
    /// returned, the pair came back packed in a register, went to the stack byte-wise and was
    /// reloaded in wider pieces, a store-forwarding stall on every packet.)
    #[inline(always)]
    pub fn admit(
        &mut self,
        r: &mmu::PacketInfo,
        queue_bytes: impl FnOnce() -> u64,
        tag: &mut BufTag,
        now: u64,
    ) -> Result<bool, DropReason> {
        match self {
            Buffer::Limit(l) => {
                if queue_bytes() + u64::from(r.bytes) > l[r.out_port] {
                    Err(DropReason::QueueFull)
                } else {
                    *tag = BufTag::Limit;
                    Ok(false)
                }
            }
            Buffer::Mmu(m) => match m.admit(r, now) {
                mmu::Admission::Admitted { ticket, mark_ecn } => {
                    *tag = BufTag::Mmu(ticket);
                    Ok(mark_ecn)
                }
                mmu::Admission::Dropped(d) => Err(match d {
                    mmu::DropReason::EgressThreshold | mmu::DropReason::LossyPoolFull => {
                        DropReason::QueueFull
                    }
                    mmu::DropReason::HeadroomExhausted
                    | mmu::DropReason::InsuranceExhausted
                    | mmu::DropReason::LosslessPoolFull => DropReason::LosslessOverflow,
                    mmu::DropReason::Invalid => DropReason::IngressBuffer,
                }),
            },
        }
    }

    /// Gives back what `tag` charged for a packet of `bytes` (its length at admission).
    #[inline]
    pub fn release(&mut self, tag: BufTag, bytes: u32, now: u64) {
        if let (Buffer::Mmu(m), BufTag::Mmu(t)) = (self, tag) {
            m.release(t, bytes, now);
        }
    }

    /// Whether the MMU has flow-control events waiting for `poll_events`.
    #[inline]
    pub fn has_events(&self) -> bool {
        matches!(self, Buffer::Mmu(m) if m.has_events())
    }

    /// Flow-control events raised since the last call.
    pub fn poll_events(&mut self, out: &mut Vec<mmu::FcEvent>) {
        if let Buffer::Mmu(m) = self {
            m.poll_events(out);
        }
    }

    /// MMU statistics as JSON, if an MMU is configured.
    pub fn stats_json(&self) -> Option<serde_json::Value> {
        match self {
            Buffer::Mmu(m) => serde_json::to_value(m.stats()).ok(),
            Buffer::Limit(_) => None,
        }
    }

    /// Re-sizes the MMU's headroom for a measured response term, if nothing is buffered
    /// ([`mmu::Mmu::retune_response`]); `Ok(false)`: busy (or no MMU), try again later.
    pub fn retune_response(&mut self, response_ps: u64) -> Result<bool, mmu::MmuError> {
        match self {
            Buffer::Mmu(m) => m.retune_response(response_ps),
            Buffer::Limit(_) => Ok(false),
        }
    }

    pub fn mmu(&self) -> Option<&mmu::Mmu> {
        match self {
            Buffer::Mmu(m) => Some(m),
            Buffer::Limit(_) => None,
        }
    }
}

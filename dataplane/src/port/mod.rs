//! Ports: where frames enter and leave a switch.
//!
//! [`PortIo`] is all the pipeline's runtime needs from a port: bursts of received frames,
//! transmission, completions and buffers to receive into. The AF_XDP implementation
//! ([`xsk`]) and the BPF loader ([`bpf`]) are the only places in Xoff with `unsafe` code; the
//! in-memory [`MemPort`] serves the virtual-time fabric and tests. No AF_XDP type is visible
//! outside this module.

pub mod bpf;
pub mod shm;
pub mod sys;
pub mod xsk;

use crate::frame::FrameId;
use crate::stats::XdpSnapshot;
use std::collections::VecDeque;

/// Asks the CPU to bring the cache line at the start of `data` (a frame's headers) into the
/// cache ahead of use. A hint only: it changes no state and no result. The virtual-time fabric
/// calls it for the frame its next event delivers, which has usually waited in a queue long
/// enough to leave the cache (`crate::fabric`).
#[inline(always)]
pub fn prefetch(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has; a prefetch reads nothing
    // the program sees and never faults, whatever the address (here a live slice's).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            data.as_ptr().cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// A port as the worker loop sees it.
pub trait PortIo {
    /// Appends up to `max` received frames (frame, length) to `out`; returns how many.
    fn rx_burst(&mut self, out: &mut Vec<(FrameId, u32)>, max: usize) -> usize;
    /// Kernel arrival times (CLOCK_MONOTONIC ns; 0 = not stamped) of the frames the last
    /// `rx_burst` returned, in order; empty when the port does not stamp.
    fn rx_stamps(&self) -> &[u64] {
        &[]
    }
    /// Offers frames for transmission, front first; returns how many were accepted.
    fn tx_burst(&mut self, frames: &[(FrameId, u32)]) -> usize;
    /// Appends frames whose transmission completed (now free) to `out`.
    fn completions(&mut self, out: &mut Vec<FrameId>);
    /// Hands the port free frames to receive into, taking them from the back of `free`.
    fn refill(&mut self, free: &mut Vec<FrameId>);
    /// Kernel ring statistics, if the port has any.
    fn ring_stats(&mut self) -> Option<XdpSnapshot> {
        None
    }
    /// A file descriptor that polls readable when frames arrive, if any.
    fn poll_fd(&self) -> Option<i32> {
        None
    }
    /// Whether the underlying device still exists.
    fn alive(&mut self) -> bool {
        true
    }
}

/// An in-memory port: frames put in `rx` are received; transmitted frames land in `tx`.
/// Transmission completes at once.
#[derive(Debug, Default)]
pub struct MemPort {
    pub rx: VecDeque<(FrameId, u32)>,
    pub tx: Vec<(FrameId, u32)>,
    /// Completed transmissions not yet collected.
    done: Vec<FrameId>,
    /// Caps accepted transmissions per burst (0 = unlimited), to exercise back-pressure.
    pub tx_limit: usize,
}

impl PortIo for MemPort {
    fn rx_burst(&mut self, out: &mut Vec<(FrameId, u32)>, max: usize) -> usize {
        let n = max.min(self.rx.len());
        out.extend(self.rx.drain(..n));
        n
    }

    fn tx_burst(&mut self, frames: &[(FrameId, u32)]) -> usize {
        let n = if self.tx_limit == 0 {
            frames.len()
        } else {
            frames.len().min(self.tx_limit)
        };
        self.tx.extend_from_slice(&frames[..n]);
        n
    }

    fn completions(&mut self, out: &mut Vec<FrameId>) {
        out.append(&mut self.done);
    }

    fn refill(&mut self, _free: &mut Vec<FrameId>) {}
}

impl MemPort {
    /// Marks everything in `tx` as sent: the frames come back through `completions`.
    pub fn complete_all(&mut self) -> Vec<(FrameId, u32)> {
        let sent: Vec<_> = self.tx.drain(..).collect();
        self.done.extend(sent.iter().map(|&(f, _)| f));
        sent
    }
}

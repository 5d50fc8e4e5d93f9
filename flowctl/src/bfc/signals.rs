//! Signals (BFC §3.3.2): the PAUSE and RESUME a pause counter's 0→1 and 1→0 edges send to the
//! ingress port's peer, the periodic pause-bitmap refresh that repairs lost ones, and the
//! receive side that turns a peer's signals into AFC commands on the egress queues.
//!
//! Frames are returned as [`SignalRepr`]s with the port to send them on; the caller emits
//! them ([`crate::wire::signal`]).

use super::{BfcPort, BfcShared, UPSTREAM_QUEUES};
use crate::afc::{Afc, AfcCmd};
use crate::wire::signal::{Signal, SignalRepr, DST_SIGNAL};

/// Addresses, refresh timer and refresh bookkeeping of one pipe.
#[derive(Debug, Clone)]
pub(super) struct Signals {
    /// Per port: (source MAC, destination MAC) of signals sent on it.
    addrs: Vec<([u8; 6], [u8; 6])>,
    refresh_ps: u64,
    /// Whether this pipe sends the periodic refresh (one pipe per switch does).
    refresher: bool,
    next_refresh: u64,
    last_bitmap: Vec<u128>,
    /// Ports whose peers speak BFC (refreshes go there).
    signal_ports: Vec<bool>,
}

impl Signals {
    pub(super) fn new(
        ports: &[BfcPort],
        mut signal_ports: Vec<bool>,
        refresher: bool,
        refresh_ps: u64,
    ) -> Self {
        let n = ports.len();
        signal_ports.resize(n, false);
        Signals {
            addrs: ports
                .iter()
                .map(|p| (p.mac, p.peer_mac.unwrap_or(DST_SIGNAL)))
                .collect(),
            refresh_ps,
            refresher,
            next_refresh: u64::MAX,
            last_bitmap: vec![0; n],
            signal_ports,
        }
    }

    fn frame(&self, port: usize, signal: Signal) -> SignalRepr {
        let (src, dst) = self.addrs[port];
        SignalRepr {
            dst_addr: dst,
            src_addr: src,
            signal,
        }
    }

    /// The PAUSE(upq) for `in_port` whose counter just went 0→1; counts it and arms the
    /// refresh.
    pub(super) fn pause(&self, shared: &BfcShared, in_port: usize, upq: u8) -> (usize, SignalRepr) {
        shared.ports[in_port].pauses_sent[usize::from(upq)].add(1);
        // In the shared state, not this pipe's: with several workers the pipe that paused is
        // often not the refresher, whose timer then never armed (chain-bfc with `--workers 2`:
        // 0-16 refreshes received by s1 in a run against 149 with one worker), so a lost or
        // reordered RESUME was never repaired.
        if self.refresh_ps > 0 {
            shared.note_pause(in_port);
        }
        (in_port, self.frame(in_port, Signal::Pause(upq)))
    }

    /// Takes `n` marks off ⟨in_port, upq⟩'s pause counter; the RESUME when it reached 0.
    pub(super) fn uncount(
        &self,
        shared: &BfcShared,
        in_port: usize,
        upq: u8,
        n: u32,
    ) -> Option<(usize, SignalRepr)> {
        shared.decr(in_port, upq, n).then(|| {
            shared.ports[in_port].resumes_sent[usize::from(upq)].add(1);
            (in_port, self.frame(in_port, Signal::Resume(upq)))
        })
    }

    /// When [`refresh`](Self::refresh) next has work (`now` anchors a newly armed timer).
    pub(super) fn refresh_due(&mut self, shared: &BfcShared, now: u64) -> Option<u64> {
        self.adopt(shared);
        if self.next_refresh == 0 {
            self.next_refresh = now + self.refresh_ps;
        }
        (self.next_refresh != u64::MAX).then_some(self.next_refresh)
    }

    /// The pending refresh deadline, if any (0: armed, not yet anchored).
    pub(super) fn pending_refresh(&self, shared: &BfcShared) -> Option<u64> {
        if self.next_refresh != u64::MAX {
            Some(self.next_refresh)
        } else {
            (self.refresher && shared.refresh_wanted()).then_some(0)
        }
    }

    /// The refresher arms its idle timer when any pipe sent a PAUSE (anchored to `now` by
    /// the next `refresh_due`/`refresh`).
    fn adopt(&mut self, shared: &BfcShared) {
        if self.refresher && self.next_refresh == u64::MAX && shared.take_refresh_wanted() {
            self.next_refresh = 0;
        }
    }

    /// The periodic pause-bitmap refresh: for every BFC port whose bitmap is non-zero, was
    /// at the last refresh, or that was sent a PAUSE since (so a lost RESUME is repaired by
    /// one all-clear bitmap), a BITMAP signal.
    pub(super) fn refresh(
        &mut self,
        shared: &BfcShared,
        now: u64,
        out: &mut Vec<(usize, SignalRepr)>,
    ) {
        if self.refresh_due(shared, now).is_none_or(|t| now < t) {
            return;
        }
        // Cleared before the ports are read: a PAUSE sent meanwhile asks again.
        shared.take_refresh_wanted();
        let mut any = false;
        for p in 0..self.addrs.len() {
            if !self.signal_ports[p] && !shared.is_learned_peer(p) {
                continue;
            }
            let bits = shared.pause_bitmap(p);
            let touched = shared.take_touched(p);
            if bits != 0 || self.last_bitmap[p] != 0 || touched {
                let count = UPSTREAM_QUEUES as u8;
                out.push((p, self.frame(p, Signal::Bitmap { count, bits })));
                shared.ports[p].refresh_sent.add(1);
            }
            any |= bits != 0;
            self.last_bitmap[p] = bits;
        }
        self.next_refresh = if any { now + self.refresh_ps } else { u64::MAX };
    }
}

/// Applies a signal received on `port` to its egress queues through the AFC channel
/// (untimed pause, resume; a bitmap pauses its set bits and resumes its clear ones), and
/// counts it. Returns the number of AFC commands applied.
pub(super) fn apply(
    shared: &BfcShared,
    port: usize,
    signal: &Signal,
    afc: &Afc,
    now: u64,
) -> usize {
    let Some(st) = shared.ports.get(port) else {
        return 0;
    };
    let Some(r) = afc.regs().get(port) else {
        return 0;
    };
    let nq = r.queues();
    let mut n = 0;
    let mut cmd = |pause: bool, q: usize| {
        let c = if pause {
            AfcCmd::pause(port as u16, q as u8, 0)
        } else {
            AfcCmd::resume(port as u16, q as u8)
        };
        if let Ok(c) = c {
            if afc.apply(c, now, 1).is_ok() {
                n += 1;
            }
        }
    };
    match *signal {
        Signal::Pause(q) => {
            st.pauses_received[usize::from(q) % UPSTREAM_QUEUES].add(1);
            cmd(true, usize::from(q));
        }
        Signal::Resume(q) => {
            st.resumes_received[usize::from(q) % UPSTREAM_QUEUES].add(1);
            cmd(false, usize::from(q));
        }
        Signal::Bitmap { count, bits } => {
            st.refresh_received.add(1);
            for q in 0..usize::from(count).min(nq) {
                let want = bits & (1 << q) != 0;
                if want != r.is_paused(q, now) {
                    cmd(want, q);
                }
            }
        }
        // Aquarius's per-flow signals are not BFC's.
        Signal::FlowPause { .. } | Signal::FlowResume { .. } => {}
    }
    n
}

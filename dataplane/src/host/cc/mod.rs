//! End-host congestion control: one interface, one implementation per algorithm, shared by
//! both drivers of [`super::HostStack`] (the virtual-time fabric and `xoff host` on real
//! frames). Each flow holds a [`FlowCc`]; the stack asks it for the flow's in-flight cap
//! ([`FlowCc::window_bytes`]) and sending rate ([`FlowCc::rate_bps`], the per-flow rate
//! limiter), tells it what each ACK carried ([`AckEvent`]), what was sent, and runs its
//! timers ([`FlowCc::on_tick`], [`FlowCc::next_timer`]). Everything is pure: the time is
//! passed in (ps).
//!
//! * `none`: no cap at all, line rate (what a NIC without congestion control does);
//! * `window`: a fixed per-flow in-flight cap ([`super::StackConfig::window_bytes`], 1 BDP by
//!   default), the stack's behaviour before congestion control existed and still its default;
//! * `dcqcn`: [`dcqcn`] (Zhu et al., SIGCOMM'15), rate-based, driven by CNPs;
//! * `dctcp`: [`dctcp`] (Alizadeh et al., SIGCOMM'10), window-based, driven by ECN echoes;
//! * `hpcc`: [`hpcc`] (Li et al., SIGCOMM'19), window- and rate-based, driven by the INT
//!   records switches append to data packets and receivers echo in ACKs.
//!
//! Receivers do not need to know the sender's algorithm: every ACK echoes the CE mark of the
//! packet it acknowledges (ECE, what DCTCP reads), carries a CNP when the DCQCN notification
//! point would send one (at most one per flow per 50 µs, [`dcqcn::CNP_INTERVAL_PS`]; HPCC's
//! ns-3 also puts the CNP into the ACK, `rdma-hw.cc` `ReceiveUdp`), and echoes the INT
//! records the data packet collected.

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;

use std::fmt;
use std::str::FromStr;

/// Which congestion control a host's flows run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CcKind {
    /// No in-flight cap, line rate.
    None,
    /// The fixed per-flow window (today's default).
    #[default]
    Window,
    Dcqcn,
    Dctcp,
    Hpcc,
}

impl CcKind {
    pub const ALL: [CcKind; 5] = [
        CcKind::None,
        CcKind::Window,
        CcKind::Dcqcn,
        CcKind::Dctcp,
        CcKind::Hpcc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CcKind::None => "none",
            CcKind::Window => "window",
            CcKind::Dcqcn => "dcqcn",
            CcKind::Dctcp => "dctcp",
            CcKind::Hpcc => "hpcc",
        }
    }

    /// Whether data packets must be ECN-capable (ECT(0)) for the switches to mark them.
    pub fn uses_ecn(self) -> bool {
        matches!(self, CcKind::Dcqcn | CcKind::Dctcp)
    }

    /// Whether data packets need the switches' INT records.
    pub fn uses_int(self) -> bool {
        self == CcKind::Hpcc
    }
}

impl fmt::Display for CcKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown congestion-control name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control `{0}` (use none, window, dcqcn, dctcp or hpcc)")]
pub struct UnknownCc(pub String);

impl FromStr for CcKind {
    type Err = UnknownCc;
    fn from_str(s: &str) -> Result<Self, UnknownCc> {
        CcKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownCc(s.to_string()))
    }
}

pub use crate::wire::int::IntHop;

/// What one ACK tells the sender.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckEvent<'a> {
    pub now: u64,
    /// Bytes newly acknowledged (0 for a duplicate).
    pub acked_bytes: u64,
    /// Cumulative bytes acknowledged (the ACK's sequence in bytes).
    pub ack_seq_bytes: u64,
    /// Bytes sent so far (the sender's `snd_nxt` in bytes).
    pub snd_nxt_bytes: u64,
    /// The acknowledged packet arrived CE-marked (DCTCP's ECE echo).
    pub ece: bool,
    /// The receiver sent a congestion notification (DCQCN CNP).
    pub cnp: bool,
    /// The INT records the acknowledged packet collected, first hop first.
    pub int: &'a [IntHop],
}

/// Per-flow congestion-control state.
#[derive(Debug, Clone)]
pub enum FlowCc {
    None,
    Window,
    Dcqcn(dcqcn::Dcqcn),
    Dctcp(dctcp::Dctcp),
    Hpcc(hpcc::Hpcc),
}

impl FlowCc {
    /// The state of a new flow of a host whose NIC runs at `line_bps`, with base RTT
    /// `base_rtt_ps`, segment size `mss` and configured window `window_bytes`, started at
    /// `now`; DCQCN's timers run `dcqcn_time_scale` times slower than the paper's
    /// ([`dcqcn::Params::time_scaled`]).
    pub fn new(
        kind: CcKind,
        now: u64,
        line_bps: u64,
        base_rtt_ps: u64,
        mss: u32,
        window_bytes: u64,
        dcqcn_time_scale: u32,
    ) -> Self {
        match kind {
            CcKind::None => FlowCc::None,
            CcKind::Window => FlowCc::Window,
            CcKind::Dcqcn => FlowCc::Dcqcn(dcqcn::Dcqcn::new(
                dcqcn::Params::for_rate(line_bps).time_scaled(dcqcn_time_scale),
            )),
            CcKind::Dctcp => FlowCc::Dctcp(dctcp::Dctcp::new(window_bytes, mss)),
            CcKind::Hpcc => FlowCc::Hpcc(hpcc::Hpcc::new(
                hpcc::Params::for_rate(line_bps, base_rtt_ps),
                now,
            )),
        }
    }

    /// The flow's cap on bytes in flight (`None`: none); `fixed` is the configured window.
    pub fn window_bytes(&self, fixed: u64) -> Option<u64> {
        match self {
            FlowCc::None | FlowCc::Dcqcn(_) => None,
            FlowCc::Window => Some(fixed),
            FlowCc::Dctcp(d) => Some(d.cwnd_bytes()),
            FlowCc::Hpcc(h) => Some(h.window_bytes()),
        }
    }

    /// The flow's sending rate, bit/s (`None`: as fast as the NIC).
    pub fn rate_bps(&self) -> Option<u64> {
        match self {
            FlowCc::Dcqcn(d) => Some(d.rate_bps()),
            FlowCc::Hpcc(h) => Some(h.rate_bps()),
            _ => None,
        }
    }

    pub fn on_ack(&mut self, ev: &AckEvent<'_>) {
        match self {
            FlowCc::Dcqcn(d) if ev.cnp => d.on_cnp(ev.now),
            FlowCc::Dctcp(d) => d.on_ack(ev),
            FlowCc::Hpcc(h) => h.on_ack(ev),
            _ => {}
        }
    }

    /// `bytes` of data left at `now` (DCQCN's byte counter).
    pub fn on_send(&mut self, now: u64, bytes: u64) {
        if let FlowCc::Dcqcn(d) = self {
            d.on_send(now, bytes);
        }
    }

    /// Runs the timers due at `now`.
    pub fn on_tick(&mut self, now: u64) {
        if let FlowCc::Dcqcn(d) = self {
            d.on_tick(now);
        }
    }

    /// The next timer deadline, if any runs.
    pub fn next_timer(&self) -> Option<u64> {
        match self {
            FlowCc::Dcqcn(d) => d.next_timer(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_default_is_window() {
        for k in CcKind::ALL {
            assert_eq!(k.as_str().parse::<CcKind>(), Ok(k));
        }
        assert_eq!(CcKind::default(), CcKind::Window);
        assert!("reno".parse::<CcKind>().is_err());
        assert!(CcKind::Dcqcn.uses_ecn() && CcKind::Dctcp.uses_ecn());
        assert!(!CcKind::Window.uses_ecn() && !CcKind::Hpcc.uses_ecn());
    }

    #[test]
    fn none_and_window_caps() {
        let n = FlowCc::new(CcKind::None, 0, 100, 10, 1000, 5000, 1);
        let w = FlowCc::new(CcKind::Window, 0, 100, 10, 1000, 5000, 1);
        assert_eq!((n.window_bytes(5000), n.rate_bps()), (None, None));
        assert_eq!((w.window_bytes(5000), w.rate_bps()), (Some(5000), None));
    }
}

//! The packet path of a switch as named stages, one file per part (VPP-style):
//!
//! - [`ingress`]: `ingress → parse → control_in → classify → forward → dispatch`
//! - [`admit`]: `select_queue → admit → enqueue_admitted`
//! - [`egress`]: `schedule → depart → shape → transmit` (shape: the emulated line rate and
//!   propagation delay of `crate::link`)
//! - [`control`]: control frames out (one emit loop for every scheme), timers, flushing.
//!
//! `Switch::receive` and `Switch::service` (`crate::switch`) read as the list of these calls.
//! Stages call the hooks of `crate::scheme::Schemes` and never name a scheme. Everything that
//! leaves the switch goes into one [`Outputs`] sink.

pub mod admit;
pub mod control;
pub mod egress;
pub mod ingress;

use crate::frame::{FrameId, Pkt};
use crate::scheme::PortView;
use crate::switch::Egress;
use flowctl::Afc;

/// A packet or control frame bound for a port owned by another pipe.
#[derive(Debug, Clone, Copy)]
pub struct Handoff {
    pub port: u16,
    pub pkt: Pkt,
    /// A control frame for the port's control queue rather than a data packet.
    pub ctrl: bool,
}

/// Everything that leaves a pipe: frames for the wire, hand-offs to other pipes, and (when
/// tracking) the ports that got work and need service.
#[derive(Debug, Default)]
pub struct Outputs {
    /// Frames whose wire time has elapsed (`Switch::service` of one port appends that
    /// port's), as (frame, length).
    pub tx: Vec<(FrameId, u32)>,
    /// Data packets and control frames for ports other pipes own.
    pub handoff: Vec<Handoff>,
    /// Ports that got packets or control frames queued (only with [`Outputs::tracking`]).
    pub touched: Vec<u16>,
    track: bool,
}

impl Outputs {
    /// A sink that does not record touched ports (a polling caller services every port).
    pub fn new() -> Self {
        Outputs::default()
    }

    /// A sink that records the ports that got work, for an event-driven caller.
    pub fn tracking() -> Self {
        Outputs {
            track: true,
            ..Outputs::default()
        }
    }

    #[inline]
    pub(crate) fn touch(&mut self, port: u16) {
        if self.track {
            self.touched.push(port);
        }
    }
}

/// What the schemes see of `port` (owned by the pipe whose `egress` this is).
#[inline]
pub(crate) fn view<'a>(egress: &[Option<Egress>], afc: &'a Afc, port: usize) -> PortView<'a> {
    PortView {
        port,
        nonempty: egress[port].as_ref().map_or(0, |e| e.qs.nonempty()),
        pause: afc.port(port),
    }
}

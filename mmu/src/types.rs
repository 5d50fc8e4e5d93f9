//! Plain data exchanged with the dataplane: port parameters, packet metadata, tickets,
//! admission verdicts and flow-control events.

use serde::{Deserialize, Serialize};

/// Number of priority groups per port (IEEE 802.1Qbb has 8 priorities; PG = priority for now).
pub const MAX_PGS: usize = 8;

/// Largest number of egress queues per port the MMU accepts.
pub const MAX_QUEUES: usize = 64;

/// Static parameters of one switch port, used to size headroom (DSH Eq. 1) and to scale ECN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortParams {
    /// Line rate of the link `C`, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay of the link `D_prop`, picoseconds.
    pub delay_ps: u64,
    /// Largest frame on the link `L_MTU`, bytes.
    pub mtu: u32,
    /// Number of egress queues on this port.
    pub queues: usize,
}

/// Metadata of one packet, as the dataplane knows it at admission time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Ingress port (ingress accounting, PFC/DSH state).
    pub in_port: usize,
    /// Ingress priority group.
    pub pg: usize,
    /// Egress port (egress accounting, ECN).
    pub out_port: usize,
    /// Egress queue on `out_port`.
    pub queue: usize,
    /// Frame length in bytes.
    pub bytes: u32,
    /// The dataplane classified the packet as lossless. It is accounted as lossless only if
    /// `pg` is also configured lossless (otherwise there is no headroom for it).
    pub lossless: bool,
    /// ECT(0)/ECT(1): the packet may be CE-marked instead of dropped or queued silently.
    pub ecn_capable: bool,
}

/// Buffer segment a packet was charged to at ingress (DSH §II-B, Fig. 2 and Fig. 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segment {
    /// Per-(port, PG) private buffer `φ`.
    Private,
    /// Shared buffer `B_s` (for DSH: shared footroom and shared headroom together).
    Shared,
    /// Static per-(port, PG) headroom (SIH and HPCC modes).
    Headroom,
    /// DSH per-port insurance headroom (Eq. 4).
    Insurance,
    /// Lossy pool (egress-admitted, may be tail-dropped).
    Lossy,
}

/// Receipt for an admitted packet: what to give back on release, and where (the egress
/// queue and the ingress (port, PG) it was charged to, as indices into the MMU's tables), so
/// that [`crate::Mmu::release`] neither validates nor converts the packet's metadata again.
/// Twelve bytes, `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Index of the egress queue in `Mmu::queues`.
    pub(crate) queue: u32,
    /// Index of the ingress (port, PG) in `Mmu::pgs`: `port · MAX_PGS + pg`.
    pub(crate) pg: u32,
    pub(crate) cells: u16,
    pub(crate) seg: Segment,
}

impl Ticket {
    /// Cells the packet occupies.
    pub fn cells(&self) -> u32 {
        u32::from(self.cells)
    }
    /// Ingress segment charged at admission.
    pub fn segment(&self) -> Segment {
        self.seg
    }
}

/// Verdict for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Enqueue the packet; keep the ticket for [`crate::Mmu::release`]. Set CE if `mark_ecn`.
    Admitted {
        /// Give back on release.
        ticket: Ticket,
        /// RED/DCQCN decided to mark this (ECN-capable) packet.
        mark_ecn: bool,
    },
    /// Drop the packet.
    Dropped(DropReason),
}

/// Why a packet was dropped. Lossless reasons should stay at zero when headroom is sized right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Port, PG or queue out of range, zero length, or longer than a ticket can describe.
    Invalid,
    /// Lossless: the (port, PG) static headroom is full (SIH case ④, HPCC "Headroom full").
    HeadroomExhausted,
    /// Lossless: the DSH insurance headroom of the ingress port is full.
    InsuranceExhausted,
    /// Lossless: the physical lossless pool is full (only reachable with overbooked presets).
    LosslessPoolFull,
    /// Lossy: the egress queue is above its dynamic threshold.
    EgressThreshold,
    /// Lossy: the lossy pool is full.
    LossyPoolFull,
}

/// Flow-control event for the caller to signal upstream (PFC frame, Xoff signal, ...).
/// The MMU only says what changed; `flowctl`/`dataplane` decide how to signal it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FcEvent {
    /// Pause priority group `pg` of the upstream of `port` (PFC XOFF / DSH QOFF).
    Xoff { port: usize, pg: usize },
    /// Resume priority group `pg` of the upstream of `port`.
    Xon { port: usize, pg: usize },
    /// DSH port-level pause: pause every class of the upstream of `port` (POFF).
    PortXoff { port: usize },
    /// DSH port-level resume (PON).
    PortXon { port: usize },
}

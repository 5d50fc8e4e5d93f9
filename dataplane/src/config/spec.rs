//! Resolved settings of one switch (`SwitchSpec`): what the pipeline is built from, with
//! defaults applied and names turned into port indices.

use super::{PrioSource, SchedKind};
use crate::wire::MacAddr;
use std::net::Ipv4Addr;

/// Resolved BFC settings of a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfcSpec {
    pub config: flowctl::BfcConfig,
    /// ⟨ingress, egress⟩ port pairs without backpressure.
    pub elide: Vec<(usize, usize)>,
    /// Per port: push the data shim on egress (the peer speaks BFC).
    pub shim: Vec<bool>,
}

/// Resolved Aquarius settings of a switch.
#[derive(Debug, Clone, PartialEq)]
pub struct AquariusSpec {
    pub config: flowctl::AquariusConfig,
    /// Per port: push the data shim on egress (the peer speaks it).
    pub shim: Vec<bool>,
    /// Per port: queues dynamic mapping may use (the first n; 0 = all).
    pub map_queues: Vec<usize>,
}

/// Fully resolved settings of one port.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    pub name: String,
    pub iface: String,
    pub mac: MacAddr,
    pub rate_bps: u64,
    pub delay_ps: u64,
    pub queues: usize,
    pub queue_limit: u64,
    pub scheduler: SchedKind,
    pub quantum: u64,
    pub strict: Vec<usize>,
    pub prio_source: PrioSource,
    pub prio_map: [usize; 8],
    pub flood: bool,
    pub mtu: u32,
    /// MAC of the device at the other end of the link, if known from the topology.
    pub peer_mac: Option<MacAddr>,
    /// RX queues read through AF_XDP, one socket each (issue 23 item 4).
    pub queues_rx: u32,
    /// How those sockets bind (copy, zero-copy or either).
    pub xdp_bind: super::XdpBind,
}

/// A resolved route.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSpec {
    pub addr: Ipv4Addr,
    pub len: u8,
    /// (port index, next-hop MAC)
    pub via: Vec<(usize, MacAddr)>,
}

/// Everything one switch needs, resolved from the topology.
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    pub name: String,
    pub seed: u32,
    pub learning: bool,
    pub ports: Vec<PortSpec>,
    pub routes: Vec<RouteSpec>,
    /// (MAC, port index)
    pub macs: Vec<(MacAddr, usize)>,
    pub buffer: Option<mmu::MmuConfig>,
    /// `response_ps = "auto"`: the running switch measures its reaction time and re-sizes the
    /// headroom from it once (`crate::calibrate`); `buffer.response_ps` is the start value.
    pub response_auto: bool,
    pub pfc: Option<flowctl::PfcConfig>,
    pub watchdog: Option<flowctl::WatchdogConfig>,
    /// BFC (`scheme = "bfc"` and variants).
    pub bfc: Option<BfcSpec>,
    /// Pyrrha (`scheme = "pyrrha"`).
    pub pyrrha: Option<PyrrhaSpec>,
    /// Aquarius (`scheme = "aquarius"`).
    pub aquarius: Option<AquariusSpec>,
    /// Path policy among equal-cost next hops (issue 18).
    pub lb: super::LoadBalancer,
    /// Proteus's view of the path model (`lb = "proteus"`, issue 18).
    pub proteus: Option<std::sync::Arc<super::paths::ProteusSpec>>,
    /// CONGA's view of the topology (`lb = "conga"`, issue 18's baseline).
    pub conga: Option<std::sync::Arc<super::conga::CongaSpec>>,
    /// Huge pages for the AF_XDP UMEM, if reserved (issue 23 item 4).
    pub hugepages: bool,
    /// HPCC INT on every egress port (issue 19).
    pub int: bool,
}

/// Resolved Pyrrha settings of a switch: its parameters, its id (topology index), the
/// network model its path calculation reads, per port the one-hop BDP and IQs, and which
/// peers speak Pyrrha's signals (the others get none: PFC is the fallback there).
#[derive(Debug, Clone)]
pub struct PyrrhaSpec {
    pub config: flowctl::PyrrhaConfig,
    pub switch_id: u16,
    pub model: std::sync::Arc<crate::scheme::pyrrha::path::PathModel>,
    pub ports: Vec<flowctl::PyrrhaPort>,
    pub signal: Vec<bool>,
}

//! The traffic and simulation sections of a topology file, read by the virtual-time fabric
//! (`xoff sim`) and ignored by testbeds:
//!
//! ```toml
//! [sim]
//! duration = "100us"        # traffic window; the network then drains
//! seed = 7                  # flow start jitter, source ports (ECMP), on/off periods
//! probe_interval = "1us"
//! probe = [{ switch = "s1", port = "p3", queue = 0, counter = "depth_bytes" }]
//! nic = { h1 = { rate = "25Gbit" } }   # host NICs default to the attached port's rate/delay
//! honor_pfc = true          # host NICs pause per priority on 802.1Qbb frames
//! honor_bfc = true          # host NICs run BFC: per-flow queues, shim, Xoff signals
//! inflight_cap = "100KB"    # or cap each flow's bytes in flight (BFC partial deployment)
//!
//! [[flow]]
//! name = "f1"
//! src = "h1"
//! dst = "h3"
//! rate = "100Gbit"          # default: the sending NIC's line rate
//! size = "1MB"              # or `stop`, or the sim duration
//! start = "0us"
//! jitter = "1us"            # seeded uniform extra start delay
//! prio = 3                  # DSCP = prio << 3 (or 802.1Q PCP with `vlan = true`)
//! pkt = 1500                # frame bytes without FCS
//! pattern = "onoff"         # or "constant"
//! on = "10us"
//! off = "10us"
//!
//! [[flow]]                  # a transport flow of the host stack (`crate::host`)
//! name = "t1"
//! src = "h2"
//! dst = "h3"
//! cc = "dctcp"              # none, window, dcqcn, dctcp or hpcc (`crate::host::cc`)
//! size = "10MB"             # required: application bytes (the stack's unit)
//! start = "0us"             # also `jitter`, `prio`, `name`; ECN capability follows from cc
//! ```
//!
//! A `cc` flow is sent and acknowledged by a [`crate::host::HostStack`] on both its hosts,
//! with the parameters `xoff experiment` gives a cell (`StackConfig::new` with the host's NIC
//! rate and the longest host-to-host base RTT; `crate::fabric::build`), so it has no `rate`, `stop`, `pkt`, `pattern`, `on`, `off`, `random_periods`, `vlan`,
//! `ecn`, `sport` or `dport` (the stack paces, sizes frames and picks the ports itself). A
//! host that sends or receives a `cc` flow takes part in no other kind of flow, and runs
//! one congestion control for all the flows it sends. `[sim] duration` does not stop a `cc`
//! flow (it ends when its last byte is acknowledged; `max_time` caps the run). Its hosts
//! honour PFC in the stack's own per-priority queues, as `xoff experiment`'s do (their
//! fabric NICs' `honor_pfc` is turned off so the frames reach the stack).

use crate::units::{Rate, Size, Time};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[sim]`: how to run the fabric.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Traffic window: sources stop at this time, then the fabric runs until the network has
    /// drained. Required when a flow has neither `size` nor `stop`.
    pub duration: Option<Time>,
    /// Seed of every random choice of the host models (default 1; `--seed` overrides).
    pub seed: Option<u64>,
    /// Sampling interval of the probes.
    pub probe_interval: Option<Time>,
    #[serde(default)]
    pub probe: Vec<ProbeConfig>,
    /// Per-host NIC overrides.
    #[serde(default)]
    pub nic: BTreeMap<String, NicConfig>,
    /// Host NICs honour PFC frames per priority, as RDMA NICs do (default false).
    #[serde(default)]
    pub honor_pfc: bool,
    /// Host NICs run BFC (BFC §5): a NIC queue per flow, upstreamQ in the Xoff data shim,
    /// paused/resumed per queue by Xoff signal frames (default false).
    #[serde(default)]
    pub honor_bfc: bool,
    /// Queues of a BFC host NIC (1..=128, default 32).
    pub nic_bfc_queues: Option<usize>,
    /// Cap on each flow's data in flight (frame bytes sent and not yet received), e.g. one
    /// end-to-end BDP: the partial-deployment mode of BFC §5 / App. E.1 for NICs that do not
    /// honour BFC. Sources are held back (counted as blocked) while a flow is at the cap.
    pub inflight_cap: Option<Size>,
    /// Frames a host NIC queues before its sources are held back (default 1024).
    pub nic_queue: Option<usize>,
    /// Cap on frames alive at once in the fabric (default 4 Mi frames = 8 GiB of arena).
    pub max_frames: Option<usize>,
    /// Per-flow cap on recorded one-way delay samples (default 1 Mi); min/mean/max stay exact.
    pub delay_samples: Option<usize>,
    /// Hard stop of virtual time even if the network has not drained (default 1 s).
    pub max_time: Option<Time>,
}

/// A host NIC: line rate and propagation delay toward its switch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicConfig {
    pub rate: Option<Rate>,
    pub delay: Option<Time>,
    /// Whether this NIC honours PFC (default: `[sim] honor_pfc`).
    pub honor_pfc: Option<bool>,
    /// Whether this NIC runs BFC (default: `[sim] honor_bfc`).
    pub honor_bfc: Option<bool>,
    /// Per-flow in-flight cap (default: `[sim] inflight_cap`).
    pub inflight_cap: Option<Size>,
}

/// One probe column: a switch counter (port or queue), or a flow counter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Column name (default derived from the target).
    pub name: Option<String>,
    pub switch: Option<String>,
    pub port: Option<String>,
    pub queue: Option<usize>,
    pub flow: Option<String>,
    /// Port counters: rx_pkts, rx_bytes, tx_pkts, tx_bytes, drops, depth_bytes (all queues),
    /// max_queue_bytes (fullest queue), and flow control: pfc_xoff_sent, pfc_xon_sent,
    /// pfc_xoff_received, pfc_xon_received, bfc_pauses_sent, bfc_resumes_sent,
    /// bfc_pauses_received, bfc_resumes_received, bfc_paused, bfc_collisions,
    /// bfc_active_queues; queue counters: depth_bytes, depth_pkts, enq_pkts, enq_bytes,
    /// deq_pkts, deq_bytes, watermark_bytes, drops, ecn_marked; flow counters: tx_pkts,
    /// tx_bytes, rx_pkts, rx_bytes.
    pub counter: String,
}

/// How a source spaces its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Constant rate from start to stop.
    #[default]
    Constant,
    /// Alternates `on` periods at `rate` with silent `off` periods.
    Onoff,
}

/// `[[flow]]`: one UDP-like flow from a source host to a sink host.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub name: Option<String>,
    pub src: String,
    pub dst: String,
    /// Start time (before jitter).
    #[serde(default)]
    pub start: Time,
    /// Uniform random extra start delay in `[0, jitter]`, drawn from the sim seed.
    #[serde(default)]
    pub jitter: Time,
    /// No packet is sent at or after this time.
    pub stop: Option<Time>,
    /// Bytes to send (frame bytes); the flow completes when all of them arrived.
    pub size: Option<Size>,
    /// Sending rate in wire bits (frame + 20 B preamble/IFG); default the NIC line rate.
    pub rate: Option<Rate>,
    /// Priority 0..=7: DSCP = prio << 3, or the PCP of an 802.1Q tag with `vlan = true`.
    #[serde(default)]
    pub prio: u8,
    pub vlan: Option<bool>,
    /// Send ECT(0) (ECN-capable transport; default false).
    pub ecn: Option<bool>,
    /// Frame length in bytes without FCS (default 1500).
    pub pkt: Option<u32>,
    /// Default constant.
    pub pattern: Option<Pattern>,
    pub on: Option<Time>,
    pub off: Option<Time>,
    /// Draw on/off periods from exponential distributions with means `on`/`off`.
    pub random_periods: Option<bool>,
    /// UDP source port (default: drawn from the seed, so the seed moves ECMP paths).
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// Congestion control: makes the flow a transport flow of the host stack (see the
    /// module docs); unset, a UDP-like source.
    pub cc: Option<String>,
}

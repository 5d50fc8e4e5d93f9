//! The topology file: one TOML document describing switches, hosts and links.
//!
//! Loading validates everything a switch or testbed needs before anything is created, and
//! every error names the file, the key and the reason. The file's types are here; what they
//! resolve to is in [`resolved`] (the whole network) and [`spec`] (one switch); the sections
//! only the virtual-time fabric reads are in [`sim`].

use crate::units::{Rate, Size, Time};
use crate::wire::MacAddr;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

// issue 18 (branch conga)
pub mod conga;
pub mod machines;
pub mod paths;
pub mod resolved;
pub mod sim;
pub mod spec;

pub use machines::{LinkKind, MachineConfig, VxlanEnd};
pub use resolved::{HostInfo, Peer, ResolvedHost, ResolvedSwitch, ResolvedTopology};
pub use sim::{FlowConfig, NicConfig, Pattern, ProbeConfig, SimConfig};
pub use spec::{AquariusSpec, BfcSpec, PortSpec, PyrrhaSpec, RouteSpec, SwitchSpec};

/// A configuration error: which file, which key, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: key `{key}`: {reason}")]
pub struct ConfigError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

/// Whole topology file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Name of the testbed; namespaces and run files are prefixed with it.
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default, rename = "switch")]
    pub switches: Vec<SwitchConfig>,
    #[serde(default, rename = "host")]
    pub hosts: Vec<HostConfig>,
    #[serde(default, rename = "link")]
    pub links: Vec<LinkConfig>,
    // --- issue 23 item 2 (branch vxlan): testbeds across machines ---
    /// Which machine builds which nodes (`xoff testbed up --machine`; [`machines`]).
    #[serde(default, rename = "machine")]
    pub machines: Vec<MachineConfig>,
    // --- end issue 23 item 2 ---
    /// Traffic for the virtual-time fabric (`xoff sim`); testbeds ignore it.
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowConfig>,
    /// How the virtual-time fabric runs this file (`xoff sim`); testbeds ignore it.
    #[serde(default)]
    pub sim: Option<SimConfig>,
    /// Where the file was read from (for error messages).
    #[serde(skip)]
    pub path: PathBuf,
}

fn default_name() -> String {
    "xoff".into()
}

/// Where the egress priority of a frame comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrioSource {
    /// 802.1Q PCP if tagged, else DSCP >> 3.
    #[default]
    Auto,
    Pcp,
    Dscp,
}

/// Egress scheduling discipline among data queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SchedKind {
    /// Strict priority: higher queue index first.
    Sp,
    /// Deficit round robin (strict queues listed in `strict` first).
    #[default]
    Drr,
}

/// Port settings; every field may be set in `[switch.defaults]` and overridden per port.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSettings {
    /// Emulated line rate (bit/s; 0 = unshaped).
    pub rate: Option<Rate>,
    /// Emulated propagation delay.
    pub delay: Option<Time>,
    /// Number of data queues (1..=127; one more, the control queue, is always present).
    pub queues: Option<usize>,
    /// Tail-drop limit per queue (used when no MMU is configured).
    pub queue_limit: Option<Size>,
    pub scheduler: Option<SchedKind>,
    /// DRR quantum in bytes.
    pub quantum: Option<Size>,
    /// Queues served with strict priority before the DRR queues (higher index first).
    pub strict: Option<Vec<usize>>,
    pub prio_source: Option<PrioSource>,
    /// Priority (0..=7) → queue map; default identity modulo the queue count.
    pub prio_map: Option<Vec<usize>>,
    /// Whether unknown-unicast and broadcast frames are flooded out of this port.
    pub flood: Option<bool>,
    pub mtu: Option<u32>,
    // --- issue 23 item 4 (branch nic): real NICs ---
    /// RX queues of the interface to read, one AF_XDP socket each (1..=64, default 1); the
    /// sockets are spread over the workers so the NIC's RSS spreads flows over them.
    pub queues_rx: Option<u32>,
    /// AF_XDP bind: `copy` (default), `zerocopy` (fail if the driver cannot) or `auto`
    /// (zero-copy when the driver supports it, else copy, with the reason logged).
    pub xdp_bind: Option<XdpBind>,
    // --- end issue 23 item 4 ---
}

// --- issue 23 item 4 (branch nic): real NICs ---
/// How a port's AF_XDP sockets bind to the device (`xdp_bind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpBind {
    /// Copy mode (`XDP_COPY`): works on every device, veth included.
    #[default]
    Copy,
    /// Zero-copy (`XDP_ZEROCOPY`): frames DMA straight into the UMEM; the driver must support
    /// it, else the switch refuses to start.
    Zerocopy,
    /// Zero-copy if the driver supports it, else copy (the reason is logged and reported).
    Auto,
}

impl XdpBind {
    pub fn name(self) -> &'static str {
        match self {
            XdpBind::Copy => "copy",
            XdpBind::Zerocopy => "zerocopy",
            XdpBind::Auto => "auto",
        }
    }
}
// --- end issue 23 item 4 ---

/// One switch port.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub name: String,
    /// Interface to bind; defaults to `name` (inside the switch's namespace in a testbed).
    pub iface: Option<String>,
    pub mac: Option<MacAddr>,
    #[serde(flatten)]
    pub settings: PortSettings,
}

/// A static IPv4 route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Prefix in CIDR notation.
    pub prefix: String,
    /// Egress ports; more than one forms an ECMP group.
    pub via: Vec<String>,
}

/// A static MAC entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacEntry {
    pub mac: MacAddr,
    pub port: String,
}

/// A switch's `buffer` table: the MMU's settings, where `response_ps` may also be `"auto"`:
/// the software response term is then measured by the running switch (issue 20 item 5,
/// `crate::calibrate`) instead of assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferConfig {
    pub mmu: mmu::MmuConfig,
    /// `response_ps = "auto"`. `mmu.response_ps` then holds [`AUTO_START_RESPONSE_PS`], the
    /// allowance the switch starts with until it has measured itself.
    pub response_auto: bool,
}

/// The response term an `"auto"` switch reserves for until calibrated: the stock 10 ms
/// allowance of the shipped real-frame topologies (halved at start until the headroom fits
/// the buffer; `crate::buffer::Buffer::new`).
pub const AUTO_START_RESPONSE_PS: u64 = 10_000_000_000;

/// A fixed response term (what code that builds topologies sets).
impl From<mmu::MmuConfig> for BufferConfig {
    fn from(mmu: mmu::MmuConfig) -> Self {
        BufferConfig {
            mmu,
            response_auto: false,
        }
    }
}

impl std::ops::Deref for BufferConfig {
    type Target = mmu::MmuConfig;
    fn deref(&self) -> &mmu::MmuConfig {
        &self.mmu
    }
}

impl std::ops::DerefMut for BufferConfig {
    fn deref_mut(&mut self) -> &mut mmu::MmuConfig {
        &mut self.mmu
    }
}

/// Replaces `preset = "NAME"` in a `[buffer]` table by the preset's keys
/// ([`mmu::MmuConfig::PRESET_KEYS`] of [`mmu::MmuConfig::preset`]); a key written beside the
/// preset keeps its own value. An experiment file's `[buffer]` is expanded before it is merged
/// into a topology's, so its preset overrides the topology's thresholds as written-out keys
/// would.
pub fn expand_buffer_preset(t: &mut toml::Table) -> Result<(), String> {
    let Some(v) = t.remove("preset") else {
        return Ok(());
    };
    let known = || {
        let names: Vec<&str> = mmu::MmuConfig::PRESETS.iter().map(|(n, _)| *n).collect();
        names.join(", ")
    };
    let name = v
        .as_str()
        .ok_or_else(|| format!("preset: expected a name ({}), got {v}", known()))?;
    let cfg = mmu::MmuConfig::preset(name)
        .ok_or_else(|| format!("preset: unknown `{name}` (known: {})", known()))?;
    let keys = toml::Table::try_from(&cfg).map_err(|e| format!("preset `{name}`: {e}"))?;
    for &k in mmu::MmuConfig::PRESET_KEYS {
        if let (false, Some(v)) = (t.contains_key(k), keys.get(k)) {
            t.insert(k.into(), v.clone());
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for BufferConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut t = toml::Table::deserialize(d)?;
        expand_buffer_preset(&mut t).map_err(D::Error::custom)?;
        let response_auto = match t.get("response_ps") {
            Some(toml::Value::String(s)) if s == "auto" => true,
            Some(toml::Value::String(s)) => {
                return Err(D::Error::custom(format!(
                    "response_ps: expected picoseconds (an integer) or \"auto\", got \"{s}\""
                )))
            }
            _ => false,
        };
        if response_auto {
            t.insert(
                "response_ps".into(),
                toml::Value::Integer(AUTO_START_RESPONSE_PS as i64),
            );
        }
        let mmu = mmu::MmuConfig::deserialize(toml::Value::Table(t)).map_err(D::Error::custom)?;
        Ok(BufferConfig { mmu, response_auto })
    }
}

/// One switch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    pub name: String,
    /// Seed of the ECMP hash and every random choice of this switch.
    #[serde(default = "default_seed")]
    pub seed: u32,
    /// Learn source MACs.
    #[serde(default = "yes")]
    pub learning: bool,
    #[serde(default)]
    pub defaults: PortSettings,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    #[serde(default, rename = "mac")]
    pub macs: Vec<MacEntry>,
    /// Shared-buffer MMU; without it each queue tail-drops at `queue_limit`.
    pub buffer: Option<BufferConfig>,
    /// IEEE 802.1Qbb PFC: send on MMU XOFF/XON, honour received frames.
    pub pfc: Option<flowctl::PfcConfig>,
    /// PFC watchdog (SONiC pfcwd semantics).
    pub watchdog: Option<flowctl::WatchdogConfig>,
    /// How data packets are mapped to egress queues and backpressured: `static` (the
    /// priority map; default), `bfc`, `bfc-stochastic` or `bfc-single` (BFC, `flowctl::bfc`).
    #[serde(default)]
    pub scheme: Scheme,
    /// BFC parameters (`[switch.bfc]`; used when `scheme` is a BFC variant).
    pub bfc: Option<BfcSettings>,
    /// Pyrrha parameters (`[switch.pyrrha]`; used when `scheme = "pyrrha"`).
    pub pyrrha: Option<PyrrhaSettings>,
    /// Aquarius parameters (`[switch.aquarius]`; used when `scheme = "aquarius"`).
    pub aquarius: Option<AquariusSettings>,
    // --- issue 18 (branch proteus): load balancing ---
    /// Path policy among equal-cost next hops: `ecmp` (default), `drill`, `proteus` or
    /// `conga`.
    #[serde(default)]
    pub lb: LoadBalancer,
    // --- end issue 18 ---
    /// Back the AF_XDP UMEM with huge pages (`MAP_HUGETLB`) when some are reserved, else
    /// fall back to normal pages with the reason logged (issue 23 item 4).
    #[serde(default)]
    pub hugepages: bool,
    /// Append an INT record at every egress port to host-stack data packets that ask for
    /// one (HPCC, `crate::wire::int`).
    #[serde(default)]
    pub int: bool,
}

// --- issue 18 (branch proteus): load balancing ---
/// `lb = "..."` of a switch: how it picks among equal-cost next hops (`loadbal::PathPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LoadBalancer {
    /// Seeded CRC32 of the 5-tuple (`loadbal::ecmp`).
    #[default]
    Ecmp,
    /// DRILL(2, 1), per packet (`loadbal::drill`).
    Drill,
    /// Proteus (`loadbal::proteus`, `crate::scheme::proteus`): source routing by path id
    /// with the data shim version 2 toward Proteus peers, ECMP for the rest.
    Proteus,
    /// CONGA (`loadbal::conga`, `crate::scheme::conga`): flowlets on leaf-to-leaf congestion
    /// with the data shim version 3 toward CONGA peers, ECMP for the rest (branch conga).
    Conga,
}
// --- end issue 18 ---

/// Queue assignment / per-hop flow-control scheme of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Queue = `prio_map[priority]`.
    #[default]
    Static,
    /// BFC with dynamic queue assignment (§3.3.1).
    Bfc,
    /// BFC backpressure with a static hash of the flow to a queue.
    BfcStochastic,
    /// BFC backpressure with every flow in queue 0.
    BfcSingle,
    /// Pyrrha: congestion roots and isolation queues (`flowctl::pyrrha`).
    Pyrrha,
    /// Aquarius (issue 16, `flowctl::aquarius`): contribution-aware pausing and
    /// opportunistic re-assigning.
    Aquarius,
}

impl Scheme {
    /// Whether this is a BFC variant.
    pub fn is_bfc(self) -> bool {
        matches!(
            self,
            Scheme::Bfc | Scheme::BfcStochastic | Scheme::BfcSingle
        )
    }
}

// --- Pyrrha (issue 17) ---
/// `[switch.pyrrha]`: Pyrrha parameters. Defaults as the paper's §6: `K_pause` = 2 and
/// `K_resume` = 1 one-hop BDPs, at most 100 IQs per port, single-tier IQs. The IQs of a port
/// are its data queues that no priority maps to (e.g. `queues = 16` with `prio_map` all 0).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PyrrhaSettings {
    pub k_pause: Option<f64>,
    pub k_resume: Option<f64>,
    pub max_iqs: Option<usize>,
    #[serde(default)]
    pub iq_mode: flowctl::pyrrha::IqMode,
    /// One-hop BDP (default per port: rate × 2 × its delay, at least one full frame).
    pub hop_bdp: Option<Size>,
    /// Send PAUSE / RESUME / MERGE to the hosts linked to this switch too (§4.4
    /// "Cooperation on end-hosts"): their NICs hold exactly the flows that cross a paused
    /// root (`xoff host --pyrrha`; fabric host stacks do so by themselves). Default false:
    /// hosts get no Pyrrha signal and PFC, if configured, is the host-edge fallback.
    #[serde(default)]
    pub hosts: bool,
}
// --- end Pyrrha ---
/// `[switch.aquarius]`: Aquarius parameters. Defaults: BFC's table (100 × queues) and HRTT
/// (2 × the largest port delay + two full frames), α = 1/8.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AquariusSettings {
    /// Flow-table entries per egress port as a multiple of its queues (default 100).
    pub table_factor: Option<usize>,
    /// One-hop RTT (`Q_low = HRTT·μ/NQ_active`, `Q_high = 3·HRTT·μ/NQ_active`).
    pub hrtt: Option<Time>,
    /// EWMA gain of `T_avg` (default 0.125).
    pub alpha: Option<f64>,
    /// Keep the last `rsvQ` candidate out of dynamic mapping while no `rsvQ` is allocated
    /// (default true; `flowctl::AquariusConfig::hold_rsv`).
    pub hold_rsv: Option<bool>,
    /// A flow joining a queue paused for a flow alone in it shares the queue out: the held
    /// flow moves to `rsvQ`, the queue resumes (default true;
    /// `flowctl::AquariusConfig::share_on_join`).
    pub share_on_join: Option<bool>,
    /// Ports whose peers speak the Xoff data shim besides Aquarius switches (found from the
    /// topology): e.g. a host NIC that honours per-flow pauses.
    #[serde(default)]
    pub shim_ports: Vec<String>,
    /// Forced flow placement for experiments (the paper's §4 micro-benchmark "limits f1–f3
    /// to the same egress queue"): dynamic mapping on a listed port uses only its first
    /// `queues` queues; `rsvQ` may still take any empty queue.
    #[serde(default)]
    pub map_queues: Vec<MapQueues>,
}

/// One entry of [`AquariusSettings::map_queues`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapQueues {
    pub port: String,
    pub queues: usize,
}

/// `[switch.bfc]`: BFC parameters. Defaults follow the paper (table 100 × queues, sticky
/// 2·HRTT, HRTT = 2 × the largest port delay, `Th = HRTT·μ/N_active`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BfcSettings {
    /// Flow-table entries per egress port as a multiple of its queues (default 100).
    pub table_factor: Option<usize>,
    /// One-hop RTT (default 2 × the largest port delay).
    pub hrtt: Option<Time>,
    /// Fixed pause threshold instead of `HRTT·μ/N_active`.
    pub threshold: Option<Size>,
    /// Sticky threshold in HRTTs (default 2).
    pub sticky_hrtts: Option<u64>,
    /// When a paused upstream queue is resumed: "drained" (default, the paper's
    /// pseudocode) or "below-th" (§3.3.2's refinement: once its queues are below Th).
    #[serde(default)]
    pub resume: flowctl::bfc::Resume,
    /// Pause-bitmap refresh period (default 10 × HRTT, at least 10 µs; "0us" disables).
    pub refresh: Option<Time>,
    /// Ports whose peers speak the Xoff data shim besides BFC switches (found from the
    /// topology): e.g. a host NIC that honours BFC.
    #[serde(default)]
    pub shim_ports: Vec<String>,
    /// Deadlock guard (App. B): the switch's up ports; backpressure is elided for packets
    /// that enter on one and leave on one (down-up bounces). Default: ports linked to a
    /// switch without hosts (a leaf's spine ports in a leaf-spine).
    pub uplinks: Option<Vec<String>>,
    /// More ⟨ingress, egress⟩ port pairs without backpressure.
    #[serde(default)]
    pub elide: Vec<[String; 2]>,
}

fn default_seed() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// One end host (a network namespace in a testbed, a host model in the fabric).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    pub name: String,
    /// Address with prefix length, e.g. "10.0.1.1/24".
    pub ip: String,
    pub mac: Option<MacAddr>,
    /// Default gateway (a switch-owned address; its MAC is the attached switch port's).
    pub gateway: Option<Ipv4Addr>,
}

/// A link between two endpoints, each "host" or "switch:port".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub a: String,
    pub b: String,
    // --- issue 23 item 2 (branch vxlan): a link between machines ([`machines`]) ---
    /// `veth` (default) or `vxlan`.
    #[serde(default)]
    pub kind: LinkKind,
    /// VXLAN network identifier (vxlan links).
    pub vni: Option<u32>,
    /// Underlay address of the machine holding end `a` (vxlan links).
    pub local: Option<Ipv4Addr>,
    /// Underlay address of the machine holding end `b` (vxlan links).
    pub remote: Option<Ipv4Addr>,
    /// MTU of the tunnel (vxlan links; default 1500, the underlay then needs 1550).
    pub mtu: Option<u32>,
    // --- end issue 23 item 2 ---
}

/// A deterministic locally administered MAC for a named interface.
pub fn derived_mac(name: &str) -> MacAddr {
    let h = crc32(name.as_bytes());
    let b = h.to_be_bytes();
    MacAddr([0x02, 0x58, b[0], b[1], b[2], b[3]])
}

fn crc32(b: &[u8]) -> u32 {
    // A tiny local CRC so MAC derivation does not depend on the ECMP hash implementation.
    let mut c = 0xffff_ffffu32;
    for &x in b {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Parses "a.b.c.d/len".
pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not a prefix (want a.b.c.d/len)"))?;
    let addr: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let len: u8 = l
        .parse()
        .map_err(|_| format!("`{l}` is not a prefix length"))?;
    if len > 32 {
        return Err(format!("prefix length {len} > 32"));
    }
    Ok((addr, len))
}

/// An endpoint of a link.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Host(String),
    Port(String, String),
}

impl Endpoint {
    fn parse(s: &str) -> Endpoint {
        match s.split_once(':') {
            Some((sw, p)) => Endpoint::Port(sw.to_string(), p.to_string()),
            None => Endpoint::Host(s.to_string()),
        }
    }
}

impl Topology {
    /// Reads and validates a topology file.
    pub fn load(path: impl AsRef<Path>) -> Result<Topology, ConfigError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            key: "-".into(),
            reason: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates topology text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Topology, ConfigError> {
        let file = path.display().to_string();
        let mut t: Topology = toml::from_str(text).map_err(|e| toml_error(&file, text, &e))?;
        t.path = path.to_path_buf();
        t.validate()?;
        Ok(t)
    }

    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.path.display().to_string(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Every endpoint pair of the links.
    pub fn endpoints(&self) -> Vec<(Endpoint, Endpoint)> {
        self.links
            .iter()
            .map(|l| (Endpoint::parse(&l.a), Endpoint::parse(&l.b)))
            .collect()
    }

    /// MAC of a host.
    pub fn host_mac(&self, h: &HostConfig) -> MacAddr {
        h.mac
            .unwrap_or_else(|| derived_mac(&format!("{}/{}", self.name, h.name)))
    }

    /// MAC of a switch port.
    pub fn port_mac(&self, sw: &str, p: &PortConfig) -> MacAddr {
        p.mac
            .unwrap_or_else(|| derived_mac(&format!("{}/{}:{}", self.name, sw, p.name)))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let mut names = HashMap::new();
        for (i, s) in self.switches.iter().enumerate() {
            if names
                .insert(s.name.clone(), format!("switch[{i}]"))
                .is_some()
            {
                return Err(self.err(
                    format!("switch[{i}].name"),
                    format!("duplicate name `{}`", s.name),
                ));
            }
            if s.ports.is_empty() {
                return Err(self.err(
                    format!("switch[{i}].port"),
                    "a switch needs at least one port",
                ));
            }
        }
        for (i, h) in self.hosts.iter().enumerate() {
            if names.insert(h.name.clone(), format!("host[{i}]")).is_some() {
                return Err(self.err(
                    format!("host[{i}].name"),
                    format!("duplicate name `{}`", h.name),
                ));
            }
            parse_cidr(&h.ip).map_err(|r| self.err(format!("host[{i}].ip"), r))?;
        }
        let mut used = HashMap::new();
        for (i, (a, b)) in self.endpoints().into_iter().enumerate() {
            for (side, e) in [("a", &a), ("b", &b)] {
                let key = format!("link[{i}].{side}");
                match e {
                    Endpoint::Host(h) if !self.hosts.iter().any(|x| &x.name == h) => {
                        return Err(self.err(key, format!("no host named `{h}`")))
                    }
                    Endpoint::Port(s, p) => {
                        let sw = self
                            .switches
                            .iter()
                            .find(|x| &x.name == s)
                            .ok_or_else(|| self.err(&key, format!("no switch named `{s}`")))?;
                        if !sw.ports.iter().any(|x| &x.name == p) {
                            return Err(self.err(key, format!("switch `{s}` has no port `{p}`")));
                        }
                    }
                    _ => {}
                }
                if let Some(prev) = used.insert(e.clone(), i) {
                    return Err(self.err(key, format!("endpoint already used by link[{prev}]")));
                }
            }
        }
        self.validate_machines()?;
        self.resolve().map(|_| ())
    }

    /// Resolves the whole topology (see [`ResolvedTopology`]).
    pub fn resolve(&self) -> Result<ResolvedTopology, ConfigError> {
        ResolvedTopology::new(self)
    }

    /// Resolves one switch's settings (defaults, peers, routes). Resolves the whole
    /// topology: callers that need more than one switch use [`Topology::resolve`].
    pub fn switch_spec(&self, name: &str) -> Result<SwitchSpec, ConfigError> {
        let mut r = self.resolve()?;
        let i = r
            .switch_index(name)
            .ok_or_else(|| self.err("switch", format!("no switch named `{name}` in this file")))?;
        Ok(r.switches.swap_remove(i as usize).spec)
    }
}

/// Turns a toml/serde error into file + key + reason.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let msg = e.message().to_string();
    let key = if let Some(rest) = msg.strip_prefix("unknown field `") {
        rest.split('`').next().unwrap_or("?").to_string()
    } else if let Some(span) = e.span() {
        // The text the error points at, usually the key or the value.
        let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[span.start..]
            .find('\n')
            .map_or(text.len(), |i| span.start + i);
        text[line_start..line_end]
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    } else {
        "-".into()
    };
    let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
    let reason = match line {
        Some(l) => format!("{msg} (line {l})"),
        None => msg,
    };
    ConfigError {
        file: file.to_string(),
        key,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
[[switch]]
name = "s1"
defaults = { rate = "100Mbit", delay = "10us", queues = 4 }
[[switch.port]]
name = "p1"
[[switch.port]]
name = "p2"
rate = "1Gbit"
[[switch.route]]
prefix = "10.0.2.0/24"
via = ["p2"]
[[host]]
name = "h1"
ip = "10.0.1.1/24"
[[host]]
name = "h2"
ip = "10.0.2.1/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
"#;

    fn load(s: &str) -> Result<Topology, ConfigError> {
        Topology::parse(s, Path::new("test.toml"))
    }

    #[test]
    fn resolves_defaults_peers_and_routes() {
        let t = load(GOOD).unwrap();
        let s = t.switch_spec("s1").unwrap();
        assert_eq!(s.ports[0].rate_bps, 100_000_000);
        assert_eq!(s.ports[1].rate_bps, 1_000_000_000);
        assert_eq!(s.ports[0].delay_ps, 10_000_000);
        assert_eq!(s.ports[0].prio_map, [0, 1, 2, 3, 0, 1, 2, 3]);
        let h2 = t.hosts.iter().find(|h| h.name == "h2").unwrap();
        assert_eq!(s.routes[0].via, vec![(1, t.host_mac(h2))]);
        assert_eq!(s.ports[1].peer_mac, Some(t.host_mac(h2)));
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let e = load(&GOOD.replace("name = \"p1\"", "name = \"p1\"\nspeed = 3")).unwrap_err();
        assert_eq!(e.file, "test.toml");
        assert_eq!(e.key, "speed");
        assert!(e.reason.contains("unknown field"), "{e}");
    }

    /// `response_ps` is picoseconds or `"auto"` (issue 20 item 5); anything else names the
    /// file, the key and why, and an unknown buffer key is still refused.
    #[test]
    fn response_ps_auto_resolves_and_bad_values_are_named() {
        let with = |v: &str| {
            GOOD.replace(
                "[[switch.port]]\nname = \"p1\"",
                &format!("buffer = {{ lossless_pgs = [3], {v} }}\n[[switch.port]]\nname = \"p1\""),
            )
        };
        let s = load(&with("response_ps = \"auto\""))
            .unwrap()
            .switch_spec("s1")
            .unwrap();
        assert!(s.response_auto);
        assert_eq!(s.buffer.unwrap().response_ps, AUTO_START_RESPONSE_PS);
        let s = load(&with("response_ps = 5000"))
            .unwrap()
            .switch_spec("s1")
            .unwrap();
        assert!(!s.response_auto);
        assert_eq!(s.buffer.unwrap().response_ps, 5000);
        let e = load(&with("response_ps = \"soon\"")).unwrap_err();
        assert_eq!(e.file, "test.toml");
        assert!(e.key.contains("buffer"), "{e}");
        assert!(
            e.reason.contains("response_ps") && e.reason.contains("\"auto\""),
            "{e}"
        );
        let e = load(&with("respons_ps = 1")).unwrap_err();
        assert!(e.reason.contains("unknown field `respons_ps`"), "{e}");
    }

    /// `preset = "hpcc"` in a switch's buffer: HPCC's thresholds, with the switch's own size
    /// and lossless PGs and any key written beside it; an unknown name is refused with the
    /// file and the reason.
    #[test]
    fn buffer_preset_resolves_and_unknown_is_named() {
        let with = |v: &str| {
            GOOD.replace(
                "[[switch.port]]\nname = \"p1\"",
                &format!(
                    "buffer = {{ buffer_bytes = 12000000, lossless_pgs = [3], {v} }}\n\
                     [[switch.port]]\nname = \"p1\""
                ),
            )
        };
        let b = load(&with("preset = \"hpcc\", private_bytes = 2048"))
            .unwrap()
            .switch_spec("s1")
            .unwrap()
            .buffer
            .unwrap();
        let hpcc = mmu::MmuConfig::hpcc();
        assert_eq!(
            b,
            mmu::MmuConfig {
                buffer_bytes: 12_000_000,
                lossless_pgs: vec![3],
                private_bytes: 2048,
                ..hpcc
            }
        );
        // Every preset key is a key of the configuration (none is skipped by a misspelling).
        for (name, cfg) in mmu::MmuConfig::PRESETS {
            let t = toml::Table::try_from(cfg()).unwrap();
            for k in mmu::MmuConfig::PRESET_KEYS {
                assert!(t.contains_key(*k), "{name}: {k}");
            }
        }
        let e = load(&with("preset = \"tomahawk\"")).unwrap_err();
        assert_eq!(e.file, "test.toml");
        assert!(
            e.reason.contains("preset: unknown `tomahawk`") && e.reason.contains("hpcc"),
            "{e}"
        );
    }

    #[test]
    fn zero_rate_is_rejected() {
        let e = load(&GOOD.replace("rate = \"1Gbit\"", "rate = 0")).unwrap_err();
        assert_eq!(e.key, "switch[0].port[1].rate");
        assert!(e.reason.contains("rate must be > 0"));
    }

    #[test]
    fn bad_references_are_rejected() {
        let e = load(&GOOD.replace("b = \"s1:p2\"", "b = \"s1:p9\"")).unwrap_err();
        assert_eq!(e.key, "link[1].b");
        let e = load(&GOOD.replace("via = [\"p2\"]", "via = [\"p7\"]")).unwrap_err();
        assert_eq!(e.key, "switch[0].route[0].via");
        let e = load(&GOOD.replace("rate = \"1Gbit\"", "rate = \"fast\"")).unwrap_err();
        assert!(e.reason.contains("not a rate"), "{e}");
    }

    /// Issue 23 item 4: RX queues and bind mode per port (defaults: one queue, copy mode).
    #[test]
    fn queues_rx_and_xdp_bind_resolve_and_are_checked() {
        let s = load(GOOD).unwrap().switch_spec("s1").unwrap();
        assert_eq!(
            (s.ports[0].queues_rx, s.ports[0].xdp_bind),
            (1, XdpBind::Copy)
        );
        assert!(!s.hugepages);
        let t = GOOD
            .replace(
                "queues = 4 }",
                "queues = 4, queues_rx = 4, xdp_bind = \"auto\" }",
            )
            .replace(
                "rate = \"1Gbit\"",
                "rate = \"1Gbit\"\nqueues_rx = 2\nxdp_bind = \"zerocopy\"",
            )
            .replace("name = \"s1\"", "name = \"s1\"\nhugepages = true");
        let s = load(&t).unwrap().switch_spec("s1").unwrap();
        assert_eq!(
            (s.ports[0].queues_rx, s.ports[0].xdp_bind),
            (4, XdpBind::Auto)
        );
        assert_eq!(
            (s.ports[1].queues_rx, s.ports[1].xdp_bind),
            (2, XdpBind::Zerocopy)
        );
        assert!(s.hugepages);
        for bad in ["0", "65"] {
            let e =
                load(&GOOD.replace("queues = 4 }", &format!("queues = 4, queues_rx = {bad} }}")))
                    .unwrap_err();
            assert_eq!(e.key, "switch[0].port[0].queues_rx", "{e}");
        }
    }
}

//! The topology file: one TOML document describing switches, hosts and links.
//!
//! Loading validates everything a switch or testbed needs before anything is created, and
//! every error names the file, the key and the reason.

use crate::units::{Rate, Size, Time};
use crate::wire::MacAddr;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub mod sim;

pub use sim::{FlowConfig, NicConfig, Pattern, ProbeConfig, SimConfig};

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
}

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
    pub buffer: Option<mmu::MmuConfig>,
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
}

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
}

impl Scheme {
    /// Whether this is a BFC variant.
    pub fn is_bfc(self) -> bool {
        !matches!(self, Scheme::Static)
    }
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

/// Resolved BFC settings of a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfcSpec {
    pub config: flowctl::BfcConfig,
    /// ⟨ingress, egress⟩ port pairs without backpressure.
    pub elide: Vec<(usize, usize)>,
    /// Per port: push the data shim on egress (the peer speaks BFC).
    pub shim: Vec<bool>,
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
    pub pfc: Option<flowctl::PfcConfig>,
    pub watchdog: Option<flowctl::WatchdogConfig>,
    /// BFC (`scheme = "bfc"` and variants).
    pub bfc: Option<BfcSpec>,
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

    /// MAC of whatever is at `e`.
    pub fn endpoint_mac(&self, e: &Endpoint) -> Option<MacAddr> {
        match e {
            Endpoint::Host(h) => self
                .hosts
                .iter()
                .find(|x| &x.name == h)
                .map(|h| self.host_mac(h)),
            Endpoint::Port(s, p) => {
                let sw = self.switches.iter().find(|x| &x.name == s)?;
                sw.ports
                    .iter()
                    .find(|x| &x.name == p)
                    .map(|p| self.port_mac(s, p))
            }
        }
    }

    /// The endpoint linked to `e`, if any.
    pub fn peer(&self, e: &Endpoint) -> Option<Endpoint> {
        self.endpoints().into_iter().find_map(|(a, b)| {
            if &a == e {
                Some(b)
            } else if &b == e {
                Some(a)
            } else {
                None
            }
        })
    }

    /// For each host reachable from switch `sw`, (host MAC, name of the port leading to it),
    /// by breadth-first search over the links.
    pub fn host_ports(&self, sw: &str) -> Vec<(MacAddr, String)> {
        let links = self.endpoints();
        let mut out = Vec::new();
        for h in &self.hosts {
            // BFS from the host; `via` = the port by which each switch was first reached.
            let mut seen: HashMap<String, String> = HashMap::new();
            let mut frontier = vec![Endpoint::Host(h.name.clone())];
            while let Some(e) = frontier.pop() {
                let mut next = Vec::new();
                for (a, b) in &links {
                    let other = if a == &e {
                        b
                    } else if b == &e {
                        a
                    } else {
                        continue;
                    };
                    if let Endpoint::Port(s2, p2) = other {
                        if seen.contains_key(s2) {
                            continue;
                        }
                        seen.insert(s2.clone(), p2.clone());
                        if let Some(sc) = self.switches.iter().find(|x| &x.name == s2) {
                            for p in &sc.ports {
                                if &p.name != p2 {
                                    next.push(Endpoint::Port(s2.clone(), p.name.clone()));
                                }
                            }
                        }
                    }
                }
                // Breadth-first: process the oldest frontier entries first.
                frontier.splice(0..0, next.into_iter().rev());
            }
            if let Some(p) = seen.get(sw) {
                out.push((self.host_mac(h), p.clone()));
            }
        }
        out
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
        for s in &self.switches {
            self.switch_spec(&s.name)?;
        }
        Ok(())
    }

    /// Resolves one switch's settings (defaults, peers, routes).
    pub fn switch_spec(&self, name: &str) -> Result<SwitchSpec, ConfigError> {
        let (si, s) = self
            .switches
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
            .ok_or_else(|| self.err("switch", format!("no switch named `{name}` in this file")))?;
        let mut ports = Vec::new();
        let mut index = BTreeMap::new();
        for (pi, p) in s.ports.iter().enumerate() {
            let key = |k: &str| format!("switch[{si}].port[{pi}].{k}");
            let d = &s.defaults;
            let st = &p.settings;
            let rate = st.rate.or(d.rate).unwrap_or(Rate(10_000_000_000)).0;
            if rate == 0 {
                return Err(self.err(key("rate"), "rate must be > 0 (set a line rate to emulate)"));
            }
            let queues = st.queues.or(d.queues).unwrap_or(8);
            if !(1..=127).contains(&queues) {
                return Err(self.err(
                    key("queues"),
                    format!("{queues} queues: must be 1..=127 (plus the control queue)"),
                ));
            }
            let strict = st
                .strict
                .clone()
                .or_else(|| d.strict.clone())
                .unwrap_or_default();
            if let Some(q) = strict.iter().find(|&&q| q >= queues) {
                return Err(self.err(
                    key("strict"),
                    format!("queue {q} does not exist ({queues} queues)"),
                ));
            }
            let prio_map = match st.prio_map.clone().or_else(|| d.prio_map.clone()) {
                None => core::array::from_fn(|p| p % queues),
                Some(m) if m.len() == 8 => {
                    if let Some(q) = m.iter().find(|&&q| q >= queues) {
                        return Err(self.err(
                            key("prio_map"),
                            format!("queue {q} does not exist ({queues} queues)"),
                        ));
                    }
                    core::array::from_fn(|p| m[p])
                }
                Some(m) => {
                    return Err(
                        self.err(key("prio_map"), format!("needs 8 entries, has {}", m.len()))
                    )
                }
            };
            let quantum = st.quantum.or(d.quantum).unwrap_or(Size(1600)).0;
            if quantum == 0 {
                return Err(self.err(key("quantum"), "quantum must be > 0"));
            }
            let mtu = st.mtu.or(d.mtu).unwrap_or(1500);
            if !(68..=1774).contains(&mtu) {
                return Err(self.err(
                    key("mtu"),
                    format!("{mtu}: must be 68..=1774 (2 KiB buffer chunks)"),
                ));
            }
            let limit = st
                .queue_limit
                .or(d.queue_limit)
                .unwrap_or(Size(256 * 1024))
                .0;
            if limit < u64::from(mtu) + 18 {
                return Err(self.err(
                    key("queue_limit"),
                    format!("{limit} B cannot hold one MTU frame"),
                ));
            }
            if index.insert(p.name.clone(), pi).is_some() {
                return Err(self.err(key("name"), format!("duplicate port `{}`", p.name)));
            }
            ports.push(PortSpec {
                name: p.name.clone(),
                iface: p.iface.clone().unwrap_or_else(|| p.name.clone()),
                mac: self.port_mac(&s.name, p),
                rate_bps: rate,
                delay_ps: st.delay.or(d.delay).unwrap_or(Time(0)).0,
                queues,
                queue_limit: limit,
                scheduler: st.scheduler.or(d.scheduler).unwrap_or_default(),
                quantum,
                strict,
                prio_source: st.prio_source.or(d.prio_source).unwrap_or_default(),
                prio_map,
                flood: st.flood.or(d.flood).unwrap_or(true),
                mtu,
                peer_mac: self
                    .peer(&Endpoint::Port(s.name.clone(), p.name.clone()))
                    .and_then(|e| self.endpoint_mac(&e)),
            });
        }
        let mut routes = Vec::new();
        for (ri, r) in s.routes.iter().enumerate() {
            let key = |k: &str| format!("switch[{si}].route[{ri}].{k}");
            let (addr, len) = parse_cidr(&r.prefix).map_err(|e| self.err(key("prefix"), e))?;
            if r.via.is_empty() {
                return Err(self.err(key("via"), "a route needs at least one port"));
            }
            let mut via = Vec::new();
            for v in &r.via {
                let pi = *index.get(v).ok_or_else(|| {
                    self.err(key("via"), format!("no port `{v}` on switch `{}`", s.name))
                })?;
                let mac = ports[pi].peer_mac.ok_or_else(|| {
                    self.err(
                        key("via"),
                        format!("port `{v}` is not linked to anything, so its next hop is unknown"),
                    )
                })?;
                via.push((pi, mac));
            }
            routes.push(RouteSpec { addr, len, via });
        }
        // Every host's MAC, toward the port on the shortest path to it: static entries, so a
        // testbed forwards from the first frame without flooding (configured entries win).
        let mut macs: Vec<(MacAddr, usize)> = self
            .host_ports(&s.name)
            .into_iter()
            .filter_map(|(h, p)| index.get(&p).map(|&pi| (h, pi)))
            .collect();
        for (mi, m) in s.macs.iter().enumerate() {
            let pi = *index.get(&m.port).ok_or_else(|| {
                self.err(
                    format!("switch[{si}].mac[{mi}].port"),
                    format!("no port `{}`", m.port),
                )
            })?;
            macs.push((m.mac, pi));
        }
        if let Some(b) = &s.buffer {
            b.validate()
                .map_err(|e| self.err(format!("switch[{si}].buffer"), e.to_string()))?;
        }
        let bfc = if s.scheme.is_bfc() {
            Some(self.bfc_spec(si, s, &index)?)
        } else {
            None
        };
        Ok(SwitchSpec {
            name: s.name.clone(),
            seed: s.seed,
            learning: s.learning,
            ports,
            routes,
            macs,
            buffer: s.buffer.clone(),
            pfc: s.pfc.clone(),
            watchdog: s.watchdog,
            bfc,
        })
    }

    /// Whether switch `name` runs a BFC scheme.
    pub fn runs_bfc(&self, name: &str) -> bool {
        self.switches
            .iter()
            .any(|s| s.name == name && s.scheme.is_bfc())
    }

    fn bfc_spec(
        &self,
        si: usize,
        s: &SwitchConfig,
        index: &BTreeMap<String, usize>,
    ) -> Result<BfcSpec, ConfigError> {
        let d = s.bfc.clone().unwrap_or_default();
        let key = |k: &str| format!("switch[{si}].bfc.{k}");
        let port = |k: &str, n: &str| {
            index
                .get(n)
                .copied()
                .ok_or_else(|| self.err(key(k), format!("no port `{n}` on switch `{}`", s.name)))
        };
        let peer = |p: &PortConfig| self.peer(&Endpoint::Port(s.name.clone(), p.name.clone()));
        let mut shim: Vec<bool> = s
            .ports
            .iter()
            .map(|p| matches!(peer(p), Some(Endpoint::Port(sw, _)) if self.runs_bfc(&sw)))
            .collect();
        for n in &d.shim_ports {
            shim[port("shim_ports", n)?] = true;
        }
        let has_hosts = |sw: &str| {
            self.endpoints().iter().any(|(a, b)| {
                matches!((a, b), (Endpoint::Host(_), Endpoint::Port(x, _)) | (Endpoint::Port(x, _), Endpoint::Host(_)) if x == sw)
            })
        };
        let uplinks: Vec<usize> = match &d.uplinks {
            Some(v) => v
                .iter()
                .map(|n| port("uplinks", n))
                .collect::<Result<_, _>>()?,
            None => s
                .ports
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(peer(p), Some(Endpoint::Port(sw, _)) if !has_hosts(&sw)))
                .map(|(i, _)| i)
                .collect(),
        };
        let mut elide: Vec<(usize, usize)> = uplinks
            .iter()
            .flat_map(|&a| uplinks.iter().map(move |&b| (a, b)))
            .collect();
        for [a, b] in &d.elide {
            elide.push((port("elide", a)?, port("elide", b)?));
        }
        let mut config = flowctl::BfcConfig {
            assignment: match s.scheme {
                Scheme::BfcStochastic => flowctl::Assignment::Stochastic,
                Scheme::BfcSingle => flowctl::Assignment::Single,
                _ => flowctl::Assignment::Dynamic,
            },
            hrtt_ps: d.hrtt.map(|t| t.0),
            th_bytes: d.threshold.map(|t| t.0),
            refresh_ps: d.refresh.map(|t| t.0),
            seed: u64::from(s.seed),
            resume: d.resume,
            ..flowctl::BfcConfig::default()
        };
        if let Some(f) = d.table_factor {
            if !(1..=100_000).contains(&f) {
                return Err(self.err(key("table_factor"), format!("{f}: must be 1..=100000")));
            }
            config.table_factor = f;
        }
        if let Some(n) = d.sticky_hrtts {
            if n == 0 {
                return Err(self.err(key("sticky_hrtts"), "must be > 0"));
            }
            config.sticky_hrtts = n;
        }
        Ok(BfcSpec {
            config,
            elide,
            shim,
        })
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
}

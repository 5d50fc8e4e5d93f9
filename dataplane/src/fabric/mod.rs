//! The virtual-time fabric: many switches and host models in one process, driven event by
//! event on a virtual clock, deterministically, at any configured rate.
//!
//! Every switch is the production pipeline, [`crate::Switch`], the type `xoff run` runs on
//! AF_XDP ports: frames go through `Switch::receive` (parse, classify, FIB, ECMP, rewrite) and
//! `Switch::enqueue` (buffer admission / MMU, queues), and leave through `Switch::service`
//! (scheduler, shaper, delay line). Each switch is split into two pipes sharing one
//! [`SwitchShared`], exactly as the multi-worker runtime splits it: an ingress pipe that owns
//! no egress (so every forwarded frame comes back as a [`crate::Handoff`] naming its egress
//! port) and one pipe owning every egress port, which the fabric enqueues the hand-offs into.
//! That tells the fabric which port needs service without scanning, and runs no second
//! implementation of anything.
//!
//! Links have a rate and a delay in both directions: a switch port's egress is emulated by
//! its own `Link` (from its `PortSpec`), a host's egress by the host NIC's `Link`. A frame a
//! link releases has completed serialization and propagation and is delivered to the peer at
//! that same virtual time.
//!
//! Events live in a binary heap ordered by (time, sequence number), so ties resolve in the
//! order events were scheduled. At each instant the fabric first handles every event due
//! (host timers, NIC and port wakeups, arrivals), then services the egress ports that became
//! busy, so frames arriving at the same instant all compete in the scheduler. No threads, no
//! sleeping, no hash-map iteration: a run is a function of the topology and the seed.

pub mod flow;
pub mod host;
pub mod mem;
pub mod probe;
pub mod queue;

pub use crate::config::sim::{FlowConfig, NicConfig, Pattern, ProbeConfig, SimConfig};
pub use flow::{DelayReport, FlowLog, FlowRecord, FlowReport};
pub use host::{
    sink_receive, DataHeader, FrameTemplate, HostCtx, HostInfo, HostModel, Nic, NicBfc, OnOff,
    Source, UdpHost,
};
pub use mem::FabricMem;
pub use probe::{FcCounter, FlowCounter, PortCounter, ProbeTarget, Probes, QueueCounter};
pub use crate::rng::{self, Rng};

use crate::clock::{Clock, VirtualClock};
use crate::config::{parse_cidr, ConfigError, Endpoint, Topology};
use crate::frame::{FrameId, FrameMem};
use crate::stats::SwitchSnapshot;
use crate::switch::{Handoff, Switch, SwitchShared};
use queue::EventQueue;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Why a fabric could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("switch `{switch}`: buffer configuration: {err}")]
    Mmu {
        switch: String,
        err: crate::switch::SwitchError,
    },
}

/// Options that override the file.
#[derive(Debug, Clone, Default)]
pub struct FabricOptions {
    /// Overrides `[sim] seed`.
    pub seed: Option<u64>,
    /// Overrides `[sim] duration` (ps).
    pub duration: Option<u64>,
}

/// What is at the far end of a switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    None,
    Host(u32),
    Port(u32, u16),
}

/// One switch in the fabric.
pub struct SwitchNode {
    pub name: String,
    /// The pipeline: owns every port (one pipe, as `xoff run` with one worker), and reports
    /// which ports got work through `take_touched`.
    egress: Switch,
    /// Pending flow-control timer in the event heap (`NONE`: none).
    timer: u64,
    pub peers: Vec<Peer>,
    sched: Vec<u64>,
    dirty: Vec<bool>,
}

impl SwitchNode {
    /// The pipe that owns the egress ports (queues, buffer/MMU, links).
    pub fn switch(&self) -> &Switch {
        &self.egress
    }

    /// Counters, FIB and configuration.
    pub fn shared(&self) -> &Arc<SwitchShared> {
        &self.egress.shared
    }
}

/// One host in the fabric.
pub struct HostNode {
    pub info: HostInfo,
    pub nic: Nic,
    /// The switch port the NIC is linked to.
    pub peer: Option<(u32, u16)>,
    model: Box<dyn HostModel>,
    rng: Rng,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Port(u32, u16),
    /// Flow-control timer of a switch.
    Ctrl(u32),
    Nic(u32),
    Timer(u32, u64),
    Probe,
}

/// Work counters of a run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct FabricStats {
    /// Events taken from the heap.
    pub events: u64,
    /// Frames delivered over a link (host→switch, switch→switch, switch→host).
    pub link_hops: u64,
    /// Frames received by a switch.
    pub switch_hops: u64,
    /// Flow-control events the buffers raised.
    pub fc_events: u64,
    /// Frames sent out of a port that is linked to nothing.
    pub unlinked: u64,
    /// Most events pending at once.
    pub max_pending: u64,
}

/// The virtual-time fabric.
pub struct Fabric {
    pub name: String,
    pub seed: u64,
    clock: VirtualClock,
    mem: FabricMem,
    nodes: Vec<SwitchNode>,
    hosts: Vec<HostNode>,
    flows: FlowLog,
    probes: Probes,
    heap: EventQueue<Ev>,
    dirty: Vec<(u32, u16)>,
    handoff: Vec<Handoff>,
    tx: Vec<(FrameId, u32)>,
    nic_tx: Vec<(FrameId, u32)>,
    timers: Vec<(u64, u64)>,
    touched: Vec<u16>,
    traffic_end: Option<u64>,
    max_time: u64,
    started: bool,
    stats: FabricStats,
}

const NONE: u64 = u64::MAX;

impl Fabric {
    /// Loads a topology file and builds its fabric.
    pub fn load(path: impl AsRef<Path>, opts: &FabricOptions) -> Result<Fabric, FabricError> {
        let t = Topology::load(path)?;
        Self::new(&t, opts)
    }

    /// Builds the fabric of a topology: every switch, every host (NIC + [`UdpHost`] with the
    /// sources of its `[[flow]]`s), probes.
    pub fn new(t: &Topology, opts: &FabricOptions) -> Result<Fabric, FabricError> {
        let file = t.path.display().to_string();
        let err = |key: String, reason: String| ConfigError {
            file: file.clone(),
            key,
            reason,
        };
        let sim = t.sim.clone().unwrap_or_default();
        let seed = opts.seed.or(sim.seed).unwrap_or(1);
        let traffic_end = opts.duration.or(sim.duration.map(|d| d.0));

        // Switches: the production pipeline, two pipes over one shared state.
        let mut nodes = Vec::new();
        let mut sw_index = BTreeMap::new();
        for s in &t.switches {
            let spec = t.switch_spec(&s.name)?;
            let n = spec.ports.len();
            let shared = SwitchShared::new(spec);
            let mut egress =
                Switch::new(shared, vec![0; n], 0, 0).map_err(|e| FabricError::Mmu {
                    switch: s.name.clone(),
                    err: e,
                })?;
            egress.track_touched();
            sw_index.insert(s.name.clone(), nodes.len() as u32);
            nodes.push(SwitchNode {
                name: s.name.clone(),
                egress,
                timer: NONE,
                peers: vec![Peer::None; n],
                sched: vec![NONE; n],
                dirty: vec![false; n],
            });
        }
        let host_index: BTreeMap<String, u32> = t
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.clone(), i as u32))
            .collect();
        let port_names: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| {
                n.egress
                    .shared
                    .spec
                    .ports
                    .iter()
                    .map(|p| p.name.clone())
                    .collect()
            })
            .collect();
        let port_of = |s: &str, p: &str| -> Option<(u32, u16)> {
            let si = *sw_index.get(s)?;
            let pi = port_names[si as usize].iter().position(|x| x == p)?;
            Some((si, pi as u16))
        };
        let mut peers = Vec::new();
        for (i, (a, b)) in t.endpoints().into_iter().enumerate() {
            let resolve = |e: &Endpoint| match e {
                Endpoint::Host(h) => host_index.get(h).map(|&x| Peer::Host(x)),
                Endpoint::Port(s, p) => port_of(s, p).map(|(s, p)| Peer::Port(s, p)),
            };
            let (Some(pa), Some(pb)) = (resolve(&a), resolve(&b)) else {
                return Err(err(format!("link[{i}]"), "unknown endpoint".into()).into());
            };
            if matches!((pa, pb), (Peer::Host(_), Peer::Host(_))) {
                return Err(err(
                    format!("link[{i}]"),
                    "the fabric links hosts to switch ports, not to each other".into(),
                )
                .into());
            }
            peers.push((pa, pb));
        }
        let mut host_peer: Vec<Option<(u32, u16)>> = vec![None; t.hosts.len()];
        for &(a, b) in &peers {
            for (x, y) in [(a, b), (b, a)] {
                if let Peer::Port(s, p) = x {
                    nodes[s as usize].peers[usize::from(p)] = y;
                    if let Peer::Host(h) = y {
                        host_peer[h as usize] = Some((s, p));
                    }
                }
            }
        }

        // Hosts.
        for name in sim.nic.keys() {
            if !host_index.contains_key(name) {
                return Err(
                    err(format!("sim.nic.{name}"), format!("no host named `{name}`")).into(),
                );
            }
        }
        let nic_limit = sim.nic_queue.unwrap_or(1024).max(1);
        let mut hosts = Vec::new();
        for (i, h) in t.hosts.iter().enumerate() {
            let (ip, prefix_len) =
                parse_cidr(&h.ip).map_err(|r| err(format!("host[{i}].ip"), r))?;
            let port = host_peer[i]
                .map(|(s, p)| &nodes[s as usize].egress.shared.spec.ports[usize::from(p)]);
            let nic = sim.nic.get(&h.name);
            let rate = nic
                .and_then(|n| n.rate)
                .map(|r| r.0)
                .or(port.map(|p| p.rate_bps))
                .unwrap_or(10_000_000_000);
            if rate == 0 {
                return Err(err(
                    format!("sim.nic.{}.rate", h.name),
                    "rate must be > 0".into(),
                )
                .into());
            }
            let delay = nic
                .and_then(|n| n.delay)
                .map(|d| d.0)
                .or(port.map(|p| p.delay_ps))
                .unwrap_or(0);
            hosts.push(HostNode {
                info: HostInfo {
                    name: h.name.clone(),
                    index: i,
                    mac: t.host_mac(h),
                    ip,
                    prefix_len,
                    gateway_mac: port.map(|p| p.mac),
                    nic_rate_bps: rate,
                    nic_delay_ps: delay,
                },
                nic: {
                    let mut n = Nic::new(rate, delay, nic_limit);
                    n.honor_pfc = nic.and_then(|n| n.honor_pfc).unwrap_or(sim.honor_pfc);
                    if nic.and_then(|n| n.honor_bfc).unwrap_or(sim.honor_bfc) {
                        n.bfc = Some(host::NicBfc::new(sim.nic_bfc_queues.unwrap_or(32)));
                    }
                    n.inflight_cap = nic
                        .and_then(|n| n.inflight_cap)
                        .or(sim.inflight_cap)
                        .map(|s| s.0);
                    n
                },
                peer: host_peer[i],
                model: Box::new(UdpHost::default()),
                rng: Rng::stream(seed, 0x1000_0000 + i as u64),
            });
        }

        // Flows.
        let mut models: Vec<UdpHost> = vec![UdpHost::default(); hosts.len()];
        let mut records = Vec::new();
        let mut names = BTreeMap::new();
        for (i, f) in t.flows.iter().enumerate() {
            let key = |k: &str| format!("flow[{i}].{k}");
            let find = |k: &str, n: &str| {
                host_index
                    .get(n)
                    .map(|&x| x as usize)
                    .ok_or_else(|| err(key(k), format!("no host named `{n}`")))
            };
            let (si, di) = (find("src", &f.src)?, find("dst", &f.dst)?);
            if si == di {
                return Err(err(key("dst"), "a flow needs two different hosts".into()).into());
            }
            if hosts[si].peer.is_none() {
                return Err(err(
                    key("src"),
                    format!("host `{}` is not linked to a switch", f.src),
                )
                .into());
            }
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            if names.insert(name.clone(), i).is_some() {
                return Err(err(key("name"), format!("duplicate flow name `{name}`")).into());
            }
            if f.prio > 7 {
                return Err(err(key("prio"), format!("{}: must be 0..=7", f.prio)).into());
            }
            let (src, dst) = (&hosts[si].info, &hosts[di].info);
            let mask = |l: u8| {
                if l == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(l))
                }
            };
            let same_subnet = u32::from(src.ip) & mask(src.prefix_len)
                == u32::from(dst.ip) & mask(src.prefix_len);
            let dst_mac = if same_subnet {
                dst.mac
            } else if t.hosts[si].gateway.is_some() {
                src.gateway_mac.unwrap_or(dst.mac)
            } else {
                return Err(err(
                    key("dst"),
                    format!(
                        "`{}` ({}) is outside the subnet of `{}` ({}/{}), which has no `gateway`",
                        f.dst, dst.ip, f.src, src.ip, src.prefix_len
                    ),
                )
                .into());
            };
            let mut rng = Rng::stream(seed, i as u64);
            let jitter = rng.upto(f.jitter.0);
            let sport = f.sport.unwrap_or(49152 + rng.upto(16383) as u16);
            let tmpl = FrameTemplate {
                src_mac: src.mac,
                dst_mac,
                src_ip: src.ip,
                dst_ip: dst.ip,
                sport,
                dport: f.dport.unwrap_or(5000),
                prio: f.prio,
                vlan: f.vlan,
                ecn: f.ecn,
            };
            let pkt = f.pkt.unwrap_or(1500);
            if !(tmpl.min_len() as u32..=1792).contains(&pkt) {
                return Err(err(
                    key("pkt"),
                    format!(
                        "{pkt} B: must be {}..=1792 (frame bytes without FCS)",
                        tmpl.min_len()
                    ),
                )
                .into());
            }
            let rate = f.rate.map(|r| r.0).unwrap_or(src.nic_rate_bps);
            if rate == 0 {
                return Err(err(key("rate"), "rate must be > 0".into()).into());
            }
            let size = f.size.map(|s| s.0);
            if size == Some(0) {
                return Err(err(key("size"), "size must be > 0".into()).into());
            }
            if size.is_none() && f.stop.is_none() && traffic_end.is_none() {
                return Err(err(
                    key("size"),
                    "an endless flow: set `size` or `stop`, or `[sim] duration`".into(),
                )
                .into());
            }
            let onoff = match f.pattern {
                Pattern::Constant => OnOff::Always,
                Pattern::Onoff => match (f.on, f.off) {
                    (Some(on), Some(off)) if on.0 > 0 => OnOff::Periods {
                        on: on.0,
                        off: off.0,
                        random: f.random_periods,
                    },
                    _ => {
                        return Err(err(
                            key("on"),
                            "pattern \"onoff\" needs `on` (> 0) and `off`".into(),
                        )
                        .into())
                    }
                },
            };
            let start = f.start.0 + jitter;
            let src_obj = Source::new(
                i as u32,
                tmpl,
                pkt,
                rate,
                start,
                f.stop.map(|s| s.0),
                size,
                onoff,
                rng,
            );
            records.push(FlowRecord {
                name,
                src: f.src.clone(),
                dst: f.dst.clone(),
                prio: f.prio,
                start_ps: start,
                size_bytes: size,
                total_pkts: src_obj.total_pkts(),
                ..FlowRecord::default()
            });
            models[si].sources.push(src_obj);
        }
        for (h, m) in hosts.iter_mut().zip(models) {
            h.model = Box::new(m);
        }
        let flows = FlowLog::new(records, sim.delay_samples.unwrap_or(1 << 20));

        // Probes.
        let mut probes = Probes {
            interval_ps: sim.probe_interval.map_or(0, |t| t.0),
            ..Probes::default()
        };
        if !sim.probe.is_empty() && probes.interval_ps == 0 {
            return Err(err(
                "sim.probe_interval".into(),
                "probes need an interval > 0".into(),
            )
            .into());
        }
        for (i, p) in sim.probe.iter().enumerate() {
            let key = |k: &str| format!("sim.probe[{i}].{k}");
            let (col, target) = match (&p.flow, &p.switch, &p.port) {
                (Some(fname), None, None) => {
                    let fi = flows
                        .flows
                        .iter()
                        .position(|r| &r.name == fname)
                        .ok_or_else(|| err(key("flow"), format!("no flow named `{fname}`")))?;
                    let c = FlowCounter::parse(&p.counter).ok_or_else(|| {
                        err(
                            key("counter"),
                            format!(
                                "`{}`: flows have tx_pkts, tx_bytes, rx_pkts, rx_bytes",
                                p.counter
                            ),
                        )
                    })?;
                    (
                        format!("flow:{fname}:{}", p.counter),
                        ProbeTarget::Flow {
                            flow: fi,
                            counter: c,
                        },
                    )
                }
                (None, Some(sw), Some(port)) => {
                    let (s, pi) = port_of(sw, port)
                        .ok_or_else(|| err(key("port"), format!("no port `{sw}:{port}`")))?;
                    let shared = nodes[s as usize].egress.shared.clone();
                    let pi = usize::from(pi);
                    match p.queue {
                        Some(q) => {
                            let nq = shared.spec.ports[pi].queues;
                            if q >= nq {
                                return Err(err(
                                    key("queue"),
                                    format!("queue {q} does not exist ({nq} queues)"),
                                )
                                .into());
                            }
                            let c = QueueCounter::parse(&p.counter).ok_or_else(|| {
                                err(key("counter"), format!("`{}`: queues have depth_bytes, depth_pkts, enq_pkts, enq_bytes, deq_pkts, deq_bytes, watermark_bytes, drops, ecn_marked", p.counter))
                            })?;
                            (
                                format!("{sw}:{port}:q{q}:{}", p.counter),
                                ProbeTarget::Queue {
                                    shared,
                                    port: pi,
                                    queue: q,
                                    counter: c,
                                },
                            )
                        }
                        None => {
                            let target = match (
                                PortCounter::parse(&p.counter),
                                FcCounter::parse(&p.counter),
                            ) {
                                (Some(c), _) => ProbeTarget::Port {
                                    shared,
                                    port: pi,
                                    counter: c,
                                },
                                (None, Some(c)) => ProbeTarget::Fc {
                                    switch: s as usize,
                                    port: pi,
                                    counter: c,
                                },
                                (None, None) => return Err(err(key("counter"), format!("`{}`: ports have rx_pkts, rx_bytes, tx_pkts, tx_bytes, drops, depth_bytes, max_queue_bytes, pfc_xoff_sent, pfc_xon_sent, pfc_xoff_received, pfc_xon_received, bfc_pauses_sent, bfc_resumes_sent, bfc_pauses_received, bfc_resumes_received, bfc_paused, bfc_collisions, bfc_active_queues (set `queue` for queue counters)", p.counter)).into()),
                            };
                            (format!("{sw}:{port}:{}", p.counter), target)
                        }
                    }
                }
                _ => {
                    return Err(err(
                        key("switch"),
                        "a probe names either `flow`, or `switch` and `port` (and maybe `queue`)"
                            .into(),
                    )
                    .into())
                }
            };
            probes.add(p.name.clone().unwrap_or(col), target);
        }

        Ok(Fabric {
            name: t.name.clone(),
            seed,
            clock: VirtualClock::new(0),
            mem: FabricMem::new(sim.max_frames.unwrap_or(4 << 20)),
            nodes,
            hosts,
            flows,
            probes,
            heap: EventQueue::new(),
            dirty: Vec::new(),
            handoff: Vec::new(),
            tx: Vec::new(),
            nic_tx: Vec::new(),
            timers: Vec::new(),
            touched: Vec::new(),
            traffic_end,
            max_time: sim.max_time.map_or(1_000_000_000_000, |t| t.0),
            started: false,
            stats: FabricStats::default(),
        })
    }

    /// Current virtual time, ps.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// The virtual clock.
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    pub fn nodes(&self) -> &[SwitchNode] {
        &self.nodes
    }

    /// The production switch pipeline named `name` (the pipe that owns its egress).
    pub fn switch(&self, name: &str) -> Option<&Switch> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .map(SwitchNode::switch)
    }

    pub fn hosts(&self) -> &[HostNode] {
        &self.hosts
    }

    pub fn flows(&self) -> &FlowLog {
        &self.flows
    }

    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    /// Adds a probe column (before or during a run); sampled every `probes().interval_ps`.
    pub fn add_probe(&mut self, name: impl Into<String>, target: ProbeTarget) {
        self.probes.add(name, target);
    }

    /// Sets the probe interval (ps) before the run starts.
    pub fn set_probe_interval(&mut self, ps: u64) {
        self.probes.interval_ps = ps;
    }

    pub fn stats(&self) -> FabricStats {
        FabricStats {
            fc_events: self.nodes.iter().map(|n| n.egress.mmu_events()).sum(),
            ..self.stats
        }
    }

    pub fn mem(&self) -> &FabricMem {
        &self.mem
    }

    /// The NIC of host `name`, to reconfigure before the run starts.
    pub fn host_nic_mut(&mut self, name: &str) -> Option<&mut Nic> {
        self.hosts
            .iter_mut()
            .find(|h| h.info.name == name)
            .map(|h| &mut h.nic)
    }

    /// Replaces the model of host `name` (before the run starts).
    pub fn set_host_model(&mut self, name: &str, model: Box<dyn HostModel>) -> bool {
        match self.hosts.iter_mut().find(|h| h.info.name == name) {
            Some(h) => {
                h.model = model;
                true
            }
            None => false,
        }
    }

    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.heap.push(t, ev);
    }

    #[inline]
    fn mark_dirty(&mut self, s: u32, p: u16) {
        let d = &mut self.nodes[s as usize].dirty[usize::from(p)];
        if !*d {
            *d = true;
            self.dirty.push((s, p));
        }
    }

    /// Runs until the network is idle (all sources done, all queues and wires drained) or
    /// `[sim] max_time`.
    pub fn run(&mut self) {
        self.run_until(self.max_time);
    }

    /// Runs every event up to and including virtual time `end` (ps).
    pub fn run_until(&mut self, end: u64) {
        if !self.started {
            self.started = true;
            for h in 0..self.hosts.len() {
                self.host_call(h, |m, ctx| m.start(ctx));
            }
            if self.probes.interval_ps > 0 && !self.probes.names.is_empty() {
                self.push(0, Ev::Probe);
            }
        }
        loop {
            let next = self.heap.peek_time();
            if !self.dirty.is_empty() && next.is_none_or(|t| t > self.clock.now()) {
                self.flush();
                continue;
            }
            let Some(t) = next else { break };
            if t > end {
                break;
            }
            let Some((t, ev)) = self.heap.pop() else {
                break;
            };
            self.clock.advance_to(t);
            self.stats.events += 1;
            self.stats.max_pending = self.stats.max_pending.max(self.heap.len() as u64 + 1);
            match ev {
                Ev::Port(s, p) => {
                    let sched = &mut self.nodes[s as usize].sched[usize::from(p)];
                    if *sched == t {
                        *sched = NONE;
                        self.mark_dirty(s, p);
                    }
                }
                Ev::Ctrl(s) => {
                    if self.nodes[s as usize].timer == t {
                        self.nodes[s as usize].timer = NONE;
                        let node = &mut self.nodes[s as usize];
                        node.egress.on_timer(&mut self.mem, t);
                        self.take_fc(s);
                    }
                }
                Ev::Nic(h) => {
                    if self.hosts[h as usize].nic.sched == t {
                        self.hosts[h as usize].nic.sched = NONE;
                        self.service_nic(h as usize);
                    }
                }
                Ev::Timer(h, tok) => self.host_call(h as usize, |m, ctx| m.on_timer(ctx, tok)),
                Ev::Probe => {
                    self.probes.sample(t, &self.flows, &self.nodes);
                    if !self.heap.is_empty() || !self.dirty.is_empty() {
                        self.push(t + self.probes.interval_ps, Ev::Probe);
                    }
                }
            }
        }
    }

    /// Services every port that became busy at the current instant.
    fn flush(&mut self) {
        let mut i = 0;
        while i < self.dirty.len() {
            let (s, p) = self.dirty[i];
            self.nodes[s as usize].dirty[usize::from(p)] = false;
            self.service_port(s, p);
            i += 1;
        }
        self.dirty.clear();
    }

    fn service_port(&mut self, s: u32, p: u16) {
        let now = self.clock.now();
        let mut tx = std::mem::take(&mut self.tx);
        let node = &mut self.nodes[s as usize];
        node.egress.service(&mut self.mem, p, now, &mut tx);
        let peer = node.peers[usize::from(p)];
        if !tx.is_empty() {
            let c = &node.egress.shared.counters[usize::from(p)];
            c.tx_pkts.add(tx.len() as u64);
            c.tx_bytes
                .add(tx.iter().map(|&(_, l)| u64::from(l)).sum::<u64>());
        }
        self.take_fc(s);
        let node = &mut self.nodes[s as usize];
        if let Some(w) = node.egress.next_wakeup(p, now) {
            let w = w.max(now + 1);
            let sched = &mut node.sched[usize::from(p)];
            if w < *sched {
                *sched = w;
                self.push(w, Ev::Port(s, p));
            }
        }
        for &(f, len) in &tx {
            self.deliver(peer, f, len);
        }
        tx.clear();
        self.tx = tx;
    }

    /// Marks the ports of switch `s` that got work as dirty and (re)arms its flow-control
    /// timer (PFC refresh, watchdog).
    fn take_fc(&mut self, s: u32) {
        let mut touched = std::mem::take(&mut self.touched);
        self.nodes[s as usize].egress.take_touched(&mut touched);
        for &p in &touched {
            self.mark_dirty(s, p);
        }
        touched.clear();
        self.touched = touched;
        let node_timer = self.nodes[s as usize].egress.next_timer();
        if let Some(t) = node_timer {
            let t = t.max(self.clock.now() + 1);
            if t < self.nodes[s as usize].timer {
                self.nodes[s as usize].timer = t;
                self.push(t, Ev::Ctrl(s));
            }
        }
    }

    /// Hands a frame that finished crossing a link to whatever is at its far end.
    fn deliver(&mut self, peer: Peer, f: FrameId, len: u32) {
        let now = self.clock.now();
        match peer {
            Peer::Port(s, p) => {
                self.stats.link_hops += 1;
                self.stats.switch_hops += 1;
                let mut ho = std::mem::take(&mut self.handoff);
                let node = &mut self.nodes[s as usize];
                node.egress.receive(&mut self.mem, p, f, len, now, &mut ho);
                debug_assert!(ho.is_empty(), "a single pipe owns every port");
                self.handoff = ho;
                self.take_fc(s);
            }
            Peer::Host(h) => {
                self.stats.link_hops += 1;
                let nic = &mut self.hosts[h as usize].nic;
                nic.rx_pkts += 1;
                nic.rx_bytes += u64::from(len);
                let data = &self.mem.data(f)[..len as usize];
                let et = data.get(12..14);
                let mac_control = crate::wire::EtherType::MAC_CONTROL.to_be_bytes();
                let xoff_signal = crate::wire::EtherType::XOFF_SIGNAL.to_be_bytes();
                if (et == Some(&mac_control[..]) && nic.on_pfc(data, now))
                    || (et == Some(&xoff_signal[..]) && nic.on_bfc_signal(data))
                {
                    self.mem.free(f);
                    self.service_nic(h as usize);
                } else {
                    self.host_call(h as usize, |m, ctx| m.on_receive(ctx, f, len));
                }
            }
            Peer::None => {
                self.stats.unlinked += 1;
                self.mem.free(f);
            }
        }
    }

    fn host_call(&mut self, h: usize, call: impl FnOnce(&mut dyn HostModel, &mut HostCtx<'_>)) {
        let now = self.clock.now();
        let node = &mut self.hosts[h];
        let mut ctx = HostCtx {
            now,
            info: &node.info,
            mem: &mut self.mem,
            flows: &mut self.flows,
            rng: &mut node.rng,
            traffic_end: self.traffic_end,
            nic: &mut node.nic,
            timers: &mut self.timers,
        };
        call(node.model.as_mut(), &mut ctx);
        let mut timers = std::mem::take(&mut self.timers);
        for &(t, tok) in &timers {
            self.push(t, Ev::Timer(h as u32, tok));
        }
        timers.clear();
        self.timers = timers;
        if self.hosts[h].nic.backlog() > 0 {
            self.service_nic(h);
        }
    }

    fn service_nic(&mut self, h: usize) {
        let now = self.clock.now();
        let mut out = std::mem::take(&mut self.nic_tx);
        let node = &mut self.hosts[h];
        let wake = node.nic.service(now, &mut out);
        let peer = node.peer;
        if let Some(w) = wake {
            let w = w.max(now + 1);
            if w < node.nic.sched {
                node.nic.sched = w;
                self.push(w, Ev::Nic(h as u32));
            }
        }
        for &(f, len) in &out {
            match peer {
                Some((s, p)) => self.deliver(Peer::Port(s, p), f, len),
                None => self.deliver(Peer::None, f, len),
            }
        }
        out.clear();
        self.nic_tx = out;
    }

    /// Results of the run so far.
    pub fn report(&self) -> SimReport {
        let now = self.clock.now();
        SimReport {
            topology: self.name.clone(),
            seed: self.seed,
            end_ps: now,
            traffic_end_ps: self.traffic_end,
            stats: self.stats(),
            flows: self.flows.flows.iter().map(FlowReport::from).collect(),
            unknown_rx: self.flows.unknown_rx,
            hosts: self
                .hosts
                .iter()
                .map(|h| HostReport {
                    name: h.info.name.clone(),
                    tx_pkts: h.nic.tx_pkts,
                    tx_bytes: h.nic.tx_bytes,
                    rx_pkts: h.nic.rx_pkts,
                    rx_bytes: h.nic.rx_bytes,
                    nic_refused: h.nic.refused,
                })
                .collect(),
            switches: self
                .nodes
                .iter()
                .map(|n| {
                    let mut s = n
                        .shared()
                        .snapshot(now as f64 / 1e12, n.egress.buffer().stats_json());
                    // PFC, watchdog and BFC counters, as `xoff ctl stats --json` has them.
                    s.pfc = n.egress.fc_stats_json(now);
                    s
                })
                .collect(),
        }
    }
}

/// One host's NIC counters in a report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostReport {
    pub name: String,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub nic_refused: u64,
}

/// The result of a fabric run: flows, hosts and every switch's counters (`SwitchShared`
/// snapshots, as `xoff ctl stats` prints them; `uptime_s` is virtual time).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimReport {
    pub topology: String,
    pub seed: u64,
    /// Virtual time at the end of the run, ps.
    pub end_ps: u64,
    pub traffic_end_ps: Option<u64>,
    pub stats: FabricStats,
    pub flows: Vec<FlowReport>,
    pub unknown_rx: u64,
    pub hosts: Vec<HostReport>,
    pub switches: Vec<SwitchSnapshot>,
}

impl SimReport {
    /// Pretty JSON (deterministic: same topology and seed, same bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Tables for humans: flows, then every port and queue that saw traffic.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: seed {}, virtual time {:.3} us, {} events, {} link hops",
            self.topology,
            self.seed,
            self.end_ps as f64 / 1e6,
            self.stats.events,
            self.stats.link_hops
        );
        let _ =
            writeln!(
            s,
            "\n{:<12} {:<8} {:<8} {:>4} {:>9} {:>9} {:>7} {:>6} {:>9} {:>11} {:>10} {:>10} {:>10}",
            "flow", "src", "dst", "prio", "tx_pkts", "rx_pkts", "lost", "reord", "Gbit/s",
            "fct_us", "d_min_us", "d_p99_us", "d_max_us"
        );
        let us = |ps: u64| ps as f64 / 1e6;
        for f in &self.flows {
            let _ = writeln!(
                s,
                "{:<12} {:<8} {:<8} {:>4} {:>9} {:>9} {:>7} {:>6} {:>9.3} {:>11} {:>10.3} {:>10.3} {:>10.3}",
                f.name,
                f.src,
                f.dst,
                f.prio,
                f.tx_pkts,
                f.rx_pkts,
                f.lost,
                f.reordered,
                f.throughput_gbps,
                f.fct_ps.map_or("-".into(), |x| format!("{:.3}", us(x))),
                us(f.delay_ps.min),
                us(f.delay_ps.p99),
                us(f.delay_ps.max)
            );
        }
        let _ = writeln!(
            s,
            "\n{:<16} {:>10} {:>10} {:>8}   {:>5} {:>9} {:>9} {:>8} {:>11} {:>8}",
            "port",
            "rx_pkts",
            "tx_pkts",
            "drops",
            "queue",
            "enq_pkts",
            "deq_pkts",
            "drops",
            "max_depth_B",
            "ecn"
        );
        for sw in &self.switches {
            for p in &sw.ports {
                let drops: u64 = p.drops.values().sum();
                if p.rx_pkts + p.tx_pkts + drops == 0 {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "{:<16} {:>10} {:>10} {:>8}",
                    format!("{}:{}", sw.switch, p.name),
                    p.rx_pkts,
                    p.tx_pkts,
                    drops
                );
                for (r, n) in &p.drops {
                    let _ = writeln!(s, "{:<16}   drop {r}: {n}", "");
                }
                for (q, qs) in p.queues.iter().enumerate() {
                    if qs.enq_pkts + qs.drops == 0 {
                        continue;
                    }
                    let _ = writeln!(
                        s,
                        "{:<16} {:>10} {:>10} {:>8}   {:>5} {:>9} {:>9} {:>8} {:>11} {:>8}",
                        "",
                        "",
                        "",
                        "",
                        q,
                        qs.enq_pkts,
                        qs.deq_pkts,
                        qs.drops,
                        qs.watermark_bytes,
                        qs.ecn_marked
                    );
                }
            }
        }
        s
    }
}

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

mod build;
pub mod flow;
pub mod host;
pub mod mem;
pub mod probe;
pub mod queue;

pub use crate::config::sim::{FlowConfig, NicConfig, Pattern, ProbeConfig, SimConfig};
pub use crate::config::Peer;
pub use crate::rng::{self, Rng};
pub use flow::{CcFlowReport, DelayReport, FlowLog, FlowRecord, FlowReport};
pub use host::{
    sink_receive, DataHeader, FrameTemplate, HostCtx, HostInfo, HostModel, Nic, NicBfc, OnOff,
    Source, UdpHost,
};
pub use mem::FabricMem;
pub use probe::{FcCounter, FlowCounter, PortCounter, ProbeTarget, Probes, QueueCounter};

use crate::clock::{Clock, VirtualClock};
use crate::config::{ConfigError, Topology};
use crate::frame::{FrameId, FrameMem};
use crate::stats::SwitchSnapshot;
use crate::switch::{Outputs, Switch, SwitchShared};
use queue::EventQueue;
use serde::Serialize;
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

/// One switch in the fabric.
pub struct SwitchNode {
    pub name: String,
    /// The pipeline: owns every port (one pipe, as `xoff run` with one worker); the ports that
    /// got work are reported through the fabric's tracking [`Outputs`] sink.
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
    /// A port's wakeup, and the frame its wire releases next (`u32::MAX`: none) as it was
    /// when the wakeup was scheduled, for [`Fabric::prefetch_next`].
    Port(u32, u16, u32),
    /// Flow-control timer of a switch.
    Ctrl(u32),
    Nic(u32),
    Timer(u32, u64),
    Probe,
}

/// An [`Ev`] as the event queue keeps it: two words, which travel in registers. The enum
/// itself (fields of mixed widths) was built on the stack in narrow stores and read back by
/// the queue in one wide load, a store-forwarding stall on every push (`perf annotate`: most
/// of `EventQueue::push`'s cycles, 8 % of the fabric's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EvWords(u64, u64);

impl Ev {
    /// Kind in the low byte of the first word, the node (switch or host) in its high half,
    /// the port in bits 8..24; the timer's token is the second word.
    #[inline]
    fn pack(self) -> EvWords {
        let w =
            |kind: u64, node: u32, port: u16| kind | u64::from(port) << 8 | u64::from(node) << 32;
        match self {
            Ev::Port(s, p, f) => EvWords(w(0, s, p), u64::from(f)),
            Ev::Ctrl(s) => EvWords(w(1, s, 0), 0),
            Ev::Nic(h) => EvWords(w(2, h, 0), 0),
            Ev::Timer(h, tok) => EvWords(w(3, h, 0), tok),
            Ev::Probe => EvWords(w(4, 0, 0), 0),
        }
    }
}

impl EvWords {
    #[inline]
    fn unpack(self) -> Ev {
        let node = (self.0 >> 32) as u32;
        match self.0 & 0xff {
            0 => Ev::Port(node, (self.0 >> 8) as u16, self.1 as u32),
            1 => Ev::Ctrl(node),
            2 => Ev::Nic(node),
            3 => Ev::Timer(node, self.1),
            _ => Ev::Probe,
        }
    }
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
    heap: EventQueue<EvWords>,
    dirty: Vec<(u32, u16)>,
    /// What the switches' pipelines emit (frames to send, ports that got work).
    out: Outputs,
    nic_tx: Vec<(FrameId, u32)>,
    timers: Vec<(u64, u64)>,
    traffic_end: Option<u64>,
    max_time: u64,
    started: bool,
    stats: FabricStats,
    /// Host stacks running `[[flow]] cc` flows: (host index, stack).
    stacks: Vec<(
        usize,
        std::rc::Rc<std::cell::RefCell<crate::host::HostStack>>,
    )>,
}

const NONE: u64 = u64::MAX;

impl Fabric {
    /// Loads a topology file and builds its fabric.
    pub fn load(path: impl AsRef<Path>, opts: &FabricOptions) -> Result<Fabric, FabricError> {
        let t = Topology::load(path)?;
        Self::new(&t, opts)
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
        self.heap.push(t, ev.pack());
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
            let Some((t, ev)) = self.heap.pop().map(|(t, e)| (t, e.unpack())) else {
                break;
            };
            self.clock.advance_to(t);
            self.prefetch_next();
            self.stats.events += 1;
            self.stats.max_pending = self.stats.max_pending.max(self.heap.len() as u64 + 1);
            match ev {
                Ev::Port(s, p, _) => {
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
                        node.egress.on_timer(&mut self.mem, t, &mut self.out);
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

    /// If the next event is a port's wakeup, starts loading the headers of the frame its wire
    /// releases next, while this event is handled: that frame has usually waited in a queue
    /// long enough to leave the cache, and the next switch (or host) parses it first thing
    /// (`perf`: 13 % of the 16-host fabric's cycles, 23 % of the 128-host one's, on that
    /// first load). The frame is named in the event (as it was when the wakeup was
    /// scheduled): looking it up through the switch, its port and the wire's ring was a chain
    /// of dependent cache misses that stalled here (`perf annotate`: ~9 % of the 128-host
    /// fabric's cycles). Only a hint to the CPU: nothing observable changes.
    #[inline]
    fn prefetch_next(&mut self) {
        let Some((_, next)) = self.heap.peek() else {
            return;
        };
        if let Ev::Port(_, _, f) = next.unpack() {
            if f != u32::MAX {
                let d = self.mem.data(crate::frame::FrameId(f));
                crate::port::prefetch(&d[..64]);
                crate::port::prefetch(&d[64..128]);
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
        let node = &mut self.nodes[s as usize];
        node.egress.service(&mut self.mem, p, now, &mut self.out);
        let mut tx = std::mem::take(&mut self.out.tx);
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
                let f = node.egress.next_on_wire(p).map_or(u32::MAX, |f| f.0);
                self.push(w, Ev::Port(s, p, f));
            }
        }
        for &(f, len) in &tx {
            self.deliver(peer, f, len);
        }
        tx.clear();
        self.out.tx = tx;
    }

    /// Marks the ports of switch `s` that got work as dirty and (re)arms its flow-control
    /// timer (PFC refresh, watchdog).
    #[inline]
    fn take_fc(&mut self, s: u32) {
        let node = &mut self.nodes[s as usize];
        for &p in &self.out.touched {
            let d = &mut node.dirty[usize::from(p)];
            if !*d {
                *d = true;
                self.dirty.push((s, p));
            }
        }
        self.out.touched.clear();
        let Some(t) = next_timer(&node.egress) else {
            return;
        };
        let t = t.max(self.clock.now() + 1);
        if t < node.timer {
            node.timer = t;
            self.heap.push(t, Ev::Ctrl(s).pack());
        }
    }

    /// Hands a frame that finished crossing a link to whatever is at its far end.
    fn deliver(&mut self, peer: Peer, f: FrameId, len: u32) {
        let now = self.clock.now();
        match peer {
            Peer::Port(s, p) => {
                self.stats.link_hops += 1;
                self.stats.switch_hops += 1;
                let node = &mut self.nodes[s as usize];
                node.egress
                    .receive(&mut self.mem, p, f, len, now, &mut self.out);
                debug_assert!(self.out.handoff.is_empty(), "a single pipe owns every port");
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

    /// Per-flow reports; those of `cc` flows completed by their host stacks' records.
    fn flow_reports(&self) -> Vec<FlowReport> {
        let mut out: Vec<FlowReport> = self.flows.flows.iter().map(FlowReport::from).collect();
        if self.stacks.is_empty() {
            return out;
        }
        let mut tx = std::collections::BTreeMap::new();
        let mut rx = std::collections::BTreeMap::new();
        for (_, s) in &self.stacks {
            let s = s.borrow();
            tx.extend(s.tx_records().into_iter().map(|r| (r.id, r)));
            rx.extend(s.rx_records().into_iter().map(|r| (r.id, r)));
        }
        for (i, (rep, rec)) in out.iter_mut().zip(&self.flows.flows).enumerate() {
            let Some(cc) = rec.cc else { continue };
            let (t, r) = (tx.get(&(i as u32)), rx.get(&(i as u32)));
            let done = t.and_then(|t| t.done_ps);
            rep.fct_ps = done.map(|d| d.saturating_sub(rec.start_ps));
            rep.reordered = r.map_or(0, |r| r.reordered);
            rep.cc = Some(flow::CcFlowReport {
                cc,
                pkts: r.map_or(0, |r| r.pkts),
                retx: t.map_or(0, |t| t.retx),
                timeouts: t.map_or(0, |t| t.timeouts),
                lost: r.map_or(0, |r| r.lost()),
                duplicates: r.map_or(0, |r| r.duplicates),
                srtt_ps: t.map_or(0, |t| t.srtt_ps),
                max_rtt_ps: t.map_or(0, |t| t.max_rtt_ps),
                completed: done.is_some(),
            });
        }
        out
    }

    /// The host stacks of `[[flow]] cc` flows: (host index, stack), to read after a run.
    pub fn stacks(
        &self,
    ) -> &[(
        usize,
        std::rc::Rc<std::cell::RefCell<crate::host::HostStack>>,
    )] {
        &self.stacks
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
            flows: self.flow_reports(),
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
                    s.pfc = n
                        .egress
                        .scheme_stats(now)
                        .map(|st| crate::scheme::StatsSet::One(Box::new(st)));
                    s
                })
                .collect(),
        }
    }
}

/// [`Switch::next_timer`], without walking the scheme list of a switch that runs no scheme
/// or only PFC (most switches of most runs: this is asked after every receive and service).
#[inline]
fn next_timer(sw: &Switch) -> Option<u64> {
    let schemes = sw.schemes();
    if schemes.per_packet() {
        sw.next_timer()
    } else {
        // No path or queue scheme: the PFC scheme's deadline is the switch's.
        schemes.pfc().and_then(|p| p.next_deadline())
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
        if self.flows.iter().any(|f| f.cc.is_some()) {
            // Host-stack flows (`[[flow]] cc`): fct_us above is the sender's (last ACK).
            let _ = writeln!(
                s,
                "\n{:<12} {:<6} {:>12} {:>9} {:>6} {:>8} {:>7} {:>6} {:>9} {:>11} {:>4}",
                "cc flow",
                "cc",
                "size_B",
                "pkts",
                "retx",
                "timeouts",
                "lost",
                "dup",
                "srtt_us",
                "max_rtt_us",
                "done"
            );
            for f in &self.flows {
                let Some(c) = &f.cc else { continue };
                let _ = writeln!(
                    s,
                    "{:<12} {:<6} {:>12} {:>9} {:>6} {:>8} {:>7} {:>6} {:>9.3} {:>11.3} {:>4}",
                    f.name,
                    c.cc.as_str(),
                    f.size_bytes.unwrap_or(0),
                    c.pkts,
                    c.retx,
                    c.timeouts,
                    c.lost,
                    c.duplicates,
                    us(c.srtt_ps),
                    us(c.max_rtt_ps),
                    if c.completed { "yes" } else { "no" }
                );
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_the_queue_words() {
        for ev in [
            Ev::Port(0, 0, 0),
            Ev::Port(u32::MAX, u16::MAX, u32::MAX),
            Ev::Port(7, 300, 12),
            Ev::Ctrl(u32::MAX),
            Ev::Nic(5),
            Ev::Timer(u32::MAX, u64::MAX),
            Ev::Timer(3, 0),
            Ev::Probe,
        ] {
            assert_eq!(ev.pack().unpack(), ev);
        }
    }
}

//! Building a fabric from a resolved topology: switches (the production pipeline), host nodes
//! (NIC + model), the `[[flow]]` sources, and the `[sim]` probes, each in its own step. The
//! event loop in `fabric/mod.rs` only runs what is built here.

use super::queue::EventQueue;
use super::{
    Fabric, FabricError, FabricMem, FabricOptions, FabricStats, FcCounter, FlowCounter, FlowLog,
    FlowRecord, HostNode, Nic, NicBfc, OnOff, Pattern, PortCounter, ProbeTarget, Probes,
    QueueCounter, Source, SwitchNode, UdpHost, NONE,
};
use crate::clock::VirtualClock;
use crate::config::{ConfigError, FlowConfig, Peer, ResolvedTopology, SimConfig, Topology};
use crate::host::cc::CcKind;
use crate::host::fabric::install_on;
use crate::host::paths::HostGraph;
use crate::host::StackConfig;
use crate::rng::Rng;
use crate::switch::{Outputs, Switch, SwitchShared};
use crate::wire::data::FrameTemplate;
use crate::workload::FlowSpec;
use std::collections::BTreeMap;

impl Fabric {
    /// Builds the fabric of a topology: every switch, every host (NIC + [`UdpHost`] with the
    /// sources of its `[[flow]]`s), probes.
    pub fn new(t: &Topology, opts: &FabricOptions) -> Result<Fabric, FabricError> {
        Self::build(t, &t.resolve()?, opts)
    }

    /// [`Fabric::new`] from a topology already resolved (`r` = `t.resolve()`).
    pub fn build(
        t: &Topology,
        r: &ResolvedTopology,
        opts: &FabricOptions,
    ) -> Result<Fabric, FabricError> {
        let b = Builder::new(t, r, opts);
        let nodes = b.switches()?;
        b.check_links()?;
        let mut hosts = b.hosts()?;
        let (flows, cc) = b.flows(&mut hosts)?;
        let probes = b.probes(&nodes, &flows)?;
        let mut fabric = Fabric {
            name: t.name.clone(),
            seed: b.seed,
            clock: VirtualClock::new(0),
            mem: FabricMem::new(b.sim.max_frames.unwrap_or(4 << 20)),
            nodes,
            hosts,
            flows,
            probes,
            heap: EventQueue::new(),
            dirty: Vec::new(),
            out: Outputs::tracking(),
            nic_tx: Vec::new(),
            timers: Vec::new(),
            traffic_end: b.traffic_end,
            max_time: b.sim.max_time.map_or(1_000_000_000_000, |t| t.0),
            started: false,
            stats: FabricStats::default(),
            stacks: Vec::new(),
        };
        if !cc.specs.is_empty() {
            fabric.stacks = install_on(
                &mut fabric,
                &cc.specs,
                |h| cc.on[h],
                true,
                |info| {
                    let mut c = StackConfig::new(0, info.nic_rate_bps, cc.base_rtt_ps);
                    c.cc = cc.kind[info.index].unwrap_or_default();
                    c
                },
            );
        }
        Ok(fabric)
    }
}

/// The `cc` flows of a topology, for [`install_on`]: what the host stacks run.
#[derive(Default)]
struct CcPlan {
    /// One per `cc` flow, id = its `[[flow]]` index (= its flow-log index).
    specs: Vec<FlowSpec>,
    /// Per host: whether it sends or receives a `cc` flow (runs a stack).
    on: Vec<bool>,
    /// Per host: the congestion control of the flows it sends (one per host: it is the
    /// stack's, [`StackConfig::cc`]).
    kind: Vec<Option<CcKind>>,
    /// Base RTT of every stack's defaults: the longest host-to-host path's, as `xoff
    /// experiment` derives it (`tools/src/experiment.rs` `path_params` without `host.base_rtt`).
    base_rtt_ps: u64,
}

/// What every construction step reads: the topology, its resolution, the `[sim]` section
/// and the options that override it.
struct Builder<'a> {
    t: &'a Topology,
    r: &'a ResolvedTopology,
    sim: SimConfig,
    seed: u64,
    traffic_end: Option<u64>,
}

impl<'a> Builder<'a> {
    fn new(t: &'a Topology, r: &'a ResolvedTopology, opts: &FabricOptions) -> Self {
        let sim = t.sim.clone().unwrap_or_default();
        Builder {
            t,
            r,
            seed: opts.seed.or(sim.seed).unwrap_or(1),
            traffic_end: opts.duration.or(sim.duration.map(|d| d.0)),
            sim,
        }
    }

    fn err(&self, key: String, reason: String) -> FabricError {
        ConfigError {
            file: self.t.path.display().to_string(),
            key,
            reason,
        }
        .into()
    }

    /// Switches: the production pipeline, one pipe owning every port, peers from the links.
    fn switches(&self) -> Result<Vec<SwitchNode>, FabricError> {
        let mut nodes = Vec::with_capacity(self.r.switches.len());
        for s in &self.r.switches {
            let n = s.spec.ports.len();
            let mut spec = s.spec.clone();
            if spec.response_auto {
                // `response_ps = "auto"` measures the software's reaction; a virtual switch
                // reacts in the event that crosses the threshold, so there is none to add.
                if let Some(b) = spec.buffer.as_mut() {
                    b.response_ps = 0;
                }
                spec.response_auto = false;
            }
            let shared = SwitchShared::new(spec);
            let egress = Switch::new(shared, vec![0; n], 0, 0).map_err(|e| FabricError::Mmu {
                switch: s.spec.name.clone(),
                err: e,
            })?;
            nodes.push(SwitchNode {
                name: s.spec.name.clone(),
                egress,
                timer: NONE,
                peers: s.peers.clone(),
                sched: vec![NONE; n],
                dirty: vec![false; n],
            });
        }
        Ok(nodes)
    }

    /// The fabric links hosts to switch ports; a host-to-host link (fine in a testbed, two
    /// veth ends) has nothing to emulate it here.
    fn check_links(&self) -> Result<(), FabricError> {
        for (i, l) in self.r.links.iter().enumerate() {
            if matches!(l, (Peer::Host(_), Peer::Host(_))) {
                return Err(self.err(
                    format!("link[{i}]"),
                    "the fabric links hosts to switch ports, not to each other".into(),
                ));
            }
        }
        Ok(())
    }

    /// Hosts: a NIC at the attached port's rate and delay unless `[sim.nic]` says otherwise,
    /// and the built-in [`UdpHost`] (its sources are added by [`Builder::flows`]).
    fn hosts(&self) -> Result<Vec<HostNode>, FabricError> {
        let sim = &self.sim;
        for name in sim.nic.keys() {
            if self.r.host_index(name).is_none() {
                return Err(self.err(format!("sim.nic.{name}"), format!("no host named `{name}`")));
            }
        }
        let nic_limit = sim.nic_queue.unwrap_or(1024).max(1);
        let mut hosts = Vec::with_capacity(self.r.hosts.len());
        for (i, h) in self.r.hosts.iter().enumerate() {
            let port = self.r.host_port(i);
            let nic = sim.nic.get(&h.name);
            let rate = nic
                .and_then(|n| n.rate)
                .map(|r| r.0)
                .or(port.map(|p| p.rate_bps))
                .unwrap_or(10_000_000_000);
            if rate == 0 {
                return Err(self.err(
                    format!("sim.nic.{}.rate", h.name),
                    "rate must be > 0".into(),
                ));
            }
            let delay = nic
                .and_then(|n| n.delay)
                .map(|d| d.0)
                .or(port.map(|p| p.delay_ps))
                .unwrap_or(0);
            let mut n = Nic::new(rate, delay, nic_limit);
            n.honor_pfc = nic.and_then(|n| n.honor_pfc).unwrap_or(sim.honor_pfc);
            if nic.and_then(|n| n.honor_bfc).unwrap_or(sim.honor_bfc) {
                n.bfc = Some(NicBfc::new(sim.nic_bfc_queues.unwrap_or(32)));
            }
            n.inflight_cap = nic
                .and_then(|n| n.inflight_cap)
                .or(sim.inflight_cap)
                .map(|s| s.0);
            hosts.push(HostNode {
                info: self.r.host_info(i, rate, delay),
                nic: n,
                peer: h.port(),
                model: Box::new(UdpHost::default()),
                rng: Rng::stream(self.seed, 0x1000_0000 + i as u64),
            });
        }
        Ok(hosts)
    }

    /// Flows: one [`Source`] per `[[flow]]` on its sending host, or a host-stack flow for a
    /// `[[flow]]` with `cc` (see [`Builder::cc_flow`]); and the flow log.
    fn flows(&self, hosts: &mut [HostNode]) -> Result<(FlowLog, CcPlan), FabricError> {
        let mut models: Vec<UdpHost> = vec![UdpHost::default(); hosts.len()];
        let mut records = Vec::with_capacity(self.t.flows.len());
        let mut names = BTreeMap::new();
        let mut cc = CcPlan {
            on: vec![false; hosts.len()],
            kind: vec![None; hosts.len()],
            ..CcPlan::default()
        };
        // Per host: the first flow of each kind it sends or receives (UDP-like, cc).
        let mut udp_at: Vec<Option<usize>> = vec![None; hosts.len()];
        let mut cc_at: Vec<Option<usize>> = vec![None; hosts.len()];
        // Per host: the first cc flow it sends (whose cc its stack runs).
        let mut first_sent: Vec<Option<usize>> = vec![None; hosts.len()];
        for (i, f) in self.t.flows.iter().enumerate() {
            if f.cc.is_some() {
                let (spec, kind, rec) = self.cc_flow(i, f, hosts, &mut names)?;
                for h in [spec.src as usize, spec.dst as usize] {
                    cc.on[h] = true;
                    cc_at[h].get_or_insert(i);
                }
                let src = spec.src as usize;
                match (cc.kind[src], first_sent[src]) {
                    (Some(k), Some(j)) if k != kind => {
                        return Err(self.err(
                            format!("flow[{i}].cc"),
                            format!(
                                "host `{}` already sends flow `{}` with cc `{k}`: a host's \
                                 stack runs one congestion control for all its flows",
                                f.src,
                                self.flow_name(j)
                            ),
                        ));
                    }
                    _ => {
                        cc.kind[src] = Some(kind);
                        first_sent[src].get_or_insert(i);
                    }
                }
                cc.specs.push(spec);
                records.push(rec);
                continue;
            }
            let (si, name, src) = self.source(i, f, hosts, &mut names)?;
            if let Some(di) = self.r.host_index(&f.dst) {
                udp_at[si].get_or_insert(i);
                udp_at[di as usize].get_or_insert(i);
            }
            records.push(FlowRecord {
                name,
                src: f.src.clone(),
                dst: f.dst.clone(),
                prio: f.prio,
                start_ps: src.start,
                size_bytes: src.remaining,
                total_pkts: src.total_pkts(),
                ..FlowRecord::default()
            });
            models[si].sources.push(src);
        }
        // A host is either a stack (cc flows) or the UDP-like sources and sink, not both: the
        // two models would claim each other's frames and timers, and a source's frames in the
        // same NIC FIFO would queue the stack's paced frames behind them (the stack assumes
        // its NIC holds about one frame, `crate::host::fabric`).
        for (h, (u, c)) in udp_at.iter().zip(&cc_at).enumerate() {
            if let (Some(u), Some(c)) = (*u, *c) {
                return Err(self.err(
                    format!("flow[{}]", u.max(c)),
                    format!(
                        "host `{}` takes part in cc flow `{}` and in flow `{}` without cc: a \
                         host runs either the host stack (cc flows) or UDP-like sources, so \
                         give the non-cc flow other hosts or a `cc` too",
                        self.r.hosts[h].name,
                        self.flow_name(c),
                        self.flow_name(u)
                    ),
                ));
            }
        }
        if !cc.specs.is_empty() {
            cc.base_rtt_ps = self.cc_checks(&cc)?;
        }
        for (h, m) in hosts.iter_mut().zip(models) {
            h.model = Box::new(m);
        }
        Ok((
            FlowLog::new(records, self.sim.delay_samples.unwrap_or(1 << 20)),
            cc,
        ))
    }

    /// Flow `i`'s name in reports.
    fn flow_name(&self, i: usize) -> String {
        self.t.flows[i]
            .name
            .clone()
            .unwrap_or_else(|| format!("f{i}"))
    }

    /// Flow `i`'s hosts and name, checked (both exist, differ, the source is linked; the
    /// name is unique): (source index, destination index, name).
    fn endpoints(
        &self,
        i: usize,
        f: &FlowConfig,
        hosts: &[HostNode],
        names: &mut BTreeMap<String, usize>,
    ) -> Result<(usize, usize, String), FabricError> {
        let key = |k: &str| format!("flow[{i}].{k}");
        let find = |k: &str, n: &str| {
            self.r
                .host_index(n)
                .map(|x| x as usize)
                .ok_or_else(|| self.err(key(k), format!("no host named `{n}`")))
        };
        let (si, di) = (find("src", &f.src)?, find("dst", &f.dst)?);
        if si == di {
            return Err(self.err(key("dst"), "a flow needs two different hosts".into()));
        }
        if hosts[si].peer.is_none() {
            return Err(self.err(
                key("src"),
                format!("host `{}` is not linked to a switch", f.src),
            ));
        }
        let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
        if names.insert(name.clone(), i).is_some() {
            return Err(self.err(key("name"), format!("duplicate flow name `{name}`")));
        }
        if f.prio > 7 {
            return Err(self.err(key("prio"), format!("{}: must be 0..=7", f.prio)));
        }
        Ok((si, di, name))
    }

    /// Flow `i` with `cc`, checked: a transport flow of the host stack (its schedule entry,
    /// congestion control and flow-log record). Keys of the UDP-like sources that the stack
    /// decides itself are errors, not silently ignored.
    fn cc_flow(
        &self,
        i: usize,
        f: &FlowConfig,
        hosts: &[HostNode],
        names: &mut BTreeMap<String, usize>,
    ) -> Result<(FlowSpec, CcKind, FlowRecord), FabricError> {
        let key = |k: &str| format!("flow[{i}].{k}");
        let cc_name = f.cc.as_deref().unwrap_or_default();
        let kind: CcKind = cc_name
            .parse()
            .map_err(|e: crate::host::cc::UnknownCc| self.err(key("cc"), e.to_string()))?;
        let not_for_cc = [
            (
                "rate",
                f.rate.is_some(),
                "paces at its congestion control's rate",
            ),
            ("stop", f.stop.is_some(), "sends `size` bytes and stops"),
            ("pkt", f.pkt.is_some(), "sends full 1500-byte frames"),
            (
                "pattern",
                f.pattern.is_some(),
                "sends as its congestion control allows",
            ),
            (
                "on",
                f.on.is_some(),
                "sends as its congestion control allows",
            ),
            (
                "off",
                f.off.is_some(),
                "sends as its congestion control allows",
            ),
            (
                "random_periods",
                f.random_periods.is_some(),
                "sends as its congestion control allows",
            ),
            (
                "vlan",
                f.vlan.is_some(),
                "sends untagged frames (priority in DSCP)",
            ),
            (
                "ecn",
                f.ecn.is_some(),
                "marks its data ECN-capable if the congestion control reads ECN (dcqcn, dctcp)",
            ),
            (
                "sport",
                f.sport.is_some(),
                "sends from port 49152 + flow index mod 16384",
            ),
            ("dport", f.dport.is_some(), "sends to port 4791"),
        ];
        if let Some((k, _, why)) = not_for_cc.iter().find(|x| x.1) {
            return Err(self.err(
                key(k),
                format!("`{k}` does not apply to a flow with `cc`: the host stack {why}"),
            ));
        }
        let size = match f.size.map(|s| s.0) {
            None => {
                return Err(self.err(
                    key("size"),
                    "a flow with `cc` needs `size` (application bytes: a finite transfer)".into(),
                ))
            }
            Some(0) => return Err(self.err(key("size"), "size must be > 0".into())),
            Some(s) => s,
        };
        let (si, di, name) = self.endpoints(i, f, hosts, names)?;
        for h in [si, di] {
            if hosts[h].nic.inflight_cap.is_some() {
                return Err(self.err(
                    key("cc"),
                    format!(
                        "host `{}` has an `inflight_cap` (sim.inflight_cap or \
                         sim.nic.{0}.inflight_cap): a flow with `cc` is capped by its \
                         congestion control's window, not by the fabric NIC",
                        hosts[h].info.name
                    ),
                ));
            }
        }
        // The same seeded stream and draw as a source's start jitter.
        let jitter = Rng::stream(self.seed, i as u64).upto(f.jitter.0);
        let spec = FlowSpec {
            id: i as u32,
            src: si as u32,
            dst: di as u32,
            size,
            start_ps: f.start.0 + jitter,
            prio: f.prio,
        };
        let rec = FlowRecord {
            name,
            src: f.src.clone(),
            dst: f.dst.clone(),
            prio: f.prio,
            start_ps: spec.start_ps,
            size_bytes: Some(size),
            cc: Some(kind),
            ..FlowRecord::default()
        };
        Ok((spec, kind, rec))
    }

    /// Checks of the `cc` flows as a whole, and the stacks' base RTT (the longest
    /// host-to-host path's, as `xoff experiment` derives it): HPCC flows need INT on every
    /// switch their packets may cross. `xoff experiment` turns `int` on at every switch of an
    /// `hpcc` cell; here the topology is the user's, so a missing one is an error.
    fn cc_checks(&self, cc: &CcPlan) -> Result<u64, FabricError> {
        let g = HostGraph::new(self.r);
        let mss = StackConfig::new(0, 1, 0).mss;
        for s in &cc.specs {
            if cc.kind[s.src as usize] != Some(CcKind::Hpcc) {
                continue;
            }
            let f = &self.t.flows[s.id as usize];
            for sw in g.path_switches(s.src as usize, s.dst as usize) {
                let spec = &self.r.switches[sw as usize].spec;
                if !spec.int {
                    return Err(self.err(
                        format!("flow[{}].cc", s.id),
                        format!(
                            "hpcc reads the INT records of every switch on the path, but switch \
                             `{}` (between `{}` and `{}`) has no `int = true`",
                            spec.name, f.src, f.dst
                        ),
                    ));
                }
            }
        }
        Ok(g.base_rtt(mss, 1).0)
    }

    /// Flow `i`, checked: its sending host's index, its name and its source.
    fn source(
        &self,
        i: usize,
        f: &FlowConfig,
        hosts: &[HostNode],
        names: &mut BTreeMap<String, usize>,
    ) -> Result<(usize, String, Source), FabricError> {
        let key = |k: &str| format!("flow[{i}].{k}");
        let (si, di, name) = self.endpoints(i, f, hosts, names)?;
        let (src, dst) = (&hosts[si].info, &hosts[di].info);
        let mask = |l: u8| {
            if l == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(l))
            }
        };
        let same_subnet =
            u32::from(src.ip) & mask(src.prefix_len) == u32::from(dst.ip) & mask(src.prefix_len);
        let dst_mac = if same_subnet {
            dst.mac
        } else if self.r.hosts[si].gateway.is_some() {
            src.gateway_mac.unwrap_or(dst.mac)
        } else {
            return Err(self.err(
                key("dst"),
                format!(
                    "`{}` ({}) is outside the subnet of `{}` ({}/{}), which has no `gateway`",
                    f.dst, dst.ip, f.src, src.ip, src.prefix_len
                ),
            ));
        };
        let mut rng = Rng::stream(self.seed, i as u64);
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
            vlan: f.vlan.unwrap_or(false),
            ecn: f.ecn.unwrap_or(false),
        };
        let pkt = f.pkt.unwrap_or(1500);
        if !(tmpl.min_len() as u32..=1792).contains(&pkt) {
            return Err(self.err(
                key("pkt"),
                format!(
                    "{pkt} B: must be {}..=1792 (frame bytes without FCS)",
                    tmpl.min_len()
                ),
            ));
        }
        let rate = f.rate.map(|r| r.0).unwrap_or(src.nic_rate_bps);
        if rate == 0 {
            return Err(self.err(key("rate"), "rate must be > 0".into()));
        }
        let size = f.size.map(|s| s.0);
        if size == Some(0) {
            return Err(self.err(key("size"), "size must be > 0".into()));
        }
        if size.is_none() && f.stop.is_none() && self.traffic_end.is_none() {
            return Err(self.err(
                key("size"),
                "an endless flow: set `size` or `stop`, or `[sim] duration`".into(),
            ));
        }
        let onoff = match f.pattern.unwrap_or_default() {
            Pattern::Constant => OnOff::Always,
            Pattern::Onoff => match (f.on, f.off) {
                (Some(on), Some(off)) if on.0 > 0 => OnOff::Periods {
                    on: on.0,
                    off: off.0,
                    random: f.random_periods.unwrap_or(false),
                },
                _ => {
                    return Err(self.err(
                        key("on"),
                        "pattern \"onoff\" needs `on` (> 0) and `off`".into(),
                    ))
                }
            },
        };
        let start = f.start.0 + jitter;
        let src = Source::new(
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
        Ok((si, name, src))
    }

    /// Probes: `[[sim.probe]]` columns, each a flow, port, queue or flow-control counter.
    fn probes(&self, nodes: &[SwitchNode], flows: &FlowLog) -> Result<Probes, FabricError> {
        let sim = &self.sim;
        let mut probes = Probes {
            interval_ps: sim.probe_interval.map_or(0, |t| t.0),
            ..Probes::default()
        };
        if !sim.probe.is_empty() && probes.interval_ps == 0 {
            return Err(self.err(
                "sim.probe_interval".into(),
                "probes need an interval > 0".into(),
            ));
        }
        for (i, p) in sim.probe.iter().enumerate() {
            let key = |k: &str| format!("sim.probe[{i}].{k}");
            let (col, target) = match (&p.flow, &p.switch, &p.port) {
                (Some(fname), None, None) => {
                    let fi = flows
                        .flows
                        .iter()
                        .position(|r| &r.name == fname)
                        .ok_or_else(|| self.err(key("flow"), format!("no flow named `{fname}`")))?;
                    let c = FlowCounter::parse(&p.counter).ok_or_else(|| {
                        self.err(
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
                    let (s, pi) = self
                        .r
                        .port_of(sw, port)
                        .ok_or_else(|| self.err(key("port"), format!("no port `{sw}:{port}`")))?;
                    let shared = nodes[s as usize].egress.shared.clone();
                    let pi = usize::from(pi);
                    match p.queue {
                        Some(q) => {
                            let nq = shared.spec.ports[pi].queues;
                            if q >= nq {
                                return Err(self.err(
                                    key("queue"),
                                    format!("queue {q} does not exist ({nq} queues)"),
                                ));
                            }
                            let c = QueueCounter::parse(&p.counter).ok_or_else(|| {
                                self.err(key("counter"), format!("`{}`: queues have depth_bytes, depth_pkts, enq_pkts, enq_bytes, deq_pkts, deq_bytes, watermark_bytes, drops, ecn_marked", p.counter))
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
                                (None, None) => return Err(self.err(key("counter"), format!("`{}`: ports have rx_pkts, rx_bytes, tx_pkts, tx_bytes, drops, depth_bytes, max_queue_bytes, pfc_xoff_sent, pfc_xon_sent, pfc_xoff_received, pfc_xon_received, bfc_pauses_sent, bfc_resumes_sent, bfc_pauses_received, bfc_resumes_received, bfc_paused, bfc_collisions, bfc_active_queues (set `queue` for queue counters)", p.counter))),
                            };
                            (format!("{sw}:{port}:{}", p.counter), target)
                        }
                    }
                }
                _ => {
                    return Err(self.err(
                        key("switch"),
                        "a probe names either `flow`, or `switch` and `port` (and maybe `queue`)"
                            .into(),
                    ))
                }
            };
            probes.add(p.name.clone().unwrap_or(col), target);
        }
        Ok(probes)
    }
}

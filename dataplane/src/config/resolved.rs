//! The topology resolved once: every name turned into an index, every link into the peer of
//! its two ends, every switch into its [`SwitchSpec`] (defaults applied, routes as port
//! indices with next-hop MACs, ECMP seed, static MACs, BFC settings), every host into its
//! addresses and the port it hangs off.
//!
//! The virtual-time fabric, `xoff host`, the experiment runner and the testbed builder all
//! read this one model, so they cannot disagree about the network. It also carries enough to
//! recompute any switch's forwarding choice from outside it (a route's candidate egress ports
//! in FIB order, the switch's seed, and what each port leads to): [`ResolvedTopology::next_hop`]
//! walks a flow the way the data plane's FIB and `loadbal`'s ECMP would.

use super::{
    parse_cidr, BfcSpec, ConfigError, Endpoint, PortConfig, PortSpec, RouteSpec, Scheme,
    SwitchConfig, SwitchSpec, Topology,
};
use crate::units::{Rate, Size, Time};
use crate::wire::MacAddr;
use loadbal::FiveTuple;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

/// What is at the far end of a switch port's or a host's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Not linked.
    None,
    /// Host index (topology order).
    Host(u32),
    /// Switch index (topology order), port index.
    Port(u32, u16),
}

/// What a host model (the fabric's or the host stack) knows about the host it runs on.
#[derive(Debug, Clone)]
pub struct HostInfo {
    pub name: String,
    pub index: usize,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// MAC of the switch port the host is linked to (its gateway's MAC), if linked.
    pub gateway_mac: Option<MacAddr>,
    pub nic_rate_bps: u64,
    pub nic_delay_ps: u64,
}

/// One host, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedHost {
    pub name: String,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    /// What the host's link leads to.
    pub peer: Peer,
    /// MAC of whatever the host's link leads to.
    pub peer_mac: Option<MacAddr>,
}

impl ResolvedHost {
    /// The switch port the host hangs off, if it is linked to one.
    pub fn port(&self) -> Option<(u32, u16)> {
        match self.peer {
            Peer::Port(s, p) => Some((s, p)),
            _ => None,
        }
    }
}

/// One switch, resolved.
#[derive(Debug, Clone)]
pub struct ResolvedSwitch {
    pub spec: SwitchSpec,
    /// Per port: what its link leads to.
    pub peers: Vec<Peer>,
}

impl ResolvedSwitch {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Seed of the switch's ECMP hash.
    pub fn seed(&self) -> u32 {
        self.spec.seed
    }

    /// Index of port `name`.
    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.spec
            .ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }

    /// The route the FIB uses for `dst`: the longest matching prefix; of two routes with the
    /// same prefix the later one, as [`crate::fib::RouteTable`] keeps it.
    pub fn route(&self, dst: Ipv4Addr) -> Option<&RouteSpec> {
        let d = u32::from(dst);
        let mut best: Option<&RouteSpec> = None;
        for r in &self.spec.routes {
            let key = u32::from(r.addr) & mask(r.len);
            if d & mask(r.len) == key && best.is_none_or(|b| r.len >= b.len) {
                best = Some(r);
            }
        }
        best
    }

    /// Candidate egress ports (with next-hop MACs) for `dst`, in FIB (ECMP group) order.
    pub fn candidates(&self, dst: Ipv4Addr) -> &[(usize, MacAddr)] {
        self.route(dst).map_or(&[], |r| &r.via)
    }

    /// The egress port this switch's ECMP picks for `t` (IPv4 destinations), as its FIB does.
    pub fn ecmp_port(&self, t: &FiveTuple) -> Option<u16> {
        let IpAddr::V4(dst) = t.dst else {
            return None;
        };
        let c = self.candidates(dst);
        loadbal::ecmp_pick(self.spec.seed, t, c.len()).map(|i| c[i].0 as u16)
    }
}

/// The whole topology, resolved (see the module doc).
#[derive(Debug, Clone)]
pub struct ResolvedTopology {
    pub name: String,
    /// Where the topology was read from (for error messages).
    pub path: PathBuf,
    pub switches: Vec<ResolvedSwitch>,
    pub hosts: Vec<ResolvedHost>,
    /// Both ends of every link, in file order.
    pub links: Vec<(Peer, Peer)>,
    switch_index: BTreeMap<String, u32>,
    host_index: BTreeMap<String, u32>,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl ResolvedTopology {
    /// Resolves `t`; errors name the file and key as loading does.
    pub fn new(t: &Topology) -> Result<ResolvedTopology, ConfigError> {
        let err = |key: String, reason: String| ConfigError {
            file: t.path.display().to_string(),
            key,
            reason,
        };
        let switch_index: BTreeMap<String, u32> = t
            .switches
            .iter()
            .enumerate()
            .rev() // the first of two equal names wins, as a search by name finds it
            .map(|(i, s)| (s.name.clone(), i as u32))
            .collect();
        let host_index: BTreeMap<String, u32> = t
            .hosts
            .iter()
            .enumerate()
            .rev()
            .map(|(i, h)| (h.name.clone(), i as u32))
            .collect();

        // Links: both ends as indices, then every port's and host's peer.
        let mut links = Vec::with_capacity(t.links.len());
        for (i, (a, b)) in t.endpoints().into_iter().enumerate() {
            let mut ends = [Peer::None; 2];
            for (end, (side, e)) in ends.iter_mut().zip([("a", &a), ("b", &b)]) {
                *end = match e {
                    Endpoint::Host(h) => Peer::Host(*host_index.get(h).ok_or_else(|| {
                        err(format!("link[{i}].{side}"), format!("no host named `{h}`"))
                    })?),
                    Endpoint::Port(s, p) => {
                        let si = *switch_index.get(s).ok_or_else(|| {
                            err(
                                format!("link[{i}].{side}"),
                                format!("no switch named `{s}`"),
                            )
                        })?;
                        let pi = t.switches[si as usize]
                            .ports
                            .iter()
                            .position(|x| &x.name == p)
                            .ok_or_else(|| {
                                err(
                                    format!("link[{i}].{side}"),
                                    format!("switch `{s}` has no port `{p}`"),
                                )
                            })?;
                        Peer::Port(si, pi as u16)
                    }
                };
            }
            links.push((ends[0], ends[1]));
        }
        let mut port_peers: Vec<Vec<Peer>> = t
            .switches
            .iter()
            .map(|s| vec![Peer::None; s.ports.len()])
            .collect();
        let mut host_peers = vec![Peer::None; t.hosts.len()];
        for &(a, b) in &links {
            for (x, y) in [(a, b), (b, a)] {
                match x {
                    Peer::Port(s, p) => port_peers[s as usize][usize::from(p)] = y,
                    Peer::Host(h) => host_peers[h as usize] = y,
                    Peer::None => {}
                }
            }
        }
        let ctx = Ctx {
            t,
            port_peers: &port_peers,
        };

        // Hosts.
        let mut hosts = Vec::with_capacity(t.hosts.len());
        for (i, h) in t.hosts.iter().enumerate() {
            let (ip, prefix_len) =
                parse_cidr(&h.ip).map_err(|r| err(format!("host[{i}].ip"), r))?;
            hosts.push(ResolvedHost {
                name: h.name.clone(),
                mac: t.host_mac(h),
                ip,
                prefix_len,
                gateway: h.gateway,
                peer: host_peers[i],
                peer_mac: ctx.mac(host_peers[i]),
            });
        }

        // Switches: the port each host is reached by (static MAC entries), then every spec.
        let host_ports = ctx.host_ports(&host_peers);
        let mut switches = Vec::with_capacity(t.switches.len());
        for (si, s) in t.switches.iter().enumerate() {
            let spec = ctx.switch_spec(si, s, &host_ports[si], &hosts)?;
            switches.push(ResolvedSwitch {
                spec,
                peers: port_peers[si].clone(),
            });
        }
        let mut r = ResolvedTopology {
            name: t.name.clone(),
            path: t.path.clone(),
            switches,
            hosts,
            links,
            switch_index,
            host_index,
        };
        r.resolve_pyrrha(t)?;
        // Issue 18: Proteus switches get the path model (it needs every switch's routes).
        super::paths::attach(&mut r).map_err(|e| err("lb".into(), e))?;
        super::conga::attach(&mut r);
        Ok(r)
    }

    // --- Pyrrha (issue 17) ---
    /// Pyrrha settings of the switches that run it: one path model of the whole network
    /// (shared), each port's one-hop BDP and IQs (its queues no priority maps to).
    fn resolve_pyrrha(&mut self, t: &Topology) -> Result<(), ConfigError> {
        if !t.switches.iter().any(|s| s.scheme == Scheme::Pyrrha) {
            return Ok(());
        }
        let model = std::sync::Arc::new(crate::scheme::pyrrha::path::PathModel::new(self));
        for (si, s) in t.switches.iter().enumerate() {
            if s.scheme != Scheme::Pyrrha {
                continue;
            }
            let err = |k: &str, reason: String| ConfigError {
                file: t.path.display().to_string(),
                key: format!("switch[{si}].pyrrha.{k}"),
                reason,
            };
            let d = s.pyrrha.clone().unwrap_or_default();
            let mut config = flowctl::PyrrhaConfig {
                iq_mode: d.iq_mode,
                ..flowctl::PyrrhaConfig::default()
            };
            config.k_pause = d.k_pause.unwrap_or(config.k_pause);
            config.k_resume = d.k_resume.unwrap_or(config.k_resume);
            config.max_iqs = d.max_iqs.unwrap_or(config.max_iqs);
            if !(config.k_resume > 0.0 && config.k_resume <= config.k_pause) {
                return Err(err("k_resume", "need 0 < k_resume <= k_pause".into()));
            }
            let sw = &self.switches[si];
            let ports = sw
                .spec
                .ports
                .iter()
                .map(|p| {
                    let frame = u64::from(p.mtu) + 18;
                    let bdp = d.hop_bdp.map_or_else(
                        || {
                            let b = u128::from(p.rate_bps) * 2 * u128::from(p.delay_ps)
                                / 8
                                / 1_000_000_000_000;
                            (b as u64).max(frame)
                        },
                        |b| b.0,
                    );
                    let used: Vec<usize> = p.prio_map.to_vec();
                    flowctl::PyrrhaPort {
                        bdp_bytes: bdp,
                        iqs: (0..p.queues.min(flowctl::pyrrha::MAX_QUEUES))
                            .filter(|q| !used.contains(q))
                            .map(|q| q as u8)
                            .collect(),
                        queues: p.queues,
                    }
                })
                .collect();
            let runs = |x: u32| t.switches[x as usize].scheme == Scheme::Pyrrha;
            let signal = sw
                .peers
                .iter()
                .map(|e| match *e {
                    Peer::Port(x, _) => runs(x),
                    Peer::Host(_) => d.hosts,
                    _ => false,
                })
                .collect();
            let switch_id =
                u16::try_from(si).map_err(|_| err("-", "more than 65535 switches".into()))?;
            self.switches[si].spec.pyrrha = Some(super::PyrrhaSpec {
                config,
                switch_id,
                model: model.clone(),
                ports,
                signal,
            });
        }
        Ok(())
    }
    // --- end Pyrrha ---

    /// Index of switch `name`.
    pub fn switch_index(&self, name: &str) -> Option<u32> {
        self.switch_index.get(name).copied()
    }

    /// Switch `name`.
    pub fn switch(&self, name: &str) -> Option<&ResolvedSwitch> {
        self.switch_index(name).map(|i| &self.switches[i as usize])
    }

    /// Index of host `name` (topology order, as schedules number hosts).
    pub fn host_index(&self, name: &str) -> Option<u32> {
        self.host_index.get(name).copied()
    }

    /// Switch and port index of `switch:port`.
    pub fn port_of(&self, switch: &str, port: &str) -> Option<(u32, u16)> {
        let s = self.switch_index(switch)?;
        Some((s, self.switches[s as usize].port_index(port)?))
    }

    /// Settings of switch `s`'s port `p`.
    pub fn port(&self, s: u32, p: u16) -> &PortSpec {
        &self.switches[s as usize].spec.ports[usize::from(p)]
    }

    /// The edge switches (with a host on some port), by index: leaves to CONGA, edges to
    /// Proteus.
    pub fn edge_switches(&self) -> Vec<u32> {
        (0..self.switches.len() as u32)
            .filter(|&s| {
                self.switches[s as usize]
                    .peers
                    .iter()
                    .any(|p| matches!(p, Peer::Host(_)))
            })
            .collect()
    }

    /// What switch `s`'s port `p` leads to.
    pub fn peer(&self, s: u32, p: u16) -> Peer {
        self.switches[s as usize].peers[usize::from(p)]
    }

    /// MAC of whatever is at `e`.
    pub fn mac(&self, e: Peer) -> Option<MacAddr> {
        match e {
            Peer::None => None,
            Peer::Host(h) => Some(self.hosts[h as usize].mac),
            Peer::Port(s, p) => Some(self.port(s, p).mac),
        }
    }

    /// Settings of the switch port host `h` hangs off (its link's rate and delay), if any.
    pub fn host_port(&self, h: usize) -> Option<&PortSpec> {
        self.hosts[h].port().map(|(s, p)| self.port(s, p))
    }

    /// Host `h` as a host model sees it, with its NIC's rate and delay.
    pub fn host_info(&self, h: usize, nic_rate_bps: u64, nic_delay_ps: u64) -> HostInfo {
        let r = &self.hosts[h];
        HostInfo {
            name: r.name.clone(),
            index: h,
            mac: r.mac,
            ip: r.ip,
            prefix_len: r.prefix_len,
            gateway_mac: self.host_port(h).map(|p| p.mac),
            nic_rate_bps,
            nic_delay_ps,
        }
    }

    /// One routed hop: the port switch `s` sends `t` out of, and what that port leads to.
    pub fn next_hop(&self, s: u32, t: &FiveTuple) -> Option<(u16, Peer)> {
        let p = self.switches[s as usize].ecmp_port(t)?;
        Some((p, self.peer(s, p)))
    }
}

/// What resolving a switch needs to know about the rest of the topology.
struct Ctx<'a> {
    t: &'a Topology,
    port_peers: &'a [Vec<Peer>],
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.t.path.display().to_string(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    fn mac(&self, e: Peer) -> Option<MacAddr> {
        match e {
            Peer::None => None,
            Peer::Host(h) => Some(self.t.host_mac(&self.t.hosts[h as usize])),
            Peer::Port(s, p) => {
                let sw = &self.t.switches[s as usize];
                Some(self.t.port_mac(&sw.name, &sw.ports[usize::from(p)]))
            }
        }
    }

    /// Per switch, per host (topology order): the port by which a breadth-first search from
    /// the host first reaches the switch, if it does.
    fn host_ports(&self, host_peers: &[Peer]) -> Vec<Vec<Option<u16>>> {
        let ns = self.port_peers.len();
        let mut out = vec![vec![None; host_peers.len()]; ns];
        for (h, &first) in host_peers.iter().enumerate() {
            let mut seen: Vec<Option<u16>> = vec![None; ns];
            let mut queue = VecDeque::from([first]);
            while let Some(e) = queue.pop_front() {
                let Peer::Port(s, p) = e else { continue };
                if seen[s as usize].is_some() {
                    continue;
                }
                seen[s as usize] = Some(p);
                for (q, &next) in self.port_peers[s as usize].iter().enumerate() {
                    if q != usize::from(p) {
                        queue.push_back(next);
                    }
                }
            }
            for (s, via) in seen.into_iter().enumerate() {
                out[s][h] = via;
            }
        }
        out
    }

    /// Resolves switch `si`: ports (defaults, peers), routes, static MACs, buffer, BFC.
    fn switch_spec(
        &self,
        si: usize,
        s: &SwitchConfig,
        host_ports: &[Option<u16>],
        hosts: &[ResolvedHost],
    ) -> Result<SwitchSpec, ConfigError> {
        let mut ports = Vec::with_capacity(s.ports.len());
        let mut index = BTreeMap::new();
        for (pi, p) in s.ports.iter().enumerate() {
            let peer_mac = self.mac(self.port_peers[si][pi]);
            ports.push(self.port_spec(si, pi, s, p, peer_mac)?);
            if index.insert(p.name.clone(), pi).is_some() {
                return Err(self.err(
                    format!("switch[{si}].port[{pi}].name"),
                    format!("duplicate port `{}`", p.name),
                ));
            }
        }
        let mut routes = Vec::with_capacity(s.routes.len());
        for (ri, r) in s.routes.iter().enumerate() {
            let key = |k: &str| format!("switch[{si}].route[{ri}].{k}");
            let (addr, len) = parse_cidr(&r.prefix).map_err(|e| self.err(key("prefix"), e))?;
            if r.via.is_empty() {
                return Err(self.err(key("via"), "a route needs at least one port"));
            }
            let mut via = Vec::with_capacity(r.via.len());
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
        let mut macs: Vec<(MacAddr, usize)> = hosts
            .iter()
            .zip(host_ports)
            .filter_map(|(h, p)| p.map(|p| (h.mac, usize::from(p))))
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
        let aquarius = if s.scheme == Scheme::Aquarius {
            Some(self.aquarius_spec(si, s, &index)?)
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
            buffer: s.buffer.as_ref().map(|b| b.mmu.clone()),
            response_auto: s.buffer.as_ref().is_some_and(|b| b.response_auto),
            pfc: s.pfc.clone(),
            watchdog: s.watchdog,
            bfc,
            // Filled once every switch is resolved (the path model needs them all).
            pyrrha: None,
            aquarius,
            lb: s.lb,
            proteus: None,
            conga: None,
            hugepages: s.hugepages,
            int: s.int,
        })
    }

    /// One port's settings: its own, else the switch's `defaults`, else the built-in ones.
    fn port_spec(
        &self,
        si: usize,
        pi: usize,
        s: &SwitchConfig,
        p: &PortConfig,
        peer_mac: Option<MacAddr>,
    ) -> Result<PortSpec, ConfigError> {
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
                return Err(self.err(key("prio_map"), format!("needs 8 entries, has {}", m.len())))
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
        let queues_rx = st.queues_rx.or(d.queues_rx).unwrap_or(1);
        if !(1..=crate::port::bpf::MAX_RX_QUEUES).contains(&queues_rx) {
            return Err(self.err(
                key("queues_rx"),
                format!(
                    "{queues_rx}: must be 1..={} (one AF_XDP socket per RX queue)",
                    crate::port::bpf::MAX_RX_QUEUES
                ),
            ));
        }
        Ok(PortSpec {
            name: p.name.clone(),
            iface: p.iface.clone().unwrap_or_else(|| p.name.clone()),
            mac: self.t.port_mac(&s.name, p),
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
            peer_mac,
            queues_rx,
            xdp_bind: st.xdp_bind.or(d.xdp_bind).unwrap_or_default(),
        })
    }

    /// Aquarius settings: which ports push the data shim (peers running Aquarius, and the
    /// listed ones), the forced mapping, the parameters.
    fn aquarius_spec(
        &self,
        si: usize,
        s: &SwitchConfig,
        index: &BTreeMap<String, usize>,
    ) -> Result<super::AquariusSpec, ConfigError> {
        let d = s.aquarius.clone().unwrap_or_default();
        let key = |k: &str| format!("switch[{si}].aquarius.{k}");
        let port = |k: &str, n: &str| {
            index
                .get(n)
                .copied()
                .ok_or_else(|| self.err(key(k), format!("no port `{n}` on switch `{}`", s.name)))
        };
        let runs = |sw: u32| self.t.switches[sw as usize].scheme == Scheme::Aquarius;
        let mut shim: Vec<bool> = self.port_peers[si]
            .iter()
            .map(|e| matches!(*e, Peer::Port(sw, _) if runs(sw)))
            .collect();
        for n in &d.shim_ports {
            shim[port("shim_ports", n)?] = true;
        }
        let mut map_queues = vec![0; shim.len()];
        for m in &d.map_queues {
            let p = port("map_queues", &m.port)?;
            map_queues[p] = m.queues;
        }
        let mut config = flowctl::AquariusConfig {
            hrtt_ps: d.hrtt.map(|t| t.0),
            ..flowctl::AquariusConfig::default()
        };
        if let Some(f) = d.table_factor {
            config.table_factor = f;
        }
        if let Some(a) = d.alpha {
            config.alpha = a;
        }
        if let Some(h) = d.hold_rsv {
            config.hold_rsv = h;
        }
        if let Some(s) = d.share_on_join {
            config.share_on_join = s;
        }
        Ok(super::AquariusSpec {
            config,
            shim,
            map_queues,
        })
    }

    /// BFC settings: which ports push the data shim (peers that speak BFC), and which
    /// ⟨ingress, egress⟩ pairs skip backpressure (up-up bounces, App. B).
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
        let peers = &self.port_peers[si];
        let runs_bfc = |sw: u32| self.t.switches[sw as usize].scheme.is_bfc();
        let has_hosts = |sw: u32| {
            self.port_peers[sw as usize]
                .iter()
                .any(|e| matches!(e, Peer::Host(_)))
        };
        let mut shim: Vec<bool> = peers
            .iter()
            .map(|e| matches!(*e, Peer::Port(sw, _) if runs_bfc(sw)))
            .collect();
        for n in &d.shim_ports {
            shim[port("shim_ports", n)?] = true;
        }
        let uplinks: Vec<usize> = match &d.uplinks {
            Some(v) => v
                .iter()
                .map(|n| port("uplinks", n))
                .collect::<Result<_, _>>()?,
            None => peers
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!(**e, Peer::Port(sw, _) if !has_hosts(sw)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fib::{Fib, Forward};
    use crate::wire::data::FrameTemplate;
    use std::path::Path;

    fn leafspine() -> (Topology, ResolvedTopology) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
        let t = Topology::load(p).unwrap();
        let r = t.resolve().unwrap();
        (t, r)
    }

    #[test]
    fn links_become_peers_both_ways() {
        let (_, r) = leafspine();
        let up1 = r.port_of("leaf1", "up1").unwrap();
        let l1 = r.port_of("spine1", "l1").unwrap();
        assert_eq!(r.peer(up1.0, up1.1), Peer::Port(l1.0, l1.1));
        assert_eq!(r.peer(l1.0, l1.1), Peer::Port(up1.0, up1.1));
        let h22 = r.host_index("h22").unwrap();
        let leaf2_h2 = r.port_of("leaf2", "h2").unwrap();
        assert_eq!(r.hosts[h22 as usize].port(), Some(leaf2_h2));
        assert_eq!(r.peer(leaf2_h2.0, leaf2_h2.1), Peer::Host(h22));
        assert_eq!(
            r.hosts[h22 as usize].peer_mac,
            Some(r.port(leaf2_h2.0, leaf2_h2.1).mac)
        );
        // Every linked port's next-hop MAC is its peer's.
        for (s, sw) in r.switches.iter().enumerate() {
            for (p, port) in sw.spec.ports.iter().enumerate() {
                assert_eq!(
                    port.peer_mac,
                    r.mac(sw.peers[p]),
                    "{}:{}",
                    sw.name(),
                    port.name
                );
                assert_ne!(r.peer(s as u32, p as u16), Peer::None);
            }
        }
        assert_eq!(r.switch("spine2").unwrap().seed(), 22);
    }

    #[test]
    fn every_switch_knows_the_port_toward_every_host() {
        let (_, r) = leafspine();
        let leaf1 = r.switch("leaf1").unwrap();
        let spine2 = r.switch("spine2").unwrap();
        for (h, host) in r.hosts.iter().enumerate() {
            let on_leaf1 = leaf1.spec.macs.iter().find(|m| m.0 == host.mac).unwrap();
            let on_spine2 = spine2.spec.macs.iter().find(|m| m.0 == host.mac).unwrap();
            // Breadth first from the host: leaf1 is reached over its host port or, for other
            // leaves' hosts, over the uplink to spine1 (spine1 is found before spine2).
            let want = match host.port() {
                Some((s, p)) if r.switches[s as usize].name() == "leaf1" => usize::from(p),
                _ => usize::from(leaf1.port_index("up1").unwrap()),
            };
            assert_eq!(on_leaf1.1, want, "host {h}");
            let (leaf, _) = host.port().unwrap();
            let want = r.switches[leaf as usize].name().replace("leaf", "l");
            assert_eq!(spine2.spec.ports[on_spine2.1].name, want);
        }
    }

    #[test]
    fn routes_keep_fib_order_and_the_longest_prefix() {
        let (_, r) = leafspine();
        let leaf1 = r.switch("leaf1").unwrap();
        let up = |n: &str| usize::from(leaf1.port_index(n).unwrap());
        let ports = |d: [u8; 4]| -> Vec<usize> {
            leaf1
                .candidates(Ipv4Addr::from(d))
                .iter()
                .map(|c| c.0)
                .collect()
        };
        assert_eq!(ports([10, 0, 3, 2]), vec![up("up1"), up("up2")]);
        assert_eq!(ports([10, 0, 1, 2]), vec![up("h2")]);
        assert!(ports([10, 0, 1, 3]).is_empty());
        assert!(ports([192, 168, 0, 1]).is_empty());
    }

    /// Walks `t` from host `src` to its destination through the resolved model (each switch's
    /// routes, seed and `loadbal`'s ECMP), checking at every hop that the data plane's FIB
    /// makes the same choice for the real frame; returns the host it reaches and the path.
    fn walk(r: &ResolvedTopology, src: usize, t: &FiveTuple) -> (Peer, Vec<String>) {
        let fibs: Vec<Fib> = r.switches.iter().map(|s| Fib::new(&s.spec)).collect();
        let h = &r.hosts[src];
        let IpAddr::V4(dst_ip) = t.dst else {
            panic!("IPv4 only")
        };
        let tmpl = FrameTemplate {
            src_mac: h.mac,
            dst_mac: h.peer_mac.unwrap(),
            src_ip: h.ip,
            dst_ip,
            sport: t.sport,
            dport: t.dport,
            prio: 0,
            vlan: false,
            ecn: false,
        };
        let mut frame = vec![0u8; 128];
        tmpl.emit_headers(&mut frame, 128);
        let mut at = h.peer;
        let mut path = Vec::new();
        while let Peer::Port(s, in_port) = at {
            let sw = &r.switches[s as usize];
            path.push(sw.name().to_string());
            assert!(path.len() <= r.switches.len(), "loop: {path:?}");
            let (out, next) = r.next_hop(s, t).expect("a route");
            let meta = crate::parse::parse(&frame).unwrap();
            match fibs[s as usize].forward(in_port, &meta) {
                Forward::Route { group, tuple } => {
                    // The switch's dispatch-time path policy (ECMP with its seed).
                    let i = loadbal::PathPolicy::ecmp(sw.spec.seed)
                        .pick(tuple, group.len(), |_| Default::default(), 0)
                        .expect("a next hop");
                    let nh = group[i];
                    assert_eq!(nh.port, out, "{}: FIB and model disagree", sw.name());
                    assert_eq!(Some(nh.mac), sw.spec.ports[usize::from(out)].peer_mac);
                    frame[0..6].copy_from_slice(&nh.mac.0);
                    frame[6..12].copy_from_slice(&sw.spec.ports[usize::from(out)].mac.0);
                }
                f => panic!("{}: {f:?}", sw.name()),
            }
            at = next;
        }
        (at, path)
    }

    #[test]
    fn a_five_tuple_walks_hop_by_hop_to_its_host() {
        let (_, r) = leafspine();
        let mut spines = std::collections::BTreeSet::new();
        for (src, s) in r.hosts.iter().enumerate() {
            for (dst, d) in r.hosts.iter().enumerate() {
                if src == dst {
                    continue;
                }
                for sport in 49152..49160 {
                    let t = FiveTuple {
                        proto: 17,
                        src: IpAddr::V4(s.ip),
                        dst: IpAddr::V4(d.ip),
                        sport,
                        dport: 4791,
                    };
                    let (end, path) = walk(&r, src, &t);
                    assert_eq!(
                        end,
                        Peer::Host(dst as u32),
                        "{} -> {}: {path:?}",
                        s.name,
                        d.name
                    );
                    let same_leaf = s.port().unwrap().0 == d.port().unwrap().0;
                    assert_eq!(path.len(), if same_leaf { 1 } else { 3 }, "{path:?}");
                    if !same_leaf {
                        spines.insert(path[1].clone());
                        // The spine is the one the first leaf's ECMP picked among its
                        // uplinks, in FIB order, with its own seed.
                        let (leaf, _) = s.port().unwrap();
                        let sw = &r.switches[leaf as usize];
                        let c = sw.candidates(d.ip);
                        let i = loadbal::ecmp_pick(sw.seed(), &t, c.len()).unwrap();
                        let Peer::Port(spine, _) = sw.peers[c[i].0] else {
                            panic!("uplink not linked to a switch")
                        };
                        assert_eq!(r.switches[spine as usize].name(), path[1]);
                    }
                }
            }
        }
        // ECMP spreads the flows over both spines.
        assert_eq!(spines.len(), 2, "{spines:?}");
    }
}

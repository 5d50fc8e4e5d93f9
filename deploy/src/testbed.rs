//! `xoff testbed`: builds a topology file as network namespaces joined by veth pairs, one
//! namespace per host and per switch, and starts `xoff run` for every switch.
//!
//! Names: namespace `<testbed>-<node>`; inside a host the interface is `eth0`, inside a switch
//! each port's interface has the port's `iface` name. Everything a testbed creates lives in its
//! namespaces (deleting them deletes the veths), plus its run directory `/run/xoff/<testbed>/`
//! with pid files, logs and control sockets, so `down` cleans up after a crash too.
//!
//! Across machines (issue 23 item 2): with `[[machine]]` tables in the file, `up --machine M`
//! builds only M's nodes and links, and each link to a node on another machine as a kernel
//! VXLAN device (`dataplane::config::machines`). The device is created in the *underlay
//! namespace* — the one holding M's underlay address, the root namespace on a real machine
//! (`--underlay-netns` names another, as the one-box demo does) — and then moved into the
//! node's namespace, where it takes the port's interface name and MAC. A VXLAN device keeps
//! its UDP socket in the namespace it was created in, so the node sends and receives through
//! the underlay namespace's routes and address while having no underlay address or route
//! itself: a node reaches other machines only through its tunnels. A device's MTU is its
//! link's `mtu` (default 1500), and the underlay interface needs 50 B more (1550 by default);
//! `up` checks that before building. GRO is off on them: merged frames would exceed the switch's AF_XDP frames.
//! Veths between two switches get 16 B more MTU than their ports' (the Xoff data shim of
//! Proteus rides inside full-size frames there); hosts keep their MTU.
//! `down --machine M` removes M's switches, namespaces (with their tunnels) and run files only;
//! the run directory goes with the last machine. Without `--machine` every node is local and
//! every link a veth, as for a file without machines.

use dataplane::config::machines::VXLAN_OVERHEAD;
use dataplane::config::{Peer, ResolvedTopology, Topology, VxlanEnd};
use dataplane::port::sys::{alive, signal};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Testbed errors.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(transparent)]
    Config(#[from] dataplane::ConfigError),
    #[error("`{cmd}` failed: {msg}")]
    Command { cmd: String, msg: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("switch `{0}` did not come up; see {1}")]
    SwitchDown(String, String),
    #[error("no host named `{0}`")]
    NoHost(String),
    #[error("{0}")]
    Machine(String),
}

type Result<T> = std::result::Result<T, TestbedError>;

/// MTU room a switch-to-switch veth gets above its ports' MTU: the longest Xoff data shim
/// (Proteus's version 2, 16 B; BFC's and Aquarius's version 1 is 4 B and fits the VLAN-tag
/// allowance a veth has anyway).
const SHIM_ROOM: u32 = {
    let (v1, v2) = (
        flowctl::wire::shim::SHIM_LEN,
        flowctl::wire::proteus::SHIM_LEN,
    );
    (if v1 > v2 { v1 } else { v2 }) as u32
};

/// The run directory of testbed `name`.
pub fn run_dir(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{name}"))
}

/// Control socket of switch `sw` in testbed `name`.
pub fn socket_path(name: &str, sw: &str) -> PathBuf {
    run_dir(name).join(format!("{sw}.sock"))
}

/// The scheduling priority (`nice`) the testbed's switches run at, above the hosts and
/// anything else on the machine (0). On one machine the switches share the CPU with the
/// traffic they carry: the hosts' stacks, `xoff host` and iperf3. A hardware switch never
/// waits for its senders to leave the CPU; a switch process at nice 0 does, and its reaction
/// time (RX ring wait, hence the PFC response term and the headroom it needs) then measures
/// the machine's load instead of the switch. Measured with two busy loops beside the 8:1
/// incast (`incast-pfc-auto.toml`): the switch's calibration p99.9 was 12.6-35.7 ms at nice 0
/// (no term fitted the buffer), 2.5-7.1 ms at -5 and 4.2-6.3 ms at -10. Not further: a switch
/// busy at line rate (adaptive polling never sleeps then) at -10 starved its own generator,
/// iperf3 asked for 2 Gbit/s into a 1 Gbit/s port sent 1.01 in one run of two
/// (`netns::udp_flood_at_twice_the_rate_is_shaped_within_2_percent`), at -5 1.88 and 1.99.
/// Idle switches sleep, so the hosts keep the CPU whenever the switches have no work.
pub const SWITCH_NICE: &str = "-5";

/// A topology to be built as a testbed.
pub struct Testbed {
    pub topo: Topology,
    /// `topo` resolved: what every veth end, address and neighbour entry is built from.
    pub resolved: ResolvedTopology,
    pub file: PathBuf,
    pub name: String,
    pub dir: PathBuf,
    /// The `xoff` binary to start switches with.
    pub xoff: PathBuf,
    /// Build only this machine's nodes (`--machine`); `None`: every node, links as veths.
    pub machine: Option<String>,
    /// Namespace holding the machine's underlay address (`None`: the caller's own).
    pub underlay_ns: Option<String>,
}

/// What `up` builds on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Nodes (hosts and switches) with a namespace here, switches first.
    pub nodes: Vec<String>,
    /// Links with both ends here: veth pairs (indices into the file's links).
    pub veths: Vec<usize>,
    /// Ends here of links to another machine: VXLAN devices.
    pub tunnels: Vec<Tunnel>,
}

/// One machine's end of a link to another machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// Index into the file's links.
    pub link: usize,
    /// The end on this machine.
    pub end: Peer,
    pub vxlan: VxlanEnd,
}

/// UDP port of the tunnels (IANA's VXLAN port, RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;

fn sh(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: args.join(" "),
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

impl Testbed {
    /// Loads `file`; `name` overrides the file's testbed name (for parallel copies).
    pub fn load(file: &Path, name: Option<&str>) -> Result<Self> {
        let topo = Topology::load(file)?;
        let resolved = topo.resolve()?;
        let name = name
            .map(str::to_string)
            .unwrap_or_else(|| topo.name.clone());
        let xoff = std::env::var_os("XOFF_BIN")
            .map(PathBuf::from)
            .unwrap_or(std::env::current_exe()?);
        Ok(Testbed {
            dir: run_dir(&name),
            file: fs::canonicalize(file)?,
            topo,
            resolved,
            name,
            xoff,
            machine: None,
            underlay_ns: None,
        })
    }

    /// Builds only `machine`'s part; its tunnels use the underlay of namespace `underlay_ns`
    /// (default: the caller's namespace).
    pub fn on_machine(mut self, machine: &str, underlay_ns: Option<&str>) -> Result<Self> {
        if !self.topo.machines.iter().any(|m| m.name == machine) {
            let known: Vec<&str> = self.topo.machines.iter().map(|m| m.name.as_str()).collect();
            return Err(TestbedError::Machine(if known.is_empty() {
                format!(
                    "{}: --machine {machine}: the file has no [[machine]] tables",
                    self.file.display()
                )
            } else {
                format!(
                    "{}: no machine named `{machine}` (machines: {})",
                    self.file.display(),
                    known.join(", ")
                )
            }));
        }
        self.machine = Some(machine.to_string());
        self.underlay_ns = underlay_ns.map(str::to_string);
        Ok(self)
    }

    /// Whether `node` is built here.
    fn is_local(&self, node: &str) -> bool {
        match &self.machine {
            None => true,
            Some(m) => self.topo.machine_of(node).is_some_and(|x| &x.name == m),
        }
    }

    /// What this machine builds: its nodes, the links inside it, its ends of the tunnels.
    pub fn plan(&self) -> Plan {
        let nodes = self
            .topo
            .switches
            .iter()
            .map(|s| s.name.clone())
            .chain(self.topo.hosts.iter().map(|h| h.name.clone()))
            .filter(|n| self.is_local(n))
            .collect();
        let (mut veths, mut tunnels) = (Vec::new(), Vec::new());
        for (i, &(a, b)) in self.resolved.links.iter().enumerate() {
            match (
                self.is_local(self.node_of(a)),
                self.is_local(self.node_of(b)),
            ) {
                (true, true) => veths.push(i),
                (here_a, here_b) if here_a != here_b => {
                    // Validation made every link between machines a vxlan link.
                    if let Some(vxlan) = self.topo.vxlan_end(i, here_a) {
                        let end = if here_a { a } else { b };
                        tunnels.push(Tunnel {
                            link: i,
                            end,
                            vxlan,
                        });
                    }
                }
                _ => {}
            }
        }
        Plan {
            nodes,
            veths,
            tunnels,
        }
    }

    /// `ip` (and `ip netns exec`) in the underlay namespace.
    fn in_underlay(&self, args: &[&str]) -> Result<String> {
        let mut v = vec!["ip"];
        if let Some(ns) = &self.underlay_ns {
            v.extend_from_slice(&["-n", ns.as_str()]);
        }
        v.extend_from_slice(args);
        sh(&v)
    }

    /// Checks that `local` is an address of the underlay namespace on an interface whose MTU
    /// carries `mtu`-byte frames plus VXLAN's 50 B.
    fn check_underlay(&self, t: &Tunnel) -> Result<()> {
        let where_ = self
            .underlay_ns
            .as_deref()
            .map_or("this namespace".to_string(), |n| format!("namespace `{n}`"));
        let addrs = self.in_underlay(&["-o", "-4", "addr", "show"])?;
        let local = t.vxlan.local.to_string();
        let dev = addrs
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let i = f.iter().position(|&x| x == "inet")?;
                (f.get(i + 1)?.split('/').next()? == local).then(|| f[1].to_string())
            })
            .ok_or_else(|| {
                TestbedError::Machine(format!(
                    "machine `{}`: underlay address {local} is not configured in {where_} (link[{}] tunnels from it)",
                    self.machine.as_deref().unwrap_or("-"),
                    t.link
                ))
            })?;
        let link = self.in_underlay(&["-o", "link", "show", "dev", &dev])?;
        let mtu: u32 = link
            .split_whitespace()
            .skip_while(|&w| w != "mtu")
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let need = t.vxlan.mtu + VXLAN_OVERHEAD;
        if mtu < need {
            return Err(TestbedError::Machine(format!(
                "underlay interface `{dev}` ({local}) has MTU {mtu}, but link[{}] carries {}-byte frames plus {VXLAN_OVERHEAD} B of VXLAN: raise it (`ip link set {dev} mtu {need}`; every NIC and switch between the machines must pass {need} B), or, if the underlay is limited to {mtu} B, set `mtu = {}` on the vxlan links",
                t.link,
                t.vxlan.mtu,
                mtu.saturating_sub(VXLAN_OVERHEAD)
            )));
        }
        Ok(())
    }

    /// Temporary name of a link end before it moves into its namespace (unique per process:
    /// `down` finds leftovers of a failed `up` by it).
    fn tmp_name(kind: char, i: usize) -> String {
        format!("x{kind}{}n{i}", std::process::id() % 100_000)
    }

    /// Creates this machine's end of a tunnel in the underlay namespace and moves it into the
    /// node's namespace.
    fn add_tunnel(&self, t: &Tunnel) -> Result<()> {
        let tmp = Self::tmp_name('v', t.link);
        let v = t.vxlan;
        self.in_underlay(&[
            "link",
            "add",
            &tmp,
            "type",
            "vxlan",
            "id",
            &v.vni.to_string(),
            "local",
            &v.local.to_string(),
            "remote",
            &v.remote.to_string(),
            "dstport",
            &VXLAN_PORT.to_string(),
            "nolearning",
        ])?;
        self.in_underlay(&["link", "set", &tmp, "mtu", &v.mtu.to_string()])?;
        let ns = self.ns(self.node_of(t.end));
        self.in_underlay(&["link", "set", &tmp, "netns", &ns])?;
        self.attach(&tmp, t.end)?;
        // Decapsulated frames would be merged by GRO into one larger than an AF_XDP frame.
        self.in_ns(
            self.node_of(t.end),
            &["ethtool", "-K", self.iface_of(t.end), "gro", "off"],
        )?;
        Ok(())
    }

    /// Names, addresses and brings up link end `tmp`, already in its node's namespace. (`dev`
    /// before the name: a port may be called `up`.)
    fn attach(&self, tmp: &str, e: Peer) -> Result<()> {
        let node = self.node_of(e);
        let ifn = self.iface_of(e);
        self.in_ns(node, &["ip", "link", "set", tmp, "name", ifn])?;
        if let Some(mac) = self.resolved.mac(e) {
            self.in_ns(
                node,
                &["ip", "link", "set", "dev", ifn, "address", &mac.to_string()],
            )?;
        }
        self.in_ns(node, &["ip", "link", "set", "dev", ifn, "up"])?;
        if matches!(e, Peer::Host(_)) {
            // Forwarded TCP/UDP would otherwise carry partial checksums.
            self.in_ns(node, &["ethtool", "-K", ifn, "tx", "off"])?;
        }
        Ok(())
    }

    /// Namespace of a node.
    pub fn ns(&self, node: &str) -> String {
        format!("{}-{}", self.name, node)
    }

    fn in_ns(&self, node: &str, args: &[&str]) -> Result<String> {
        let ns = self.ns(node);
        let mut v = vec!["ip", "netns", "exec", ns.as_str()];
        v.extend_from_slice(args);
        sh(&v)
    }

    /// Interface of a link end inside its namespace.
    fn iface_of(&self, e: Peer) -> &str {
        match e {
            Peer::Port(s, p) => &self.resolved.port(s, p).iface,
            Peer::Host(_) | Peer::None => "eth0",
        }
    }

    /// Node (namespace) of a link end.
    fn node_of(&self, e: Peer) -> &str {
        match e {
            Peer::Host(h) => &self.resolved.hosts[h as usize].name,
            Peer::Port(s, _) => self.resolved.switches[s as usize].name(),
            Peer::None => "",
        }
    }

    /// Creates everything and starts the switches. On failure, removes what it created.
    pub fn up(&self, run_args: &[String]) -> Result<()> {
        let r = self.try_up(run_args);
        if r.is_err() {
            let _ = self.down();
        }
        r
    }

    fn try_up(&self, run_args: &[String]) -> Result<()> {
        let plan = self.plan();
        for t in &plan.tunnels {
            self.check_underlay(t)?;
        }
        fs::create_dir_all(&self.dir)?;
        for n in &plan.nodes {
            sh(&["ip", "netns", "add", &self.ns(n)])?;
            self.in_ns(n, &["ip", "link", "set", "lo", "up"])?;
            // Keep IPv6 autoconfiguration and its multicast chatter out of experiments.
            self.in_ns(n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            self.in_ns(
                n,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            )?;
        }
        for &i in &plan.veths {
            let (a, b) = self.resolved.links[i];
            let tmp_a = Self::tmp_name('a', i);
            let tmp_b = Self::tmp_name('b', i);
            // Issue 23 item 4 (branch nic): a switch port reading several RX queues
            // (`queues_rx`) gets a veth with that many queues on both ends, so the far end's
            // flows spread over its TX queues and arrive on as many RX queues.
            let queues = [a, b]
                .iter()
                .filter_map(|e| match *e {
                    Peer::Port(s, p) => Some(self.resolved.port(s, p).queues_rx),
                    _ => None,
                })
                .max()
                .unwrap_or(1)
                .to_string();
            let q: &[&str] = if queues == "1" {
                &[]
            } else {
                &["numtxqueues", &queues, "numrxqueues", &queues]
            };
            sh(&[
                &["ip", "link", "add", &tmp_a][..],
                q,
                &["type", "veth", "peer", "name", &tmp_b],
                q,
            ]
            .concat())?;
            if let (Peer::Port(sa, pa), Peer::Port(sb, pb)) = (a, b) {
                // A link between two switches carries the Xoff data shim inside full-size
                // frames, and a veth drops frames longer than its peer's MTU + 18 B: give it
                // the largest shim's room, as fabrics give inter-switch links a larger MTU.
                let mtu = self
                    .resolved
                    .port(sa, pa)
                    .mtu
                    .max(self.resolved.port(sb, pb).mtu)
                    + SHIM_ROOM;
                for tmp in [&tmp_a, &tmp_b] {
                    sh(&["ip", "link", "set", tmp, "mtu", &mtu.to_string()])?;
                }
            }
            for (tmp, e) in [(&tmp_a, a), (&tmp_b, b)] {
                sh(&["ip", "link", "set", tmp, "netns", &self.ns(self.node_of(e))])?;
                self.attach(tmp, e)?;
            }
        }
        for t in &plan.tunnels {
            self.add_tunnel(t)?;
        }
        self.configure_hosts()?;
        for s in &self.topo.switches {
            if self.is_local(&s.name) {
                self.start_switch(&s.name, run_args)?;
            }
        }
        Ok(())
    }

    fn configure_hosts(&self) -> Result<()> {
        let mtu = self.topo.path_mtu();
        for (h, cfg) in self.resolved.hosts.iter().zip(&self.topo.hosts) {
            if !self.is_local(&h.name) {
                continue;
            }
            self.in_ns(&h.name, &["ip", "addr", "add", &cfg.ip, "dev", "eth0"])?;
            if mtu < dataplane::config::machines::DEFAULT_VXLAN_MTU {
                // A tunnel of the testbed carries less than 1500 B: no host may send more.
                self.in_ns(
                    &h.name,
                    &["ip", "link", "set", "eth0", "mtu", &mtu.to_string()],
                )?;
            }
            let (addr, len) = (h.ip, h.prefix_len);
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            // Static neighbours: every other host on the same subnet, and the gateway.
            for o in &self.resolved.hosts {
                if o.name == h.name {
                    continue;
                }
                let oa = o.ip;
                if u32::from(oa) & mask == u32::from(addr) & mask {
                    self.in_ns(
                        &h.name,
                        &[
                            "ip",
                            "neigh",
                            "replace",
                            &oa.to_string(),
                            "lladdr",
                            &o.mac.to_string(),
                            "dev",
                            "eth0",
                            "nud",
                            "permanent",
                        ],
                    )?;
                }
            }
            if let Some(gw) = h.gateway {
                if let Some(m) = h.peer_mac {
                    self.in_ns(
                        &h.name,
                        &[
                            "ip",
                            "neigh",
                            "replace",
                            &gw.to_string(),
                            "lladdr",
                            &m.to_string(),
                            "dev",
                            "eth0",
                            "nud",
                            "permanent",
                        ],
                    )?;
                }
                self.in_ns(
                    &h.name,
                    &[
                        "ip",
                        "route",
                        "add",
                        "default",
                        "via",
                        &gw.to_string(),
                        "dev",
                        "eth0",
                        "onlink",
                    ],
                )?;
            }
        }
        Ok(())
    }

    fn start_switch(&self, sw: &str, run_args: &[String]) -> Result<()> {
        let log_path = self.dir.join(format!("{sw}.log"));
        let log = fs::File::create(&log_path)?;
        let sock = socket_path(&self.name, sw);
        let _ = fs::remove_file(&sock);
        let mut cmd = Command::new("nice");
        cmd.args(["-n", SWITCH_NICE, "ip", "netns", "exec", &self.ns(sw)])
            .arg(&self.xoff)
            .args(["run", "--config"])
            .arg(&self.file)
            .args(["--switch", sw, "--ctl"])
            .arg(&sock)
            .args(run_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = cmd.spawn()?;
        fs::write(self.dir.join(format!("{sw}.pid")), child.id().to_string())?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if dataplane::ctl::request(&sock, &dataplane::ctl::Request::Stats).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(TestbedError::SwitchDown(
            sw.to_string(),
            log_path.display().to_string(),
        ))
    }

    /// Stops the switches and deletes the namespaces and run directory (with `--machine`:
    /// this machine's switches, namespaces, tunnels and run files). Safe to call on a partly
    /// built or crashed testbed.
    pub fn down(&self) -> Result<()> {
        let plan = self.plan();
        let switches: Vec<&str> = self
            .topo
            .switches
            .iter()
            .map(|s| s.name.as_str())
            .filter(|s| self.is_local(s))
            .collect();
        let mut pids = Vec::new();
        for s in &switches {
            if let Ok(p) = fs::read_to_string(self.dir.join(format!("{s}.pid"))) {
                if let Ok(pid) = p.trim().parse::<i32>() {
                    pids.push(pid);
                }
            }
        }
        // Also any process still running inside a node namespace (e.g. a re-started switch).
        for n in &plan.nodes {
            if let Ok(out) = sh(&["ip", "netns", "pids", &self.ns(n)]) {
                pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
            }
        }
        kill_all(&pids);
        let existing = sh(&["ip", "netns", "list"]).unwrap_or_default();
        let exists = |ns: &str| {
            existing
                .lines()
                .any(|l| l.split_whitespace().next() == Some(ns))
        };
        // Tunnels first: a namespace is destroyed asynchronously after `ip netns del`, and a
        // device still holding the VNI would make the next `up` fail.
        for t in &plan.tunnels {
            let node = self.node_of(t.end);
            if exists(&self.ns(node)) {
                let _ = self.in_ns(node, &["ip", "link", "del", "dev", self.iface_of(t.end)]);
            }
        }
        let mut errors = String::new();
        for n in &plan.nodes {
            let ns = self.ns(n);
            if exists(&ns) {
                if let Err(e) = sh(&["ip", "netns", "del", &ns]) {
                    let _ = writeln!(errors, "{e}");
                }
            }
        }
        // Links created but never moved into a namespace (a failed `up`): veths here, tunnels
        // in the underlay namespace.
        let tag = format!("{}n", std::process::id() % 100_000);
        let leftovers = |out: String| -> Vec<String> {
            out.lines()
                .filter_map(|l| l.split(':').nth(1))
                .map(|s| s.trim().split('@').next().unwrap_or("").to_string())
                .filter(|n| {
                    ["xa", "xb", "xv"]
                        .iter()
                        .any(|k| n.starts_with(&format!("{k}{tag}")))
                })
                .collect()
        };
        for n in leftovers(sh(&["ip", "-o", "link", "show"]).unwrap_or_default()) {
            let _ = sh(&["ip", "link", "del", &n]);
        }
        if !plan.tunnels.is_empty() {
            let out = self
                .in_underlay(&["-o", "link", "show"])
                .unwrap_or_default();
            for n in leftovers(out) {
                let _ = self.in_underlay(&["link", "del", &n]);
            }
        }
        if self.machine.is_some() {
            // Only this machine's run files; the directory goes with the last machine.
            for s in &switches {
                for ext in ["pid", "log", "sock", "afc"] {
                    let _ = fs::remove_file(self.dir.join(format!("{s}.{ext}")));
                }
            }
            let _ = fs::remove_dir(&self.dir);
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(TestbedError::Command {
                cmd: "ip netns del".into(),
                msg: errors,
            })
        }
    }

    /// Runs `cmd` in `host`'s namespace with inherited stdio; returns its exit code.
    pub fn exec(&self, host: &str, cmd: &[String]) -> Result<i32> {
        if !self.topo.hosts.iter().any(|h| h.name == host)
            && !self.topo.switches.iter().any(|s| s.name == host)
        {
            return Err(TestbedError::NoHost(host.to_string()));
        }
        let st = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .args(cmd)
            .status()?;
        Ok(st.code().unwrap_or(128))
    }

    /// A `Command` that runs `program` inside `node`'s namespace.
    pub fn command(&self, node: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(node), program]);
        c
    }
}

fn kill_all(pids: &[i32]) {
    for &p in pids {
        signal(p, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in pids {
        if alive(p) {
            signal(p, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn topo(f: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("topologies")
            .join(f)
    }

    #[test]
    fn machines_split_nodes_and_build_each_tunnel_from_both_ends() {
        let tb = Testbed::load(&topo("leafspine-vxlan.toml"), Some("t")).unwrap();
        // On one box: every node, every link a veth, as leafspine.toml.
        let all = tb.plan();
        assert_eq!(all.nodes.len(), 11);
        assert_eq!(all.veths, (0..12).collect::<Vec<_>>());
        assert!(all.tunnels.is_empty());
        let a = Testbed::load(&topo("leafspine-vxlan.toml"), Some("t"))
            .unwrap()
            .on_machine("A", Some("ua"))
            .unwrap()
            .plan();
        let b = Testbed::load(&topo("leafspine-vxlan.toml"), Some("t"))
            .unwrap()
            .on_machine("B", None)
            .unwrap()
            .plan();
        // The machines hold every node exactly once.
        let mut nodes: Vec<String> = a.nodes.iter().chain(&b.nodes).cloned().collect();
        nodes.sort();
        let mut want = all.nodes.clone();
        want.sort();
        assert_eq!(nodes, want);
        assert!(a.nodes.iter().all(|n| !b.nodes.contains(n)));
        // Host links stay veths on A; B has only tunnel ends.
        assert_eq!(a.veths, (0..6).collect::<Vec<_>>());
        assert!(b.veths.is_empty());
        assert_eq!(a.tunnels.len(), 6);
        assert_eq!(b.tunnels.len(), 6);
        let (ua, ub) = (tb.topo.machines[0].underlay, tb.topo.machines[1].underlay);
        for (x, y) in a.tunnels.iter().zip(&b.tunnels) {
            assert_eq!(x.link, y.link);
            assert_eq!(x.vxlan.vni, y.vxlan.vni);
            assert_eq!((x.vxlan.local, x.vxlan.remote), (ua, ub));
            assert_eq!((y.vxlan.local, y.vxlan.remote), (ub, ua));
            let (la, lb) = tb.resolved.links[x.link];
            assert_eq!((x.end, y.end), (la, lb));
            assert!(tb.node_of(x.end).starts_with("leaf"));
            assert!(tb.node_of(y.end).starts_with("spine"));
        }
        let vnis: BTreeSet<u32> = a.tunnels.iter().map(|t| t.vxlan.vni).collect();
        assert_eq!(vnis.len(), 6);
    }

    #[test]
    fn files_without_machines_build_as_before_and_reject_machine() {
        for f in fs::read_dir(topo("")).unwrap() {
            let f = f.unwrap().path();
            let tb = Testbed::load(&f, None).unwrap();
            let p = tb.plan();
            assert_eq!(p.veths.len(), tb.topo.links.len(), "{}", f.display());
            assert!(p.tunnels.is_empty());
            if tb.topo.machines.is_empty() {
                let e = Testbed::load(&f, None)
                    .unwrap()
                    .on_machine("A", None)
                    .err()
                    .unwrap()
                    .to_string();
                assert!(e.contains("no [[machine]] tables"), "{e}");
            } else {
                let e = Testbed::load(&f, None)
                    .unwrap()
                    .on_machine("C", None)
                    .err()
                    .unwrap()
                    .to_string();
                assert!(e.contains("no machine named `C` (machines: A, B)"), "{e}");
            }
        }
    }
}

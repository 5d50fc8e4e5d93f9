//! `xoff testbed`: builds a topology file as network namespaces joined by veth pairs, one
//! namespace per host and per switch, and starts `xoff run` for every switch.
//!
//! Names: namespace `<testbed>-<node>`; inside a host the interface is `eth0`, inside a switch
//! each port's interface has the port's `iface` name. Everything a testbed creates lives in its
//! namespaces (deleting them deletes the veths), plus its run directory `/run/xoff/<testbed>/`
//! with pid files, logs and control sockets, so `down` cleans up after a crash too.

use dataplane::config::{Peer, ResolvedTopology, Topology};
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
}

type Result<T> = std::result::Result<T, TestbedError>;

/// The run directory of testbed `name`.
pub fn run_dir(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{name}"))
}

/// Control socket of switch `sw` in testbed `name`.
pub fn socket_path(name: &str, sw: &str) -> PathBuf {
    run_dir(name).join(format!("{sw}.sock"))
}

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
}

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
        })
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
        fs::create_dir_all(&self.dir)?;
        let nodes: Vec<&str> = self
            .topo
            .switches
            .iter()
            .map(|s| s.name.as_str())
            .chain(self.topo.hosts.iter().map(|h| h.name.as_str()))
            .collect();
        for n in &nodes {
            sh(&["ip", "netns", "add", &self.ns(n)])?;
            self.in_ns(n, &["ip", "link", "set", "lo", "up"])?;
            // Keep IPv6 autoconfiguration and its multicast chatter out of experiments.
            self.in_ns(n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            self.in_ns(
                n,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            )?;
        }
        for (i, &(a, b)) in self.resolved.links.iter().enumerate() {
            let tmp_a = format!("xt{}a{i}", std::process::id() % 100_000);
            let tmp_b = format!("xt{}b{i}", std::process::id() % 100_000);
            sh(&[
                "ip", "link", "add", &tmp_a, "type", "veth", "peer", "name", &tmp_b,
            ])?;
            for (tmp, e) in [(&tmp_a, a), (&tmp_b, b)] {
                let node = self.node_of(e);
                let ns = self.ns(node);
                sh(&["ip", "link", "set", tmp, "netns", &ns])?;
                let ifn = self.iface_of(e);
                self.in_ns(node, &["ip", "link", "set", tmp, "name", ifn])?;
                if let Some(mac) = self.resolved.mac(e) {
                    self.in_ns(
                        node,
                        &["ip", "link", "set", ifn, "address", &mac.to_string()],
                    )?;
                }
                self.in_ns(node, &["ip", "link", "set", ifn, "up"])?;
                if matches!(e, Peer::Host(_)) {
                    // Forwarded TCP/UDP would otherwise carry partial checksums.
                    self.in_ns(node, &["ethtool", "-K", ifn, "tx", "off"])?;
                }
            }
        }
        self.configure_hosts()?;
        for s in &self.topo.switches {
            self.start_switch(&s.name, run_args)?;
        }
        Ok(())
    }

    fn configure_hosts(&self) -> Result<()> {
        for (h, cfg) in self.resolved.hosts.iter().zip(&self.topo.hosts) {
            self.in_ns(&h.name, &["ip", "addr", "add", &cfg.ip, "dev", "eth0"])?;
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
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns(sw)])
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

    /// Stops the switches and deletes the namespaces and run directory. Safe to call on a
    /// partly built or crashed testbed.
    pub fn down(&self) -> Result<()> {
        let mut pids = Vec::new();
        for s in &self.topo.switches {
            if let Ok(p) = fs::read_to_string(self.dir.join(format!("{}.pid", s.name))) {
                if let Ok(pid) = p.trim().parse::<i32>() {
                    pids.push(pid);
                }
            }
        }
        // Also any process still running inside a switch namespace (e.g. a re-started switch).
        for s in &self.topo.switches {
            if let Ok(out) = sh(&["ip", "netns", "pids", &self.ns(&s.name)]) {
                pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
            }
        }
        for h in &self.topo.hosts {
            if let Ok(out) = sh(&["ip", "netns", "pids", &self.ns(&h.name)]) {
                pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
            }
        }
        kill_all(&pids);
        let existing = sh(&["ip", "netns", "list"]).unwrap_or_default();
        let mut errors = String::new();
        let nodes = self
            .topo
            .switches
            .iter()
            .map(|s| s.name.clone())
            .chain(self.topo.hosts.iter().map(|h| h.name.clone()));
        for n in nodes {
            let ns = self.ns(&n);
            if existing
                .lines()
                .any(|l| l.split_whitespace().next() == Some(ns.as_str()))
            {
                if let Err(e) = sh(&["ip", "netns", "del", &ns]) {
                    let _ = writeln!(errors, "{e}");
                }
            }
        }
        // Links created but never moved into a namespace (a failed `up`).
        if let Ok(out) = sh(&["ip", "-o", "link", "show"]) {
            let tag = format!("xt{}", std::process::id() % 100_000);
            for l in out.lines() {
                if let Some(name) = l
                    .split(':')
                    .nth(1)
                    .map(|s| s.trim().split('@').next().unwrap_or(""))
                {
                    if name.starts_with(&tag) {
                        let _ = sh(&["ip", "link", "del", name]);
                    }
                }
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
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

//! `xoff bench line-rate`: forwarding rate, CPU per packet and latency of Xoff side by side with
//! its peers, measured in the same run on the same machine.
//!
//! Setup: three namespaces, `gen` ─ `dut` ─ `sink`, joined by veth. The generator is an AF_XDP
//! sender (`xoff bench gen`) pinned to one core; the device under test forwards between `d1`
//! and `d2`, pinned to the other; the sink is an XDP program that counts and drops
//! (`xoff bench sink`), or, for latency, an AF_XDP receiver reading send timestamps.
//! For every frame size and peer: the received rate at the sink over the steady middle of a
//! maximum-rate run, the DUT's CPU time per forwarded packet (from /proc: the DUT's processes,
//! or, for the kernel bridge, all CPU time but the generator's), the whole machine's CPU per
//! packet, and one-way latency p50/p99 at half the measured maximum rate.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Options of a harness run.
#[derive(Debug, Clone)]
pub struct Opts {
    pub xoff: PathBuf,
    pub duration: f64,
    pub sizes: Vec<usize>,
    pub peers: Vec<String>,
    pub results: Option<PathBuf>,
}

/// The peers a default run measures, in report order. The harness also knows the two-worker
/// A/B of the hand-off rings (issue 20 item 6), run on request (`--peers`):
/// `xoff-2w-ringbuf` and `xoff-2w-crossbeam` are `xoff run --workers 2 --handoff RING` with
/// both workers on the DUT core; with `-2c` appended (`xoff-2w-ringbuf-2c`) the workers may run
/// on either core, the generator's too. Port `d1` belongs to worker 0 and `d2` to worker 1,
/// so every forwarded frame crosses from one to the other; the row's note gives each
/// worker's counters.
pub const PEERS: &[&str] = &[
    "xoff",
    "xoff-pfc",
    "fwd",
    "bridge",
    "ovs-afxdp",
    "ovs-system",
    "testpmd",
];

/// One measurement.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Row {
    pub peer: String,
    pub size: usize,
    /// Frames per second received at the sink; `None` if the peer could not run.
    pub pps: Option<f64>,
    /// Offered by the generator over the same window.
    pub offered_pps: Option<f64>,
    pub dut_cpu_ns_per_pkt: Option<f64>,
    pub machine_cpu_ns_per_pkt: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Why the peer did not run, or anything unusual.
    pub note: String,
    /// Busy CPU share just before the measurement (foreign load).
    pub load_before: f64,
    /// How the peer was started and configured (exact command lines), for the record.
    pub config: Vec<String>,
    /// Where the DUT's and the generator's threads ran during the measurement window:
    /// `name@cpu share%` per thread with at least 1 % of a core (`/proc/PID/task`).
    pub placement: String,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub date: String,
    pub machine: String,
    pub kernel: String,
    pub commit: String,
    pub rows: Vec<Row>,
    pub idle_cpu_adaptive: Option<f64>,
    pub idle_cpu_busy: Option<f64>,
}

pub(crate) const GEN_MAC: &str = "02:58:00:00:00:01";
pub(crate) const SINK_MAC: &str = "02:58:00:00:00:02";

pub(crate) fn sh(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| args.join(" "))?;
    if !out.status.success() {
        bail!(
            "`{}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// (busy, total) jiffies of the whole machine.
fn cpu_jiffies() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// utime + stime of a process (all threads), jiffies.
fn proc_jiffies(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
}

/// Nanoseconds the live threads of `pid` have run (`/proc/PID/task/*/schedstat`): exact,
/// where `/proc/PID/stat` counts whole 10 ms ticks, too coarse for an idle process.
fn proc_runtime_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn jiffy_ns() -> f64 {
    1e9 / 100.0
}

/// Waits (up to 15 s) until the machine is nearly idle; returns the busy share seen last.
fn wait_quiet() -> f64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (b0, t0) = cpu_jiffies();
        std::thread::sleep(Duration::from_millis(500));
        let (b1, t1) = cpu_jiffies();
        let busy = (b1 - b0) as f64 / (t1 - t0).max(1) as f64;
        if busy < 0.10 || Instant::now() > deadline {
            return busy;
        }
    }
}

/// The threads of `pids` now: (tid, name, CPU it last ran on, utime + stime in jiffies), from
/// `/proc/PID/task/TID/stat`.
fn threads(pids: &[u32]) -> Vec<(u32, String, u32, u64)> {
    let mut v = Vec::new();
    for pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for e in dir.flatten() {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            let (Some(l), Some(r)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let name = stat[l + 1..r].to_string();
            let f: Vec<&str> = stat[r + 1..].split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
            // After the name: state is field 3, utime 14, stime 15, processor 39 (1-based).
            let tid = e.file_name().to_string_lossy().parse().unwrap_or(0);
            v.push((tid, name, num(36) as u32, num(11) + num(12)));
        }
    }
    v
}

/// Where the threads of `pids` ran between two [`threads`] samples `secs` apart:
/// `name@cpu share%` for every thread with at least 1 % of a core in the window (cpu: the one
/// it ran on last).
fn placement(
    before: &[(u32, String, u32, u64)],
    after: &[(u32, String, u32, u64)],
    secs: f64,
) -> String {
    after
        .iter()
        .filter_map(|(tid, name, cpu, j)| {
            let j0 = before.iter().find(|b| b.0 == *tid).map_or(0, |b| b.3);
            let share = (j - j0) as f64 * jiffy_ns() / 1e9 / secs * 100.0;
            (share >= 1.0).then(|| format!("{name}@{cpu} {share:.0}%"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Processes using CPU right now (for the record of what else ran).
fn foreign_load() -> String {
    let out = sh(&["ps", "-eo", "pcpu,comm", "--sort=-pcpu", "--no-headers"]).unwrap_or_default();
    out.lines()
        .take(4)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) struct Net {
    prefix: String,
}

impl Net {
    fn ns(&self, n: &str) -> String {
        format!("{}-{n}", self.prefix)
    }

    fn exec(&self, n: &str, args: &[&str]) -> Result<String> {
        let ns = self.ns(n);
        let mut v = vec!["ip", "netns", "exec", ns.as_str()];
        v.extend_from_slice(args);
        sh(&v)
    }

    pub(crate) fn up(prefix: &str) -> Result<Net> {
        let net = Net {
            prefix: prefix.to_string(),
        };
        for n in ["gen", "dut", "sink"] {
            sh(&["ip", "netns", "add", &net.ns(n)])?;
            net.exec(n, &["ip", "link", "set", "lo", "up"])?;
            net.exec(n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
        }
        for (a, an, ai, b, bn, bi) in [
            ("gen", "eth0", GEN_MAC, "dut", "d1", ""),
            ("dut", "d2", "", "sink", "eth0", SINK_MAC),
        ] {
            let ta = format!("xb{}{an}", std::process::id() % 100_000);
            let tb = format!("xb{}{bn}", std::process::id() % 100_000);
            sh(&[
                "ip", "link", "add", &ta, "type", "veth", "peer", "name", &tb,
            ])?;
            for (t, node, name, mac) in [(&ta, a, an, ai), (&tb, b, bn, bi)] {
                sh(&["ip", "link", "set", t, "netns", &net.ns(node)])?;
                net.exec(node, &["ip", "link", "set", t, "name", name])?;
                if !mac.is_empty() {
                    net.exec(node, &["ip", "link", "set", name, "address", mac])?;
                }
                net.exec(node, &["ip", "link", "set", name, "up"])?;
            }
        }
        Ok(net)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in ["gen", "dut", "sink"] {
            if let Ok(p) = sh(&["ip", "netns", "pids", &self.ns(n)]) {
                for pid in p.split_whitespace() {
                    let _ = sh(&["kill", "-9", pid]);
                }
            }
            let _ = sh(&["ip", "netns", "del", &self.ns(n)]);
        }
    }
}

/// A running device under test.
struct Dut {
    children: Vec<Child>,
    /// The control socket of an `xoff run` DUT.
    ctl: Option<PathBuf>,
    /// Processes whose CPU time is the DUT's (empty: kernel forwarding).
    pids: Vec<u32>,
    cleanup: Vec<Vec<String>>,
    /// Every command that started or configured it, in order.
    config: Vec<String>,
}

impl Drop for Dut {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = sh(&["kill", "-INT", &c.id().to_string()]);
        }
        let t = Instant::now();
        for c in &mut self.children {
            while t.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for cmd in &self.cleanup {
            let v: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let _ = sh(&v);
        }
        // Let the interfaces be re-bound (AF_XDP: ~30 ms busy after close).
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn dut_topology(pfc: bool) -> String {
    let extra = if pfc {
        "pfc = { enable_mask = 8 }\n"
    } else {
        ""
    };
    dut_file(
        "bench",
        &format!(
            "defaults = {{ rate = \"100Gbit\", queues = 8 }}\n\
             port = [{{ name = \"d1\" }}, {{ name = \"d2\" }}]\n\
             buffer = {{ buffer_bytes = 4000000, lossless_pgs = [3] }}\n{extra}"
        ),
    )
}

/// A topology file of the harness's three nodes: switch `dut` (ports `d1`, `d2`, configured
/// by `switch`, the lines after its name) between hosts `gen` and `sink`.
pub(crate) fn dut_file(name: &str, switch: &str) -> String {
    format!(
        r#"name = "{name}"
[[switch]]
name = "dut"
{switch}[[host]]
name = "gen"
ip = "10.9.0.1/24"
mac = "{GEN_MAC}"
[[host]]
name = "sink"
ip = "10.9.0.2/24"
mac = "{SINK_MAC}"
[[link]]
a = "gen"
b = "dut:d1"
[[link]]
a = "sink"
b = "dut:d2"
"#
    )
}

pub(crate) fn spawn_in(
    net: &Net,
    node: &str,
    core: &str,
    args: &[&str],
    log: &Path,
) -> Result<Child> {
    let f = std::fs::File::create(log)?;
    Command::new("taskset")
        .args(["-c", core, "ip", "netns", "exec", &net.ns(node)])
        .args(args)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("spawn {}", args.join(" ")))
}

/// The DUT core: every peer's forwarding thread runs here, never on the generator's core
/// (`GEN_CORE`), as each peer's own documentation recommends (one dedicated core per PMD).
pub(crate) const DUT_CORE: &str = "0";
const GEN_CORE: &str = "1";

/// `taskset -c CORE ip netns exec NS ARGS...` as one line, for the record.
fn cmdline(net: &Net, node: &str, core: &str, args: &[&str]) -> String {
    format!(
        "taskset -c {core} ip netns exec {} {}",
        net.ns(node),
        args.join(" ")
    )
}

fn start_dut(peer: &str, net: &Net, opts: &Opts, dir: &Path) -> Result<Dut> {
    let xoff = opts.xoff.to_string_lossy().to_string();
    let log = dir.join(format!("{peer}.log"));
    let mut d = Dut {
        children: Vec::new(),
        ctl: None,
        pids: Vec::new(),
        cleanup: Vec::new(),
        config: Vec::new(),
    };
    match peer {
        "xoff" | "xoff-pfc" => {
            let cfg = dir.join(format!("{peer}.toml"));
            std::fs::write(&cfg, dut_topology(peer == "xoff-pfc"))?;
            let sock = dir.join(format!("{peer}.sock"));
            let c = spawn_xoff_run(net, &xoff, &cfg, &sock, &[], &log)?;
            d.ctl = Some(sock.clone());
            let args = xoff_run_args(&xoff, &cfg, &sock, &[]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            d.config.push(cmdline(net, "dut", DUT_CORE, &args));
            d.config.push(format!(
                "config: {}",
                dut_topology(peer == "xoff-pfc")
                    .lines()
                    .filter(|l| l.starts_with("defaults")
                        || l.starts_with("buffer")
                        || l.starts_with("pfc"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            d.pids.push(c.id());
            d.children.push(c);
        }
        p if p.starts_with("xoff-2w-") => {
            let rest = &p["xoff-2w-".len()..];
            let (ring, cores) = match rest.strip_suffix("-2c") {
                Some(r) => (r, "0,1"),
                None => (rest, DUT_CORE),
            };
            let cfg = dir.join(format!("{peer}.toml"));
            std::fs::write(&cfg, dut_topology(false))?;
            let sock = dir.join(format!("{peer}.sock"));
            let extra = ["--workers", "2", "--handoff", ring];
            let c = spawn_xoff_run_on(net, cores, &xoff, &cfg, &sock, &extra, &log)?;
            let args = xoff_run_args(&xoff, &cfg, &sock, &extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            d.config.push(cmdline(net, "dut", cores, &args));
            d.ctl = Some(sock);
            d.pids.push(c.id());
            d.children.push(c);
        }
        "fwd" => {
            let args = [xoff.as_str(), "bench", "fwd", "--a", "d1", "--b", "d2"];
            let c = spawn_in(net, "dut", DUT_CORE, &args, &log)?;
            d.config.push(cmdline(net, "dut", DUT_CORE, &args));
            d.pids.push(c.id());
            d.children.push(c);
            std::thread::sleep(Duration::from_millis(500));
        }
        "bridge" => {
            for args in [
                &["ip", "link", "add", "xbr0", "type", "bridge"][..],
                &["ip", "link", "set", "d1", "master", "xbr0"],
                &["ip", "link", "set", "d2", "master", "xbr0"],
                &["ip", "link", "set", "xbr0", "up"],
            ] {
                net.exec("dut", args)?;
                d.config.push(args.join(" "));
            }
            d.config
                .push("kernel forwarding: runs in softirq on whichever core receives".into());
            let ns = net.ns("dut");
            d.cleanup.push(
                ["ip", "netns", "exec", &ns, "ip", "link", "del", "xbr0"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            );
        }
        "ovs-afxdp" | "ovs-system" => start_ovs(peer, net, dir, &mut d)?,
        "testpmd" => {
            let bin = ["dpdk-testpmd", "testpmd"]
                .into_iter()
                .find(|b| which(b))
                .context("dpdk-testpmd is not installed")?;
            // DPDK's AF_XDP PMD guide (doc/guides/nics/af_xdp.rst): preferred busy polling is
            // on by default (busy_budget = 64, kernel >= 5.11). The guide also "strongly
            // recommends" napi_defer_hard_irqs = 2 and gro_flush_timeout = 200000 on the
            // interface; those are for NICs with hardware interrupts and are not set here: on
            // veth they stopped its NAPI and testpmd received nothing (0 of 1.8 Mpps, 64 B).
            let prefix = format!("xoffbench{}", std::process::id());
            // Two lcores are required (the main lcore does not forward). The forwarding lcore
            // (lcore 1) is pinned to the DUT core and the main lcore, which only prints
            // statistics once a second, to the other: `--lcores 0@GEN,1@DUT`. Before, `-l 0,1
            // --main-lcore 0` put the forwarding lcore on the generator's core, which halved
            // testpmd's rate.
            let lcores = format!("0@{GEN_CORE},1@{DUT_CORE}");
            let args = [
                bin,
                "--lcores",
                lcores.as_str(),
                "--main-lcore",
                "0",
                "--no-pci",
                "--no-huge",
                "-m",
                "1024",
                "--file-prefix",
                &prefix,
                "--vdev",
                "net_af_xdp0,iface=d1",
                "--vdev",
                "net_af_xdp1,iface=d2",
                "--",
                "--forward-mode=io",
                "--nb-cores=1",
                "--total-num-mbufs=32768",
                "--stats-period=1",
                "--auto-start",
            ];
            // taskset only sets the initial mask: EAL pins each lcore thread itself.
            let c = spawn_in(net, "dut", "0,1", &args, &log)?;
            d.config.push(cmdline(net, "dut", "0,1", &args));
            d.pids.push(c.id());
            d.children.push(c);
            std::thread::sleep(Duration::from_secs(3));
        }
        other => bail!("unknown peer `{other}`"),
    }
    Ok(d)
}

fn which(b: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {b}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

pub(crate) fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

fn start_ovs(peer: &str, net: &Net, dir: &Path, d: &mut Dut) -> Result<()> {
    if !which("ovs-vswitchd") {
        bail!("Open vSwitch is not installed (deploy/install.sh --bench)");
    }
    let od = dir.join(peer);
    // A previous frame size's database and sockets.
    let _ = std::fs::remove_dir_all(&od);
    std::fs::create_dir_all(&od)?;
    let o = od.to_string_lossy().to_string();
    let db = format!("{o}/conf.db");
    let sock = format!("unix:{o}/db.sock");
    let schema = ["/usr/share/openvswitch/vswitch.ovsschema"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .context("OVS schema not found")?;
    let env = [
        ("OVS_RUNDIR", o.as_str()),
        ("OVS_DBDIR", o.as_str()),
        ("OVS_LOGDIR", o.as_str()),
        ("OVS_SYSCONFDIR", o.as_str()),
    ];
    let mut config = Vec::new();
    let mut run = |args: &[&str]| -> Result<()> {
        let ns = net.ns("dut");
        config.push(cmdline(net, "dut", DUT_CORE, args));
        let mut c = Command::new("taskset");
        c.args(["-c", DUT_CORE, "ip", "netns", "exec", &ns])
            .args(args)
            .stdin(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output()?;
        if !out.status.success() {
            bail!(
                "`{}`: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    };
    run(&["ovsdb-tool", "create", &db, schema])?;
    run(&[
        "ovsdb-server",
        &db,
        &format!("--remote=p{sock}"),
        &format!("--pidfile={o}/ovsdb.pid"),
        "--detach",
        &format!("--log-file={o}/ovsdb.log"),
    ])?;
    run(&["ovs-vsctl", &format!("--db={sock}"), "--no-wait", "init"])?;
    run(&[
        "ovs-vswitchd",
        &sock,
        &format!("--pidfile={o}/vswitchd.pid"),
        "--detach",
        &format!("--log-file={o}/vswitchd.log"),
    ])?;
    // Tear down in order: remove the bridge (and its AF_XDP sockets), stop the daemons, then
    // delete the datapath's tap device, which a killed vswitchd leaves behind.
    let dut_ns = net.ns("dut");
    d.cleanup.push(
        [
            "ip",
            "netns",
            "exec",
            &dut_ns,
            "ovs-vsctl",
            &format!("--db={sock}"),
            "--timeout=10",
            "--if-exists",
            "del-br",
            "br0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for f in ["ovsdb.pid", "vswitchd.pid"] {
        let pid: u32 = std::fs::read_to_string(od.join(f))
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or(0);
        if pid != 0 {
            if f == "vswitchd.pid" {
                d.pids.push(pid);
            }
            d.cleanup.push(vec!["kill".into(), pid.to_string()]);
        }
    }
    let mut vs = |extra: &[&str]| -> Result<()> {
        let mut a = vec![
            "ovs-vsctl".to_string(),
            format!("--db={sock}"),
            "--timeout=20".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        let v: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&v)
    };
    // Open vSwitch's AF_XDP guide (Documentation/intro/install/afxdp.rst): one PMD on a
    // dedicated core (`pmd-cpu-mask`), each port's one RX queue (`n_rxq`) pinned to it
    // (`pmd-rxq-affinity`), `xdp-mode` best-effort and `use-need-wakeup` at their defaults.
    // Without the mask OVS placed its PMD on any core, the generator's included.
    vs(&[
        "set",
        "Open_vSwitch",
        ".",
        &format!(
            "other_config:pmd-cpu-mask=0x{:x}",
            1u32 << DUT_CORE.parse::<u32>().unwrap_or(0)
        ),
    ])?;
    vs(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ])?;
    let affinity = format!("other_config:pmd-rxq-affinity=0:{DUT_CORE}");
    for p in ["d1", "d2"] {
        if peer == "ovs-afxdp" {
            vs(&[
                "add-port",
                "br0",
                p,
                "--",
                "set",
                "interface",
                p,
                "type=afxdp",
                "options:n_rxq=1",
                "options:xdp-mode=best-effort",
                &affinity,
            ])?;
        } else {
            vs(&["add-port", "br0", p])?;
        }
    }
    // Port-to-port flows, as the guide's examples forward (no MAC learning or flooding).
    run(&["ovs-ofctl", "del-flows", "br0"])?;
    for flow in [
        "in_port=d1,actions=output:d2",
        "in_port=d2,actions=output:d1",
    ] {
        run(&["ovs-ofctl", "add-flow", "br0", flow])?;
    }
    d.config.append(&mut config);
    d.cleanup.push(
        ["ip", "netns", "exec", &dut_ns, "ip", "link", "del", "br0"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    std::thread::sleep(Duration::from_secs(2));
    Ok(())
}

/// The `xoff run` command line of the DUT.
fn xoff_run_args(xoff: &str, cfg: &Path, sock: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [xoff, "run", "--config"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(cfg.to_string_lossy().into());
    args.extend(["--switch", "dut", "--ctl"].iter().map(|s| s.to_string()));
    args.push(sock.to_string_lossy().into());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Starts `xoff run` for the DUT on the DUT core and waits until its control socket answers.
pub(crate) fn spawn_xoff_run(
    net: &Net,
    xoff: &str,
    cfg: &Path,
    sock: &Path,
    extra: &[&str],
    log: &Path,
) -> Result<Child> {
    spawn_xoff_run_on(net, DUT_CORE, xoff, cfg, sock, extra, log)
}

/// As [`spawn_xoff_run`], on `cores` (a `taskset -c` list).
fn spawn_xoff_run_on(
    net: &Net,
    cores: &str,
    xoff: &str,
    cfg: &Path,
    sock: &Path,
    extra: &[&str],
    log: &Path,
) -> Result<Child> {
    let args = xoff_run_args(xoff, cfg, sock, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut c = spawn_in(net, "dut", cores, &args, log)?;
    let t = Instant::now();
    while dataplane::ctl::request(sock, &dataplane::ctl::Request::Stats).is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            let _ = c.kill();
            bail!("xoff did not start: {}", tail(log));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(c)
}

/// Starts the generator in `gen` on core 1: `size` B frames for `dur` seconds.
pub(crate) fn spawn_gen(
    net: &Net,
    xoff: &str,
    size: &str,
    dur: &str,
    extra: &[&str],
    log: &Path,
) -> Result<Child> {
    let mut args = vec![
        xoff,
        "bench",
        "gen",
        "--iface",
        "eth0",
        "--src-mac",
        GEN_MAC,
        "--dst-mac",
        SINK_MAC,
        "--size",
        size,
        "--duration",
        dur,
    ];
    args.extend_from_slice(extra);
    spawn_in(net, "gen", GEN_CORE, &args, log)
}

/// Sink counts, read from the `xoff bench sink` child: (seconds since start, frames).
fn read_counts(child: &mut Child) -> Vec<(f64, u64)> {
    let Some(out) = child.stdout.take() else {
        return Vec::new();
    };
    BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| crate::traffic::parse_count_line(&l))
        .collect()
}

fn measure(peer: &str, size: usize, net: &Net, opts: &Opts, dir: &Path) -> Row {
    let mut row = Row {
        peer: peer.into(),
        size,
        ..Default::default()
    };
    row.load_before = wait_quiet();
    if row.load_before >= 0.10 {
        row.note = format!(
            "machine busy before the run ({:.0}%: {})",
            row.load_before * 100.0,
            foreign_load()
        );
    }
    let dut = match start_dut(peer, net, opts, dir) {
        Ok(d) => d,
        Err(e) => {
            row.note = format!("cannot run: {e:#}");
            return row;
        }
    };
    row.config = dut.config.clone();
    let xoff = opts.xoff.to_string_lossy().to_string();
    let dur = opts.duration;
    let dur_s = format!("{dur}");
    let size_s = size.to_string();
    // Maximum rate.
    let sink = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns("sink"),
            &xoff,
            "bench",
            "sink",
            "--iface",
            "eth0",
            "--duration",
            &format!("{}", dur + 1.0),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut sink) = sink else {
        row.note = "cannot start the sink".into();
        return row;
    };
    std::thread::sleep(Duration::from_millis(300));
    let gen_log = dir.join("gen.log");
    let gen = spawn_gen(net, &xoff, &size_s, &dur_s, &[], &gen_log);
    let Ok(gen) = gen else {
        row.note = "cannot start the generator".into();
        return row;
    };
    // Sample CPU over the steady middle of the run.
    let w0 = 1.0_f64.min(dur / 4.0);
    let w1 = (dur - 0.5).max(w0 + 0.5);
    std::thread::sleep(Duration::from_secs_f64(w0));
    let mut pids = dut.pids.clone();
    pids.push(gen.id());
    let th0 = threads(&pids);
    let (m0, dpid0, g0, t0) = (
        cpu_jiffies().0,
        dut.pids.iter().map(|&p| proc_jiffies(p)).sum::<u64>(),
        proc_jiffies(gen.id()),
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs_f64(w1 - w0));
    row.placement = placement(&th0, &threads(&pids), t0.elapsed().as_secs_f64());
    let (m1, dpid1, g1, t1) = (
        cpu_jiffies().0,
        dut.pids.iter().map(|&p| proc_jiffies(p)).sum::<u64>(),
        proc_jiffies(gen.id()),
        Instant::now(),
    );
    let mut gen = gen;
    let _ = gen.wait();
    let sent_line = std::fs::read_to_string(&gen_log).ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("sent ").map(str::to_string))
    });
    let counts = read_counts(&mut sink);
    let _ = sink.wait();
    let at = |t: f64| {
        counts
            .iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .map(|&(ts, n)| (ts, n))
    };
    match (at(w0 + 0.3), at(w1 + 0.3)) {
        (Some((ta, a)), Some((tb, b))) if tb > ta && b > a => {
            let pps = (b - a) as f64 / (tb - ta);
            row.pps = Some(pps);
            let pkts = pps * (t1 - t0).as_secs_f64();
            let dut_j = if dut.pids.is_empty() {
                (m1 - m0).saturating_sub(g1 - g0)
            } else {
                dpid1 - dpid0
            };
            row.dut_cpu_ns_per_pkt = Some(dut_j as f64 * jiffy_ns() / pkts);
            row.machine_cpu_ns_per_pkt = Some((m1 - m0) as f64 * jiffy_ns() / pkts);
        }
        _ => {
            row.note = format!(
                "nothing forwarded ({} sink samples); DUT log: {}",
                counts.len(),
                tail(&dir.join(format!("{peer}.log")))
            );
            return row;
        }
    }
    if let Some(s) = sent_line.and_then(|s| s.trim().parse::<f64>().ok()) {
        row.offered_pps = Some(s / dur);
    }
    // With several workers: what each read, handed over, took and sent (since start).
    if let Some(w) = dut.ctl.as_deref().and_then(worker_counts) {
        row.note = format!("{w} {}", row.note).trim_end().to_string();
    }
    // A peer that forwards everything the generator offers is measured at the generator's
    // rate, a lower bound on its own: say so beside the figure.
    if let (Some(p), Some(o)) = (row.pps, row.offered_pps) {
        if p >= 0.98 * o {
            row.note = format!("generator-bound ({:.3} Mpps offered) {}", o / 1e6, row.note)
                .trim_end()
                .to_string();
        }
    }
    // Latency at half the measured maximum.
    if let Some(pps) = row.pps {
        let rate = format!("{:.0}", pps / 2.0);
        let ld = format!("{}", dur.min(3.0));
        let lsink = Command::new("taskset")
            .args([
                "-c",
                GEN_CORE,
                "ip",
                "netns",
                "exec",
                &net.ns("sink"),
                &xoff,
                "bench",
                "sink",
                "--iface",
                "eth0",
                "--latency",
                "--duration",
                &format!("{}", dur.min(3.0) + 1.0),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(lsink) = lsink {
            std::thread::sleep(Duration::from_millis(500));
            if let Ok(mut g) = spawn_gen(
                net,
                &xoff,
                &size_s,
                &ld,
                &["--rate", &rate, "--stamp"],
                &gen_log,
            ) {
                let _ = g.wait();
            }
            if let Ok(out) = lsink.wait_with_output() {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) {
                    row.p50_us = v["p50_ns"].as_f64().map(|x| x / 1e3);
                    row.p99_us = v["p99_ns"].as_f64().map(|x| x / 1e3);
                }
            }
        }
    }
    drop(dut);
    row
}

/// Each worker's counters of a multi-worker `xoff run` (`None` with one worker):
/// `w0 rx R out O in I tx T | w1 ...` in millions of frames, and the frames lost to a full
/// hand-off ring (`queue_full` drops over the ports; the DUT's only queues are far from full).
fn worker_counts(sock: &Path) -> Option<String> {
    let dataplane::ctl::Response::Stats(s) =
        dataplane::ctl::request(sock, &dataplane::ctl::Request::Stats).ok()?
    else {
        return None;
    };
    let nic = s.nic.as_ref()?;
    if nic.workers.len() < 2 {
        return None;
    }
    let m = |v: u64| format!("{:.2}M", v as f64 / 1e6);
    let mut t = nic
        .workers
        .iter()
        .map(|w| {
            format!(
                "w{} rx {} out {} in {} tx {}",
                w.worker,
                m(w.rx_pkts),
                m(w.handoffs_out),
                m(w.handoffs_in),
                m(w.tx_pkts)
            )
        })
        .collect::<Vec<_>>()
        .join(" | ");
    let full: u64 = s
        .ports
        .iter()
        .filter_map(|p| p.drops.get("queue_full"))
        .sum();
    let _ = write!(t, "; queue_full {full}");
    Some(t)
}

/// Idle CPU share of `xoff run` in a poll mode, over 10 s (its threads' exact run time).
fn idle_cpu(net: &Net, opts: &Opts, dir: &Path, poll: &str) -> Option<f64> {
    let cfg = dir.join("idle.toml");
    std::fs::write(&cfg, dut_topology(false)).ok()?;
    let xoff = opts.xoff.to_string_lossy().to_string();
    let mut c = spawn_xoff_run(
        net,
        &xoff,
        &cfg,
        &dir.join("idle.sock"),
        &["--poll", poll],
        &dir.join("idle.log"),
    )
    .ok()?;
    std::thread::sleep(Duration::from_millis(500));
    let (r0, t0) = (proc_runtime_ns(c.id()), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (r1, t1) = (proc_runtime_ns(c.id()), Instant::now());
    let _ = sh(&["kill", "-TERM", &c.id().to_string()]);
    let _ = c.wait();
    std::thread::sleep(Duration::from_millis(200));
    Some(r1.saturating_sub(r0) as f64 / (t1 - t0).as_nanos() as f64)
}

/// Runs the harness.
pub fn run(opts: &Opts) -> Result<Report> {
    let dir = std::env::temp_dir().join(format!("xoff-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let net = Net::up(&format!("xb{}", std::process::id() % 100_000))?;
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        for peer in &opts.peers {
            eprintln!("measuring {peer} at {size} B ...");
            let r = measure(peer, size, &net, opts, &dir);
            eprintln!("  {}", short(&r));
            rows.push(r);
        }
    }
    let idle_cpu_adaptive = idle_cpu(&net, opts, &dir, "adaptive");
    let idle_cpu_busy = idle_cpu(&net, opts, &dir, "busy");
    drop(net);
    let _ = std::fs::remove_dir_all(&dir);
    let commit = sh(&[
        "git",
        "-C",
        env!("CARGO_MANIFEST_DIR"),
        "rev-parse",
        "--short",
        "HEAD",
    ])
    .unwrap_or_default()
    .trim()
    .to_string();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let report = Report {
        date: sh(&["date", "-u", "+%Y-%m-%d %H:%M UTC"])
            .unwrap_or_default()
            .trim()
            .to_string(),
        machine: format!(
            "{} × {model}",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        ),
        kernel: sh(&["uname", "-r"]).unwrap_or_default().trim().to_string(),
        commit,
        rows,
        idle_cpu_adaptive,
        idle_cpu_busy,
    };
    if let Some(p) = &opts.results {
        let mut text = std::fs::read_to_string(p).unwrap_or_else(|_| "# Line-rate results\n\nAppended by `xoff bench line-rate`; ratios are against xoff in the same run.\n".into());
        text.push_str(&markdown(&report));
        std::fs::write(p, text)?;
    }
    Ok(report)
}

fn short(r: &Row) -> String {
    match r.pps {
        Some(p) => format!(
            "{:.3} Mpps, DUT {:.0} ns/pkt, p99 {:?} us {}",
            p / 1e6,
            r.dut_cpu_ns_per_pkt.unwrap_or(0.0),
            r.p99_us,
            r.note
        ),
        None => r.note.clone(),
    }
}

fn f(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map(|x| format!("{:.*}", prec, x / scale))
        .unwrap_or_else(|| "-".into())
}

/// The report as a text table with ratios to xoff.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {} (kernel {}, commit {})",
        r.date, r.machine, r.kernel, r.commit
    );
    // The peer column fits the longest name (at least the 11 of the earlier tables).
    let w = r
        .rows
        .iter()
        .map(|x| x.peer.len())
        .max()
        .unwrap_or(0)
        .max(11);
    let _ = writeln!(
        s,
        "{:<w$} {:>5} {:>9} {:>8} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8}  note",
        "peer",
        "size",
        "Mpps",
        "xoff/x",
        "DUT ns/p",
        "x/xoff",
        "machine ns",
        "p50 us",
        "p99 us",
        "x/xoff"
    );
    for row in &r.rows {
        let base = r
            .rows
            .iter()
            .find(|x| x.peer == "xoff" && x.size == row.size);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<w$} {:>5} {:>9} {:>8} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8}  {}",
            row.peer,
            row.size,
            f(row.pps, 1e6, 3),
            ratio(base.and_then(|b| b.pps), row.pps),
            f(row.dut_cpu_ns_per_pkt, 1.0, 0),
            ratio(
                row.dut_cpu_ns_per_pkt,
                base.and_then(|b| b.dut_cpu_ns_per_pkt)
            ),
            f(row.machine_cpu_ns_per_pkt, 1.0, 0),
            f(row.p50_us, 1.0, 1),
            f(row.p99_us, 1.0, 1),
            ratio(row.p99_us, base.and_then(|b| b.p99_us)),
            row.note
        );
    }
    let _ = writeln!(
        s,
        "idle xoff run: adaptive {} % CPU, busy {} % CPU",
        f(r.idle_cpu_adaptive.map(|x| x * 100.0), 1.0, 1),
        f(r.idle_cpu_busy.map(|x| x * 100.0), 1.0, 1)
    );
    s
}

fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n## {} — {} — kernel {} — commit {}\n",
        r.date, r.machine, r.kernel, r.commit
    );
    let _ = writeln!(s, "```\n{}```", table(r));
    let _ = writeln!(
        s,
        "\nThread placement over each measurement window (thread@CPU it last ran on, share of a core, from /proc/PID/task; the generator is the `xoff` thread pinned to core {GEN_CORE}, every DUT's forwarding thread is pinned to core {DUT_CORE}; kernel work in softirq context is not attributed to a thread) and each peer's exact configuration:\n"
    );
    for row in &r.rows {
        let _ = writeln!(s, "- **{} {} B**: {}", row.peer, row.size, row.placement);
    }
    let mut seen = std::collections::BTreeSet::new();
    for row in &r.rows {
        if seen.insert(row.peer.clone()) {
            let _ = writeln!(s, "\n`{}`:\n```", row.peer);
            for c in &row.config {
                let _ = writeln!(s, "{c}");
            }
            let _ = writeln!(s, "```");
        }
    }
    s
}

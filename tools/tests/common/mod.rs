//! Shared helpers for the root/netns integration tests: a testbed that is torn down even when
//! a test fails, unique names, and iperf3 runs.

#![allow(dead_code)]

use dataplane::ctl::{self, Request, Response};
use dataplane::stats::SwitchSnapshot;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Root tests share the CPU with the switches they measure: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn xoff() -> &'static str {
    env!("CARGO_BIN_EXE_xoff")
}

pub fn require_root() {
    assert!(
        // SAFETY-free check: the effective uid from /proc.
        std::fs::read_to_string("/proc/self/status")
            .map(|s| s
                .lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0")))
            .unwrap_or(false),
        "these tests build network namespaces and must run as root (see README)"
    );
}

pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "x{}{}{}",
        tag,
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `tshark -n` without TCP reassembly and sequence analysis, for reading the tests' captures.
/// Every check here reads per-frame fields, which neither changes; with them on, tshark took
/// 4-5 minutes per pass over a 19 MB tap of an iperf3 stream seen in both directions (18 k
/// frames; 0.8 s without), which made `tap.rs` run 36 minutes in one suite run.
pub fn tshark() -> Command {
    let mut c = Command::new("tshark");
    c.args([
        "-n",
        "-o",
        "tcp.desegment_tcp_streams:FALSE",
        "-o",
        "tcp.analyze_sequence_numbers:FALSE",
    ]);
    c
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A counter of `eth0` in namespace `ns` (`/sys/class/net/eth0/statistics/NAME`).
pub fn eth0_counter(ns: &str, name: &str) -> u64 {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/eth0/statistics/{name}"))
        .output()
        .expect("ip netns exec cat");
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{ns} eth0 {name}: {e}"))
}

/// Hosts h1, h2, h3 (10.0.0.1-3/24) on one switch s1 with ports p1, p2, p3; `p2` is appended
/// to p2's table (e.g. `, rate = "100Mbit"`).
pub fn three_hosts(p2: &str) -> String {
    format!(
        r#"name = "three"
[[switch]]
name = "s1"
port = [{{ name = "p1" }}, {{ name = "p2"{p2} }}, {{ name = "p3" }}]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.0.3/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
"#
    )
}

/// Kills the `xoff host` processes a test started if it fails before they exit.
pub struct Children(pub Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Unix time in ns (what `xoff host --start-at` takes).
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `xoff experiment run FILE --out OUT --json`, which must succeed: its results JSON.
pub fn run_experiment(file: &Path, out: &Path) -> serde_json::Value {
    let o = Command::new(xoff())
        .args(["experiment", "run"])
        .arg(file)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .output()
        .expect("run xoff experiment");
    assert!(
        o.status.success(),
        "experiment failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("JSON: {e}: {}", String::from_utf8_lossy(&o.stdout));
    })
}

/// An `xoff host`'s `<host>.json` in `dir`; its log in the panic message if it wrote none.
pub fn read_output(dir: &Path, h: &str) -> serde_json::Value {
    let p = dir.join(format!("{h}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(dir.join(format!("{h}.log"))).unwrap_or_default();
        panic!("{}: {e}; log: {log}", p.display())
    });
    serde_json::from_str(&text).expect("host JSON")
}

/// Starts `xoff host` on each of `hosts` of `bed` (topology file `topo`, schedule `sched`),
/// starting at Unix time `start_at` ns, writing `<host>.json` and `<host>.log` into `dir`, with
/// `args` added (e.g. `--run`, `--cc`); they are killed when the result is dropped.
pub fn start_hosts(
    bed: &Bed,
    topo: &Path,
    hosts: &[&str],
    sched: &Path,
    dir: &Path,
    start_at: u128,
    args: &[&str],
) -> Children {
    let mut kids = Children(Vec::new());
    for h in hosts {
        let log = std::fs::File::create(dir.join(format!("{h}.log"))).expect("log");
        let c = Command::new("ip")
            .args(["netns", "exec", &bed.ns(h), xoff(), "host", "--topology"])
            .arg(topo)
            .args(["--host", h, "--schedule"])
            .arg(sched)
            .arg("--out")
            .arg(dir)
            .args(["--start-at", &start_at.to_string()])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("xoff host");
        kids.0.push(c);
    }
    kids
}

/// A running testbed, brought down on drop.
pub struct Bed {
    pub file: PathBuf,
    pub name: String,
}

impl Bed {
    /// Brings up `file` (a topology path) under a unique name.
    pub fn up(file: &Path, tag: &str) -> Bed {
        Self::up_with(file, tag, &[])
    }

    pub fn up_with(file: &Path, tag: &str, run_args: &[&str]) -> Bed {
        require_root();
        let name = unique(tag);
        let bed = Bed {
            file: file.to_path_buf(),
            name,
        };
        let mut c = Command::new(xoff());
        c.args(["testbed", "up"])
            .arg(&bed.file)
            .args(["--name", &bed.name]);
        if !run_args.is_empty() {
            c.arg(format!("--run-args={}", run_args.join(" ")));
        }
        let out = c.output().expect("run xoff testbed up");
        assert!(
            out.status.success(),
            "testbed up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bed
    }

    /// Writes `text` to a temporary topology file and brings it up.
    pub fn up_text(text: &str, tag: &str) -> Bed {
        let path = std::env::temp_dir().join(format!("{}.toml", unique(tag)));
        std::fs::write(&path, text).expect("write topology");
        Self::up(&path, tag)
    }

    pub fn ns(&self, node: &str) -> String {
        format!("{}-{}", self.name, node)
    }

    /// Runs a command in a node's namespace and returns its output.
    pub fn run(&self, node: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(node)])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// The MAC address of `host`'s eth0, as `aa:bb:cc:dd:ee:ff`.
    pub fn mac(&self, host: &str) -> String {
        let o = self.run(host, &["cat", "/sys/class/net/eth0/address"]);
        let mac = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(!mac.is_empty(), "{host}: no eth0 address");
        mac
    }

    /// An XDP program is attached to some interface of `node`'s namespace.
    pub fn xdp_attached(&self, node: &str) -> bool {
        let out = self.run(node, &["ip", "-d", "link", "show"]);
        let s = String::from_utf8_lossy(&out.stdout);
        s.contains("prog/xdp") || s.contains(" xdp ") || s.contains("xdpgeneric")
    }

    /// `xoff testbed audit --json` of the whole testbed: (exit status 0, the audit).
    pub fn audit(&self) -> (bool, serde_json::Value) {
        let out = Command::new(xoff())
            .args(["testbed", "audit"])
            .arg(&self.file)
            .args(["--name", &self.name, "--json"])
            .output()
            .expect("xoff testbed audit");
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "testbed audit: {e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.success(), v)
    }

    pub fn ping(&self, from: &str, to: &str) -> bool {
        self.run(from, &["ping", "-c", "2", "-i", "0.2", "-W", "2", to])
            .status
            .success()
    }

    pub fn stats(&self, switch: &str) -> SwitchSnapshot {
        let sock = PathBuf::from(format!("/run/xoff/{}/{switch}.sock", self.name));
        match ctl::request(&sock, &Request::Stats).expect("ctl request") {
            Response::Stats(s) => *s,
            r => panic!("unexpected response {r:?}"),
        }
    }

    pub fn pid(&self, switch: &str) -> i32 {
        std::fs::read_to_string(format!("/run/xoff/{}/{switch}.pid", self.name))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    /// Starts an iperf3 server in `host` that serves one test.
    pub fn iperf_server(&self, host: &str) {
        let out = self.run(host, &["iperf3", "-s", "-D", "-1", "--json"]);
        assert!(
            out.status.success(),
            "iperf3 server: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    /// Runs `secs` seconds of iperf3 TCP from `from` to a fresh server on `server` (at `ip`) and
    /// returns the receiver's rate in Mbit/s.
    pub fn tcp_mbps(&self, from: &str, server: &str, ip: &str, secs: u32) -> f64 {
        self.iperf_server(server);
        let v = self.iperf(from, &["-c", ip, "-t", &secs.to_string()]);
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e6
    }

    /// Runs an iperf3 client and returns its JSON report.
    pub fn iperf(&self, from: &str, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["iperf3", "--json"];
        a.extend_from_slice(args);
        let out = self.run(from, &a);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "iperf3 output: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert!(v.get("error").is_none(), "iperf3 error: {}", v["error"]);
        v
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(xoff())
            .args(["testbed", "down"])
            .arg(&self.file)
            .args(["--name", &self.name])
            .output();
    }
}

/// The two-flow run of the chain-scheme tests (`chain-aquarius.toml`, `chain-pyrrha.toml`):
/// A (h1 -> h4, 150 Mbit/s UDP, 3x h4's 50 Mbit/s port) and B (h2 -> h3, 150 Mbit/s, sharing
/// s1's 200 Mbit/s uplink with A) for 3 s at once.
pub struct ChainRun {
    /// What arrived of A, bit/s.
    pub a_received: f64,
    /// What B's sender managed to send (a 2-core machine may not give it the CPU for all it
    /// was asked), bit/s.
    pub b_offered: f64,
    /// Frames s1 took from h2 and frames s2 handed to h3: B counted at the switches. iperf3's
    /// own count also has a starved receiver's socket drops (seen: 58 % "lost" with 97 %
    /// delivered to h3's interface).
    pub b_in: u64,
    pub b_out: u64,
    pub s1: SwitchSnapshot,
    pub s2: SwitchSnapshot,
}

/// (offered, received) bit/s of a UDP iperf3 client report.
pub fn udp_rates(v: &serde_json::Value) -> (f64, f64) {
    let s = &v["end"]["sum"];
    let sent = s["bits_per_second"].as_f64().unwrap_or(0.0);
    (
        sent,
        sent * (1.0 - s["lost_percent"].as_f64().unwrap_or(100.0) / 100.0),
    )
}

impl Bed {
    pub fn chain_two_flows(&self) -> ChainRun {
        self.iperf_server("h4");
        self.iperf_server("h3");
        fn udp(to: &str) -> [&str; 9] {
            ["-c", to, "-u", "-b", "150M", "-l", "1400", "-t", "3"]
        }
        let (a, b) = std::thread::scope(|sc| {
            let a = sc.spawn(|| self.iperf("h1", &udp("10.0.0.4")));
            let b = self.iperf("h2", &udp("10.0.0.3"));
            (a.join().expect("iperf A"), b)
        });
        std::thread::sleep(Duration::from_millis(500));
        let (s1, s2) = (self.stats("s1"), self.stats("s2"));
        let r = ChainRun {
            a_received: udp_rates(&a).1,
            b_offered: udp_rates(&b).0,
            b_in: s1.ports[1].rx_pkts,
            b_out: s2.ports[0].tx_pkts,
            s1,
            s2,
        };
        eprintln!(
            "A received {:.1} Mbit/s; B offered {:.1} Mbit/s, {} of {} frames through the switches",
            r.a_received / 1e6,
            r.b_offered / 1e6,
            r.b_out,
            r.b_in
        );
        r
    }
}

impl ChainRun {
    /// A is held to h4's 50 Mbit/s; B loses at most 20 % of what its sender sent.
    pub fn assert_victim_keeps_its_rate(&self) {
        assert!(
            self.a_received < 60e6,
            "A not held to h4's 50 Mbit/s: {}",
            self.a_received
        );
        assert!(
            self.b_offered > 50e6,
            "B's sender only sent {} bit/s: no test",
            self.b_offered
        );
        assert!(
            self.b_out as f64 >= 0.8 * self.b_in as f64,
            "B lost its rate at the switches: {} of {} frames",
            self.b_out,
            self.b_in
        );
    }
}

/// The receiver's record of flow `id` in `xoff host` output `v`.
pub fn rx_of(v: &serde_json::Value, id: u64) -> serde_json::Value {
    v["rx"]
        .as_array()
        .and_then(|r| r.iter().find(|x| n(&x["id"]) == id))
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// Delivered rate of a receiver record (bit/s), first to last packet.
pub fn rate_bps(r: &serde_json::Value) -> f64 {
    let ps = n(&r["last_ps"]).saturating_sub(n(&r["first_ps"])).max(1);
    n(&r["rx_bytes"]) as f64 * 8.0 / (ps as f64 / 1e12)
}

/// A JSON number as u64 (0 if absent): the tests read counters this way.
pub fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The stats of scheme `name` ("aquarius", "pyrrha", ...) in a switch snapshot.
pub fn scheme_stats(s: &dataplane::stats::SwitchSnapshot, name: &str) -> serde_json::Value {
    serde_json::to_value(s.pfc.as_ref().expect("scheme stats")).unwrap()[name].clone()
}

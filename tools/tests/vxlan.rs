//! A testbed across two machines over VXLAN (issue 23 item 2), on one box: two "underlay"
//! namespaces stand in for the machines' root namespaces, joined by a veth with the
//! addresses of `leafspine-vxlan.toml`'s `[[machine]]` tables. `xoff testbed up --machine A`
//! and `--machine B` build the leaves with their hosts and the spines, every leaf-spine link a
//! kernel VXLAN tunnel whose socket lives in its machine's underlay namespace. Requires root.

use crate::common;

use common::{repo, require_root, serial, unique, xoff, Bed};
use dataplane::config::Topology;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ip(args: &[&str]) -> Output {
    Command::new("ip").args(args).output().expect("ip")
}

fn ok(args: &[&str]) {
    let o = ip(args);
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The two underlay namespaces and the veth between them; deleted on drop (after the testbed,
/// which is declared later and so dropped first).
struct Underlay {
    ns: Vec<String>,
    dev: Vec<String>,
}

impl Underlay {
    /// One namespace per machine of `topo`, named `<name>-u<machine>`, each holding its
    /// machine's underlay address on one end of a veth with `mtu`.
    fn up(topo: &Topology, name: &str, mtu: u32) -> Underlay {
        assert_eq!(topo.machines.len(), 2, "the demo joins two machines");
        let mut u = Underlay {
            ns: Vec::new(),
            dev: Vec::new(),
        };
        for (i, m) in topo.machines.iter().enumerate() {
            u.ns.push(format!("{name}-u{}", m.name));
            u.dev.push(format!("{}u{i}", &name[..name.len().min(12)]));
        }
        for ns in &u.ns {
            ok(&["netns", "add", ns]);
        }
        ok(&[
            "link", "add", &u.dev[0], "type", "veth", "peer", "name", &u.dev[1],
        ]);
        let addrs: Vec<String> = topo
            .machines
            .iter()
            .map(|m| format!("{}/32", m.underlay))
            .collect();
        for i in 0..2 {
            ok(&["link", "set", &u.dev[i], "netns", &u.ns[i]]);
            ok(&[
                "-n",
                &u.ns[i],
                "addr",
                "add",
                &addrs[i],
                "peer",
                &addrs[1 - i],
                "dev",
                &u.dev[i],
            ]);
            ok(&[
                "-n",
                &u.ns[i],
                "link",
                "set",
                &u.dev[i],
                "mtu",
                &mtu.to_string(),
                "up",
            ]);
        }
        u
    }

    /// Bytes sent by machine `i`'s end of the underlay.
    fn tx_bytes(&self, i: usize) -> u64 {
        let o = ip(&["-n", &self.ns[i], "-s", "-j", "link", "show", &self.dev[i]]);
        let v: Value = serde_json::from_slice(&o.stdout).expect("ip -j");
        v[0]["stats64"]["tx"]["bytes"].as_u64().expect("tx bytes")
    }
}

impl Drop for Underlay {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn machine_cmd(cmd: &str, file: &Path, name: &str, machine: &str, ns: &str) -> Output {
    Command::new(xoff())
        .args(["testbed", cmd])
        .arg(file)
        .args(["--name", name, "--machine", machine, "--underlay-netns", ns])
        .output()
        .expect("xoff testbed")
}

fn netns_list() -> String {
    String::from_utf8_lossy(&ip(&["netns", "list"]).stdout).to_string()
}

fn has_ns(list: &str, ns: &str) -> bool {
    list.lines()
        .any(|l| l.split_whitespace().next() == Some(ns))
}

fn prio3(s: &dataplane::stats::SwitchSnapshot, port: usize, key: &str) -> u64 {
    let pfc = serde_json::to_value(s.pfc.as_ref().expect("PFC configured")).unwrap();
    pfc["ports"][port][3][key].as_u64().unwrap_or(0)
}

#[test]
fn leafspine_split_over_two_machines_pings_carries_tcp_and_pfc_through_vxlan() {
    let _g = serial();
    require_root();
    let file: PathBuf = repo().join("deploy/topologies/leafspine-vxlan.toml");
    let topo = Topology::load(&file).expect("topology");
    let name = unique("v");
    let (ma, mb) = (&topo.machines[0], &topo.machines[1]);

    // A 1500 B underlay cannot carry 1500 B frames plus VXLAN: `up` refuses before building.
    {
        let u = Underlay::up(&topo, &format!("{name}m"), 1500);
        let o = machine_cmd("up", &file, &format!("{name}m"), &ma.name, &u.ns[0]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "up over a 1500 B underlay succeeded");
        assert!(
            err.contains("has MTU 1500") && err.contains("mtu 1550"),
            "{err}"
        );
        assert!(
            !netns_list().contains(&format!("{name}m-leaf")),
            "a refused `up` left namespaces"
        );
    }

    let under = Underlay::up(&topo, &name, 1550);
    // Brought down (every node, whatever machine) on drop, also when an assertion fails.
    let bed = Bed {
        file: file.clone(),
        name: name.clone(),
    };
    for (i, m) in [ma, mb].into_iter().enumerate() {
        let o = machine_cmd("up", &file, &name, &m.name, &under.ns[i]);
        assert!(
            o.status.success(),
            "testbed up --machine {}: {}",
            m.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // Each tunnel end is a VXLAN device in its node's namespace whose socket lives in its
    // machine's underlay namespace, and no node has a route of its own to the underlay.
    for (i, l) in topo.links.iter().enumerate() {
        let Some(vx) = topo.vxlan_end(i, true) else {
            continue;
        };
        for (end, m) in [(&l.a, 0), (&l.b, 1)] {
            let (node, port) = end.split_once(':').expect("a switch port");
            let o = ip(&["-n", &bed.ns(node), "-d", "link", "show", port]);
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(
                text.contains(&format!("vxlan id {} ", vx.vni))
                    && text.contains(&format!("link-netns {}", under.ns[m])),
                "{node}:{port} is not machine {m}'s tunnel {}: {text}",
                vx.vni
            );
            assert!(text.contains("mtu 1500"), "{node}:{port}: {text}");
        }
    }
    for (m, other) in [(ma, mb), (mb, ma)] {
        for node in &m.nodes {
            let o = bed.run(
                node,
                &["ping", "-c", "1", "-W", "1", &other.underlay.to_string()],
            );
            assert!(
                !o.status.success(),
                "{node} on machine {} reaches machine {}'s underlay address directly",
                m.name,
                other.name
            );
        }
    }

    // Every host pair, with full-size frames (1500 B IPv4, DF set) across the tunnels.
    let hosts: Vec<(String, String)> = topo
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.ip.split('/').next().unwrap().to_string()))
        .collect();
    for (a, _) in &hosts {
        for (b, addr) in &hosts {
            if a != b {
                assert!(bed.ping(a, addr), "{a} cannot ping {b} ({addr})");
            }
        }
    }
    let big = bed.run(
        "h11",
        &[
            "ping", "-c", "2", "-W", "2", "-M", "do", "-s", "1472", "10.0.3.2",
        ],
    );
    assert!(
        big.status.success(),
        "1500 B frames do not cross the tunnels: {}",
        String::from_utf8_lossy(&big.stdout)
    );

    // TCP from leaf1's host to leaf3's: both hops over VXLAN, all of it on the underlay.
    let tx0 = under.tx_bytes(0) + under.tx_bytes(1);
    bed.iperf_server("h31");
    let v = bed.iperf("h11", &["-c", "10.0.3.1", "-t", "3"]);
    let got = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let tx = under.tx_bytes(0) + under.tx_bytes(1) - tx0;
    eprintln!(
        "TCP h11 -> h31 over VXLAN: {:.0} Mbit/s, {got} B received; the underlay carried {tx} B",
        bps / 1e6
    );
    // The segments crossed the underlay twice (leaf1 -> spine from A, spine -> leaf3 from
    // B), each time with their headers and 50 B of VXLAN: at least twice the payload.
    assert!(
        tx >= 2 * got,
        "the underlay carried {tx} B for {got} B of TCP"
    );
    // 1 Gbit/s ports; 100 Mbit/s is a floor a working path clears several times over under
    // CPU contention, while a path that drops full-size frames stalls TCP far below it.
    assert!(bps > 100e6, "TCP over VXLAN at {bps:.0} bit/s");

    // PFC across the tunnels: priority 3 (DSCP 24) from h11 into h22's 100 Mbit/s port, 3×
    // overload. leaf2 (machine A) pauses its uplinks; the spines (machine B) receive exactly
    // those frames and hold the class back toward leaf2.
    let ports = |sw: &str, p: &str| {
        topo.switches
            .iter()
            .find(|s| s.name == sw)
            .and_then(|s| s.ports.iter().position(|x| x.name == p))
            .expect("port")
    };
    bed.iperf_server("h22");
    bed.iperf(
        "h11",
        &[
            "-c", "10.0.2.2", "-u", "-b", "300M", "-S", "0x60", "-l", "1400", "-t", "3",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let leaf2 = bed.stats("leaf2");
    let mut received = 0;
    for (up, spine) in [("up1", "spine1"), ("up2", "spine2")] {
        let sp = bed.stats(spine);
        let (lp, spp) = (ports("leaf2", up), ports(spine, "l2"));
        let (xoff_tx, xon_tx) = (
            prio3(&leaf2, lp, "xoff_sent"),
            prio3(&leaf2, lp, "xon_sent"),
        );
        let (xoff_rx, xon_rx) = (
            prio3(&sp, spp, "xoff_received"),
            prio3(&sp, spp, "xon_received"),
        );
        let q = &sp.ports[spp].queues[3];
        eprintln!(
            "leaf2:{up} sent XOFF {xoff_tx} XON {xon_tx}; {spine}:l2 received XOFF {xoff_rx} XON {xon_rx}, queue 3 watermark {} B, drops {:?}",
            q.watermark_bytes, sp.ports[spp].drops
        );
        assert_eq!(xoff_tx, xoff_rx, "XOFF lost in the tunnel to {spine}");
        assert_eq!(xon_tx, xon_rx, "XON lost in the tunnel to {spine}");
        if xoff_rx > 0 {
            assert!(xon_rx > 0, "{spine} was paused and never resumed");
            // Paused, the spine queued the class toward leaf2 (as chain-pfc's s1 does).
            assert!(
                q.watermark_bytes > 50_000,
                "{spine} did not queue while paused: {q:?}"
            );
            assert_eq!(q.depth_bytes, 0, "{spine} still holds packets after XON");
        }
        received += xoff_rx;
    }
    assert!(received > 0, "no PFC crossed the tunnels to the spines");

    // down --machine A removes A's part only: B's spines keep running.
    let o = machine_cmd("down", &file, &name, &ma.name, &under.ns[0]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = netns_list();
    for n in &ma.nodes {
        assert!(!has_ns(&list, &bed.ns(n)), "{n} left behind by down A");
    }
    for n in &mb.nodes {
        assert!(has_ns(&list, &bed.ns(n)), "down A removed B's {n}");
        assert!(!bed.stats(n).ports.is_empty(), "{n} stopped by down A");
    }
    let vx = ip(&["-n", &under.ns[0], "-o", "link", "show", "type", "vxlan"]);
    assert!(
        vx.stdout.is_empty(),
        "tunnels left in A's underlay: {}",
        String::from_utf8_lossy(&vx.stdout)
    );
    let o = machine_cmd("down", &file, &name, &mb.name, &under.ns[1]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = netns_list();
    assert!(
        !list.contains(&format!("{name}-leaf")) && !list.contains(&format!("{name}-spine")),
        "namespaces left: {list}"
    );
    assert!(
        !Path::new(&format!("/run/xoff/{name}")).exists(),
        "run directory left after the last machine went down"
    );
}

/// h1 -- s1 ==vxlan== s2 -- h2, s1 and h1 on machine A, s2 and h2 on B; the tunnel's `mtu`
/// left to the caller.
fn two_switch_split(mtu_line: &str) -> String {
    format!(
        r#"name = "vxmtu"
[[switch]]
name = "s1"
port = [{{ name = "p1" }}, {{ name = "up" }}]
[[switch]]
name = "s2"
port = [{{ name = "p1" }}, {{ name = "up" }}]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[machine]]
name = "A"
underlay = "192.168.100.1"
nodes = ["s1", "h1"]
[[machine]]
name = "B"
underlay = "192.168.100.2"
nodes = ["s2", "h2"]
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s2:p1"
[[link]]
a = "s1:up"
b = "s2:up"
kind = "vxlan"
vni = 4242
local = "192.168.100.1"
remote = "192.168.100.2"
{mtu_line}
"#
    )
}

/// What the README tells a user whose physical underlay carries only 1500 B: `mtu = 1450` on
/// the vxlan links. `up` then accepts the 1500 B underlay, gives the hosts 1450 B, and TCP
/// flows with 1450 B frames.
#[test]
fn a_1500_byte_underlay_carries_a_testbed_with_1450_byte_tunnels() {
    let _g = serial();
    require_root();
    let name = unique("w");
    let file = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&file, two_switch_split("mtu = 1450")).expect("write topology");
    let topo = Topology::load(&file).expect("topology");
    let under = Underlay::up(&topo, &name, 1500);
    let bed = Bed {
        file: file.clone(),
        name: name.clone(),
    };
    for (i, m) in topo.machines.iter().enumerate() {
        let o = machine_cmd("up", &file, &name, &m.name, &under.ns[i]);
        assert!(
            o.status.success(),
            "testbed up --machine {}: {}",
            m.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for h in ["h1", "h2"] {
        let o = bed.run(h, &["cat", "/sys/class/net/eth0/mtu"]);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1450", "{h}");
    }
    let fits = bed.run(
        "h1",
        &[
            "ping", "-c", "2", "-W", "2", "-M", "do", "-s", "1422", "10.0.0.2",
        ],
    );
    assert!(
        fits.status.success(),
        "1450 B packets do not cross the tunnel: {}",
        String::from_utf8_lossy(&fits.stdout)
    );
    let r = bed.tcp_mbps("h1", "h2", "10.0.0.2", 3);
    eprintln!("TCP over a 1450 B tunnel on a 1500 B underlay: {r:.0} Mbit/s");
    // Same floor as over 1500 B tunnels: a size mismatch stalls TCP far below it.
    assert!(r > 100.0, "TCP at {r:.1} Mbit/s");
    for (i, m) in topo.machines.iter().enumerate() {
        let o = machine_cmd("down", &file, &name, &m.name, &under.ns[i]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let list = netns_list();
    for n in ["s1", "s2", "h1", "h2"] {
        assert!(!has_ns(&list, &bed.ns(n)), "{n} left: {list}");
    }
    for ns in &under.ns {
        let vx = ip(&["-n", ns, "-o", "link", "show", "type", "vxlan"]);
        assert!(vx.stdout.is_empty(), "tunnel left in {ns}");
    }
    let _ = std::fs::remove_file(&file);
}

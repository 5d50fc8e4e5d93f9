//! Issue 23 item 3: `xoff testbed export --containerlab` run as containerlab would run it
//! (root). Without containerlab or containers here, the lab is played in network namespaces:
//! one per node, a veth per `links` entry with the endpoint interface names, then every node's
//! `exec` lines in order through a shell (as containerlab runs them after wiring the links),
//! with only the container's file locations mapped to this machine's: the `xoff` binary, the
//! bound topology file, `/run/xoff` and `/var/log`. The switches must come up on the
//! interfaces the export named, and hosts on different leaves must reach each other.

use crate::common;

use common::{repo, require_root, serial, unique, xoff, Bed};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn sh_in(ns: &str, line: &str) {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", line])
        .output()
        .expect("ip netns exec");
    assert!(
        o.status.success(),
        "{ns}: `{line}`: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn containerlab_export_runs_leafspine() {
    require_root();
    let _g = serial();
    let file = repo().join("deploy/topologies/leafspine.toml");
    let o = Command::new(xoff())
        .args(["testbed", "export", "--containerlab"])
        .arg(&file)
        .output()
        .expect("xoff testbed export");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lab: Value = serde_norway::from_slice(&o.stdout).expect("YAML parses");
    let nodes = lab["topology"]["nodes"].as_object().expect("nodes");
    let links = lab["topology"]["links"].as_array().expect("links");

    // Torn down by `xoff testbed down` (namespaces `<name>-<node>`) even if an assert fails.
    let name = unique("clab");
    let bed = Bed {
        file: file.clone(),
        name: name.clone(),
    };
    let ns = |n: &str| bed.ns(n);
    let tmp: PathBuf = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(tmp.join("run")).expect("tmp");
    for n in nodes.keys() {
        ip(&["netns", "add", &ns(n)]);
        sh_in(&ns(n), "ip link set lo up");
    }
    for (i, l) in links.iter().enumerate() {
        let ends: Vec<&str> = l["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let tmp_names = [format!("{name}a{i}"), format!("{name}b{i}")];
        let tmp_names: Vec<String> = tmp_names
            .iter()
            .map(|t| t.chars().rev().take(15).collect::<Vec<_>>())
            .map(|c| c.into_iter().rev().collect())
            .collect();
        ip(&[
            "link",
            "add",
            &tmp_names[0],
            "type",
            "veth",
            "peer",
            "name",
            &tmp_names[1],
        ]);
        for (t, e) in tmp_names.iter().zip(&ends) {
            let (node, iface) = e.split_once(':').expect("node:iface");
            ip(&["link", "set", t, "netns", &ns(node)]);
            sh_in(
                &ns(node),
                &format!("ip link set {t} name {iface} && ip link set {iface} up"),
            );
        }
    }
    let bin = xoff();
    let conf = std::fs::canonicalize(&file).expect("canonical");
    for (n, node) in nodes {
        for line in node["exec"].as_array().expect("exec") {
            let line = line
                .as_str()
                .expect("exec line")
                .replace("setsid xoff ", &format!("setsid {bin} "))
                .replace("/etc/xoff/leafspine.toml", &conf.display().to_string())
                .replace("/run/xoff/", &format!("{}/run/", tmp.display()))
                .replace("/run/xoff ", &format!("{}/run ", tmp.display()))
                .replace("/var/log/", &format!("{}/", tmp.display()));
            sh_in(&ns(n), &line);
        }
    }
    // The switches answer on their control sockets once their ports are open.
    let switches: Vec<&String> = nodes
        .iter()
        .filter(|(_, v)| v.get("binds").is_some())
        .map(|(k, _)| k)
        .collect();
    assert_eq!(switches.len(), 5);
    let deadline = Instant::now() + Duration::from_secs(30);
    for s in &switches {
        let sock = tmp.join("run").join(format!("{s}.sock"));
        while dataplane::ctl::request(&sock, &dataplane::ctl::Request::Stats).is_err() {
            let log = std::fs::read_to_string(tmp.join(format!("xoff-{s}.log")));
            assert!(
                Instant::now() < deadline,
                "switch {s} did not come up: {log:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Across leaves (both spines' ECMP) and within one.
    for (from, to) in [
        ("h11", "10.0.1.2"),
        ("h11", "10.0.2.1"),
        ("h11", "10.0.3.2"),
        ("h22", "10.0.3.1"),
        ("h32", "10.0.1.1"),
    ] {
        assert!(bed.ping(from, to), "{from} -> {to}");
    }
    drop(bed);
    let _ = std::fs::remove_dir_all(&tmp);
}

//! `xoff testbed export --containerlab FILE`: the testbed of a topology file as a containerlab
//! topology (<https://containerlab.dev/manual/topo-def-file/>), so a lab can run on
//! containerlab, including its multi-host setups, instead of `xoff testbed up`'s namespaces.
//!
//! Every node is of kind `linux` with one image that holds `xoff`. A switch node gets the
//! topology file bound read-only at `/etc/xoff/<file name>` and an `exec` that sets each
//! port's MAC and starts `xoff run --config ... --switch NAME --ctl /run/xoff/NAME.sock` with
//! the arguments `xoff testbed up` passes (in the background: containerlab waits for `exec`
//! commands to return). Links are `endpoints: ["node:iface", "node:iface"]`; a switch port's
//! interface is the port's `iface`, the one `xoff run` opens. Host nodes use `eth1` (eth0 is
//! containerlab's management interface) and get what `xoff testbed up` configures on a host:
//! MAC, address, static neighbours, routes to the other hosts' subnets through the gateway
//! (not a default route, which would take the management network's), transmit checksum
//! offload off. `xoff host --iface eth1` runs the host stack there.

use crate::testbed::TestbedError;
use dataplane::config::{Peer, Topology};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::Path;

/// The data interface of a host node (containerlab keeps eth0 for management).
pub const HOST_IFACE: &str = "eth1";
/// containerlab's management interface in every `linux` node.
const MGMT_IFACE: &str = "eth0";
/// MTU of every data interface (as the veths of `xoff testbed up`).
pub const MTU: u32 = 1500;
/// Where a switch node finds the topology file.
pub const CONFIG_DIR: &str = "/etc/xoff";

/// A containerlab topology definition (the fields this export writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lab {
    pub name: String,
    pub topology: LabTopology,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabTopology {
    pub nodes: BTreeMap<String, LabNode>,
    pub links: Vec<LabLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabNode {
    pub kind: String,
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binds: Vec<String>,
    pub exec: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabLink {
    /// Both ends, `"node:iface"`.
    pub endpoints: [String; 2],
}

/// Export settings.
#[derive(Debug, Clone)]
pub struct ClabOptions {
    /// Container image of every node: needs `xoff`, `ip`, `ethtool` and `sysctl`.
    pub image: String,
    /// Lab name (default: the topology's name).
    pub name: Option<String>,
    /// Extra arguments of every `xoff run` (as `xoff testbed up --run-args`).
    pub run_args: Vec<String>,
}

/// Errors of the export beyond loading the topology.
fn invalid(msg: String) -> TestbedError {
    TestbedError::Command {
        cmd: "testbed export --containerlab".into(),
        msg,
    }
}

/// Quotes `s` for a POSIX shell (containerlab splits `exec` lines as a shell does).
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The containerlab topology of topology file `file`.
pub fn export(file: &Path, opts: &ClabOptions) -> Result<Lab, TestbedError> {
    let topo = Topology::load(file)?;
    let r = topo.resolve()?;
    let fname = file
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| "topology.toml".into());
    let abs = std::fs::canonicalize(file)?;
    let config = format!("{CONFIG_DIR}/{fname}");
    let mut nodes = BTreeMap::new();
    let node = |exec: Vec<String>, binds: Vec<String>| LabNode {
        kind: "linux".into(),
        image: opts.image.clone(),
        binds,
        exec,
    };
    let ipv6_off = [
        "sysctl -qw net.ipv6.conf.all.disable_ipv6=1".to_string(),
        "sysctl -qw net.ipv6.conf.default.disable_ipv6=1".to_string(),
    ];
    for (si, s) in r.switches.iter().enumerate() {
        let mut exec: Vec<String> = ipv6_off.to_vec();
        for (pi, p) in s.spec.ports.iter().enumerate() {
            if p.iface == MGMT_IFACE {
                return Err(invalid(format!(
                    "switch `{}` port `{}` uses {MGMT_IFACE}, containerlab's management \
                     interface: set another `iface`",
                    s.name(),
                    p.name
                )));
            }
            if s.peers[pi] == Peer::None {
                continue;
            }
            let mac = r.mac(Peer::Port(si as u32, pi as u16)).expect("port MAC");
            // containerlab makes 9500 B veths; `testbed up`'s are 1500 B, which XDP on veth
            // and the switch's frame buffers are sized for.
            exec.push(format!(
                "ip link set {} address {mac} mtu {MTU}",
                quote(&p.iface)
            ));
        }
        let sw = s.name();
        let mut run = vec![
            "xoff".to_string(),
            "run".into(),
            "--config".into(),
            config.clone(),
            "--switch".into(),
            sw.to_string(),
            "--ctl".into(),
            format!("/run/xoff/{sw}.sock"),
        ];
        run.extend(opts.run_args.iter().cloned());
        let cmd: Vec<String> = run.iter().map(|a| quote(a)).collect();
        // Detached: containerlab runs `exec` lines one after another and waits for each.
        let script = format!(
            "mkdir -p /run/xoff && setsid {} </dev/null >/var/log/xoff-{sw}.log 2>&1 &",
            cmd.join(" ")
        );
        exec.push(format!("sh -c {}", quote(&script)));
        let bind = format!("{}:{config}:ro", abs.display());
        nodes.insert(sw.to_string(), node(exec, vec![bind]));
    }
    // Every host subnet, for the routes through each host's gateway.
    let subnets: BTreeSet<(Ipv4Addr, u8)> = r
        .hosts
        .iter()
        .map(|h| (net(h.ip, h.prefix_len), h.prefix_len))
        .collect();
    for (h, cfg) in r.hosts.iter().zip(&topo.hosts) {
        let d = HOST_IFACE;
        let mut exec: Vec<String> = ipv6_off.to_vec();
        exec.push(format!("ip link set {d} address {} mtu {MTU}", h.mac));
        // Forwarded TCP/UDP would otherwise carry partial checksums (as `testbed up`).
        exec.push(format!("ethtool -K {d} tx off"));
        exec.push(format!("ip addr add {} dev {d}", quote(&cfg.ip)));
        let own = net(h.ip, h.prefix_len);
        for o in r.hosts.iter().filter(|o| o.name != h.name) {
            if net(o.ip, h.prefix_len) == own {
                exec.push(format!(
                    "ip neigh replace {} lladdr {} dev {d} nud permanent",
                    o.ip, o.mac
                ));
            }
        }
        if let Some(gw) = h.gateway {
            if let Some(m) = h.peer_mac {
                exec.push(format!(
                    "ip neigh replace {gw} lladdr {m} dev {d} nud permanent"
                ));
            }
            for &(n, len) in subnets.iter().filter(|&&(n, len)| {
                // Subnets the host does not reach directly.
                !(n == own && len == h.prefix_len)
            }) {
                exec.push(format!(
                    "ip route replace {n}/{len} via {gw} dev {d} onlink"
                ));
            }
        }
        nodes.insert(h.name.clone(), node(exec, Vec::new()));
    }
    let end = |e: Peer| -> Result<String, TestbedError> {
        match e {
            Peer::Host(h) => Ok(format!("{}:{HOST_IFACE}", r.hosts[h as usize].name)),
            Peer::Port(s, p) => Ok(format!(
                "{}:{}",
                r.switches[s as usize].name(),
                r.port(s, p).iface
            )),
            Peer::None => Err(invalid("a link with an unresolved end".into())),
        }
    };
    let links = r
        .links
        .iter()
        .map(|&(a, b)| {
            Ok(LabLink {
                endpoints: [end(a)?, end(b)?],
            })
        })
        .collect::<Result<Vec<_>, TestbedError>>()?;
    Ok(Lab {
        name: opts.name.clone().unwrap_or_else(|| r.name.clone()),
        topology: LabTopology { nodes, links },
    })
}

fn net(ip: Ipv4Addr, len: u8) -> Ipv4Addr {
    let m = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    Ipv4Addr::from(u32::from(ip) & m)
}

/// The lab as a `*.clab.yml` document.
pub fn to_yaml(lab: &Lab) -> Result<String, TestbedError> {
    serde_norway::to_string(lab).map_err(|e| invalid(format!("YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leafspine() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/leafspine.toml")
    }

    fn opts() -> ClabOptions {
        ClabOptions {
            image: "xoff:test".into(),
            name: None,
            run_args: vec!["--workers".into(), "2".into()],
        }
    }

    /// Splits an `exec` line as a POSIX shell would for the quoting [`quote`] produces.
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut in_word = false;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    in_word = true;
                    for q in chars.by_ref() {
                        if q == '\'' {
                            break;
                        }
                        cur.push(q);
                    }
                }
                '\\' => {
                    in_word = true;
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                ' ' => {
                    if in_word {
                        out.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                c => {
                    in_word = true;
                    cur.push(c);
                }
            }
        }
        if in_word {
            out.push(cur);
        }
        out
    }

    /// The export of leafspine.toml, written as YAML and read back generically: containerlab's
    /// structure (name; topology.nodes of kind linux with image and exec; topology.links of
    /// two "node:iface" endpoints), every link end an interface its node uses: a switch
    /// port's `iface` (what `xoff run` opens) set up by the node's exec, or the host's eth1
    /// configured by its exec.
    #[test]
    fn leafspine_exports_a_containerlab_topology() {
        let file = leafspine();
        let yaml = to_yaml(&export(&file, &opts()).expect("export")).expect("yaml");
        let v: serde_norway::Value = serde_norway::from_str(&yaml).expect("YAML parses");
        let topo = Topology::load(&file).expect("topology");
        let r = topo.resolve().expect("resolve");
        assert_eq!(v["name"].as_str(), Some("leafspine"));
        let nodes = v["topology"]["nodes"].as_mapping().expect("topology.nodes");
        assert_eq!(nodes.len(), r.switches.len() + r.hosts.len());
        let mut exec_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, n) in nodes {
            let name = k.as_str().expect("node name").to_string();
            assert_eq!(n["kind"].as_str(), Some("linux"), "{name}");
            assert_eq!(n["image"].as_str(), Some("xoff:test"), "{name}");
            let exec: Vec<String> = n["exec"]
                .as_sequence()
                .expect("exec")
                .iter()
                .map(|x| x.as_str().expect("exec line").to_string())
                .collect();
            assert!(!exec.is_empty(), "{name}");
            exec_of.insert(name, exec);
        }
        // Switches: the xoff run command line `testbed up` would start, on the bound file.
        let abs = std::fs::canonicalize(&file).expect("canonical");
        for s in &r.switches {
            let name = s.name();
            let n = &nodes[&serde_norway::Value::from(name)];
            let binds: Vec<&str> = n["binds"]
                .as_sequence()
                .expect("binds")
                .iter()
                .filter_map(|b| b.as_str())
                .collect();
            assert_eq!(
                binds,
                [format!("{}:/etc/xoff/leafspine.toml:ro", abs.display())]
            );
            let start = exec_of[name]
                .iter()
                .find(|l| l.starts_with("sh -c "))
                .expect("switch start line");
            let script = &words(start)[2];
            let want = format!(
                "setsid xoff run --config /etc/xoff/leafspine.toml --switch {name} \
                 --ctl /run/xoff/{name}.sock --workers 2 </dev/null"
            );
            assert!(script.contains(&want), "{script}");
            assert!(script.trim_end().ends_with('&'), "runs detached: {script}");
        }
        // Links: each topology link once, as node:iface pairs.
        let links = v["topology"]["links"].as_sequence().expect("links");
        assert_eq!(links.len(), r.links.len());
        let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for l in links {
            let ends = l["endpoints"].as_sequence().expect("endpoints");
            assert_eq!(ends.len(), 2);
            for e in ends {
                let e = e.as_str().expect("endpoint");
                let (node, iface) = e.split_once(':').expect("node:iface");
                assert!(exec_of.contains_key(node), "{e}: no such node");
                assert!(
                    used.entry(node.to_string())
                        .or_default()
                        .insert(iface.to_string()),
                    "{e} used twice"
                );
                let exec = &exec_of[node];
                match r.switches.iter().find(|s| s.name() == node) {
                    Some(s) => {
                        assert!(
                            s.spec.ports.iter().any(|p| p.iface == iface),
                            "{e}: not an interface xoff run opens"
                        );
                        let mac = r
                            .mac(Peer::Port(
                                r.switches
                                    .iter()
                                    .position(|x| x.name() == node)
                                    .expect("sw") as u32,
                                s.port_index(
                                    &s.spec
                                        .ports
                                        .iter()
                                        .find(|p| p.iface == iface)
                                        .expect("p")
                                        .name,
                                )
                                .expect("port"),
                            ))
                            .expect("mac");
                        let want = format!("ip link set {iface} address {mac} mtu {MTU}");
                        assert!(exec.contains(&want), "{e}: no `{want}` in {exec:?}");
                    }
                    None => {
                        assert_eq!(iface, HOST_IFACE, "{e}");
                        let h = r.hosts.iter().find(|h| h.name == node).expect("host");
                        let cfg = topo.hosts.iter().find(|c| c.name == node).expect("cfg");
                        for want in [
                            format!("ip addr add {} dev {iface}", cfg.ip),
                            format!("ip link set {iface} address {} mtu {MTU}", h.mac),
                        ] {
                            assert!(exec.contains(&want), "{node}: no `{want}` in {exec:?}");
                        }
                        // Routes to the two other leaves' subnets through the gateway.
                        let gw = h.gateway.expect("gateway");
                        let routes = exec
                            .iter()
                            .filter(|l| l.starts_with("ip route replace"))
                            .inspect(|l| {
                                assert!(l.ends_with(&format!("via {gw} dev {iface} onlink")))
                            })
                            .count();
                        assert_eq!(routes, 2, "{node}: {exec:?}");
                    }
                }
            }
        }
        // Every switch port that has a link appears as an endpoint: nothing xoff run expects
        // is left unwired.
        for s in &r.switches {
            let want: BTreeSet<String> = s
                .spec
                .ports
                .iter()
                .zip(&s.peers)
                .filter(|(_, p)| **p != Peer::None)
                .map(|(p, _)| p.iface.clone())
                .collect();
            assert_eq!(used.get(s.name()), Some(&want), "{}", s.name());
        }
    }

    #[test]
    fn quoting_survives_a_shell_split() {
        for s in ["plain", "with space", "it's", "a'b c", "", "--x=1"] {
            assert_eq!(words(&quote(s)), [s], "{s:?}");
        }
    }

    #[test]
    fn a_port_on_the_management_interface_is_refused() {
        let dir = std::env::temp_dir().join(format!("xoff-clab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let p = dir.join("mgmt.toml");
        std::fs::write(
            &p,
            "[[switch]]\nname = \"s1\"\nport = [{ name = \"p1\", iface = \"eth0\" }, { name = \"p2\" }]\n\
             [[host]]\nname = \"a\"\nip = \"10.0.0.1/24\"\n[[host]]\nname = \"b\"\nip = \"10.0.0.2/24\"\n\
             [[link]]\na = \"a\"\nb = \"s1:p1\"\n[[link]]\na = \"b\"\nb = \"s1:p2\"\n",
        )
        .expect("write");
        let e = export(&p, &opts()).expect_err("eth0 port accepted");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.to_string().contains("management"), "{e}");
    }
}

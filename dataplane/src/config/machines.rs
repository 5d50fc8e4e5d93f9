//! Testbeds across machines (issue 23 item 2): `[[machine]]` tables place nodes on machines,
//! and a link whose ends are on different machines is `kind = "vxlan"`, carried by a kernel
//! VXLAN tunnel over the machines' underlay network.
//!
//! ```toml
//! [[machine]]
//! name = "A"
//! underlay = "192.168.100.1"     # this machine's address on the network between machines
//! nodes = ["leaf1", "h11"]
//!
//! [[link]]
//! a = "leaf1:up1"                # on machine A
//! b = "spine1:l1"                # on machine B
//! kind = "vxlan"
//! vni = 101
//! local = "192.168.100.1"        # underlay address of the machine holding `a`
//! remote = "192.168.100.2"       # underlay address of the machine holding `b`
//! ```
//!
//! `local` and `remote` are named from end `a`'s side: the machine holding `b` builds its end
//! with the two swapped. Only testbeds read these; a vxlan link is an ordinary link to the
//! switches and to `xoff sim`, and a file with machines still builds on one box (every node
//! local, every link a veth).

use super::{Endpoint, Topology};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Largest VXLAN network identifier (24 bits, RFC 7348 §5).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// Bytes VXLAN adds around an Ethernet frame on an IPv4 underlay: outer IPv4 (20), UDP (8),
/// VXLAN (8) and the inner Ethernet header (14) that the inner MTU does not count.
pub const VXLAN_OVERHEAD: u32 = 50;

/// Default MTU of a VXLAN link: full-size Ethernet frames, like a veth.
pub const DEFAULT_VXLAN_MTU: u32 = 1500;

/// What carries a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// A veth pair (both ends on one machine).
    #[default]
    Veth,
    /// A kernel VXLAN tunnel between two machines (a veth when built on one box).
    Vxlan,
}

/// `[[machine]]`: one machine of a testbed spread over several.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub name: String,
    /// The machine's address on the underlay network (the VXLAN tunnels' local end).
    pub underlay: Ipv4Addr,
    /// Hosts and switches built on this machine.
    pub nodes: Vec<String>,
}

/// The VXLAN parameters of one end of a vxlan link, as the machine holding that end sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanEnd {
    pub vni: u32,
    pub local: Ipv4Addr,
    pub remote: Ipv4Addr,
    /// MTU of the VXLAN device (the largest inner frame without its Ethernet header).
    pub mtu: u32,
}

impl Topology {
    /// The machine that holds `node`, if the file places nodes on machines.
    pub fn machine_of(&self, node: &str) -> Option<&MachineConfig> {
        self.machines
            .iter()
            .find(|m| m.nodes.iter().any(|n| n == node))
    }

    /// VXLAN parameters of link `i` seen from its end `a` (`from_a`) or `b`; `None` for a
    /// veth link.
    pub fn vxlan_end(&self, i: usize, from_a: bool) -> Option<VxlanEnd> {
        let l = &self.links[i];
        if l.kind != LinkKind::Vxlan {
            return None;
        }
        let (a, b) = (l.local?, l.remote?);
        let (local, remote) = if from_a { (a, b) } else { (b, a) };
        Some(VxlanEnd {
            vni: l.vni?,
            local,
            remote,
            mtu: l.mtu.unwrap_or(DEFAULT_VXLAN_MTU),
        })
    }

    /// The smallest MTU of the vxlan links (1500 without any): the largest frame every path
    /// of the testbed carries. Testbeds give hosts this MTU so TCP never sends a frame a
    /// tunnel cannot carry (the switches send no ICMP "fragmentation needed").
    pub fn path_mtu(&self) -> u32 {
        self.links
            .iter()
            .filter(|l| l.kind == LinkKind::Vxlan)
            .map(|l| l.mtu.unwrap_or(DEFAULT_VXLAN_MTU))
            .min()
            .unwrap_or(DEFAULT_VXLAN_MTU)
    }

    /// Name of the node an endpoint belongs to.
    fn node_name(e: &Endpoint) -> &str {
        match e {
            Endpoint::Host(h) => h,
            Endpoint::Port(s, _) => s,
        }
    }

    /// Checks `[[machine]]` tables and the vxlan keys of links.
    pub(super) fn validate_machines(&self) -> Result<(), super::ConfigError> {
        let is_node = |n: &str| {
            self.switches.iter().any(|s| s.name == n) || self.hosts.iter().any(|h| h.name == n)
        };
        let mut names = HashMap::new();
        let mut addrs = HashMap::new();
        let mut placed: HashMap<&str, usize> = HashMap::new();
        for (i, m) in self.machines.iter().enumerate() {
            if let Some(j) = names.insert(m.name.as_str(), i) {
                return Err(self.err(
                    format!("machine[{i}].name"),
                    format!("duplicate name `{}` (also machine[{j}])", m.name),
                ));
            }
            if let Some(j) = addrs.insert(m.underlay, i) {
                return Err(self.err(
                    format!("machine[{i}].underlay"),
                    format!("address {} is also machine[{j}]'s", m.underlay),
                ));
            }
            for (k, n) in m.nodes.iter().enumerate() {
                let key = format!("machine[{i}].nodes[{k}]");
                if !is_node(n) {
                    return Err(self.err(key, format!("no host or switch named `{n}`")));
                }
                if let Some(j) = placed.insert(n.as_str(), i) {
                    return Err(self.err(
                        key,
                        format!("`{n}` is already on machine `{}`", self.machines[j].name),
                    ));
                }
            }
        }
        if !self.machines.is_empty() {
            let all = self
                .switches
                .iter()
                .map(|s| &s.name)
                .chain(self.hosts.iter().map(|h| &h.name));
            for n in all {
                if !placed.contains_key(n.as_str()) {
                    return Err(self.err(
                        "machine",
                        format!("`{n}` is on no machine: list it in one machine's `nodes`"),
                    ));
                }
            }
        }
        let mut vnis = HashMap::new();
        for (i, ((a, b), l)) in self.endpoints().iter().zip(&self.links).enumerate() {
            let key = |k: &str| format!("link[{i}].{k}");
            let (ma, mb) = (
                self.machine_of(Self::node_name(a)),
                self.machine_of(Self::node_name(b)),
            );
            if l.kind == LinkKind::Veth {
                for (k, set) in [
                    ("vni", l.vni.is_some()),
                    ("local", l.local.is_some()),
                    ("remote", l.remote.is_some()),
                    ("mtu", l.mtu.is_some()),
                ] {
                    if set {
                        return Err(self.err(
                            key(k),
                            format!("only a link with kind = \"vxlan\" takes `{k}`"),
                        ));
                    }
                }
                if let (Some(ma), Some(mb)) = (ma, mb) {
                    if ma.name != mb.name {
                        return Err(self.err(
                            key("kind"),
                            format!(
                                "the link crosses machines `{}` and `{}`: it needs kind = \"vxlan\" with vni, local and remote",
                                ma.name, mb.name
                            ),
                        ));
                    }
                }
                continue;
            }
            let vni = l
                .vni
                .ok_or_else(|| self.err(key("vni"), "a vxlan link needs `vni`"))?;
            if vni == 0 || vni > MAX_VNI {
                return Err(self.err(key("vni"), format!("{vni} is not in 1..={MAX_VNI}")));
            }
            if let Some(j) = vnis.insert(vni, i) {
                return Err(self.err(key("vni"), format!("vni {vni} is also link[{j}]'s")));
            }
            let local = l.local.ok_or_else(|| {
                self.err(
                    key("local"),
                    "a vxlan link needs `local` (underlay address of the machine holding `a`)",
                )
            })?;
            let remote = l.remote.ok_or_else(|| {
                self.err(
                    key("remote"),
                    "a vxlan link needs `remote` (underlay address of the machine holding `b`)",
                )
            })?;
            if local == remote {
                return Err(self.err(
                    key("remote"),
                    format!("{remote} is also `local`: a tunnel joins two machines"),
                ));
            }
            if let Some(mtu) = l.mtu {
                if !(68..=9000).contains(&mtu) {
                    return Err(self.err(key("mtu"), format!("{mtu} is not in 68..=9000")));
                }
            }
            if let (Some(ma), Some(mb)) = (ma, mb) {
                if ma.name == mb.name {
                    return Err(self.err(
                        key("kind"),
                        format!(
                            "both ends are on machine `{}`: a vxlan link must cross machines",
                            ma.name
                        ),
                    ));
                }
                for (k, addr, m, side) in [("local", local, ma, "a"), ("remote", remote, mb, "b")] {
                    if addr != m.underlay {
                        return Err(self.err(
                            key(k),
                            format!(
                                "{addr} is not the underlay address of machine `{}` ({}), which holds end `{side}`",
                                m.name, m.underlay
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Topology;
    use std::path::Path;

    /// h1 -- s1 ==vxlan== s2 -- h2, s1 and h1 on machine A, s2 and h2 on B.
    const SPLIT: &str = r#"
name = "v"
[[switch]]
name = "s1"
port = [{ name = "p1" }, { name = "up" }]
[[switch]]
name = "s2"
port = [{ name = "p1" }, { name = "up" }]
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
vni = 7
local = "192.168.100.1"
remote = "192.168.100.2"
"#;

    fn load(s: &str) -> Result<Topology, crate::ConfigError> {
        Topology::parse(s, Path::new("split.toml"))
    }

    #[test]
    fn split_file_places_nodes_and_swaps_tunnel_ends() {
        let t = load(SPLIT).unwrap();
        assert_eq!(t.machine_of("h2").unwrap().name, "B");
        let (a, b) = (
            t.vxlan_end(2, true).unwrap(),
            t.vxlan_end(2, false).unwrap(),
        );
        assert_eq!((a.vni, a.local, a.remote), (7, b.remote, b.local));
        assert_eq!(a.mtu, 1500);
        assert!(t.vxlan_end(0, true).is_none());
        assert_eq!(t.path_mtu(), 1500);
        let t = load(&SPLIT.replace("vni = 7", "vni = 7\nmtu = 1450")).unwrap();
        assert_eq!(t.path_mtu(), 1450);
    }

    #[test]
    fn bad_vxlan_links_and_machines_name_key_and_reason() {
        let bad = |from: &str, to: &str, key: &str, why: &str| {
            let e = load(&SPLIT.replace(from, to)).unwrap_err();
            assert_eq!(e.file, "split.toml");
            assert_eq!(e.key, key, "{e}");
            assert!(e.reason.contains(why), "{e}");
        };
        bad("vni = 7\n", "", "link[2].vni", "needs `vni`");
        bad(
            "vni = 7",
            "vni = 16777216",
            "link[2].vni",
            "not in 1..=16777215",
        );
        bad("vni = 7", "vni = 0", "link[2].vni", "not in");
        bad(
            "local = \"192.168.100.1\"\n",
            "",
            "link[2].local",
            "needs `local`",
        );
        bad(
            "remote = \"192.168.100.2\"",
            "remote = \"192.168.100.9\"",
            "link[2].remote",
            "not the underlay address of machine `B`",
        );
        bad(
            "remote = \"192.168.100.2\"",
            "remote = \"192.168.100.1\"",
            "link[2].remote",
            "also `local`",
        );
        bad(
            "kind = \"vxlan\"\n",
            "",
            "link[2].vni",
            "only a link with kind",
        );
        bad(
            "kind = \"vxlan\"\nvni = 7\nlocal = \"192.168.100.1\"\nremote = \"192.168.100.2\"\n",
            "",
            "link[2].kind",
            "crosses machines `A` and `B`",
        );
        bad(
            "kind = \"vxlan\"",
            "kind = \"gre\"",
            "kind",
            "unknown variant",
        );
        bad("vni = 7", "vni = 7\nport = 1", "port", "unknown field");
        bad(
            "nodes = [\"s2\", \"h2\"]",
            "nodes = [\"s2\"]",
            "machine",
            "`h2` is on no machine",
        );
        bad(
            "nodes = [\"s2\", \"h2\"]",
            "nodes = [\"s2\", \"h2\", \"h1\"]",
            "machine[1].nodes[2]",
            "already on machine `A`",
        );
        bad(
            "nodes = [\"s2\", \"h2\"]",
            "nodes = [\"s2\", \"h2\", \"h9\"]",
            "machine[1].nodes[2]",
            "no host or switch named `h9`",
        );
        bad(
            "underlay = \"192.168.100.2\"",
            "underlay = \"192.168.100.1\"",
            "machine[1].underlay",
            "also machine[0]'s",
        );
        bad(
            "nodes = [\"s2\", \"h2\"]",
            "nodes = [\"h2\"]",
            "machine",
            "`s2` is on no machine",
        );
        bad(
            "vni = 7",
            "vni = 7\nmtu = 20000",
            "link[2].mtu",
            "not in 68..=9000",
        );
    }

    #[test]
    fn vxlan_link_on_one_machine_is_rejected_and_without_machines_accepted() {
        let e = load(
            &SPLIT
                .replace("nodes = [\"s2\", \"h2\"]", "nodes = []")
                .replace(
                    "nodes = [\"s1\", \"h1\"]",
                    "nodes = [\"s1\", \"h1\", \"s2\", \"h2\"]",
                ),
        )
        .unwrap_err();
        assert_eq!(e.key, "link[2].kind", "{e}");
        assert!(e.reason.contains("must cross machines"), "{e}");
        // Without [[machine]] tables a vxlan link is still a valid link (built as a veth).
        let one_box = SPLIT.split("[[machine]]").next().unwrap().to_string()
            + &SPLIT[SPLIT.find("[[link]]").unwrap()..];
        let t = load(&one_box).unwrap();
        assert!(t.machines.is_empty());
        assert_eq!(t.resolve().unwrap().links.len(), 3);
    }
}

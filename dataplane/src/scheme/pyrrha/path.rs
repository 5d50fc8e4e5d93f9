//! Pyrrha's path calculation (§4.2 "Determining a flow's exact path", App. E.1): from the
//! resolved topology, each switch keeps every switch's routes (candidate egress ports in FIB
//! order), ECMP seed and port peers, and recomputes a packet's onward path with the same seeded
//! CRC32 ECMP (`loadbal::ecmp`) the downstream switches will apply (hash-function-aware).
//! The result names, hop by hop, the egress port the packet will take: exactly the
//! congestion roots it can meet, to match against the congestion-root table.
//!
//! Switch ids are topology indices (the switch half of a root id, §4.4). ECMP is the only path
//! policy this models: a congestion-aware policy (DRILL) picks from live state and cannot be
//! recomputed (the paper treats it as out of scope, §4.2).

use crate::config::{Peer, ResolvedTopology};
use flowctl::pyrrha::{RootId, MAX_HOPS};
use loadbal::FiveTuple;
use std::net::IpAddr;

/// The egress ports a packet takes, `hops[k]` `k` hops on (`hops[0]`: the computing switch's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnwardPath {
    hops: [RootId; MAX_HOPS + 1],
    len: u8,
}

impl Default for OnwardPath {
    fn default() -> Self {
        OnwardPath {
            hops: [RootId::default(); MAX_HOPS + 1],
            len: 0,
        }
    }
}

impl OnwardPath {
    #[inline]
    pub fn as_slice(&self) -> &[RootId] {
        &self.hops[..usize::from(self.len)]
    }
}

#[derive(Debug, Clone)]
struct Route {
    key: u32,
    mask: u32,
    via: Vec<u16>,
}

#[derive(Debug, Clone)]
struct ModelSwitch {
    /// `ecmp_hash(seed, t) = ecmp_hash(0, t) ^ c` for every `t`: CRC32 is affine over GF(2)
    /// for messages of one length, so the seed (the first 4 bytes) only XORs in a constant.
    /// One CRC per packet then serves every downstream switch.
    c: u32,
    /// Routes, longest prefix first; of equal prefixes the later in the file first (the FIB
    /// keeps the later one).
    routes: Vec<Route>,
    /// Per port: the switch (index, ingress port) it leads to, if a switch.
    peers: Vec<Option<(u16, u16)>>,
}

/// What a Pyrrha switch knows of the network (§4.2, App. E.1.2: every switch's forwarding
/// table and seed; the paper's regular-addressing compression is not needed at this scale).
#[derive(Debug, Clone)]
pub struct PathModel {
    switches: Vec<ModelSwitch>,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl PathModel {
    /// The model of `r`'s switches.
    pub fn new(r: &ResolvedTopology) -> Self {
        let switches = r
            .switches
            .iter()
            .map(|s| {
                let mut routes: Vec<(usize, Route)> = s
                    .spec
                    .routes
                    .iter()
                    .enumerate()
                    .map(|(i, rt)| {
                        let m = mask(rt.len);
                        let route = Route {
                            key: u32::from(rt.addr) & m,
                            mask: m,
                            via: rt.via.iter().map(|v| v.0 as u16).collect(),
                        };
                        (i, route)
                    })
                    .collect();
                routes.sort_by(|a, b| {
                    b.1.mask
                        .count_ones()
                        .cmp(&a.1.mask.count_ones())
                        .then(b.0.cmp(&a.0))
                });
                ModelSwitch {
                    c: seed_constant(s.seed()),
                    routes: routes.into_iter().map(|(_, r)| r).collect(),
                    peers: s
                        .peers
                        .iter()
                        .map(|p| match *p {
                            Peer::Port(sw, port) => Some((sw as u16, port)),
                            _ => None,
                        })
                        .collect(),
                }
            })
            .collect();
        PathModel { switches }
    }

    /// Switches modelled.
    pub fn len(&self) -> usize {
        self.switches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.switches.is_empty()
    }

    /// The egress port switch `s` picks for a packet to `dst` whose unseeded ECMP hash is
    /// `h0`, as its FIB and ECMP do (`hash % n` over the route's ports in FIB order).
    #[inline]
    fn egress(&self, s: &ModelSwitch, dst: u32, h0: u32) -> Option<u16> {
        let r = s.routes.iter().find(|r| dst & r.mask == r.key)?;
        match r.via.len() {
            0 => None,
            1 => Some(r.via[0]),
            n => Some(r.via[(h0 ^ s.c) as usize % n]),
        }
    }

    /// The onward path of `t` leaving switch `s` by `port`: `port` itself, then the egress
    /// port of every switch after it, up to a host (or [`MAX_HOPS`] hops).
    pub fn onward(&self, s: u16, port: u16, t: &FiveTuple, out: &mut OnwardPath) {
        let dst = match t.dst {
            IpAddr::V4(d) => Some(u32::from(d)),
            IpAddr::V6(_) => None,
        };
        self.onward_hashed(s, port, dst, flow_hash(t), out);
    }

    /// [`Self::onward`] from what a packet carries: its IPv4 destination (`None`: not IPv4,
    /// the path stops here) and [`flow_hash`].
    #[inline]
    pub fn onward_hashed(
        &self,
        s: u16,
        port: u16,
        dst: Option<u32>,
        h0: u32,
        out: &mut OnwardPath,
    ) {
        out.hops[0] = RootId::new(s, port);
        out.len = 1;
        let Some(dst) = dst else {
            return;
        };
        let at = self
            .switches
            .get(usize::from(s))
            .and_then(|sw| sw.peers.get(usize::from(port)).copied().flatten());
        self.follow(at.map(|(n, _)| n), dst, h0, out);
    }

    /// The onward path of a packet a host linked to switch `tor` sends (§4.4 "Cooperation
    /// on end-hosts": a NIC that honours PAUSE per root): `hops[0]` is the NIC itself
    /// ([`HOST_NIC`], never a root), then the egress port of every switch from `tor` on.
    /// `dst`, `h0` as [`Self::onward_hashed`].
    #[inline]
    pub fn from_host(&self, tor: u16, dst: Option<u32>, h0: u32, out: &mut OnwardPath) {
        out.hops[0] = HOST_NIC;
        out.len = 1;
        if let Some(dst) = dst {
            self.follow(Some(tor), dst, h0, out);
        }
    }

    /// Appends the egress port of switch `at` and of every switch after it.
    #[inline]
    fn follow(&self, mut at: Option<u16>, dst: u32, h0: u32, out: &mut OnwardPath) {
        let next = |sw: &ModelSwitch, p: u16| sw.peers.get(usize::from(p)).copied().flatten();
        while let Some(n) = at {
            if usize::from(out.len) > MAX_HOPS {
                break;
            }
            let Some(sw) = self.switches.get(usize::from(n)) else {
                break;
            };
            let Some(p) = self.egress(sw, dst, h0) else {
                break;
            };
            out.hops[usize::from(out.len)] = RootId::new(n, p);
            out.len += 1;
            at = next(sw, p).map(|(n, _)| n);
        }
    }
}

/// `hops[0]` of a path computed at a host ([`PathModel::from_host`]): no switch has this id.
pub const HOST_NIC: RootId = RootId::new(u16::MAX, 0);

/// The unseeded ECMP hash of `t` (`loadbal::ecmp_hash` with seed 0).
#[inline]
pub fn flow_hash(t: &FiveTuple) -> u32 {
    loadbal::ecmp_hash(0, t)
}

/// What `seed` XORs into the ECMP hash (see `ModelSwitch::c`).
fn seed_constant(seed: u32) -> u32 {
    let zero = FiveTuple {
        proto: 0,
        src: IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        dst: IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        sport: 0,
        dport: 0,
    };
    loadbal::ecmp_hash(seed, &zero) ^ loadbal::ecmp_hash(0, &zero)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Topology;
    use crate::fib::{Fib, Forward};
    use crate::wire::data::FrameTemplate;
    use std::fmt::Write;
    use std::net::Ipv4Addr;
    use std::path::Path;

    /// A k = 4 fat-tree (4 cores, 4 pods of 2 aggregation and 2 edge switches, 2 hosts per
    /// edge), addressed 10.pod.edge.host, with ECMP upward at edges and aggregations.
    fn fat_tree_toml() -> String {
        let k = 4;
        let half = k / 2;
        let mut t = String::from("name = \"fat-tree-4\"\n");
        let sw = |t: &mut String, name: &str, seed: usize, ports: &[String], routes: &[String]| {
            let ports: Vec<String> = ports
                .iter()
                .map(|p| format!("{{ name = \"{p}\" }}"))
                .collect();
            writeln!(
                t,
                "[[switch]]\nname = \"{name}\"\nseed = {seed}\ndefaults = {{ rate = \"100Gbit\", delay = \"1us\", queues = 8 }}\nport = [{}]\nroute = [{}]\n",
                ports.join(", "),
                routes.join(", ")
            )
            .unwrap();
        };
        let route = |p: &str, via: &[String]| {
            let v: Vec<String> = via.iter().map(|x| format!("\"{x}\"")).collect();
            format!("{{ prefix = \"{p}\", via = [{}] }}", v.join(", "))
        };
        let ups: Vec<String> = (0..half).map(|i| format!("u{i}")).collect();
        let downs: Vec<String> = (0..half).map(|i| format!("d{i}")).collect();
        for p in 0..k {
            for e in 0..half {
                let mut routes: Vec<String> = (0..half)
                    .map(|h| route(&format!("10.{p}.{e}.{}/32", h + 1), &[downs[h].clone()]))
                    .collect();
                routes.push(route("10.0.0.0/8", &ups));
                let ports: Vec<String> = downs.iter().chain(&ups).cloned().collect();
                sw(
                    &mut t,
                    &format!("e{p}{e}"),
                    100 + p * 10 + e,
                    &ports,
                    &routes,
                );
            }
            for a in 0..half {
                let mut routes: Vec<String> = (0..half)
                    .map(|e| route(&format!("10.{p}.{e}.0/24"), &[downs[e].clone()]))
                    .collect();
                routes.push(route("10.0.0.0/8", &ups));
                let ports: Vec<String> = downs.iter().chain(&ups).cloned().collect();
                sw(
                    &mut t,
                    &format!("a{p}{a}"),
                    200 + p * 10 + a,
                    &ports,
                    &routes,
                );
            }
        }
        for c in 0..half * half {
            let pods: Vec<String> = (0..k).map(|p| format!("p{p}")).collect();
            let routes: Vec<String> = (0..k)
                .map(|p| route(&format!("10.{p}.0.0/16"), &[pods[p].clone()]))
                .collect();
            sw(&mut t, &format!("c{c}"), 300 + c, &pods, &routes);
        }
        for p in 0..k {
            for e in 0..half {
                for h in 0..half {
                    writeln!(
                        t,
                        "[[host]]\nname = \"h{p}{e}{h}\"\nip = \"10.{p}.{e}.{}/24\"\ngateway = \"10.{p}.{e}.254\"\n",
                        h + 1
                    )
                    .unwrap();
                    writeln!(t, "[[link]]\na = \"h{p}{e}{h}\"\nb = \"e{p}{e}:d{h}\"\n").unwrap();
                }
                for a in 0..half {
                    writeln!(t, "[[link]]\na = \"e{p}{e}:u{a}\"\nb = \"a{p}{a}:d{e}\"\n").unwrap();
                }
            }
            for a in 0..half {
                for u in 0..half {
                    let c = a * half + u;
                    writeln!(t, "[[link]]\na = \"a{p}{a}:u{u}\"\nb = \"c{c}:p{p}\"\n").unwrap();
                }
            }
        }
        t
    }

    fn leafspine() -> ResolvedTopology {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
        Topology::load(p).unwrap().resolve().unwrap()
    }

    fn fat_tree() -> ResolvedTopology {
        Topology::parse(&fat_tree_toml(), Path::new("fat-tree-4.toml"))
            .unwrap()
            .resolve()
            .unwrap()
    }

    /// Forwards the real frame of `t` from host `src` through every switch's FIB and
    /// dispatch-time path policy; returns the (switch, egress port) of every hop.
    fn fabric_path(r: &ResolvedTopology, fibs: &[Fib], src: usize, t: &FiveTuple) -> Vec<RootId> {
        let h = &r.hosts[src];
        let IpAddr::V4(dst_ip) = t.dst else {
            unreachable!()
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
            assert!(path.len() <= r.switches.len(), "loop");
            let meta = crate::parse::parse(&frame).unwrap();
            let Forward::Route { group, tuple } = fibs[s as usize].forward(in_port, &meta) else {
                panic!("{}: not routed", sw.name());
            };
            let i = loadbal::PathPolicy::ecmp(sw.spec.seed)
                .pick(tuple, group.len(), |_| Default::default(), 0)
                .unwrap();
            let nh = group[i];
            frame[0..6].copy_from_slice(&nh.mac.0);
            frame[6..12].copy_from_slice(&sw.spec.ports[usize::from(nh.port)].mac.0);
            path.push(RootId::new(s as u16, nh.port));
            at = r.peer(s, nh.port);
        }
        path
    }

    /// For every ordered host pair and several source ports: the path computed at every
    /// switch the packet crosses (from there on) equals the rest of the path it takes.
    fn check_every_flow(r: &ResolvedTopology) -> (usize, usize) {
        let model = PathModel::new(r);
        let fibs: Vec<Fib> = r.switches.iter().map(|s| Fib::new(&s.spec)).collect();
        let (mut flows, mut longest) = (0, 0);
        let mut out = OnwardPath::default();
        for (si, s) in r.hosts.iter().enumerate() {
            for d in r.hosts.iter().filter(|d| d.ip != s.ip) {
                for sport in 49152..49156 {
                    let t = FiveTuple {
                        proto: 17,
                        src: IpAddr::V4(s.ip),
                        dst: IpAddr::V4(d.ip),
                        sport,
                        dport: 4791,
                    };
                    let real = fabric_path(r, &fibs, si, &t);
                    // From the sending host: its NIC, then the same path.
                    let Peer::Port(tor, _) = s.peer else {
                        unreachable!()
                    };
                    let IpAddr::V4(dst) = t.dst else {
                        unreachable!()
                    };
                    model.from_host(tor as u16, Some(u32::from(dst)), flow_hash(&t), &mut out);
                    assert_eq!(out.as_slice()[0], HOST_NIC);
                    assert_eq!(&out.as_slice()[1..], &real[..], "{} -> {}", s.name, d.name);
                    for (k, hop) in real.iter().enumerate() {
                        model.onward(hop.switch, hop.port, &t, &mut out);
                        assert_eq!(
                            out.as_slice(),
                            &real[k..],
                            "{} -> {} at hop {k}",
                            s.name,
                            d.name
                        );
                    }
                    flows += 1;
                    longest = longest.max(real.len());
                }
            }
        }
        (flows, longest)
    }

    #[test]
    fn a_seed_xors_a_constant_into_the_crc() {
        for (seed, sport) in [(1u32, 1u16), (22, 49152), (0xdead_beef, 7)] {
            let t = FiveTuple {
                proto: 6,
                src: IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
                dst: IpAddr::V4(Ipv4Addr::new(10, 0, 3, 2)),
                sport,
                dport: 80,
            };
            assert_eq!(
                flow_hash(&t) ^ seed_constant(seed),
                loadbal::ecmp_hash(seed, &t)
            );
        }
    }

    #[test]
    fn computed_path_is_the_fabric_path_for_every_leafspine_flow() {
        let (flows, longest) = check_every_flow(&leafspine());
        assert_eq!((flows, longest), (6 * 5 * 4, 3));
    }

    #[test]
    fn computed_path_is_the_fabric_path_for_every_fat_tree_flow() {
        let r = fat_tree();
        assert_eq!(r.hosts.len(), 16);
        let (flows, longest) = check_every_flow(&r);
        assert_eq!((flows, longest), (16 * 15 * 4, 5));
        // The ECMP choices are really computed: both aggregations (and through them two
        // cores) are used. Only two of the four cores are: the seed is prepended to a CRC32,
        // and CRC is linear, so another seed only XORs a constant into the hash and the two
        // 2-way stages pick the same way up to a fixed flip (ECMP polarization of the data
        // plane's hash, which the model reproduces because it is the same hash).
        let model = PathModel::new(&r);
        let mut cores = std::collections::BTreeSet::new();
        let mut out = OnwardPath::default();
        let (e, _) = r.port_of("e00", "u0").unwrap();
        for sport in 0..64 {
            let t = FiveTuple {
                proto: 17,
                src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                dst: IpAddr::V4(Ipv4Addr::new(10, 3, 1, 2)),
                sport,
                dport: 4791,
            };
            let up = r.switches[e as usize].ecmp_port(&t).unwrap();
            model.onward(e as u16, up, &t, &mut out);
            cores.insert(out.as_slice()[2].switch);
        }
        assert_eq!(cores.len(), 2, "{cores:?}");
    }
}

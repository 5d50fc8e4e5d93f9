//! Forwarding: an L2 table (static entries + learning) and IPv4 longest-prefix routes whose
//! next hops form equal-cost groups; the switch's `loadbal::PathPolicy` picks one at dispatch
//! time (seeded CRC32 ECMP by default).
//!
//! The L2 table is an open-addressed array of atomic words so that every worker reads it and
//! learns into it without locks: an entry packs `valid | port (15 bits) | MAC (48 bits)` in one
//! `u64`, written with a single store.

use crate::config::SwitchSpec;
use crate::parse::{PacketMeta, L3};
use crate::stats::DropReason;
use crate::wire::{EtherType, MacAddr};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

const VALID: u64 = 1 << 63;
const STATIC: u64 = 1 << 62;
const PROBES: usize = 8;

/// Lock-free MAC table shared by all workers of a switch.
#[derive(Debug)]
pub struct L2Table {
    slots: Box<[AtomicU64]>,
    mask: usize,
    /// Bumped on every store into `slots`: a [`Learned`] memo taken at one generation holds
    /// while the generation does.
    generation: AtomicU64,
}

/// What one pipe last learned on one ingress port: `learn(mac, port)` ran when the table was
/// at `generation` and changed nothing, so while the table stays at that generation the same
/// call changes nothing and is skipped (`L2Table::learn_memo`). A routed frame's source is
/// the upstream router's port, the same on every frame of an ingress port, so the memo saves
/// the table probe of nearly every frame.
#[derive(Debug, Default, Clone, Copy)]
pub struct Learned {
    /// The MAC (`MacAddr::to_u64`) with bit 63 set, 0 when nothing is memoized.
    mac: u64,
    port: u16,
    generation: u64,
}

impl L2Table {
    /// A table with room for `capacity` (rounded up to a power of two) entries.
    pub fn new(capacity: usize) -> Self {
        let n = capacity.next_power_of_two().max(16);
        L2Table {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n - 1,
            generation: AtomicU64::new(0),
        }
    }

    fn home(&self, mac: u64) -> usize {
        (mac.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & self.mask
    }

    /// Port of `mac`, if known.
    #[inline]
    pub fn lookup(&self, mac: MacAddr) -> Option<u16> {
        let m = mac.to_u64();
        let h = self.home(m);
        for i in 0..PROBES {
            let e = self.slots[(h + i) & self.mask].load(Ordering::Relaxed);
            if e & VALID == 0 {
                return None;
            }
            if e & 0xffff_ffff_ffff == m {
                return Some(((e >> 48) & 0x3fff) as u16);
            }
        }
        None
    }

    fn insert(&self, mac: MacAddr, port: u16, flags: u64) {
        let m = mac.to_u64();
        let h = self.home(m);
        let word = VALID | flags | (u64::from(port & 0x3fff) << 48) | m;
        for i in 0..PROBES {
            let slot = &self.slots[(h + i) & self.mask];
            let e = slot.load(Ordering::Relaxed);
            if e & VALID == 0 || e & 0xffff_ffff_ffff == m {
                if e & STATIC != 0 && flags & STATIC == 0 {
                    return; // learning never overrides a configured entry
                }
                if e != word {
                    self.store(slot, word);
                }
                return;
            }
        }
        // Neighbourhood full: replace the last learned entry of the probe window.
        let slot = &self.slots[(h + PROBES - 1) & self.mask];
        if slot.load(Ordering::Relaxed) & STATIC == 0 {
            self.store(slot, word);
        }
    }

    fn store(&self, slot: &AtomicU64, word: u64) {
        slot.store(word, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Learns that `mac` is behind `port`.
    #[inline]
    pub fn learn(&self, mac: MacAddr, port: u16) {
        if !mac.is_multicast() && self.lookup(mac) != Some(port) {
            self.insert(mac, port, 0);
        }
    }

    /// [`L2Table::learn`], skipped when `memo` says this very call already ran and the table
    /// has not changed since (it would change nothing: `learn` is a function of the table's
    /// contents and its arguments, and its result is what the memo saw). `memo` belongs to
    /// one ingress port of one pipe.
    #[inline]
    pub fn learn_memo(&self, mac: MacAddr, port: u16, memo: &mut Learned) {
        let key = mac.to_u64() | 1 << 63;
        let generation = self.generation.load(Ordering::Relaxed);
        if memo.mac == key && memo.port == port && memo.generation == generation {
            return;
        }
        self.learn(mac, port);
        // The generation from before the call: if it stored (or another worker did
        // meanwhile), the table has moved past it and the next frame learns in full, which
        // then finds nothing to change.
        *memo = Learned {
            mac: key,
            port,
            generation,
        };
    }

    /// Adds a configured entry that learning will not move.
    pub fn add_static(&self, mac: MacAddr, port: u16) {
        self.insert(mac, port, STATIC);
    }
}

/// One ECMP group member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub port: u16,
    pub mac: MacAddr,
}

/// The forwarding decision for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward<'a> {
    /// Bridge to a port unchanged.
    Bridge(u16),
    /// Route to one of an equal-cost group of next hops (the switch's path policy picks at
    /// dispatch time): rewrite MACs, decrement TTL.
    Route {
        group: &'a [NextHop],
        tuple: &'a loadbal::FiveTuple,
    },
    /// Flood to every flooding port but the ingress one.
    Flood,
    Drop(DropReason),
}

/// A multiplicative hash for IPv4 prefix keys: SipHash's DoS resistance buys nothing for a
/// table the operator configures, and costs a third of a lookup.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrefixHasher(u64);

impl std::hash::Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type PrefixMap = HashMap<u32, usize, std::hash::BuildHasherDefault<PrefixHasher>>;

/// IPv4 routes, one hash map per prefix length, searched longest first.
#[derive(Debug, Default)]
pub struct RouteTable {
    by_len: Vec<(u8, PrefixMap)>,
    groups: Vec<Vec<NextHop>>,
}

impl RouteTable {
    pub fn add(&mut self, addr: std::net::Ipv4Addr, len: u8, group: Vec<NextHop>) {
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
        let key = u32::from(addr) & mask;
        self.groups.push(group);
        let gi = self.groups.len() - 1;
        match self.by_len.iter_mut().find(|(l, _)| *l == len) {
            Some((_, m)) => {
                m.insert(key, gi);
            }
            None => {
                let mut m = PrefixMap::default();
                m.insert(key, gi);
                self.by_len.push((len, m));
                self.by_len.sort_by_key(|e| std::cmp::Reverse(e.0));
            }
        }
    }

    /// The ECMP group of the longest matching prefix.
    #[inline]
    pub fn lookup(&self, dst: std::net::Ipv4Addr) -> Option<&[NextHop]> {
        let d = u32::from(dst);
        for (len, m) in &self.by_len {
            let mask = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            if let Some(&gi) = m.get(&(d & mask)) {
                return Some(&self.groups[gi]);
            }
        }
        None
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// The forwarding information base of a switch.
#[derive(Debug)]
pub struct Fib {
    pub l2: L2Table,
    pub routes: RouteTable,
    /// MACs of the switch's own ports: frames sent to them are routed.
    router_macs: Vec<MacAddr>,
    learning: bool,
}

impl Fib {
    pub fn new(spec: &SwitchSpec) -> Self {
        let l2 = L2Table::new(4096);
        for &(mac, p) in &spec.macs {
            l2.add_static(mac, p as u16);
        }
        let mut routes = RouteTable::default();
        for r in &spec.routes {
            routes.add(
                r.addr,
                r.len,
                r.via
                    .iter()
                    .map(|&(p, mac)| NextHop {
                        port: p as u16,
                        mac,
                    })
                    .collect(),
            );
        }
        Fib {
            l2,
            routes,
            router_macs: spec.ports.iter().map(|p| p.mac).collect(),
            learning: spec.learning,
        }
    }

    /// Decides where a frame that arrived on `in_port` goes.
    #[inline]
    pub fn forward<'a>(&'a self, in_port: u16, m: &'a PacketMeta) -> Forward<'a> {
        match self.classify(in_port, m, None) {
            Classified::Route(tuple) => match self.group(tuple) {
                Some(group) => Forward::Route { group, tuple },
                None => Forward::Drop(DropReason::NoRoute),
            },
            Classified::Other(f) => f,
        }
    }

    /// `forward` short of the route lookup: learns the source, then either a frame to route
    /// (sent to a router MAC, IPv4 with TTL left; its ECMP group is [`Fib::group`] of the
    /// tuple) or the final decision. The next hop of a routed frame depends on its 5-tuple
    /// alone, which is what lets a pipe cache it per flow (`crate::flowcache`).
    /// `learned`: the calling pipe's memo of its last learning on `in_port`
    /// ([`L2Table::learn_memo`]).
    #[inline]
    pub fn classify<'a>(
        &'a self,
        in_port: u16,
        m: &'a PacketMeta,
        learned: Option<&mut Learned>,
    ) -> Classified<'a> {
        if self.learning {
            match learned {
                Some(memo) => self.l2.learn_memo(m.src, in_port, memo),
                None => self.l2.learn(m.src, in_port),
            }
        }
        if !self.routes.is_empty() && self.is_router_mac(in_port, m.dst) {
            return self.routable(m);
        }
        if m.dst.is_multicast() {
            return Classified::Other(Forward::Flood);
        }
        Classified::Other(match self.l2.lookup(m.dst) {
            Some(p) if p == in_port => Forward::Drop(DropReason::SamePort),
            Some(p) => Forward::Bridge(p),
            None => Forward::Flood,
        })
    }

    /// Whether `mac` is one of the switch's port MACs; the ingress port's own first, which is
    /// where a routed frame is addressed (the sender's gateway or the upstream router's next
    /// hop), so the scan over every port is for the rest.
    #[inline]
    fn is_router_mac(&self, in_port: u16, mac: MacAddr) -> bool {
        self.router_macs.get(usize::from(in_port)) == Some(&mac) || self.router_macs.contains(&mac)
    }

    fn routable<'a>(&'a self, m: &'a PacketMeta) -> Classified<'a> {
        let drop = |r| Classified::Other(Forward::Drop(r));
        let (L3::Ip { tuple, ttl, .. }, EtherType::IPV4) = (&m.l3, m.ethertype) else {
            return drop(DropReason::NoRoute);
        };
        if !matches!(tuple.dst, IpAddr::V4(_)) {
            return drop(DropReason::NoRoute);
        }
        if *ttl <= 1 {
            return drop(DropReason::TtlExpired);
        }
        Classified::Route(tuple)
    }

    /// The ECMP group of the longest prefix matching the tuple's IPv4 destination, if any
    /// (never empty).
    #[inline]
    pub fn group(&self, tuple: &loadbal::FiveTuple) -> Option<&[NextHop]> {
        let IpAddr::V4(dst) = tuple.dst else {
            return None;
        };
        self.routes.lookup(dst).filter(|g| !g.is_empty())
    }
}

/// What [`Fib::classify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classified<'a> {
    /// To be routed by its 5-tuple.
    Route(&'a loadbal::FiveTuple),
    /// Bridged, flooded or dropped.
    Other(Forward<'a>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn l2_learns_without_overriding_static() {
        let t = L2Table::new(16);
        let a = MacAddr([2, 0, 0, 0, 0, 1]);
        assert_eq!(t.lookup(a), None);
        t.learn(a, 3);
        assert_eq!(t.lookup(a), Some(3));
        t.learn(a, 4);
        assert_eq!(t.lookup(a), Some(4));
        t.add_static(a, 1);
        t.learn(a, 5);
        assert_eq!(t.lookup(a), Some(1));
        t.learn(MacAddr::BROADCAST, 2);
        assert_eq!(t.lookup(MacAddr::BROADCAST), None);
        // Fill far beyond capacity: lookups stay bounded and correct for what is present.
        for i in 0..1000u64 {
            t.learn(MacAddr::from_u64(0x0200_0000_1000 + i), (i % 7) as u16);
        }
        assert_eq!(t.lookup(a), Some(1));
    }

    /// Learning through per-port memos leaves the table exactly as learning every frame
    /// does, through moves, static entries and full neighbourhoods (a 16-slot table, 40 MACs).
    #[test]
    fn memoized_learning_matches_learning_every_frame() {
        let (plain, memoized) = (L2Table::new(16), L2Table::new(16));
        for t in [&plain, &memoized] {
            t.add_static(MacAddr::from_u64(0x0200_0000_0003), 7);
        }
        let mut memos = [Learned::default(); 4];
        let mut x = 7u64;
        let mut skipped = 0;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Mostly the same source per port, sometimes another one or a move.
            let port = ((x >> 60) % 4) as u16;
            let mac = if (x >> 40).is_multiple_of(8) {
                MacAddr::from_u64(0x0200_0000_0000 + (x >> 20) % 40)
            } else {
                MacAddr::from_u64(0x0200_0000_1000 + u64::from(port))
            };
            plain.learn(mac, port);
            let before = memoized.generation.load(Ordering::Relaxed);
            let m = memos[usize::from(port)];
            memoized.learn_memo(mac, port, &mut memos[usize::from(port)]);
            if m.mac == mac.to_u64() | 1 << 63 && m.port == port && m.generation == before {
                skipped += 1;
            }
            let words = |t: &L2Table| -> Vec<u64> {
                t.slots.iter().map(|s| s.load(Ordering::Relaxed)).collect()
            };
            assert_eq!(words(&plain), words(&memoized));
        }
        assert!(skipped > 10_000, "{skipped}");
    }

    #[test]
    fn longest_prefix_wins() {
        let mut r = RouteTable::default();
        let nh = |p| {
            vec![NextHop {
                port: p,
                mac: MacAddr([2, 0, 0, 0, 0, p as u8]),
            }]
        };
        r.add(Ipv4Addr::new(0, 0, 0, 0), 0, nh(9));
        r.add(Ipv4Addr::new(10, 0, 0, 0), 8, nh(1));
        r.add(Ipv4Addr::new(10, 0, 2, 0), 24, nh(2));
        r.add(Ipv4Addr::new(10, 0, 2, 7), 32, nh(3));
        let p = |a: [u8; 4]| r.lookup(Ipv4Addr::from(a)).unwrap()[0].port;
        assert_eq!(p([10, 0, 2, 7]), 3);
        assert_eq!(p([10, 0, 2, 8]), 2);
        assert_eq!(p([10, 1, 0, 1]), 1);
        assert_eq!(p([192, 168, 0, 1]), 9);
    }
}

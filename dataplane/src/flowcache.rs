//! A per-pipe cache of routed IPv4 flows' next hops.
//!
//! Under seeded-CRC32 ECMP the next hop of a routed frame is a pure function of its 5-tuple
//! (the longest-prefix match on the destination, then the CRC of the seed and the tuple):
//! routes and seeds never change while a switch runs. The route lookup and the CRC are about
//! 300 instructions per packet (`bench/callgrind.sh`); a hit here is a few dozen. The cache is
//! direct-mapped and exact: a slot holds the whole tuple, a different flow hashing to the same
//! slot replaces it, and what a hit returns is what the full lookup would have computed. A
//! pipe whose path choice reads switch state (DRILL, or a path scheme such as Proteus or
//! CONGA) keeps no cache.

use crate::fib::NextHop;
use loadbal::FiveTuple;
use std::net::IpAddr;

/// Slots per pipe: 1024 × 24 B, within L1/L2 beside the rest of a pipe's hot state, and
/// more flows than a testbed's switch port usually sees at once.
const SLOTS: usize = 1024;

/// A tuple packed into two words; `rest`'s low byte is 1 in a used slot, so an empty slot
/// (all zero) never matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Key {
    addrs: u64,
    rest: u64,
}

impl Key {
    #[inline]
    fn of(t: &FiveTuple) -> Option<Key> {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (t.src, t.dst) else {
            return None;
        };
        Some(Key {
            addrs: u64::from(u32::from(s)) << 32 | u64::from(u32::from(d)),
            rest: u64::from(t.sport) << 48 | u64::from(t.dport) << 32 | u64::from(t.proto) << 8 | 1,
        })
    }

    #[inline]
    fn slot(&self) -> usize {
        let h = (self.addrs ^ self.rest.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 54) as usize & (SLOTS - 1)
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: Key,
    nh: NextHop,
}

/// The next hops of recently routed flows of one pipe.
#[derive(Debug)]
pub struct FlowCache {
    slots: Box<[Slot]>,
}

impl Default for FlowCache {
    fn default() -> Self {
        let empty = Slot {
            key: Key::default(),
            nh: NextHop {
                port: 0,
                mac: crate::wire::MacAddr([0; 6]),
            },
        };
        FlowCache {
            slots: vec![empty; SLOTS].into_boxed_slice(),
        }
    }
}

impl FlowCache {
    /// The cached next hop of `t`'s flow.
    #[inline]
    pub fn get(&self, t: &FiveTuple) -> Option<NextHop> {
        let k = Key::of(t)?;
        let s = &self.slots[k.slot()];
        (s.key == k).then_some(s.nh)
    }

    /// Remembers that `t`'s flow goes to `nh` (IPv4 only; others are not cached).
    #[inline]
    pub fn put(&mut self, t: &FiveTuple, nh: NextHop) {
        if let Some(key) = Key::of(t) {
            self.slots[key.slot()] = Slot { key, nh };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn t(src: [u8; 4], sport: u16, proto: u8) -> FiveTuple {
        FiveTuple {
            proto,
            src: IpAddr::V4(Ipv4Addr::from(src)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 3)),
            sport,
            dport: 5201,
        }
    }

    fn nh(p: u16) -> NextHop {
        NextHop {
            port: p,
            mac: MacAddr([2, 0, 0, 0, 0, p as u8]),
        }
    }

    #[test]
    fn a_hit_needs_the_whole_tuple() {
        let mut c = FlowCache::default();
        let a = t([10, 0, 0, 1], 1000, 17);
        assert_eq!(c.get(&a), None);
        c.put(&a, nh(3));
        assert_eq!(c.get(&a), Some(nh(3)));
        // Every field takes part: no other flow reads a's next hop.
        for other in [
            t([10, 0, 0, 2], 1000, 17),
            t([10, 0, 0, 1], 1001, 17),
            t([10, 0, 0, 1], 1000, 6),
            FiveTuple { dport: 5202, ..a },
            FiveTuple {
                dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 4)),
                ..a
            },
        ] {
            assert_eq!(c.get(&other), None, "{other:?}");
        }
    }

    #[test]
    fn a_colliding_flow_replaces_the_slot() {
        let mut c = FlowCache::default();
        let a = t([10, 0, 0, 1], 1000, 17);
        let slot = Key::of(&a).unwrap().slot();
        let b = (1001..u16::MAX)
            .map(|p| t([10, 0, 0, 1], p, 17))
            .find(|b| Key::of(b).unwrap().slot() == slot)
            .expect("some port collides in 1024 slots");
        c.put(&a, nh(3));
        c.put(&b, nh(4));
        assert_eq!((c.get(&a), c.get(&b)), (None, Some(nh(4))));
    }

    #[test]
    fn ipv6_flows_are_not_cached() {
        let mut c = FlowCache::default();
        let v6 = FiveTuple {
            src: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..t([10, 0, 0, 1], 1000, 17)
        };
        c.put(&v6, nh(3));
        assert_eq!(c.get(&v6), None);
    }
}

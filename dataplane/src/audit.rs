//! The lossless audit (issue 21 item 3): where every frame a port received went, per port and
//! priority — forwarded, dropped (by reason), still queued, or in a hand-off ring between
//! workers — so a "0 lost" is a balance the switch proves, not a counter that happens to read 0.
//!
//! Each pipe keeps a [`Ledger`] shard (one writer: the pipe's worker) and counts a frame's
//! fate where it is decided, keyed by the frame's ingress port and priority (`Pkt::in_port`,
//! `Pkt::prio`). [`Audit::new`] sums the shards and checks three identities:
//!
//! 1. per port: `rx = Σ_prio received + consumed control + dropped before classification`
//!    (`rx` is the port counter taken where frames leave the receive ring);
//! 2. per port and priority: `received + copies = forwarded + dropped + queued + in_handoff`,
//!    where `queued = admitted − departed − flushed` and `in_handoff = handed − accepted −
//!    lost in a full ring`; i.e. every classified frame was queued here, handed to the pipe
//!    that owns its egress, or dropped with a reason;
//! 3. per switch: `Σ queued` equals the packets physically in the data queues (the queue
//!    depth counters), which checks the egress side the ledger derives `queued` from.
//!
//! Frames the kernel dropped before they reached the AF_XDP ring (XDP_STATISTICS) never
//! reach the ledger: they are reported per port as `ring_lost` and count as losses.
//! Counters are read without stopping the workers, so a switch under load can show frames
//! in motion as an imbalance; an audit is exact once the switch is quiescent (traffic
//! stopped), which is when experiments and tests take it.

use crate::stats::{Counter, DropReason, SwitchSnapshot};
use crate::SwitchSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Priorities a port classifies into.
pub const PRIOS: usize = 8;
const REASONS: usize = DropReason::ALL.len();

/// Fates of frames received on one port with one priority, counted by one pipe.
/// `repr(C)` keeps the declared order (Rust's own layout had put `received` at byte 144) and
/// the alignment starts each slot on a line, so the three counters every forwarded packet
/// touches share one cache line (cachegrind: 128-host fabric misses, `bench/RESULTS.md`).
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Slot {
    received: Counter,
    admitted: Counter,
    departed: Counter,
    handed: Counter,
    accepted: Counter,
    flushed: Counter,
    handoff_lost: Counter,
    copies: Counter,
    dropped: [Counter; REASONS],
}

/// Fates of frames a port received that never got a priority, and frames lost on the port's
/// emulated wire.
#[derive(Debug, Default)]
struct PreSlot {
    consumed: Counter,
    dropped: [Counter; REASONS],
    wire_dropped: Counter,
}

/// One pipe's share of the audit counters (written only by that pipe's worker).
#[derive(Debug)]
pub struct Ledger {
    slots: Box<[Slot]>,
    pre: Box<[PreSlot]>,
}

impl Ledger {
    pub fn new(ports: usize) -> Self {
        Ledger {
            slots: (0..ports * PRIOS).map(|_| Slot::default()).collect(),
            pre: (0..ports).map(|_| PreSlot::default()).collect(),
        }
    }

    #[inline]
    fn slot(&self, port: u16, prio: u8) -> &Slot {
        &self.slots[usize::from(port) * PRIOS + usize::from(prio & 7)]
    }

    /// A frame got its priority (it now has a fate in this ledger).
    #[inline]
    pub fn received(&self, port: u16, prio: u8) {
        self.slot(port, prio).received.add(1);
    }
    /// A flooded frame's extra copy (made, or not made for lack of a chunk and dropped).
    #[inline]
    pub fn copy(&self, port: u16, prio: u8) {
        self.slot(port, prio).copies.add(1);
    }
    #[inline]
    pub fn admitted(&self, port: u16, prio: u8) {
        self.slot(port, prio).admitted.add(1);
    }
    #[inline]
    pub fn departed(&self, port: u16, prio: u8) {
        self.slot(port, prio).departed.add(1);
    }
    /// An admitted packet dropped from its queue (port down, PFC watchdog).
    #[inline]
    pub fn flushed(&self, port: u16, prio: u8, why: DropReason) {
        let s = self.slot(port, prio);
        s.flushed.add(1);
        s.dropped[why.index()].add(1);
    }
    #[inline]
    pub fn handed(&self, port: u16, prio: u8) {
        self.slot(port, prio).handed.add(1);
    }
    #[inline]
    pub fn accepted(&self, port: u16, prio: u8) {
        self.slot(port, prio).accepted.add(1);
    }
    /// A hand-off lost to the receiving worker's full ring (counted by the sender).
    #[inline]
    pub fn handoff_lost(&self, port: u16, prio: u8) {
        let s = self.slot(port, prio);
        s.handoff_lost.add(1);
        s.dropped[DropReason::QueueFull.index()].add(1);
    }
    /// A classified frame dropped before it was queued.
    #[inline]
    pub fn dropped(&self, port: u16, prio: u8, why: DropReason) {
        self.slot(port, prio).dropped[why.index()].add(1);
    }
    /// A frame dropped before it had a priority (oversize, malformed, unknown control).
    #[inline]
    pub fn dropped_pre(&self, port: u16, why: DropReason) {
        self.pre[usize::from(port)].dropped[why.index()].add(1);
    }
    /// Frames (data and control) that were on `port`'s emulated wire when its link went down
    /// or its interface vanished. The wire keeps no ingress port or priority, so these are
    /// counted per egress port; they were counted `forwarded` when they left their queue.
    #[inline]
    pub fn wire_dropped(&self, port: u16, n: u64) {
        self.pre[usize::from(port)].wire_dropped.add(n);
    }
    /// A link-local control frame (PFC, Xoff signal) a scheme consumed.
    #[inline]
    pub fn consumed(&self, port: u16) {
        self.pre[usize::from(port)].consumed.add(1);
    }
}

/// The ledger shards of a switch summed, as plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerSnapshot {
    /// `[port][prio]`.
    pub slots: Vec<[SlotSnapshot; PRIOS]>,
    /// `[port]`.
    pub pre: Vec<PreSnapshot>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlotSnapshot {
    pub received: u64,
    pub admitted: u64,
    pub departed: u64,
    pub handed: u64,
    pub accepted: u64,
    pub flushed: u64,
    pub handoff_lost: u64,
    pub copies: u64,
    pub dropped: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PreSnapshot {
    pub consumed: u64,
    pub dropped: BTreeMap<String, u64>,
    #[serde(default)]
    pub wire_dropped: u64,
}

fn add_drops(into: &mut BTreeMap<String, u64>, from: &[Counter; REASONS]) {
    for r in DropReason::ALL {
        let n = from[r.index()].get();
        if n > 0 {
            *into.entry(r.name().to_string()).or_default() += n;
        }
    }
}

impl LedgerSnapshot {
    /// Sums the shards of every pipe.
    pub fn sum<'a>(ports: usize, shards: impl IntoIterator<Item = &'a Ledger>) -> Self {
        let mut s = LedgerSnapshot {
            slots: (0..ports).map(|_| Default::default()).collect(),
            pre: vec![PreSnapshot::default(); ports],
        };
        for l in shards {
            for p in 0..ports {
                for c in 0..PRIOS {
                    let (a, o) = (&mut s.slots[p][c], &l.slots[p * PRIOS + c]);
                    a.received += o.received.get();
                    a.admitted += o.admitted.get();
                    a.departed += o.departed.get();
                    a.handed += o.handed.get();
                    a.accepted += o.accepted.get();
                    a.flushed += o.flushed.get();
                    a.handoff_lost += o.handoff_lost.get();
                    a.copies += o.copies.get();
                    add_drops(&mut a.dropped, &o.dropped);
                }
                s.pre[p].consumed += l.pre[p].consumed.get();
                s.pre[p].wire_dropped += l.pre[p].wire_dropped.get();
                add_drops(&mut s.pre[p].dropped, &l.pre[p].dropped);
            }
        }
        s
    }
}

/// One priority of one port in an audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrioAudit {
    pub prio: u8,
    /// The switch claims no loss for this priority (PFC enabled on it, or a per-hop
    /// flow-control scheme on).
    pub lossless: bool,
    pub received: u64,
    /// Extra copies of flooded frames.
    pub copies: u64,
    pub forwarded: u64,
    pub dropped: BTreeMap<String, u64>,
    pub queued: i64,
    pub in_handoff: i64,
    /// `received + copies − forwarded − dropped − queued − in_handoff`: 0 when balanced.
    pub balance: i64,
}

/// One port in an audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortAudit {
    pub port: usize,
    pub name: String,
    /// Frames taken from the receive ring.
    pub rx: u64,
    /// Link-local control frames consumed (PFC, Xoff signals).
    pub consumed: u64,
    /// Dropped before classification (malformed, oversize, unknown control), by reason.
    pub dropped_pre: BTreeMap<String, u64>,
    /// Dropped by the kernel before the AF_XDP ring (XDP_STATISTICS: rx_dropped,
    /// rx_ring_full, rx_invalid_descs).
    pub ring_lost: u64,
    /// Frames on the port's emulated wire when its link went down (egress side; already
    /// counted `forwarded` by their ingress rows).
    #[serde(default)]
    pub wire_dropped: u64,
    /// Frames the kernel discarded on transmit (the interface's `tx_dropped`): counted
    /// `forwarded` here, lost after the switch let go of them (e.g. sent in the moment between
    /// a link going down and the switch hearing of it).
    #[serde(default)]
    pub kernel_tx_dropped: u64,
    /// `rx − Σ received − consumed − dropped_pre`: 0 when balanced.
    pub rx_balance: i64,
    /// Priorities with any traffic.
    pub prios: Vec<PrioAudit>,
}

/// A switch's audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    pub switch: String,
    pub ports: Vec<PortAudit>,
    /// Σ queued over the ledger.
    pub queued: i64,
    /// Packets in the data queues by the queue depth counters.
    pub queued_physical: u64,
    /// Every identity holds.
    pub balanced: bool,
    /// Frames of lossless priorities dropped, plus ring losses on ports that carry lossless
    /// traffic.
    pub lossless_lost: u64,
    /// All frames dropped after classification, plus all ring and wire losses.
    pub lost: u64,
}

/// Which priorities `spec` claims are lossless.
pub fn lossless_prios(spec: &SwitchSpec) -> u8 {
    if spec.bfc.is_some() || spec.aquarius.is_some() || spec.pyrrha.is_some() {
        return 0xff;
    }
    spec.pfc.as_ref().map_or(0, |p| p.enable_mask)
}

impl Audit {
    /// Audits `ledger` against the port counters of `snap` (same switch, read together).
    pub fn new(spec: &SwitchSpec, snap: &SwitchSnapshot, ledger: &LedgerSnapshot) -> Audit {
        let mask = lossless_prios(spec);
        let mut ports = Vec::new();
        let (mut queued, mut lossless_lost, mut lost) = (0i64, 0u64, 0u64);
        let mut balanced = true;
        for (p, ps) in snap.ports.iter().enumerate() {
            let (slots, pre) = (&ledger.slots[p], &ledger.pre[p]);
            let ring_lost = ps.xdp.lost();
            let mut prios = Vec::new();
            let mut carries_lossless = false;
            for (c, s) in slots.iter().enumerate() {
                if s.received + s.accepted + s.copies == 0 {
                    continue;
                }
                let lossless = mask & (1 << c) != 0;
                carries_lossless |= lossless;
                let d: u64 = s.dropped.values().sum();
                let q = s.admitted as i64 - s.departed as i64 - s.flushed as i64;
                let h = s.handed as i64 - s.accepted as i64 - s.handoff_lost as i64;
                let forwarded = s.departed;
                let balance = (s.received + s.copies) as i64 - forwarded as i64 - d as i64 - q - h;
                balanced &= balance == 0;
                queued += q;
                lost += d;
                if lossless {
                    lossless_lost += d;
                }
                prios.push(PrioAudit {
                    prio: c as u8,
                    lossless,
                    received: s.received,
                    copies: s.copies,
                    forwarded,
                    dropped: s.dropped.clone(),
                    queued: q,
                    in_handoff: h,
                    balance,
                });
            }
            let received: u64 = slots.iter().map(|s| s.received).sum();
            let pre_d: u64 = pre.dropped.values().sum();
            let rx_balance =
                ps.rx_pkts as i64 - received as i64 - pre.consumed as i64 - pre_d as i64;
            balanced &= rx_balance == 0;
            lost += ring_lost + pre.wire_dropped + ps.kernel_tx_dropped;
            if carries_lossless {
                lossless_lost += ring_lost;
            }
            // Which priorities the wire held is not kept: a lossless claim counts them all.
            if mask != 0 {
                lossless_lost += pre.wire_dropped + ps.kernel_tx_dropped;
            }
            ports.push(PortAudit {
                port: p,
                name: ps.name.clone(),
                rx: ps.rx_pkts,
                consumed: pre.consumed,
                dropped_pre: pre.dropped.clone(),
                ring_lost,
                wire_dropped: pre.wire_dropped,
                kernel_tx_dropped: ps.kernel_tx_dropped,
                rx_balance,
                prios,
            });
        }
        let queued_physical: u64 = snap
            .ports
            .iter()
            .flat_map(|p| p.queues.iter().map(|q| q.depth_pkts))
            .sum();
        balanced &= queued == queued_physical as i64;
        Audit {
            switch: snap.switch.clone(),
            ports,
            queued,
            queued_physical,
            balanced,
            lossless_lost,
            lost,
        }
    }

    /// Whether the switch may claim "0 lost" for its lossless priorities.
    pub fn lossless_ok(&self) -> bool {
        self.balanced && self.lossless_lost == 0
    }

    /// An aligned table for people: one line per port and priority with traffic.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "switch {}: {} (queued {} = {} in the queues); lost {}, lossless lost {}",
            self.switch,
            if self.balanced {
                "balanced"
            } else {
                "NOT BALANCED"
            },
            self.queued,
            self.queued_physical,
            self.lost,
            self.lossless_lost
        );
        let _ = writeln!(
            s,
            "{:<10} {:>4} {:>3} {:>10} {:>10} {:>8} {:>7} {:>7} {:>7}  drops by reason",
            "port",
            "prio",
            "ll",
            "received",
            "forwarded",
            "dropped",
            "queued",
            "handoff",
            "balance"
        );
        for p in &self.ports {
            for r in &p.prios {
                let d: u64 = r.dropped.values().sum();
                let why: Vec<String> = r.dropped.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(
                    s,
                    "{:<10} {:>4} {:>3} {:>10} {:>10} {:>8} {:>7} {:>7} {:>7}  {}",
                    p.name,
                    r.prio,
                    if r.lossless { "yes" } else { "" },
                    r.received + r.copies,
                    r.forwarded,
                    d,
                    r.queued,
                    r.in_handoff,
                    r.balance,
                    why.join(" ")
                );
            }
            if p.wire_dropped > 0 || p.kernel_tx_dropped > 0 {
                let _ = writeln!(
                    s,
                    "{:<10}  link down: {} frames dropped on the emulated wire, {} by the kernel on transmit",
                    p.name, p.wire_dropped, p.kernel_tx_dropped
                );
            }
            if p.rx > 0 || p.ring_lost > 0 {
                let why: Vec<String> = p
                    .dropped_pre
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = writeln!(
                    s,
                    "{:<10}  rx {} = classified + {} control consumed + {} dropped unclassified{}; ring lost {}; rx balance {}",
                    p.name,
                    p.rx,
                    p.consumed,
                    p.dropped_pre.values().sum::<u64>(),
                    if why.is_empty() { String::new() } else { format!(" ({})", why.join(" ")) },
                    p.ring_lost,
                    p.rx_balance
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of};

    /// The three counters every forwarded packet touches share a slot's first cache line.
    #[test]
    fn per_packet_counters_share_a_line() {
        assert_eq!(align_of::<Slot>(), 64);
        assert!(offset_of!(Slot, departed) + 8 <= 64);
        assert!(offset_of!(Slot, received) < offset_of!(Slot, departed));
    }
}

//! Counters. A port's counters are written by the worker that owns the port, so its
//! increments are a relaxed load and store (no locked instruction per packet), and readers
//! (the control socket) see them without slowing the data path. What another thread counts on
//! a port goes to counters that only ever take atomic adds, summed on read: `drops_shared`
//! (a full hand-off ring, `runtime::Handoffs`; a control frame without a free chunk) and the
//! link transitions the control loop sees (`link_down`, `link_up`). So every increment is
//! kept with any number of workers (issue 21 item 2; `tests/handoff.rs` counts 300 000
//! frames through two workers exactly).

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter. `add` is a plain load + store (no locked instruction on the packet path), which
/// is exact only while one thread writes the counter: the worker that owns its port. A counter
/// that other threads may write too takes `add_shared` (an atomic add) for *every* write.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`; only the counter's single writer may call it.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Adds `n` atomically: for counters any thread may write.
    #[inline]
    pub fn add_shared(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// Raises the counter to `v` if larger (watermarks).
    #[inline]
    pub fn max(&self, v: u64) {
        if v > self.0.load(Ordering::Relaxed) {
            self.0.store(v, Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Shorter than its format allows.
    Runt,
    /// IPv4 header cut short.
    TruncatedIpv4,
    /// IPv4 header with a bad version, IHL or total length.
    BadIpv4Header,
    TruncatedIpv6,
    BadIpv6Header,
    UnknownEtherType,
    /// Longer than a buffer chunk holds.
    Oversize,
    /// No L2 or L3 entry and flooding not allowed.
    NoRoute,
    /// TTL or hop limit reached zero.
    TtlExpired,
    /// Destination is the port it came in on.
    SamePort,
    /// Tail drop at the egress queue limit (no MMU) or MMU egress threshold.
    QueueFull,
    /// MMU ingress admission refused (shared buffer threshold or headroom exhausted).
    IngressBuffer,
    /// Lossless packet found no headroom: should never happen when headroom is sized right.
    LosslessOverflow,
    /// No free buffer chunk to copy a flooded frame into.
    NoFrame,
    /// MAC control frame (PAUSE/PFC) consumed or not understood.
    MacControl,
    /// Egress port went away.
    PortDown,
    /// The PFC watchdog declared the queue stormed and drops its packets.
    PfcWatchdog,
    /// A control frame this switch made (PFC, Xoff signal) for a port another worker owns,
    /// lost to that worker's full hand-off ring (the scheme sends it again on its next
    /// refresh). Counted so a control frame a scheme counted as sent but that never reached
    /// the wire is accounted for.
    ControlLost,
}

impl DropReason {
    pub const ALL: [DropReason; 18] = [
        DropReason::Runt,
        DropReason::TruncatedIpv4,
        DropReason::BadIpv4Header,
        DropReason::TruncatedIpv6,
        DropReason::BadIpv6Header,
        DropReason::UnknownEtherType,
        DropReason::Oversize,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::SamePort,
        DropReason::QueueFull,
        DropReason::IngressBuffer,
        DropReason::LosslessOverflow,
        DropReason::NoFrame,
        DropReason::MacControl,
        DropReason::PortDown,
        DropReason::PfcWatchdog,
        DropReason::ControlLost,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::TruncatedIpv4 => "truncated_ipv4",
            DropReason::BadIpv4Header => "bad_ipv4_header",
            DropReason::TruncatedIpv6 => "truncated_ipv6",
            DropReason::BadIpv6Header => "bad_ipv6_header",
            DropReason::UnknownEtherType => "unknown_ethertype",
            DropReason::Oversize => "oversize",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::SamePort => "same_port",
            DropReason::QueueFull => "queue_full",
            DropReason::IngressBuffer => "ingress_buffer",
            DropReason::LosslessOverflow => "lossless_overflow",
            DropReason::NoFrame => "no_frame",
            DropReason::MacControl => "mac_control",
            DropReason::PortDown => "port_down",
            DropReason::PfcWatchdog => "pfc_watchdog",
            DropReason::ControlLost => "control_lost",
        }
    }
}

/// Counters of one egress queue. Line-aligned, `repr(C)`: the seven that every enqueue and
/// dequeue writes (and `drops`) fill the first cache line; at Rust's 72 bytes and 8-byte
/// alignment most queues' counters straddled two lines.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct QueueCounters {
    pub enq_pkts: Counter,
    pub enq_bytes: Counter,
    pub deq_pkts: Counter,
    pub deq_bytes: Counter,
    pub depth_bytes: Counter,
    pub depth_pkts: Counter,
    pub watermark_bytes: Counter,
    pub drops: Counter,
    pub ecn_marked: Counter,
}

/// Counters of one port. `repr(C)` and the alignment put what every packet touches (the
/// rx and tx counts and `shared_rx`, which `rx` reads first) in the first cache line; Rust's
/// own layout had put `shared_rx` two lines after them.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct PortCounters {
    pub rx_pkts: Counter,
    pub rx_bytes: Counter,
    pub tx_pkts: Counter,
    pub tx_bytes: Counter,
    /// Several workers receive on this port (`queues_rx` > 1, issue 23 item 4): the counters
    /// ingress writes (`rx_*`, `drops`) then take atomic adds only, so none is lost.
    pub shared_rx: bool,
    /// Indexed by `DropReason::index` (attributed to the port the frame arrived on, except
    /// egress drops, which count at the egress port). Written only by the port's worker.
    pub drops: Vec<Counter>,
    /// Drops on this port that another worker saw (a full hand-off ring toward this port, a
    /// control frame for it without a free frame): atomic adds only, summed with `drops` on
    /// read, so no increment is lost to the owner's plain writes.
    pub drops_shared: Vec<Counter>,
    pub queues: Vec<QueueCounters>,
    /// AF_XDP ring statistics (XDP_STATISTICS), refreshed by the port's worker.
    pub xdp_rx_dropped: Counter,
    pub xdp_rx_invalid: Counter,
    pub xdp_rx_ring_full: Counter,
    pub xdp_fill_ring_empty: Counter,
    pub xdp_tx_invalid: Counter,
    pub xdp_tx_ring_empty: Counter,
    /// Frames the kernel discarded on transmit since the switch started (the interface's
    /// `tx_dropped`, e.g. sent into a link that just went down): handed to the TX ring,
    /// never on the wire.
    pub kernel_tx_dropped: Counter,
    /// Set when the interface went away.
    pub down: Counter,
    /// Link transitions rtnetlink reported (`xoff run`'s control loop, `crate::ctl`): up to
    /// down or deleted, and back up. Written by that one thread, read by anyone.
    pub link_down: Counter,
    pub link_up: Counter,
}

impl PortCounters {
    pub fn new(queues: usize) -> Self {
        PortCounters {
            rx_pkts: Counter::default(),
            rx_bytes: Counter::default(),
            tx_pkts: Counter::default(),
            tx_bytes: Counter::default(),
            drops: DropReason::ALL.iter().map(|_| Counter::default()).collect(),
            drops_shared: DropReason::ALL.iter().map(|_| Counter::default()).collect(),
            queues: (0..queues).map(|_| QueueCounters::default()).collect(),
            xdp_rx_dropped: Counter::default(),
            xdp_rx_invalid: Counter::default(),
            xdp_rx_ring_full: Counter::default(),
            xdp_fill_ring_empty: Counter::default(),
            xdp_tx_invalid: Counter::default(),
            xdp_tx_ring_empty: Counter::default(),
            kernel_tx_dropped: Counter::default(),
            down: Counter::default(),
            link_down: Counter::default(),
            link_up: Counter::default(),
            shared_rx: false,
        }
    }

    /// Counters of a port that `rx_writers` threads may receive on (see `shared_rx`).
    pub fn with_rx_writers(mut self, rx_writers: u32) -> Self {
        self.shared_rx = rx_writers > 1;
        self
    }

    /// Counts a received frame.
    #[inline]
    pub fn rx(&self, len: u32) {
        if self.shared_rx {
            self.rx_pkts.add_shared(1);
            self.rx_bytes.add_shared(u64::from(len));
        } else {
            self.rx_pkts.add(1);
            self.rx_bytes.add(u64::from(len));
        }
    }

    /// Counts a drop seen by the port's own worker (or by any worker receiving on a
    /// multi-queue port: `shared_rx`).
    #[inline]
    pub fn drop(&self, r: DropReason) {
        if self.shared_rx {
            self.drops[r.index()].add_shared(1);
        } else {
            self.drops[r.index()].add(1);
        }
    }

    /// Counts a drop on this port seen by any other thread.
    pub fn drop_shared(&self, r: DropReason) {
        self.drops_shared[r.index()].add_shared(1);
    }

    /// Drops of one reason, from the owner and from other workers.
    pub fn drops_of(&self, r: DropReason) -> u64 {
        self.drops[r.index()].get() + self.drops_shared[r.index()].get()
    }

    pub fn snapshot(&self, name: &str) -> PortSnapshot {
        PortSnapshot {
            name: name.to_string(),
            up: self.down.get() == 0,
            rx_pkts: self.rx_pkts.get(),
            rx_bytes: self.rx_bytes.get(),
            tx_pkts: self.tx_pkts.get(),
            tx_bytes: self.tx_bytes.get(),
            drops: DropReason::ALL
                .iter()
                .filter(|&&r| self.drops_of(r) > 0)
                .map(|&r| (r.name().to_string(), self.drops_of(r)))
                .collect(),
            port_down: None,
            port_up: None,
            xdp: XdpSnapshot {
                rx_dropped: self.xdp_rx_dropped.get(),
                rx_invalid_descs: self.xdp_rx_invalid.get(),
                rx_ring_full: self.xdp_rx_ring_full.get(),
                rx_fill_ring_empty_descs: self.xdp_fill_ring_empty.get(),
                tx_invalid_descs: self.xdp_tx_invalid.get(),
                tx_ring_empty_descs: self.xdp_tx_ring_empty.get(),
            },
            kernel_tx_dropped: self.kernel_tx_dropped.get(),
            queues: self
                .queues
                .iter()
                .map(|q| QueueSnapshot {
                    enq_pkts: q.enq_pkts.get(),
                    enq_bytes: q.enq_bytes.get(),
                    deq_pkts: q.deq_pkts.get(),
                    deq_bytes: q.deq_bytes.get(),
                    depth_bytes: q.depth_bytes.get(),
                    depth_pkts: q.depth_pkts.get(),
                    watermark_bytes: q.watermark_bytes.get(),
                    drops: q.drops.get(),
                    ecn_marked: q.ecn_marked.get(),
                })
                .collect(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A point-in-time copy of a port's counters, as `xoff ctl stats --json` prints it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct PortSnapshot {
    pub name: String,
    pub up: bool,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub drops: BTreeMap<String, u64>,
    /// Times the link went down (or its interface vanished) and came back up, where a link
    /// watcher runs (`xoff run`); absent in virtual time, which has no links to lose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_down: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_up: Option<u64>,
    pub xdp: XdpSnapshot,
    /// Frames the kernel discarded on transmit (the interface's `tx_dropped` since start);
    /// left out of the JSON while 0 (always, in virtual time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_tx_dropped: u64,
    pub queues: Vec<QueueSnapshot>,
}

/// XDP_STATISTICS of a port's socket.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct XdpSnapshot {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_invalid_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl XdpSnapshot {
    /// Frames the kernel dropped on their way into the switch.
    pub fn lost(&self) -> u64 {
        self.rx_dropped + self.rx_invalid_descs + self.rx_ring_full
    }
}

/// Counters of one egress queue, copied.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct QueueSnapshot {
    pub enq_pkts: u64,
    pub enq_bytes: u64,
    pub deq_pkts: u64,
    pub deq_bytes: u64,
    pub depth_bytes: u64,
    pub depth_pkts: u64,
    pub watermark_bytes: u64,
    pub drops: u64,
    pub ecn_marked: u64,
}

/// All counters of a switch.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct SwitchSnapshot {
    pub switch: String,
    pub uptime_s: f64,
    pub ports: Vec<PortSnapshot>,
    /// MMU statistics, when an MMU is configured (JSON as the `mmu` crate reports them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mmu: Option<serde_json::Value>,
    /// Flow-control counters of the schemes when configured (one object per pipe, or one
    /// object for a single pipe): PFC per port and priority, watchdog events, and BFC (`bfc`:
    /// pauses/resumes per queue, collisions, active queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<crate::scheme::StatsSet>,
    /// Pause/resume commands the AFC unit applied and refused (no such port or queue), from
    /// every source: PFC, BFC, `xoff ctl`, the shared-memory ring.
    #[serde(default)]
    pub afc_applied: u64,
    #[serde(default)]
    pub afc_refused: u64,
    /// Commands external controllers could not write because their ring lane was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afc_ring_full: Option<u64>,
    /// UMEM chunks of a running switch (AF_XDP ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umem: Option<UmemSnapshot>,
    /// AF_XDP sockets, RX queues and workers of a running switch (issue 23 item 4): bind
    /// mode and fallbacks, per-queue and per-worker counters. Absent in virtual time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<crate::nicstats::NicSnapshot>,
}

/// UMEM chunks: all of them, those the switch holds free (its workers' lists and the shared
/// pool), and those its sockets lent the kernel (fill and RX rings, TX rings not yet
/// completed); the rest are in queues, on emulated wires and in hand-off rings. An idle
/// switch's `free + in_rings` is the same after any fault as before it: the leak check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct UmemSnapshot {
    pub frames: u64,
    pub free: u64,
    #[serde(default)]
    pub in_rings: u64,
}

impl UmemSnapshot {
    /// Chunks not held by queues, wires or hand-offs: constant at idle unless chunks leak.
    pub fn idle(&self) -> u64 {
        self.free + self.in_rings
    }
}

impl SwitchSnapshot {
    /// A fixed-width table for humans.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "switch {} (up {:.1} s)", self.switch, self.uptime_s);
        let _ = writeln!(
            s,
            "{:<12} {:>4} {:>10} {:>12} {:>10} {:>12} {:>8} {:>10} {:>9}",
            "port",
            "up",
            "rx_pkts",
            "rx_bytes",
            "tx_pkts",
            "tx_bytes",
            "drops",
            "maxq_B",
            "xdp_lost"
        );
        for p in &self.ports {
            let drops: u64 = p.drops.values().sum::<u64>();
            let wm = p
                .queues
                .iter()
                .map(|q| q.watermark_bytes)
                .max()
                .unwrap_or(0);
            let _ = writeln!(
                s,
                "{:<12} {:>4} {:>10} {:>12} {:>10} {:>12} {:>8} {:>10} {:>9}",
                p.name,
                if p.up { "yes" } else { "NO" },
                p.rx_pkts,
                p.rx_bytes,
                p.tx_pkts,
                p.tx_bytes,
                drops,
                wm,
                p.xdp.lost()
            );
            for (r, n) in &p.drops {
                let _ = writeln!(s, "{:<12}   drop {r}: {n}", "");
            }
        }
        if let Some(u) = self.umem {
            let _ = writeln!(
                s,
                "umem: {} of {} chunks free, {} lent to the kernel",
                u.free, u.frames, u.in_rings
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What `rx` and the fabric's tx count touch is one cache line of a port's counters, and
    /// what an enqueue and a dequeue touch one line of the queue's.
    #[test]
    fn per_packet_port_counters_share_a_line() {
        use std::mem::{align_of, offset_of};
        assert_eq!(align_of::<PortCounters>(), 64);
        assert!(offset_of!(PortCounters, tx_bytes) + 8 <= 64);
        assert!(offset_of!(PortCounters, shared_rx) < 64);
        assert_eq!(align_of::<QueueCounters>(), 64);
        assert!(offset_of!(QueueCounters, watermark_bytes) + 8 <= 64);
    }

    /// The owner's plain adds and another worker's atomic adds to the same port's drops, at
    /// full speed on two threads: every increment is counted (the owner's `drops` has one
    /// writer; `drops_shared` only atomic adds).
    #[test]
    fn drops_from_two_workers_are_exact() {
        const N: u64 = 5_000_000;
        let c = Arc::new(PortCounters::new(1));
        let go = Arc::new(std::sync::Barrier::new(2));
        let other = {
            let (c, go) = (c.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                for _ in 0..N {
                    c.drop_shared(DropReason::QueueFull);
                }
            })
        };
        go.wait();
        for _ in 0..N {
            PortCounters::drop(&c, DropReason::QueueFull);
        }
        other.join().unwrap();
        assert_eq!(c.drops_of(DropReason::QueueFull), 2 * N);
        let snap = c.snapshot("p");
        assert_eq!(snap.drops.get("queue_full"), Some(&(2 * N)));
    }
}

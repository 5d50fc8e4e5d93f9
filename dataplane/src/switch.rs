//! The switch pipeline: the one implementation of forwarding, queueing, scheduling and link
//! emulation, run on AF_XDP ports by `xoff run` and on in-memory ports by the virtual-time
//! fabric.
//!
//! [`Switch::receive`] and [`Switch::service`] are the two entry points; each is the list of
//! its stages, which live in `crate::pipeline` (one file per part). Flow-control schemes plug
//! in through `crate::scheme`; path choice among equal-cost next hops through
//! `loadbal::PathPolicy`. A `Switch` is one pipeline ("pipe") owning the egress side of a
//! subset of the ports; with one worker it owns them all. Frames bound for a port another pipe
//! owns are handed off through the [`Outputs`] sink.

use crate::audit::{Audit, Ledger, LedgerSnapshot};
use crate::buffer::Buffer;
use crate::config::SwitchSpec;
use crate::fib::Fib;
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::link::Link;
use crate::pipeline::egress::Departure;
use crate::pipeline::ingress::Route;
pub use crate::pipeline::{Handoff, Outputs};
use crate::queue::QueueSet;
use crate::scheme::{ControlFrame, SchemeStats, Schemes};
use crate::stats::{PortCounters, SwitchSnapshot};
use flowctl::Afc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// State shared by all pipes of a switch: configuration, FIB, counters, the AFC unit.
#[derive(Debug)]
pub struct SwitchShared {
    pub spec: SwitchSpec,
    /// Per port, what the per-packet path reads of `spec.ports` (see [`PortHot`]).
    pub hot: Vec<PortHot>,
    pub fib: Fib,
    pub counters: Vec<PortCounters>,
    /// The AFC unit: pause registers of every port's data queues, written only by commands.
    pub afc: Afc,
    /// The port's socket is in service (cleared when its interface vanishes).
    pub up: Vec<AtomicBool>,
    /// The port's link is up (carrier and admin state, from the control loop's link watch):
    /// a port with its link down takes no packets and drops what it holds, counted, instead
    /// of sending them into a dead interface where they would vanish uncounted.
    pub carrier: Vec<AtomicBool>,
    /// State the schemes share between pipes (e.g. BFC's pause counters).
    pub schemes: crate::scheme::Shared,
    /// Every pipe's audit ledger (`crate::audit`), registered as the pipe is built.
    ledgers: std::sync::Mutex<Vec<Arc<Ledger>>>,
    /// Packet taps (`xoff ctl tap`), looked at by each port's worker once per burst.
    pub taps: Arc<crate::tap::Taps>,
}

/// What the per-packet path reads of a port's spec, packed four ports to a cache line: in the
/// 208-byte `PortSpec` the MAC, the priority source and the 64-byte `prio_map` lie on
/// different lines, three cold lines per packet in a fabric too large for the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct PortHot {
    pub mac: crate::wire::MacAddr,
    pub prio_source: crate::config::PrioSource,
    /// Data queue of each priority (`PortSpec::prio_map`, below the port's queues, which the
    /// config bounds by 127).
    pub prio_map: [u8; 8],
}

impl PortHot {
    fn of(p: &crate::config::PortSpec) -> Self {
        PortHot {
            mac: p.mac,
            prio_source: p.prio_source,
            prio_map: p.prio_map.map(|q| q as u8),
        }
    }
}

impl SwitchShared {
    pub fn new(spec: SwitchSpec) -> Arc<Self> {
        Arc::new(SwitchShared {
            hot: spec.ports.iter().map(PortHot::of).collect(),
            fib: Fib::new(&spec),
            counters: spec
                .ports
                .iter()
                .map(|p| PortCounters::new(p.queues).with_rx_writers(p.queues_rx))
                .collect(),
            afc: Afc::new(spec.ports.iter().map(|p| p.queues)),
            up: spec.ports.iter().map(|_| AtomicBool::new(true)).collect(),
            carrier: spec.ports.iter().map(|_| AtomicBool::new(true)).collect(),
            schemes: crate::scheme::Shared::new(&spec),
            ledgers: Default::default(),
            taps: Arc::new(crate::tap::Taps::new(&spec)),
            spec,
        })
    }

    /// The audit counters of every pipe, summed.
    pub fn ledger(&self) -> LedgerSnapshot {
        let g = self.ledgers.lock().unwrap_or_else(|e| e.into_inner());
        LedgerSnapshot::sum(self.ports(), g.iter().map(|l| &**l))
    }

    /// The lossless audit of `snap` (this switch's counters, read just before).
    pub fn audit(&self, snap: &SwitchSnapshot) -> Audit {
        Audit::new(&self.spec, snap, &self.ledger())
    }

    pub fn ports(&self) -> usize {
        self.spec.ports.len()
    }

    pub fn is_up(&self, p: usize) -> bool {
        self.up[p].load(Ordering::Relaxed) && self.carrier[p].load(Ordering::Relaxed)
    }

    /// The link watch saw `p`'s link go down or come back up.
    pub fn set_carrier(&self, p: usize, up: bool) {
        self.carrier[p].store(up, Ordering::Relaxed);
    }

    /// Counters of all ports.
    pub fn snapshot(&self, uptime_s: f64, mmu: Option<serde_json::Value>) -> SwitchSnapshot {
        SwitchSnapshot {
            switch: self.spec.name.clone(),
            uptime_s,
            ports: self
                .counters
                .iter()
                .zip(&self.spec.ports)
                .map(|(c, p)| c.snapshot(&p.name))
                .collect(),
            mmu,
            pfc: None,
            afc_applied: self.afc.applied(),
            afc_refused: self.afc.refused(),
            afc_ring_full: None,
            umem: None,
            nic: None,
        }
    }
}

/// Errors building a pipeline from a switch's configuration.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("buffer: {0}")]
    Mmu(#[from] mmu::MmuError),
    #[error(transparent)]
    Scheme(#[from] crate::scheme::SchemeError),
}

/// The egress side of one port: its queue set and its emulated wire.
pub(crate) struct Egress {
    pub(crate) qs: QueueSet,
    pub(crate) link: Link,
}

/// One pipeline of a switch.
pub struct Switch {
    pub shared: Arc<SwitchShared>,
    /// Which pipe owns each port's egress.
    pub(crate) owner: Vec<u16>,
    pub(crate) me: u16,
    pub(crate) egress: Vec<Option<Egress>>,
    pub(crate) buffer: Buffer,
    pub(crate) schemes: Schemes,
    pub(crate) policy: loadbal::PathPolicy,
    /// Next hops of routed flows, when the path choice is a pure function of the 5-tuple
    /// (ECMP, no path scheme); see `crate::flowcache`.
    pub(crate) flows: Option<crate::flowcache::FlowCache>,
    /// Per ingress port, what this pipe last learned there (`crate::fib::Learned`).
    pub(crate) learned: Vec<crate::fib::Learned>,
    /// This pipe's share of the audit counters.
    pub(crate) ledger: Arc<Ledger>,
    /// Flow-control events the MMU raised (all schemes; for statistics).
    pub(crate) mmu_events: u64,
    pub(crate) fc_events: Vec<mmu::FcEvent>,
    pub(crate) ctl_frames: Vec<(usize, ControlFrame)>,
    /// Kernel arrival time (ns) of the frame being received, 0 if unknown; the runtime sets
    /// it around `receive` when its ports stamp frames (`crate::reaction`).
    pub rx_stamp_ns: u64,
    /// PFC XOFF frames a stamped frame triggered on this pipe's ports, with that stamp, until
    /// the runtime puts them on a TX ring and records the reaction time.
    pub reactions: Vec<(FrameId, u64)>,
    /// Frames may still wait in this pipe's receive rings (a burst came back full): a queue
    /// found empty is then not idle, only not yet refilled (see [`Switch::set_rx_backlog`]).
    pub(crate) rx_backlog: bool,
    /// The shaper catch-up window asked for at construction, before `lossless_lag` bounds it.
    base_lag_ps: u64,
}

/// Default shaper catch-up window for real-time pipes. A worker that was descheduled (2 cores
/// shared with the hosts' stacks) or woke late may start frames up to this far in the past, so
/// the emulated rate holds over any window longer than this; the cost is a burst of at most
/// this much line time after a stall. 5 ms was not enough on a busy 2-core machine: the
/// 1 Gbit/s UDP flood of `tools/tests/netns.rs` came out 3-7 % slow in 4 of 4 runs (stalls
/// longer than 5 ms), 2 of 3 within 2 % with 20 ms. Only time the worker did not see is
/// repaid: a port it found with nothing to send is idle (`Link::idle`), else a queue resumed
/// after a long PFC pause sent 20 ms of line time at once and overran the downstream's
/// headroom (`tools/tests/pfc.rs`, `insurance_exhausted` drops at s2). A switch with
/// lossless classes uses at most half its `response_ps` (see `lossless_lag`).
pub const REALTIME_MAX_LAG_PS: u64 = 20_000_000_000; // 20 ms

/// The catch-up window of a switch that claims losslessness (PFC enabled on a lossless
/// class of its MMU): at most half its configured `response_ps`. A catch-up burst is data
/// the far end receives at once that a real wire would have spread over the stall, as if
/// this switch had reacted to a pause that late; the far end's headroom covers `response_ps` of lateness in all (its own and ours), so half of
/// it is ours. Found under CPU load: 20 ms bursts after 10-20 ms stalls overran chain-pfc's
/// DSH insurance (10 ms at 1 Gbit/s). A shorter window costs rate under long stalls, never
/// loss. Lossless classes without PFC claim nothing (`single.toml`'s default classes 3 and 4
/// with the 10 µs default response cost TCP a quarter of its shaped rate before this check).
fn lossless_lag(
    buffer: Option<&mmu::MmuConfig>,
    pfc: Option<&flowctl::PfcConfig>,
    max_lag_ps: u64,
) -> u64 {
    let pfc_mask = pfc.map_or(0, |p| p.enable_mask);
    match buffer {
        Some(b)
            if b.lossless_pgs
                .iter()
                .any(|&pg| pg < 8 && pfc_mask & (1 << pg) != 0) =>
        {
            max_lag_ps.min(b.response_ps / 2)
        }
        _ => max_lag_ps,
    }
}

impl Switch {
    /// A pipe owning the ports `p` with `owner[p] == me`. `pipes` divides the MMU's buffer.
    /// `max_lag_ps` is the shaper's catch-up window (0 in virtual time, where nothing is late).
    pub fn new(
        shared: Arc<SwitchShared>,
        owner: Vec<u16>,
        me: u16,
        max_lag_ps: u64,
    ) -> Result<Self, SwitchError> {
        let pipes = u64::from(owner.iter().copied().max().unwrap_or(0)) + 1;
        let spec = &shared.spec;
        let base_lag_ps = max_lag_ps;
        let buffer = Buffer::new(spec.buffer.as_ref(), &spec.ports, pipes, spec.response_auto)?;
        let max_lag_ps = lossless_lag(
            buffer.mmu().map(|m| m.config()),
            spec.pfc.as_ref(),
            max_lag_ps,
        );
        let egress = spec
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (owner[i] == me).then(|| Egress {
                    qs: QueueSet::new(p),
                    link: Link::new(p.rate_bps, p.delay_ps, max_lag_ps),
                })
            })
            .collect();
        let schemes = Schemes::new(spec, &shared.schemes, me == 0)?;
        let ledger = Arc::new(Ledger::new(spec.ports.len()));
        shared
            .ledgers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ledger.clone());
        let policy = match spec.lb {
            crate::config::LoadBalancer::Ecmp
            | crate::config::LoadBalancer::Proteus
            | crate::config::LoadBalancer::Conga => loadbal::PathPolicy::ecmp(spec.seed),
            crate::config::LoadBalancer::Drill => loadbal::PathPolicy::drill(spec.seed, me),
        };
        let flows = (matches!(policy, loadbal::PathPolicy::Ecmp { .. }) && !schemes.routes())
            .then(crate::flowcache::FlowCache::default);
        Ok(Switch {
            policy,
            flows,
            learned: vec![Default::default(); spec.ports.len()],
            schemes,
            ledger,
            owner,
            me,
            egress,
            buffer,
            mmu_events: 0,
            fc_events: Vec::new(),
            ctl_frames: Vec::new(),
            rx_stamp_ns: 0,
            reactions: Vec::new(),
            rx_backlog: false,
            base_lag_ps,
            shared,
        })
    }

    /// A single pipe owning every port.
    pub fn single(spec: SwitchSpec, max_lag_ps: u64) -> Result<Self, SwitchError> {
        let n = spec.ports.len();
        Self::new(SwitchShared::new(spec), vec![0; n], 0, max_lag_ps)
    }

    /// Re-sizes the headroom for a measured response term (`response_ps = "auto"`,
    /// `crate::calibrate`) once nothing is buffered, and bounds the shaper's catch-up window
    /// by it as at construction. `Ok(false)`: the buffer is busy; try again later.
    pub fn retune_response(&mut self, response_ps: u64) -> Result<bool, mmu::MmuError> {
        if !self.buffer.retune_response(response_ps)? {
            return Ok(false);
        }
        let lag = lossless_lag(
            self.buffer.mmu().map(|m| m.config()),
            self.shared.spec.pfc.as_ref(),
            self.base_lag_ps,
        );
        for e in self.egress.iter_mut().flatten() {
            e.link.set_max_lag(lag);
        }
        Ok(true)
    }

    pub fn owns(&self, port: usize) -> bool {
        self.owner.get(port) == Some(&self.me)
    }

    /// This pipe's share of the audit counters (`crate::audit`).
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The flow-control schemes of this pipe.
    pub fn schemes(&self) -> &Schemes {
        &self.schemes
    }

    /// Processes a frame received on `in_port`: enqueued, handed off (`out.handoff`), consumed
    /// as control, or dropped and counted.
    pub fn receive<M: FrameMem>(
        &mut self,
        mem: &mut M,
        in_port: u16,
        frame: FrameId,
        len: u32,
        now: u64,
        out: &mut Outputs,
    ) {
        // `pkt` and `meta` stay where they were built and the stages take them by reference:
        // moved between stages (as `Option<Pkt>`, `Some(meta)`), they were copied in wide
        // pieces right after being written in narrow ones, a store-forwarding stall per copy.
        let mut pkt = Pkt::new(frame, len, in_port, now);
        if !self.ingress(mem, &mut pkt) {
            return;
        }
        let parsed = self.parse(mem, &pkt);
        let meta = match &parsed {
            Ok(m) => m,
            Err(r) => {
                self.ledger.dropped_pre(in_port, *r);
                return self.drop_at(usize::from(in_port), mem, frame, *r);
            }
        };
        if self.control_in(mem, &pkt, meta, now, out) {
            return;
        }
        self.classify(&mut pkt, meta);
        self.ledger.received(in_port, pkt.prio);
        match self.forward(mem, &mut pkt, meta, now) {
            Route::Drop(r) => {
                self.ledger.dropped(in_port, pkt.prio, r);
                self.drop_at(usize::from(in_port), mem, frame, r)
            }
            Route::Port(p) => self.dispatch(mem, p, &mut pkt, now, out),
            Route::Flood => self.flood(mem, pkt, now, out),
        }
    }

    /// Admits `pkt` to a data queue of `port` (owned by this pipe) or drops it.
    pub fn enqueue<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: u16,
        pkt: &mut Pkt,
        now: u64,
        out: &mut Outputs,
    ) {
        let p = usize::from(port);
        if let Err(r) = self.egress_ready(p) {
            self.ledger.dropped(pkt.in_port, pkt.prio, r);
            return self.drop_at(p, mem, pkt.frame, r);
        }
        self.select_queue(p, pkt, now);
        if let Some(r) = self.schemes.veto(p, usize::from(pkt.queue)) {
            return self.drop_queued(mem, p, pkt, r, now);
        }
        match self.admit(p, pkt, now) {
            Ok(ce) => self.enqueue_admitted(mem, port, pkt, ce, now, out),
            Err(r) => self.drop_queued(mem, p, pkt, r, now),
        }
        self.control_out(mem, now, out);
    }

    /// Takes a packet or control frame another pipe handed to this one.
    pub fn accept_handoff<M: FrameMem>(
        &mut self,
        mem: &mut M,
        h: Handoff,
        now: u64,
        out: &mut Outputs,
    ) {
        if h.ctrl {
            self.send_control(h.port, h.pkt.frame, h.pkt.len, now, out);
        } else {
            let mut pkt = h.pkt;
            self.ledger.accepted(pkt.in_port, pkt.prio);
            self.enqueue(mem, h.port, &mut pkt, now, out);
        }
    }

    /// Tells the egress stages whether frames may still wait in the receive rings. A late
    /// worker's shaper catches up on the time it did not run (`crate::link`), but a port seen
    /// with nothing to send is idle and earns no credit; right after a stall its queues are
    /// empty only because the backlog is still being read, and that must not count as idle.
    pub fn set_rx_backlog(&mut self, backlog: bool) {
        self.rx_backlog = backlog;
    }

    /// Runs the egress of `port` up to `now`: starts frames on the wire as the scheduler and
    /// shaper allow, and appends frames whose wire time has elapsed to `out.tx`.
    pub fn service<M: FrameMem>(&mut self, mem: &mut M, port: u16, now: u64, out: &mut Outputs) {
        let p = usize::from(port);
        if !self.shared.is_up(p) {
            // Link down: what the port holds is dropped and counted (PortDown), as a switch
            // ASIC flushes a down port's queues.
            if self.egress[p].as_ref().is_some_and(|e| {
                e.qs.nonempty() != 0 || e.link.in_flight() > 0 || !e.qs.ctrl.is_empty()
            }) {
                self.flush_queue(mem, p, None, now, crate::stats::DropReason::PortDown);
            }
            return;
        }
        let Some(eg) = self.egress[p].as_mut() else {
            return;
        };
        let pause = self.shared.afc.port(p);
        let idle_seen = !self.rx_backlog;
        if let Some(first) = eg.schedule(pause, now, idle_seen) {
            // Built once a frame goes (a port serviced with nothing to send skips it).
            let mut d = Departure {
                schemes: &mut self.schemes,
                ledger: &self.ledger,
                buffer: &mut self.buffer,
                counters: &self.shared.counters[p],
                pause,
                port: p,
                int_rate_bps: self.shared.spec.int.then_some(eg.link.rate_bps),
            };
            let mut pick = Some(first);
            while let Some(k) = pick {
                let pkt = eg.qs.take(k);
                if let Some(q) = k.data().filter(|&q| d.schemes.hiq_moves(p, q)) {
                    // A two-level HIQ's IQ: its head moves on to the next level, not to the
                    // wire.
                    d.hiq_move(eg, pkt, q, now);
                } else {
                    let wire_len = d.depart(eg, mem, &pkt, k.data(), now);
                    eg.shape(&pkt, wire_len, now);
                }
                pick = eg.schedule(pause, now, idle_seen);
            }
        }
        eg.transmit(now, out);
        self.control_out(mem, now, out);
    }

    /// Flow-control counters of this pipe's schemes, if any is configured.
    pub fn scheme_stats(&self, now: u64) -> Option<SchemeStats> {
        self.schemes
            .stats(&self.shared.schemes, self.mmu_events, now)
    }

    /// MMU events raised so far.
    pub fn mmu_events(&self) -> u64 {
        self.mmu_events
    }

    /// Bytes queued in the data queues of `port`.
    pub fn queue_bytes(&self, port: usize, queue: usize) -> u64 {
        self.egress[port]
            .as_ref()
            .map_or(0, |e| e.qs.data[queue].bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Topology;
    use crate::frame::HeapMem;
    use crate::stats::DropReason;
    use crate::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
    use std::net::Ipv4Addr;
    use std::path::Path;

    const TOPO: &str = r#"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", delay = "1us", queues = 2 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }]
route = [{ prefix = "10.0.9.0/24", via = ["p3"] }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.9.1/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
"#;

    fn setup() -> (Topology, Switch, HeapMem) {
        let t = Topology::parse(TOPO, Path::new("t.toml")).unwrap();
        let sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
        (t, sw, HeapMem::new(64, 1792))
    }

    fn frame(
        mem: &mut HeapMem,
        src: MacAddr,
        dst: MacAddr,
        dip: [u8; 4],
        len: usize,
    ) -> (FrameId, u32) {
        let mut f = vec![0u8; len];
        EthernetRepr {
            src,
            dst,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::from(dip),
            protocol: 17,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            payload_len: len - 34,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
        (mem.alloc_with(&f).unwrap(), len as u32)
    }

    /// Services `port` at every wakeup from time 0 up to `t`, as the fabric's event loop does.
    fn run_until(sw: &mut Switch, mem: &mut HeapMem, port: u16, t: u64) -> Vec<(FrameId, u32)> {
        let mut out = Outputs::new();
        let mut now = 0;
        loop {
            sw.service(mem, port, now, &mut out);
            match sw.next_wakeup(port, now) {
                Some(w) if w <= t && w > now => now = w,
                _ => return out.tx,
            }
        }
    }

    #[test]
    fn a_lossless_switch_catches_up_at_most_half_its_response_time() {
        let lossless = mmu::MmuConfig {
            lossless_pgs: vec![3],
            response_ps: 10_000_000_000,
            ..Default::default()
        };
        let pfc = flowctl::PfcConfig {
            enable_mask: 1 << 3,
            ..Default::default()
        };
        assert_eq!(
            lossless_lag(Some(&lossless), Some(&pfc), REALTIME_MAX_LAG_PS),
            5_000_000_000
        );
        assert_eq!(
            lossless_lag(Some(&lossless), Some(&pfc), 0),
            0,
            "virtual time stays exact"
        );
        // Lossless classes without PFC on them claim nothing.
        let other = flowctl::PfcConfig {
            enable_mask: 1 << 4,
            ..Default::default()
        };
        for p in [None, Some(&other)] {
            assert_eq!(
                lossless_lag(Some(&lossless), p, REALTIME_MAX_LAG_PS),
                REALTIME_MAX_LAG_PS
            );
        }
        let lossy = mmu::MmuConfig {
            lossless_pgs: vec![],
            ..lossless
        };
        assert_eq!(
            lossless_lag(Some(&lossy), Some(&pfc), REALTIME_MAX_LAG_PS),
            REALTIME_MAX_LAG_PS
        );
        assert_eq!(
            lossless_lag(None, Some(&pfc), REALTIME_MAX_LAG_PS),
            REALTIME_MAX_LAG_PS
        );
    }

    #[test]
    fn bridges_known_host_and_times_the_wire() {
        let (t, mut sw, mut mem) = setup();
        let (h1, h2) = (t.host_mac(&t.hosts[0]), t.host_mac(&t.hosts[1]));
        let (f, len) = frame(&mut mem, h1, h2, [10, 0, 0, 2], 1500);
        let mut ho = Outputs::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        assert!(ho.handoff.is_empty());
        // 1520 B at 100 Gbit/s = 121.6 ns, plus 1 µs propagation.
        let due = 121_600 + 1_000_000;
        assert_eq!(sw.next_wakeup(1, 0), Some(0));
        let mut out = Outputs::new();
        sw.service(&mut mem, 1, 0, &mut out);
        assert!(out.tx.is_empty());
        assert_eq!(sw.next_wakeup(1, 0), Some(due));
        sw.service(&mut mem, 1, due - 1, &mut out);
        assert!(out.tx.is_empty());
        sw.service(&mut mem, 1, due, &mut out);
        assert_eq!(out.tx, vec![(f, len)]);
        assert_eq!(sw.shared.counters[1].queues[0].watermark_bytes.get(), 1500);
    }

    #[test]
    fn routes_with_rewrite_and_drops_malformed() {
        let (t, mut sw, mut mem) = setup();
        let h1 = t.host_mac(&t.hosts[0]);
        let router = sw.shared.spec.ports[0].mac;
        let (f, len) = frame(&mut mem, h1, router, [10, 0, 9, 1], 100);
        let mut ho = Outputs::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        let tx = run_until(&mut sw, &mut mem, 2, 10_000_000);
        assert_eq!(tx.len(), 1);
        let d = &mem.data(tx[0].0)[..100];
        let eth = EthernetFrame::new_checked(d).unwrap();
        assert_eq!(eth.dst_addr(), t.host_mac(&t.hosts[2]));
        assert_eq!(eth.src_addr(), sw.shared.spec.ports[2].mac);
        let ip = Ipv4Packet::new_checked(&d[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        // A truncated IPv4 header is counted and dropped; the frame is recycled.
        let free = mem.available();
        let (g, _) = frame(&mut mem, h1, router, [10, 0, 9, 1], 100);
        sw.receive(&mut mem, 0, g, 20, 0, &mut ho);
        assert_eq!(
            sw.shared.counters[0].drops[DropReason::TruncatedIpv4.index()].get(),
            1
        );
        assert_eq!(mem.available(), free);
    }

    #[test]
    fn floods_broadcast_to_all_other_ports() {
        let (t, mut sw, mut mem) = setup();
        let (f, len) = frame(
            &mut mem,
            t.host_mac(&t.hosts[0]),
            MacAddr::BROADCAST,
            [10, 0, 0, 255],
            64,
        );
        let mut ho = Outputs::new();
        sw.receive(&mut mem, 0, f, len, 0, &mut ho);
        for p in [1u16, 2] {
            let tx = run_until(&mut sw, &mut mem, p, 10_000_000);
            assert_eq!(tx.len(), 1, "port {p}");
            assert_eq!(
                EthernetFrame::new_checked(&mem.data(tx[0].0)[..64])
                    .unwrap()
                    .dst_addr(),
                MacAddr::BROADCAST
            );
        }
        assert!(run_until(&mut sw, &mut mem, 0, 10_000_000).is_empty());
    }

    #[test]
    fn the_audit_explains_every_frame_and_catches_one_unaccounted() {
        let (t, mut sw, mut mem) = setup();
        let (h1, h2) = (t.host_mac(&t.hosts[0]), t.host_mac(&t.hosts[1]));
        let router = sw.shared.spec.ports[0].mac;
        let mut ho = Outputs::new();
        // Queued (bridged to p2), routed (to p3), flooded (unknown MAC: p2 and p3),
        // malformed, and TTL-less (no route for 10.0.8.1).
        for (dst, dip, len) in [
            (h2, [10, 0, 0, 2], 200u32),
            (router, [10, 0, 9, 1], 200),
            (MacAddr([2, 0, 0, 0, 0, 0x99]), [10, 0, 0, 99], 200),
            (router, [10, 0, 8, 1], 200),
        ] {
            let (f, l) = frame(&mut mem, h1, dst, dip, len as usize);
            sw.receive(&mut mem, 0, f, l, 0, &mut ho);
        }
        let (g, _) = frame(&mut mem, h1, router, [10, 0, 9, 1], 100);
        sw.receive(&mut mem, 0, g, 20, 0, &mut ho);
        let audit = sw.shared.audit(&sw.shared.snapshot(0.0, None));
        assert!(audit.balanced, "{}", audit.table());
        let p1 = &audit.ports[0];
        assert_eq!((p1.rx, p1.rx_balance), (5, 0));
        assert_eq!(p1.dropped_pre.get("truncated_ipv4"), Some(&1));
        let row = &p1.prios[0];
        // 4 classified + 1 flood copy = 4 queued + 1 dropped (no route).
        assert_eq!(
            (row.received, row.copies, row.queued, row.forwarded),
            (4, 1, 4, 0)
        );
        assert_eq!(row.dropped.get("no_route"), Some(&1));
        assert_eq!(audit.queued_physical, 4);
        for p in [1, 2] {
            run_until(&mut sw, &mut mem, p, 10_000_000);
        }
        let audit = sw.shared.audit(&sw.shared.snapshot(0.0, None));
        assert!(audit.balanced, "{}", audit.table());
        assert_eq!((audit.ports[0].prios[0].forwarded, audit.queued), (4, 0));
        assert_eq!(
            audit.lost, 1,
            "the no-route drop; the malformed frame is dropped_pre"
        );
        // A frame that vanishes without a count (here: received, never given a fate)
        // unbalances the audit.
        sw.ledger().received(0, 0);
        let audit = sw.shared.audit(&sw.shared.snapshot(0.0, None));
        assert!(!audit.balanced);
        assert_eq!(
            (audit.ports[0].prios[0].balance, audit.ports[0].rx_balance),
            (1, -1)
        );
    }
}

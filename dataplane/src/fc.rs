//! Flow control in the pipeline: turns the MMU's XOFF/XON events into PFC frames on the
//! control queue of the ingress port (`flowctl::Pfc`), applies received PFC/PAUSE frames to the
//! AFC pause registers, and runs the PFC watchdog. The decisions are `flowctl`'s; this module
//! only moves frames and events between it and the switch.

use crate::config::SwitchSpec;
use flowctl::wire::pfc::{Frame as MacCtlFrame, MacControlRepr, PfcRepr};
use flowctl::{
    Pfc, PfcConfig, PfcEvent, PfcPort, PfcTx, QueueView, Watchdog, WatchdogConfig, WdEvent,
};
use serde::Serialize;

/// Flow-control state of one pipeline.
#[derive(Debug)]
pub struct FlowControl {
    pub pfc: Option<Pfc>,
    pub wd: Option<Watchdog>,
    rates: Vec<u64>,
    /// Cached `pfc.next_deadline()`: the engine is polled only when due or after events.
    due: u64,
    txs: Vec<PfcTx>,
    pub wd_events: Vec<WdEvent>,
    next_wd_tick: u64,
    /// Events the MMU raised (all schemes; for statistics).
    pub mmu_events: u64,
    pub storms: u64,
    pub restorations: u64,
}

/// Per-port, per-priority PFC counters as `xoff ctl stats` shows them.
#[derive(Debug, Clone, Serialize)]
pub struct PfcPrioStats {
    pub prio: usize,
    /// Requests: PFC frames sent asking the peer to pause (XOFF, including refreshes).
    pub xoff_sent: u64,
    pub xon_sent: u64,
    /// Indications: PFC frames received.
    pub xoff_received: u64,
    pub xon_received: u64,
    /// Time the peer was asked to pause us / we were paused, in microseconds.
    pub tx_pause_us: f64,
    pub rx_pause_us: f64,
}

impl FlowControl {
    pub fn new(spec: &SwitchSpec) -> Result<Self, flowctl::PfcError> {
        let rates: Vec<u64> = spec.ports.iter().map(|p| p.rate_bps).collect();
        let pfc = match &spec.pfc {
            None => None,
            Some(cfg) => {
                let mut cfg: PfcConfig = cfg.clone();
                // Received pauses stop the queues the port's priority map sends that class to.
                if let Some(p0) = spec.ports.first() {
                    cfg.prio_to_queues = core::array::from_fn(|c| vec![p0.prio_map[c] as u8]);
                }
                let ports: Vec<PfcPort> = spec
                    .ports
                    .iter()
                    .map(|p| PfcPort {
                        rate_bps: p.rate_bps,
                        mac: p.mac.0,
                    })
                    .collect();
                Some(Pfc::new(cfg, &ports)?)
            }
        };
        let wd = spec.watchdog.map(|c: WatchdogConfig| {
            Watchdog::new(
                c,
                spec.ports.len(),
                spec.ports.iter().map(|p| p.queues).max().unwrap_or(1),
            )
        });
        Ok(FlowControl {
            pfc,
            wd,
            rates,
            due: u64::MAX,
            txs: Vec::new(),
            wd_events: Vec::new(),
            next_wd_tick: 0,
            mmu_events: 0,
            storms: 0,
            restorations: 0,
        })
    }

    /// Feeds MMU events to the PFC sender.
    pub fn on_mmu_events(&mut self, evs: &mut Vec<mmu::FcEvent>, now: u64) {
        self.mmu_events += evs.len() as u64;
        if let Some(pfc) = self.pfc.as_mut() {
            for ev in evs.drain(..) {
                let pev = match ev {
                    mmu::FcEvent::Xoff { port, pg } => PfcEvent::Xoff {
                        port,
                        pg: Some(pg as u8),
                    },
                    mmu::FcEvent::Xon { port, pg } => PfcEvent::Xon {
                        port,
                        pg: Some(pg as u8),
                    },
                    mmu::FcEvent::PortXoff { port } => PfcEvent::Xoff { port, pg: None },
                    mmu::FcEvent::PortXon { port } => PfcEvent::Xon { port, pg: None },
                };
                if pfc.on_event(pev, now).is_ok() {
                    self.due = now;
                }
            }
        }
        evs.clear();
    }

    /// PFC frames to send now (port, repr); empty unless something is due.
    pub fn poll(&mut self, now: u64, out: &mut Vec<(usize, PfcRepr)>) {
        if now < self.due {
            return;
        }
        if let Some(pfc) = self.pfc.as_mut() {
            pfc.poll(now, &mut self.txs);
            out.extend(self.txs.drain(..).map(|t| (t.port, t.repr)));
            self.due = pfc.next_deadline().unwrap_or(u64::MAX);
        }
    }

    /// When `poll` or `watchdog_tick` next has work, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        let wd = self.wd.as_ref().map(|_| self.next_wd_tick);
        match (self.due, wd) {
            (u64::MAX, w) => w,
            (d, Some(w)) => Some(d.min(w)),
            (d, None) => Some(d),
        }
    }

    /// Handles a MAC control frame received on `port`. Returns false if it was malformed or
    /// is not honoured here (no PFC configured).
    pub fn on_mac_control(
        &mut self,
        port: usize,
        frame: &[u8],
        now: u64,
        afc: &flowctl::Afc,
    ) -> bool {
        let Some(pfc) = self.pfc.as_mut() else {
            return false;
        };
        let Ok(f) = MacCtlFrame::new_checked(frame) else {
            return false;
        };
        let rate = self.rates.get(port).copied().unwrap_or(0);
        match MacControlRepr::parse(&f) {
            Ok(MacControlRepr::Pfc(r)) => pfc.on_pfc_frame(port, &r, rate, now, afc).is_ok(),
            Ok(MacControlRepr::Pause(r)) => pfc.on_pause_frame(port, &r, rate, now, afc).is_ok(),
            Err(_) => false,
        }
    }

    /// Whether the watchdog wants a tick at `now`.
    pub fn watchdog_due(&self, now: u64) -> bool {
        self.wd.is_some() && now >= self.next_wd_tick
    }

    /// Runs the watchdog over `views`; events land in `wd_events` and are applied to the PFC
    /// receive side (ignoring pauses of stormed queues).
    pub fn watchdog_tick(&mut self, now: u64, views: &[QueueView], afc: &flowctl::Afc) {
        let Some(wd) = self.wd.as_mut() else { return };
        let period = (wd.config().detection_time_ps / 10).max(1_000_000);
        self.next_wd_tick = now + period;
        let start = self.wd_events.len();
        wd.tick(now, views, &mut self.wd_events);
        for ev in &self.wd_events[start..] {
            match *ev {
                WdEvent::Storm {
                    port,
                    queue,
                    action,
                } => {
                    self.storms += 1;
                    tracing::warn!(port, queue, ?action, "PFC storm detected by the watchdog");
                    if let Some(pfc) = self.pfc.as_mut() {
                        pfc.apply_watchdog_event(ev, afc);
                    }
                }
                WdEvent::Restore { port, queue } => {
                    self.restorations += 1;
                    tracing::info!(port, queue, "PFC watchdog restored the queue");
                    if let Some(pfc) = self.pfc.as_mut() {
                        pfc.apply_watchdog_event(ev, afc);
                    }
                }
            }
        }
    }

    /// Whether the watchdog drops the packets of (port, queue).
    pub fn drops(&self, port: usize, queue: usize) -> bool {
        self.wd.as_ref().is_some_and(|w| w.drops(port, queue))
    }

    /// Counters for statistics.
    pub fn stats_json(&self, now: u64) -> Option<serde_json::Value> {
        if self.pfc.is_none() && self.wd.is_none() {
            return None;
        }
        let ports: Vec<Vec<PfcPrioStats>> = match &self.pfc {
            Some(pfc) => (0..pfc.ports())
                .map(|p| {
                    (0..8)
                        .filter_map(|c| {
                            pfc.counters(p, c, now).map(|k| PfcPrioStats {
                                prio: c,
                                xoff_sent: k.xoff_sent,
                                xon_sent: k.xon_sent,
                                xoff_received: k.xoff_received,
                                xon_received: k.xon_received,
                                tx_pause_us: k.tx_pause_ps as f64 / 1e6,
                                rx_pause_us: k.rx_pause_ps as f64 / 1e6,
                            })
                        })
                        .collect()
                })
                .collect(),
            None => Vec::new(),
        };
        Some(serde_json::json!({
            "ports": ports,
            "watchdog": { "storms": self.storms, "restorations": self.restorations },
            "mmu_events": self.mmu_events,
        }))
    }
}

/// Writes a PFC frame into `buf`; returns its length (60 B, padded).
pub fn emit_pfc(repr: &PfcRepr, buf: &mut [u8]) -> usize {
    let n = repr.buffer_len();
    buf[..n].fill(0);
    repr.emit(&mut MacCtlFrame::new_unchecked(&mut buf[..n]));
    n
}

/// BFC in the pipeline (`flowctl::bfc`): strips the data shim on ingress and pushes it on
/// egress toward BFC peers, feeds the flow table and pause counters from enqueue/dequeue,
/// applies received Xoff signal frames to the AFC pause registers, and collects the signals
/// to send. The decisions are `flowctl::Bfc`'s.
#[derive(Debug)]
pub struct BfcGlue {
    pub bfc: flowctl::Bfc,
    /// Per port: push the data shim on egress.
    pub shim: Vec<bool>,
    /// Signals to send (port, repr).
    pub sig: Vec<(usize, flowctl::wire::signal::SignalRepr)>,
}

impl BfcGlue {
    /// BFC for `spec` if it runs a BFC scheme; `refresher` on one pipe per switch.
    pub fn new(
        spec: &SwitchSpec,
        shared: Option<&std::sync::Arc<flowctl::BfcShared>>,
        refresher: bool,
    ) -> Result<Option<Self>, flowctl::BfcError> {
        let (Some(b), Some(sh)) = (&spec.bfc, shared) else {
            return Ok(None);
        };
        let ports: Vec<flowctl::BfcPort> = spec
            .ports
            .iter()
            .map(|p| flowctl::BfcPort {
                rate_bps: p.rate_bps,
                delay_ps: p.delay_ps,
                queues: p.queues,
                mtu_frame: p.mtu + 14,
                mac: p.mac.0,
                peer_mac: p.peer_mac.map(|m| m.0),
            })
            .collect();
        let bfc = flowctl::Bfc::new(
            b.config.clone(),
            &ports,
            &b.elide,
            b.shim.clone(),
            sh.clone(),
            refresher,
        )?;
        Ok(Some(BfcGlue {
            bfc,
            shim: b.shim.clone(),
            sig: Vec::new(),
        }))
    }

    /// Strips the data shim of a received frame, if it has one: (upstreamQ or `NO_UPQ`,
    /// new length).
    #[inline]
    pub fn ingress_shim(
        mem: &mut impl crate::frame::FrameMem,
        f: crate::FrameId,
        len: u32,
    ) -> (u8, u32) {
        use flowctl::wire::shim::{ShimRepr, ETHERTYPE_XOFF_SHIM};
        let d = mem.data(f);
        if len < 18 || d[12..14] != ETHERTYPE_XOFF_SHIM.to_be_bytes() {
            return (flowctl::bfc::NO_UPQ, len);
        }
        mem.with_mut(f, |d| {
            match ShimRepr::pop(&mut d[..len as usize], len as usize) {
                Ok((r, n)) => (r.upstream_q, n as u32),
                Err(_) => (flowctl::bfc::NO_UPQ, len),
            }
        })
    }

    /// Pushes the data shim carrying `queue` into a frame leaving toward a BFC peer; returns
    /// the new length (unchanged if the chunk has no room).
    #[inline]
    pub fn push_shim(
        mem: &mut impl crate::frame::FrameMem,
        f: crate::FrameId,
        len: u32,
        queue: usize,
    ) -> u32 {
        let r = flowctl::wire::shim::ShimRepr {
            upstream_q: queue as u8,
        };
        mem.with_mut(f, |d| r.push(d, len as usize))
            .map_or(len, |n| n as u32)
    }

    /// The BFC flow identifier hash of a parsed frame (5-tuple, else MAC addresses).
    #[inline]
    pub fn fid(m: &crate::parse::PacketMeta) -> u32 {
        let ip = |a: &std::net::IpAddr| match a {
            std::net::IpAddr::V4(v) => u128::from(u32::from(*v)),
            std::net::IpAddr::V6(v) => u128::from(*v),
        };
        match m.five_tuple() {
            Some(t) => flowctl::bfc::fid_hash(ip(&t.src), ip(&t.dst), t.sport, t.dport, t.proto),
            None => {
                let mac = |a: [u8; 6]| a.iter().fold(0u128, |x, &b| (x << 8) | u128::from(b));
                flowctl::bfc::fid_hash(mac(m.src.0), mac(m.dst.0), m.ethertype, 0, 0)
            }
        }
    }

    /// Backpressure on enqueue of `pkt` into `queue` of `port` (holding `queue_bytes`);
    /// `nonempty` is the port's bitmap of non-empty queues.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_enqueue(
        &mut self,
        pkt: &mut crate::Pkt,
        port: usize,
        queue: usize,
        queue_bytes: u64,
        nonempty: u128,
        pause: &flowctl::PauseRegs,
        now: u64,
    ) {
        let busy = nonempty | (1 << queue);
        let n_active = (busy & !pause.paused_mask(now)).count_ones();
        let (mark, sig) = self.bfc.on_enqueue(
            usize::from(pkt.in_port),
            pkt.upq,
            port,
            queue,
            queue_bytes,
            n_active,
        );
        pkt.bfc_mark = mark;
        if let Some(s) = sig {
            self.sig.push(s);
        }
    }

    /// A packet leaves `queue` of `port` (sent or dropped), which now holds `queue_bytes`;
    /// `nonempty` is the port's bitmap of non-empty queues after it left.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_dequeue(
        &mut self,
        port: usize,
        queue: usize,
        pkt: &crate::Pkt,
        queue_bytes: u64,
        nonempty: u128,
        pause: &flowctl::PauseRegs,
        now: u64,
    ) {
        if let Some(s) = self.bfc.on_dequeue(
            port,
            queue,
            pkt.bfc_slot,
            pkt.bfc_mark,
            usize::from(pkt.in_port),
            pkt.upq,
            now,
        ) {
            self.sig.push(s);
        }
        if self.bfc.config().resume == flowctl::bfc::Resume::BelowTh {
            let n_active = (nonempty & !pause.paused_mask(now)).count_ones();
            self.bfc
                .after_dequeue(port, queue, queue_bytes, n_active, &mut self.sig);
        }
    }

    /// Applies an Xoff signal frame received on `port`; false if malformed.
    pub fn on_signal(
        shared: &flowctl::BfcShared,
        port: usize,
        frame: &[u8],
        afc: &flowctl::Afc,
        now: u64,
    ) -> bool {
        use flowctl::wire::signal::{Frame, SignalRepr};
        let Ok(f) = Frame::new_checked(frame) else {
            return false;
        };
        let Ok(r) = SignalRepr::parse(&f) else {
            return false;
        };
        flowctl::Bfc::apply_signal(shared, port, &r.signal, afc, now);
        true
    }

    /// Counters for statistics: per port, the non-zero BFC counters.
    pub fn stats_json(shared: &flowctl::BfcShared) -> serde_json::Value {
        let per_q = |c: &[flowctl::bfc::Counter]| -> serde_json::Map<String, serde_json::Value> {
            c.iter()
                .enumerate()
                .filter(|(_, c)| c.get() > 0)
                .map(|(q, c)| (q.to_string(), c.get().into()))
                .collect()
        };
        let ports: Vec<serde_json::Value> = shared
            .ports
            .iter()
            .map(|p| {
                serde_json::json!({
                    "active_queues": p.active_queues.get(),
                    "active_queues_max": p.active_queues_max.get(),
                    "assignments": p.assignments.get(),
                    "collisions": p.collisions.get(),
                    "table_collisions": p.table_collisions.get(),
                    "marked": p.marked.get(),
                    "refresh_sent": p.refresh_sent.get(),
                    "refresh_received": p.refresh_received.get(),
                    "pauses_sent": per_q(&p.pauses_sent),
                    "resumes_sent": per_q(&p.resumes_sent),
                    "pauses_received": per_q(&p.pauses_received),
                    "resumes_received": per_q(&p.resumes_received),
                })
            })
            .collect();
        serde_json::json!({ "ports": ports })
    }
}

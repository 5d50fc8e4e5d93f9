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
        regs: &flowctl::PauseRegs,
    ) -> bool {
        let Some(pfc) = self.pfc.as_mut() else {
            return false;
        };
        let Ok(f) = MacCtlFrame::new_checked(frame) else {
            return false;
        };
        let rate = self.rates.get(port).copied().unwrap_or(0);
        match MacControlRepr::parse(&f) {
            Ok(MacControlRepr::Pfc(r)) => pfc.on_pfc_frame(port, &r, rate, now, regs).is_ok(),
            Ok(MacControlRepr::Pause(r)) => pfc.on_pause_frame(port, &r, rate, now, regs).is_ok(),
            Err(_) => false,
        }
    }

    /// Whether the watchdog wants a tick at `now`.
    pub fn watchdog_due(&self, now: u64) -> bool {
        self.wd.is_some() && now >= self.next_wd_tick
    }

    /// Runs the watchdog over `views`; events land in `wd_events` and are applied to the PFC
    /// receive side (ignoring pauses of stormed queues).
    pub fn watchdog_tick(&mut self, now: u64, views: &[QueueView], regs: &[flowctl::PauseRegs]) {
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
                    if let (Some(pfc), Some(r)) = (self.pfc.as_mut(), regs.get(port)) {
                        pfc.apply_watchdog_event(ev, r);
                    }
                }
                WdEvent::Restore { port, queue } => {
                    self.restorations += 1;
                    tracing::info!(port, queue, "PFC watchdog restored the queue");
                    if let (Some(pfc), Some(r)) = (self.pfc.as_mut(), regs.get(port)) {
                        pfc.apply_watchdog_event(ev, r);
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

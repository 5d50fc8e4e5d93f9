//! PFC (IEEE 802.1Qbb) and the PFC watchdog as a scheme: turns the MMU's XOFF/XON events into
//! PFC frames on the control queue of the ingress port (`flowctl::Pfc`), applies received
//! PFC/PAUSE frames through the AFC unit, and runs the watchdog (SONiC pfcwd semantics). The
//! decisions are `flowctl`'s; this adapter only moves frames and events.

use super::ControlFrame;
use crate::config::SwitchSpec;
use crate::stats::DropReason;
use crate::wire::EtherType;
use flowctl::wire::pfc::{Frame as MacCtlFrame, MacControlRepr, PfcRepr};
use flowctl::{
    Afc, Pfc, PfcConfig, PfcEvent, PfcPort, PfcTx, QueueView, Watchdog, WatchdogConfig, WdEvent,
};
use serde::{Deserialize, Serialize};

/// PFC and watchdog state of one pipe.
#[derive(Debug)]
pub struct PfcScheme {
    pub pfc: Option<Pfc>,
    pub wd: Option<Watchdog>,
    rates: Vec<u64>,
    /// Cached `pfc.next_deadline()`: the engine is polled only when due or after events.
    due: u64,
    txs: Vec<PfcTx>,
    pub wd_events: Vec<WdEvent>,
    next_wd_tick: u64,
    views: Vec<QueueView>,
    pub storms: u64,
    pub restorations: u64,
}

/// Per-port, per-priority PFC counters as `xoff ctl stats` shows them (fields in alphabetical
/// order, as the JSON always listed them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PfcPrioStats {
    pub prio: usize,
    /// Time the peer paused us, in microseconds.
    pub rx_pause_us: f64,
    /// Time we asked the peer to pause, in microseconds.
    pub tx_pause_us: f64,
    /// Indications: PFC frames received.
    pub xoff_received: u64,
    /// Requests: PFC frames sent asking the peer to pause (XOFF, including refreshes).
    pub xoff_sent: u64,
    pub xon_received: u64,
    pub xon_sent: u64,
}

/// PFC watchdog events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogStats {
    pub restorations: u64,
    pub storms: u64,
}

/// PFC counters of one pipe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PfcStats {
    /// Flow-control events the pipe's MMU raised (all schemes).
    pub mmu_events: u64,
    /// Per port, the priorities with PFC enabled.
    pub ports: Vec<Vec<PfcPrioStats>>,
    pub watchdog: WatchdogStats,
}

/// Which PFC counter to total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PfcCount {
    XoffSent,
    XonSent,
    XoffReceived,
    XonReceived,
}

impl PfcStats {
    /// One counter of `port`, summed over priorities.
    pub fn total(&self, port: usize, what: PfcCount) -> u64 {
        self.ports.get(port).map_or(0, |cls| {
            cls.iter()
                .map(|c| match what {
                    PfcCount::XoffSent => c.xoff_sent,
                    PfcCount::XonSent => c.xon_sent,
                    PfcCount::XoffReceived => c.xoff_received,
                    PfcCount::XonReceived => c.xon_received,
                })
                .sum()
        })
    }
}

impl PfcScheme {
    /// PFC and/or the watchdog if `spec` configures either. `dynamic_queues`: another scheme
    /// assigns flows to data queues (BFC), so a class's traffic may sit in any queue and a
    /// received PFC pause stops all of them, as a link-level pause of the whole priority.
    pub fn new(spec: &SwitchSpec, dynamic_queues: bool) -> Result<Option<Self>, flowctl::PfcError> {
        if spec.pfc.is_none() && spec.watchdog.is_none() {
            return Ok(None);
        }
        let rates: Vec<u64> = spec.ports.iter().map(|p| p.rate_bps).collect();
        let pfc = match &spec.pfc {
            None => None,
            Some(cfg) => {
                let mut cfg: PfcConfig = cfg.clone();
                // Received pauses stop the queues the port's priority map sends that class to.
                if let Some(p0) = spec.ports.first() {
                    cfg.prio_to_queues = if dynamic_queues {
                        let all: Vec<u8> = (0..p0.queues.min(128) as u8).collect();
                        core::array::from_fn(|_| all.clone())
                    } else {
                        core::array::from_fn(|c| vec![p0.prio_map[c] as u8])
                    };
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
        Ok(Some(PfcScheme {
            pfc,
            wd,
            rates,
            due: u64::MAX,
            txs: Vec::new(),
            wd_events: Vec::new(),
            next_wd_tick: 0,
            views: Vec::new(),
            storms: 0,
            restorations: 0,
        }))
    }

    /// Feeds MMU events to the PFC sender and collects the PFC frames due now.
    pub fn poll(&mut self, evs: &[mmu::FcEvent], now: u64, out: &mut Vec<(usize, ControlFrame)>) {
        let Some(pfc) = self.pfc.as_mut() else {
            return;
        };
        for ev in evs {
            let pev = match *ev {
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
        if now < self.due {
            return;
        }
        pfc.poll(now, &mut self.txs);
        out.extend(
            self.txs
                .drain(..)
                .map(|t| (t.port, ControlFrame::Pfc(t.repr))),
        );
        self.due = pfc.next_deadline().unwrap_or(u64::MAX);
    }

    /// Whether `poll` has PFC frames to send at `now` (without new MMU events).
    #[inline]
    pub fn poll_due(&self, now: u64) -> bool {
        self.pfc.is_some() && now >= self.due
    }

    /// When `poll` or the watchdog next has work, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        let wd = self.wd.as_ref().map(|_| self.next_wd_tick);
        match (self.due, wd) {
            (u64::MAX, w) => w,
            (d, Some(w)) => Some(d.min(w)),
            (d, None) => Some(d),
        }
    }

    /// A MAC control frame (PFC or 802.3x PAUSE) received on `port`; `None` for other
    /// EtherTypes, malformed frames, or without PFC configured (the pipeline drops those).
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        afc: &Afc,
        now: u64,
    ) -> Option<bool> {
        if ethertype != EtherType::MAC_CONTROL {
            return None;
        }
        let pfc = self.pfc.as_mut()?;
        let f = MacCtlFrame::new_checked(frame).ok()?;
        let rate = self.rates.get(port).copied().unwrap_or(0);
        // An XON (time 0) resumes queues that may hold packets: the port has work now, not
        // only when the pause it lifted would have lapsed.
        match MacControlRepr::parse(&f) {
            Ok(MacControlRepr::Pfc(r)) => {
                let xon = (0..8).any(|c| r.class_enable & (1 << c) != 0 && r.quanta[c] == 0);
                pfc.on_pfc_frame(port, &r, rate, now, afc).ok().map(|_| xon)
            }
            Ok(MacControlRepr::Pause(r)) => {
                let xon = r.quanta == 0;
                pfc.on_pause_frame(port, &r, rate, now, afc)
                    .ok()
                    .map(|_| xon)
            }
            Err(_) => None,
        }
    }

    /// Whether the watchdog wants a tick at `now`.
    pub fn watchdog_due(&self, now: u64) -> bool {
        self.wd.is_some() && now >= self.next_wd_tick
    }

    /// Runs the watchdog over the queues of `ports` (port, non-empty bitmap, data queues) if
    /// due; storms and restorations take effect on the PFC receive side.
    pub fn watchdog_tick(&mut self, now: u64, ports: &[(usize, u128, usize)], afc: &Afc) {
        if !self.watchdog_due(now) {
            return;
        }
        let mut views = std::mem::take(&mut self.views);
        views.clear();
        for &(p, nonempty, queues) in ports {
            for q in 0..queues {
                views.push(QueueView {
                    port: p,
                    queue: q,
                    paused: afc.port(p).is_paused(q, now),
                    has_packets: nonempty & (1 << q) != 0,
                    last_pause_frame_ps: self.pfc.as_ref().and_then(|x| x.last_xoff_rx_queue(p, q)),
                });
            }
        }
        let Some(wd) = self.wd.as_mut() else { return };
        let period = (wd.config().detection_time_ps / 10).max(1_000_000);
        self.next_wd_tick = now + period;
        let start = self.wd_events.len();
        wd.tick(now, &views, &mut self.wd_events);
        for ev in &self.wd_events[start..] {
            match *ev {
                WdEvent::Storm {
                    port,
                    queue,
                    action,
                } => {
                    self.storms += 1;
                    tracing::warn!(port, queue, ?action, "PFC storm detected by the watchdog");
                }
                WdEvent::Restore { port, queue } => {
                    self.restorations += 1;
                    tracing::info!(port, queue, "PFC watchdog restored the queue");
                }
            }
            if let Some(pfc) = self.pfc.as_mut() {
                pfc.apply_watchdog_event(ev, afc);
            }
        }
        self.views = views;
    }

    /// The watchdog drops the packets of (`port`, `queue`) while it holds a storm there.
    #[inline]
    pub fn veto(&self, port: usize, queue: usize) -> Option<DropReason> {
        self.wd
            .as_ref()
            .is_some_and(|w| w.drops(port, queue))
            .then_some(DropReason::PfcWatchdog)
    }

    /// Counters for statistics.
    pub fn stats(&self, mmu_events: u64, now: u64) -> PfcStats {
        let ports = match &self.pfc {
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
        PfcStats {
            mmu_events,
            ports,
            watchdog: WatchdogStats {
                storms: self.storms,
                restorations: self.restorations,
            },
        }
    }

    /// A counter of `port` summed over priorities, without building the whole statistics.
    pub fn total(&self, port: usize, what: PfcCount, now: u64) -> u64 {
        let Some(pfc) = &self.pfc else { return 0 };
        (0..8)
            .filter_map(|c| pfc.counters(port, c, now))
            .map(|k| match what {
                PfcCount::XoffSent => k.xoff_sent,
                PfcCount::XonSent => k.xon_sent,
                PfcCount::XoffReceived => k.xoff_received,
                PfcCount::XonReceived => k.xon_received,
            })
            .sum()
    }
}

/// Writes a PFC frame into `buf`; returns its length (60 B, padded).
pub fn emit_pfc(repr: &PfcRepr, buf: &mut [u8]) -> usize {
    let n = repr.buffer_len();
    buf[..n].fill(0);
    repr.emit(&mut MacCtlFrame::new_unchecked(&mut buf[..n]));
    n
}

//! IEEE 802.1Qbb Priority-based Flow Control: the sender state machine (MMU XOFF/XON →
//! PFC frames, with periodic refresh) and the receive side (PFC/PAUSE frames → per-queue
//! [`PauseRegs`] through the [`Afc`] unit).
//!
//! # Sender
//!
//! The MMU raises [`PfcEvent`]s for an ingress priority group (PG) of a port, or for a whole
//! port. A class (priority) of a port is *asserted* while PFC is enabled for it and either its
//! PG (via [`PfcConfig::prio_to_pg`]) or the whole port is in XOFF. [`Pfc::poll`] turns changes
//! of the asserted set into frames: a newly asserted class is sent with
//! [`PfcConfig::pause_quanta`], a class that stopped being asserted is sent with time 0 (XON).
//! While any class of a port stays asserted, an XOFF for *all* asserted classes of that port is
//! re-sent every `pause_time / refresh_divisor` (half the pause time by default), so the peer's
//! pause never lapses while the condition holds. At most one frame per port is produced per
//! poll: all changes of a port are merged into one class-enable vector. [`Pfc::next_deadline`]
//! tells the caller when to poll again.
//!
//! # Receiver
//!
//! [`Pfc::on_pfc_frame`] applies a received PFC frame to the port's [`PauseRegs`]: for every
//! class that is enabled both in the frame and in [`PfcConfig::enable_mask`], a time t > 0
//! pauses the class's queues ([`PfcConfig::prio_to_queues`]) until now + t (converted at the
//! port rate), a time of 0 resumes them. Queues the PFC watchdog has taken over (see
//! [`Pfc::apply_watchdog_event`]) are left alone. If two priorities share a queue, the last
//! frame wins for that queue.
//!
//! Pure: no clocks, time is picoseconds passed in by the caller.

use serde::{Deserialize, Serialize};

use crate::afc::Afc;
use crate::watchdog::WdEvent;
use crate::wire::pfc::{quanta_to_ps, PauseRepr, PfcRepr, CLASSES};

/// Errors of PFC configuration and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum PfcError {
    /// A priority maps to a PG outside 0..8.
    #[error("priority {prio} maps to priority group {pg}, which is not in 0..8")]
    BadPgMap {
        /// Priority.
        prio: usize,
        /// Its PG.
        pg: u8,
    },
    /// A priority maps to a queue outside 0..128.
    #[error("priority {prio} maps to queue {queue}, which is not in 0..128")]
    BadQueueMap {
        /// Priority.
        prio: usize,
        /// Its queue.
        queue: u8,
    },
    /// `pause_quanta` is 0 (that would be an XON).
    #[error("pause_quanta must be > 0")]
    ZeroPauseQuanta,
    /// `refresh_divisor` is 0.
    #[error("refresh_divisor must be > 0")]
    ZeroRefreshDivisor,
    /// An event or frame for a port that does not exist.
    #[error("no such port {0}")]
    NoSuchPort(usize),
    /// An event for a PG outside 0..8.
    #[error("no such priority group {0}")]
    NoSuchPg(u8),
}

/// PFC configuration shared by all ports of a switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PfcConfig {
    /// Priorities with PFC enabled (bit n = priority n), for sending and honoring frames.
    pub enable_mask: u8,
    /// Ingress priority group of each priority (0..8).
    pub prio_to_pg: [u8; CLASSES],
    /// Pause time sent in XOFF frames, in quanta (512 bit times); > 0.
    pub pause_quanta: u16,
    /// An asserted XOFF is re-sent every `pause time / refresh_divisor`; > 0.
    pub refresh_divisor: u32,
    /// Egress queues (0..128) that a received pause of each priority stops.
    pub prio_to_queues: [Vec<u8>; CLASSES],
}

impl Default for PfcConfig {
    /// Lossless priorities 3 and 4 (the usual RoCE setup), PG = priority, queue = priority,
    /// maximal pause time, refresh at half the pause time.
    fn default() -> Self {
        PfcConfig {
            enable_mask: 0b0001_1000,
            prio_to_pg: core::array::from_fn(|p| p as u8),
            pause_quanta: 0xFFFF,
            refresh_divisor: 2,
            prio_to_queues: core::array::from_fn(|p| vec![p as u8]),
        }
    }
}

/// Per-port parameters of the PFC engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcPort {
    /// Line rate in bit/s (converts quanta to time).
    pub rate_bps: u64,
    /// Source MAC address of frames sent on this port.
    pub mac: [u8; 6],
}

/// A congestion event from the MMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PfcEvent {
    /// Start pausing the upstream: `pg = Some(g)` for the priorities of PG `g`, `None` for all
    /// enabled priorities of the port.
    Xoff {
        /// Ingress port.
        port: usize,
        /// Priority group, or the whole port.
        pg: Option<u8>,
    },
    /// Stop pausing (same scopes as [`PfcEvent::Xoff`]; a port-level and a PG-level XOFF are
    /// tracked separately, each cleared only by its own XON).
    Xon {
        /// Ingress port.
        port: usize,
        /// Priority group, or the whole port.
        pg: Option<u8>,
    },
}

/// A PFC frame to send now on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PfcTx {
    /// Port to send it on.
    pub port: usize,
    /// The frame; emit with [`PfcRepr::emit`].
    pub repr: PfcRepr,
}

/// Counters of one (port, priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PfcCounters {
    /// Frames sent with this class enabled and a non-zero time (first XOFF and refreshes).
    pub xoff_sent: u64,
    /// Frames sent with this class enabled and time 0.
    pub xon_sent: u64,
    /// Frames received with this class enabled and a non-zero time.
    pub xoff_received: u64,
    /// Frames received with this class enabled and time 0.
    pub xon_received: u64,
    /// Picoseconds this class was asserted toward the peer (from first XOFF to XON).
    pub tx_pause_ps: u64,
    /// Picoseconds the peer asked this class to be paused (pause times received, cut short
    /// by XON, overlaps counted once), whether or not the watchdog let it take effect.
    pub rx_pause_ps: u64,
}

/// Accumulated length of possibly overlapping intervals [since, until).
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    closed: u64,
    open: Option<(u64, u64)>,
}

impl Span {
    /// Cover [now, until): an interval still running at `now` now ends at `until` (a new
    /// pause time replaces the old one, as in the pause registers).
    fn cover(&mut self, now: u64, until: u64) {
        match self.open {
            Some((s, u)) if u > now => self.open = Some((s, until)),
            Some((s, u)) => {
                self.closed = self.closed.saturating_add(u.saturating_sub(s));
                self.open = Some((now, until));
            }
            None => self.open = Some((now, until)),
        }
    }

    /// End coverage at `now`.
    fn end(&mut self, now: u64) {
        if let Some((s, u)) = self.open.take() {
            let e = u.min(now).max(s);
            self.closed = self.closed.saturating_add(e - s);
        }
    }

    fn total(&self, now: u64) -> u64 {
        match self.open {
            Some((s, u)) => self
                .closed
                .saturating_add(u.min(now).saturating_sub(s.min(now))),
            None => self.closed,
        }
    }
}

#[derive(Debug, Clone)]
struct PortState {
    cfg: PfcPort,
    port_xoff: bool,
    pg_xoff: u8,
    /// Classes the peer was last told to pause (XOFF sent, no XON since).
    sent: u8,
    /// When the wanted set first differed from `sent` (poll due immediately).
    changed_at: Option<u64>,
    next_refresh: Option<u64>,
    tx_span: [Span; CLASSES],
    rx_span: [Span; CLASSES],
    last_xoff_rx: [Option<u64>; CLASSES],
    pause_frames_received: u64,
    /// Queues whose pauses are ignored (PFC watchdog Drop/Forward).
    ignore: u128,
    counters: [PfcCounters; CLASSES],
}

/// PFC engine for all ports of a switch: sender state machines and receive side.
#[derive(Debug, Clone)]
pub struct Pfc {
    cfg: PfcConfig,
    /// PG → enabled classes in it.
    pg_classes: [u8; CLASSES],
    /// Priority → queue bitmap.
    prio_queues: [u128; CLASSES],
    ports: Vec<PortState>,
}

impl Pfc {
    /// An engine for `ports` (index = port number).
    pub fn new(cfg: PfcConfig, ports: &[PfcPort]) -> Result<Pfc, PfcError> {
        if cfg.pause_quanta == 0 {
            return Err(PfcError::ZeroPauseQuanta);
        }
        if cfg.refresh_divisor == 0 {
            return Err(PfcError::ZeroRefreshDivisor);
        }
        let mut pg_classes = [0u8; CLASSES];
        let mut prio_queues = [0u128; CLASSES];
        for (prio, (&pg, queues)) in cfg.prio_to_pg.iter().zip(&cfg.prio_to_queues).enumerate() {
            let slot = pg_classes
                .get_mut(usize::from(pg))
                .ok_or(PfcError::BadPgMap { prio, pg })?;
            if cfg.enable_mask & (1 << prio) != 0 {
                *slot |= 1 << prio;
            }
            for &queue in queues {
                if usize::from(queue) >= crate::afc::MAX_QUEUES {
                    return Err(PfcError::BadQueueMap { prio, queue });
                }
                prio_queues[prio] |= 1 << queue;
            }
        }
        let ports = ports
            .iter()
            .map(|&p| PortState {
                cfg: p,
                port_xoff: false,
                pg_xoff: 0,
                sent: 0,
                changed_at: None,
                next_refresh: None,
                tx_span: [Span::default(); CLASSES],
                rx_span: [Span::default(); CLASSES],
                last_xoff_rx: [None; CLASSES],
                pause_frames_received: 0,
                ignore: 0,
                counters: [PfcCounters::default(); CLASSES],
            })
            .collect();
        Ok(Pfc {
            cfg,
            pg_classes,
            prio_queues,
            ports,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PfcConfig {
        &self.cfg
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Classes that should be paused on `port` now.
    fn wanted(&self, p: &PortState) -> u8 {
        let by_port = if p.port_xoff { self.cfg.enable_mask } else { 0 };
        let by_pg = (0..CLASSES)
            .filter(|g| p.pg_xoff & (1 << g) != 0)
            .fold(0, |m, g| m | self.pg_classes[g]);
        by_port | by_pg
    }

    /// Classes of `port` currently asserted toward the peer after the last poll.
    pub fn asserted(&self, port: usize) -> Option<u8> {
        self.ports.get(port).map(|p| p.sent)
    }

    /// Record an MMU event at `now`. Frames are produced by the next [`poll`](Self::poll).
    pub fn on_event(&mut self, ev: PfcEvent, now: u64) -> Result<(), PfcError> {
        let (port, pg, xoff) = match ev {
            PfcEvent::Xoff { port, pg } => (port, pg, true),
            PfcEvent::Xon { port, pg } => (port, pg, false),
        };
        if let Some(g) = pg {
            if usize::from(g) >= CLASSES {
                return Err(PfcError::NoSuchPg(g));
            }
        }
        let p = self.ports.get_mut(port).ok_or(PfcError::NoSuchPort(port))?;
        match pg {
            None => p.port_xoff = xoff,
            Some(g) if xoff => p.pg_xoff |= 1 << g,
            Some(g) => p.pg_xoff &= !(1 << g),
        }
        let want = self.wanted(&self.ports[port]);
        let p = &mut self.ports[port];
        if want == p.sent {
            p.changed_at = None;
        } else if p.changed_at.is_none() {
            p.changed_at = Some(now);
        }
        Ok(())
    }

    /// Pause time of one XOFF on `port`, in picoseconds.
    fn pause_ps(&self, p: &PortState) -> u64 {
        quanta_to_ps(self.cfg.pause_quanta, p.cfg.rate_bps)
    }

    /// Append the frames due at `now` (at most one per port) to `out`.
    pub fn poll(&mut self, now: u64, out: &mut Vec<PfcTx>) {
        for port in 0..self.ports.len() {
            let want = self.wanted(&self.ports[port]);
            let pause_ps = self.pause_ps(&self.ports[port]);
            let refresh = (pause_ps / u64::from(self.cfg.refresh_divisor)).max(1);
            let pause_quanta = self.cfg.pause_quanta;
            let p = &mut self.ports[port];
            let refresh_due = p.sent != 0 && p.next_refresh.is_some_and(|t| t <= now);
            if want == p.sent && !refresh_due {
                continue;
            }
            let xon = p.sent & !want;
            let mut repr = PfcRepr {
                src_addr: p.cfg.mac,
                class_enable: want | xon,
                quanta: [0; CLASSES],
            };
            for c in 0..CLASSES {
                let bit = 1u8 << c;
                if want & bit != 0 {
                    repr.quanta[c] = pause_quanta;
                    p.counters[c].xoff_sent += 1;
                    if p.sent & bit == 0 {
                        p.tx_span[c].cover(now, u64::MAX);
                    }
                } else if xon & bit != 0 {
                    p.counters[c].xon_sent += 1;
                    p.tx_span[c].end(now);
                }
            }
            p.sent = want;
            p.changed_at = None;
            p.next_refresh = (want != 0).then(|| now.saturating_add(refresh));
            out.push(PfcTx { port, repr });
        }
    }

    /// When [`poll`](Self::poll) must next be called: at once (a time ≤ now) after a change,
    /// else at the earliest refresh; `None` if nothing is asserted or pending.
    pub fn next_deadline(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter_map(|p| match p.changed_at {
                Some(t) => Some(t),
                None if p.sent != 0 => p.next_refresh,
                None => None,
            })
            .min()
    }

    /// Apply a PFC frame received on `port` at `now` to the port's queues through the AFC unit.
    pub fn on_pfc_frame(
        &mut self,
        port: usize,
        repr: &PfcRepr,
        rate_bps: u64,
        now: u64,
        afc: &Afc,
    ) -> Result<(), PfcError> {
        let enabled = repr.class_enable & self.cfg.enable_mask;
        let p = self.ports.get_mut(port).ok_or(PfcError::NoSuchPort(port))?;
        for c in 0..CLASSES {
            if enabled & (1 << c) == 0 {
                continue;
            }
            let queues = self.prio_queues[c] & !p.ignore;
            let t = repr.quanta[c];
            if t > 0 {
                let until = now.saturating_add(quanta_to_ps(t, rate_bps));
                for_each_bit(queues, |q| {
                    let _ = afc.pfc_pause(port, q, until);
                });
                p.counters[c].xoff_received += 1;
                p.last_xoff_rx[c] = Some(now);
                p.rx_span[c].cover(now, until);
            } else {
                for_each_bit(queues, |q| {
                    let _ = afc.pfc_resume(port, q);
                });
                p.counters[c].xon_received += 1;
                p.rx_span[c].end(now);
            }
        }
        Ok(())
    }

    /// Apply an 802.3x PAUSE frame received on `port`: it pauses (or, with time 0, resumes)
    /// every queue of the port, except those the watchdog took over.
    pub fn on_pause_frame(
        &mut self,
        port: usize,
        repr: &PauseRepr,
        rate_bps: u64,
        now: u64,
        afc: &Afc,
    ) -> Result<(), PfcError> {
        let p = self.ports.get_mut(port).ok_or(PfcError::NoSuchPort(port))?;
        let regs = afc.regs().get(port).ok_or(PfcError::NoSuchPort(port))?;
        p.pause_frames_received += 1;
        let all = if regs.queues() >= 128 {
            u128::MAX
        } else {
            (1u128 << regs.queues()) - 1
        };
        let queues = all & !p.ignore;
        if repr.quanta > 0 {
            let until = now.saturating_add(quanta_to_ps(repr.quanta, rate_bps));
            for_each_bit(queues, |q| {
                let _ = afc.pfc_pause(port, q, until);
            });
        } else {
            for_each_bit(queues, |q| {
                let _ = afc.pfc_resume(port, q);
            });
        }
        Ok(())
    }

    /// Let a PFC watchdog event take effect: on a storm with action `Drop` or `Forward` the
    /// queue is resumed and further pauses for it are ignored; on restore pauses are honored
    /// again (from the next received frame on).
    pub fn apply_watchdog_event(&mut self, ev: &WdEvent, afc: &Afc) {
        match *ev {
            WdEvent::Storm {
                port,
                queue,
                action,
            } => {
                if action.ignores_pause() && queue < crate::afc::MAX_QUEUES {
                    if let Some(p) = self.ports.get_mut(port) {
                        p.ignore |= 1 << queue;
                        let _ = afc.pfc_resume(port, queue);
                    }
                }
            }
            WdEvent::Restore { port, queue } => {
                if let Some(p) = self.ports.get_mut(port) {
                    if queue < crate::afc::MAX_QUEUES {
                        p.ignore &= !(1 << queue);
                    }
                }
            }
        }
    }

    /// Queues of `port` whose pauses are currently ignored.
    pub fn ignore_mask(&self, port: usize) -> u128 {
        self.ports.get(port).map_or(0, |p| p.ignore)
    }

    /// Time of the last XOFF (t > 0) received on `port` for priority `prio`.
    pub fn last_xoff_rx(&self, port: usize, prio: usize) -> Option<u64> {
        self.ports.get(port)?.last_xoff_rx.get(prio).copied()?
    }

    /// Time of the last XOFF received on `port` for any priority mapped to `queue` (what the
    /// watchdog's [`QueueView`](crate::watchdog::QueueView) needs).
    pub fn last_xoff_rx_queue(&self, port: usize, queue: usize) -> Option<u64> {
        let p = self.ports.get(port)?;
        if queue >= crate::afc::MAX_QUEUES {
            return None;
        }
        (0..CLASSES)
            .filter(|&c| self.prio_queues[c] & (1 << queue) != 0)
            .filter_map(|c| p.last_xoff_rx[c])
            .max()
    }

    /// Counters of (`port`, `prio`) as of `now` (running pause intervals counted up to `now`).
    pub fn counters(&self, port: usize, prio: usize, now: u64) -> Option<PfcCounters> {
        let p = self.ports.get(port)?;
        let mut c = *p.counters.get(prio)?;
        c.tx_pause_ps = p.tx_span[prio].total(now);
        c.rx_pause_ps = p.rx_span[prio].total(now);
        Some(c)
    }

    /// 802.3x PAUSE frames received on `port`.
    pub fn pause_frames_received(&self, port: usize) -> u64 {
        self.ports.get(port).map_or(0, |p| p.pause_frames_received)
    }
}

fn for_each_bit(mut m: u128, mut f: impl FnMut(usize)) {
    while m != 0 {
        f(m.trailing_zeros() as usize);
        m &= m - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watchdog::WdAction;

    const G100: u64 = 100_000_000_000;
    /// 65535 quanta at 100G.
    const PAUSE_100G: u64 = 335_539_200;

    fn ports(n: usize) -> Vec<PfcPort> {
        (0..n)
            .map(|i| PfcPort {
                rate_bps: G100,
                mac: [2, 0, 0, 0, 0, i as u8],
            })
            .collect()
    }

    fn poll(pfc: &mut Pfc, now: u64) -> Vec<PfcTx> {
        let mut v = Vec::new();
        pfc.poll(now, &mut v);
        v
    }

    #[test]
    fn xoff_refresh_xon() {
        let mut pfc = Pfc::new(PfcConfig::default(), &ports(2)).unwrap();
        assert_eq!(pfc.next_deadline(), None);
        assert!(poll(&mut pfc, 0).is_empty());

        pfc.on_event(
            PfcEvent::Xoff {
                port: 1,
                pg: Some(3),
            },
            100,
        )
        .unwrap();
        assert_eq!(pfc.next_deadline(), Some(100));
        let tx = poll(&mut pfc, 100);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx[0].port, 1);
        assert_eq!(tx[0].repr.src_addr, [2, 0, 0, 0, 0, 1]);
        assert_eq!(tx[0].repr.class_enable, 1 << 3);
        assert_eq!(tx[0].repr.quanta[3], 0xFFFF);
        assert_eq!(pfc.asserted(1), Some(1 << 3));

        // Refresh at half the pause time, not before.
        let half = PAUSE_100G / 2;
        assert_eq!(pfc.next_deadline(), Some(100 + half));
        assert!(poll(&mut pfc, 100 + half - 1).is_empty());
        let tx = poll(&mut pfc, 100 + half);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx[0].repr.xoff_mask(), 1 << 3);
        assert_eq!(pfc.next_deadline(), Some(100 + 2 * half));

        // XON: zero timer for the class.
        pfc.on_event(
            PfcEvent::Xon {
                port: 1,
                pg: Some(3),
            },
            200_000_000,
        )
        .unwrap();
        assert_eq!(pfc.next_deadline(), Some(200_000_000));
        let tx = poll(&mut pfc, 200_000_000);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx[0].repr.class_enable, 1 << 3);
        assert_eq!(tx[0].repr.quanta, [0; 8]);
        assert_eq!(tx[0].repr.xon_mask(), 1 << 3);
        assert_eq!(pfc.next_deadline(), None);
        assert!(poll(&mut pfc, 900_000_000).is_empty());

        let c = pfc.counters(1, 3, 1_000_000_000).unwrap();
        assert_eq!(c.xoff_sent, 2);
        assert_eq!(c.xon_sent, 1);
        assert_eq!(c.tx_pause_ps, 200_000_000 - 100);
    }

    #[test]
    fn refresh_keeps_peer_paused_continuously() {
        // Receiver side of a link driven by the sender's refreshes never sees a gap.
        let mut tx_side = Pfc::new(PfcConfig::default(), &ports(1)).unwrap();
        let mut rx_side = Pfc::new(PfcConfig::default(), &ports(1)).unwrap();
        let afc = Afc::new([8]);
        let regs = afc.port(0);
        tx_side
            .on_event(
                PfcEvent::Xoff {
                    port: 0,
                    pg: Some(4),
                },
                0,
            )
            .unwrap();
        let mut now = 0;
        let end = 10 * PAUSE_100G;
        while now < end {
            for f in poll(&mut tx_side, now) {
                rx_side.on_pfc_frame(0, &f.repr, G100, now, &afc).unwrap();
            }
            assert!(regs.is_paused(4, now), "gap at {now}");
            now = tx_side.next_deadline().unwrap().max(now + 1);
            // Check just before the next refresh as well.
            assert!(regs.is_paused(4, now - 1));
        }
        assert!(rx_side.counters(0, 4, end).unwrap().xoff_received >= 20);
    }

    #[test]
    fn port_level_and_merging() {
        let cfg = PfcConfig {
            enable_mask: 0b1010_1000, // 3, 5, 7
            prio_to_pg: [0, 0, 0, 1, 1, 1, 2, 2],
            ..PfcConfig::default()
        };
        let mut pfc = Pfc::new(cfg, &ports(1)).unwrap();
        pfc.on_event(
            PfcEvent::Xoff {
                port: 0,
                pg: Some(1),
            },
            0,
        )
        .unwrap();
        let tx = poll(&mut pfc, 0);
        assert_eq!(tx[0].repr.class_enable, 0b0010_1000); // 3 and 5; 4 not enabled
                                                          // Port-level: all enabled classes.
        pfc.on_event(PfcEvent::Xoff { port: 0, pg: None }, 10)
            .unwrap();
        let tx = poll(&mut pfc, 10);
        assert_eq!(tx[0].repr.class_enable, 0b1010_1000);
        assert_eq!(tx[0].repr.xoff_mask(), 0b1010_1000);
        // Port XON leaves PG 1 asserted: one frame with XON for 7 and XOFF refresh for 3, 5.
        pfc.on_event(PfcEvent::Xon { port: 0, pg: None }, 20)
            .unwrap();
        let tx = poll(&mut pfc, 20);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx[0].repr.xoff_mask(), 0b0010_1000);
        assert_eq!(tx[0].repr.xon_mask(), 0b1000_0000);
        // XOFF then XON before a poll: nothing to send.
        pfc.on_event(
            PfcEvent::Xoff {
                port: 0,
                pg: Some(2),
            },
            30,
        )
        .unwrap();
        pfc.on_event(
            PfcEvent::Xon {
                port: 0,
                pg: Some(2),
            },
            31,
        )
        .unwrap();
        assert_eq!(pfc.next_deadline(), Some(20 + PAUSE_100G / 2));
        assert!(poll(&mut pfc, 40).is_empty());
        // Errors, no panics.
        assert_eq!(
            pfc.on_event(PfcEvent::Xoff { port: 9, pg: None }, 0),
            Err(PfcError::NoSuchPort(9))
        );
        assert_eq!(
            pfc.on_event(
                PfcEvent::Xoff {
                    port: 0,
                    pg: Some(8)
                },
                0
            ),
            Err(PfcError::NoSuchPg(8))
        );
    }

    #[test]
    fn config_validation() {
        let bad_pg = PfcConfig {
            prio_to_pg: [0, 0, 0, 9, 0, 0, 0, 0],
            ..PfcConfig::default()
        };
        assert_eq!(
            Pfc::new(bad_pg, &[]).unwrap_err(),
            PfcError::BadPgMap { prio: 3, pg: 9 }
        );
        let mut bad_q = PfcConfig::default();
        bad_q.prio_to_queues[1] = vec![128];
        assert!(matches!(
            Pfc::new(bad_q, &[]),
            Err(PfcError::BadQueueMap { .. })
        ));
        let zero = PfcConfig {
            pause_quanta: 0,
            ..PfcConfig::default()
        };
        assert_eq!(Pfc::new(zero, &[]).unwrap_err(), PfcError::ZeroPauseQuanta);
    }

    #[test]
    fn receive_side() {
        let mut cfg = PfcConfig::default(); // 3 and 4 enabled
        cfg.prio_to_queues[3] = vec![3, 6];
        let mut pfc = Pfc::new(cfg, &ports(1)).unwrap();
        let afc = Afc::new([8]);
        let regs = afc.port(0);
        let f = PfcRepr {
            src_addr: [0; 6],
            class_enable: 0b0001_1001, // 0 is not enabled locally: ignored
            quanta: [100, 0, 0, 0xFFFF, 0, 0, 0, 0],
        };
        pfc.on_pfc_frame(0, &f, G100, 1_000, &afc).unwrap();
        assert_eq!(regs.paused_mask(1_000), (1 << 3) | (1 << 6));
        assert_eq!(regs.next_expiry(1_000), Some(1_000 + PAUSE_100G));
        assert!(!regs.is_paused(3, 1_000 + PAUSE_100G));
        let c3 = pfc.counters(0, 3, 2_000).unwrap();
        assert_eq!((c3.xoff_received, c3.rx_pause_ps), (1, 1_000));
        let c4 = pfc.counters(0, 4, 2_000).unwrap();
        assert_eq!(c4.xon_received, 1);
        assert_eq!(pfc.counters(0, 0, 2_000).unwrap(), PfcCounters::default());
        assert_eq!(pfc.last_xoff_rx_queue(0, 6), Some(1_000));

        // XON for 3 at 5_000.
        let xon = PfcRepr {
            class_enable: 1 << 3,
            ..PfcRepr::default()
        };
        pfc.on_pfc_frame(0, &xon, G100, 5_000, &afc).unwrap();
        assert_eq!(regs.paused_mask(5_000), 0);
        assert_eq!(pfc.counters(0, 3, 9_999_999).unwrap().rx_pause_ps, 4_000);
        assert_eq!(
            pfc.on_pfc_frame(3, &xon, G100, 0, &afc),
            Err(PfcError::NoSuchPort(3))
        );

        // 802.3x PAUSE stops every queue.
        pfc.on_pause_frame(
            0,
            &PauseRepr {
                src_addr: [0; 6],
                quanta: 10,
            },
            G100,
            0,
            &afc,
        )
        .unwrap();
        assert_eq!(regs.paused_mask(0), 0xFF);
        assert_eq!(regs.next_expiry(0), Some(51_200));
        assert_eq!(pfc.pause_frames_received(0), 1);
    }

    #[test]
    fn watchdog_takeover_ignores_pauses() {
        let mut pfc = Pfc::new(PfcConfig::default(), &ports(1)).unwrap();
        let afc = Afc::new([8]);
        let regs = afc.port(0);
        let f = PfcRepr {
            src_addr: [0; 6],
            class_enable: 1 << 3,
            quanta: [0, 0, 0, 0xFFFF, 0, 0, 0, 0],
        };
        pfc.on_pfc_frame(0, &f, G100, 0, &afc).unwrap();
        assert!(regs.is_paused(3, 1));
        let storm = WdEvent::Storm {
            port: 0,
            queue: 3,
            action: WdAction::Drop,
        };
        pfc.apply_watchdog_event(&storm, &afc);
        assert!(!regs.is_paused(3, 1));
        pfc.on_pfc_frame(0, &f, G100, 2, &afc).unwrap();
        assert!(!regs.is_paused(3, 3));
        assert_eq!(pfc.ignore_mask(0), 1 << 3);
        pfc.apply_watchdog_event(&WdEvent::Restore { port: 0, queue: 3 }, &afc);
        pfc.on_pfc_frame(0, &f, G100, 4, &afc).unwrap();
        assert!(regs.is_paused(3, 5));
        // Alert does not take over.
        let alert = WdEvent::Storm {
            port: 0,
            queue: 3,
            action: WdAction::Alert,
        };
        pfc.apply_watchdog_event(&alert, &afc);
        assert!(regs.is_paused(3, 5));
    }
}

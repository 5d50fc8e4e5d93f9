//! PFC watchdog with SONiC `pfcwd` semantics (SONiC "PFC Watchdog Design",
//! <https://github.com/sonic-net/SONiC/wiki/PFC-Watchdog-Design>).
//!
//! * **Detection**: a lossless queue that stays paused by PFC *and* holds packets for at least
//!   `detection_time` is declared in a PFC storm. The caller samples every queue with
//!   [`Watchdog::tick`] (SONiC polls at a fixed interval); detection happens at the first tick
//!   at or after `detection_time` of continuous stall, i.e. within detection_time + one tick
//!   interval. Any sample where the queue is not paused or is empty restarts the clock.
//! * **Mitigation** ([`WdAction`]): `Drop` — the queue's packets and new arrivals for it are
//!   dropped and PFC pauses for it are ignored; `Forward` — pauses are ignored and the queue
//!   transmits; `Alert` — report only, the queue keeps honoring pauses.
//! * **Restoration**: a stormed queue is restored once no PFC pause frame has been received
//!   for it for `restoration_time` (the timer starts at detection and restarts at every pause
//!   frame).
//!
//! The watchdog is pure: it only reads [`QueueView`]s and returns [`WdEvent`]s. Wiring its
//! decisions into the data path is the caller's: [`Pfc::apply_watchdog_event`] makes the PFC
//! receive side ignore pauses, [`Watchdog::drops`] tells the enqueue/dequeue path to drop.
//!
//! [`Pfc::apply_watchdog_event`]: crate::pfc::Pfc::apply_watchdog_event

use serde::{Deserialize, Serialize};

/// Mitigation applied to a stormed queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WdAction {
    /// Drop the queue's packets and ignore pauses (SONiC default).
    #[default]
    Drop,
    /// Ignore pauses, keep forwarding.
    Forward,
    /// Only report.
    Alert,
}

impl WdAction {
    /// Whether this action makes the queue ignore PFC pauses.
    pub fn ignores_pause(self) -> bool {
        matches!(self, WdAction::Drop | WdAction::Forward)
    }
}

/// Watchdog parameters (times in picoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchdogConfig {
    /// Continuous stall that declares a storm.
    pub detection_time_ps: u64,
    /// Quiet time (no pause frames) after which a stormed queue is restored.
    pub restoration_time_ps: u64,
    /// Mitigation.
    pub action: WdAction,
}

impl Default for WatchdogConfig {
    /// SONiC `pfcwd start_default`: 200 ms detection, 200 ms restoration, drop.
    fn default() -> Self {
        WatchdogConfig {
            detection_time_ps: 200_000_000_000,
            restoration_time_ps: 200_000_000_000,
            action: WdAction::Drop,
        }
    }
}

/// One queue's state as sampled by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueView {
    /// Egress port.
    pub port: usize,
    /// Queue of the port.
    pub queue: usize,
    /// Whether PFC currently pauses the queue (`PauseRegs::is_paused`).
    pub paused: bool,
    /// Whether the queue holds packets.
    pub has_packets: bool,
    /// Time of the last PFC pause frame (t > 0) received for the queue, if any
    /// (`Pfc::last_xoff_rx_queue`).
    pub last_pause_frame_ps: Option<u64>,
}

/// What the watchdog decided at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WdEvent {
    /// The queue is in a PFC storm; `action` now applies.
    Storm {
        /// Port.
        port: usize,
        /// Queue.
        queue: usize,
        /// Mitigation in force.
        action: WdAction,
    },
    /// The storm is over; normal PFC behaviour resumes.
    Restore {
        /// Port.
        port: usize,
        /// Queue.
        queue: usize,
    },
}

/// Counters of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WdCounters {
    /// Storms detected.
    pub storms: u64,
    /// Storms restored.
    pub restorations: u64,
    /// Picoseconds spent in storm state.
    pub storm_ps: u64,
    /// Packets the caller dropped because of the `Drop` action ([`Watchdog::count_drops`]).
    pub dropped_packets: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct QState {
    stall_since: Option<u64>,
    storm_since: Option<u64>,
    last_pause: Option<u64>,
    counters: WdCounters,
}

/// PFC watchdog over `ports × queues` queues.
#[derive(Debug, Clone)]
pub struct Watchdog {
    cfg: WatchdogConfig,
    queues: usize,
    state: Vec<QState>,
}

impl Watchdog {
    /// A watchdog for `ports` ports of `queues` queues each (at most
    /// [`MAX_QUEUES`](crate::afc::MAX_QUEUES)); holds `ports × queues` small states.
    pub fn new(cfg: WatchdogConfig, ports: usize, queues: usize) -> Watchdog {
        let queues = queues.min(crate::afc::MAX_QUEUES);
        Watchdog {
            cfg,
            queues,
            state: vec![QState::default(); ports.saturating_mul(queues)],
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WatchdogConfig {
        &self.cfg
    }

    fn idx(&self, port: usize, queue: usize) -> Option<usize> {
        if queue >= self.queues {
            return None;
        }
        let i = port.checked_mul(self.queues)?.checked_add(queue)?;
        (i < self.state.len()).then_some(i)
    }

    /// Sample `views` at `now` and append storm/restore decisions to `events`. Views for
    /// unknown queues are ignored; queues not in `views` keep their state.
    pub fn tick(&mut self, now: u64, views: &[QueueView], events: &mut Vec<WdEvent>) {
        for v in views {
            let Some(i) = self.idx(v.port, v.queue) else {
                continue;
            };
            let cfg = self.cfg;
            let st = &mut self.state[i];
            st.last_pause = st.last_pause.max(v.last_pause_frame_ps);
            match st.storm_since {
                None => {
                    if v.paused && v.has_packets {
                        let since = *st.stall_since.get_or_insert(now);
                        if now.saturating_sub(since) >= cfg.detection_time_ps {
                            st.stall_since = None;
                            st.storm_since = Some(now);
                            st.counters.storms += 1;
                            events.push(WdEvent::Storm {
                                port: v.port,
                                queue: v.queue,
                                action: cfg.action,
                            });
                        }
                    } else {
                        st.stall_since = None;
                    }
                }
                Some(since) => {
                    let quiet_since = st.last_pause.map_or(since, |t| t.max(since));
                    if now.saturating_sub(quiet_since) >= cfg.restoration_time_ps {
                        st.storm_since = None;
                        st.counters.restorations += 1;
                        st.counters.storm_ps = st
                            .counters
                            .storm_ps
                            .saturating_add(now.saturating_sub(since));
                        events.push(WdEvent::Restore {
                            port: v.port,
                            queue: v.queue,
                        });
                    }
                }
            }
        }
    }

    /// Whether the queue is in a storm (any action).
    pub fn is_stormed(&self, port: usize, queue: usize) -> bool {
        self.idx(port, queue)
            .is_some_and(|i| self.state[i].storm_since.is_some())
    }

    /// Whether PFC pauses for the queue must be ignored (storm with `Drop` or `Forward`).
    pub fn ignores_pause(&self, port: usize, queue: usize) -> bool {
        self.cfg.action.ignores_pause() && self.is_stormed(port, queue)
    }

    /// Whether packets of the queue must be dropped (storm with `Drop`).
    pub fn drops(&self, port: usize, queue: usize) -> bool {
        self.cfg.action == WdAction::Drop && self.is_stormed(port, queue)
    }

    /// Bitmap of the queues (< 128) of `port` whose pauses are ignored.
    pub fn ignore_mask(&self, port: usize) -> u128 {
        (0..self.queues)
            .filter(|&q| self.ignores_pause(port, q))
            .fold(0, |m, q| m | (1 << q))
    }

    /// Record `n` packets dropped by the caller because of the `Drop` action.
    pub fn count_drops(&mut self, port: usize, queue: usize, n: u64) {
        if let Some(i) = self.idx(port, queue) {
            let c = &mut self.state[i].counters;
            c.dropped_packets = c.dropped_packets.saturating_add(n);
        }
    }

    /// Counters of the queue as of `now` (a running storm counted up to `now`).
    pub fn counters(&self, port: usize, queue: usize, now: u64) -> Option<WdCounters> {
        let st = &self.state[self.idx(port, queue)?];
        let mut c = st.counters;
        if let Some(s) = st.storm_since {
            c.storm_ps = c.storm_ps.saturating_add(now.saturating_sub(s));
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    fn cfg(action: WdAction) -> WatchdogConfig {
        WatchdogConfig {
            detection_time_ps: 200 * MS,
            restoration_time_ps: 200 * MS,
            action,
        }
    }

    fn view(paused: bool, has_packets: bool, last: Option<u64>) -> QueueView {
        QueueView {
            port: 1,
            queue: 3,
            paused,
            has_packets,
            last_pause_frame_ps: last,
        }
    }

    #[test]
    fn storm_detected_within_twice_detection_time_and_restored() {
        let mut wd = Watchdog::new(cfg(WdAction::Drop), 2, 8);
        let tick = 50 * MS; // SONiC-like poll interval
        let start = 10 * MS;
        let mut ev = Vec::new();
        let mut now = start;
        let mut detected = None;
        // Peer keeps pausing (a frame every tick) while the queue holds packets.
        while now < start + 1_000 * MS {
            wd.tick(now, &[view(true, true, Some(now))], &mut ev);
            if !ev.is_empty() {
                detected = Some(now);
                break;
            }
            now += tick;
        }
        let detected = detected.expect("storm not detected");
        assert!(detected - start >= 200 * MS);
        assert!(detected - start <= 400 * MS);
        assert_eq!(
            ev,
            vec![WdEvent::Storm {
                port: 1,
                queue: 3,
                action: WdAction::Drop
            }]
        );
        assert!(wd.ignores_pause(1, 3) && wd.drops(1, 3) && wd.is_stormed(1, 3));
        assert_eq!(wd.ignore_mask(1), 1 << 3);
        assert_eq!(wd.ignore_mask(0), 0);
        wd.count_drops(1, 3, 7);

        // Pause frames keep arriving for 300 ms: no restore.
        let storm_frames_end = detected + 300 * MS;
        ev.clear();
        now = detected;
        while now <= storm_frames_end {
            wd.tick(now, &[view(false, true, Some(now))], &mut ev);
            now += tick;
        }
        assert!(ev.is_empty());
        // Then quiet: restored restoration_time after the last frame, within one tick.
        let last_frame = now - tick;
        let mut restored = None;
        while now < last_frame + 1_000 * MS {
            wd.tick(now, &[view(false, false, Some(last_frame))], &mut ev);
            if !ev.is_empty() {
                restored = Some(now);
                break;
            }
            now += tick;
        }
        let restored = restored.expect("not restored");
        assert!(restored - last_frame >= 200 * MS && restored - last_frame <= 250 * MS);
        assert_eq!(ev, vec![WdEvent::Restore { port: 1, queue: 3 }]);
        assert!(!wd.ignores_pause(1, 3) && !wd.drops(1, 3));
        let c = wd.counters(1, 3, restored).unwrap();
        assert_eq!((c.storms, c.restorations, c.dropped_packets), (1, 1, 7));
        assert_eq!(c.storm_ps, restored - detected);
    }

    #[test]
    fn no_storm_without_packets_or_with_interruptions() {
        let mut wd = Watchdog::new(cfg(WdAction::Forward), 2, 8);
        let mut ev = Vec::new();
        // Paused but empty: never a storm.
        for i in 0..100 {
            wd.tick(
                i * 10 * MS,
                &[view(true, false, Some(i * 10 * MS))],
                &mut ev,
            );
        }
        assert!(ev.is_empty());
        // Stalls of 150 ms broken by a sample where the queue drains.
        let mut now = 2_000 * MS;
        for round in 0..20 {
            for _ in 0..15 {
                wd.tick(now, &[view(true, true, Some(now))], &mut ev);
                now += 10 * MS;
            }
            let _ = round;
            wd.tick(now, &[view(false, true, Some(now))], &mut ev);
            now += 10 * MS;
        }
        assert!(ev.is_empty());
        assert!(!wd.is_stormed(1, 3));
    }

    #[test]
    fn actions() {
        for (action, ignores, drops) in [
            (WdAction::Drop, true, true),
            (WdAction::Forward, true, false),
            (WdAction::Alert, false, false),
        ] {
            let mut wd = Watchdog::new(cfg(action), 2, 8);
            let mut ev = Vec::new();
            wd.tick(0, &[view(true, true, Some(0))], &mut ev);
            wd.tick(200 * MS, &[view(true, true, Some(200 * MS))], &mut ev);
            assert_eq!(ev.len(), 1);
            assert_eq!(wd.ignores_pause(1, 3), ignores);
            assert_eq!(wd.drops(1, 3), drops);
            assert!(wd.is_stormed(1, 3));
        }
    }

    #[test]
    fn out_of_range_is_ignored() {
        let mut wd = Watchdog::new(WatchdogConfig::default(), 1, 4);
        let mut ev = Vec::new();
        let v = QueueView {
            port: 5,
            queue: 9,
            paused: true,
            has_packets: true,
            last_pause_frame_ps: None,
        };
        wd.tick(0, &[v], &mut ev);
        wd.tick(u64::MAX, &[v], &mut ev);
        assert!(ev.is_empty());
        assert!(!wd.ignores_pause(5, 9));
        assert_eq!(wd.counters(0, 4, 0), None);
        wd.count_drops(usize::MAX, usize::MAX, 1);
    }
}

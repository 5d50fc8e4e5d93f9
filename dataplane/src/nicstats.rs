//! Counters of a running switch's AF_XDP side (issue 23 item 4): per RX queue (one socket
//! each) and per worker, next to how the sockets came up (zero-copy or copy, huge pages or
//! not, and why not as asked).
//!
//! Every counter here has one writer: a queue's counters belong to the worker holding its
//! socket, a worker's to that worker. So they are exact with plain adds, and the totals can
//! be checked against the port counters, which ingress writes on another path: the sum of a
//! port's per-queue `rx_pkts` equals its `rx_pkts`, and the workers' `rx_pkts` sum to the
//! ports' (`tools/tests/multiqueue.rs`).

use crate::stats::{Counter, XdpSnapshot};
use serde::{Deserialize, Serialize};

/// Counters of one RX queue's socket, written by the worker holding it.
#[derive(Debug, Default)]
pub struct QueueCounters {
    pub rx_pkts: Counter,
    pub rx_bytes: Counter,
    /// The socket's `XDP_STATISTICS`, refreshed by its worker.
    pub xdp_rx_dropped: Counter,
    pub xdp_rx_invalid: Counter,
    pub xdp_rx_ring_full: Counter,
    pub xdp_fill_ring_empty: Counter,
    pub xdp_tx_invalid: Counter,
    pub xdp_tx_ring_empty: Counter,
}

impl QueueCounters {
    pub fn set_xdp(&self, s: &XdpSnapshot) {
        self.xdp_rx_dropped.set(s.rx_dropped);
        self.xdp_rx_invalid.set(s.rx_invalid_descs);
        self.xdp_rx_ring_full.set(s.rx_ring_full);
        self.xdp_fill_ring_empty.set(s.rx_fill_ring_empty_descs);
        self.xdp_tx_invalid.set(s.tx_invalid_descs);
        self.xdp_tx_ring_empty.set(s.tx_ring_empty_descs);
    }

    pub fn xdp(&self) -> XdpSnapshot {
        XdpSnapshot {
            rx_dropped: self.xdp_rx_dropped.get(),
            rx_invalid_descs: self.xdp_rx_invalid.get(),
            rx_ring_full: self.xdp_rx_ring_full.get(),
            rx_fill_ring_empty_descs: self.xdp_fill_ring_empty.get(),
            tx_invalid_descs: self.xdp_tx_invalid.get(),
            tx_ring_empty_descs: self.xdp_tx_ring_empty.get(),
        }
    }
}

/// Sums XDP statistics (a port's, over its queues' sockets).
pub fn sum_xdp(it: impl IntoIterator<Item = XdpSnapshot>) -> XdpSnapshot {
    it.into_iter()
        .fold(XdpSnapshot::default(), |a, s| XdpSnapshot {
            rx_dropped: a.rx_dropped + s.rx_dropped,
            rx_invalid_descs: a.rx_invalid_descs + s.rx_invalid_descs,
            rx_ring_full: a.rx_ring_full + s.rx_ring_full,
            rx_fill_ring_empty_descs: a.rx_fill_ring_empty_descs + s.rx_fill_ring_empty_descs,
            tx_invalid_descs: a.tx_invalid_descs + s.tx_invalid_descs,
            tx_ring_empty_descs: a.tx_ring_empty_descs + s.tx_ring_empty_descs,
        })
}

/// Counters of one worker, written by it.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Frames read from the RX queues this worker holds.
    pub rx_pkts: Counter,
    pub rx_bytes: Counter,
    /// Frames put on the TX rings of the ports this worker owns.
    pub tx_pkts: Counter,
    pub tx_bytes: Counter,
    /// Packets and control frames passed to another worker's mailbox, and taken from its own.
    pub handoffs_out: Counter,
    pub handoffs_in: Counter,
    /// Reaction times of the PFC XOFF frames this worker sent (`crate::reaction`).
    pub reaction: crate::reaction::ReactionHist,
}

/// The AF_XDP side of one port.
#[derive(Debug)]
pub struct PortNic {
    pub iface: String,
    /// XDP attach mode (`native` or `generic`).
    pub attach: &'static str,
    /// The `xdp_bind` asked for.
    pub requested: crate::config::XdpBind,
    /// Per RX queue: the worker holding its socket, and its counters.
    pub queues: Vec<(usize, QueueCounters)>,
}

/// Everything on the AF_XDP side of a running switch.
#[derive(Debug)]
pub struct NicCounters {
    pub ports: Vec<PortNic>,
    pub workers: Vec<WorkerCounters>,
    pub open: crate::port::xsk::OpenReport,
    /// The ports stamp frames in the kernel (`xoff run --reaction`, `response_ps = "auto"`).
    pub stamping: bool,
    /// `response_ps = "auto"`: the measurement and what was applied (`crate::calibrate`).
    pub calibration: Option<Calibration>,
}

/// A calibrating switch's shared state: per worker its timed frames and applied term.
#[derive(Debug, Default)]
pub struct Calibration {
    pub start_response_ps: u64,
    pub workers: Vec<crate::calibrate::WorkerCalibration>,
    /// Why the measured term was refused, if it was.
    pub error: std::sync::Mutex<Option<String>>,
}

impl NicCounters {
    pub fn snapshot(&self, names: &[String]) -> NicSnapshot {
        let o = &self.open;
        NicSnapshot {
            umem_frames: o.frames,
            hugepages: o.hugepages,
            hugepage_fallback: o.hugepage_fallback.clone(),
            ports: self
                .ports
                .iter()
                .zip(names)
                .map(|(p, name)| NicPortSnapshot {
                    port: name.clone(),
                    iface: p.iface.clone(),
                    attach: p.attach.to_string(),
                    requested: p.requested.name().to_string(),
                    bind: if o.zerocopy { "zerocopy" } else { "copy" }.to_string(),
                    zerocopy_fallback: o.zerocopy_fallback.clone(),
                    rx_queues: p
                        .queues
                        .iter()
                        .enumerate()
                        .map(|(q, (w, c))| RxQueueSnapshot {
                            queue: q as u32,
                            worker: *w,
                            rx_pkts: c.rx_pkts.get(),
                            rx_bytes: c.rx_bytes.get(),
                            xdp: c.xdp(),
                        })
                        .collect(),
                })
                .collect(),
            workers: self
                .workers
                .iter()
                .enumerate()
                .map(|(i, w)| WorkerSnapshot {
                    worker: i,
                    rx_pkts: w.rx_pkts.get(),
                    rx_bytes: w.rx_bytes.get(),
                    tx_pkts: w.tx_pkts.get(),
                    tx_bytes: w.tx_bytes.get(),
                    handoffs_out: w.handoffs_out.get(),
                    handoffs_in: w.handoffs_in.get(),
                })
                .collect(),
            reaction: self.stamping.then(|| {
                crate::reaction::ReactionHist::snapshot(self.workers.iter().map(|w| &w.reaction))
            }),
            calibration: self.calibration.as_ref().map(|c| {
                let error = c.error.lock().map(|e| e.clone()).unwrap_or(None);
                crate::calibrate::CalibrationSnapshot::new(c.start_response_ps, &c.workers, error)
            }),
        }
    }
}

/// `nic` in `xoff ctl stats --json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NicSnapshot {
    /// Chunks in the shared UMEM.
    pub umem_frames: u32,
    /// The UMEM lives in huge pages.
    pub hugepages: bool,
    /// Why huge pages were asked (`hugepages = true`) but not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepage_fallback: Option<String>,
    pub ports: Vec<NicPortSnapshot>,
    pub workers: Vec<WorkerSnapshot>,
    /// Reaction time, from a frame's arrival in the kernel to the PFC XOFF it triggered on a
    /// TX ring, when the switch measures it (`xoff run --reaction`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaction: Option<crate::reaction::ReactionSnapshot>,
    /// `response_ps = "auto"`: the measured reaction time and the term applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibrate::CalibrationSnapshot>,
}

/// One port's sockets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NicPortSnapshot {
    pub port: String,
    pub iface: String,
    /// XDP attach mode: `native` or `generic`.
    pub attach: String,
    /// `xdp_bind` as configured: `copy`, `zerocopy` or `auto`.
    pub requested: String,
    /// How the sockets are bound: `zerocopy` or `copy`.
    pub bind: String,
    /// Why zero-copy was tried (`auto`) and not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy_fallback: Option<String>,
    pub rx_queues: Vec<RxQueueSnapshot>,
}

/// One RX queue's socket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RxQueueSnapshot {
    pub queue: u32,
    /// The worker reading it.
    pub worker: usize,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub xdp: XdpSnapshot,
}

/// One worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerSnapshot {
    pub worker: usize,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub handoffs_out: u64,
    pub handoffs_in: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_xdp_is_the_sum_of_its_queues() {
        let a = XdpSnapshot {
            rx_dropped: 1,
            rx_invalid_descs: 2,
            rx_ring_full: 3,
            rx_fill_ring_empty_descs: 4,
            tx_invalid_descs: 5,
            tx_ring_empty_descs: 6,
        };
        let b = XdpSnapshot {
            rx_dropped: 10,
            rx_ring_full: 30,
            ..Default::default()
        };
        let s = sum_xdp([a.clone(), b]);
        assert_eq!(
            (s.rx_dropped, s.rx_ring_full, s.tx_ring_empty_descs),
            (11, 33, 6)
        );
        assert_eq!(s.lost(), 11 + 2 + 33);
    }

    #[test]
    fn snapshot_reports_queues_workers_and_fallbacks() {
        let q0 = QueueCounters::default();
        let q1 = QueueCounters::default();
        q0.rx_pkts.add(5);
        q1.rx_pkts.add(7);
        q1.rx_bytes.add(700);
        let nic = NicCounters {
            ports: vec![PortNic {
                iface: "veth0".into(),
                attach: "native",
                requested: crate::config::XdpBind::Auto,
                queues: vec![(0, q0), (1, q1)],
            }],
            workers: vec![WorkerCounters::default(), WorkerCounters::default()],
            open: crate::port::xsk::OpenReport {
                frames: 4096,
                zerocopy: false,
                zerocopy_fallback: Some("veth0: EOPNOTSUPP".into()),
                hugepages: false,
                hugepage_fallback: None,
            },
            stamping: false,
            calibration: None,
        };
        nic.workers[1].rx_pkts.add(7);
        let s = nic.snapshot(&["p1".to_string()]);
        let p = &s.ports[0];
        assert_eq!((p.bind.as_str(), p.requested.as_str()), ("copy", "auto"));
        assert_eq!(p.zerocopy_fallback.as_deref(), Some("veth0: EOPNOTSUPP"));
        let per: Vec<(u32, usize, u64)> = p
            .rx_queues
            .iter()
            .map(|q| (q.queue, q.worker, q.rx_pkts))
            .collect();
        assert_eq!(per, vec![(0, 0, 5), (1, 1, 7)]);
        assert_eq!(s.workers[1].rx_pkts, 7);
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("hugepage_fallback"), "absent when not asked");
        assert_eq!(serde_json::from_str::<NicSnapshot>(&json).unwrap(), s);
    }
}

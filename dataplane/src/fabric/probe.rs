//! Time-series probes: switch counters (per port or queue), flow-control counters (PFC and
//! BFC, per port) and flow counters sampled at a fixed virtual interval, written as CSV for
//! tests and plots.

use super::flow::FlowLog;
use super::SwitchNode;
use crate::stats::{PortCounters, QueueCounters};
use crate::switch::SwitchShared;
use std::sync::Arc;

/// What a probe column reads.
#[derive(Debug, Clone)]
pub enum ProbeTarget {
    Port {
        shared: Arc<SwitchShared>,
        port: usize,
        counter: PortCounter,
    },
    Queue {
        shared: Arc<SwitchShared>,
        port: usize,
        queue: usize,
        counter: QueueCounter,
    },
    Flow {
        flow: usize,
        counter: FlowCounter,
    },
    /// A flow-control counter of a port: PFC (kept by the switch's PFC engine) or BFC.
    Fc {
        /// Index of the switch in [`super::Fabric::nodes`].
        switch: usize,
        port: usize,
        counter: FcCounter,
    },
}

/// Port counters a probe can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortCounter {
    RxPkts,
    RxBytes,
    TxPkts,
    TxBytes,
    Drops,
    /// Bytes queued in all the port's queues.
    DepthBytes,
    /// Bytes queued in the port's fullest queue.
    MaxQueueBytes,
}

/// Queue counters a probe can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueCounter {
    DepthBytes,
    DepthPkts,
    EnqPkts,
    EnqBytes,
    DeqPkts,
    DeqBytes,
    WatermarkBytes,
    Drops,
    EcnMarked,
}

/// Flow-control counters of a port a probe can read. PFC counters are summed over the
/// priorities; BFC counters over the upstream (or own) queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FcCounter {
    /// PFC frames sent asking the peer to pause (XOFF, including refreshes).
    PfcXoffSent,
    PfcXonSent,
    PfcXoffReceived,
    PfcXonReceived,
    /// BFC PAUSE signals sent to the peer on this (ingress) port.
    BfcPausesSent,
    BfcResumesSent,
    /// BFC PAUSE signals received from the peer for this port's queues.
    BfcPausesReceived,
    BfcResumesReceived,
    /// Upstream queues of the peer this port currently holds paused.
    BfcPaused,
    /// New flow-to-queue assignments that landed on an occupied queue (egress).
    BfcCollisions,
    /// Active queues at the last enqueue (egress).
    BfcActiveQueues,
}

/// Flow counters a probe can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowCounter {
    TxPkts,
    TxBytes,
    RxPkts,
    RxBytes,
}

impl PortCounter {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "rx_pkts" => Self::RxPkts,
            "rx_bytes" => Self::RxBytes,
            "tx_pkts" => Self::TxPkts,
            "tx_bytes" => Self::TxBytes,
            "drops" => Self::Drops,
            "depth_bytes" => Self::DepthBytes,
            "max_queue_bytes" => Self::MaxQueueBytes,
            _ => return None,
        })
    }

    fn read(self, c: &PortCounters) -> u64 {
        match self {
            Self::RxPkts => c.rx_pkts.get(),
            Self::RxBytes => c.rx_bytes.get(),
            Self::TxPkts => c.tx_pkts.get(),
            Self::TxBytes => c.tx_bytes.get(),
            Self::Drops => c.drops.iter().map(|d| d.get()).sum(),
            Self::DepthBytes => c.queues.iter().map(|q| q.depth_bytes.get()).sum(),
            Self::MaxQueueBytes => c
                .queues
                .iter()
                .map(|q| q.depth_bytes.get())
                .max()
                .unwrap_or(0),
        }
    }
}

impl QueueCounter {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "depth_bytes" => Self::DepthBytes,
            "depth_pkts" => Self::DepthPkts,
            "enq_pkts" => Self::EnqPkts,
            "enq_bytes" => Self::EnqBytes,
            "deq_pkts" => Self::DeqPkts,
            "deq_bytes" => Self::DeqBytes,
            "watermark_bytes" => Self::WatermarkBytes,
            "drops" => Self::Drops,
            "ecn_marked" => Self::EcnMarked,
            _ => return None,
        })
    }

    fn read(self, c: &QueueCounters) -> u64 {
        match self {
            Self::DepthBytes => c.depth_bytes.get(),
            Self::DepthPkts => c.depth_pkts.get(),
            Self::EnqPkts => c.enq_pkts.get(),
            Self::EnqBytes => c.enq_bytes.get(),
            Self::DeqPkts => c.deq_pkts.get(),
            Self::DeqBytes => c.deq_bytes.get(),
            Self::WatermarkBytes => c.watermark_bytes.get(),
            Self::Drops => c.drops.get(),
            Self::EcnMarked => c.ecn_marked.get(),
        }
    }
}

impl FcCounter {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pfc_xoff_sent" => Self::PfcXoffSent,
            "pfc_xon_sent" => Self::PfcXonSent,
            "pfc_xoff_received" => Self::PfcXoffReceived,
            "pfc_xon_received" => Self::PfcXonReceived,
            "bfc_pauses_sent" => Self::BfcPausesSent,
            "bfc_resumes_sent" => Self::BfcResumesSent,
            "bfc_pauses_received" => Self::BfcPausesReceived,
            "bfc_resumes_received" => Self::BfcResumesReceived,
            "bfc_paused" => Self::BfcPaused,
            "bfc_collisions" => Self::BfcCollisions,
            "bfc_active_queues" => Self::BfcActiveQueues,
            _ => return None,
        })
    }

    /// Whether the counter is kept by the PFC engine (read through the switch's statistics).
    pub fn is_pfc(self) -> bool {
        matches!(
            self,
            Self::PfcXoffSent | Self::PfcXonSent | Self::PfcXoffReceived | Self::PfcXonReceived
        )
    }

    /// A BFC counter of `port` (0 on a switch without BFC, or for a PFC counter).
    pub fn read_bfc(self, shared: &SwitchShared, port: usize) -> u64 {
        let Some(b) = shared.schemes.bfc.as_ref() else {
            return 0;
        };
        let Some(p) = b.ports.get(port) else {
            return 0;
        };
        let sum = |c: &[flowctl::bfc::Counter]| c.iter().map(|c| c.get()).sum::<u64>();
        match self {
            Self::BfcPausesSent => sum(&p.pauses_sent),
            Self::BfcResumesSent => sum(&p.resumes_sent),
            Self::BfcPausesReceived => sum(&p.pauses_received),
            Self::BfcResumesReceived => sum(&p.resumes_received),
            Self::BfcPaused => u64::from(b.pause_bitmap(port).count_ones()),
            Self::BfcCollisions => p.collisions.get(),
            Self::BfcActiveQueues => p.active_queues.get(),
            _ => 0,
        }
    }

    /// A PFC counter of `port` of a switch's pipe, summed over priorities (0 without PFC, or
    /// for a BFC counter).
    pub fn read_pfc(self, sw: &crate::Switch, port: usize, now: u64) -> u64 {
        use crate::scheme::pfc::PfcCount;
        let what = match self {
            Self::PfcXoffSent => PfcCount::XoffSent,
            Self::PfcXonSent => PfcCount::XonSent,
            Self::PfcXoffReceived => PfcCount::XoffReceived,
            Self::PfcXonReceived => PfcCount::XonReceived,
            _ => return 0,
        };
        sw.schemes().pfc().map_or(0, |p| p.total(port, what, now))
    }
}

impl FlowCounter {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "tx_pkts" => Self::TxPkts,
            "tx_bytes" => Self::TxBytes,
            "rx_pkts" => Self::RxPkts,
            "rx_bytes" => Self::RxBytes,
            _ => return None,
        })
    }
}

impl ProbeTarget {
    /// The current value.
    pub fn read(&self, flows: &FlowLog) -> u64 {
        match self {
            ProbeTarget::Port {
                shared,
                port,
                counter,
            } => counter.read(&shared.counters[*port]),
            ProbeTarget::Queue {
                shared,
                port,
                queue,
                counter,
            } => counter.read(&shared.counters[*port].queues[*queue]),
            ProbeTarget::Flow { flow, counter } => {
                flows.flows.get(*flow).map_or(0, |f| match counter {
                    FlowCounter::TxPkts => f.tx_pkts,
                    FlowCounter::TxBytes => f.tx_bytes,
                    FlowCounter::RxPkts => f.rx_pkts,
                    FlowCounter::RxBytes => f.rx_bytes,
                })
            }
            // Needs the switch: see `Probes::sample`.
            ProbeTarget::Fc { .. } => 0,
        }
    }
}

/// Probe columns and their samples.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    /// Sampling interval, ps (0: no sampling).
    pub interval_ps: u64,
    pub names: Vec<String>,
    pub targets: Vec<ProbeTarget>,
    /// Sample times, ps.
    pub times: Vec<u64>,
    /// Samples, row-major: `values[row * names.len() + column]`.
    pub values: Vec<u64>,
}

impl Probes {
    /// Adds a column.
    pub fn add(&mut self, name: impl Into<String>, target: ProbeTarget) {
        self.names.push(name.into());
        self.targets.push(target);
    }

    pub(crate) fn sample(&mut self, now: u64, flows: &FlowLog, nodes: &[SwitchNode]) {
        self.times.push(now);
        for t in &self.targets {
            let v = match t {
                ProbeTarget::Fc {
                    switch,
                    port,
                    counter,
                } => match nodes.get(*switch) {
                    Some(n) if counter.is_pfc() => counter.read_pfc(&n.egress, *port, now),
                    Some(n) => counter.read_bfc(&n.egress.shared, *port),
                    None => 0,
                },
                t => t.read(flows),
            };
            self.values.push(v);
        }
    }

    /// The samples of column `name` as (time ps, value).
    pub fn series(&self, name: &str) -> Option<Vec<(u64, u64)>> {
        let c = self.names.iter().position(|n| n == name)?;
        let w = self.names.len();
        Some(
            self.times
                .iter()
                .enumerate()
                .map(|(r, &t)| (t, self.values[r * w + c]))
                .collect(),
        )
    }

    /// CSV: `time_ps` then one column per probe.
    pub fn csv(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("time_ps");
        for n in &self.names {
            s.push(',');
            s.push_str(n);
        }
        s.push('\n');
        let w = self.names.len();
        for (r, t) in self.times.iter().enumerate() {
            let _ = write!(s, "{t}");
            for v in &self.values[r * w..(r + 1) * w] {
                let _ = write!(s, ",{v}");
            }
            s.push('\n');
        }
        s
    }
}

//! Time-series probes: switch counters (per port or queue) and flow counters sampled at a
//! fixed virtual interval, written as CSV for tests and plots.

use super::flow::FlowLog;
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
}

/// Port counters a probe can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortCounter {
    RxPkts,
    RxBytes,
    TxPkts,
    TxBytes,
    Drops,
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

    pub(crate) fn sample(&mut self, now: u64, flows: &FlowLog) {
        self.times.push(now);
        for t in &self.targets {
            self.values.push(t.read(flows));
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

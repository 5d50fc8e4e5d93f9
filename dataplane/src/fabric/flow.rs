//! Per-flow records kept by the host models: what each source sent and what each sink
//! received (one-way delay of every packet, loss, reordering, completion time).

use crate::units::WIRE_OVERHEAD;
use serde::Serialize;

/// Everything known about one flow.
#[derive(Debug, Clone, Default)]
pub struct FlowRecord {
    pub name: String,
    pub src: String,
    pub dst: String,
    pub prio: u8,
    /// Actual start time (configured start + seeded jitter), ps.
    pub start_ps: u64,
    /// Bytes the flow sends in total, if sized.
    pub size_bytes: Option<u64>,
    /// Packets the flow sends in total, if sized.
    pub total_pkts: Option<u64>,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// Send slots skipped because the NIC queue (or the frame arena) was full.
    pub blocked: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    /// Received bits on the wire (frame + 20 B preamble/IFG each).
    pub rx_wire_bits: u64,
    /// Wire bits of the first received packet (excluded from the throughput).
    pub first_wire_bits: u64,
    pub first_rx_ps: Option<u64>,
    pub last_rx_ps: Option<u64>,
    /// Highest sequence number received + 1.
    pub next_seq: u64,
    /// Packets that arrived after a higher sequence number had.
    pub reordered: u64,
    /// When the last packet of a sized flow arrived (all of them arrived).
    pub completed_ps: Option<u64>,
    pub delay_min_ps: u64,
    pub delay_max_ps: u64,
    pub delay_sum_ps: u128,
    /// One-way delay of each received packet in arrival order (up to the sample cap).
    pub delays_ps: Vec<u64>,
    /// A transport flow of the host stack with this congestion control (`[[flow]] cc`):
    /// `size_bytes` counts application bytes, the packet counters count data frames
    /// (retransmissions and duplicates included).
    pub cc: Option<crate::host::cc::CcKind>,
}

impl FlowRecord {
    /// Receive throughput in wire bits per second (frames + preamble/IFG, so a flow alone at
    /// line rate measures exactly the line rate): bits after the first packet over the time
    /// from the first to the last arrival.
    pub fn throughput_bps(&self) -> f64 {
        match (self.first_rx_ps, self.last_rx_ps) {
            (Some(a), Some(b)) if b > a => {
                (self.rx_wire_bits - self.first_wire_bits) as f64 * 1e12 / (b - a) as f64
            }
            _ => 0.0,
        }
    }

    /// Flow completion time: last arrival of a sized flow minus its start.
    pub fn fct_ps(&self) -> Option<u64> {
        self.completed_ps.map(|c| c - self.start_ps)
    }

    /// Sent but never received (exact once the network has drained).
    pub fn lost(&self) -> u64 {
        self.tx_pkts.saturating_sub(self.rx_pkts)
    }

    /// Percentile `p` (0..=100) of the recorded one-way delays.
    pub fn delay_percentile(&self, p: f64) -> Option<u64> {
        if self.delays_ps.is_empty() {
            return None;
        }
        let mut v = self.delays_ps.clone();
        v.sort_unstable();
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v.get(i.min(v.len() - 1)).copied()
    }
}

/// The records of all flows, indexed by flow id (the id carried in every data packet).
#[derive(Debug, Clone, Default)]
pub struct FlowLog {
    pub flows: Vec<FlowRecord>,
    /// Frames hosts received that carried no (known) flow header.
    pub unknown_rx: u64,
    sample_cap: usize,
}

impl FlowLog {
    pub fn new(flows: Vec<FlowRecord>, sample_cap: usize) -> Self {
        FlowLog {
            flows,
            unknown_rx: 0,
            sample_cap,
        }
    }

    /// A source put a packet of `len` bytes on its NIC.
    #[inline]
    pub fn record_tx(&mut self, flow: u32, len: u32) {
        if let Some(r) = self.flows.get_mut(flow as usize) {
            r.tx_pkts += 1;
            r.tx_bytes += u64::from(len);
        }
    }

    /// A source could not send (NIC queue or arena full).
    #[inline]
    pub fn record_blocked(&mut self, flow: u32) {
        if let Some(r) = self.flows.get_mut(flow as usize) {
            r.blocked += 1;
        }
    }

    /// A sink received packet `seq` of `flow`, sent at `sent_ps`, at `now`.
    #[inline]
    pub fn record_rx(&mut self, flow: u32, seq: u64, sent_ps: u64, len: u32, now: u64) {
        let Some(r) = self.flows.get_mut(flow as usize) else {
            self.unknown_rx += 1;
            return;
        };
        let bits = (u64::from(len) + WIRE_OVERHEAD) * 8;
        if r.first_rx_ps.is_none() {
            r.first_rx_ps = Some(now);
            r.first_wire_bits = bits;
        }
        r.last_rx_ps = Some(now);
        r.rx_pkts += 1;
        r.rx_bytes += u64::from(len);
        r.rx_wire_bits += bits;
        let d = now.saturating_sub(sent_ps);
        if r.rx_pkts == 1 || d < r.delay_min_ps {
            r.delay_min_ps = d;
        }
        r.delay_max_ps = r.delay_max_ps.max(d);
        r.delay_sum_ps += u128::from(d);
        if r.delays_ps.len() < self.sample_cap {
            r.delays_ps.push(d);
        }
        if seq < r.next_seq {
            r.reordered += 1;
        } else {
            r.next_seq = seq + 1;
        }
        if r.total_pkts == Some(r.rx_pkts) {
            r.completed_ps = Some(now);
        }
    }

    /// The flow named `name`.
    pub fn by_name(&self, name: &str) -> Option<&FlowRecord> {
        self.flows.iter().find(|f| f.name == name)
    }
}

/// One flow in a report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowReport {
    pub name: String,
    pub src: String,
    pub dst: String,
    pub prio: u8,
    pub start_ps: u64,
    pub size_bytes: Option<u64>,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub blocked: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    /// Receive throughput in wire bits (see [`FlowRecord::throughput_bps`]), Gbit/s.
    pub throughput_gbps: f64,
    pub first_rx_ps: Option<u64>,
    pub last_rx_ps: Option<u64>,
    pub fct_ps: Option<u64>,
    pub delay_ps: DelayReport,
    /// Host-stack flows only (absent otherwise, so reports of UDP-like flows are unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<CcFlowReport>,
}

/// What the host stack knows of a `cc` flow. The flow's `fct_ps` is the sender's: from the
/// start to the cumulative ACK of its last packet (as `xoff experiment` measures it), and its
/// `reordered` the receiver's holes filled by the original packet (not retransmissions).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CcFlowReport {
    pub cc: crate::host::cc::CcKind,
    /// Data packets of the flow (its size in full-MSS frames).
    pub pkts: u64,
    /// Data packets sent again (go-back-N after a timeout).
    pub retx: u64,
    pub timeouts: u64,
    /// Packets lost in the network (holes not filled by the original) and duplicates, as
    /// the receiver counted them.
    pub lost: u64,
    pub duplicates: u64,
    /// Smoothed and largest RTT the sender measured, ps (0: no sample).
    pub srtt_ps: u64,
    pub max_rtt_ps: u64,
    /// Whether the last byte was acknowledged.
    pub completed: bool,
}

/// One-way delay summary.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct DelayReport {
    pub min: u64,
    pub mean: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl From<&FlowRecord> for FlowReport {
    fn from(r: &FlowRecord) -> Self {
        let delay = if r.rx_pkts == 0 {
            DelayReport::default()
        } else {
            DelayReport {
                min: r.delay_min_ps,
                mean: (r.delay_sum_ps / u128::from(r.rx_pkts)) as u64,
                p50: r.delay_percentile(50.0).unwrap_or(0),
                p99: r.delay_percentile(99.0).unwrap_or(0),
                max: r.delay_max_ps,
            }
        };
        FlowReport {
            name: r.name.clone(),
            src: r.src.clone(),
            dst: r.dst.clone(),
            prio: r.prio,
            start_ps: r.start_ps,
            size_bytes: r.size_bytes,
            tx_pkts: r.tx_pkts,
            tx_bytes: r.tx_bytes,
            blocked: r.blocked,
            rx_pkts: r.rx_pkts,
            rx_bytes: r.rx_bytes,
            lost: r.lost(),
            reordered: r.reordered,
            throughput_gbps: r.throughput_bps() / 1e9,
            first_rx_ps: r.first_rx_ps,
            last_rx_ps: r.last_rx_ps,
            fct_ps: r.fct_ps(),
            delay_ps: delay,
            cc: None,
        }
    }
}

//! Host results: per-flow sender and receiver records, their merge into one row per flow with
//! FCT and slowdown, and the summary (FCT slowdown by size bucket, throughput, loss,
//! reordering).
//!
//! FCT is measured at the sender, from the flow's scheduled start to the cumulative ACK of its
//! last packet. The ideal FCT is the base RTT (of a full frame and its ACK) plus the
//! serialization of the flow's other frames at line rate ([`ideal_fct_ps`]); slowdown =
//! FCT / ideal.

use super::FRAME_OVERHEAD;
use crate::units::ser_ps;
use serde::{Deserialize, Serialize};

/// What the sender knows about one flow.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TxRecord {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub prio: u8,
    pub start_ps: u64,
    pub first_tx_ps: Option<u64>,
    /// When the last packet was acknowledged.
    pub done_ps: Option<u64>,
    pub tx_pkts: u64,
    pub retx: u64,
    pub timeouts: u64,
    pub acks_rx: u64,
    /// Largest RTT an ACK echoed (its data packet's `sent_ps` to its arrival), any packet.
    #[serde(default)]
    pub max_rtt_ps: u64,
    /// Longest the retransmission timer ran with data outstanding and no ACK progress (at
    /// each progress or timeout; paused time excluded): how close the flow came to its RTO.
    #[serde(default)]
    pub max_stall_ps: u64,
    /// SRTT at the end (0: no RTT sample was taken).
    #[serde(default)]
    pub srtt_ps: u64,
    /// RTO at the end, and the largest it was (backoff included).
    #[serde(default)]
    pub rto_ps: u64,
    #[serde(default)]
    pub max_rto_ps: u64,
    /// Time the flow's retransmission timer was frozen because the flow was paused.
    #[serde(default)]
    pub paused_ps: u64,
}

/// What the receiver knows about one flow.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RxRecord {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub pkts: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub first_ps: u64,
    pub last_ps: u64,
    pub complete_ps: Option<u64>,
    /// Sequence numbers skipped when a higher one arrived first.
    pub gaps: u64,
    /// Holes later filled by the original packet (reordering, not loss).
    pub reordered: u64,
    /// Holes filled by a retransmission.
    pub recovered: u64,
    pub duplicates: u64,
}

impl RxRecord {
    /// Packets lost in the network: holes not filled by their original packet.
    pub fn lost(&self) -> u64 {
        self.gaps.saturating_sub(self.reordered)
    }
}

/// Serialization of a whole flow's frames at `rate_bps` with `mss`-byte payloads.
pub fn flow_ser_ps(size: u64, mss: u32, rate_bps: u64) -> u64 {
    let mss = u64::from(mss.max(1));
    let full = size / mss;
    let rest = size % mss;
    let per = ser_ps(u64::from(FRAME_OVERHEAD) + mss, rate_bps);
    let mut t = full * per;
    if rest > 0 || size == 0 {
        t += ser_ps(u64::from(FRAME_OVERHEAD) + rest, rate_bps);
    }
    t
}

/// Ideal FCT: the first frame is acknowledged one base RTT after it starts (the base RTT
/// includes its serialization), the others follow back to back at line rate.
pub fn ideal_fct_ps(size: u64, mss: u32, rate_bps: u64, base_rtt_ps: u64) -> u64 {
    let first = ser_ps(
        u64::from(FRAME_OVERHEAD) + size.min(u64::from(mss)),
        rate_bps,
    );
    base_rtt_ps + flow_ser_ps(size, mss, rate_bps) - first
}

/// One flow, sender and receiver views merged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowResult {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub prio: u8,
    pub start_ps: u64,
    pub fct_ps: Option<u64>,
    pub ideal_ps: u64,
    pub slowdown: Option<f64>,
    pub tx_pkts: u64,
    pub retx: u64,
    pub timeouts: u64,
    pub rx_pkts: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub completed: bool,
    /// From the flow's start to its first frame leaving the sender's NIC: the part of the FCT
    /// spent at the sender (behind its other flows, or a pause of its NIC queue or priority).
    #[serde(default)]
    pub nic_wait_ps: Option<u64>,
}

/// Merges sender and receiver records by flow id.
pub fn merge(
    tx: &[TxRecord],
    rx: &[RxRecord],
    mss: u32,
    rate_bps: u64,
    base_rtt_ps: u64,
) -> Vec<FlowResult> {
    let rxm: std::collections::BTreeMap<u32, &RxRecord> = rx.iter().map(|r| (r.id, r)).collect();
    let mut out: Vec<FlowResult> = tx
        .iter()
        .map(|t| {
            let r = rxm.get(&t.id);
            let fct = t.done_ps.map(|d| d.saturating_sub(t.start_ps));
            let ideal = ideal_fct_ps(t.size, mss, rate_bps, base_rtt_ps);
            FlowResult {
                id: t.id,
                src: t.src,
                dst: t.dst,
                size: t.size,
                prio: t.prio,
                start_ps: t.start_ps,
                fct_ps: fct,
                ideal_ps: ideal,
                slowdown: fct.map(|f| f as f64 / ideal.max(1) as f64),
                tx_pkts: t.tx_pkts,
                retx: t.retx,
                timeouts: t.timeouts,
                rx_pkts: r.map_or(0, |r| r.rx_pkts),
                lost: r.map_or(0, |r| r.lost()),
                reordered: r.map_or(0, |r| r.reordered),
                duplicates: r.map_or(0, |r| r.duplicates),
                completed: t.done_ps.is_some(),
                nic_wait_ps: t.first_tx_ps.map(|x| x.saturating_sub(t.start_ps)),
            }
        })
        .collect();
    out.sort_by_key(|f| f.id);
    out
}

/// Per-flow CSV.
pub fn flows_csv(flows: &[FlowResult]) -> String {
    let mut s = String::from(
        "id,src,dst,size,prio,start_ps,fct_ps,ideal_ps,slowdown,tx_pkts,retx,timeouts,rx_pkts,lost,reordered,duplicates,completed,nic_wait_ps\n",
    );
    for f in flows {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            f.id,
            f.src,
            f.dst,
            f.size,
            f.prio,
            f.start_ps,
            f.fct_ps.map_or(String::new(), |x| x.to_string()),
            f.ideal_ps,
            f.slowdown.map_or(String::new(), |x| format!("{x:.4}")),
            f.tx_pkts,
            f.retx,
            f.timeouts,
            f.rx_pkts,
            f.lost,
            f.reordered,
            f.duplicates,
            f.completed,
            f.nic_wait_ps.map_or(String::new(), |x| x.to_string())
        ));
    }
    s
}

/// Slowdown statistics of a set of flows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Slowdown {
    pub flows: usize,
    pub avg: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Slowdown {
    pub fn of(mut v: Vec<f64>) -> Slowdown {
        if v.is_empty() {
            return Slowdown::default();
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
        Slowdown {
            flows: v.len(),
            avg: v.iter().sum::<f64>() / v.len() as f64,
            p50: q(0.50),
            p95: q(0.95),
            p99: q(0.99),
        }
    }
}

/// Slowdown of the flows in one size bucket.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bucket {
    /// Sizes in (lo, hi] bytes.
    pub lo: u64,
    pub hi: u64,
    pub slowdown: Slowdown,
}

/// Upper edges of the size buckets (bytes).
pub const BUCKETS: [u64; 6] = [
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    u64::MAX,
];

/// The summary of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub flows: usize,
    pub completed: usize,
    pub slowdown: Slowdown,
    pub buckets: Vec<Bucket>,
    /// Completed flow bytes over the run time, Gbit/s.
    pub goodput_gbps: f64,
    pub tx_pkts: u64,
    pub rx_pkts: u64,
    pub lost: u64,
    pub retx: u64,
    pub timeouts: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

/// Summarizes flows over a run of `run_ps`.
pub fn summarize(flows: &[FlowResult], run_ps: u64) -> Summary {
    let sd = |f: &FlowResult| f.slowdown;
    let mut buckets = Vec::new();
    let mut lo = 0;
    for &hi in &BUCKETS {
        let v: Vec<f64> = flows
            .iter()
            .filter(|f| f.size > lo && f.size <= hi)
            .filter_map(sd)
            .collect();
        if !v.is_empty() {
            buckets.push(Bucket {
                lo,
                hi,
                slowdown: Slowdown::of(v),
            });
        }
        lo = hi;
    }
    let done_bytes: u64 = flows.iter().filter(|f| f.completed).map(|f| f.size).sum();
    Summary {
        flows: flows.len(),
        completed: flows.iter().filter(|f| f.completed).count(),
        slowdown: Slowdown::of(flows.iter().filter_map(sd).collect()),
        buckets,
        goodput_gbps: if run_ps > 0 {
            done_bytes as f64 * 8.0 / (run_ps as f64 / 1e12) / 1e9
        } else {
            0.0
        },
        tx_pkts: flows.iter().map(|f| f.tx_pkts).sum(),
        rx_pkts: flows.iter().map(|f| f.rx_pkts).sum(),
        lost: flows.iter().map(|f| f.lost).sum(),
        retx: flows.iter().map(|f| f.retx).sum(),
        timeouts: flows.iter().map(|f| f.timeouts).sum(),
        reordered: flows.iter().map(|f| f.reordered).sum(),
        duplicates: flows.iter().map(|f| f.duplicates).sum(),
    }
}

/// Base RTT of a path given its links one way as (rate bit/s, delay ps): propagation both ways
/// plus, per link, one full data frame one way and one ACK frame back (store and forward).
pub fn base_rtt_ps(links: &[(u64, u64)], mss: u32) -> u64 {
    links
        .iter()
        .map(|&(rate, delay)| {
            2 * delay
                + ser_ps(u64::from(FRAME_OVERHEAD + mss), rate)
                + ser_ps(u64::from(FRAME_OVERHEAD), rate)
        })
        .sum()
}

//! End hosts that behave like the NICs of the papers: a sender with a per-flow in-flight cap,
//! cumulative ACKs and go-back-N retransmission on timeout, a receiver that tracks sequence
//! numbers (loss, duplicates, reordering) and ACKs every packet, per-priority NIC queues with
//! flows assigned to them as they start and released when they complete, and PFC honoured per
//! priority (quanta timers).
//!
//! [`HostStack`] is pure: the caller passes the time in (ps) and moves frames. Two drivers run
//! it: [`fabric::StackHost`], a [`crate::fabric::HostModel`] in the virtual-time fabric, and
//! `xoff host` (tools/src/host.rs) on an AF_XDP port in a testbed namespace, with the
//! monotonic clock. One implementation, two clocks.
//!
//! The stack paces its own transmissions at the NIC rate, so frames wait in its per-priority
//! queues (where a pause holds them), not in a FIFO behind a paused frame.
//!
//! Not yet: Xoff signal frames per NIC queue (BFC upstreamQ, Aquarius, Pyrrha) and the Xoff
//! data shim toward switches that expect it; the schemes are not implemented in the switch.

pub mod fabric;
pub mod report;
pub mod wire;

use crate::units::ser_ps;
use crate::workload::FlowSpec;
use report::{RxRecord, TxRecord};
use std::collections::{BTreeMap, VecDeque};
pub use wire::{Header, FRAME_OVERHEAD, HEADER_LEN};

/// Host stack parameters.
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// This host's index in the schedule's host list.
    pub host: u32,
    /// NIC rate the stack paces at, bit/s.
    pub rate_bps: u64,
    /// Payload bytes per data packet (frame = [`FRAME_OVERHEAD`] + payload).
    pub mss: u32,
    /// Per-flow cap on bytes in flight (1 BDP by default).
    pub window_bytes: u64,
    /// Retransmission timeout, ps.
    pub rto_ps: u64,
    /// Priority of ACKs (`None`: the flow's own).
    pub ack_prio: Option<u8>,
    /// Pause priorities on received PFC frames.
    pub honor_pfc: bool,
    /// How far in the past a late real-time driver may start a frame (ps); 0 in virtual time.
    pub max_lag_ps: u64,
}

impl StackConfig {
    /// Defaults: 1500-byte frames, window = `bdp_bytes`, RTO = max(1 ms, 4 × base RTT).
    pub fn new(host: u32, rate_bps: u64, base_rtt_ps: u64) -> Self {
        let bdp = (u128::from(rate_bps) * u128::from(base_rtt_ps) / 8 / 1_000_000_000_000) as u64;
        StackConfig {
            host,
            rate_bps,
            mss: 1500 - FRAME_OVERHEAD,
            window_bytes: bdp.max(u64::from(1500 - FRAME_OVERHEAD)),
            rto_ps: (4 * base_rtt_ps).max(1_000_000_000),
            ack_prio: None,
            honor_pfc: true,
            max_lag_ps: 0,
        }
    }
}

/// A frame the driver must build and send: to host `dst`, with header `hdr` and `payload`
/// zero bytes after it; frame length = [`FRAME_OVERHEAD`] + `payload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub dst: u32,
    pub prio: u8,
    pub hdr: Header,
    pub payload: u32,
}

impl Segment {
    pub fn frame_len(&self) -> u32 {
        FRAME_OVERHEAD + self.payload
    }
}

#[derive(Debug, Clone)]
struct TxFlow {
    spec: FlowSpec,
    pkts: u64,
    una: u64,
    nxt: u64,
    /// Highest sequence number sent + 1 (anything below it that is sent again is a RETX).
    high: u64,
    last_progress: u64,
    rec: TxRecord,
}

#[derive(Debug, Clone, Default)]
struct RxFlow {
    expected: u64,
    /// Received above `expected` (out of order).
    ooo: std::collections::BTreeSet<u64>,
    /// Highest sequence number seen + 1.
    high: u64,
    rec: RxRecord,
}

/// Counters of the stack itself.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct StackCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub pfc_rx: u64,
    /// Frames that were neither PFC nor host-stack frames.
    pub rx_other: u64,
    pub acks_tx: u64,
    pub timeouts: u64,
}

/// One host's sender and receiver.
#[derive(Debug)]
pub struct HostStack {
    pub cfg: StackConfig,
    /// Flows this host sends, in start order, not yet started.
    pending: VecDeque<FlowSpec>,
    tx: Vec<TxFlow>,
    tx_index: BTreeMap<u32, usize>,
    /// Per NIC queue (= priority): started flows with data left, round robin.
    queues: [VecDeque<usize>; 8],
    rr: usize,
    acks: VecDeque<Segment>,
    rx: BTreeMap<u32, RxFlow>,
    /// Per priority: paused until (ps).
    pub paused_until: [u64; 8],
    tx_free_at: u64,
    window_pkts: u64,
    pub counters: StackCounters,
}

impl HostStack {
    /// A stack for `cfg.host` that sends its flows of `schedule` (others are ignored).
    pub fn new(cfg: StackConfig, schedule: &[FlowSpec]) -> Self {
        let mut mine: Vec<FlowSpec> = schedule
            .iter()
            .filter(|f| f.src == cfg.host)
            .copied()
            .collect();
        mine.sort_by_key(|f| (f.start_ps, f.id));
        let window_pkts = cfg.window_bytes.div_ceil(u64::from(cfg.mss.max(1))).max(1);
        HostStack {
            pending: mine.into(),
            tx: Vec::new(),
            tx_index: BTreeMap::new(),
            queues: Default::default(),
            rr: 0,
            acks: VecDeque::new(),
            rx: BTreeMap::new(),
            paused_until: [0; 8],
            tx_free_at: 0,
            window_pkts,
            counters: StackCounters::default(),
            cfg,
        }
    }

    fn paused(&self, prio: u8, now: u64) -> bool {
        self.paused_until[usize::from(prio & 7)] > now
    }

    /// Applies a received MAC control frame (PFC: per class; 802.3x PAUSE: all classes).
    /// Returns whether it was one.
    pub fn on_pfc(&mut self, now: u64, frame: &[u8]) -> bool {
        use flowctl::wire::pfc::{quanta_to_ps, Frame, PauseRepr, PfcRepr};
        let Ok(f) = Frame::new_checked(frame) else {
            return false;
        };
        let (mask, quanta) = if let Ok(r) = PfcRepr::parse(&f) {
            (r.class_enable, r.quanta)
        } else if let Ok(p) = PauseRepr::parse(&f) {
            (0xff, [p.quanta; 8])
        } else {
            return false;
        };
        self.counters.pfc_rx += 1;
        if !self.cfg.honor_pfc {
            return true;
        }
        for (c, (until, &q)) in self.paused_until.iter_mut().zip(&quanta).enumerate() {
            if mask & (1 << c) != 0 {
                *until = match q {
                    0 => 0,
                    q => now.saturating_add(quanta_to_ps(q, self.cfg.rate_bps)),
                };
            }
        }
        true
    }

    /// Handles a received host-stack frame of `len` bytes.
    pub fn on_frame(&mut self, now: u64, h: &Header, len: u32) {
        self.counters.rx_frames += 1;
        if h.is_ack() {
            self.on_ack(now, h);
        } else {
            self.on_data(now, h, len);
        }
    }

    fn on_ack(&mut self, now: u64, h: &Header) {
        let Some(&i) = self.tx_index.get(&h.flow) else {
            return;
        };
        let f = &mut self.tx[i];
        f.rec.acks_rx += 1;
        if h.ack > f.una {
            f.una = h.ack.min(f.pkts);
            f.last_progress = now;
            if f.nxt < f.una {
                f.nxt = f.una;
            }
            if f.una >= f.pkts && f.rec.done_ps.is_none() {
                f.rec.done_ps = Some(now);
            }
        }
    }

    fn on_data(&mut self, now: u64, h: &Header, len: u32) {
        let mss = u64::from(self.cfg.mss);
        let r = self.rx.entry(h.flow).or_insert_with(|| RxFlow {
            rec: RxRecord {
                id: h.flow,
                src: u32::from(h.src_host),
                dst: self.cfg.host,
                size: h.size,
                pkts: h.size.div_ceil(mss).max(1),
                first_ps: now,
                ..RxRecord::default()
            },
            ..RxFlow::default()
        });
        let rec = &mut r.rec;
        rec.rx_pkts += 1;
        rec.rx_bytes += u64::from(len);
        rec.last_ps = now;
        let s = h.seq;
        if s < r.expected || r.ooo.contains(&s) {
            rec.duplicates += 1;
        } else {
            if s > r.high {
                rec.gaps += s - r.high;
            } else if s < r.high {
                // Fills a hole: reordering if the original, recovery if a retransmission.
                if h.flags & wire::FLAG_RETX != 0 {
                    rec.recovered += 1;
                } else {
                    rec.reordered += 1;
                }
            }
            if s == r.expected {
                r.expected += 1;
                while r.ooo.remove(&r.expected) {
                    r.expected += 1;
                }
            } else {
                r.ooo.insert(s);
            }
            if r.expected >= rec.pkts && rec.complete_ps.is_none() {
                rec.complete_ps = Some(now);
            }
        }
        r.high = r.high.max(s + 1);
        let prio = self.cfg.ack_prio.unwrap_or(h.prio) & 7;
        self.acks.push_back(Segment {
            dst: u32::from(h.src_host),
            prio,
            hdr: Header {
                flow: h.flow,
                seq: r.expected,
                sent_ps: h.sent_ps,
                flags: wire::FLAG_ACK,
                prio,
                src_host: self.cfg.host as u16,
                size: h.size,
                ack: r.expected,
            },
            payload: 0,
        });
    }

    /// Starts flows that are due and fires retransmission timeouts.
    pub fn on_tick(&mut self, now: u64) {
        while self.pending.front().is_some_and(|f| f.start_ps <= now) {
            let Some(spec) = self.pending.pop_front() else {
                break;
            };
            let i = self.tx.len();
            let pkts = spec.size.div_ceil(u64::from(self.cfg.mss)).max(1);
            self.tx.push(TxFlow {
                spec,
                pkts,
                una: 0,
                nxt: 0,
                high: 0,
                last_progress: now,
                rec: TxRecord {
                    id: spec.id,
                    src: spec.src,
                    dst: spec.dst,
                    size: spec.size,
                    prio: spec.prio,
                    start_ps: spec.start_ps,
                    ..TxRecord::default()
                },
            });
            self.tx_index.insert(spec.id, i);
            self.queues[usize::from(spec.prio & 7)].push_back(i);
        }
        let rto = self.cfg.rto_ps;
        for q in &self.queues {
            for &i in q {
                let f = &mut self.tx[i];
                if f.una < f.nxt && now.saturating_sub(f.last_progress) >= rto {
                    f.nxt = f.una;
                    f.last_progress = now;
                    f.rec.timeouts += 1;
                    self.counters.timeouts += 1;
                }
            }
        }
    }

    /// The next frame to send at `now`, if the pacer and the pauses allow one.
    pub fn poll_send(&mut self, now: u64) -> Option<Segment> {
        if now.saturating_add(self.cfg.max_lag_ps) < self.tx_free_at {
            return None;
        }
        let seg = self.pick(now)?;
        let start = self.tx_free_at.max(now.saturating_sub(self.cfg.max_lag_ps));
        self.tx_free_at = start + ser_ps(u64::from(seg.frame_len()), self.cfg.rate_bps);
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += u64::from(seg.frame_len());
        Some(seg)
    }

    fn pick(&mut self, now: u64) -> Option<Segment> {
        if let Some(a) = self.acks.front() {
            if !self.paused(a.prio, now) {
                self.counters.acks_tx += 1;
                return self.acks.pop_front();
            }
        }
        for k in 0..8 {
            let c = (self.rr + k) % 8;
            if self.queues[c].is_empty() || self.paused(c as u8, now) {
                continue;
            }
            let n = self.queues[c].len();
            for _ in 0..n {
                let Some(i) = self.queues[c].pop_front() else {
                    break;
                };
                let f = &mut self.tx[i];
                if f.una >= f.pkts {
                    continue; // done: leaves its queue
                }
                self.queues[c].push_back(i);
                if f.nxt >= f.pkts || f.nxt - f.una >= self.window_pkts {
                    continue;
                }
                let seq = f.nxt;
                f.nxt += 1;
                let retx = seq < f.high;
                f.high = f.high.max(f.nxt);
                let mss = u64::from(self.cfg.mss);
                let payload = (f.spec.size - (seq * mss).min(f.spec.size)).min(mss) as u32;
                f.rec.tx_pkts += 1;
                if retx {
                    f.rec.retx += 1;
                }
                if f.rec.first_tx_ps.is_none() {
                    f.rec.first_tx_ps = Some(now);
                }
                self.rr = (c + 1) % 8;
                return Some(Segment {
                    dst: f.spec.dst,
                    prio: f.spec.prio,
                    hdr: Header {
                        flow: f.spec.id,
                        seq,
                        sent_ps: now,
                        flags: wire::FLAG_DATA | if retx { wire::FLAG_RETX } else { 0 },
                        prio: f.spec.prio,
                        src_host: self.cfg.host as u16,
                        size: f.spec.size,
                        ack: 0,
                    },
                    payload,
                });
            }
        }
        None
    }

    /// Whether anything could be sent if the pacer and pauses allowed.
    fn has_work(&self) -> bool {
        !self.acks.is_empty()
            || self.queues.iter().any(|q| {
                q.iter().any(|&i| {
                    let f = &self.tx[i];
                    f.una < f.pkts && f.nxt < f.pkts && f.nxt - f.una < self.window_pkts
                })
            })
    }

    /// When the stack next needs `on_tick`/`poll_send`, after `now` (None: only on receive).
    pub fn next_wakeup(&self, now: u64) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut upd = |x: u64| t = Some(t.map_or(x, |y: u64| y.min(x)));
        if let Some(f) = self.pending.front() {
            upd(f.start_ps);
        }
        if self.has_work() {
            let mut ready = self.tx_free_at.saturating_sub(self.cfg.max_lag_ps);
            // If everything that has work is paused, wait for the earliest pause to lapse.
            let blocked = self.acks.front().is_none_or(|a| self.paused(a.prio, now))
                && (0..8).all(|c| self.queues[c].is_empty() || self.paused(c as u8, now));
            if blocked {
                let lapse = (0..8)
                    .filter(|&c| self.paused(c as u8, now))
                    .map(|c| self.paused_until[c])
                    .min();
                if let Some(l) = lapse {
                    ready = ready.max(l);
                }
            }
            upd(ready);
        }
        for q in &self.queues {
            for &i in q {
                let f = &self.tx[i];
                if f.una < f.nxt {
                    upd(f.last_progress.saturating_add(self.cfg.rto_ps));
                }
            }
        }
        t.map(|x| x.max(now.saturating_add(1)))
    }

    /// Whether every flow of this host has started and been fully acknowledged.
    pub fn sender_done(&self) -> bool {
        self.pending.is_empty() && self.tx.iter().all(|f| f.una >= f.pkts)
    }

    /// Per-flow sender records (flows started so far, by id).
    pub fn tx_records(&self) -> Vec<TxRecord> {
        let mut v: Vec<TxRecord> = self.tx.iter().map(|f| f.rec.clone()).collect();
        v.sort_by_key(|r| r.id);
        v
    }

    /// Per-flow receiver records (by id).
    pub fn rx_records(&self) -> Vec<RxRecord> {
        self.rx.values().map(|r| r.rec.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: u32, size: u64) -> FlowSpec {
        FlowSpec {
            id,
            src: 0,
            dst: 1,
            size,
            start_ps: 0,
            prio: 3,
        }
    }

    /// Everything `s` sends over the next 50 frame times (no `on_tick`, so no timeouts).
    fn drain(s: &mut HostStack, t: &mut u64) -> Vec<Segment> {
        let mut v = Vec::new();
        for _ in 0..50 {
            *t += 10_000_000;
            v.extend(s.poll_send(*t));
        }
        v
    }

    #[test]
    fn window_acks_and_retransmission() {
        let mut cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        cfg.window_bytes = 4 * u64::from(cfg.mss);
        let mut a = HostStack::new(cfg.clone(), &[flow(7, 20 * u64::from(cfg.mss))]);
        let mut b = HostStack::new(StackConfig { host: 1, ..cfg }, &[]);
        a.on_tick(0);
        let mut t = 0;
        let sent = drain(&mut a, &mut t);
        assert_eq!(sent.len(), 4, "window caps in-flight packets");
        // Lose packet 1; deliver the others.
        for s in sent.iter().filter(|s| s.hdr.seq != 1) {
            b.on_frame(1, &s.hdr, s.frame_len());
        }
        let acks = drain(&mut b, &mut t);
        assert_eq!(acks.len(), 3);
        assert!(acks.iter().all(|a| a.hdr.ack == 1));
        for s in &acks {
            a.on_frame(2, &s.hdr, s.frame_len());
        }
        // Timeout: go back to 1.
        t += a.cfg.rto_ps;
        a.on_tick(t);
        let s = drain(&mut a, &mut t)[0];
        assert_eq!(
            (s.hdr.seq, s.hdr.flags & wire::FLAG_RETX),
            (1, wire::FLAG_RETX)
        );
        b.on_frame(3, &s.hdr, s.frame_len());
        let r = &b.rx_records()[0];
        assert_eq!((r.gaps, r.recovered, r.reordered, r.lost()), (1, 1, 0, 1));
        let ack = *drain(&mut b, &mut t).last().unwrap();
        assert_eq!(ack.hdr.ack, 4);
    }

    #[test]
    fn pfc_pauses_a_priority() {
        let cfg = StackConfig::new(0, 10_000_000_000, 10_000_000);
        let mut a = HostStack::new(cfg, &[flow(1, 100_000)]);
        a.on_tick(0);
        let mut f = [0u8; 60];
        let r = flowctl::wire::pfc::PfcRepr {
            src_addr: [2, 0, 0, 0, 0, 9],
            class_enable: 8,
            quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0],
        };
        r.emit(&mut flowctl::wire::pfc::Frame::new_unchecked(&mut f[..]));
        assert!(a.on_pfc(0, &f));
        assert_eq!(a.poll_send(1), None);
        let lapse = a.next_wakeup(1).unwrap();
        assert!(lapse >= flowctl::wire::pfc::quanta_to_ps(0xffff, 10_000_000_000));
        assert!(a.poll_send(lapse).is_some());
    }
}

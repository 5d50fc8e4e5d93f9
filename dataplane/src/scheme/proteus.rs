//! Proteus (issue 18; `loadbal::proteus`, Proteus paper §III–IV) as a scheme: the adapter
//! between the pipeline and the decision module.
//!
//! - Ingress: pop the data shim version 2 (`flowctl::wire::proteus`) into the packet's
//!   metadata.
//! - Forward ([`ProteusScheme::route`], called where the path policy picks among equal-cost
//!   next hops): at the source edge a packet without a shim runs Algorithm 1 for its
//!   destination edge and gets a shim (path, 3 alternatives, `t_td`; the queue ahead on each
//!   uplink here counts in its path's delay, and the bytes this edge sent on it over the last
//!   period break ties among equal paths); at every
//!   switch the shim's path names the egress (source routing from the path model,
//!   `crate::config::paths`), and Algorithm 2 may move the packet to the next alternative when
//!   that egress is PFC-paused and `t_td ≤ t_qd`; at the destination edge the packet feeds the
//!   path's meter and leaves by the switch's own route.
//! - Egress: `t_td` loses the sojourn time here (CST), and the shim is pushed again toward a
//!   peer that runs Proteus (never toward hosts). At the source edge the packet's departure is
//!   its flow's `t_pre` (Algorithm 1's order rule, §IV-A "the last forwarded packet") and the
//!   shim's send time, so `t_pd` is measured from there; until then the send-time bits name the
//!   flow table entry. A flow with a packet still queued here is not moved, by Algorithm 1 or
//!   by Algorithm 2 (issue 18: moving it overtook that packet).
//! - Feedback: the destination edge closes its meters every base RTT and sends each source edge
//!   a feedback signal (0x88B5 type 0x30), relayed hop by hop toward it; the source edge feeds
//!   the path tables. With each path's measurement goes its arrival frontier (the send time of
//!   its latest arrival), which Algorithm 1's order rule needs (issue 18). This is the paper's "periodic feedback frame" way; the measurement does
//!   not ride on reverse data traffic (the fabric's flows are one way).
//! - A path kicked out by Algorithm 2 is active again as soon as its egress is not paused.
//! - Algorithm 2's `t_qd` at a PFC-paused egress is the queue ahead at line rate plus how long
//!   the egress has been paused for the packet's class (from the first XOFF of the pause,
//!   kept across refreshes, until an XON or the last XOFF's quanta lapse; this adapter reads
//!   the PFC frames before the PFC scheme acts on them). The paper's packet decides on
//!   arrival from the queue ahead alone, and a packet that then waits cannot give up later:
//!   at the head of a queue paused for 200 ms (nothing ahead, `t_qd` = 0) any `t_td` > 0 made
//!   it wait out the whole pause, and the flow's later packets could not move past it (issue
//!   18, `tools/tests/proteus.rs`). Better late than never (§III-C) is "wait at most
//!   `D_ps − D_po`, then reroute"; a packet that arrives when the pause has already lasted
//!   longer than its `t_td` is where a packet that came with the pause would have given up,
//!   so it takes the alternative at once ("for the long continuous PFC pausing, Proteus will
//!   decide to switch the path", §III). A pause younger than `t_td` is still waited out.

use super::{ControlFrame, PktMeta};
use crate::config::paths::ProteusSpec;
use crate::config::SwitchSpec;
use crate::frame::{FrameMem, Pkt};
use crate::wire::EtherType;
use flowctl::wire::pfc::{quanta_to_ps, Frame as MacCtlFrame, MacControlRepr};
use flowctl::wire::proteus::{FeedbackEntry, FeedbackRepr, ShimRepr, NO_PATH, U24_MAX};
use loadbal::proteus::{
    min_queuing_delay, FlowRef, Hop, HopAction, LinkLoad, Params, PathEntry, PathId, PathMeter,
    PathTable, Prev, ProteusSource, Shim,
};
use loadbal::{Candidate, FiveTuple};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

/// Flow-table slots per destination edge at a source edge (10 bits of [`Meta::flow_ref`]).
const FLOW_SLOTS: usize = 1024;
/// Destination edges whose flows a source edge can name in [`Meta::flow_ref`] (6 bits).
const MAX_EDGES: usize = 64;
/// Seed of the flow key hash (any constant: the key is local to this switch).
const FLOW_KEY_SEED: u32 = 0x5052_4f54;

/// Time `ps` as the shim's and the feedback's 24-bit nanosecond stamps carry it (wrapping
/// every 16.8 ms).
#[inline]
fn ns24(ps: u64) -> u32 {
    (ps / 1000) as u32 & U24_MAX
}

/// How many ns before `now` (ps) the 24-bit stamp `stamp_ns` was taken, within one wrap.
#[inline]
fn ns24_age(now: u64, stamp_ns: u32) -> u64 {
    (now / 1000).wrapping_sub(u64::from(stamp_ns)) & u64::from(U24_MAX)
}

/// Counters of one pipe's Proteus.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProteusStats {
    /// Packets that got a shim here (source edge).
    pub routed: u64,
    /// Algorithm 1 moved a known flow (order-preserving reroute).
    pub source_reroutes: u64,
    /// Algorithm 2 moved a packet to an alternative path here.
    pub hop_reroutes: u64,
    /// Algorithm 2 would have moved a packet at the source edge, but the move could overtake
    /// the flow's previous packet (still queued here, or left too recently): it stayed.
    #[serde(default)]
    pub hop_reroutes_held: u64,
    /// Packets metered here (destination edge).
    pub metered: u64,
    /// Feedback signals sent (originated or relayed) and applied.
    pub feedback_sent: u64,
    pub feedback_applied: u64,
}

/// The shim as kept in [`PktMeta`]: 4 path ids, `t_td` (ns) and the 24-bit send time, 96 bits.
/// At the source edge the send time is stamped at departure, so from routing until then the
/// 24 bits name the packet's flow table entry instead ([`Meta::flow_ref`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    shim: ShimRepr,
}

impl Meta {
    const NONE: Meta = Meta {
        shim: ShimRepr {
            path: NO_PATH,
            alts: [NO_PATH; 3],
            t_td_ns: 0,
            sent_ns: 0,
        },
    };

    #[inline]
    fn get(pkt: &Pkt) -> Meta {
        let [a, b, c] = pkt.scheme.0;
        let sent = (a >> 24) | (b >> 24) << 8 | (c >> 24) << 16;
        Meta {
            shim: ShimRepr {
                path: (a & 0xFFF) as u16,
                alts: [
                    (a >> 12 & 0xFFF) as u16,
                    (b & 0xFFF) as u16,
                    (b >> 12 & 0xFFF) as u16,
                ],
                t_td_ns: c & U24_MAX,
                sent_ns: sent,
            },
        }
    }

    #[inline]
    fn set(self, pkt: &mut Pkt) {
        let s = self.shim;
        let sent = s.sent_ns & U24_MAX;
        pkt.scheme = PktMeta([
            u32::from(s.path & 0xFFF) | u32::from(s.alts[0] & 0xFFF) << 12 | (sent & 0xFF) << 24,
            u32::from(s.alts[1] & 0xFFF)
                | u32::from(s.alts[2] & 0xFFF) << 12
                | (sent >> 8 & 0xFF) << 24,
            s.t_td_ns.min(U24_MAX) | (sent >> 16) << 24,
        ]);
    }

    /// The flow table entry (destination edge, slot, tag) in the send-time bits.
    fn with_flow_ref(mut self, dst_edge: usize, f: FlowRef) -> Meta {
        self.shim.sent_ns =
            (dst_edge as u32 & 0x3F) << 18 | u32::from(f.slot & 0x3FF) << 8 | u32::from(f.tag);
        self
    }

    fn flow_ref(&self) -> (usize, FlowRef) {
        let v = self.shim.sent_ns;
        (
            (v >> 18 & 0x3F) as usize,
            FlowRef {
                slot: (v >> 8 & 0x3FF) as u16,
                tag: v as u8,
            },
        )
    }

    fn has_shim(&self) -> bool {
        self.shim.path != NO_PATH
    }

    fn to_shim(self) -> Shim {
        Shim {
            path: PathId(self.shim.path),
            alts: self.shim.alts.map(PathId),
            t_td_ps: u64::from(self.shim.t_td_ns) * 1000,
        }
    }

    fn from_shim(s: &Shim, sent_ns: u32) -> Meta {
        Meta {
            shim: ShimRepr {
                path: s.path.0,
                alts: s.alts.map(|a| a.0),
                t_td_ns: (s.t_td_ps / 1000).min(u64::from(U24_MAX)) as u32,
                sent_ns: sent_ns & U24_MAX,
            },
        }
    }
}

/// Proteus state of one pipe.
#[derive(Debug)]
pub struct ProteusScheme {
    spec: Arc<ProteusSpec>,
    rates: Vec<u64>,
    macs: Vec<[u8; 6]>,
    peer_macs: Vec<Option<[u8; 6]>>,
    /// At an edge: Algorithm 1 per destination edge.
    sources: Vec<Option<ProteusSource>>,
    hop: Hop,
    /// At a source edge: the bytes it sent lately on each port (SelectPath's tie-break).
    first_hop: LinkLoad,
    meter: Option<PathMeter>,
    /// The meter holds packets not yet fed back.
    pending: bool,
    relay: Vec<(usize, FeedbackRepr)>,
    relay_at: Option<u64>,
    /// Time of the departure being rewritten (set by `on_dequeue`, read by `egress_rewrite`).
    now: u64,
    /// Per port and PFC class, the PFC pause received there: (since, until) in ps; paused
    /// while `now < until`.
    pauses: Vec<[(u64, u64); 8]>,
    stats: ProteusStats,
}

impl ProteusScheme {
    /// Proteus for `spec` if it runs `lb = "proteus"`.
    pub fn new(spec: &SwitchSpec) -> Option<Self> {
        let ps = spec.proteus.clone()?;
        let sources = ps
            .tables
            .iter()
            .enumerate()
            .map(|(d, t)| {
                // Beyond MAX_EDGES a packet could not name its flow entry until it leaves: no
                // Proteus route there (the switch's path policy decides).
                (!t.is_empty() && d < MAX_EDGES).then(|| {
                    let paths = t
                        .iter()
                        .map(|&(id, port, base)| PathEntry::new(PathId(id), port, base))
                        .collect();
                    ProteusSource::new(PathTable::new(Params::default(), paths), FLOW_SLOTS)
                })
            })
            .collect();
        let uplink_rate = spec
            .ports
            .iter()
            .zip(&ps.proteus_peer)
            .filter(|(_, &p)| p)
            .map(|(p, _)| p.rate_bps)
            .min()
            .unwrap_or(0);
        let meter = ps
            .edge
            .map(|_| PathMeter::new(ps.period_ps, uplink_rate, 0));
        Some(ProteusScheme {
            rates: spec.ports.iter().map(|p| p.rate_bps).collect(),
            macs: spec.ports.iter().map(|p| p.mac.0).collect(),
            peer_macs: spec.ports.iter().map(|p| p.peer_mac.map(|m| m.0)).collect(),
            sources,
            hop: Hop::new(),
            first_hop: LinkLoad::new(ps.period_ps),
            meter,
            pending: false,
            relay: Vec::new(),
            relay_at: None,
            now: 0,
            pauses: vec![[(0, 0); 8]; spec.ports.len()],
            stats: ProteusStats::default(),
            spec: ps,
        })
    }

    pub fn stats(&self) -> ProteusStats {
        self.stats.clone()
    }

    /// A feedback signal: applied if addressed to this edge, else relayed toward its edge. A
    /// PFC frame on `port` is noted (the pause's start, for Algorithm 2) and left to the PFC
    /// scheme.
    pub fn on_control(
        &mut self,
        port: usize,
        ethertype: u16,
        frame: &[u8],
        now: u64,
    ) -> Option<bool> {
        if ethertype == EtherType::MAC_CONTROL {
            self.on_pfc(port, frame, now);
            return None;
        }
        if ethertype != EtherType::XOFF_SIGNAL || !FeedbackRepr::is_feedback(frame) {
            return None;
        }
        let r = FeedbackRepr::parse(frame).ok()?;
        if self.spec.edge == Some(r.edge) {
            for e in &r.entries {
                let Some(&(_, dst)) = self.spec.path_ends.get(usize::from(e.path)) else {
                    continue;
                };
                if let Some(Some(src)) = self.sources.get_mut(usize::from(dst)) {
                    src.table.feedback(
                        PathId(e.path),
                        u64::from(e.t_pd_ns) * 1000,
                        u32::from(e.u_permille),
                    );
                    // The frontier's 24 bits of ns, unwrapped to the latest time at or before
                    // now; the last picosecond of that ns (one port sends at most one packet
                    // per ns, so it names the same packet).
                    if let Some(sent_ns) = (now / 1000).checked_sub(ns24_age(now, e.arrived_ns)) {
                        src.table.confirm(PathId(e.path), sent_ns * 1000 + 999);
                    }
                }
            }
            self.stats.feedback_applied += 1;
        } else if let Some(Some(port)) = self.spec.toward_edge.get(usize::from(r.edge)) {
            self.queue_feedback(usize::from(*port), r.edge, r.entries, now);
        }
        Some(false)
    }

    /// A PFC frame arrived on `port`: an XOFF starts a pause of its class unless one is in
    /// force (a refresh keeps its start), an XON ends it.
    fn on_pfc(&mut self, port: usize, frame: &[u8], now: u64) {
        let Some(MacControlRepr::Pfc(r)) = MacCtlFrame::new_checked(frame)
            .ok()
            .and_then(|f| MacControlRepr::parse(&f).ok())
        else {
            return;
        };
        let (Some(cls), Some(&rate)) = (self.pauses.get_mut(port), self.rates.get(port)) else {
            return;
        };
        for (c, p) in cls.iter_mut().enumerate() {
            if r.class_enable & (1 << c) == 0 {
                continue;
            }
            let until = match r.quanta[c] {
                0 => 0,
                q => now.saturating_add(quanta_to_ps(q, rate)),
            };
            let since = if now < p.1 { p.0 } else { now };
            *p = (since, until);
        }
    }

    /// How long `port` has been PFC-paused for class `prio` at `now` (0 if it is not).
    #[inline]
    fn paused_for(&self, port: u16, prio: u8, now: u64) -> u64 {
        self.pauses
            .get(usize::from(port))
            .and_then(|c| c.get(usize::from(prio)))
            .filter(|p| now < p.1)
            .map_or(0, |p| now - p.0)
    }

    fn queue_feedback(&mut self, port: usize, edge: u16, entries: Vec<FeedbackEntry>, now: u64) {
        let repr = FeedbackRepr {
            dst_addr: self.peer_macs[port].unwrap_or(flowctl::wire::signal::DST_SIGNAL),
            src_addr: self.macs[port],
            edge,
            entries,
        };
        self.relay.push((port, repr));
        self.relay_at.get_or_insert(now);
    }

    /// Pops the version-2 shim into the metadata (every packet gets Proteus metadata here,
    /// "no shim" if it had none).
    #[inline(never)]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        let mut m = Meta::NONE;
        let d = mem.data(pkt.frame);
        if pkt.len >= 30
            && d[12..14] == flowctl::wire::proteus::ETHERTYPE_XOFF_SHIM.to_be_bytes()
            && d[14] >> 4 == flowctl::wire::proteus::SHIM_VERSION
        {
            let len = pkt.len as usize;
            if let Some((r, n)) =
                mem.with_mut(pkt.frame, |d| ShimRepr::pop(&mut d[..len], len).ok())
            {
                m.shim = r;
                pkt.len = n as u32;
            }
        }
        m.set(pkt);
    }

    /// Where `pkt` goes among the `n` candidates `view` describes, or `None` to leave it to
    /// the switch's path policy (no Proteus route: local traffic, destination edge).
    #[inline(never)]
    pub fn route(
        &mut self,
        pkt: &mut Pkt,
        t: &FiveTuple,
        n: usize,
        view: &impl Fn(usize) -> Candidate,
        now: u64,
    ) -> Option<usize> {
        let spec = &*self.spec;
        let mut m = Meta::get(pkt);
        // At the source edge: the destination edge, the flow key and where its previous
        // packet is (Algorithm 1's order rule, for Algorithm 2 here too).
        let mut at_source: Option<(usize, u32, Prev)> = None;
        let mut shim = if m.has_shim() {
            let &(_, dst) = spec.path_ends.get(usize::from(m.shim.path))?;
            if spec.edge == Some(dst) {
                // Destination edge: measure the path, then the switch's own route.
                let delay_ps = ns24_age(now, m.shim.sent_ns) * 1000;
                if let Some(meter) = &mut self.meter {
                    if !self.pending && now >= meter.period_end() {
                        meter.restart(now);
                    }
                    meter.on_packet(
                        PathId(m.shim.path),
                        pkt.in_port,
                        now.saturating_sub(delay_ps),
                        now,
                        u64::from(pkt.len),
                    );
                    self.pending = true;
                    self.stats.metered += 1;
                }
                return None;
            }
            m.to_shim()
        } else {
            // Source edge: Algorithm 1 for the destination's edge.
            let e = spec.edge?;
            let IpAddr::V4(dst) = t.dst else { return None };
            let &d = spec.host_edge.get(&u32::from(dst))?;
            if d == e {
                return None;
            }
            let src = self.sources.get_mut(usize::from(d))?.as_mut()?;
            // The queue ahead on every first hop now, and PFC resuming brings kicked-out
            // paths back.
            let kicked = src.table.paths.iter().any(|p| !p.active);
            for i in 0..n {
                let c = view(i);
                let rate = self.rates[usize::from(c.port)];
                src.table.set_local(
                    c.port,
                    min_queuing_delay(c.queue_bytes, rate),
                    self.first_hop.recent(c.port, now),
                );
                if kicked && !c.paused {
                    src.table.set_port_active(c.port, true);
                }
            }
            let key = loadbal::ecmp_hash(FLOW_KEY_SEED, t);
            let dec = src.route(key, now)?;
            self.stats.routed += 1;
            self.stats.source_reroutes += u64::from(dec.rerouted);
            // Until it leaves, the send-time bits name the flow entry (`egress_rewrite`).
            m = m.with_flow_ref(usize::from(d), dec.flow);
            at_source = Some((usize::from(d), key, dec.prev));
            dec.shim
        };
        let index_of = |port: u16| (0..n).find(|&i| view(i).port == port);
        let port = (*spec.route.get(usize::from(shim.path.0))?)?;
        let mut i = index_of(port)?;
        // Algorithm 2 at this switch.
        if self.hop.inactive().next().is_some() {
            for j in 0..n {
                let c = view(j);
                if !c.paused {
                    self.hop.resume(c.port);
                }
            }
        }
        let c = view(i);
        let mut t_qd = min_queuing_delay(c.queue_bytes, self.rates[usize::from(c.port)]);
        if c.paused {
            t_qd = t_qd.saturating_add(self.paused_for(c.port, pkt.prio, now));
        }
        let src = at_source.and_then(|(d, _, prev)| Some((self.sources[d].as_ref()?, prev)));
        let held = std::cell::Cell::new(false);
        let reachable = |p: PathId| {
            let routed = spec
                .route
                .get(usize::from(p.0))
                .copied()
                .flatten()
                .is_some_and(|q| index_of(q).is_some());
            // At the source edge a switch reroute must keep the flow's order too.
            let in_order = src.is_none_or(|(s, prev)| {
                s.table.index_of(p).is_some_and(|to| s.order_safe(prev, to))
            });
            held.set(held.get() | (routed && !in_order));
            routed && in_order
        };
        let action = self
            .hop
            .on_arrival(&mut shim, c.port, c.paused, t_qd, reachable);
        self.stats.hop_reroutes_held += u64::from(held.get() && action == HopAction::Forward);
        if let HopAction::Reroute { to, .. } = action {
            self.stats.hop_reroutes += 1;
            if let Some((d, key, _)) = at_source {
                if let Some(src) = self.sources[d].as_mut() {
                    src.table.set_port_active(c.port, false);
                    src.follow(key, to);
                }
            }
            let to_port = spec.route[usize::from(to.0)]?;
            i = index_of(to_port)?;
        }
        Meta::from_shim(&shim, m.shim.sent_ns).set(pkt);
        Some(i)
    }

    /// Remembers the departure time for `egress_rewrite`.
    #[inline(never)]
    pub fn on_dequeue(&mut self, now: u64) {
        self.now = now;
    }

    /// Pushes the shim, `t_td` less the sojourn here, toward a Proteus peer. At the source
    /// edge the packet's flow learns it has left (Algorithm 1's `t_pre`) and the shim gets its
    /// send time, now.
    #[inline(never)]
    pub fn egress_rewrite<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &Pkt,
        len: u32,
        port: usize,
    ) -> u32 {
        let mut m = Meta::get(pkt);
        if !m.has_shim() {
            return len;
        }
        let peer = |p: usize| self.spec.proteus_peer.get(p).copied().unwrap_or(false);
        if !peer(usize::from(pkt.in_port)) {
            // From a host: the shim was made here.
            let (d, f) = m.flow_ref();
            if let Some(Some(src)) = self.sources.get_mut(d) {
                src.departed(f, self.now);
            }
            m.shim.sent_ns = ns24(self.now);
            self.first_hop
                .on_sent(port as u16, u64::from(len), self.now);
        }
        if !peer(port) {
            return len;
        }
        let mut shim = m.to_shim();
        Hop::on_departure(&mut shim, pkt.arrival, self.now);
        let r = Meta::from_shim(&shim, m.shim.sent_ns).shim;
        mem.with_mut(pkt.frame, |d| r.push(d, len as usize))
            .map_or(len, |n| n as u32)
    }

    /// Feedback to send: relayed signals and, at a period's end, this edge's measurements.
    pub fn poll(&mut self, now: u64, out: &mut Vec<(usize, ControlFrame)>) {
        if self.pending && self.meter.as_ref().is_some_and(|m| now >= m.period_end()) {
            self.pending = false;
            let mut fb = Vec::new();
            if let Some(m) = &mut self.meter {
                m.close(now, &mut fb);
            }
            let mut by_src: BTreeMap<u16, Vec<FeedbackEntry>> = BTreeMap::new();
            for f in fb {
                let Some(&(src, _)) = self.spec.path_ends.get(usize::from(f.path.0)) else {
                    continue;
                };
                by_src.entry(src).or_default().push(FeedbackEntry {
                    path: f.path.0,
                    t_pd_ns: (f.t_pd_ps / 1000).min(u64::from(u32::MAX)) as u32,
                    u_permille: f.u_permille as u16,
                    arrived_ns: ns24(f.arrived_sent_ps),
                });
            }
            for (src, entries) in by_src {
                for chunk in entries.chunks(flowctl::wire::proteus::MAX_ENTRIES) {
                    if let Some(Some(port)) = self.spec.toward_edge.get(usize::from(src)) {
                        self.queue_feedback(usize::from(*port), src, chunk.to_vec(), now);
                    }
                }
            }
        }
        self.stats.feedback_sent += self.relay.len() as u64;
        for (port, r) in self.relay.drain(..) {
            out.push((port, ControlFrame::Proteus(r)));
        }
        self.relay_at = None;
    }

    /// Whether `poll` has something to send at `now`.
    #[inline]
    pub fn poll_due(&self, now: u64) -> bool {
        !self.relay.is_empty()
            || (self.pending && self.meter.as_ref().is_some_and(|m| now >= m.period_end()))
    }

    /// When `poll` next has work.
    pub fn next_deadline(&self) -> Option<u64> {
        let meter = self
            .meter
            .as_ref()
            .filter(|_| self.pending)
            .map(|m| m.period_end());
        match (self.relay_at, meter) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameId;

    #[test]
    fn meta_round_trips_the_shim() {
        let mut p = Pkt::new(FrameId(0), 100, 0, 0);
        let m = Meta {
            shim: ShimRepr {
                path: 0xABC,
                alts: [0x123, 0xFFF, 0x001],
                t_td_ns: 0xFE_DCBA,
                sent_ns: 0x98_7654,
            },
        };
        m.set(&mut p);
        assert_eq!(Meta::get(&p), m);
        Meta::NONE.set(&mut p);
        assert!(!Meta::get(&p).has_shim());
    }
}

//! Pyrrha: congestion-root-based flow control with isolation queues (Pyrrha, NSDI '25).
//!
//! * **Congestion root identification (§4.1, §4.4).** A data packet that finds its output
//!   queue (OQ) longer than `K_pause` one-hop BDPs makes the OQ's port a self-nominated root
//!   candidate; it sends PAUSE(root = switch-id:port-id, hops = 1) to the upstream port the
//!   packet came from (once per upstream port), and RESUME once the OQ is below `K_resume`
//!   BDPs. A candidate that receives a PAUSE from a root further downstream on its own port is
//!   a false positive: it sends MERGE(old → new) to the ports it paused, which turn their IQs
//!   of the old root to soft-merging (Fig. 6) and pass the MERGE on upstream (iterative
//!   merging); the new root inherits the old root's pauses. A PAUSE naming this switch is
//!   ignored (the loop guard of §4.5). OQs are never paused (deadlock robustness, §4.5).
//! * **Congested flow identification (§4.2).** The caller computes the packet's onward path
//!   (the egress port it takes at each hop; `dataplane`'s path calculation uses every
//!   downstream switch's seeded ECMP) and [`Pyrrha::select`] matches it against the
//!   hierarchical congestion-root table ([`roots`], App. E.2): hop `k` of the path is looked up
//!   in the `k`-hop table only.
//! * **Congested flow management (§4.3, App. C, E.3).** A congested packet goes to the isolation
//!   queue (IQ) of its egress port assigned to the roots it crosses ([`iq`]): IQs come from a
//!   per-port free-queue stack, are paused/resumed by the downstream PAUSE/RESUME of their
//!   roots, send PAUSE upstream themselves above `K_pause` (RESUME below `K_resume`), become
//!   soft-merging on MERGE, and are unassigned when empty and not paused. When a port's IQs run
//!   out the roots are hashed onto the IQs in use (§4.5, losing precise isolation). IQs are
//!   single-tier (App. C): the key is the set of roots crossed (at most [`MAX_LEVELS`], the
//!   farthest ones as App. C.2 keeps), and when flows may move to an IQ (it is newly assigned,
//!   a key is hashed onto it, or a root merged or came back since it last looked:
//!   [`roots::RootTable::moves`]) an order mark is put behind the packets in every queue they
//!   may have used (the OQ, and the IQs whose roots one path can cross together with the
//!   IQ's); the IQ is held once its own earlier packets have left, until every mark has left,
//!   so delivery stays in order and two IQs never wait on each other. Flows of a merged root
//!   alone keep to the IQ they used before the merge until it drains. A software queue can
//!   count instead of carrying a marker packet: a mark is the old queue's enqueue count, and
//!   it has left once the queue's dequeue count reaches it.
//!
//! Pure logic: the caller passes queue lengths, ports and time (ps); the decisions come back as
//! signals to send ([`Msg`], encoded by [`wire`]) and queue pause changes ([`QueueCmd`]) to
//! apply through the AFC unit.

pub mod iq;
pub mod roots;
#[cfg(test)]
mod tests;
pub mod wire;

use iq::PortIqs;
use roots::{RootState, RootTable};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Farthest hop distance a root can be at (a 3-tier fat-tree path has 5 egress ports).
pub const MAX_HOPS: usize = 8;
/// Roots one single-tier IQ key can name (a two-tier HIQ, App. C.2).
pub const MAX_LEVELS: usize = 2;
/// Ports a switch can have (upstream pauses are kept as a bitmap).
pub const MAX_PORTS: usize = 128;
/// Queues a port can have (IQ numbers are AFC queue ids).
pub const MAX_QUEUES: usize = 128;

/// A congestion root: an egress port, named switch-id:port-id (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RootId {
    pub switch: u16,
    pub port: u16,
}

impl RootId {
    pub const fn new(switch: u16, port: u16) -> Self {
        RootId { switch, port }
    }
}

impl std::fmt::Display for RootId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.switch, self.port)
    }
}

/// A Pyrrha flow-control message, sent to the upstream device of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Msg {
    /// Pause the flows crossing `root`, `hops` hops downstream of the receiver.
    Pause { root: RootId, hops: u8 },
    /// Resume them.
    Resume { root: RootId, hops: u8 },
    /// `old` (`old_hops` away) was a false-positive root; its flows belong to `new`.
    Merge {
        old: RootId,
        old_hops: u8,
        new: RootId,
        new_hops: u8,
    },
}

/// A change of a queue's per-queue (AFC) pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueCmd {
    pub port: u16,
    pub queue: u8,
    pub pause: bool,
}

/// How isolation queues are organised (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IqMode {
    /// Single-tier IQs with order marks (App. C, the Tofino2 prototype's way): an IQ per set
    /// of roots a packet crosses (at most [`MAX_LEVELS`]), served by the port's scheduler
    /// like the OQ; a flow that moves to a new IQ leaves an order mark in the queues it used,
    /// and the new IQ waits until every mark has left.
    #[default]
    SingleTier,
    /// The two-level Hierarchical Isolation Queue (§4.3, Fig. 5(c)): a packet enters the IQ
    /// of the nearest root it crosses (level by distance); a software scheduler
    /// ([`Pyrrha::next_queue`]) dequeues a resumed (or soft-merging) IQ's head into the IQ of
    /// the next root farther on its path, or into the OQ when there is none, so a packet
    /// reaches the wire only after every root it crosses has resumed. One IQ per root; order
    /// holds by the structure (a flow only ever moves to farther levels, behind its earlier
    /// packets), so there are no order marks.
    TwoLevel,
}

/// Pyrrha's parameters (§6 "Parameters").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PyrrhaConfig {
    /// Pause threshold in one-hop BDPs (paper: 2).
    pub k_pause: f64,
    /// Resume threshold in one-hop BDPs (paper: 1).
    pub k_resume: f64,
    /// Most IQs a port uses (paper: 100).
    pub max_iqs: usize,
    pub iq_mode: IqMode,
    /// Congestion-root timeline entries kept (oldest dropped first).
    pub timeline: usize,
}

impl Default for PyrrhaConfig {
    fn default() -> Self {
        PyrrhaConfig {
            k_pause: 2.0,
            k_resume: 1.0,
            max_iqs: 100,
            iq_mode: IqMode::SingleTier,
            timeline: 4096,
        }
    }
}

/// What Pyrrha needs to know about one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyrrhaPort {
    /// One-hop BDP (bytes): the unit of `K_pause` and `K_resume`.
    pub bdp_bytes: u64,
    /// Data queues usable as IQs (not the OQs), in the order the free stack hands them out.
    pub iqs: Vec<u8>,
    /// Data queues of the port.
    pub queues: usize,
}

/// Invalid Pyrrha parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PyrrhaError {
    #[error("{0} ports: Pyrrha supports at most 128")]
    Ports(usize),
    #[error("port {0}: {1} queues, Pyrrha supports 1..=128")]
    Queues(usize, usize),
    #[error("port {0}: IQ {1} is not one of its queues")]
    Iq(usize, u8),
    #[error("k_pause ({0}) and k_resume ({1}) must satisfy 0 < k_resume <= k_pause")]
    Thresholds(f64, f64),
}

/// What happened to a root, for the congestion-root timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootEvent {
    /// An OQ of this switch nominated itself.
    Nominated,
    /// It fell below `K_resume` and resumed its upstream.
    Released,
    /// It learned it was a false positive and merged into a downstream root.
    Merged,
    /// A downstream root was paused / resumed on one of this switch's ports.
    Paused,
    Resumed,
}

/// Counters of one port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStats {
    pub pauses_sent: u64,
    pub resumes_sent: u64,
    pub merges_sent: u64,
    pub pauses_received: u64,
    pub resumes_received: u64,
    pub merges_received: u64,
    /// PAUSEs naming this switch, ignored (loop guard).
    pub loops_ignored: u64,
    /// Times its OQ nominated itself a root.
    pub roots_detected: u64,
    pub iqs_assigned: u64,
    pub iqs_in_use: u64,
    pub iqs_in_use_max: u64,
    /// Roots hashed onto an IQ in use because the free stack was empty (§4.5).
    pub iqs_hashed: u64,
    /// Order marks inserted.
    pub order_marks: u64,
}

/// Counters of a switch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PyrrhaStats {
    pub ports: Vec<PortStats>,
    /// Per root (downstream roots this switch paused for, and its own): total paused time (ps).
    pub paused_ps: BTreeMap<String, u64>,
    /// (time ps, root, event), oldest first.
    pub timeline: Vec<(u64, String, RootEvent)>,
}

/// Candidate state of a port's OQ (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OqState {
    /// Below `K_pause`, or never nominated.
    #[default]
    Idle,
    /// Self-nominated root: PAUSEd the upstream ports in `Oq::upstream`.
    Root,
    /// Learned it is a false positive: no nomination until it falls below `K_resume`.
    FalsePositive,
}

#[derive(Debug, Clone, Default)]
struct Oq {
    state: OqState,
    /// Upstream ports (bit i) it PAUSEd.
    upstream: u128,
    since: u64,
}

#[derive(Debug)]
struct Port {
    k_pause: u64,
    k_resume: u64,
    oq: Oq,
    iqs: PortIqs,
}

/// Pyrrha on one switch (one pipe: the ports it owns).
#[derive(Debug)]
pub struct Pyrrha {
    cfg: PyrrhaConfig,
    me: u16,
    ports: Vec<Port>,
    roots: RootTable,
    /// Upstream pauses sent for downstream roots: (egress port, root) → (root's hops from
    /// here, upstream ports PAUSEd).
    sent: BTreeMap<(u16, RootId), (u8, u128)>,
    out: Vec<(u16, Msg)>,
    cmds: Vec<QueueCmd>,
    stats: PyrrhaStats,
}

/// Where a packet goes: its egress port's OQ or one of the port's IQs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Oq,
    Iq(u8),
}

impl Pyrrha {
    /// Pyrrha on switch `me` with `ports`.
    pub fn new(cfg: PyrrhaConfig, me: u16, ports: &[PyrrhaPort]) -> Result<Self, PyrrhaError> {
        if ports.len() > MAX_PORTS {
            return Err(PyrrhaError::Ports(ports.len()));
        }
        if !(cfg.k_resume > 0.0 && cfg.k_resume <= cfg.k_pause) {
            return Err(PyrrhaError::Thresholds(cfg.k_pause, cfg.k_resume));
        }
        let mut ps = Vec::with_capacity(ports.len());
        for (i, p) in ports.iter().enumerate() {
            if !(1..=MAX_QUEUES).contains(&p.queues) {
                return Err(PyrrhaError::Queues(i, p.queues));
            }
            if let Some(&q) = p.iqs.iter().find(|&&q| usize::from(q) >= p.queues) {
                return Err(PyrrhaError::Iq(i, q));
            }
            let iqs: Vec<u8> = p.iqs.iter().copied().take(cfg.max_iqs).collect();
            ps.push(Port {
                k_pause: (cfg.k_pause * p.bdp_bytes as f64) as u64,
                k_resume: (cfg.k_resume * p.bdp_bytes as f64) as u64,
                oq: Oq::default(),
                iqs: PortIqs::new(&iqs, p.queues),
            });
        }
        Ok(Pyrrha {
            stats: PyrrhaStats {
                ports: vec![PortStats::default(); ports.len()],
                ..PyrrhaStats::default()
            },
            cfg,
            me,
            ports: ps,
            roots: RootTable::new(),
            sent: BTreeMap::new(),
            out: Vec::new(),
            cmds: Vec::new(),
        })
    }

    pub fn config(&self) -> &PyrrhaConfig {
        &self.cfg
    }

    /// This switch's id (the switch half of its roots).
    pub fn switch_id(&self) -> u16 {
        self.me
    }

    /// Pause and resume thresholds of `port` (bytes).
    pub fn thresholds(&self, port: usize) -> (u64, u64) {
        let p = &self.ports[port];
        (p.k_pause, p.k_resume)
    }

    /// The congestion-root table.
    pub fn roots(&self) -> &RootTable {
        &self.roots
    }

    /// OQ candidate state of `port`.
    pub fn oq_state(&self, port: usize) -> OqState {
        self.ports[port].oq.state
    }

    /// State of IQ `queue` of `port` (Fig. 6).
    pub fn iq_state(&self, port: usize, queue: u8) -> iq::IqState {
        self.ports[port].iqs.state(queue, port as u16, &self.roots)
    }

    /// IQs of `port` in use.
    pub fn iqs_in_use(&self, port: usize) -> usize {
        self.ports[port].iqs.in_use()
    }

    /// Signals to send since the last call: (port, message).
    pub fn drain_msgs(&mut self) -> std::vec::Drain<'_, (u16, Msg)> {
        self.out.drain(..)
    }

    /// Queue pause changes since the last call.
    pub fn drain_cmds(&mut self) -> std::vec::Drain<'_, QueueCmd> {
        self.cmds.drain(..)
    }

    /// Whether signals or queue commands are waiting.
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.cmds.is_empty()
    }

    pub fn stats(&self) -> &PyrrhaStats {
        &self.stats
    }

    fn event(&mut self, now: u64, root: RootId, e: RootEvent) {
        let t = &mut self.stats.timeline;
        if self.cfg.timeline == 0 {
            return;
        }
        if t.len() >= self.cfg.timeline {
            t.remove(0);
        }
        t.push((now, root.to_string(), e));
    }

    fn send(&mut self, port: u16, m: Msg) {
        let s = &mut self.stats.ports[usize::from(port)];
        match m {
            Msg::Pause { .. } => s.pauses_sent += 1,
            Msg::Resume { .. } => s.resumes_sent += 1,
            Msg::Merge { .. } => s.merges_sent += 1,
        }
        self.out.push((port, m));
    }

    fn send_all(&mut self, bits: u128, m: Msg) {
        for i in Bits(bits) {
            self.send(i, m);
        }
    }

    fn paused_time(&mut self, root: RootId, from: u64, now: u64) {
        *self.stats.paused_ps.entry(root.to_string()).or_default() += now.saturating_sub(from);
    }

    // ---- per packet -------------------------------------------------------------------

    /// The queue of a data packet leaving by `port` (OQ `oq`) whose onward path is `path`
    /// (`path[k]`: the egress port it takes `k` hops on; `path[0]` is `port` itself).
    #[inline]
    pub fn select(&mut self, port: usize, oq: u8, path: &[RootId], now: u64) -> Choice {
        if self.roots.is_empty() {
            return Choice::Oq;
        }
        let key = match self.cfg.iq_mode {
            // Flows of a merged root keep to its soft-merging IQ until it drains (order):
            // their earlier packets are there. The HIQ scheduler re-matches them as they
            // leave it (§4.3: the real root's flows into its IQ, the others to the OQ), so
            // they still wait for every root they cross, behind their earlier packets.
            IqMode::TwoLevel => {
                let (key, merged) = iq::classify_nearest(&self.roots, path, 0);
                let p = &self.ports[port];
                if let Some(q) = merged.and_then(|r| p.iqs.find_root(r)) {
                    return Choice::Iq(q);
                }
                key
            }
            // Single-tier (App. C): a flow crossing a root still active moves to that root's
            // IQ (behind order marks in the queues it used); flows of the merged root alone
            // keep to the IQ they used before the merge (the one of every root they cross,
            // soft-merging) until it drains.
            IqMode::SingleTier => {
                let (key, all) = iq::classify(&self.roots, path);
                if key.is_empty() {
                    let p = &self.ports[port];
                    return all
                        .and_then(|k| p.iqs.find(&k))
                        .map_or(Choice::Oq, Choice::Iq);
                }
                key
            }
        };
        if key.is_empty() {
            return Choice::Oq;
        }
        self.iq_for(port, key, oq, now)
    }

    /// The IQ of `key` on `port`: the one serving it, else a new one (or one hashed onto).
    fn iq_for(&mut self, port: usize, key: iq::Key, oq: u8, now: u64) -> Choice {
        if let Some(q) = self.ports[port].iqs.find(&key) {
            // Single-tier (App. C): a root merged or came back since this IQ last looked, so
            // flows may be joining it from other queues: they leave order marks there.
            let moves = self.roots.moves();
            let iqs = &mut self.ports[port].iqs;
            if self.cfg.iq_mode == IqMode::SingleTier && iqs.needs_marks(q, moves) {
                let marks = iqs.place_marks(q, oq, moves);
                if marks > 0 {
                    self.stats.ports[port].order_marks += marks;
                    self.refresh(port, q, now);
                }
            }
            return Choice::Iq(q);
        }
        // An IQ whose only packet was dropped after its assignment never sees a dequeue:
        // reclaim idle IQs here, where a new one is needed (rare, per root and port).
        self.unassign_empty(port, now);
        let marks = self.cfg.iq_mode == IqMode::SingleTier;
        let p = &mut self.ports[port];
        let r = p.iqs.assign(key, oq, &mut self.roots, marks);
        let st = &mut self.stats.ports[port];
        match r {
            iq::Assigned::New { queue, marks } => {
                st.iqs_assigned += 1;
                st.order_marks += marks;
                st.iqs_in_use = p.iqs.in_use() as u64;
                st.iqs_in_use_max = st.iqs_in_use_max.max(st.iqs_in_use);
                self.refresh(port, queue, now);
                Choice::Iq(queue)
            }
            iq::Assigned::Hashed { queue, marks } => {
                st.iqs_hashed += 1;
                st.order_marks += marks;
                self.refresh(port, queue, now);
                Choice::Iq(queue)
            }
            iq::Assigned::None => Choice::Oq,
        }
    }

    /// Two-level HIQ: where the HIQ scheduler moves the head packet of IQ `from` of `port`,
    /// whose onward path is `path` (§4.3: "After a packet is dequeued from IQ_P6, it is pushed
    /// into a next-level IQ_P5. When there is no more matched IQ, it is pushed into the OQ"):
    /// the IQ of the nearest active root the path crosses farther than the roots of `from`
    /// it crosses, else the OQ `oq`. A soft-merging IQ's packets are matched afresh, so the
    /// flows of the real root go to its IQ and the others to the OQ (§4.3). The caller
    /// dequeues the packet from `from` ([`Self::on_dequeue`]) and enqueues it where this says
    /// ([`Self::on_enqueue`]), and only moves out of IQs that are [`Self::iq_ready`].
    pub fn next_queue(
        &mut self,
        port: usize,
        from: u8,
        oq: u8,
        path: &[RootId],
        now: u64,
    ) -> Choice {
        let Some(s) = self.ports[port].iqs.slot(from) else {
            return Choice::Oq;
        };
        let on_path = |h: u8, r: RootId| path.get(usize::from(h)) == Some(&r);
        let after = s
            .roots()
            .filter(|&(h, r)| on_path(h, r))
            .map(|(h, _)| h)
            .max()
            .or_else(|| s.roots().map(|(h, _)| h).min())
            .unwrap_or(0);
        let (key, merged) = iq::classify_nearest(&self.roots, path, after);
        let soft = merged.and_then(|r| self.ports[port].iqs.find_root(r));
        if let Some(q) = soft.filter(|&q| q != from) {
            return Choice::Iq(q);
        }
        if key.is_empty() {
            return Choice::Oq;
        }
        match self.iq_for(port, key, oq, now) {
            // Hashed back onto the IQ it leaves (IQs ran out): that IQ already waited for
            // both roots, so the packet goes on to the OQ rather than behind itself.
            Choice::Iq(q) if q == from => Choice::Oq,
            c => c,
        }
    }

    /// Whether IQ `queue` of `port` may be dequeued (resumed or soft-merging, not held).
    #[inline]
    pub fn iq_ready(&self, port: usize, queue: u8) -> bool {
        self.ports[port].iqs.ready(queue, port as u16, &self.roots)
    }

    /// Whether `queue` of `port` is an IQ in use.
    #[inline]
    pub fn is_iq(&self, port: usize, queue: u8) -> bool {
        self.ports[port].iqs.slot(queue).is_some()
    }

    /// A data packet from `in_port` (if it came from a port) was queued in `queue` of `port`,
    /// which now holds `queue_bytes`.
    #[inline]
    pub fn on_enqueue(
        &mut self,
        port: usize,
        queue: u8,
        in_port: Option<u16>,
        queue_bytes: u64,
        now: u64,
    ) {
        let p = &mut self.ports[port];
        p.iqs.count_enq(queue);
        let over = queue_bytes > p.k_pause;
        let Some(i) = in_port.filter(|&i| usize::from(i) != port && over) else {
            if let Some(s) = p.iqs.slot_mut(queue) {
                s.bytes = queue_bytes;
            }
            return;
        };
        let bit = 1u128 << i;
        if let Some(s) = p.iqs.slot_mut(queue) {
            s.bytes = queue_bytes;
            // An IQ above K_pause pauses its roots' flows upstream (§4.4).
            let keys = s.keys.len();
            for ki in 0..keys {
                let Some(key) = self.ports[port].iqs.slot(queue).map(|s| s.keys[ki]) else {
                    break;
                };
                for &(hops, root) in key.roots() {
                    let active = self
                        .roots
                        .get(hops, root)
                        .is_some_and(|e| e.state == RootState::Active);
                    if !active {
                        continue;
                    }
                    let e = self.sent.entry((port as u16, root)).or_insert((hops, 0));
                    if e.1 & bit == 0 {
                        e.1 |= bit;
                        let hops = hops.saturating_add(1);
                        self.send(i, Msg::Pause { root, hops });
                    }
                }
            }
            return;
        }
        // The OQ: a hotspot nominates itself (§4.1).
        if p.oq.state == OqState::FalsePositive {
            return;
        }
        let root = RootId::new(self.me, port as u16);
        if p.oq.state == OqState::Idle {
            p.oq.state = OqState::Root;
            p.oq.since = now;
            self.stats.ports[port].roots_detected += 1;
            self.event(now, root, RootEvent::Nominated);
        }
        let p = &mut self.ports[port];
        if p.oq.upstream & bit == 0 {
            p.oq.upstream |= bit;
            self.send(i, Msg::Pause { root, hops: 1 });
        }
    }

    /// A data packet left `queue` of `port` (sent or flushed), which now holds `queue_bytes`.
    #[inline]
    pub fn on_dequeue(&mut self, port: usize, queue: u8, queue_bytes: u64, now: u64) {
        let p = &mut self.ports[port];
        let changed = p.iqs.count_deq(queue);
        for q in changed {
            self.refresh(port, q, now);
        }
        let p = &mut self.ports[port];
        let below = queue_bytes < p.k_resume;
        if let Some(s) = p.iqs.slot_mut(queue) {
            s.bytes = queue_bytes;
            if below {
                self.resume_upstream(port, queue);
                self.try_unassign(port, queue, now);
            }
            return;
        }
        if below && p.oq.state != OqState::Idle {
            let root = RootId::new(self.me, port as u16);
            let up = std::mem::take(&mut p.oq.upstream);
            let was_root = p.oq.state == OqState::Root;
            p.oq.state = OqState::Idle;
            let since = p.oq.since;
            if was_root {
                self.paused_time(root, since, now);
                self.event(now, root, RootEvent::Released);
            }
            self.send_all(up, Msg::Resume { root, hops: 1 });
        }
    }

    // ---- signals in -------------------------------------------------------------------

    /// A PAUSE for `root` (`hops` away) arrived on `port`.
    pub fn on_pause(&mut self, port: usize, root: RootId, hops: u8, now: u64) {
        let st = &mut self.stats.ports[port];
        st.pauses_received += 1;
        if root.switch == self.me {
            // Loop guard (§4.5): our own root came back around a routing loop.
            st.loops_ignored += 1;
            return;
        }
        let bit = 1u128 << port;
        let Some(e) = self.roots.entry(hops, root) else {
            return;
        };
        let newly = e.paused_on == 0;
        if newly {
            e.paused_since = now;
        }
        e.paused_on |= bit;
        if newly {
            self.event(now, root, RootEvent::Paused);
        }
        self.refresh_root(port, root, now);
        // A self-nominated root that hears of a root further down is a false positive
        // (§4.1): merge its tree into the new one.
        let p = &mut self.ports[port];
        if p.oq.state == OqState::Root {
            let old = RootId::new(self.me, port as u16);
            let up = std::mem::take(&mut p.oq.upstream);
            p.oq.state = OqState::FalsePositive;
            let since = p.oq.since;
            self.paused_time(old, since, now);
            self.event(now, old, RootEvent::Merged);
            if up != 0 {
                self.sent.entry((port as u16, root)).or_insert((hops, 0)).1 |= up;
                let m = Msg::Merge {
                    old,
                    old_hops: 1,
                    new: root,
                    new_hops: hops.saturating_add(1),
                };
                self.send_all(up, m);
            }
        }
    }

    /// A RESUME for `root` (`hops` away) arrived on `port`.
    pub fn on_resume(&mut self, port: usize, root: RootId, hops: u8, now: u64) {
        self.stats.ports[port].resumes_received += 1;
        if root.switch == self.me {
            return;
        }
        self.unpause(port, root, hops, now);
        self.refresh_root(port, root, now);
        self.resume_upstream_root(port as u16, root);
        self.unassign_empty(port, now);
        self.roots.gc(hops, root);
    }

    /// A MERGE(`old` → `new`) arrived on `port`.
    pub fn on_merge(
        &mut self,
        port: usize,
        old: RootId,
        old_hops: u8,
        new: RootId,
        new_hops: u8,
        now: u64,
    ) {
        self.stats.ports[port].merges_received += 1;
        self.roots.merge(old_hops, old);
        self.unpause(port, old, old_hops, now);
        self.ports[port].iqs.soft_merge(old);
        // The new root inherits the pause the false positive held on this port.
        if new.switch != self.me {
            if let Some(e) = self.roots.entry(new_hops, new) {
                if e.paused_on == 0 {
                    e.paused_since = now;
                }
                e.paused_on |= 1u128 << port;
            }
        }
        self.refresh_all(port, now);
        // Iterative merging: the ports this switch paused for the old root follow.
        if let Some((h, up)) = self.sent.remove(&(port as u16, old)) {
            if new.switch != self.me {
                self.sent
                    .entry((port as u16, new))
                    .or_insert((new_hops, 0))
                    .1 |= up;
            }
            let m = Msg::Merge {
                old,
                old_hops: h.saturating_add(1),
                new,
                new_hops: new_hops.saturating_add(1),
            };
            self.send_all(up, m);
        }
        self.unassign_empty(port, now);
        self.roots.gc(old_hops, old);
    }

    fn unpause(&mut self, port: usize, root: RootId, hops: u8, now: u64) {
        let bit = 1u128 << port;
        let Some(e) = self.roots.get_mut(hops, root) else {
            return;
        };
        if e.paused_on & bit == 0 {
            return;
        }
        e.paused_on &= !bit;
        if e.paused_on == 0 {
            let since = e.paused_since;
            self.paused_time(root, since, now);
            self.event(now, root, RootEvent::Resumed);
        }
    }

    // ---- IQ upkeep ----------------------------------------------------------------------

    /// Brings the AFC pause of IQ `queue` of `port` in line with its state.
    fn refresh(&mut self, port: usize, queue: u8, _now: u64) {
        let roots = &self.roots;
        if let Some(pause) = self.ports[port].iqs.sync(queue, port as u16, roots) {
            self.cmds.push(QueueCmd {
                port: port as u16,
                queue,
                pause,
            });
        }
    }

    fn refresh_root(&mut self, port: usize, root: RootId, now: u64) {
        for q in self.ports[port].iqs.queues_with(root) {
            self.refresh(port, q, now);
        }
    }

    fn refresh_all(&mut self, port: usize, now: u64) {
        for q in self.ports[port].iqs.assigned() {
            self.refresh(port, q, now);
        }
    }

    /// An IQ fell below `K_resume`: RESUME upstream for each of its roots no other IQ of the
    /// port still holds above `K_resume`.
    fn resume_upstream(&mut self, port: usize, queue: u8) {
        if self.sent.is_empty() {
            return;
        }
        let Some(s) = self.ports[port].iqs.slot(queue) else {
            return;
        };
        let roots: Vec<RootId> = s.roots().map(|(_, r)| r).collect();
        for root in roots {
            self.resume_upstream_root(port as u16, root);
        }
    }

    fn resume_upstream_root(&mut self, port: u16, root: RootId) {
        let Some(&(hops, up)) = self.sent.get(&(port, root)) else {
            return;
        };
        let p = &self.ports[usize::from(port)];
        if p.iqs.max_bytes_with(root) >= p.k_resume {
            return;
        }
        self.sent.remove(&(port, root));
        let hops = hops.saturating_add(1);
        self.send_all(up, Msg::Resume { root, hops });
    }

    fn try_unassign(&mut self, port: usize, queue: u8, now: u64) {
        let roots = &mut self.roots;
        let Some(freed) = self.ports[port]
            .iqs
            .unassign_if_idle(queue, port as u16, roots)
        else {
            return;
        };
        self.after_unassign(port, &freed, now);
    }

    fn unassign_empty(&mut self, port: usize, now: u64) {
        for q in self.ports[port].iqs.assigned() {
            self.try_unassign(port, q, now);
        }
    }

    fn after_unassign(&mut self, port: usize, freed: &[(u8, RootId)], _now: u64) {
        self.stats.ports[port].iqs_in_use = self.ports[port].iqs.in_use() as u64;
        for &(hops, root) in freed {
            self.resume_upstream_root(port as u16, root);
            self.roots.gc(hops, root);
        }
    }
}

/// Iterates the set bits of a port bitmap.
struct Bits(u128);

impl Iterator for Bits {
    type Item = u16;
    fn next(&mut self) -> Option<u16> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(i as u16)
    }
}

//! Opportunistic re-assigning at the upstream (Aquarius §3.3): what a device does with the
//! PAUSE(queue, FID) and RESUME(queue, FID) its downstream sends on one of its egress ports.
//!
//! One [`QueueTable`] per egress port records the flows per queue (kept by the caller through
//! [`QueueTable::flow_in`] / [`QueueTable::flow_out`], from its own flow mapping) and the
//! congested FIDs the downstream named. On PAUSE:
//!
//! * the FID alone in its queue → that queue is paused ([`QueueCmd::Pause`]);
//! * the FID sharing its queue with uncongested flows → its *later* packets are steered into
//!   the reserved congested queue `rsvQ` ([`QueueTable::steer`]), taken from the port's empty
//!   queues when first needed and shared by every congested flow of the port; `rsvQ` is
//!   paused, the original queue keeps running (the victims are unaffected);
//! * no empty queue for `rsvQ` → the shared queue is paused (all that is left; counted).
//!
//! A queue paused for a flow alone in it that another flow then joins is shared from then
//! on: the held flow moves to `rsvQ` as above and the queue resumes ([`QueueTable::on_join`]).
//!
//! A flow held by pausing its own queue that comes back after draining goes back to that
//! queue ([`QueueTable::paused_home`]): without stickiness a line-rate flow's queue empties
//! between packets and it would take a fresh, unpaused queue each time.
//!
//! `rsvQ` resumes once RESUMEs for all its flows have arrived *and* the packets they left
//! in their original queues have drained (in-order delivery). A resumed flow returns from
//! `rsvQ` only once it has no packet left there; `rsvQ` is released to dynamic mapping when
//! no flow is assigned to it. The same table serves a switch port and a host NIC.

/// A queue command for the caller to apply (AFC on a switch, paused bits on a NIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueCmd {
    Pause(u8),
    Resume(u8),
}

/// What a PAUSE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAction {
    /// The flow was alone in this queue: paused.
    Queue(u8),
    /// The flow was moved to `rsvQ` (allocated now if `allocated`), which is paused.
    Reserved { rsv: u8, allocated: bool },
    /// Shared queue but no empty queue for `rsvQ`: the shared queue is paused.
    NoRsv(u8),
    /// The flow is already held (duplicate PAUSE).
    Already,
}

/// A congested flow the downstream named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Congested {
    fid: u32,
    /// Queue the flow was in when paused (paused itself unless the flow is in `rsvQ`).
    home: u8,
    in_rsv: bool,
    resumed: bool,
    /// Packets of the flow in `rsvQ`.
    rsv_pkts: u32,
    /// Packets of the flow left in `home` when it moved to `rsvQ`, not yet departed.
    old_pkts: u32,
}

/// Counters of one port's upstream side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpstreamStats {
    pub pauses_received: u64,
    pub resumes_received: u64,
    pub queue_pauses: u64,
    pub rsv_allocations: u64,
    pub rsv_releases: u64,
    pub flows_reassigned: u64,
    pub no_rsv: u64,
    /// Held flows moved to `rsvQ` because another flow joined their paused queue
    /// ([`QueueTable::on_join`]).
    pub shared_on_join: u64,
}

/// The QueueTable of one egress port (see the module doc).
#[derive(Debug, Clone)]
pub struct QueueTable {
    /// Per queue: flows mapped to it (by the caller's mapping).
    flows: Vec<u32>,
    congested: Vec<Congested>,
    rsv: Option<u8>,
    /// Whether `rsvQ` is paused.
    rsv_paused: bool,
    pub stats: UpstreamStats,
}

impl QueueTable {
    pub fn new(queues: usize) -> Self {
        QueueTable {
            flows: vec![0; queues],
            congested: Vec::new(),
            rsv: None,
            rsv_paused: false,
            stats: UpstreamStats::default(),
        }
    }

    /// The reserved congested queue, if allocated.
    #[inline]
    pub fn rsv(&self) -> Option<u8> {
        self.rsv
    }

    /// Bit of `rsvQ` (0 if none): excluded from dynamic mapping while allocated.
    #[inline]
    pub fn rsv_mask(&self) -> u128 {
        self.rsv.map_or(0, |q| 1u128 << q)
    }

    /// Flows mapped to `q` by the caller (flows moved to `rsvQ` still count in their own).
    pub fn flows(&self, q: usize) -> u32 {
        self.flows.get(q).copied().unwrap_or(0)
    }

    /// Active flows of `q` (Alg. 1's `N`): those mapped there but not moved to `rsvQ`, and
    /// for `rsvQ` the flows held in it.
    #[inline]
    pub fn active(&self, q: usize) -> u32 {
        let mut n = self.flows(q);
        if !self.congested.is_empty() {
            for c in &self.congested {
                if c.in_rsv {
                    if usize::from(c.home) == q {
                        n = n.saturating_sub(1);
                    }
                    if self.rsv.map(usize::from) == Some(q) {
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// The flows held in `rsvQ` and their packets there: (FID, packets).
    pub fn held(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.congested
            .iter()
            .filter(|c| c.in_rsv)
            .map(|c| (c.fid, c.rsv_pkts))
    }

    /// Congested flows held in `rsvQ`.
    pub fn rsv_flows(&self) -> u32 {
        self.congested.iter().filter(|c| c.in_rsv).count() as u32
    }

    /// Whether no flow is congested (the per-packet fast path).
    #[inline]
    pub fn is_quiet(&self) -> bool {
        self.congested.is_empty()
    }

    /// A flow started in `q` (its first packet in the device).
    #[inline]
    pub fn flow_in(&mut self, q: usize) {
        if let Some(n) = self.flows.get_mut(q) {
            *n += 1;
        }
    }

    /// A flow of `q` has no packet left in the device.
    #[inline]
    pub fn flow_out(&mut self, q: usize) {
        if let Some(n) = self.flows.get_mut(q) {
            *n = n.saturating_sub(1);
        }
    }

    /// PAUSE(q, `fid`): the flow is mapped to `home` (its own queue, `None` if it has no
    /// packet in the device: then `q` as named) with `pkts` packets in the device;
    /// `empty` is the port's bitmap of empty queues a `rsvQ` may be taken from; `shared`:
    /// treat the flow's queue as shared whatever it holds now (a forced placement maps every
    /// later flow there).
    #[allow(clippy::too_many_arguments)]
    pub fn on_pause(
        &mut self,
        fid: u32,
        named: u8,
        home: Option<u8>,
        pkts: u32,
        empty: u128,
        shared: bool,
        out: &mut Vec<QueueCmd>,
    ) -> PauseAction {
        self.stats.pauses_received += 1;
        if let Some(c) = self.congested.iter_mut().find(|c| c.fid == fid) {
            if !c.resumed {
                return PauseAction::Already;
            }
            // Paused again after a RESUME while still held: hold it again.
            c.resumed = false;
            if c.in_rsv {
                let rsv = self.rsv.unwrap_or(c.home);
                if !self.rsv_paused {
                    self.rsv_paused = true;
                    out.push(QueueCmd::Pause(rsv));
                }
                return PauseAction::Reserved {
                    rsv,
                    allocated: false,
                };
            }
            let h = c.home;
            out.push(QueueCmd::Pause(h));
            return PauseAction::Queue(h);
        }
        let home = home.unwrap_or(named);
        let hq = usize::from(home);
        // Uncongested flows in the flow's queue: not itself (if it has packets here), not the
        // held flows already moved out of it.
        let moved = self
            .congested
            .iter()
            .filter(|c| c.in_rsv && c.home == home)
            .count() as u32;
        let others = self
            .flows(hq)
            .saturating_sub(u32::from(pkts > 0))
            .saturating_sub(moved);
        let already_rsv = self.rsv == Some(home);
        if (others == 0 && !shared) || already_rsv {
            self.stats.queue_pauses += 1;
            self.congested.push(Congested {
                fid,
                home,
                in_rsv: already_rsv,
                resumed: false,
                rsv_pkts: 0,
                old_pkts: 0,
            });
            if already_rsv {
                self.rsv_paused = true;
            }
            out.push(QueueCmd::Pause(home));
            return PauseAction::Queue(home);
        }
        let Some((rsv, allocated)) = self.take_rsv(empty, home) else {
            self.stats.no_rsv += 1;
            self.congested.push(Congested {
                fid,
                home,
                in_rsv: false,
                resumed: false,
                rsv_pkts: 0,
                old_pkts: 0,
            });
            out.push(QueueCmd::Pause(home));
            return PauseAction::NoRsv(home);
        };
        self.stats.flows_reassigned += 1;
        self.congested.push(Congested {
            fid,
            home,
            in_rsv: true,
            resumed: false,
            rsv_pkts: 0,
            old_pkts: pkts,
        });
        if !self.rsv_paused {
            self.rsv_paused = true;
            out.push(QueueCmd::Pause(rsv));
        }
        PauseAction::Reserved { rsv, allocated }
    }

    /// `rsvQ`, allocated now from `empty` (never `home`) if there is none; `None` if no
    /// queue is free.
    fn take_rsv(&mut self, empty: u128, home: u8) -> Option<(u8, bool)> {
        if let Some(r) = self.rsv {
            return Some((r, false));
        }
        let lim = if self.flows.len() >= 128 {
            u128::MAX
        } else {
            (1u128 << self.flows.len()) - 1
        };
        let cand = empty & !(1u128 << home) & lim;
        if cand == 0 {
            return None;
        }
        let r = cand.trailing_zeros() as u8;
        self.rsv = Some(r);
        self.stats.rsv_allocations += 1;
        Some((r, true))
    }

    /// A flow other than the held ones was mapped to `q`: if `q` is paused for flows alone
    /// in it, it is shared now, and §3.3's rule for a shared queue applies: those flows'
    /// later packets go to `rsvQ` (taken from `empty` if there is none; paused), their packets
    /// still in `q` (`pkts(fid)`) must leave before `rsvQ` runs, and `q` resumes, so the
    /// newcomer is not held behind another flow's pause. Without a queue for `rsvQ`, `q`
    /// stays paused. Returns whether the queue was shared out.
    pub fn on_join(
        &mut self,
        q: u8,
        empty: u128,
        pkts: impl Fn(u32) -> u32,
        out: &mut Vec<QueueCmd>,
    ) -> bool {
        if !self.congested.iter().any(|c| !c.in_rsv && c.home == q) {
            return false;
        }
        let Some((rsv, _)) = self.take_rsv(empty, q) else {
            return false;
        };
        for c in self
            .congested
            .iter_mut()
            .filter(|c| !c.in_rsv && c.home == q)
        {
            c.in_rsv = true;
            c.old_pkts = pkts(c.fid);
            self.stats.flows_reassigned += 1;
            self.stats.shared_on_join += 1;
        }
        if !self.rsv_paused {
            self.rsv_paused = true;
            out.push(QueueCmd::Pause(rsv));
        }
        out.push(QueueCmd::Resume(q));
        true
    }

    /// The held flows `q` is paused for (each alone in it when paused).
    pub fn lone_flows(&self, q: u8) -> impl Iterator<Item = u32> + '_ {
        self.congested
            .iter()
            .filter(move |c| !c.in_rsv && c.home == q)
            .map(|c| c.fid)
    }

    /// Whether `q` is paused for a held flow alone in it.
    #[inline]
    pub fn lone_held(&self, q: u8) -> bool {
        !self.congested.is_empty() && self.congested.iter().any(|c| !c.in_rsv && c.home == q)
    }

    /// The queue paused for `fid` if it is held there (it was alone in it): a flow that
    /// comes back with no packet left must return to it, not to a fresh unpaused queue.
    #[inline]
    pub fn paused_home(&self, fid: u32) -> Option<u8> {
        if self.congested.is_empty() {
            return None;
        }
        self.congested
            .iter()
            .find(|c| c.fid == fid && !c.in_rsv)
            .map(|c| c.home)
    }

    /// RESUME(q, `fid`): a flow paused in its own queue resumes it (unless another held flow
    /// still pauses that queue); a flow in `rsvQ` is marked resumed and `rsvQ` resumes when
    /// the conditions of the module doc hold.
    pub fn on_resume(&mut self, fid: u32, out: &mut Vec<QueueCmd>) {
        self.stats.resumes_received += 1;
        let Some(i) = self.congested.iter().position(|c| c.fid == fid) else {
            return;
        };
        let c = self.congested[i];
        if !c.in_rsv {
            self.congested.swap_remove(i);
            let h = c.home;
            let still = self
                .congested
                .iter()
                .any(|o| !o.in_rsv && !o.resumed && o.home == h);
            if !still {
                out.push(QueueCmd::Resume(h));
            }
            return;
        }
        self.congested[i].resumed = true;
        self.settle(out);
    }

    /// The queue a packet of `fid` goes to instead of its mapped one (`None`: its own). A
    /// resumed flow with no packet left in `rsvQ` returns to its mapping here.
    #[inline]
    pub fn steer(&mut self, fid: u32, out: &mut Vec<QueueCmd>) -> Option<u8> {
        if self.congested.is_empty() {
            return None;
        }
        let i = self
            .congested
            .iter()
            .position(|c| c.fid == fid && c.in_rsv)?;
        let c = &mut self.congested[i];
        if c.resumed && c.rsv_pkts == 0 && c.old_pkts == 0 {
            self.congested.swap_remove(i);
            self.settle(out);
            return None;
        }
        c.rsv_pkts += 1;
        self.rsv
    }

    /// A packet of `fid` left `queue`: the held flow's counts, and `rsvQ`'s resume/release.
    #[inline]
    pub fn departed(&mut self, fid: u32, queue: u8, out: &mut Vec<QueueCmd>) {
        if self.congested.is_empty() {
            return;
        }
        let rsv = self.rsv;
        let Some(c) = self.congested.iter_mut().find(|c| c.fid == fid && c.in_rsv) else {
            return;
        };
        if Some(queue) == rsv && c.rsv_pkts > 0 {
            c.rsv_pkts -= 1;
        } else {
            c.old_pkts = c.old_pkts.saturating_sub(1);
        }
        self.settle(out);
    }

    /// A packet of `fid` that [`steer`](Self::steer) sent to `rsvQ` was not queued (dropped).
    pub fn unsteer(&mut self, fid: u32) {
        if let Some(c) = self.congested.iter_mut().find(|c| c.fid == fid && c.in_rsv) {
            c.rsv_pkts = c.rsv_pkts.saturating_sub(1);
        }
    }

    /// `rsvQ` resumes when every held flow is resumed and their old packets have left; a
    /// resumed flow with nothing left anywhere leaves the table; `rsvQ` is released when no
    /// flow holds it.
    fn settle(&mut self, out: &mut Vec<QueueCmd>) {
        let Some(rsv) = self.rsv else { return };
        self.congested
            .retain(|c| !(c.in_rsv && c.resumed && c.rsv_pkts == 0 && c.old_pkts == 0));
        let held: Vec<&Congested> = self.congested.iter().filter(|c| c.in_rsv).collect();
        let ready = held.iter().all(|c| c.resumed && c.old_pkts == 0);
        if self.rsv_paused && ready {
            self.rsv_paused = false;
            out.push(QueueCmd::Resume(rsv));
        }
        if held.is_empty() {
            self.rsv = None;
            self.stats.rsv_releases += 1;
        }
    }
}

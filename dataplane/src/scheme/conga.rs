//! CONGA (issue 18's baseline; `loadbal::conga`, CONGA SIGCOMM'14 §3) as a path scheme: the
//! adapter between the pipeline and the decision module.
//!
//! - Ingress: pop the data shim version 3 (`flowctl::wire::conga`) into the packet's metadata.
//! - Forward ([`CongaScheme::route`], where the path policy would pick among equal-cost next
//!   hops): at the source leaf a packet without a shim looks up its flowlet; a new flowlet
//!   takes the uplink minimising max(local DRE, Congestion-To-Leaf[dst leaf][uplink]); the
//!   packet gets a shim with `LBTag` = that uplink, `CE` = 0 and one piggybacked
//!   Congestion-From-Leaf entry for the destination leaf. At the destination leaf the shim's
//!   `CE` goes into Congestion-From-Leaf and its feedback into Congestion-To-Leaf, and the
//!   packet leaves by the switch's own route without the shim. Elsewhere (spines) the switch's
//!   path policy forwards it.
//! - Egress, on a port toward another CONGA switch (a fabric link): the link's DRE counts the
//!   frame, `CE` is raised to the link's quantised DRE and the shim is pushed again.
//!
//! Feedback rides on data going the other way only, as in CONGA: a leaf that sends nothing back
//! to a source leaf never tells it anything, and its metrics age out there
//! (`loadbal::conga::Params::t_age_ps`).
//!
//! The DREs live in the pipe that transmits on the port while flowlets are decided in the
//! pipe that received the packet: like Proteus, the scheme assumes one pipe per switch (the
//! virtual-time fabric's); a multi-pipe switch would need the DREs shared.

use super::PktMeta;
use crate::config::conga::CongaSpec;
use crate::config::SwitchSpec;
use crate::frame::{FrameMem, Pkt};
use flowctl::wire::conga::{ShimRepr, ETHERTYPE_XOFF_SHIM, SHIM_LEN, SHIM_VERSION};
use loadbal::conga::{CongaLeaf, Dre, Params, MAX_UPLINKS};
use loadbal::{Candidate, FiveTuple};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::sync::Arc;

/// Flowlet-table entries (CONGA §3.4's table has 64K).
const FLOWLET_SLOTS: usize = 1 << 16;
/// Seed of the flowlet key hash (any constant: the key is local to this switch).
const FLOWLET_KEY_SEED: u32 = 0x434f_4e47;
/// New-flowlet decisions kept in the statistics (to show what a flow saw when it chose).
const CHOICE_LOG: usize = 256;

/// One new-flowlet decision: what the source leaf saw and took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowletChoice {
    /// Virtual time, ps.
    pub t_ps: u64,
    /// The flow's destination address and ports.
    pub dst: String,
    pub sport: u16,
    pub dport: u16,
    /// The uplink (index among the equal-cost next hops, `LBTag`).
    pub uplink: u8,
    /// Per uplink: quantised local DRE.
    pub local: Vec<u8>,
    /// Per uplink: Congestion-To-Leaf toward the destination leaf.
    pub remote: Vec<u8>,
    /// Per uplink: the packet's queue there was PFC-paused (CONGA does not look at it).
    pub paused: Vec<bool>,
}

/// Counters of one pipe's CONGA.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongaStats {
    /// Packets that got a shim here (source leaf).
    pub routed: u64,
    /// Of those, packets that started a flowlet.
    pub new_flowlets: u64,
    /// Shimmed packets that ended their fabric path here (destination leaf).
    pub arrivals: u64,
    /// Feedback entries piggybacked and applied.
    pub feedback_sent: u64,
    pub feedback_applied: u64,
    /// The first new-flowlet decisions (at most 256).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<FlowletChoice>,
}

/// The shim as kept in [`PktMeta`]'s first word: bit 31 "has shim", LBTag bits 0–3, CE 4–6,
/// FB valid 7, FB_LBTag 8–11, FB_Metric 12–14, source leaf 16–30.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta(Option<ShimRepr>);

impl Meta {
    #[inline]
    fn get(pkt: &Pkt) -> Meta {
        let w = pkt.scheme.0[0];
        if w >> 31 == 0 {
            return Meta(None);
        }
        Meta(Some(ShimRepr {
            lbtag: (w & 0xF) as u8,
            ce: (w >> 4 & 7) as u8,
            fb: (w >> 7 & 1 == 1).then_some(((w >> 8 & 0xF) as u8, (w >> 12 & 7) as u8)),
            src_leaf: (w >> 16 & 0x7FFF) as u16,
        }))
    }

    #[inline]
    fn set(self, pkt: &mut Pkt) {
        let w = match self.0 {
            None => 0,
            Some(s) => {
                let (fv, ft, fm) = s.fb.map_or((0, 0, 0), |(t, m)| (1, t, m));
                1 << 31
                    | u32::from(s.lbtag & 0xF)
                    | u32::from(s.ce & 7) << 4
                    | fv << 7
                    | u32::from(ft & 0xF) << 8
                    | u32::from(fm & 7) << 12
                    | u32::from(s.src_leaf & 0x7FFF) << 16
            }
        };
        let PktMeta([_, b, c]) = pkt.scheme;
        pkt.scheme = PktMeta([w, b, c]);
    }
}

/// CONGA state of one pipe.
#[derive(Debug)]
pub struct CongaScheme {
    spec: Arc<CongaSpec>,
    params: Params,
    rates: Vec<u64>,
    /// One DRE per port (only fabric ports' are fed).
    dre: Vec<Dre>,
    /// At a leaf: its tables and flowlets.
    leaf: Option<CongaLeaf>,
    /// Time of the departure being rewritten (set by `on_dequeue`, read by `egress_rewrite`).
    now: u64,
    stats: CongaStats,
}

impl CongaScheme {
    /// CONGA for `spec` if it runs `lb = "conga"`. Parameters: CONGA §3.6's scaled to the
    /// slowest fabric link (`Params::scaled`).
    pub fn new(spec: &SwitchSpec) -> Option<Self> {
        let cs = spec.conga.clone()?;
        let rate = spec
            .ports
            .iter()
            .zip(&cs.conga_peer)
            .filter(|(_, &p)| p)
            .map(|(p, _)| p.rate_bps)
            .min()
            .unwrap_or(loadbal::conga::PAPER_RATE_BPS);
        let params = Params::scaled(rate);
        let leaf = cs.leaf.map(|_| {
            CongaLeaf::new(
                params,
                usize::from(cs.leaves),
                FLOWLET_SLOTS,
                u64::from(spec.seed) << 32 | 0xC0A6,
            )
        });
        Some(CongaScheme {
            params,
            rates: spec.ports.iter().map(|p| p.rate_bps).collect(),
            dre: vec![Dre::default(); spec.ports.len()],
            leaf,
            now: 0,
            stats: CongaStats::default(),
            spec: cs,
        })
    }

    pub fn stats(&self) -> CongaStats {
        self.stats.clone()
    }

    /// The parameters in use.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Pops the version-3 shim into the metadata ("no shim" if the frame has none).
    #[inline(never)]
    pub fn on_ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) {
        let mut m = Meta(None);
        let d = mem.data(pkt.frame);
        if pkt.len as usize >= flowctl::wire::conga::SHIM_OFF + SHIM_LEN + 2
            && d[12..14] == ETHERTYPE_XOFF_SHIM.to_be_bytes()
            && d[14] >> 4 == SHIM_VERSION
        {
            let len = pkt.len as usize;
            if let Some((r, n)) =
                mem.with_mut(pkt.frame, |d| ShimRepr::pop(&mut d[..len], len).ok())
            {
                m = Meta(Some(r));
                pkt.len = n as u32;
            }
        }
        m.set(pkt);
    }

    /// Where `pkt` goes among the `n` candidates `view` describes, or `None` to leave it to
    /// the switch's path policy (spines, the destination leaf, local traffic).
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
        let IpAddr::V4(dst) = t.dst else { return None };
        let dst_leaf = spec.host_leaf.get(&u32::from(dst)).copied();
        if let Meta(Some(s)) = Meta::get(pkt) {
            if spec.leaf.is_some() && dst_leaf == spec.leaf {
                // Destination leaf: the path's congestion, and the feedback it carries.
                let leaf = self.leaf.as_mut()?;
                let src = usize::from(s.src_leaf);
                leaf.on_arrival(src, usize::from(s.lbtag), s.ce);
                self.stats.arrivals += 1;
                if let Some((tag, metric)) = s.fb {
                    leaf.on_feedback(src, usize::from(tag), metric, now);
                    self.stats.feedback_applied += 1;
                }
                Meta(None).set(pkt);
            }
            return None;
        }
        let me = spec.leaf?;
        let d = dst_leaf?;
        if d == me || n > MAX_UPLINKS {
            return None;
        }
        let leaf = self.leaf.as_mut()?;
        let (dre, rates, p) = (&self.dre, &self.rates, &self.params);
        let local = |i: usize| {
            let port = usize::from(view(i).port);
            let mut x = dre[port];
            x.metric(p, rates[port], now)
        };
        let key = loadbal::ecmp_hash(FLOWLET_KEY_SEED, t);
        let c = leaf.pick(key, usize::from(d), n, local, now)?;
        self.stats.routed += 1;
        if c.new_flowlet {
            self.stats.new_flowlets += 1;
            if self.stats.choices.len() < CHOICE_LOG {
                self.stats.choices.push(FlowletChoice {
                    t_ps: now,
                    dst: dst.to_string(),
                    sport: t.sport,
                    dport: t.dport,
                    uplink: c.uplink as u8,
                    local: (0..n).map(local).collect(),
                    remote: (0..n)
                        .map(|i| leaf.to_leaf(usize::from(d), i, now))
                        .collect(),
                    paused: (0..n).map(|i| view(i).paused).collect(),
                });
            }
        }
        let fb = leaf.feedback_for(usize::from(d));
        self.stats.feedback_sent += u64::from(fb.is_some());
        Meta(Some(ShimRepr {
            lbtag: c.uplink as u8,
            ce: 0,
            fb,
            src_leaf: me,
        }))
        .set(pkt);
        Some(c.uplink)
    }

    /// Remembers the departure time for `egress_rewrite`.
    #[inline(never)]
    pub fn on_dequeue(&mut self, now: u64) {
        self.now = now;
    }

    /// On a fabric link: the DRE counts the frame, CE rises to the link's metric and the shim
    /// goes on the wire.
    #[inline(never)]
    pub fn egress_rewrite<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &Pkt,
        len: u32,
        port: usize,
    ) -> u32 {
        if !self.spec.conga_peer.get(port).copied().unwrap_or(false) {
            return len;
        }
        let Meta(shim) = Meta::get(pkt);
        let wire = len + if shim.is_some() { SHIM_LEN as u32 } else { 0 };
        let dre = &mut self.dre[port];
        dre.on_send(&self.params, u64::from(wire), self.now);
        let Some(mut s) = shim else { return len };
        s.ce =
            s.ce.max(dre.metric(&self.params, self.rates[port], self.now));
        mem.with_mut(pkt.frame, |d| s.push(d, len as usize))
            .map_or(len, |n| n as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameId;

    #[test]
    fn meta_round_trips_the_shim_and_keeps_the_other_words() {
        let mut p = Pkt::new(FrameId(0), 100, 0, 0);
        let others = [p.scheme.0[1], p.scheme.0[2]];
        for s in [
            ShimRepr {
                lbtag: 0xF,
                ce: 7,
                fb: Some((0xE, 6)),
                src_leaf: 0x7FFF,
            },
            ShimRepr {
                lbtag: 0,
                ce: 0,
                fb: None,
                src_leaf: 0,
            },
        ] {
            Meta(Some(s)).set(&mut p);
            assert_eq!(Meta::get(&p), Meta(Some(s)));
            assert_eq!([p.scheme.0[1], p.scheme.0[2]], others);
        }
        Meta(None).set(&mut p);
        assert_eq!(Meta::get(&p), Meta(None));
    }
}

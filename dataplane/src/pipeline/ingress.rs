//! Ingress stages: `ingress → parse → control_in → classify → forward → dispatch`.

use super::{Handoff, Outputs};
use crate::config::PrioSource;
use crate::fib::{Classified, Forward};
use crate::frame::{FrameId, FrameMem, Pkt};
use crate::parse::{self, PacketMeta, L3};
use crate::stats::DropReason;
use crate::switch::Switch;
use crate::wire::{EtherType, EthernetFrame};

/// Where `forward` sends a packet.
pub(crate) enum Route {
    Drop(DropReason),
    Port(u16),
    Flood,
}

impl Switch {
    /// Counts the frame and lets the schemes strip what they added upstream; false if it
    /// was dropped (oversize).
    #[inline]
    pub(crate) fn ingress<M: FrameMem>(&mut self, mem: &mut M, pkt: &mut Pkt) -> bool {
        let ip = usize::from(pkt.in_port);
        self.shared.counters[ip].rx(pkt.len);
        if pkt.len as usize > mem.room() {
            self.ledger.dropped_pre(pkt.in_port, DropReason::Oversize);
            self.drop_at(ip, mem, pkt.frame, DropReason::Oversize);
            return false;
        }
        self.schemes.on_ingress(mem, pkt);
        true
    }

    /// Parses the frame. The caller drops a malformed frame (`drop_at`); the result is not
    /// turned into an `Option` here, since that copies the metadata right after `parse` wrote it.
    #[inline]
    pub(crate) fn parse<M: FrameMem>(&self, mem: &M, pkt: &Pkt) -> Result<PacketMeta, DropReason> {
        parse::parse(&mem.data(pkt.frame)[..pkt.len as usize])
    }

    /// Link-local control frames (PFC, Xoff signals) are never forwarded: the scheme that
    /// knows the frame consumes it, else it is counted and dropped. True if the frame was
    /// control.
    #[inline]
    pub(crate) fn control_in<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &Pkt,
        meta: &PacketMeta,
        now: u64,
        out: &mut Outputs,
    ) -> bool {
        let et = meta.ethertype;
        if et != EtherType::MAC_CONTROL && et != EtherType::XOFF_SIGNAL {
            return false;
        }
        let ip = usize::from(pkt.in_port);
        let data = &mem.data(pkt.frame)[..pkt.len as usize];
        match self.schemes.on_control(ip, et, data, &self.shared.afc, now) {
            Some(wake) => {
                self.ledger.consumed(pkt.in_port);
                mem.free(pkt.frame);
                if wake && self.owns(ip) {
                    // Resumed queues may be eligible now.
                    out.touch(pkt.in_port);
                }
            }
            None => {
                self.ledger.dropped_pre(pkt.in_port, DropReason::MacControl);
                self.drop_at(ip, mem, pkt.frame, DropReason::MacControl)
            }
        }
        true
    }

    /// Priority from the PCP or DSCP as the ingress port says; L3 facts for ECN marking; the
    /// schemes' per-flow metadata.
    #[inline]
    pub(crate) fn classify(&mut self, pkt: &mut Pkt, m: &PacketMeta) {
        let dscp = match m.l3 {
            L3::Ip { dscp, .. } => Some(dscp >> 3),
            L3::None => None,
        };
        pkt.prio = match self.shared.hot[usize::from(pkt.in_port)].prio_source {
            PrioSource::Pcp => m.pcp.unwrap_or(0),
            PrioSource::Dscp => dscp.unwrap_or(0),
            PrioSource::Auto => m.pcp.or(dscp).unwrap_or(0),
        };
        pkt.ect = m.ecn_capable();
        self.schemes.on_parsed(pkt, m);
        if matches!(m.l3, L3::Ip { .. }) {
            pkt.l3_type = m.ethertype;
            pkt.l3_off = m.l3_off as u8;
        }
    }

    /// FIB lookup, then the path policy among equal-cost next hops (seeing each candidate's
    /// pause state and queue bytes), then the L3 rewrite of a routed frame. A flow's next hop
    /// comes from the pipe's flow cache when its path choice depends on the 5-tuple alone.
    #[inline]
    pub(crate) fn forward<M: FrameMem>(
        &mut self,
        mem: &mut M,
        pkt: &mut Pkt,
        meta: &PacketMeta,
        now: u64,
    ) -> Route {
        let shared = &*self.shared;
        let learned = self.learned.get_mut(usize::from(pkt.in_port));
        let tuple = match shared.fib.classify(pkt.in_port, meta, learned) {
            Classified::Route(tuple) => tuple,
            Classified::Other(Forward::Drop(r)) => return Route::Drop(r),
            Classified::Other(Forward::Bridge(p)) => return Route::Port(p),
            Classified::Other(Forward::Flood) => return Route::Flood,
            Classified::Other(Forward::Route { .. }) => unreachable!("classify never routes"),
        };
        let cached = self.flows.as_ref().and_then(|c| c.get(tuple));
        let nh = match cached {
            Some(nh) => nh,
            None => {
                let Some(group) = shared.fib.group(tuple) else {
                    return Route::Drop(DropReason::NoRoute);
                };
                let egress = &self.egress;
                let prio = usize::from(pkt.prio & 7);
                let view = |i: usize| {
                    let port = usize::from(group[i].port);
                    let q = usize::from(shared.hot[port].prio_map[prio]);
                    loadbal::Candidate {
                        port: group[i].port,
                        paused: shared.afc.port(port).is_paused(q, now),
                        queue_bytes: egress[port].as_ref().map_or(0, |e| e.qs.data[q].bytes()),
                        port_bytes: egress[port].as_ref().map_or(0, |e| e.qs.data_bytes()),
                    }
                };
                // A path scheme (Proteus) routes by itself; else the path policy picks.
                // (`view` is `Copy`: it is built where a scheme or policy reads it.)
                let routed = if self.schemes.routes() {
                    self.schemes.route(pkt, tuple, group.len(), view, now)
                } else {
                    None
                };
                let Some(i) = routed.or_else(|| self.policy.pick(tuple, group.len(), view, now))
                else {
                    return Route::Drop(DropReason::NoRoute);
                };
                if let Some(c) = self.flows.as_mut() {
                    c.put(tuple, group[i]);
                }
                group[i]
            }
        };
        let out_mac = shared.hot[usize::from(nh.port)].mac;
        mem.with_mut(pkt.frame, |d| {
            let data = &mut d[..pkt.len as usize];
            let mut eth = EthernetFrame::new_unchecked(&mut *data);
            eth.set_dst_addr(nh.mac);
            eth.set_src_addr(out_mac);
            parse::decrement_ttl(data, meta);
        });
        Route::Port(nh.port)
    }

    /// The static queue by priority; enqueued here if this pipe owns the port, else handed
    /// off.
    #[inline]
    pub(crate) fn dispatch<M: FrameMem>(
        &mut self,
        mem: &mut M,
        port: u16,
        pkt: &mut Pkt,
        now: u64,
        out: &mut Outputs,
    ) {
        let p = usize::from(port);
        pkt.queue = self.shared.hot[p].prio_map[usize::from(pkt.prio & 7)];
        if self.owns(p) {
            self.enqueue(mem, port, pkt, now, out);
        } else {
            self.ledger.handed(pkt.in_port, pkt.prio);
            out.handoff.push(Handoff {
                port,
                pkt: *pkt,
                ctrl: false,
            });
        }
    }

    /// A copy to every other flooding port that is up.
    pub(crate) fn flood<M: FrameMem>(
        &mut self,
        mem: &mut M,
        mut pkt: Pkt,
        now: u64,
        out: &mut Outputs,
    ) {
        let ip = usize::from(pkt.in_port);
        let targets: Vec<u16> = (0..self.shared.ports())
            .filter(|&p| p != ip && self.shared.spec.ports[p].flood && self.shared.is_up(p))
            .map(|p| p as u16)
            .collect();
        let Some((&last, rest)) = targets.split_last() else {
            self.ledger
                .dropped(pkt.in_port, pkt.prio, DropReason::NoRoute);
            return self.drop_at(ip, mem, pkt.frame, DropReason::NoRoute);
        };
        for &p in rest {
            self.ledger.copy(pkt.in_port, pkt.prio);
            let Some(copy) = mem.alloc() else {
                self.ledger
                    .dropped(pkt.in_port, pkt.prio, DropReason::NoFrame);
                self.shared.counters[ip].drop(DropReason::NoFrame);
                continue;
            };
            mem.copy_frame(pkt.frame, copy, pkt.len as usize);
            self.dispatch(mem, p, &mut Pkt { frame: copy, ..pkt }, now, out);
        }
        self.dispatch(mem, last, &mut pkt, now, out)
    }

    /// Counts a drop on `port` and frees the frame.
    #[inline]
    pub(crate) fn drop_at(&self, port: usize, mem: &mut impl FrameMem, f: FrameId, r: DropReason) {
        self.shared.counters[port].drop(r);
        mem.free(f);
    }
}

//! The host stack as a virtual-time fabric [`HostModel`].
//!
//! The stack paces at the NIC rate, so the fabric NIC's FIFO holds at most about one frame.
//! For the stack to see PFC frames, leave the fabric NIC's own `honor_pfc` off (the default).

use super::wire::{emit_frame, is_mac_control, Header, PORT};
use super::HostStack;
use crate::fabric::host::{FrameTemplate, HostCtx, HostModel};
use crate::frame::{FrameId, FrameMem};
use crate::wire::MacAddr;
use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;

/// Where host `i` of the schedule is: the destination MAC to put on frames toward it (its
/// own if on-link, else the gateway's) and its IPv4 address.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
}

/// A fabric host running a [`HostStack`]; the stack is shared so the caller can read the
/// results after the run.
pub struct StackHost {
    pub stack: Rc<RefCell<HostStack>>,
    pub peers: Vec<PeerAddr>,
    armed: u64,
}

impl StackHost {
    pub fn new(stack: Rc<RefCell<HostStack>>, peers: Vec<PeerAddr>) -> Self {
        StackHost {
            stack,
            peers,
            armed: u64::MAX,
        }
    }

    fn pump(&mut self, ctx: &mut HostCtx<'_>) {
        let now = ctx.now;
        let mut st = self.stack.borrow_mut();
        st.on_tick(now);
        while let Some(seg) = st.poll_send(now) {
            let Some(p) = self.peers.get(seg.dst as usize) else {
                continue;
            };
            let Some(f) = ctx.mem.alloc() else {
                break;
            };
            let tmpl = FrameTemplate {
                src_mac: ctx.info.mac,
                dst_mac: p.mac,
                src_ip: ctx.info.ip,
                dst_ip: p.ip,
                sport: PORT,
                dport: PORT,
                prio: seg.prio,
                vlan: false,
                ecn: false,
            };
            let len = seg.frame_len();
            ctx.mem
                .with_mut(f, |d| emit_frame(&tmpl, &seg.hdr, d, len as usize));
            ctx.send(f, len);
        }
        if let Some(w) = st.next_wakeup(now) {
            if w < self.armed || self.armed <= now {
                self.armed = w;
                ctx.set_timer(w, w);
            }
        }
    }
}

impl HostModel for StackHost {
    fn start(&mut self, ctx: &mut HostCtx<'_>) {
        self.pump(ctx);
    }

    fn on_timer(&mut self, ctx: &mut HostCtx<'_>, token: u64) {
        if token == self.armed {
            self.armed = u64::MAX;
        }
        self.pump(ctx);
    }

    fn on_receive(&mut self, ctx: &mut HostCtx<'_>, frame: FrameId, len: u32) {
        let now = ctx.now;
        {
            let data = ctx.mem.data(frame);
            let data = &data[..(len as usize).min(data.len())];
            let mut st = self.stack.borrow_mut();
            if is_mac_control(data) {
                st.on_pfc(now, data);
            } else if let Some(h) = Header::parse(data) {
                st.on_frame(now, &h, len);
            } else {
                st.counters.rx_other += 1;
            }
        }
        ctx.mem.free(frame);
        self.pump(ctx);
    }
}

/// The peer table host `src` uses: on-link hosts by their MAC, others through `src`'s gateway.
pub fn peer_table(hosts: &[crate::fabric::HostInfo], src: usize) -> Vec<PeerAddr> {
    let me = &hosts[src];
    let mask = |l: u8| {
        if l == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(l))
        }
    };
    let m = mask(me.prefix_len);
    hosts
        .iter()
        .map(|h| PeerAddr {
            mac: if u32::from(h.ip) & m == u32::from(me.ip) & m {
                h.mac
            } else {
                me.gateway_mac.unwrap_or(h.mac)
            },
            ip: h.ip,
        })
        .collect()
}

/// Puts a [`HostStack`] on every host of `fabric` (host index = topology order) running its
/// part of `schedule`; `cfg` makes each host's configuration from its info. Returns the
/// stacks, to read after the run.
pub fn install(
    fabric: &mut crate::fabric::Fabric,
    schedule: &[crate::workload::FlowSpec],
    mut cfg: impl FnMut(&crate::fabric::HostInfo) -> super::StackConfig,
) -> Vec<Rc<RefCell<HostStack>>> {
    let infos: Vec<crate::fabric::HostInfo> =
        fabric.hosts().iter().map(|h| h.info.clone()).collect();
    let mut out = Vec::new();
    for (i, info) in infos.iter().enumerate() {
        let mut c = cfg(info);
        c.host = i as u32;
        let st = Rc::new(RefCell::new(HostStack::new(c, schedule)));
        fabric.set_host_model(
            &info.name,
            Box::new(StackHost::new(st.clone(), peer_table(&infos, i))),
        );
        out.push(st);
    }
    out
}

//! The host stack as a virtual-time fabric [`HostModel`].
//!
//! The stack paces at the NIC rate, so the fabric NIC's FIFO holds at most about one frame.
//! For the stack to see PFC frames, leave the fabric NIC's own `honor_pfc` off (the default).
//! BFC (`[sim] honor_bfc`, `nic_bfc_queues`) is the stack's own: [`install`] turns the
//! stack's BFC mode on with the NIC's queue count and takes the BFC queues off the fabric
//! NIC, so frames are queued, shimmed and paused once, by the stack, and the Xoff signal
//! frames reach it.

use super::wire::emit_segment;
use super::HostStack;
use crate::config::HostInfo;
use crate::fabric::host::{HostCtx, HostModel};
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
            let info = ctx.info;
            let len = ctx.mem.with_mut(f, |d| emit_segment(info, p, &seg, d));
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
            self.stack.borrow_mut().on_receive(now, data, len);
        }
        ctx.mem.free(frame);
        self.pump(ctx);
    }
}

/// The peer table host `src` uses: on-link hosts by their MAC, others through `src`'s gateway.
pub fn peer_table(hosts: &[HostInfo], src: usize) -> Vec<PeerAddr> {
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
/// part of `schedule`; `cfg` makes each host's configuration from its info. A host whose
/// fabric NIC runs BFC (`[sim] honor_bfc`) gets a stack in BFC mode with the NIC's queue
/// count (unless `cfg` chose a count itself), and its NIC becomes a plain FIFO. Returns the
/// stacks, to read after the run.
pub fn install(
    fabric: &mut crate::fabric::Fabric,
    schedule: &[crate::workload::FlowSpec],
    mut cfg: impl FnMut(&HostInfo) -> super::StackConfig,
) -> Vec<Rc<RefCell<HostStack>>> {
    let infos: Vec<HostInfo> = fabric.hosts().iter().map(|h| h.info.clone()).collect();
    let mut out = Vec::new();
    for (i, info) in infos.iter().enumerate() {
        let mut c = cfg(info);
        c.host = i as u32;
        if let Some(b) = fabric.host_nic_mut(&info.name).and_then(|n| n.bfc.take()) {
            if c.bfc_queues == 0 {
                c.bfc_queues = b.count();
            }
        }
        let st = Rc::new(RefCell::new(HostStack::new(c, schedule)));
        fabric.set_host_model(
            &info.name,
            Box::new(StackHost::new(st.clone(), peer_table(&infos, i))),
        );
        out.push(st);
    }
    out
}

//! The host stack as a virtual-time fabric [`HostModel`].
//!
//! The stack paces at the NIC rate, so the fabric NIC's FIFO holds at most about one frame.
//! The stack honours PFC itself: [`install_on`] turns the fabric NIC's own `honor_pfc` off
//! (`[sim] honor_pfc` may have set it), so PFC frames reach the stack.
//! BFC (`[sim] honor_bfc`, `nic_bfc_queues`) is the stack's own: [`install`] turns the
//! stack's BFC mode on with the NIC's queue count and takes the BFC queues off the fabric
//! NIC, so frames are queued, shimmed and paused once, by the stack, and the Xoff signal
//! frames reach it.
//!
//! `xoff sim` runs its `cc` flows ([`crate::config::FlowConfig::cc`]) on stacks installed by
//! [`install_on`] on the hosts that send or receive one; those stacks also write their data
//! frames into the fabric's flow log ([`StackHost::log_flows`]), so the flow table and flow
//! probes cover them.

use super::wire::{emit_segment, FLAG_DATA};
use super::{Header, HostStack};
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
    /// Record data frames sent and received in the fabric's flow log, under the flow id the
    /// stack puts in them (`xoff sim`: the `[[flow]]` index). Off for `xoff experiment`,
    /// whose schedule ids are not flow-log entries.
    pub log_flows: bool,
    armed: u64,
}

impl StackHost {
    pub fn new(stack: Rc<RefCell<HostStack>>, peers: Vec<PeerAddr>) -> Self {
        StackHost {
            stack,
            peers,
            log_flows: false,
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
            if ctx.send(f, len) && self.log_flows && seg.hdr.flags & FLAG_DATA != 0 {
                ctx.flows.record_tx(seg.hdr.flow, len);
            }
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
            if self.log_flows {
                if let Some(h) = Header::parse(data).filter(|h| h.flags & FLAG_DATA != 0) {
                    ctx.flows.record_rx(h.flow, h.seq, h.sent_ps, len, now);
                }
            }
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
/// count (unless `cfg` chose a count itself), and its NIC becomes a plain FIFO; a NIC that
/// honoured PFC (`[sim] honor_pfc`) stops doing so, as the stack honours it
/// ([`StackConfig::honor_pfc`](super::StackConfig::honor_pfc)). A host whose switch sends it
/// Pyrrha's signals (`[switch.pyrrha] hosts = true`) gets a stack in Pyrrha mode (unless `cfg`
/// chose BFC or Pyrrha itself). Returns the stacks, to read after the run.
pub fn install(
    fabric: &mut crate::fabric::Fabric,
    schedule: &[crate::workload::FlowSpec],
    cfg: impl FnMut(&HostInfo) -> super::StackConfig,
) -> Vec<Rc<RefCell<HostStack>>> {
    install_on(fabric, schedule, |_| true, false, cfg)
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

/// The Pyrrha NIC of host `h`, if its switch sends it Pyrrha's signals (`[switch.pyrrha]
/// hosts = true`): the switch's path model, the switch, [`PYRRHA_NIC_QUEUES`] queues.
fn pyrrha_nic(fabric: &crate::fabric::Fabric, h: usize) -> Option<super::pyrrha::PyrrhaNicConfig> {
    let (sw, port) = fabric.hosts().get(h)?.peer?;
    let spec = &fabric.nodes().get(sw as usize)?.shared().spec;
    let p = spec.pyrrha.as_ref()?;
    p.signal
        .get(usize::from(port))
        .copied()?
        .then(|| super::pyrrha::PyrrhaNicConfig {
            model: p.model.clone(),
            tor: sw as u16,
            queues: PYRRHA_NIC_QUEUES,
        })
}

/// NIC queues of a fabric host stack that honours Pyrrha: the OQ and 31 IQs (§4.5 counts
/// 6–20 IQs in use per port under stress).
pub const PYRRHA_NIC_QUEUES: usize = 32;

/// [`install`] on the hosts `on` selects (by index) only, the others keep their model;
/// `log_flows` as [`StackHost::log_flows`]. Returns (host index, stack) of each.
pub fn install_on(
    fabric: &mut crate::fabric::Fabric,
    schedule: &[crate::workload::FlowSpec],
    on: impl Fn(usize) -> bool,
    log_flows: bool,
    mut cfg: impl FnMut(&HostInfo) -> super::StackConfig,
) -> Vec<(usize, Rc<RefCell<HostStack>>)> {
    let infos: Vec<HostInfo> = fabric.hosts().iter().map(|h| h.info.clone()).collect();
    let mut out = Vec::new();
    for (i, info) in infos.iter().enumerate().filter(|&(i, _)| on(i)) {
        let mut c = cfg(info);
        c.host = i as u32;
        if let Some(nic) = fabric.host_nic_mut(&info.name) {
            // The stack honours PFC in its own per-priority queues (and freezes its
            // retransmission timers while paused): the fabric NIC must hand the frames on
            // rather than pause its FIFO behind the stack's back, where the stack's pacer
            // kept filling it (1024 frames, then refused: "lost") and its timers ran on.
            nic.honor_pfc = false;
            if let Some(b) = nic.bfc.take() {
                if c.bfc_queues == 0 {
                    c.bfc_queues = b.count();
                }
            }
        }
        if c.pyrrha.is_none() && c.bfc_queues == 0 {
            c.pyrrha = pyrrha_nic(fabric, i);
        }
        let mut stack = HostStack::new(c, schedule);
        stack.set_addresses(info.ip, infos.iter().map(|h| h.ip).collect());
        let st = Rc::new(RefCell::new(stack));
        let mut model = StackHost::new(st.clone(), peer_table(&infos, i));
        model.log_flows = log_flows;
        fabric.set_host_model(&info.name, Box::new(model));
        out.push((i, st));
    }
    out
}

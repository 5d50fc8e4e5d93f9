//! A whole `Switch` (one pipe, in-memory ports, virtual time) with the shared-buffer MMU (DSH),
//! PFC on every priority and BFC, fed an arbitrary sequence of frames on arbitrary ports:
//! data frames (IPv4/IPv6, 802.1Q, the BFC shim, corrupted at will, in bursts), PFC/PAUSE,
//! BFC and Aquarius signals (other types through raw bytes), raw bytes, AFC pause/resume
//! commands (what `xoff ctl pause|resume` writes), and time passing (egress service and scheme
//! timers, as the fabric's event loop drives them). Bursts make the MMU assert XOFF (PG and
//! port level), PFC frames go out, BFC pauses upstream queues and receives pauses within
//! inputs of a few hundred bytes.
//!
//! After every frame (and every other step) it checks the invariants a researcher relies on
//! for "where did every packet go":
//! - buffer conservation: the MMU's bytes per egress queue equal the bytes the queue holds,
//!   its cells per queue add up to its occupancy, and no release ever exceeded what was
//!   charged (`accounting_errors`, the MMU's "negative occupancy" guard);
//! - the per-queue depth counters (`xoff ctl stats`) equal the queues;
//! - pause state: each PG and port is paused exactly when its XOFFs outnumber its XONs by one,
//!   the pause registers never mark a queue a port does not have, and a timed pause lies in
//!   the future;
//! - frame conservation: at the end, with every pause lifted and time run on, every frame is
//!   back in the free list and the MMU is empty.
#![no_main]

use arbitrary::Arbitrary;
use dataplane::frame::{FrameMem, HeapMem};
use dataplane::switch::{Outputs, Switch};
use dataplane::wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, MacAddr,
    VlanRepr, VlanTag,
};
use dataplane::{SwitchSpec, Topology};
use flowctl::wire::pfc::{Frame as MacFrame, PauseRepr, PfcRepr};
use flowctl::wire::shim::ShimRepr;
use flowctl::wire::signal::{Frame as SigFrame, Signal, SignalRepr};
use flowctl::AfcCmd;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::OnceLock;

/// s1 is the switch under test: three host ports and an uplink to s2, a BFC peer (so the
/// uplink carries the shim and BFC signals); h1 speaks the shim too. The buffer is small so a
/// few dozen frames reach the MMU's XOFF thresholds and PFC and BFC both act.
const TOPO: &str = r#"
name = "fuzz"
[[switch]]
name = "s1"
scheme = "bfc"
defaults = { rate = "1Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }, { name = "up" }]
route = [{ prefix = "10.0.9.0/24", via = ["up"] }]
buffer = { buffer_bytes = 300000, headroom_mode = "dsh", response_ps = 0 }
pfc = { enable_mask = 255 }
bfc = { hrtt = "4us", shim_ports = ["p1"] }
[[switch]]
name = "s2"
scheme = "bfc"
defaults = { rate = "1Gbit", delay = "1us", queues = 8 }
port = [{ name = "down" }, { name = "p4" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.0.3/24"
[[host]]
name = "h4"
ip = "10.0.9.1/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
[[link]]
a = "s1:up"
b = "s2:down"
[[link]]
a = "h4"
b = "s2:p4"
"#;

const FRAMES: usize = 256;
const ROOM: usize = 2048;

struct Fixture {
    spec: SwitchSpec,
    hosts: Vec<MacAddr>,
    peer: MacAddr,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let t = Topology::parse(TOPO, Path::new("fuzz.toml")).expect("fuzz topology");
        let s2 = t.switches.iter().find(|s| s.name == "s2").unwrap();
        Fixture {
            spec: t.switch_spec("s1").expect("s1 spec"),
            hosts: t.hosts.iter().map(|h| t.host_mac(h)).collect(),
            peer: t.port_mac("s2", &s2.ports[0]),
        }
    })
}

#[derive(Arbitrary, Debug)]
enum Dst {
    Host(u8),
    Router,
    Broadcast,
    Mac([u8; 6]),
}

#[derive(Arbitrary, Debug)]
enum Body {
    Ipv4 {
        dst_last: u8,
        remote: bool,
        dscp: u8,
        ecn: u8,
        ttl: u8,
        proto: u8,
    },
    Ipv6 {
        tc: u8,
        hop: u8,
        next: u8,
    },
    Other(u16),
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Data {
        src: u8,
        dst: Dst,
        vlan_pcp: Option<u8>,
        /// Push the BFC data shim with this upstream queue.
        shim: Option<u8>,
        body: Body,
        len: u16,
    },
    Pfc {
        enable: u8,
        quanta: [u16; 8],
    },
    Pause {
        quanta: u16,
    },
    Signal {
        ty: u8,
        queue: u8,
        count: u8,
        bits: u128,
        fid: u32,
    },
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Mangle {
    /// Flip the bits `xor` of the byte at `at` (modulo the length).
    at: u16,
    xor: u8,
    /// Claimed length minus the built length (a short descriptor).
    trim: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Frame {
        port: u8,
        kind: Kind,
        /// Damage to the built frame, if any.
        mangle: Option<Mangle>,
        /// Sent this many more times back to back (a burst, so queues and the MMU fill
        /// within a short input).
        copies: u8,
    },
    /// Let `ns` nanoseconds pass: service every port and run the timers.
    Advance { ns: u16 },
    /// `xoff ctl pause|resume` (an AFC command word), maybe for a port or queue that
    /// does not exist.
    Afc {
        pause: bool,
        port: u8,
        queue: u8,
        credit: u16,
    },
}

fn build(fx: &Fixture, port: usize, kind: &Kind, spec: &SwitchSpec) -> Vec<u8> {
    let peer_or = |i: u8| -> MacAddr {
        // Frames from the uplink come from s2's port, relaying h4 or anyone.
        if port == 3 && i.is_multiple_of(2) {
            return fx.peer;
        }
        fx.hosts[usize::from(i) % fx.hosts.len()]
    };
    match kind {
        Kind::Data {
            src,
            dst,
            vlan_pcp,
            shim,
            body,
            len,
        } => {
            let len = usize::from(*len).clamp(60, 1514);
            let mut f = vec![0u8; len + 8];
            let dst = match dst {
                Dst::Host(i) => fx.hosts[usize::from(*i) % fx.hosts.len()],
                Dst::Router => spec.ports[port].mac,
                Dst::Broadcast => MacAddr::BROADCAST,
                Dst::Mac(m) => MacAddr(*m),
            };
            let et = match body {
                Body::Ipv4 { .. } => EtherType::IPV4,
                Body::Ipv6 { .. } => EtherType::IPV6,
                Body::Other(e) => *e,
            };
            let mut off = 14;
            EthernetRepr {
                src: peer_or(*src),
                dst,
                ethertype: if vlan_pcp.is_some() {
                    EtherType::VLAN
                } else {
                    et
                },
            }
            .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
            if let Some(pcp) = vlan_pcp {
                VlanRepr {
                    pcp: pcp & 7,
                    dei: false,
                    vid: 0,
                    ethertype: et,
                }
                .emit(&mut VlanTag::new_unchecked(&mut f[off..off + 4]));
                off += 4;
            }
            match body {
                Body::Ipv4 {
                    dst_last,
                    remote,
                    dscp,
                    ecn,
                    ttl,
                    proto,
                } => {
                    Ipv4Repr {
                        src: [10, 0, 0, 1].into(),
                        dst: [10, 0, if *remote { 9 } else { 0 }, *dst_last].into(),
                        protocol: *proto,
                        dscp: dscp & 63,
                        ecn: ecn & 3,
                        ttl: *ttl,
                        payload_len: len - off - 20,
                    }
                    .emit(&mut Ipv4Packet::new_unchecked(&mut f[off..]));
                }
                Body::Ipv6 { tc, hop, next } => {
                    Ipv6Repr {
                        src: "fd00::1".parse().unwrap(),
                        dst: "fd00::2".parse().unwrap(),
                        next_header: *next,
                        traffic_class: *tc,
                        flow_label: 7,
                        hop_limit: *hop,
                        payload_len: len - off - 40,
                    }
                    .emit(&mut Ipv6Packet::new_unchecked(&mut f[off..]));
                }
                Body::Other(_) => {}
            }
            let n = match shim {
                Some(q) => ShimRepr {
                    upstream_q: q & 0x7f,
                }
                .push(&mut f, len)
                .unwrap(),
                None => len,
            };
            f.truncate(n);
            f
        }
        Kind::Pfc { enable, quanta } => {
            let r = PfcRepr {
                src_addr: peer_or(0).0,
                class_enable: *enable,
                quanta: *quanta,
            };
            let mut f = vec![0u8; r.buffer_len()];
            r.emit(&mut MacFrame::new_unchecked(&mut f[..]));
            f
        }
        Kind::Pause { quanta } => {
            let r = PauseRepr {
                src_addr: peer_or(0).0,
                quanta: *quanta,
            };
            let mut f = vec![0u8; r.buffer_len()];
            r.emit(&mut MacFrame::new_unchecked(&mut f[..]));
            f
        }
        Kind::Signal {
            ty,
            queue,
            count,
            bits,
            fid,
        } => {
            let (queue, count) = (queue & 0x7f, (*count).min(128));
            let signal = match ty % 5 {
                0 => Signal::Pause(queue),
                1 => Signal::Resume(queue),
                2 => Signal::Bitmap { count, bits: *bits },
                3 => Signal::FlowPause { queue, fid: *fid },
                _ => Signal::FlowResume { queue, fid: *fid },
            };
            let r = SignalRepr {
                dst_addr: spec.ports[port].mac.0,
                src_addr: peer_or(0).0,
                signal,
            };
            let mut f = vec![0u8; r.buffer_len()];
            r.emit(&mut SigFrame::new_unchecked(&mut f[..]));
            f
        }
        Kind::Raw(b) => b.iter().copied().take(ROOM).collect(),
    }
}

/// Every invariant that must hold between two steps.
fn check(sw: &Switch, now: u64) {
    let spec = &sw.shared.spec;
    let m = sw
        .buffer()
        .mmu()
        .expect("the fixture configures the MMU")
        .stats();
    assert_eq!(
        m.counters.accounting_errors, 0,
        "a release exceeded its charge"
    );
    let occ = m.occupancy;
    let total = occ.private + occ.shared + occ.headroom + occ.insurance + occ.lossy;
    let queued_cells: u64 = m.queues.iter().map(|q| u64::from(q.cells)).sum();
    assert_eq!(queued_cells, total, "MMU occupancy != cells of its queues");
    assert!(total <= m.total_cells, "occupancy above the buffer");
    assert_eq!(m.counters.admitted_cells - m.counters.released_cells, total);
    for q in &m.queues {
        assert_eq!(
            q.bytes,
            sw.queue_bytes(q.port, q.queue),
            "MMU bytes != queue bytes at {}/{}",
            q.port,
            q.queue
        );
        assert!(q.lossy <= q.cells);
        assert_eq!(
            sw.shared.counters[q.port].queues[q.queue].depth_bytes.get(),
            q.bytes,
            "depth counter of {}/{}",
            q.port,
            q.queue
        );
    }
    for pg in &m.pgs {
        assert!(
            pg.xoff == pg.xon || pg.xoff == pg.xon + 1,
            "pg {}/{}: {} xoff {} xon",
            pg.port,
            pg.pg,
            pg.xoff,
            pg.xon
        );
        assert_eq!(
            pg.paused,
            pg.xoff > pg.xon,
            "pg {}/{} pause state",
            pg.port,
            pg.pg
        );
    }
    for p in &m.ports {
        assert!(p.port_xoff == p.port_xon || p.port_xoff == p.port_xon + 1);
        assert_eq!(p.paused, p.port_xoff > p.port_xon);
    }
    for (p, ps) in spec.ports.iter().enumerate() {
        let regs = sw.shared.afc.port(p);
        let mask = regs.paused_mask(now);
        assert_eq!(
            mask >> ps.queues.min(128),
            0,
            "port {p}: pause bit beyond its queues"
        );
        for q in 0..ps.queues {
            assert_eq!(regs.is_paused(q, now), mask & (1 << q) != 0);
        }
        if let Some(t) = regs.next_expiry(now) {
            assert!(t > now, "port {p}: lapsed pause reported as in force");
        }
    }
}

/// Runs the switch from `from` to `to` at every wakeup. `timers`: also wake for the schemes'
/// timers (BFC's periodic refresh fires every HRTT; a drain only follows the ports, running
/// the timers that are due on the way).
fn run_to(sw: &mut Switch, mem: &mut HeapMem, from: u64, to: u64, timers: bool, out: &mut Outputs) {
    let ports = sw.shared.spec.ports.len() as u16;
    let mut now = from;
    loop {
        if sw.next_timer().is_some_and(|t| t <= now) {
            sw.on_timer(mem, now, out);
        }
        for p in 0..ports {
            sw.service(mem, p, now, out);
        }
        // The wire takes what was sent.
        for (f, _) in out.tx.drain(..) {
            mem.free(f);
        }
        assert!(out.handoff.is_empty(), "a single pipe handed off");
        let next = (0..ports)
            .filter_map(|p| sw.next_wakeup(p, now))
            .chain(sw.next_timer().filter(|_| timers))
            .filter(|&w| w > now)
            .min();
        match next {
            Some(w) if w <= to => now = w,
            _ => return,
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let fx = fixture();
    let mut sw = Switch::single(fx.spec.clone(), 0).expect("switch");
    let spec = sw.shared.spec.clone();
    let mut mem = HeapMem::new(FRAMES, ROOM);
    let mut out = Outputs::new();
    let mut now = 0u64;
    for op in ops.iter().take(512) {
        match op {
            Op::Frame {
                port,
                kind,
                mangle,
                copies,
            } => {
                let port = usize::from(*port) % spec.ports.len();
                let mut f = build(fx, port, kind, &spec);
                let mut len = f.len();
                if let Some(m) = mangle {
                    if !f.is_empty() {
                        let i = usize::from(m.at) % f.len();
                        f[i] ^= m.xor;
                    }
                    len = len.saturating_sub(usize::from(m.trim));
                }
                for _ in 0..=copies % 64 {
                    let Some(id) = mem.alloc_with(&f) else {
                        // The ring has no free frame: the NIC drops (nothing reaches the switch).
                        break;
                    };
                    sw.receive(&mut mem, port as u16, id, len as u32, now, &mut out);
                    assert!(out.handoff.is_empty(), "a single pipe handed off");
                    check(&sw, now);
                }
                continue;
            }
            Op::Advance { ns } => {
                let to = now + u64::from(*ns) * 1000;
                run_to(&mut sw, &mut mem, now, to, true, &mut out);
                now = to;
            }
            Op::Afc {
                pause,
                port,
                queue,
                credit,
            } => {
                let (p, q) = (usize::from(*port % 8), usize::from(*queue % 16));
                if *pause {
                    if let Ok(c) = AfcCmd::pause(p as u16, q as u8, credit & 0x7fff) {
                        let _ = sw.shared.afc.apply(c, now, 512_000);
                    }
                } else {
                    let _ = sw.shared.afc.resume(p, q);
                }
            }
        }
        check(&sw, now);
    }
    // Drain: lift every pause, run time on; everything must come back.
    for (p, ps) in spec.ports.iter().enumerate() {
        for q in 0..ps.queues {
            let _ = sw.shared.afc.resume(p, q);
            let _ = sw.shared.afc.pfc_resume(p, q);
        }
    }
    // 256 full frames at 1 Gbit/s leave in 3.1 ms; 1 s is ample.
    let end = now + 1_000_000_000_000;
    run_to(&mut sw, &mut mem, now, end, false, &mut out);
    check(&sw, end);
    let m = sw.buffer().mmu().unwrap().stats();
    let occ = m.occupancy;
    assert_eq!(
        occ.private + occ.shared + occ.headroom + occ.insurance + occ.lossy,
        0,
        "MMU not empty after drain"
    );
    assert_eq!(mem.available(), FRAMES, "frames leaked");
});

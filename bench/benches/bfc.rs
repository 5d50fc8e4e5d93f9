//! BFC per-packet cost (`flowctl::bfc`), no I/O:
//!
//! * `bfc/hooks_with_mmu`: the enqueue hooks (flow-table assignment, `N_active`, threshold,
//!   pause counter) and the dequeue hook (flow table, pause counter) around an MMU
//!   admit/release (DSH, 32 ports × 32 queues, 512 packets held), 64 flows, 1/8 of the
//!   packets above `Th` so PAUSE/RESUME frames are generated. Target ≤ 100 ns.
//!   `hooks_with_mmu_new_flows`: the same with every packet the first of a flow.
//! * `bfc/full_path_{static,bfc}`: the whole `Switch` pipeline (receive → … → service) for a
//!   64-byte routed frame, without and with `scheme = "bfc"` (shim stripped on ingress and
//!   pushed on egress toward a BFC peer), so the difference is BFC's share of a packet.
//!
//! Run: `cargo bench -p bench --bench bfc`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dataplane::config::Topology;
use dataplane::frame::{FrameMem, HeapMem};
use dataplane::switch::Outputs;
use dataplane::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
use dataplane::Switch;
use flowctl::bfc::{Bfc, BfcConfig, BfcPort, BfcShared};
use flowctl::PauseRegs;
use mmu::{Admission, HeadroomMode, Mmu, MmuConfig, PacketInfo, PortParams, Ticket};
use std::collections::VecDeque;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

const PORTS: usize = 32;
const QUEUES: usize = 32;
const BACKLOG: usize = 512;

#[derive(Clone, Copy)]
struct Held {
    info: PacketInfo,
    ticket: Ticket,
    slot: u32,
    marked: u16,
    upq: u8,
}

fn hooks(c: &mut Criterion) {
    // 64 long flows (sticky entries) and 4096 flows of which every packet is a new flow's
    // first (the worst case: a queue search per packet).
    hooks_with(c, "hooks_with_mmu", 64);
    hooks_with(c, "hooks_with_mmu_new_flows", 4096);
}

fn hooks_with(c: &mut Criterion, name: &str, flows: u32) {
    let ports: Vec<BfcPort> = (0..PORTS)
        .map(|i| BfcPort {
            rate_bps: 100_000_000_000,
            delay_ps: 1_000_000,
            queues: QUEUES,
            mtu_frame: 1514,
            mac: [2, 0, 0, 0, 0, i as u8],
            peer_mac: None,
        })
        .collect();
    let shared = Arc::new(BfcShared::new(PORTS));
    let mut bfc = Bfc::new(
        BfcConfig::default(),
        &ports,
        &[],
        vec![true; PORTS],
        shared,
        true,
    )
    .expect("bfc");
    let regs: Vec<PauseRegs> = (0..PORTS).map(|_| PauseRegs::new(QUEUES)).collect();
    let params = vec![
        PortParams {
            rate_bps: 100_000_000_000,
            delay_ps: 1_000_000,
            mtu: 1500,
            queues: QUEUES,
        };
        PORTS
    ];
    // 32 MiB: DSH's insurance for 32 ports (η with the default 10 µs response term, held
    // for minimum-size frames) no longer fits the default 16 MiB, and `Mmu::new` refused it.
    let cfg = MmuConfig {
        headroom_mode: HeadroomMode::Dsh,
        buffer_bytes: 32 << 20,
        ..MmuConfig::default()
    };
    let mut mmu = Mmu::new(&cfg, &params).expect("mmu");
    let fids: Vec<u32> = (0..4096u32)
        .map(|i| i % flows)
        .map(|i| flowctl::bfc::fid_hash(u128::from(i % 64), 7, 1000 + i as u16, 5201, 17))
        .collect();
    let mut held: VecDeque<Held> = VecDeque::with_capacity(BACKLOG + 1);
    let mut nonempty = vec![0u128; PORTS];
    let mut sig = Vec::new();
    let (mut i, mut now) = (0usize, 0u64);
    let mut g = c.benchmark_group("bfc");
    g.throughput(Throughput::Elements(1));
    g.bench_function(name, |b| {
        b.iter(|| {
            let k = i & 4095;
            i = i.wrapping_add(1);
            now += 100_000;
            let (inp, out) = (k % 28, 28 + k % 4);
            // Enqueue: assignment, MMU admission, backpressure.
            let paused = regs[out].paused_mask(now);
            let a = bfc.assign(out, fids[k], nonempty[out], paused, now);
            let q = usize::from(a.queue);
            let info = PacketInfo {
                in_port: inp,
                pg: 3,
                out_port: out,
                queue: q,
                bytes: 1000,
                lossless: false,
                ecn_capable: true,
            };
            match mmu.admit(black_box(&info), now) {
                Admission::Admitted { ticket, .. } => {
                    let busy = nonempty[out] | (1 << q);
                    let n = (busy & !paused).count_ones();
                    // 1 in 8 packets finds its queue above Th.
                    let qbytes = if k % 8 == 0 { 1 << 20 } else { 0 };
                    let upq = (k % QUEUES) as u8;
                    let (marked, s) = bfc.on_enqueue(inp, upq, out, q, qbytes, n);
                    if let Some(s) = s {
                        sig.push(s);
                    }
                    nonempty[out] = busy;
                    held.push_back(Held {
                        info,
                        ticket,
                        slot: a.slot,
                        marked,
                        upq,
                    });
                }
                _ => bfc.unassign(a.slot, now),
            }
            // Dequeue: MMU release and the dequeue hook.
            if held.len() > BACKLOG {
                if let Some(h) = held.pop_front() {
                    mmu.release(h.ticket, h.info.bytes, now);
                    let s = bfc.on_dequeue(
                        h.info.out_port,
                        h.info.queue,
                        h.slot,
                        h.marked,
                        h.info.in_port,
                        h.upq,
                        now,
                    );
                    if let Some(s) = s {
                        sig.push(s);
                    }
                    if k % 16 == 0 {
                        nonempty[h.info.out_port] &= !(1 << h.info.queue);
                    }
                }
            }
            sig.clear();
        })
    });
    g.finish();
}

const TOPO: &str = r#"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", delay = "1us", queues = 32 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }, { name = "p4" }]
route = [{ prefix = "10.1.0.0/16", via = ["p3", "p4"] }]
buffer = { buffer_bytes = 16000000 }
[[switch]]
name = "s2"
defaults = { rate = "100Gbit", delay = "1us", queues = 32 }
port = [{ name = "a" }, { name = "b" }, { name = "h3" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.1.0.3/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "s1:p3"
b = "s2:a"
[[link]]
a = "s1:p4"
b = "s2:b"
[[link]]
a = "h3"
b = "s2:h3"
"#;

fn frame(src: MacAddr, dst: MacAddr, sport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    EthernetRepr {
        src,
        dst,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 1, 0, 3),
        protocol: 17,
        dscp: 0,
        ecn: 1,
        ttl: 64,
        payload_len: len - 34,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&5201u16.to_be_bytes());
    f
}

fn full_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("bfc");
    g.throughput(Throughput::Elements(1));
    for bfc in [false, true] {
        let text = if bfc {
            TOPO.replace("name = \"s1\"\n", "name = \"s1\"\nscheme = \"bfc\"\n")
                .replace("name = \"s2\"\n", "name = \"s2\"\nscheme = \"bfc\"\n")
        } else {
            TOPO.to_string()
        };
        let topo = Topology::parse(&text, Path::new("bench.toml")).expect("topology");
        let spec = topo.switch_spec("s1").expect("spec");
        let h1 = topo.host_mac(&topo.hosts[0]);
        let router = spec.ports[0].mac;
        let frames: Vec<Vec<u8>> = (0..64).map(|i| frame(h1, router, 1000 + i, 64)).collect();
        let mut sw = Switch::single(spec, 0).expect("switch");
        let mut mem = HeapMem::new(1024, 1792);
        let mut out = Outputs::new();
        let (mut now, mut i) = (0u64, 0usize);
        let name = if bfc {
            "full_path_bfc"
        } else {
            "full_path_static"
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                let f = mem.alloc_with(&frames[i & 63]).expect("frame");
                i += 1;
                sw.receive(&mut mem, 0, f, 64, now, &mut out);
                now += 6_720;
                for p in [2u16, 3] {
                    sw.service(&mut mem, p, now, &mut out);
                }
                for (f, _) in out.tx.drain(..) {
                    mem.free(f);
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, hooks, full_path);
criterion_main!(benches);

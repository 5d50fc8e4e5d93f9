//! Decision-path cost per packet, no I/O: parsing, FIB lookups (L2; LPM + seeded-CRC32 ECMP),
//! queue/scheduler operations, and the whole pipeline (`Switch::receive` → MMU admit → enqueue
//! → scheduler → shaper → delay line → MMU release) on frames in a heap arena.
//! Target for the full path: ≤ 60 ns/packet.
//!
//! Run: `cargo bench -p bench --bench pipeline`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dataplane::config::Topology;
use dataplane::fib::Forward;
use dataplane::frame::{FrameMem, HeapMem};
use dataplane::parse;
use dataplane::switch::Outputs;
use dataplane::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
use dataplane::Switch;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;

const TOPO: &str = r#"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }, { name = "p4" }]
route = [{ prefix = "10.1.0.0/16", via = ["p3", "p4"] }, { prefix = "10.0.0.2/32", via = ["p2"] }]
buffer = { buffer_bytes = 16000000 }
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.1.0.3/24"
[[host]]
name = "h4"
ip = "10.1.0.4/24"
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
a = "h4"
b = "s1:p4"
"#;

fn frame(src: MacAddr, dst: MacAddr, dip: Ipv4Addr, sport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    EthernetRepr {
        src,
        dst,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: dip,
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

fn bench(c: &mut Criterion) {
    let topo = Topology::parse(TOPO, Path::new("bench.toml")).expect("topology");
    let spec = topo.switch_spec("s1").expect("spec");
    let h1 = topo.host_mac(&topo.hosts[0]);
    let h2 = topo.host_mac(&topo.hosts[1]);
    let router = spec.ports[0].mac;
    let bridged = frame(h1, h2, Ipv4Addr::new(10, 0, 0, 2), 1000, 64);
    let routed: Vec<Vec<u8>> = (0..64)
        .map(|i| frame(h1, router, Ipv4Addr::new(10, 1, 0, 3), 1000 + i, 64))
        .collect();

    let mut g = c.benchmark_group("decision");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse", |b| {
        b.iter(|| black_box(parse::parse(black_box(&bridged))))
    });
    let sw = Switch::single(spec.clone(), 0).expect("switch");
    let meta_b = parse::parse(&bridged).expect("parse");
    let meta_r = parse::parse(&routed[0]).expect("parse");
    g.bench_function("fib_l2", |b| {
        b.iter(|| black_box(sw.shared.fib.forward(0, black_box(&meta_b))))
    });
    let seed = spec.seed;
    g.bench_function("fib_lpm_ecmp", |b| {
        b.iter(|| match sw.shared.fib.forward(0, black_box(&meta_r)) {
            Forward::Route { group, tuple } => {
                black_box(loadbal::ecmp_pick(seed, tuple, group.len()).map(|i| group[i]))
            }
            _ => None,
        })
    });

    // Full pipeline: receive (parse, classify, forward, admit, enqueue) + service (schedule,
    // shape, delay line, release) for one 64-byte frame at a time, routed over ECMP.
    let mut sw = Switch::single(spec, 0).expect("switch");
    let mut mem = HeapMem::new(1024, 1792);
    let mut out = Outputs::new();
    let mut now = 0u64;
    let mut i = 0usize;
    g.bench_function("full_path", |b| {
        b.iter(|| {
            let f = mem.alloc_with(&routed[i & 63]).expect("frame");
            i += 1;
            sw.receive(&mut mem, 0, f, 64, now, &mut out);
            now += 6_720; // one 64 B frame time at 100 Gbit/s
            for p in [2u16, 3] {
                sw.service(&mut mem, p, now, &mut out);
            }
            for (f, _) in out.tx.drain(..) {
                mem.free(f);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

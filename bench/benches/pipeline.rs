//! Decision-path cost per packet, no I/O: parsing, FIB lookups (L2; LPM + seeded-CRC32 ECMP),
//! queue/scheduler operations, and the whole pipeline (`Switch::receive` → MMU admit → enqueue
//! → scheduler → shaper → delay line → MMU release) on frames in a heap arena.
//! Target for the full path: ≤ 60 ns/packet.
//!
//! Run: `cargo bench -p bench --bench pipeline`

use bench::decision::{frame, step, TOPO};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dataplane::config::Topology;
use dataplane::fib::Forward;
use dataplane::frame::HeapMem;
use dataplane::parse;
use dataplane::switch::Outputs;
use dataplane::Switch;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;

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
            step(&mut sw, &mut mem, &mut out, &routed[i & 63], &mut now);
            i += 1;
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

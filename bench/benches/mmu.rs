//! MMU per-packet cost: one `admit` + one `release` per iteration, with a steady backlog of
//! 512 packets spread over 32 ingress ports × 7 lossless PGs into 4 egress queues (enough to
//! sit in the shared segment, cross ECN K_min and keep DT/XOFF logic on the hot path).
//! Target: ≤ 50 ns per packet.
//!
//! Run: `CARGO_TARGET_DIR=/tmp/target-mmu cargo bench -p bench --bench mmu`

use std::collections::VecDeque;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mmu::{Admission, FcEvent, HeadroomMode, Mmu, MmuConfig, PacketInfo, PortParams, Ticket};

const BACKLOG: usize = 512;

fn setup(cfg: &MmuConfig) -> (Mmu, Vec<PacketInfo>) {
    let ports = vec![
        PortParams {
            rate_bps: 100_000_000_000,
            delay_ps: 2_000_000,
            mtu: 1500,
            queues: 8,
        };
        32
    ];
    let mmu = Mmu::new(cfg, &ports).expect("valid bench config");
    let pkts = (0..4096usize)
        .map(|i| PacketInfo {
            in_port: i % 32,
            pg: 1 + (i / 32) % 7,
            out_port: 28 + i % 4,
            queue: 1 + (i / 32) % 7,
            bytes: [64, 1500, 512, 1024][i % 4],
            lossless: true,
            ecn_capable: true,
        })
        .collect();
    (mmu, pkts)
}

fn bench_mode(c: &mut Criterion, name: &str, cfg: MmuConfig) {
    let (mut mmu, pkts) = setup(&cfg);
    let mut held: VecDeque<(PacketInfo, Ticket)> = VecDeque::with_capacity(BACKLOG + 1);
    let mut events: Vec<FcEvent> = Vec::with_capacity(64);
    let mut i = 0usize;
    let mut now = 0u64;
    let mut g = c.benchmark_group("mmu");
    g.throughput(Throughput::Elements(1));
    g.bench_function(format!("admit_release/{name}"), |b| {
        b.iter(|| {
            let p = &pkts[i & 4095];
            i = i.wrapping_add(1);
            now += 100_000;
            if let Admission::Admitted { ticket, mark_ecn } = mmu.admit(black_box(p), now) {
                black_box(mark_ecn);
                held.push_back((*p, ticket));
            }
            if held.len() > BACKLOG {
                if let Some((q, t)) = held.pop_front() {
                    mmu.release(t, q.bytes, now);
                }
            }
            if i & 63 == 0 {
                mmu.poll_events(&mut events);
                events.clear();
            }
        })
    });
    g.finish();
}

fn mmu_benches(c: &mut Criterion) {
    bench_mode(c, "dsh", MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh));
    bench_mode(c, "sih", MmuConfig::dsh_microbenchmark(HeadroomMode::Sih));
    bench_mode(c, "hpcc", MmuConfig::hpcc());
}

criterion_group!(benches, mmu_benches);
criterion_main!(benches);

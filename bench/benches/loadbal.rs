//! Per-packet path decisions of `loadbal` (issue 18): DRILL(2, 1) among a leaf's uplinks,
//! Proteus's source-edge Algorithm 1 plus a hop's Algorithm 2 (targets: DRILL ≤ 60 ns,
//! Proteus ≤ 100 ns per packet), and CONGA's source-leaf decision (flowlet lookup, a new
//! flowlet's choice over local DREs and Congestion-To-Leaf, the piggybacked feedback). Run: `cargo bench -p bench --bench loadbal --
//! --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use loadbal::proteus::{
    min_queuing_delay, Hop, Params, PathEntry, PathId, PathTable, ProteusSource,
};
use loadbal::{Candidate, FiveTuple, PathPolicy};
use std::net::{IpAddr, Ipv4Addr};

const US: u64 = 1_000_000;

fn drill(c: &mut Criterion) {
    let t = FiveTuple {
        proto: 17,
        src: IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)),
        sport: 49152,
        dport: 4791,
    };
    for n in [4usize, 8] {
        // Queue depths that change every packet, so the memory is not always the answer.
        let mut depth: Vec<u64> = (0..n as u64).map(|i| i * 1500).collect();
        let mut p = PathPolicy::drill(1, 0);
        let mut k = 0u64;
        c.bench_function(&format!("drill_pick_{n}"), |b| {
            b.iter(|| {
                k = k.wrapping_add(1);
                depth[(k as usize) % n] = (k * 7919) % 65536;
                let d = &depth;
                let view = |i: usize| Candidate {
                    port: i as u16,
                    paused: false,
                    queue_bytes: d[i],
                    port_bytes: d[i],
                };
                black_box(p.pick(black_box(&t), n, view, k))
            })
        });
    }
}

/// Proteus per packet: Algorithm 1 at the source edge, the packet's departure there (its
/// flow's `t_pre`), Algorithm 2 at a hop and its CST update. `proteus_packet_N`: the paths
/// range from non-congested to congested, so flows settle on a non-congested one and stay
/// (§III-B.1's trigger: no SelectPath for them). `proteus_congested_N`: every path is
/// congested, so every packet of a known flow runs SelectPath over the faster paths (the
/// costliest case of Algorithm 1; flows move by less than their gap).
fn proteus(c: &mut Criterion) {
    for (name, base_us) in [("packet", 10u64), ("congested", 20)] {
        for n in [4u16, 8] {
            proteus_case(c, name, n, base_us);
        }
    }
}

fn proteus_case(c: &mut Criterion, name: &str, n: u16, t_pd_us: u64) {
    let paths = (0..n)
        .map(|i| {
            let mut e = PathEntry::new(PathId(i), i, 10 * US);
            e.t_pd_ps = (t_pd_us + u64::from(i)) * US;
            e.u_permille = if t_pd_us > 10 {
                1000
            } else {
                200 * u32::from(i % 5)
            };
            e
        })
        .collect();
    let mut src = ProteusSource::new(PathTable::new(Params::default(), paths), 4096);
    let mut hop = Hop::new();
    let mut now = 0u64;
    let mut flow = 0u32;
    c.bench_function(&format!("proteus_{name}_{n}"), |b| {
        b.iter(|| {
            now += 120_000; // a 1500 B packet at 100 Gbit/s
            flow = (flow + 1) & 255; // 256 active flows
            let Some(mut d) = src.route(black_box(flow), now) else {
                return;
            };
            src.departed(d.flow, now);
            let t_qd = min_queuing_delay(black_box(30_000), 100_000_000_000);
            let paused = black_box(now & 0x3f_0000 == 0);
            let a = hop.on_arrival(&mut d.shim, d.port, paused, t_qd, |_| true);
            if paused {
                hop.resume(d.port);
            }
            Hop::on_departure(&mut d.shim, now, now + t_qd);
            black_box((a, d));
        })
    });
}

/// CONGA at a source leaf, per packet: the flowlet lookup (256 active flows, 1 in 16 packets
/// starts a flowlet), the choice over `n` uplinks reading each uplink's DRE,
/// the DRE update on the chosen uplink, and one piggybacked feedback entry.
fn conga(c: &mut Criterion) {
    use loadbal::conga::{CongaLeaf, Dre, Params};
    const RATE: u64 = 100_000_000_000;
    for n in [4usize, 8] {
        let p = Params::scaled(RATE);
        let mut leaf = CongaLeaf::new(p, 8, 1 << 16, 1);
        let mut dre = vec![Dre::default(); n];
        for l in 0..8 {
            for u in 0..n {
                leaf.on_arrival(l, u, (u % 8) as u8);
                leaf.on_feedback(l, u, ((u * 3) % 8) as u8, 0);
            }
        }
        let mut now = 0u64;
        let mut k = 0u32;
        c.bench_function(&format!("conga_packet_{n}"), |b| {
            b.iter(|| {
                now += 120_000; // a 1500 B packet at 100 Gbit/s
                k = k.wrapping_add(1);
                // 256 flows; every 4096 packets all pause longer than T_fl, so each flow's
                // next packet (1 in 16) starts a flowlet.
                if k.is_multiple_of(4096) {
                    now += p.t_fl_ps + 1;
                }
                let flow = k & 255;
                let t = now;
                let d = &dre;
                let local = |i: usize| {
                    let mut x = d[i];
                    x.metric(&p, RATE, t)
                };
                let ch = leaf.pick(black_box(flow.wrapping_mul(2_654_435_761)), 3, n, local, t);
                if let Some(ch) = ch {
                    dre[ch.uplink].on_send(&p, 1500, t);
                }
                black_box((ch, leaf.feedback_for(3)));
            })
        });
    }
}

criterion_group!(benches, drill, proteus, conga);
criterion_main!(benches);

//! Micro-benchmarks of the flowctl crate: PFC codec, AFC words and ring, PFC engine poll.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use flowctl::afc::{apply, AfcCmd, AfcRing, PauseRegs};
use flowctl::pfc::{Pfc, PfcConfig, PfcEvent, PfcPort};
use flowctl::wire::pfc::{Frame, MacControlRepr, PfcRepr};

fn codec(c: &mut Criterion) {
    let repr = PfcRepr {
        src_addr: [2, 0, 0, 0, 0, 1],
        class_enable: 0x18,
        quanta: [0, 0, 0, 0xFFFF, 0xFFFF, 0, 0, 0],
    };
    let mut buf = [0u8; 60];
    repr.emit(&mut Frame::new_unchecked(&mut buf[..]));
    c.bench_function("pfc_parse", |b| {
        b.iter(|| {
            let f = Frame::new_checked(black_box(&buf[..])).ok()?;
            MacControlRepr::parse(&f).ok()
        })
    });
    let mut out = [0u8; 60];
    c.bench_function("pfc_emit", |b| {
        b.iter(|| black_box(&repr).emit(&mut Frame::new_unchecked(&mut out[..])))
    });
}

fn afc(c: &mut Criterion) {
    let regs: Vec<PauseRegs> = (0..32).map(|_| PauseRegs::new(8)).collect();
    c.bench_function("afc_decode_apply", |b| {
        let w = AfcCmd::pause(17, 5, 100).map(|c| c.encode()).unwrap_or(0);
        b.iter(|| {
            if let Ok(cmd) = AfcCmd::decode(black_box(w)) {
                let _ = apply(cmd, &regs, 1_000, 5_120);
            }
        })
    });
    let ring = AfcRing::new(1024);
    c.bench_function("afc_ring_push_pop", |b| {
        let cmd = AfcCmd::resume(3, 2).ok();
        b.iter(|| {
            if let Some(cmd) = cmd {
                let _ = ring.push(black_box(cmd));
            }
            black_box(ring.pop())
        })
    });
}

fn engine(c: &mut Criterion) {
    let ports: Vec<PfcPort> = (0..32)
        .map(|i| PfcPort {
            rate_bps: 100_000_000_000,
            mac: [2, 0, 0, 0, 0, i as u8],
        })
        .collect();
    let Ok(mut pfc) = Pfc::new(PfcConfig::default(), &ports) else {
        return;
    };
    let mut out = Vec::with_capacity(32);
    let mut now = 0u64;
    c.bench_function("pfc_event_poll_32ports", |b| {
        b.iter(|| {
            now += 1_000;
            let port = (now / 1_000 % 32) as usize;
            let ev = if (now / 1_000) & 1 == 0 {
                PfcEvent::Xoff { port, pg: Some(3) }
            } else {
                PfcEvent::Xon { port, pg: Some(3) }
            };
            let _ = pfc.on_event(ev, now);
            out.clear();
            pfc.poll(now, &mut out);
            black_box(out.len())
        })
    });
}

criterion_group!(benches, codec, afc, engine);
criterion_main!(benches);

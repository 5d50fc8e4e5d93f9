//! Property tests: random admit/release sequences across ports and PGs, in all three modes.
//!
//! * cells are conserved: Σ segments = admitted − released, per PG, per queue and per pool;
//! * no counter goes negative (no accounting error), nothing exceeds its pool/segment;
//! * SIH and DSH never drop a lossless packet when the upstream honours the pause within the
//!   headroom's budget: after `Xoff{port,pg}` at most `η` bytes of buffer footprint more arrive
//!   for that PG, after `PortXoff{port}` at most `η` more arrive on the port;
//! * after everything is released, the MMU is empty and every pause has been lifted.

use std::collections::HashMap;

use mmu::*;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

#[derive(Debug, Clone)]
enum Op {
    Admit {
        in_port: usize,
        pg: usize,
        out_port: usize,
        queue: usize,
        bytes: u32,
        lossless: bool,
        ecn: bool,
    },
    /// Release the outstanding packet at this position (modulo their number).
    Release(usize),
}

const PORTS: usize = 4;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PORTS, 0..8usize, 0..PORTS, 0..4usize, 64u32..=1500, prop::bool::weighted(0.9), any::<bool>())
            .prop_map(|(in_port, pg, out_port, queue, bytes, lossless, ecn)| Op::Admit {
                in_port, pg, out_port, queue, bytes, lossless, ecn,
            }),
        // Bias toward hot spots: two ingress ports, all lossless PGs, big packets, one egress.
        5 => (0..2usize, prop::sample::select(vec![1usize, 3, 4, 6]), 1000u32..=1500)
            .prop_map(|(in_port, pg, bytes)| Op::Admit {
                in_port, pg, out_port: 3, queue: 1, bytes, lossless: true, ecn: true,
            }),
        2 => any::<usize>().prop_map(Op::Release),
    ]
}

fn config() -> impl Strategy<Value = MmuConfig> {
    (
        prop_oneof![
            Just(HeadroomMode::Sih),
            Just(HeadroomMode::Dsh),
            Just(HeadroomMode::Hpcc)
        ],
        prop_oneof![Just(64u32), Just(80), Just(256)],
        (420u64..1200).prop_map(|k| k * 1024),
        0u8..=5,
        prop_oneof![Just(0u64), Just(1_000_000)],
        0u32..4096,
        any::<u64>(),
    )
        .prop_map(|(mode, cell, buffer, shift, response, delta, seed)| {
            let mut cfg = match mode {
                HeadroomMode::Hpcc => MmuConfig::hpcc(),
                m => MmuConfig::dsh_microbenchmark(m),
            };
            cfg.headroom_mode = mode;
            cfg.headroom_mtu_slack = true;
            cfg.cell_bytes = cell;
            cfg.buffer_bytes = buffer;
            cfg.lossless_share = 0.85;
            cfg.lossless_pgs = vec![1, 3, 4, 6];
            cfg.alpha = Alpha::Shift(shift);
            cfg.response_ps = response;
            cfg.delta_bytes = delta;
            cfg.delta_q_bytes = delta;
            cfg.delta_p_bytes = delta / 2;
            cfg.private_bytes = 1024;
            cfg.seed = seed;
            cfg
        })
}

fn ports() -> Vec<PortParams> {
    (0..PORTS)
        .map(|i| PortParams {
            rate_bps: if i % 2 == 0 {
                10_000_000_000
            } else {
                25_000_000_000
            },
            delay_ps: 1_000_000,
            mtu: 1500,
            queues: 4,
        })
        .collect()
}

fn check_invariants(m: &Mmu, cfg: &MmuConfig) -> Result<(), TestCaseError> {
    let s = m.stats();
    let o = s.occupancy;
    let held = s.counters.admitted_cells - s.counters.released_cells;
    prop_assert_eq!(s.counters.accounting_errors, 0);
    prop_assert_eq!(
        o.private + o.shared + o.headroom + o.insurance + o.lossy,
        held
    );
    let sum = |f: &dyn Fn(&PgStats) -> u32| s.pgs.iter().map(|p| u64::from(f(p))).sum::<u64>();
    prop_assert_eq!(sum(&|p| p.private), o.private);
    prop_assert_eq!(sum(&|p| p.shared), o.shared);
    prop_assert_eq!(sum(&|p| p.headroom), o.headroom + o.insurance);
    prop_assert_eq!(sum(&|p| p.lossy), o.lossy);
    prop_assert_eq!(
        s.queues.iter().map(|q| u64::from(q.cells)).sum::<u64>(),
        held
    );
    prop_assert_eq!(
        s.queues.iter().map(|q| u64::from(q.lossy)).sum::<u64>(),
        o.lossy
    );
    prop_assert_eq!(
        s.ports.iter().map(|p| u64::from(p.shared)).sum::<u64>(),
        o.shared
    );
    prop_assert_eq!(
        s.ports.iter().map(|p| u64::from(p.insurance)).sum::<u64>(),
        o.insurance
    );
    prop_assert!(s.lossless_used <= s.lossless_pool_cells);
    prop_assert!(s.lossy_used <= s.lossy_pool_cells);
    prop_assert!(s.lossless_used + s.lossy_used <= s.total_cells);
    prop_assert!(o.shared <= s.shared_cells);
    prop_assert!(s.lossless_peak >= s.lossless_used);
    if cfg.headroom_mode != HeadroomMode::Hpcc {
        let phi = u64::from(cfg.private_bytes).div_ceil(u64::from(cfg.cell_bytes));
        prop_assert!(s.pgs.iter().all(|p| u64::from(p.private) <= phi));
        prop_assert!(
            o.private + o.headroom + o.insurance
                <= s.private_reserved_cells + s.headroom_reserved_cells
        );
    }
    for p in &s.ports {
        if cfg.headroom_mode == HeadroomMode::Dsh {
            prop_assert!(p.insurance <= p.headroom_cap_cells);
        } else {
            for pg in &s.pgs[p.port * 8..p.port * 8 + 8] {
                prop_assert!(pg.headroom <= p.headroom_cap_cells);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn conservation_bounds_and_lossless(cfg in config(), ops in prop::collection::vec(op(), 1..3000)) {
        let ports = ports();
        let mut m = Mmu::new(&cfg, &ports).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let eta: Vec<i64> = m.headroom_table().iter().map(|r| r.eta_bytes as i64).collect();
        let cell = i64::from(cfg.cell_bytes);
        // Remaining in-flight budget (bytes of footprint) while paused.
        let mut pg_budget: HashMap<(usize, usize), i64> = HashMap::new();
        let mut port_budget: HashMap<usize, i64> = HashMap::new();
        let mut held: Vec<(PacketInfo, Ticket)> = Vec::new();
        let mut ev = Vec::new();
        let mut now = 0u64;
        for op in ops {
            now += 100_000;
            match op {
                Op::Admit { in_port, pg, out_port, queue, bytes, lossless, ecn } => {
                    let p = PacketInfo { in_port, pg, out_port, queue, bytes, lossless, ecn_capable: ecn };
                    let is_ll = lossless && m.is_lossless_pg(pg);
                    let foot = i64::from(m.cells(bytes)) * cell;
                    if is_ll {
                        // The upstream stops once its budget is spent.
                        if pg_budget.get(&(in_port, pg)).is_some_and(|&b| b < foot)
                            || port_budget.get(&in_port).is_some_and(|&b| b < foot)
                        {
                            continue;
                        }
                        if let Some(b) = pg_budget.get_mut(&(in_port, pg)) { *b -= foot; }
                        if let Some(b) = port_budget.get_mut(&in_port) { *b -= foot; }
                    }
                    match m.admit(&p, now) {
                        Admission::Admitted { ticket, mark_ecn } => {
                            prop_assert!(!mark_ecn || ecn);
                            prop_assert_eq!(ticket.cells(), m.cells(bytes));
                            held.push((p, ticket));
                        }
                        Admission::Dropped(r) => {
                            prop_assert_ne!(r, DropReason::Invalid);
                            if cfg.headroom_mode != HeadroomMode::Hpcc {
                                prop_assert!(!is_ll, "lossless drop {:?} in {:?}", r, cfg.headroom_mode);
                            }
                        }
                    }
                }
                Op::Release(i) => {
                    if !held.is_empty() {
                        let (p, t) = held.swap_remove(i % held.len());
                        m.release(t, p.bytes, now);
                    }
                }
            }
            m.poll_events(&mut ev);
            for e in ev.drain(..) {
                match e {
                    FcEvent::Xoff { port, pg } => {
                        prop_assert!(m.is_lossless_pg(pg));
                        prop_assert!(pg_budget.insert((port, pg), eta[port]).is_none(), "double XOFF");
                    }
                    FcEvent::Xon { port, pg } => {
                        prop_assert!(pg_budget.remove(&(port, pg)).is_some(), "XON without XOFF");
                    }
                    FcEvent::PortXoff { port } => {
                        prop_assert_eq!(cfg.headroom_mode, HeadroomMode::Dsh);
                        prop_assert!(port_budget.insert(port, eta[port]).is_none());
                    }
                    FcEvent::PortXon { port } => {
                        prop_assert!(port_budget.remove(&port).is_some());
                    }
                }
            }
            for (&(port, pg), _) in pg_budget.iter() {
                prop_assert!(m.is_paused(port, pg));
            }
            check_invariants(&m, &cfg)?;
        }
        // Drain everything: MMU empty, every pause lifted.
        while let Some((p, t)) = held.pop() {
            now += 1000;
            m.release(t, p.bytes, now);
        }
        m.poll_events(&mut ev);
        check_invariants(&m, &cfg)?;
        let s = m.stats();
        prop_assert_eq!(s.occupancy, Occupancy::default());
        prop_assert!(s.pgs.iter().all(|p| !p.paused), "PG left paused");
        prop_assert!(s.ports.iter().all(|p| !p.paused), "port left paused");
        prop_assert!(s.queues.iter().all(|q| q.cells == 0 && q.bytes == 0));
        prop_assert_eq!(s.counters.xoff, s.counters.xon);
        prop_assert_eq!(s.counters.port_xoff, s.counters.port_xon);
    }
}

//! Scenario tests of the public API: buffer partition, SIH/DSH/HPCC state machines, lossy DT,
//! ECN, statistics.

use mmu::theory::{theorem1_dsh, theorem2_sih, BurstScenario};
use mmu::*;

const G100: u64 = 100_000_000_000;
const US2: u64 = 2_000_000;

fn tomahawk_ports() -> Vec<PortParams> {
    vec![
        PortParams {
            rate_bps: G100,
            delay_ps: US2,
            mtu: 1500,
            queues: 8,
        };
        32
    ]
}

fn pkt(in_port: usize, pg: usize, out_port: usize, bytes: u32) -> PacketInfo {
    PacketInfo {
        in_port,
        pg,
        out_port,
        queue: pg,
        bytes,
        lossless: true,
        ecn_capable: false,
    }
}

fn admitted(a: Admission) -> (Ticket, bool) {
    match a {
        Admission::Admitted { ticket, mark_ecn } => (ticket, mark_ecn),
        Admission::Dropped(r) => panic!("unexpected drop: {r:?}"),
    }
}

/// Buffer partition of the §V-A switch, in 256 B cells: η = ceil(56 840/256) = 223 cells,
/// φ = 12 cells, 32 ports × 7 lossless PGs.
#[test]
fn microbenchmark_partition() {
    let total = 16 * 1024 * 1024 / 256;
    let sih = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Sih),
        &tomahawk_ports(),
    )
    .expect("sih");
    let s = sih.stats();
    assert_eq!(s.total_cells, total);
    assert_eq!(s.private_reserved_cells, 32 * 7 * 12);
    assert_eq!(s.headroom_reserved_cells, 32 * 7 * 223);
    assert_eq!(s.shared_cells, total - 32 * 7 * 12 - 32 * 7 * 223);
    let dsh = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh),
        &tomahawk_ports(),
    )
    .expect("dsh");
    let s = dsh.stats();
    assert_eq!(s.headroom_reserved_cells, 32 * 223);
    assert_eq!(s.shared_cells, total - 32 * 7 * 12 - 32 * 223);
    let rows = dsh.headroom_table();
    assert_eq!(rows.len(), 32);
    assert_eq!(rows[0].eta_formula_bytes, 56_840);
    assert_eq!(rows[0].response_bytes, 0);
    assert_eq!(rows[0].eta_cells, 223);
    let text = format_headroom_table(&rows);
    assert!(text.contains("56840"), "{text}");
}

/// The headroom table carries the software response term: 10 µs at 100 Gbit/s = 125 000 B.
#[test]
fn response_term_in_headroom_table() {
    let cfg = MmuConfig {
        response_ps: 10_000_000,
        ..MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh)
    };
    let m = Mmu::new(&cfg, &tomahawk_ports()).expect("mmu");
    let r = &m.headroom_table()[5];
    assert_eq!(r.port, 5);
    assert_eq!(r.response_bytes, 125_000);
    assert_eq!(r.eta_bytes, 56_840 + 125_000);
    assert_eq!(r.eta_cells, (56_840u32 + 125_000).div_ceil(256));
}

/// A measured response term re-sizes the headroom of an empty MMU (`response_ps = "auto"`):
/// SIH's static headroom shrinks by 7 PGs × the response bytes per port and the shared
/// pool grows by as much; a busy MMU is left alone, and a term that does not fit is refused
/// with the MMU unchanged.
#[test]
fn retune_response_resizes_an_empty_mmu_only() {
    let cfg = MmuConfig {
        response_ps: 1_000_000,
        ..MmuConfig::dsh_microbenchmark(HeadroomMode::Sih)
    };
    let mut m = Mmu::new(&cfg, &tomahawk_ports()).expect("mmu");
    let before = m.stats();
    let small = Mmu::new(
        &MmuConfig {
            response_ps: 0,
            ..cfg.clone()
        },
        &tomahawk_ports(),
    )
    .expect("mmu");
    // Busy: one packet buffered.
    let (t, _) = admitted(m.admit(&pkt(0, 3, 1, 1500), 0));
    assert_eq!(m.retune_response(0), Ok(false));
    assert_eq!(m.stats().shared_cells, before.shared_cells);
    m.release(t, 1500, 1);
    assert!(m.is_empty());
    assert_eq!(m.retune_response(0), Ok(true));
    let after = m.stats();
    assert_eq!(
        after.headroom_reserved_cells,
        small.stats().headroom_reserved_cells
    );
    assert_eq!(after.shared_cells, small.stats().shared_cells);
    assert!(after.shared_cells > before.shared_cells);
    assert_eq!(m.headroom_table(), small.headroom_table());
    assert_eq!(m.config().response_ps, 0);
    // The packet admitted before is still counted.
    assert_eq!(m.stats().counters.admitted_packets, 1);
    // 1 s of response at 100 Gbit/s does not fit: refused, nothing changed.
    let err = m.retune_response(1_000_000_000_000).expect_err("too big");
    assert!(
        err.to_string().contains("headroom exceeds the buffer"),
        "{err}"
    );
    assert_eq!(m.headroom_table(), small.headroom_table());
}

#[test]
fn validate_names_key_and_reason() {
    let cfg = MmuConfig {
        buffer_bytes: 12 * 1024 * 1024,
        lossless_pgs: (0..8).collect(),
        lossless_share: 1.0,
        headroom_mode: HeadroomMode::Sih,
        response_ps: 0,
        ..MmuConfig::default()
    };
    let err = Mmu::new(&cfg, &tomahawk_ports()).expect_err("must not fit");
    let msg = err.to_string();
    assert!(msg.contains("headroom_mode"), "{msg}");
    assert!(
        msg.contains("headroom exceeds the buffer: 32 ports × 8 PGs × (η 56840 B"),
        "{msg}"
    );
    let bad = MmuConfig {
        lossless_pgs: vec![3, 9],
        ..MmuConfig::default()
    };
    let msg = bad.validate().expect_err("pg 9").to_string();
    assert!(
        msg.contains("`lossless_pgs`") && msg.contains("PG 9"),
        "{msg}"
    );
    let bad = MmuConfig {
        alpha: Alpha::Fraction(-1.0),
        ..MmuConfig::default()
    };
    assert!(bad
        .validate()
        .expect_err("alpha")
        .to_string()
        .contains("`alpha`"));
    let mut bad = MmuConfig::default();
    bad.ecn.k_min_bytes = 500_000;
    assert!(bad
        .validate()
        .expect_err("kmin")
        .to_string()
        .contains("ecn.k_min_bytes"));
    assert!(MmuConfig::default().validate().is_ok());
    assert!(MmuConfig::hpcc().validate().is_ok());
    let err = Mmu::new(&MmuConfig::default(), &[]).expect_err("no ports");
    assert!(err.to_string().contains("`ports`"));
}

#[test]
fn private_then_shared_and_exact_release() {
    let mut m = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Sih),
        &tomahawk_ports(),
    )
    .expect("mmu");
    let p = pkt(0, 3, 1, 1000); // 4 cells
    let (t1, _) = admitted(m.admit(&p, 0));
    let (t2, _) = admitted(m.admit(&p, 0));
    let (t3, _) = admitted(m.admit(&p, 0));
    let (t4, _) = admitted(m.admit(&p, 0));
    assert_eq!(t1.cells(), 4);
    assert_eq!(
        [t1.segment(), t2.segment(), t3.segment(), t4.segment()],
        [
            Segment::Private,
            Segment::Private,
            Segment::Private,
            Segment::Shared
        ]
    );
    let s = m.stats();
    assert_eq!(s.occupancy.private, 12);
    assert_eq!(s.occupancy.shared, 4);
    assert_eq!(s.queues[8 + 3].cells, 16);
    assert_eq!(s.queues[8 + 3].bytes, 4000);
    for t in [t1, t2, t3, t4] {
        m.release(t, p.bytes, 10);
    }
    let s = m.stats();
    assert_eq!(s.occupancy, Occupancy::default());
    assert_eq!(s.counters.accounting_errors, 0);
    assert_eq!(s.peak.private, 12);
    m.clear_watermarks();
    assert_eq!(m.stats().peak, Occupancy::default());
}

#[test]
fn cells_round_up_and_invalid_packets_drop() {
    let cfg = MmuConfig {
        cell_bytes: 80,
        ..MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh)
    };
    let mut m = Mmu::new(&cfg, &tomahawk_ports()).expect("mmu");
    assert_eq!(m.cells(1), 1);
    assert_eq!(m.cells(80), 1);
    assert_eq!(m.cells(81), 2);
    for bad in [
        pkt(32, 3, 0, 100),
        pkt(0, 8, 0, 100),
        pkt(0, 3, 40, 100),
        pkt(0, 3, 1, 0),
    ] {
        assert_eq!(m.admit(&bad, 0), Admission::Dropped(DropReason::Invalid));
    }
    assert_eq!(m.stats().counters.drops.invalid, 4);
}

/// Burst of M = 16 ports into one egress queue (R = 16: each ingress queue drains 1/16 of the
/// egress rate, FIFO). Returns the bytes admitted before the first XOFF.
fn burst_until_first_xoff(mode: HeadroomMode, background: bool) -> (u64, Mmu) {
    let mut m = Mmu::new(&MmuConfig::dsh_microbenchmark(mode), &tomahawk_ports()).expect("mmu");
    let mut fifo = std::collections::VecDeque::new();
    let mut ev = Vec::new();
    let mut now = 0u64;
    if background {
        // Two long-lived flows (ports 0, 1 → egress 31) congest their ingress queues: fill
        // until they pause, then keep them just at the threshold is what the theorem assumes;
        // here we simply fill to XOFF once.
        for port in 0..2 {
            loop {
                let p = pkt(port, 3, 31, 1536);
                admitted(m.admit(&p, now));
                m.poll_events(&mut ev);
                if !ev.is_empty() {
                    ev.clear();
                    break;
                }
            }
        }
    }
    let mut bytes = 0u64;
    loop {
        for port in 2..18 {
            let p = pkt(port, 3, 30, 1536);
            let (t, _) = admitted(m.admit(&p, now));
            fifo.push_back((p, t));
            bytes += 1536;
            m.poll_events(&mut ev);
            if ev.iter().any(|e| matches!(e, FcEvent::Xoff { .. })) {
                return (bytes, m);
            }
        }
        now += 123_000; // 1536 B at 100 Gbit/s ≈ 123 ns
        if let Some((p, t)) = fifo.pop_front() {
            m.release(t, p.bytes, now);
        }
    }
}

/// Same burst, fed to an SIH and a DSH switch: DSH raises its first XOFF much later (§V-A,
/// Fig. 11: "over 4× more bursty traffic without PFC").
#[test]
fn dsh_pauses_later_than_sih() {
    let (sih, _) = burst_until_first_xoff(HeadroomMode::Sih, false);
    let (dsh, _) = burst_until_first_xoff(HeadroomMode::Dsh, false);
    assert!(dsh > 3 * sih, "sih {sih} B, dsh {dsh} B");
    let (sih_bg, _) = burst_until_first_xoff(HeadroomMode::Sih, true);
    let (dsh_bg, _) = burst_until_first_xoff(HeadroomMode::Dsh, true);
    assert!(dsh_bg > 3 * sih_bg, "sih {sih_bg} B, dsh {dsh_bg} B");
}

/// The discrete MMU agrees with Theorems 1/2 (N = 0, M = 16, R = 16, φ = 3 KiB) within a few
/// percent (cell rounding of η, whole-packet steps).
#[test]
fn first_xoff_matches_theorems() {
    let s = BurstScenario {
        b: 16.0 * 1024.0 * 1024.0,
        alpha: 1.0 / 16.0,
        n_p: 32,
        n_q: 7,
        eta: 223.0 * 256.0,
        phi: 3072.0,
        n: 0,
        m: 16,
        r: 16.0,
    };
    let (sih, _) = burst_until_first_xoff(HeadroomMode::Sih, false);
    let (dsh, _) = burst_until_first_xoff(HeadroomMode::Dsh, false);
    let th_sih = theorem2_sih(&s).burst_bytes_total;
    let th_dsh = theorem1_dsh(&s).burst_bytes_total;
    let rel = |a: u64, b: f64| (a as f64 - b).abs() / b;
    assert!(rel(sih, th_sih) < 0.03, "sih {sih} vs {th_sih}");
    assert!(rel(dsh, th_dsh) < 0.03, "dsh {dsh} vs {th_dsh}");
}

/// SIH: XOFF when shared reaches T, arrivals after it go to headroom, XON once drained.
#[test]
fn sih_xoff_headroom_xon() {
    let mut m = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Sih),
        &tomahawk_ports(),
    )
    .expect("mmu");
    let mut ev = Vec::new();
    let mut held = Vec::new();
    let p = pkt(4, 2, 5, 1024);
    while ev.is_empty() {
        held.push(admitted(m.admit(&p, 1)).0);
        m.poll_events(&mut ev);
    }
    assert_eq!(ev, vec![FcEvent::Xoff { port: 4, pg: 2 }]);
    assert!(m.is_paused(4, 2) && !m.is_paused(4, 3) && !m.is_port_paused(4));
    let shared_at_pause = m.stats().pgs[4 * 8 + 2].shared;
    assert!(u64::from(shared_at_pause) >= m.threshold_cells(4));
    // In-flight packets land in headroom, up to η.
    for _ in 0..50 {
        let (t, _) = admitted(m.admit(&p, 2));
        assert_eq!(t.segment(), Segment::Headroom);
        held.push(t);
    }
    assert_eq!(m.stats().occupancy.headroom, 200);
    // Watermarks: 200 cells of headroom, all 50 packets (4 cells each) arrived after XOFF;
    // the crossing packet is not counted.
    let pg = &m.stats().pgs[4 * 8 + 2];
    assert_eq!((pg.headroom_peak, pg.absorbed_peak), (200, 200));
    // The total counts ended pauses only: this one ends at XON.
    assert_eq!(pg.absorbed_cells, 0);
    ev.clear();
    let mut now = 10;
    while let Some(t) = held.pop() {
        now += 1;
        m.release(t, p.bytes, now);
        m.poll_events(&mut ev);
    }
    assert_eq!(ev, vec![FcEvent::Xon { port: 4, pg: 2 }]);
    let s = m.stats();
    assert_eq!(s.occupancy, Occupancy::default());
    let pg = &s.pgs[4 * 8 + 2];
    assert_eq!((pg.xoff, pg.xon, pg.paused), (1, 1, false));
    assert!(pg.paused_ps > 0);
    assert_eq!(pg.absorbed_cells, 200);
    assert_eq!(s.counters.drops.lossless(), 0);
}

/// SIH drops (case ④) when the upstream overruns the headroom.
#[test]
fn sih_drops_beyond_headroom() {
    let mut m = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Sih),
        &tomahawk_ports(),
    )
    .expect("mmu");
    let p = pkt(0, 1, 1, 1024);
    let mut drops = 0;
    for _ in 0..20_000 {
        if let Admission::Dropped(r) = m.admit(&p, 0) {
            assert_eq!(r, DropReason::HeadroomExhausted);
            drops += 1;
        }
    }
    assert!(drops > 0);
    let s = m.stats();
    assert_eq!(s.pgs[1].headroom, 223 - 223 % 4);
    assert_eq!(s.counters.drops.headroom_exhausted, drops);
}

/// DSH: several PGs of one port congest together; the queue-level XOFF comes first
/// (X_qoff = T − η), then the port-level pause once Σω > N_q·T, after which arrivals use the
/// insurance headroom; PON comes back only when insurance is empty.
#[test]
fn dsh_queue_then_port_pause() {
    let mut m = Mmu::new(
        &MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh),
        &tomahawk_ports(),
    )
    .expect("mmu");
    let mut ev = Vec::new();
    let mut held = Vec::new();
    let mut i = 0usize;
    let mut first_xoff = None;
    while !m.is_port_paused(7) {
        let pg = 1 + i % 7;
        let p = pkt(7, pg, 9, 1536);
        held.push((p, admitted(m.admit(&p, i as u64)).0));
        m.poll_events(&mut ev);
        if first_xoff.is_none() {
            first_xoff = ev.iter().position(|e| matches!(e, FcEvent::Xoff { .. }));
        }
        i += 1;
        assert!(i < 100_000);
    }
    assert!(
        first_xoff.is_some(),
        "queue-level XOFF precedes POFF: {ev:?}"
    );
    assert_eq!(ev.last(), Some(&FcEvent::PortXoff { port: 7 }));
    let t = m.threshold_cells(7);
    assert!(u64::from(m.stats().ports[7].shared) > 7 * t);
    assert!((1..8).all(|pg| m.is_paused(7, pg)));
    // POFF: in-flight packets go to insurance.
    for k in 0..30 {
        let p = pkt(7, 1 + k % 7, 9, 1536);
        let (tk, _) = admitted(m.admit(&p, 1_000_000));
        assert_eq!(tk.segment(), Segment::Insurance);
        held.push((p, tk));
    }
    assert_eq!(m.stats().ports[7].insurance, 30 * 6);
    assert_eq!(m.stats().ports[7].insurance_peak, 30 * 6);
    ev.clear();
    for (k, (p, t)) in held.drain(..).enumerate() {
        m.release(t, p.bytes, 2_000_000 + k as u64);
        m.poll_events(&mut ev);
        if ev.contains(&FcEvent::PortXon { port: 7 }) {
            assert_eq!(m.stats().ports[7].insurance, 0);
        }
    }
    assert!(ev.contains(&FcEvent::PortXon { port: 7 }));
    let s = m.stats();
    assert_eq!(s.occupancy, Occupancy::default());
    assert!(s.pgs.iter().all(|p| !p.paused) && s.ports.iter().all(|p| !p.paused));
    assert_eq!(s.counters.xoff, s.counters.xon);
    assert_eq!((s.counters.port_xoff, s.counters.port_xon), (1, 1));
    // Peaks survive the drain until cleared.
    assert_eq!(s.ports[7].insurance_peak, 30 * 6);
    m.clear_watermarks();
    assert_eq!(m.stats().ports[7].insurance_peak, 0);
    assert!(m.stats().pgs.iter().all(|p| p.absorbed_peak == 0));
}

/// HPCC preset: 1-byte cells, 4 KiB reserve, headroom 3·C·D once per port, α shift 3 reduced
/// per rate doubling above the slowest port, PFC at (B − Σhdrm − Σrsrv − used) >> shift.
#[test]
fn hpcc_preset_matches_switch_mmu_cc() {
    let mut ports = vec![
        PortParams {
            rate_bps: 25_000_000_000,
            delay_ps: 1_000_000,
            mtu: 1000,
            queues: 8,
        };
        4
    ];
    ports.push(PortParams {
        rate_bps: G100,
        delay_ps: 1_000_000,
        mtu: 1000,
        queues: 8,
    });
    let mut m = Mmu::new(&MmuConfig::hpcc(), &ports).expect("mmu");
    let rows = m.headroom_table();
    assert_eq!(rows[0].eta_bytes, 3 * 3125);
    assert_eq!(rows[4].eta_bytes, 3 * 12_500);
    let s = m.stats();
    let b = 12 * 1024 * 1024u64;
    let shared = b - (4 * 9375 + 37_500) - 5 * 4096;
    assert_eq!(s.shared_cells, shared);
    assert_eq!(m.threshold_cells(0), shared >> 3);
    assert_eq!(m.threshold_cells(4), shared >> 1);
    // reserve first, then shared until the threshold, then headroom and XOFF.
    let p = pkt(0, 3, 1, 1000);
    let segs: Vec<Segment> = (0..5)
        .map(|_| admitted(m.admit(&p, 0)).0.segment())
        .collect();
    assert_eq!(&segs[..4], &[Segment::Private; 4]);
    assert_eq!(segs[4], Segment::Shared);
    let mut ev = Vec::new();
    let mut held = Vec::new();
    while ev.is_empty() {
        held.push(admitted(m.admit(&p, 0)).0);
        m.poll_events(&mut ev);
    }
    assert_eq!(ev, vec![FcEvent::Xoff { port: 0, pg: 3 }]);
    let pg = &m.stats().pgs[3];
    assert!(pg.headroom > 0 || u64::from(pg.shared) >= m.threshold_cells(0));
}

#[test]
fn lossy_egress_dt_and_pool() {
    let cfg = MmuConfig {
        lossless_share: 0.5,
        egress_alpha: Alpha::Shift(0),
        ..MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh)
    };
    let mut m = Mmu::new(&cfg, &tomahawk_ports()).expect("mmu");
    let lossy_pool = m.stats().lossy_pool_cells;
    assert_eq!(lossy_pool, 16 * 1024 * 1024 / 256 / 2);
    let p = PacketInfo {
        lossless: false,
        ..pkt(0, 0, 1, 1024)
    };
    let mut n = 0u64;
    loop {
        match m.admit(&p, 0) {
            Admission::Admitted { ticket, .. } => {
                assert_eq!(ticket.segment(), Segment::Lossy);
                n += 1;
            }
            Admission::Dropped(r) => {
                assert_eq!(r, DropReason::EgressThreshold);
                break;
            }
        }
    }
    // DT with α = 1: a single queue stops at half of the pool.
    assert_eq!(n * 4, lossy_pool / 2);
    // A lossless-flagged packet on a lossy PG is accounted as lossy too.
    let q = PacketInfo {
        lossless: true,
        ..pkt(2, 0, 2, 1024)
    };
    let (t, _) = admitted(m.admit(&q, 0));
    assert_eq!(t.segment(), Segment::Lossy);
    assert!(!m.is_paused(0, 0));
    let s = m.stats();
    assert_eq!(s.counters.drops.egress_threshold, 1);
    assert_eq!(s.lossy_used, n * 4 + 4);
    assert_eq!(s.pgs[0].lossy as u64, n * 4);
}

#[test]
fn ecn_marks_red_style_deterministically() {
    let run = |seed: u64| {
        let cfg = MmuConfig {
            seed,
            ..MmuConfig::dsh_microbenchmark(HeadroomMode::Dsh)
        };
        let mut m = Mmu::new(&cfg, &tomahawk_ports()).expect("mmu");
        let mut marks = Vec::new();
        for i in 0..600usize {
            let p = PacketInfo {
                ecn_capable: i % 3 != 0,
                ..pkt(i % 20, 3, 30, 1000)
            };
            let (_, mark) = admitted(m.admit(&p, 0));
            assert!(!mark || p.ecn_capable);
            // K_min = 100 KB: nothing marked below it.
            if (i as u64) * 1000 <= 100_000 {
                assert!(!mark);
            }
            if (i as u64) * 1000 > 400_000 && p.ecn_capable {
                assert!(mark);
            }
            marks.push(mark);
        }
        (
            marks,
            m.stats().counters.ecn_marked,
            m.stats().queues[30 * 8 + 3].ecn_marked,
        )
    };
    let (a, na, qa) = run(1);
    let (b, nb, _) = run(1);
    let (c, _, _) = run(2);
    assert_eq!(a, b);
    assert_eq!(na, nb);
    assert_eq!(na, qa);
    assert_ne!(a, c);
    assert_eq!(na as usize, a.iter().filter(|&&x| x).count());
}

#[test]
fn ecn_thresholds_scale_with_port_rate() {
    let mut ports = tomahawk_ports();
    ports[1].rate_bps = 25_000_000_000;
    // 32 × 100 Gbit/s with the software response term's 10 µs (125 kB per port) and headroom
    // for small frames (3.2× in 256 B cells) would need 18.6 MB of headroom: no response
    // term, as the 100 Gbit/s virtual-time topologies run.
    let cfg = MmuConfig {
        response_ps: 0,
        ..MmuConfig::default()
    };
    let m = Mmu::new(&cfg, &ports).expect("mmu");
    assert_eq!(m.ecn_thresholds(0), Some((100_000, 400_000, 0.2)));
    assert_eq!(m.ecn_thresholds(1), Some((25_000, 100_000, 0.2)));
}

#[test]
fn stats_serialize_shape() {
    let m = Mmu::new(&MmuConfig::default(), &tomahawk_ports()[..2]).expect("mmu");
    let s = m.stats();
    assert_eq!(s.pgs.len(), 16);
    assert_eq!(s.queues.len(), 16);
    assert_eq!(s.ports.len(), 2);
    assert!(s.pgs[3].lossless && s.pgs[4].lossless && !s.pgs[0].lossless);
    assert!(m.is_lossless_pg(3) && !m.is_lossless_pg(5));
}

/// What Eq. (1) budgets, arriving as small frames: after the XOFF, the upstream finishes one
/// MTU frame and keeps sending for `η − MTU` bytes of line-rate time, here all 60 B frames
/// (80 B of wire time each, one 256 B cell each), to PG 3. Returns the frames dropped.
fn small_frames_after_xoff(mode: HeadroomMode, small_packet_percentage: u8) -> u64 {
    let cfg = MmuConfig {
        headroom_mode: mode,
        response_ps: 0,
        small_packet_percentage,
        ..MmuConfig::default()
    };
    let ports = tomahawk_ports();
    let mut m = Mmu::new(&cfg, &ports).expect("mmu");
    let eta = headroom::eta_eq1(G100, US2, 1500);
    let mut ev = Vec::new();
    // Nothing drains egress 31: fill port 0's PG 3 (DSH: PGs 3 and 4) with MTU frames until
    // the pause whose headroom is `η`: SIH's per-PG XOFF; DSH's port-level POFF (Eq. 6), as
    // a paused queue goes on into the shared segment and only POFF draws on the insurance.
    let paused = |e: &FcEvent| match mode {
        HeadroomMode::Dsh => matches!(e, FcEvent::PortXoff { port: 0 }),
        _ => matches!(e, FcEvent::Xoff { port: 0, .. }),
    };
    let pgs = if mode == HeadroomMode::Dsh { 2 } else { 1 };
    let mut i = 0;
    while !ev.iter().any(paused) {
        admitted(m.admit(&pkt(0, 3 + i % pgs, 31, 1500), 0));
        m.poll_events(&mut ev);
        i += 1;
    }
    let mut drops = 0;
    let frames = std::iter::once(1500).chain(std::iter::repeat_n(
        60,
        ((eta - 1500) / u64::from(60 + headroom::WIRE_OVERHEAD_BYTES)) as usize,
    ));
    for len in frames {
        if let Admission::Dropped(r) = m.admit(&pkt(0, 3, 31, len), 0) {
            assert!(
                matches!(
                    r,
                    DropReason::HeadroomExhausted | DropReason::InsuranceExhausted
                ),
                "{mode:?}: {r:?}"
            );
            drops += 1;
        }
    }
    drops
}

/// Headroom sized in wire bytes (Eq. 1 as the paper, `small_packet_percentage = 0`) loses
/// small frames in 256 B cells, under SIH and DSH alike; sized for the worst cell occupancy
/// (the default, 100) it loses none. Found as ACK-sized losses of the lossless class in the
/// Proteus §V-B leaf-spine.
#[test]
fn headroom_of_small_frames_is_lossless_when_sized_in_cells() {
    for mode in [HeadroomMode::Sih, HeadroomMode::Dsh] {
        let bytes = small_frames_after_xoff(mode, 0);
        let cells = small_frames_after_xoff(mode, 100);
        assert!(
            bytes > 0,
            "{mode:?}: a byte-sized headroom held every small frame"
        );
        assert_eq!(cells, 0, "{mode:?}: {cells} small frames lost");
    }
}

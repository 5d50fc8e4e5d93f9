//! The BFC unit tests (the whole `Bfc`: assignment, backpressure, signals together).

use super::*;
use crate::wire::signal::{Frame, DST_SIGNAL, TYPE_PAUSE, TYPE_RESUME};

const HRTT: u64 = 2_000_000; // 2 µs
const G100: u64 = 100_000_000_000;

fn ports(n: usize, queues: usize) -> Vec<BfcPort> {
    (0..n)
        .map(|i| BfcPort {
            rate_bps: G100,
            delay_ps: 1_000_000,
            queues,
            mtu_frame: 1514,
            mac: [2, 0, 0, 0, 0, i as u8],
            peer_mac: Some([2, 0, 0, 0, 1, i as u8]),
        })
        .collect()
}

fn bfc(cfg: BfcConfig, queues: usize) -> Bfc {
    let cfg = BfcConfig {
        hrtt_ps: cfg.hrtt_ps.or(Some(HRTT)),
        ..cfg
    };
    let p = ports(3, queues);
    Bfc::new(
        cfg,
        &p,
        &[(2, 1)],
        vec![true; 3],
        Arc::new(BfcShared::new(3)),
        true,
    )
    .unwrap()
}

#[test]
fn threshold_is_hrtt_times_rate_over_active() {
    let b = bfc(BfcConfig::default(), 8);
    assert_eq!(b.hrtt_ps(), HRTT);
    assert_eq!(b.sticky_ps(), 2 * HRTT);
    // 2 µs × 100 Gbit/s = 25 000 B.
    assert_eq!(b.threshold(1, 1), 25_000);
    assert_eq!(b.threshold(1, 0), 25_000);
    assert_eq!(b.threshold(1, 2), 12_500);
    assert_eq!(b.threshold(1, 8), 3_125);
    assert_eq!(b.threshold(1, 100), 3_125, "clamped to the queue count");
    assert_eq!(threshold_bytes(20_000_000, 1_000_000_000, 1), 2_500);
    assert_eq!(b.table_len(0), 800);
    // Default HRTT: 2 × 1 µs + 2 × 1538 B at 100 Gbit/s (123.04 ns each).
    assert_eq!(default_hrtt_ps(&ports(1, 8)[0]), 2_000_000 + 246_080);
    let fixed = bfc(
        BfcConfig {
            th_bytes: Some(9_000),
            ..BfcConfig::default()
        },
        8,
    );
    assert_eq!(
        (fixed.threshold(1, 1), fixed.threshold(1, 8)),
        (9_000, 9_000)
    );
}

#[test]
fn dynamic_assignment_empty_then_random_then_sticky() {
    let mut b = bfc(BfcConfig::default(), 4);
    let sh = b.shared().clone();
    let e = 1;
    // Flow A: table empty, all queues empty -> queue 0 (rotating start 0).
    let a = b.assign(e, 10, 0, 0, 0);
    assert_eq!(a.queue, 0);
    // Flow B, queue 0 busy -> next empty queue from the rotating pointer: 1.
    let bq = b.assign(e, 11, 0b0001, 0, 10);
    assert_eq!(bq.queue, 1);
    // A again: its entry has size 1 -> same queue, no new assignment.
    assert_eq!(b.assign(e, 10, 0b0011, 0, 20).queue, 0);
    assert_eq!(sh.ports[e].assignments.get(), 2);
    // C: queue 2 is empty but paused downstream -> the unpaused empty queue 3 first.
    assert_eq!(b.assign(e, 12, 0b0011, 0b0100, 30).queue, 3);
    // D: only queue 2 is empty (paused): taken anyway rather than sharing.
    assert_eq!(b.assign(e, 13, 0b1011, 0b0100, 40).queue, 2);
    assert_eq!(sh.ports[e].collisions.get(), 0);
    // E: no empty queue -> random queue, a collision.
    let q = b.assign(e, 14, 0b1111, 0, 50).queue;
    assert!(q < 4);
    assert_eq!(sh.ports[e].collisions.get(), 1);
    // Stickiness: A's two packets leave (size 0) at t = 100; within 2·HRTT it keeps queue
    // 0 even though queue 0 is now empty and others are too.
    assert_eq!(b.on_dequeue(e, 0, a.slot, 0, 0, 3, 100), None);
    assert_eq!(b.on_dequeue(e, 0, a.slot, 0, 0, 3, 100), None);
    assert_eq!(b.assign(e, 10, 0b1110, 0, 100 + 2 * HRTT).queue, 0);
    assert_eq!(sh.ports[e].assignments.get(), 5);
    b.on_dequeue(e, 0, a.slot, 0, 0, 3, 200);
    // Idle for longer than 2·HRTT with size 0 -> reassigned to an empty queue (rotating
    // pointer: after 3 comes 0; queue 0 is busy here, so 1 is taken).
    let t = 200 + 2 * HRTT + 1;
    assert_eq!(b.assign(e, 10, 0b1101, 0, t).queue, 1);
    assert_eq!(sh.ports[e].assignments.get(), 6);
    // Reservation: F arrives while queues 0 (A's, just used) and 3 are empty; 3 has been
    // idle longer than the sticky time, so F gets 3 and A can come back to 0.
    let t2 = t + 3 * HRTT;
    b.on_dequeue(e, 0, a.slot, 0, 0, 3, t2);
    assert_eq!(b.assign(e, 15, 0b0100, 0, t2 + 1).queue, 3);
    assert_eq!(b.assign(e, 10, 0b1100, 0, t2 + 2).queue, 1);
    let t = t2 + 2;
    // Index collision: a different FID hashing to A's slot while A has a packet there.
    let len = b.table_len(e) as u32;
    assert_eq!(b.assign(e, 10 + len, 0, 0, t).queue, 1);
    assert_eq!(sh.ports[e].table_collisions.get(), 1);
    // A dropped packet (MMU) is taken back out of the entry.
    let x = b.assign(e, 99, 0, 0, t);
    assert_eq!(sh.ports[e].assignments.get(), 8);
    b.unassign(x.slot, t);
    b.assign(e, 99, 0, 0, t + 2 * HRTT + 1);
    assert_eq!(
        sh.ports[e].assignments.get(),
        9,
        "the entry was empty again"
    );
}

#[test]
fn stochastic_and_single_are_static() {
    let mut s = bfc(
        BfcConfig {
            assignment: Assignment::Stochastic,
            ..BfcConfig::default()
        },
        32,
    );
    let q1 = s.assign(0, 77, 0, 0, 0).queue;
    let mut s2 = bfc(
        BfcConfig {
            assignment: Assignment::Stochastic,
            ..BfcConfig::default()
        },
        32,
    );
    // Same FID, same queue whatever is occupied and whenever.
    assert_eq!(s2.assign(0, 77, u128::MAX, 0, 10 * HRTT).queue, q1);
    let mut one = bfc(
        BfcConfig {
            assignment: Assignment::Single,
            ..BfcConfig::default()
        },
        8,
    );
    assert_eq!(one.assign(0, 1, 0, 0, 0).queue, 0);
    assert_eq!(one.assign(0, 2, 1, 0, 0).queue, 0);
    assert_eq!(one.shared().ports[0].collisions.get(), 1);
}

#[test]
fn pause_counter_0_1_0_and_exact_frames() {
    let mut b = bfc(BfcConfig::default(), 8);
    let sh = b.shared().clone();
    // Th with 2 active queues at port 1 = 12 500 B. Packets from port 0, upstreamQ 5.
    // Below/at Th: not marked.
    assert_eq!(b.on_enqueue(0, 5, 1, 0, 12_500, 2), (0, None));
    // Above Th: marked, counter 0 -> 1, PAUSE(5) on port 0.
    let (m1, s1) = b.on_enqueue(0, 5, 1, 0, 12_501, 2);
    assert_eq!(m1, 1);
    let (port, repr) = s1.unwrap();
    assert_eq!(port, 0);
    let mut buf = [0u8; 60];
    repr.emit_into(&mut buf);
    let mut want = [0u8; 60];
    want[..6].copy_from_slice(&[2, 0, 0, 0, 1, 0]); // peer of port 0
    want[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0]); // port 0
    want[12..20].copy_from_slice(&[0x88, 0xb5, 1, TYPE_PAUSE, 0, 5, 0, 0]);
    assert_eq!(buf, want);
    // Second marked packet: counter 1 -> 2, no frame.
    let (m2, s2) = b.on_enqueue(0, 5, 1, 0, 20_000, 2);
    assert!(m2 == 1 && s2.is_none());
    assert_eq!(sh.pause_counter(0, 5), 2);
    assert_eq!(sh.pause_bitmap(0), 1 << 5);
    // Unmarked packet leaving: nothing. First marked leaves: 2 -> 1, nothing.
    assert_eq!(b.on_dequeue(1, 0, NO_SLOT, 0, 0, 5, 1), None);
    assert_eq!(b.on_dequeue(1, 0, NO_SLOT, 1, 0, 5, 2), None);
    // Last marked leaves: 1 -> 0, RESUME(5).
    let (port, repr) = b.on_dequeue(1, 0, NO_SLOT, 1, 0, 5, 3).unwrap();
    assert_eq!(port, 0);
    repr.emit_into(&mut buf);
    want[15] = TYPE_RESUME;
    assert_eq!(buf, want);
    assert_eq!(sh.pause_counter(0, 5), 0);
    assert!(!sh.any_paused());
    assert_eq!(sh.ports[0].pauses_sent[5].get(), 1);
    assert_eq!(sh.ports[0].resumes_sent[5].get(), 1);
    assert_eq!(sh.ports[1].marked.get(), 2);
    // No upstreamQ (plain host) or an elided pair (2 -> 1): never marked.
    assert_eq!(b.on_enqueue(0, NO_UPQ, 1, 0, 1 << 30, 1), (0, None));
    assert_eq!(b.on_enqueue(2, 5, 1, 0, 1 << 30, 1), (0, None));
    // Active queues are recorded.
    assert_eq!(sh.ports[1].active_queues.get(), 1);
    assert_eq!(sh.ports[1].active_queues_max.get(), 2);
}

/// §3.3.2's refinement, by hand: Th(2 active) = 12 500 B at port 1. Marks of upstreamQ 5
/// sit in queues 0 and 1 of port 1; the upstream is resumed when both have drained below
/// Th, not when the last marked packet leaves.
#[test]
fn below_th_resumes_when_every_holding_queue_is_under_th() {
    let mut b = bfc(
        BfcConfig {
            resume: Resume::BelowTh,
            ..BfcConfig::default()
        },
        8,
    );
    let sh = b.shared().clone();
    let (m1, s1) = b.on_enqueue(0, 5, 1, 0, 13_000, 2);
    assert_eq!((m1, s1.map(|s| s.1.signal)), (1, Some(Signal::Pause(5))));
    let (m2, _) = b.on_enqueue(0, 5, 1, 0, 14_500, 2);
    let (m3, s3) = b.on_enqueue(0, 5, 1, 1, 13_000, 2);
    assert_eq!((m2, m3, s3), (1, 1, None));
    assert_eq!(sh.pause_counter(0, 5), 3);
    let mut out = Vec::new();
    // Queue 0 still at Th: nothing. Below Th: its two marks stop counting (3 -> 1).
    b.after_dequeue(1, 0, 12_500, 2, &mut out);
    assert_eq!(sh.pause_counter(0, 5), 3);
    b.after_dequeue(1, 0, 12_499, 2, &mut out);
    assert!(out.is_empty());
    assert_eq!(sh.pause_counter(0, 5), 1);
    // The released packets leave later: they no longer count (epoch moved on).
    assert_eq!(b.on_dequeue(1, 0, NO_SLOT, m1, 0, 5, 1), None);
    assert_eq!(sh.pause_counter(0, 5), 1);
    // A packet marked in queue 0's new epoch counts again and leaves normally.
    let (m4, s4) = b.on_enqueue(0, 5, 1, 0, 20_000, 2);
    assert!(m4 != m1 && m4 != 0 && s4.is_none());
    assert_eq!(b.on_dequeue(1, 0, NO_SLOT, m4, 0, 5, 2), None);
    assert_eq!(sh.pause_counter(0, 5), 1);
    // Queue 1 drains below Th (1 active queue: Th 25 000 B): counter 1 -> 0, RESUME(5).
    b.after_dequeue(1, 1, 24_999, 1, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].1.signal), (0, Signal::Resume(5)));
    assert_eq!(sh.pause_counter(0, 5), 0);
    assert_eq!(b.on_dequeue(1, 1, NO_SLOT, m3, 0, 5, 3), None);
    assert_eq!(sh.ports[0].resumes_sent[5].get(), 1);
    // Drained (the paper's pseudocode) ignores after_dequeue.
    let mut d = bfc(BfcConfig::default(), 8);
    let (m, _) = d.on_enqueue(0, 5, 1, 0, 13_000, 2);
    d.after_dequeue(1, 0, 0, 1, &mut out);
    assert_eq!(d.shared().pause_counter(0, 5), 1);
    assert!(d.on_dequeue(1, 0, NO_SLOT, m, 0, 5, 4).is_some());
}

/// A port not configured as a BFC peer gets refreshes once a shimmed packet came from it.
#[test]
fn refresh_reaches_learned_peers() {
    let sh = Arc::new(BfcShared::new(3));
    let p = ports(3, 8);
    let cfg = BfcConfig {
        hrtt_ps: Some(HRTT),
        ..BfcConfig::default()
    };
    let mut b = Bfc::new(cfg, &p, &[], vec![false; 3], sh, true).unwrap();
    b.on_enqueue(0, 3, 1, 0, 1 << 20, 1);
    let due = b.refresh_due(0).unwrap();
    let mut out = Vec::new();
    b.refresh(due, &mut out);
    assert!(out.is_empty(), "port 0 is not known to speak BFC");
    b.note_signal_port(0);
    b.on_enqueue(0, 4, 1, 0, 1 << 20, 1);
    let due = b.refresh_due(due).unwrap();
    b.refresh(due, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].0, out[0].1.signal),
        (
            0,
            Signal::Bitmap {
                count: 128,
                bits: (1 << 3) | (1 << 4)
            }
        )
    );
}

#[test]
fn refresh_bitmap_then_one_all_clear() {
    let mut b = bfc(BfcConfig::default(), 8);
    let (_, s) = b.on_enqueue(0, 3, 1, 0, 1 << 20, 1);
    assert!(s.is_some());
    b.on_enqueue(0, 9, 1, 0, 1 << 20, 1);
    let due = b.refresh_due(1_000).unwrap();
    assert_eq!(due, 1_000 + 10 * HRTT); // 10 × HRTT = 20 µs
    let mut out = Vec::new();
    b.refresh(due - 1, &mut out);
    assert!(out.is_empty());
    b.refresh(due, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].1.signal,
        Signal::Bitmap {
            count: 128,
            bits: (1 << 3) | (1 << 9)
        }
    );
    out.clear();
    b.on_dequeue(1, 0, NO_SLOT, 1, 0, 3, 0);
    b.on_dequeue(1, 0, NO_SLOT, 1, 0, 9, 0);
    let due2 = b.refresh_due(due).unwrap();
    assert_eq!(due2, due + 10 * HRTT);
    b.refresh(due2, &mut out);
    assert_eq!(
        out[0].1.signal,
        Signal::Bitmap {
            count: 128,
            bits: 0
        }
    );
    assert_eq!(b.refresh_due(due2), None, "idle: no timer");
}

/// With several pipes one refreshes, whichever pipe paused: a PAUSE and its RESUME sent by
/// another pipe within one period still get one all-clear bitmap from the refresher, which
/// repairs a RESUME the upstream lost or received before its PAUSE.
#[test]
fn another_pipes_pause_arms_the_refresher() {
    let sh = Arc::new(BfcShared::new(3));
    let p = ports(3, 8);
    let cfg = BfcConfig {
        hrtt_ps: Some(HRTT),
        ..BfcConfig::default()
    };
    let mut r = Bfc::new(cfg.clone(), &p, &[], vec![true; 3], sh.clone(), true).unwrap();
    let mut w = Bfc::new(cfg, &p, &[], vec![true; 3], sh, false).unwrap();
    // The refresher's next refresh after `t`: its time and the (port, signal)s it sent.
    let refresh_after = |r: &mut Bfc, t: u64| {
        let due = r.refresh_due(t).unwrap();
        let mut out = Vec::new();
        r.refresh(due, &mut out);
        (
            due,
            out.iter().map(|o| (o.0, o.1.signal)).collect::<Vec<_>>(),
        )
    };
    let bitmap = |bits| [(0, Signal::Bitmap { count: 128, bits })];
    assert_eq!(r.pending_refresh(), None, "nothing paused: no timer");
    let (m, s) = w.on_enqueue(0, 3, 1, 0, 1 << 20, 1);
    assert!(s.is_some(), "the other pipe sent the PAUSE");
    assert_eq!(w.pending_refresh(), None, "only the refresher refreshes");
    assert_eq!(
        r.pending_refresh(),
        Some(0),
        "armed, anchored at the next poll"
    );
    let (due, sent) = refresh_after(&mut r, 1_000);
    assert_eq!(due, 1_000 + 10 * HRTT);
    assert_eq!(sent, bitmap(1 << 3));
    assert!(w.on_dequeue(1, 0, NO_SLOT, m, 0, 3, 0).is_some(), "RESUME");
    let (due, sent) = refresh_after(&mut r, due);
    assert_eq!(sent, bitmap(0));
    assert_eq!(r.refresh_due(due), None, "idle again");
    // PAUSE and RESUME both within one period, both by the other pipe: the bitmap is clear
    // at the refresh, yet the port was touched, so one all-clear goes out.
    let (m, _) = w.on_enqueue(0, 5, 1, 0, 1 << 20, 1);
    assert!(w.on_dequeue(1, 0, NO_SLOT, m, 0, 5, 0).is_some());
    let (due, sent) = refresh_after(&mut r, due);
    assert_eq!(sent, bitmap(0));
    assert_eq!(r.refresh_due(due), None);
}

#[test]
fn received_signals_drive_pause_registers() {
    let sh = BfcShared::new(2);
    let afc = Afc::new([8, 8]);
    let regs = afc.regs();
    assert_eq!(Bfc::apply_signal(&sh, 1, &Signal::Pause(4), &afc, 0), 1);
    assert!(regs[1].is_paused(4, u64::MAX - 1));
    Bfc::apply_signal(&sh, 1, &Signal::Resume(4), &afc, 5);
    assert!(!regs[1].is_paused(4, 6));
    Bfc::apply_signal(
        &sh,
        1,
        &Signal::Bitmap {
            count: 128,
            bits: 0b1010,
        },
        &afc,
        7,
    );
    assert_eq!(regs[1].paused_mask(8), 0b1010);
    Bfc::apply_signal(&sh, 1, &Signal::Bitmap { count: 8, bits: 0 }, &afc, 9);
    assert_eq!(regs[1].paused_mask(10), 0);
    assert_eq!(sh.ports[1].pauses_received[4].get(), 1);
    assert_eq!(sh.ports[1].resumes_received[4].get(), 1);
    assert_eq!(sh.ports[1].refresh_received.get(), 2);
    // The frame of a PAUSE parses back to the same signal.
    let r = SignalRepr {
        dst_addr: DST_SIGNAL,
        src_addr: [2; 6],
        signal: Signal::Pause(4),
    };
    let mut buf = [0u8; 60];
    r.emit_into(&mut buf);
    assert_eq!(
        SignalRepr::parse(&Frame::new_checked(&buf[..]).unwrap()).unwrap(),
        r
    );
}

#[test]
fn rejects_bad_config() {
    let p = ports(2, 200);
    let sh = Arc::new(BfcShared::new(2));
    assert!(matches!(
        Bfc::new(BfcConfig::default(), &p, &[], vec![], sh.clone(), true),
        Err(BfcError::Queues(0, 200))
    ));
    let p = ports(2, 8);
    assert!(matches!(
        Bfc::new(BfcConfig::default(), &p, &[(0, 5)], vec![], sh, true),
        Err(BfcError::ElidePort(5, 2))
    ));
}

/// Found by the `topology` fuzz target: `hrtt = "8888888888888500us"` (saturated to
/// `u64::MAX` ps) overflowed `sticky_hrtts * hrtt_ps`. HRTT-derived intervals above an hour
/// are a config error: the HRTT, the refresh period, and the sticky time (an HRTT of one hour
/// passes, but not two of them as the sticky time).
#[test]
fn rejects_intervals_longer_than_an_hour() {
    let p = ports(2, 8);
    let sh = Arc::new(BfcShared::new(2));
    let new = |hrtt_ps, refresh_ps| {
        let cfg = BfcConfig {
            hrtt_ps: Some(hrtt_ps),
            refresh_ps,
            sticky_hrtts: 1,
            ..BfcConfig::default()
        };
        Bfc::new(cfg, &p, &[], vec![], sh.clone(), true)
    };
    assert!(matches!(
        new(u64::MAX, None),
        Err(BfcError::Interval("hrtt", _))
    ));
    assert!(matches!(
        new(HRTT, Some(MAX_INTERVAL_PS + 1)),
        Err(BfcError::Interval("refresh", _))
    ));
    assert!(new(MAX_INTERVAL_PS / 10, None).is_ok());
    let cfg = BfcConfig {
        hrtt_ps: Some(MAX_INTERVAL_PS),
        sticky_hrtts: 2,
        ..BfcConfig::default()
    };
    assert!(matches!(
        Bfc::new(cfg, &p, &[], vec![], sh.clone(), true),
        Err(BfcError::Interval("sticky time", _))
    ));
}

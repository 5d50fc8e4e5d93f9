use super::iq::IqState;
use super::*;
use std::collections::VecDeque;

const BDP: u64 = 1000;
const ME: u16 = 7;

/// A switch with `n` ports of 8 queues: queue 0 is the OQ, `iqs` the IQs (single-tier).
fn switch(n: usize, iqs: &[u8]) -> Pyrrha {
    switch_in(IqMode::SingleTier, n, iqs)
}

/// [`switch`] with IQs organised as `mode` says.
fn switch_in(mode: IqMode, n: usize, iqs: &[u8]) -> Pyrrha {
    let ports: Vec<PyrrhaPort> = (0..n)
        .map(|_| PyrrhaPort {
            bdp_bytes: BDP,
            iqs: iqs.to_vec(),
            queues: 8,
        })
        .collect();
    let cfg = PyrrhaConfig {
        iq_mode: mode,
        ..PyrrhaConfig::default()
    };
    Pyrrha::new(cfg, ME, &ports).unwrap()
}

fn msgs(p: &mut Pyrrha) -> Vec<(u16, Msg)> {
    p.drain_msgs().collect()
}

fn cmds(p: &mut Pyrrha) -> Vec<(u8, bool)> {
    p.drain_cmds().map(|c| (c.queue, c.pause)).collect()
}

const R: RootId = RootId::new(3, 2);
const N: RootId = RootId::new(9, 1);

/// A path out of `port` that crosses `r` `hops` hops on (other hops on switch 100).
fn path(port: u16, hops: &[(usize, RootId)]) -> Vec<RootId> {
    let mut p: Vec<RootId> = (0..4).map(|k| RootId::new(100 + k, 0)).collect();
    p[0] = RootId::new(ME, port);
    for &(k, r) in hops {
        p[k] = r;
    }
    p
}

#[test]
fn oq_thresholds_pause_once_per_upstream_and_resume_below_k_resume() {
    let mut p = switch(3, &[1, 2]);
    assert_eq!(p.thresholds(1), (2 * BDP, BDP));
    let me1 = RootId::new(ME, 1);
    // At K_pause exactly: not yet a root.
    p.on_enqueue(1, 0, Some(0), 2 * BDP, 0);
    assert_eq!(p.oq_state(1), OqState::Idle);
    assert!(msgs(&mut p).is_empty());
    // Above it: PAUSE(me:1, 1 hop) to the packet's upstream port, once.
    p.on_enqueue(1, 0, Some(0), 2 * BDP + 1, 1);
    p.on_enqueue(1, 0, Some(0), 2 * BDP + 500, 2);
    p.on_enqueue(1, 0, Some(2), 2 * BDP + 900, 3);
    assert_eq!(p.oq_state(1), OqState::Root);
    let pause = Msg::Pause { root: me1, hops: 1 };
    assert_eq!(msgs(&mut p), vec![(0, pause), (2, pause)]);
    // A packet from nowhere (locally generated) or hairpinning pauses no one.
    p.on_enqueue(1, 0, None, 3 * BDP, 4);
    p.on_enqueue(1, 0, Some(1), 3 * BDP, 4);
    assert!(msgs(&mut p).is_empty());
    // Down to K_resume exactly: still paused; below: RESUME both.
    p.on_dequeue(1, 0, BDP, 5);
    assert!(msgs(&mut p).is_empty());
    p.on_dequeue(1, 0, BDP - 1, 6);
    let resume = Msg::Resume { root: me1, hops: 1 };
    assert_eq!(msgs(&mut p), vec![(0, resume), (2, resume)]);
    assert_eq!(p.oq_state(1), OqState::Idle);
    assert_eq!(p.stats().ports[1].roots_detected, 1);
    // OQs are never paused by Pyrrha.
    assert!(cmds(&mut p).is_empty());
    assert_eq!(p.stats().paused_ps["7:1"], 6 - 1);
}

#[test]
fn loop_guard_ignores_a_pause_naming_this_switch() {
    let mut p = switch(2, &[1]);
    p.on_pause(1, RootId::new(ME, 0), 2, 0);
    assert!(p.roots().is_empty());
    assert_eq!(p.stats().ports[1].loops_ignored, 1);
    let c = p.select(1, 0, &path(1, &[(2, RootId::new(ME, 0))]), 0);
    assert_eq!(c, Choice::Oq);
    // Someone else's root is taken.
    p.on_pause(1, R, 2, 0);
    assert_eq!(p.roots().len(), 1);
}

#[test]
fn paths_match_roots_at_their_hop_distance_only() {
    let mut p = switch(2, &[1, 2]);
    p.on_pause(1, R, 2, 0);
    // R one hop on is not the R two hops on.
    assert_eq!(p.select(1, 0, &path(1, &[(1, R)]), 0), Choice::Oq);
    assert_eq!(p.select(1, 0, &path(1, &[(2, R)]), 0), Choice::Iq(1));
    // Paths shorter than the root's distance cannot cross it.
    assert_eq!(p.select(1, 0, &path(1, &[])[..2], 0), Choice::Oq);
}

/// Fig. 6, transition by transition, on one IQ.
#[test]
fn fig6_iq_state_machine() {
    let mut p = switch(2, &[1, 2, 3]);
    let via_r = path(1, &[(2, R)]);
    assert_eq!(p.iq_state(1, 1), IqState::Unassigned);
    // PAUSE(R): a matching packet gets an IQ from the stack, paused.
    p.on_pause(1, R, 2, 10);
    assert_eq!(p.select(1, 0, &via_r, 11), Choice::Iq(1));
    assert_eq!(p.iq_state(1, 1), IqState::Paused);
    assert_eq!(cmds(&mut p), vec![(1, true)]);
    assert_eq!(p.iqs_in_use(1), 1);
    p.on_enqueue(1, 1, Some(0), 500, 11);
    // RESUME(R): resumed, still assigned while it holds packets.
    p.on_resume(1, R, 2, 20);
    assert_eq!(p.iq_state(1, 1), IqState::Resumed);
    assert_eq!(cmds(&mut p), vec![(1, false)]);
    // PAUSE again: paused; an empty paused IQ is not unassigned.
    p.on_pause(1, R, 2, 30);
    assert_eq!(p.iq_state(1, 1), IqState::Paused);
    assert_eq!(cmds(&mut p), vec![(1, true)]);
    p.on_dequeue(1, 1, 0, 31);
    assert_eq!(p.iq_state(1, 1), IqState::Paused);
    // Resumed and empty: unassigned, back on the stack, the root forgotten.
    p.on_resume(1, R, 2, 40);
    assert_eq!(p.iq_state(1, 1), IqState::Unassigned);
    assert_eq!(p.iqs_in_use(1), 0);
    assert!(p.roots().is_empty());
    assert_eq!(p.stats().paused_ps["3:2"], (20 - 10) + (40 - 30));

    // MERGE(R → N) on a paused IQ: soft-merging, no longer paused by R; N inherits the pause.
    p.on_pause(1, R, 2, 50);
    assert_eq!(p.select(1, 0, &via_r, 50), Choice::Iq(1));
    p.on_enqueue(1, 1, Some(0), 500, 50);
    cmds(&mut p);
    p.on_merge(1, R, 2, N, 3, 60);
    assert_eq!(p.iq_state(1, 1), IqState::SoftMerging);
    assert_eq!(cmds(&mut p), vec![(1, false)]);
    // Flows of R alone keep to the soft-merging IQ (order); flows crossing N get their own,
    // paused (inherited) and held behind a mark in the soft-merging IQ.
    assert_eq!(p.select(1, 0, &via_r, 61), Choice::Iq(1));
    let via_n = path(1, &[(2, R), (3, N)]);
    assert_eq!(p.select(1, 0, &via_n, 61), Choice::Iq(2));
    assert_eq!(p.iq_state(1, 2), IqState::Paused);
    assert_eq!(p.stats().ports[1].order_marks, 1);
    // Soft-merging and empty: unassigned.
    p.on_dequeue(1, 1, 0, 70);
    assert_eq!(p.iq_state(1, 1), IqState::Unassigned);
    // Flows of R alone now go to the OQ.
    assert_eq!(p.select(1, 0, &via_r, 71), Choice::Oq);
    assert_eq!(p.iq_state(1, 2), IqState::Paused, "N still paused");
}

#[test]
fn a_false_positive_root_merges_its_tree_into_the_downstream_root() {
    let mut p = switch(3, &[1, 2]);
    let old = RootId::new(ME, 1);
    p.on_enqueue(1, 0, Some(0), 3 * BDP, 0);
    p.on_enqueue(1, 0, Some(2), 3 * BDP, 0);
    msgs(&mut p);
    // PAUSE from a root one hop further down, on the candidate's own port.
    p.on_pause(1, N, 1, 5);
    assert_eq!(p.oq_state(1), OqState::FalsePositive);
    let m = Msg::Merge {
        old,
        old_hops: 1,
        new: N,
        new_hops: 2,
    };
    assert_eq!(msgs(&mut p), vec![(0, m), (2, m)]);
    // No renomination while it is still long...
    p.on_enqueue(1, 0, Some(0), 4 * BDP, 6);
    assert!(msgs(&mut p).is_empty());
    // ...and the upstream ports it paused now wait for N: when N's IQ here falls below
    // K_resume, they get RESUME(N, 2).
    assert_eq!(p.select(1, 0, &path(1, &[(1, N)]), 7), Choice::Iq(1));
    p.on_enqueue(1, 1, Some(0), 500, 7);
    p.on_resume(1, N, 1, 8);
    p.on_dequeue(1, 1, 0, 9);
    let r = Msg::Resume { root: N, hops: 2 };
    assert_eq!(msgs(&mut p), vec![(0, r), (2, r)]);
    // Below K_resume the OQ may nominate itself again.
    p.on_dequeue(1, 0, 0, 10);
    assert_eq!(p.oq_state(1), OqState::Idle);
    p.on_enqueue(1, 0, Some(0), 3 * BDP, 11);
    assert_eq!(p.oq_state(1), OqState::Root);
}

#[test]
fn iq_pauses_upstream_above_k_pause_and_merges_iteratively() {
    let mut p = switch(2, &[1, 2]);
    let old = RootId::new(3, 3);
    p.on_pause(1, old, 1, 0);
    assert_eq!(p.select(1, 0, &path(1, &[(1, old)]), 0), Choice::Iq(1));
    p.on_enqueue(1, 1, Some(0), 2 * BDP, 1);
    assert!(msgs(&mut p).is_empty());
    p.on_enqueue(1, 1, Some(0), 2 * BDP + 1, 2);
    p.on_enqueue(1, 1, Some(0), 2 * BDP + 2, 3);
    assert_eq!(msgs(&mut p), vec![(0, Msg::Pause { root: old, hops: 2 })]);
    // MERGE(old → N) from downstream goes on upstream one hop further.
    p.on_merge(1, old, 1, N, 2, 4);
    assert_eq!(
        msgs(&mut p),
        vec![(
            0,
            Msg::Merge {
                old,
                old_hops: 2,
                new: N,
                new_hops: 3
            }
        )]
    );
    assert_eq!(p.stats().ports[1].merges_received, 1);
    assert_eq!(p.stats().ports[0].merges_sent, 1);
}

/// Single-tier IQs: a flow that moves to an IQ of more roots while its packets sit in older
/// queues still leaves in order, because the new IQ waits for the order marks.
#[test]
fn order_marks_keep_order() {
    const A: RootId = RootId::new(20, 1);
    const B: RootId = RootId::new(30, 2);
    let mut p = switch(3, &[1, 2, 3]);
    let mut q: Vec<VecDeque<u32>> = vec![VecDeque::new(); 8];
    let mut paused = [false; 8];
    let size = 100u64;
    let mut seq = 0u32;
    let mut t = 0u64;
    let mut sent = Vec::new();
    let mut held_while_roots_resumed = false;
    let mut arrive = |p: &mut Pyrrha, q: &mut Vec<VecDeque<u32>>, n: u32, path: &[RootId]| {
        for _ in 0..n {
            let c = p.select(1, 0, path, 0);
            let qi = match c {
                Choice::Oq => 0,
                Choice::Iq(x) => usize::from(x),
            };
            q[qi].push_back(seq);
            p.on_enqueue(1, qi as u8, Some(0), q[qi].len() as u64 * size, 0);
            seq += 1;
        }
    };
    let apply = |p: &mut Pyrrha, paused: &mut [bool; 8]| {
        for c in p.drain_cmds() {
            paused[usize::from(c.queue)] = c.pause;
        }
    };
    // Round robin over unpaused non-empty queues, `n` departures.
    let mut rr = 0usize;
    let mut serve = |p: &mut Pyrrha,
                     q: &mut Vec<VecDeque<u32>>,
                     paused: &mut [bool; 8],
                     n: usize,
                     sent: &mut Vec<u32>| {
        for _ in 0..n {
            apply(p, paused);
            let Some(i) = (1..=8)
                .map(|k| (rr + k) % 8)
                .find(|&i| !q[i].is_empty() && !paused[i])
            else {
                return;
            };
            rr = i;
            sent.push(q[i].pop_front().unwrap());
            t += 1;
            p.on_dequeue(1, i as u8, q[i].len() as u64 * size, t);
        }
        apply(p, paused);
    };
    let f = path(1, &[(1, A), (2, B)]);
    // 4 packets in the OQ; then A is paused here: the next ones go to IQ_A behind a mark.
    arrive(&mut p, &mut q, 4, &f);
    p.on_pause(1, A, 1, 0);
    arrive(&mut p, &mut q, 3, &f);
    apply(&mut p, &mut paused);
    serve(&mut p, &mut q, &mut paused, 2, &mut sent);
    // B, further down, is detected (paused on another port): the flow moves to IQ_A∧B,
    // with marks in IQ_A (paused) and the OQ.
    p.on_pause(2, B, 2, 0);
    arrive(&mut p, &mut q, 3, &f);
    apply(&mut p, &mut paused);
    // A resumes: IQ_A and IQ_A∧B are no longer paused by a root, but IQ_A∧B is held.
    p.on_resume(1, A, 1, 0);
    apply(&mut p, &mut paused);
    let ab = p.select(1, 0, &f, 0);
    if let Choice::Iq(x) = ab {
        held_while_roots_resumed = p.iq_state(1, x) == IqState::Paused;
    }
    arrive(&mut p, &mut q, 2, &f);
    serve(&mut p, &mut q, &mut paused, 100, &mut sent);
    assert!(held_while_roots_resumed, "the new IQ waited for its mark");
    assert_eq!(sent, (0..seq).collect::<Vec<_>>(), "departures in order");
    assert!(p.stats().ports[1].order_marks >= 2);
}

#[test]
fn iq_exhaustion_hashes_roots_onto_iqs_in_use() {
    let mut p = switch(2, &[1, 2]);
    let roots = [RootId::new(40, 1), RootId::new(41, 1), RootId::new(42, 1)];
    for r in roots {
        p.on_pause(1, r, 2, 0);
    }
    let a = p.select(1, 0, &path(1, &[(2, roots[0])]), 0);
    let b = p.select(1, 0, &path(1, &[(2, roots[1])]), 0);
    assert_eq!((a, b), (Choice::Iq(1), Choice::Iq(2)));
    let c = p.select(1, 0, &path(1, &[(2, roots[2])]), 0);
    assert!(matches!(c, Choice::Iq(1 | 2)), "{c:?}");
    assert_eq!(p.stats().ports[1].iqs_hashed, 1);
    assert_eq!(p.iqs_in_use(1), 2);
    // Sticky: the hashed root keeps its IQ.
    assert_eq!(p.select(1, 0, &path(1, &[(2, roots[2])]), 0), c);
    // The shared IQ stays paused until every root hashed onto it resumes.
    let Choice::Iq(x) = c else { unreachable!() };
    let own = roots[usize::from(x) - 1];
    p.on_resume(1, own, 2, 1);
    assert_eq!(p.iq_state(1, x), IqState::Paused);
    p.on_resume(1, roots[2], 2, 2);
    assert_eq!(p.iq_state(1, x), IqState::Unassigned, "empty and resumed");
    // A port without IQs keeps congested flows in the OQ.
    let mut none = switch(2, &[]);
    none.on_pause(1, roots[0], 2, 0);
    assert_eq!(none.select(1, 0, &path(1, &[(2, roots[0])]), 0), Choice::Oq);
}

#[test]
fn max_iqs_caps_the_stack_and_bad_settings_are_refused() {
    let cfg = PyrrhaConfig {
        max_iqs: 1,
        ..PyrrhaConfig::default()
    };
    let port = PyrrhaPort {
        bdp_bytes: BDP,
        iqs: vec![1, 2, 3],
        queues: 4,
    };
    let mut p = Pyrrha::new(cfg.clone(), 1, std::slice::from_ref(&port)).unwrap();
    p.on_pause(0, R, 2, 0);
    p.on_pause(0, N, 2, 0);
    p.select(0, 0, &path(0, &[(2, R)]), 0);
    p.select(0, 0, &path(0, &[(2, N)]), 0);
    assert_eq!(p.iqs_in_use(0), 1);
    let bad = PyrrhaPort {
        iqs: vec![4],
        ..port.clone()
    };
    assert_eq!(
        Pyrrha::new(cfg.clone(), 1, &[bad]).unwrap_err(),
        PyrrhaError::Iq(0, 4)
    );
    let inverted = PyrrhaConfig {
        k_pause: 1.0,
        k_resume: 2.0,
        ..cfg
    };
    assert!(matches!(
        Pyrrha::new(inverted, 1, &[port]),
        Err(PyrrhaError::Thresholds(..))
    ));
}

#[test]
fn an_iq_whose_packet_was_dropped_is_reclaimed_when_a_new_one_is_needed() {
    let mut p = switch(2, &[1, 2]);
    let a = RootId::new(50, 1);
    let b = RootId::new(51, 1);
    p.on_pause(0, a, 2, 0);
    p.on_pause(0, b, 2, 0);
    // Root a paused on port 0 only: on port 1 its IQ is resumed; the packet is then dropped.
    assert_eq!(p.select(1, 0, &path(1, &[(2, a)]), 1), Choice::Iq(1));
    assert_eq!(p.iqs_in_use(1), 1);
    assert_eq!(p.select(1, 0, &path(1, &[(2, b)]), 2), Choice::Iq(1));
    assert_eq!(
        p.iqs_in_use(1),
        1,
        "a's idle IQ went back to the stack first"
    );
    assert_eq!(p.iq_state(1, 1), IqState::Resumed);
}

// ---- two-level HIQ (§4.3) -------------------------------------------------------------

fn hiq_switch(n: usize, iqs: &[u8]) -> Pyrrha {
    switch_in(IqMode::TwoLevel, n, iqs)
}

const A1: RootId = RootId::new(20, 1);
const B2: RootId = RootId::new(30, 2);

/// A packet crossing a near root A and a far root B enters A's IQ (level 1); once A resumes
/// the HIQ scheduler moves it into B's IQ (level 2), and once B resumes into the OQ. One IQ
/// per root, no order marks.
#[test]
fn hiq_packet_waits_for_every_root_near_to_far() {
    let mut p = hiq_switch(3, &[1, 2, 3]);
    p.on_pause(1, A1, 1, 0);
    p.on_pause(1, B2, 2, 0);
    let ab = path(1, &[(1, A1), (2, B2)]);
    let b_only = path(1, &[(2, B2)]);
    let Choice::Iq(qa) = p.select(1, 0, &ab, 1) else {
        panic!("no IQ for A")
    };
    p.on_enqueue(1, qa, Some(0), 100, 1);
    let Choice::Iq(qb) = p.select(1, 0, &b_only, 1) else {
        panic!("no IQ for B")
    };
    p.on_enqueue(1, qb, Some(0), 100, 1);
    assert_ne!(
        qa, qb,
        "the flow crossing A and B waits in A's IQ (nearest first)"
    );
    assert_eq!(p.iqs_in_use(1), 2);
    assert!(!p.iq_ready(1, qa) && !p.iq_ready(1, qb));
    assert!(!p.iq_ready(1, 0) && !p.is_iq(1, 0), "the OQ is no IQ");
    // A resumes: A's IQ may be dequeued, into B's IQ (B still paused).
    p.on_resume(1, A1, 1, 2);
    assert!(p.iq_ready(1, qa));
    assert_eq!(p.next_queue(1, qa, 0, &ab, 3), Choice::Iq(qb));
    p.on_dequeue(1, qa, 0, 3);
    p.on_enqueue(1, qb, Some(0), 200, 3);
    assert_eq!(p.iqs_in_use(1), 1, "A's IQ empty and resumed: unassigned");
    assert!(!p.iq_ready(1, qb));
    // B resumes: B's IQ drains into the OQ.
    p.on_resume(1, B2, 2, 4);
    assert!(p.iq_ready(1, qb));
    assert_eq!(p.next_queue(1, qb, 0, &ab, 5), Choice::Oq);
    assert_eq!(p.next_queue(1, qb, 0, &b_only, 5), Choice::Oq);
    assert_eq!(p.stats().ports[1].order_marks, 0);
}

/// A MERGE turns the false-positive root's IQ soft-merging: dequeued, its packets are matched
/// afresh, the real root's flows into that root's IQ (which inherited the pause), the others
/// to the OQ (§4.3, "Congested flows of root P5 are dequeued from IQ_P1 and then pushed into
/// the next level IQ_P5. Uncongested flows are forwarded to OQ").
#[test]
fn hiq_soft_merging_iq_splits_into_the_real_roots_iq_and_the_oq() {
    let mut p = hiq_switch(3, &[1, 2, 3]);
    p.on_pause(1, A1, 1, 0);
    let via_b = path(1, &[(1, A1), (2, B2)]);
    let not_b = path(1, &[(1, A1)]);
    let Choice::Iq(qa) = p.select(1, 0, &via_b, 1) else {
        panic!("no IQ")
    };
    assert_eq!(p.select(1, 0, &not_b, 1), Choice::Iq(qa));
    p.on_enqueue(1, qa, Some(0), 200, 1);
    p.on_merge(1, A1, 1, B2, 2, 2);
    assert_eq!(p.iq_state(1, qa), IqState::SoftMerging);
    assert!(p.iq_ready(1, qa));
    let Choice::Iq(qb) = p.next_queue(1, qa, 0, &via_b, 3) else {
        panic!("the real root's flow went to the OQ")
    };
    assert_ne!(qb, qa);
    assert_eq!(p.iq_state(1, qb), IqState::Paused, "B inherited A's pause");
    assert_eq!(p.next_queue(1, qa, 0, &not_b, 3), Choice::Oq);
}

/// Drives port 1 of a switch in `mode` through a fixed pseudo-random sequence of PAUSE,
/// RESUME and MERGE for three roots (A one hop on, B and C two) and arrivals of six flows
/// crossing different sets of them, with a round-robin wire over the queues not paused. A
/// two-level HIQ's IQs never reach the wire: picking one moves its head on
/// ([`Pyrrha::next_queue`]). Then every root resumes and the port must drain (no queue held
/// for ever). Returns the departures (flow, sequence number), how many packets were moved,
/// and the switch.
fn drive_port(mode: IqMode, seed: u64, iqs: &[u8]) -> (Vec<(usize, u32)>, usize, Pyrrha) {
    const C2: RootId = RootId::new(40, 3);
    let mut p = switch_in(mode, 3, iqs);
    let flows = [
        path(1, &[(1, A1), (2, B2)]),
        path(1, &[(1, A1), (2, C2)]),
        path(1, &[(1, A1)]),
        path(1, &[(2, B2)]),
        path(1, &[(2, C2)]),
        path(1, &[]),
    ];
    let mut q: Vec<VecDeque<(usize, u32)>> = vec![VecDeque::new(); 8];
    let mut paused = [false; 8];
    let mut next = [0u32; 6];
    let (mut sent, mut moved) = (Vec::new(), 0);
    let mut x = seed;
    let mut rnd = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut rr = 0usize;
    let size = 100u64;
    for t in 0..8000u64 {
        // Then every root resumes and the port drains: nothing may stay held (liveness).
        if t == 4000 {
            for port in [1, 2] {
                p.on_resume(port, A1, 1, t);
                p.on_resume(port, B2, 2, t);
                p.on_resume(port, C2, 2, t);
            }
        }
        let ev = if t < 4000 { rnd(20) } else { 13 };
        match ev {
            0 => p.on_pause(1, A1, 1, t),
            1 => p.on_resume(1, A1, 1, t),
            2 => p.on_pause(2, B2, 2, t),
            3 => p.on_resume(2, B2, 2, t),
            4 => p.on_pause(1, C2, 2, t),
            5 => p.on_resume(1, C2, 2, t),
            6 if rnd(4) == 0 => p.on_merge(1, A1, 1, B2, 2, t),
            7..=12 => {
                let f = rnd(6) as usize;
                let qi = match p.select(1, 0, &flows[f], t) {
                    Choice::Oq => 0,
                    Choice::Iq(i) => usize::from(i),
                };
                q[qi].push_back((f, next[f]));
                next[f] += 1;
                p.on_enqueue(1, qi as u8, Some(0), q[qi].len() as u64 * size, t);
            }
            _ => {
                for c in p.drain_cmds() {
                    paused[usize::from(c.queue)] = c.pause;
                }
                let Some(i) = (1..=8)
                    .map(|k| (rr + k) % 8)
                    .find(|&i| !q[i].is_empty() && !paused[i])
                else {
                    continue;
                };
                rr = i;
                let pkt = q[i].pop_front().unwrap();
                if mode == IqMode::TwoLevel && i != 0 {
                    // The HIQ scheduler: on to the next level, never to the wire. Where to
                    // is decided while the packet still counts in its IQ (an IQ the dequeue
                    // leaves empty and resumed is unassigned, and its roots with it).
                    let to = match p.next_queue(1, i as u8, 0, &flows[pkt.0], t) {
                        Choice::Oq => 0,
                        Choice::Iq(j) => usize::from(j),
                    };
                    p.on_dequeue(1, i as u8, q[i].len() as u64 * size, t);
                    assert!(to != i);
                    q[to].push_back(pkt);
                    p.on_enqueue(1, to as u8, Some(0), q[to].len() as u64 * size, t);
                    moved += 1;
                } else {
                    p.on_dequeue(1, i as u8, q[i].len() as u64 * size, t);
                    sent.push(pkt);
                }
            }
        }
        for c in p.drain_cmds() {
            paused[usize::from(c.queue)] = c.pause;
        }
        p.drain_msgs().for_each(drop);
    }
    let left: usize = q.iter().map(VecDeque::len).sum();
    assert_eq!(left, 0, "{mode:?} seed {seed}: {left} packets never left");
    (sent, moved, p)
}

/// Whether every flow of `sent` left in order; the first (flow, seq, previous) out of order.
fn out_of_order(sent: &[(usize, u32)]) -> Option<(usize, u32, u32)> {
    let mut last = [None::<u32>; 6];
    for &(f, s) in sent {
        if let Some(l) = last[f].filter(|&l| s < l) {
            return Some((f, s, l));
        }
        last[f] = Some(s);
    }
    None
}

/// The two-level HIQ delivers every flow in order through a storm of root changes (PAUSE,
/// RESUME, MERGE of three roots at two distances; §4.3: "IQs in HIQ are arranged by levels,
/// supporting in-order delivery naturally"), and really moves packets between levels. (It
/// failed before the HIQ decided a packet's next level while the packet still counted in its
/// IQ: the dequeue had unassigned the emptied IQ and forgotten its roots, so the packet
/// skipped to the OQ past its flow's earlier packets in a farther root's IQ.)
#[test]
fn hiq_delivers_in_order_through_root_changes() {
    for seed in 1..=20 {
        let (sent, moved, _) = drive_port(IqMode::TwoLevel, seed, &[1, 2, 3, 4, 5, 6, 7]);
        assert!(sent.len() > 300, "seed {seed}: {} sent", sent.len());
        assert_eq!(out_of_order(&sent), None, "seed {seed}");
        assert!(moved > 100, "seed {seed}: {moved} moves");
    }
}

/// Single-tier IQs (App. C) through the same storm, with IQs to spare and with too few (two:
/// keys are hashed onto IQs in use, §4.5). A flow changes queues when a root comes (to a new
/// IQ), merges or comes back (to an IQ that may already be in use: with seed 1, flow 1
/// crossing A and C had packets in the IQ of {A, C}; A merged, and its next packet went to
/// C's IQ, which another flow had assigned earlier, and left first), or is hashed onto an IQ
/// in use. Each time, the IQ it joins waits behind order marks in the queues the flow may
/// have used (its own earlier packets go first, so two IQs cannot wait on each other).
/// Without the marks on IQs in use, seeds 1..=20 reorder.
#[test]
fn single_tier_delivers_in_order_through_root_changes() {
    for iqs in [&[1u8, 2, 3, 4, 5, 6, 7][..], &[1, 2]] {
        let mut marks = 0;
        for seed in 1..=100 {
            let (sent, _, p) = drive_port(IqMode::SingleTier, seed, iqs);
            assert!(sent.len() > 300, "seed {seed}: {} sent", sent.len());
            assert_eq!(out_of_order(&sent), None, "seed {seed}, IQs {iqs:?}");
            marks += p.stats().ports[1].order_marks;
        }
        assert!(marks > 100, "IQs {iqs:?}: {marks} order marks");
    }
}

//! Hand-worked sequences of Alg. 1/2 and §3.3.

use super::*;
use std::collections::VecDeque;

const G100: u64 = 100_000_000_000;

fn port(queues: usize) -> BfcPort {
    BfcPort {
        rate_bps: G100,
        delay_ps: 1_000_000,
        queues,
        mtu_frame: 1514,
        mac: [2, 0, 0, 0, 0, 1],
        peer_mac: Some([2, 0, 0, 0, 0, 2]),
    }
}

/// Alg. 1 line 4 as printed (every empty queue may be mapped to; see `hold_rsv`).
fn aq(queues: usize, ports: usize) -> Aquarius {
    let cfg = AquariusConfig {
        hold_rsv: false,
        ..AquariusConfig::default()
    };
    Aquarius::new(cfg, &vec![port(queues); ports]).unwrap()
}

#[test]
fn the_last_empty_queue_is_held_back_for_rsvq() {
    let mut a = Aquarius::new(AquariusConfig::default(), &[port(3)]).unwrap();
    let mut c = Vec::new();
    let x = a.assign(0, 10, 0, 0, 0, &mut c);
    a.on_enqueue(9, 0, 0, usize::from(x.queue), x.slot, 10, 1500, 0, 1, 0);
    let y = a.assign(0, 11, 1 << x.queue, 0, 1, &mut c);
    assert_ne!(y.queue, x.queue, "two empty queues: one for the new flow");
    a.on_enqueue(9, 0, 0, usize::from(y.queue), y.slot, 11, 1500, 0, 2, 1);
    let spare = 0b111 & !(1 << x.queue) & !(1 << y.queue);
    let ne = (1 << x.queue) | (1 << y.queue);
    // One empty queue left: a new flow joins the least occupied one instead.
    let z = a.assign(0, 12, ne, 0, 2, &mut c);
    assert_ne!(1 << z.queue, spare);
    a.on_enqueue(9, 0, 0, usize::from(z.queue), z.slot, 12, 1500, 1500, 2, 2);
    // So a PAUSE for a flow sharing its queue finds it for rsvQ.
    let mut cmds = Vec::new();
    let sig = Signal::FlowPause {
        queue: z.queue,
        fid: 12,
    };
    assert!(a.on_signal(0, &sig, 0, &mut cmds));
    assert_eq!(a.queue_table(0).rsv().map(|q| 1 << q), Some(spare));
    assert_eq!(a.queue_table(0).stats.no_rsv, 0);
    // Printed Alg. 1 line 4: the third flow takes the last empty queue; the PAUSE finds none.
    let mut b = aq(3, 1);
    let x = b.assign(0, 10, 0, 0, 0, &mut c);
    let y = b.assign(0, 11, 1 << x.queue, 0, 1, &mut c);
    let z = b.assign(0, 12, (1 << x.queue) | (1 << y.queue), 0, 2, &mut c);
    assert_eq!(1 << z.queue, 0b111 & !(1 << x.queue) & !(1 << y.queue));
}

/// [`Aquarius::on_dequeue`] where at most one RESUME may leave: that RESUME.
#[allow(clippy::too_many_arguments)]
fn dq(
    a: &mut Aquarius,
    egress: usize,
    queue: usize,
    slot: u32,
    fid: u32,
    len: u32,
    marked: bool,
    in_port: usize,
    upq: u8,
    now: u64,
    cmds: &mut Vec<QueueCmd>,
) -> Option<(usize, SignalRepr)> {
    let mut s = Vec::new();
    a.on_dequeue(
        egress, queue, slot, fid, len, marked, in_port, upq, now, cmds, &mut s,
    );
    assert!(s.len() <= 1, "one RESUME at most: {s:?}");
    s.pop()
}

#[test]
fn occu_fair_rounds_log2_n_up() {
    // ⌈L ≫ ⌈log2 N⌉⌉: N = 3 shares as 4, N = 5 as 8.
    let l = 1000;
    let got: Vec<u64> = [1, 2, 3, 5, 8].iter().map(|&n| occu_fair(l, n)).collect();
    assert_eq!(got, vec![1000, 500, 250, 125, 125]);
    // The shift rounds up, and N = 0 reads as 1.
    assert_eq!(occu_fair(1001, 2), 501);
    assert_eq!(occu_fair(1001, 5), 126);
    assert_eq!(occu_fair(7, 0), 7);
}

#[test]
fn thresholds_from_rates() {
    // HRTT = 2 × 1 µs + 2 × (1514 + 24) B at 100 Gbit/s = 2 246 080 ps; HRTT·μ = 28 076 B.
    let a = aq(8, 2);
    assert_eq!(a.hrtt_ps(), 2_246_080);
    assert_eq!(a.q_low(0, 1), 28_076);
    assert_eq!(a.q_high(0, 1), 84_228);
    assert_eq!(a.q_low(0, 2), 14_038);
    assert_eq!(a.q_high(0, 4), 3 * 7_019);
    // T_min = MTU·NQ_active/μ: 1514 B at 100 Gbit/s = 121.12 ns per active queue.
    assert_eq!(a.t_min(0, 1), 121_120);
    assert_eq!(a.t_min(0, 4), 484_480);
    // NQ_active 0 (the entered queue is paused: it drains at 0): every threshold 0 and
    // T_min unbounded; above the port's queues, clamped.
    assert_eq!(
        (a.q_low(0, 0), a.q_high(0, 0), a.t_min(0, 0)),
        (0, 0, u64::MAX)
    );
    assert_eq!(a.t_min(0, 100), a.t_min(0, 8));
    // A configured HRTT: 2 µs at 100 Gbit/s = 25 000 B.
    let b = Aquarius::new(
        AquariusConfig {
            hrtt_ps: Some(2_000_000),
            ..Default::default()
        },
        &[port(8)],
    )
    .unwrap();
    assert_eq!((b.q_low(0, 1), b.q_high(0, 1)), (25_000, 75_000));
    assert!(Aquarius::new(
        AquariusConfig {
            alpha: 0.0,
            ..Default::default()
        },
        &[port(8)]
    )
    .is_err());
}

#[test]
fn new_flows_take_empty_then_least_occupied_queues() {
    let mut a = aq(2, 1);
    let mut c = Vec::new();
    let x = a.assign(0, 10, 0, 0, 0, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, x.queue.into(), x.slot, 10, 3000, 0, 1, 0);
    let y = a.assign(0, 11, 1 << x.queue, 0, 1, &mut c);
    assert_ne!(x.queue, y.queue, "an empty queue for a new flow");
    a.on_enqueue(9, NO_UPQ, 0, y.queue.into(), y.slot, 11, 1000, 0, 2, 1);
    // Both busy: the least occupied (y's, 1000 B against 3000 B).
    let z = a.assign(0, 12, 0b11, 0, 2, &mut c);
    assert_eq!(z.queue, y.queue);
    // A flow with packets keeps its queue.
    assert_eq!(a.assign(0, 10, 0b11, 0, 3, &mut c).queue, x.queue);
    assert_eq!(a.queue_table(0).flows(y.queue.into()), 2);
    assert_eq!(a.port_stats(0).active_flows, 3);
    // Forced placement: only the first queue, even with the others empty.
    let mut b = aq(8, 1);
    b.limit_mapping(0, 1);
    for fid in 0..4 {
        assert_eq!(b.assign(0, fid, 1, 0, 0, &mut c).queue, 0);
    }
}

/// Alg. 1 on a one-queue port at 100 Gbit/s with `NQ_active` = 1 (Q_low 28 076 B, Q_high 84 228 B,
/// T_min 121.12 ns): a heavy flow (f1) and a light one (f2) arrive 50 ns apart (T_avg falls
/// below T_min). Above Q_low only the flow over its fair share is marked; the PAUSE goes out
/// once, on pauseNum 0→1, to the ingress port with the packet's upstream queue and FID.
#[test]
fn contribution_aware_pausing_marks_only_the_heavy_flow() {
    // One queue per port, so the two flows share it (8 queues would give f2 an empty one).
    let mut a = aq(1, 3);
    let mut c = Vec::new();
    let (f1, f2) = (0x100, 0x201);
    let mut qbytes = 0u64;
    let mut now = 0;
    let mut marks = Vec::new();
    let mut sigs = Vec::new();
    let mut slots = Vec::new();
    // f1 from port 1 (upstream queue 4), f2 from port 2 (upstream queue 6): 3 packets of f1
    // per packet of f2, 1500 B each, until the queue holds 45 000 B.
    for i in 0..30u32 {
        let (fid, in_port, upq) = if i % 4 == 3 { (f2, 2, 6) } else { (f1, 1, 4) };
        let s = a.assign(0, fid, if qbytes > 0 { 1 } else { 0 }, 0, now, &mut c);
        assert_eq!(s.queue, 0);
        let (m, sig) = a.on_enqueue(in_port, upq, 0, 0, s.slot, fid, 1500, qbytes, 1, now);
        qbytes += 1500;
        marks.push((fid, m));
        slots.push((fid, s.slot, m.is_some(), in_port, upq));
        if let Some(x) = sig {
            sigs.push(x);
        }
        now += 50_000;
    }
    // Nothing is marked up to Q_low (28 076 B: the 18th packet, L = 27 000, is not above).
    assert!(marks[..18].iter().all(|(_, m)| m.is_none()));
    // Above it, T_avg < T_min: f1 (3/4 of the bytes > ⌈L ≫ 1⌉) is marked, f2 never.
    let f1_marked = marks[18..]
        .iter()
        .filter(|(f, m)| *f == f1 && *m == Some(Mark::Contribution))
        .count();
    assert_eq!(
        f1_marked,
        marks[18..].iter().filter(|(f, _)| *f == f1).count()
    );
    assert!(marks.iter().all(|(f, m)| *f == f1 || m.is_none()));
    assert_eq!(sigs.len(), 1, "one PAUSE, on 0→1");
    assert_eq!(
        sigs[0],
        (
            1,
            SignalRepr {
                dst_addr: [2, 0, 0, 0, 0, 2],
                src_addr: [2, 0, 0, 0, 0, 1],
                signal: Signal::FlowPause { queue: 4, fid: f1 }
            }
        )
    );
    assert_eq!(a.port_stats(1).pauses_sent_contribution, 1);
    assert_eq!(a.port_stats(0).marked_contribution, f1_marked as u64);
    // Alg. 2: dequeue in FIFO order; the RESUME comes with the last marked packet of f1.
    let mut resumes = Vec::new();
    for (k, &(fid, slot, marked, in_port, upq)) in slots.iter().enumerate() {
        if let Some(r) = dq(
            &mut a, 0, 0, slot, fid, 1500, marked, in_port, upq, now, &mut c,
        ) {
            resumes.push((k, r));
        }
    }
    let last_marked = slots.iter().rposition(|s| s.2).unwrap();
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0].0, last_marked);
    assert_eq!(
        resumes[0].1 .1.signal,
        Signal::FlowResume { queue: 4, fid: f1 }
    );
    assert_eq!(a.port_stats(0).active_flows, 0);
}

/// Two flows sharing a flow-table entry (a hash collision, §5) share its `pauseNum`: the
/// RESUMEs on 1→0 name the flows, ports and upstream queues the PAUSEs named, even when the
/// last marked packet to leave is the other flow's. The second flow marked while the first's
/// PAUSE is outstanding gets a PAUSE of its own (once), resumed with the entry's: with one
/// PAUSE per entry it was never paused and kept sending into the marked queue.
#[test]
fn a_colliding_flow_does_not_steal_the_resume() {
    let mut a = aq(1, 3);
    let mut c = Vec::new();
    let fa = 0x100;
    let sa = a.assign(0, fa, 0, 0, 0, &mut c).slot;
    // Another flow hashed to the same entry.
    let fb = (0x101..0x100_000)
        .find(|&f| {
            let mut t = aq(1, 3);
            t.assign(0, fa, 0, 0, 0, &mut c);
            t.assign(0, f, 1, 0, 0, &mut c).slot == sa
        })
        .expect("a colliding FID");
    // Queue above Q_high (3 × 28 076 B): every packet is marked. fa from port 1 (upstream
    // queue 4) first, then fb from port 2 (upstream queue 6), twice.
    let q = 90_000;
    let (ma, pa) = a.on_enqueue(1, 4, 0, 0, sa, fa, 1500, q, 1, 0);
    let sb = a.assign(0, fb, 1, 0, 1, &mut c).slot;
    assert_eq!(sb, sa);
    let (mb, pb) = a.on_enqueue(2, 6, 0, 0, sb, fb, 1500, q + 1500, 1, 1);
    let (mb2, pb2) = a.on_enqueue(2, 6, 0, 0, sb, fb, 1500, q + 3000, 1, 1);
    assert!(ma.is_some() && mb.is_some() && mb2.is_some());
    assert_eq!(
        pa.map(|p| (p.0, p.1.signal)),
        Some((1, Signal::FlowPause { queue: 4, fid: fa }))
    );
    assert_eq!(
        pb.map(|p| (p.0, p.1.signal)),
        Some((2, Signal::FlowPause { queue: 6, fid: fb })),
        "fb's own PAUSE, though the entry's pauseNum was 1"
    );
    assert!(pb2.is_none(), "fb's PAUSE is outstanding");
    assert!(dq(&mut a, 0, 0, sa, fa, 1500, true, 1, 4, 2, &mut c).is_none());
    assert!(dq(&mut a, 0, 0, sb, fb, 1500, true, 2, 6, 3, &mut c).is_none());
    let mut r = Vec::new();
    a.on_dequeue(0, 0, sb, fb, 1500, true, 2, 6, 4, &mut c, &mut r);
    assert_eq!(
        r.iter().map(|r| (r.0, r.1.signal)).collect::<Vec<_>>(),
        vec![
            (1, Signal::FlowResume { queue: 4, fid: fa }),
            (2, Signal::FlowResume { queue: 6, fid: fb })
        ]
    );
    assert_eq!(a.port_stats(1).resumes_sent, 1);
    assert_eq!(a.port_stats(2).resumes_sent, 1);
    assert_eq!(a.port_stats(2).pauses_sent_qhigh, 1);
    // The entry's first mark is a packet without an upstream queue (an ACK: no data shim):
    // it raises no PAUSE, so the data flow's mark must, and the RESUME follows exactly once.
    let (mk, pk) = a.on_enqueue(2, NO_UPQ, 0, 0, sa, fb, 64, q, 1, 4);
    assert!(mk.is_some() && pk.is_none());
    let (_, pd) = a.on_enqueue(1, 4, 0, 0, sa, fa, 1500, q + 64, 1, 5);
    assert_eq!(
        pd.map(|p| (p.0, p.1.signal)),
        Some((1, Signal::FlowPause { queue: 4, fid: fa }))
    );
    assert!(dq(&mut a, 0, 0, sa, fa, 1500, true, 1, 4, 6, &mut c).is_none());
    let r = dq(&mut a, 0, 0, sa, fb, 64, true, 2, NO_UPQ, 7, &mut c);
    assert_eq!(
        r.map(|r| (r.0, r.1.signal)),
        Some((1, Signal::FlowResume { queue: 4, fid: fa }))
    );
    let s1 = a.port_stats(1);
    assert_eq!(
        s1.pauses_sent_qhigh + s1.pauses_sent_contribution,
        s1.resumes_sent
    );
}

#[test]
fn q_high_marks_every_flow_and_slow_arrivals_are_not_congestion() {
    let mut a = aq(8, 2);
    let mut c = Vec::new();
    // Above Q_high (84 228 B) a light flow is marked too.
    let s = a.assign(0, 7, 1, 0, 0, &mut c);
    let (m, sig) = a.on_enqueue(1, 2, 0, s.queue.into(), s.slot, 7, 1500, 90_000, 1, 0);
    assert_eq!(m, Some(Mark::QHigh));
    assert!(matches!(
        sig,
        Some((
            1,
            SignalRepr {
                signal: Signal::FlowPause { queue: 2, fid: 7 },
                ..
            }
        ))
    ));
    assert_eq!(a.port_stats(1).pauses_sent_qhigh, 1);
    // Between Q_low and Q_high with arrivals slower than T_min: no mark, whatever the share.
    let mut b = aq(8, 2);
    let mut t = 0;
    for _ in 0..20 {
        let s = b.assign(0, 9, 1, 0, t, &mut c);
        let (m, _) = b.on_enqueue(1, 2, 0, s.queue.into(), s.slot, 9, 1500, 40_000, 1, t);
        assert_eq!(m, None);
        t += 1_000_000;
    }
    assert!(b.t_avg(0, 0) > b.t_min(0, 1));
}

/// §3.3 at the upstream, port 0 with 3 queues: a PAUSE for a flow alone in its queue pauses
/// that queue; for a flow sharing its queue, the flow moves to rsvQ (an empty queue), which
/// is paused while the shared queue runs; rsvQ resumes once the flow is resumed and its
/// packets left in the old queue have drained, and is released when the flow has left it.
#[test]
fn pause_alone_vs_shared_and_rsvq_lifecycle() {
    let mut a = aq(3, 1);
    let mut c = Vec::new();
    let (fa, fb, fc) = (1000, 2001, 3002);
    // fa alone in one queue (3000 B), fb and fc share another.
    let sa = a.assign(0, fa, 0, 0, 0, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, sa.queue.into(), sa.slot, fa, 3000, 0, 1, 0);
    let nonempty = 1u128 << sa.queue;
    let sb = a.assign(0, fb, nonempty, 0, 1, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, sb.queue.into(), sb.slot, fb, 1500, 0, 2, 1);
    // A filler flow takes the third queue (9000 B); fc, arriving while every queue is
    // busy, joins the least occupied: fb's (1500 B against 3000 B and 9000 B).
    let ff = 5005;
    let sf = a.assign(0, ff, 0b011, 0, 2, &mut c);
    let third = sf.queue;
    assert_eq!(third, 2);
    a.on_enqueue(9, NO_UPQ, 0, 2, sf.slot, ff, 9000, 0, 3, 2);
    let sc = a.assign(0, fc, 0b111, 0, 2, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, sc.queue.into(), sc.slot, fc, 1500, 1500, 3, 2);
    assert_eq!(sc.queue, sb.queue, "least occupied: fb's queue");
    // The filler leaves: the third queue is empty again.
    dq(&mut a, 0, 2, sf.slot, ff, 9000, false, 9, NO_UPQ, 2, &mut c);

    let shared = sb.queue;

    // PAUSE(fa): alone → its queue is paused.
    let pause = |fid, q| Signal::FlowPause { queue: q, fid };
    assert!(a.on_signal(0, &pause(fa, sa.queue), 0, &mut c));
    assert_eq!(c, vec![QueueCmd::Pause(sa.queue)]);
    c.clear();
    // PAUSE(fb): shares with fc → rsvQ taken from the empty queues, paused; shared runs.
    let paused = 1u128 << sa.queue;
    assert!(a.on_signal(0, &pause(fb, shared), paused, &mut c));
    let rsv = a.queue_table(0).rsv().unwrap();
    assert!(rsv != shared && rsv != sa.queue);
    assert_eq!(c, vec![QueueCmd::Pause(rsv)]);
    assert_eq!(a.queue_table(0).stats.rsv_allocations, 1);
    assert_eq!(a.queue_table(0).stats.flows_reassigned, 1);
    c.clear();
    // fb's later packets go to rsvQ; fc's stay in the shared queue.
    assert_eq!(rsv, third);
    let sb2 = a.assign(0, fb, 0b111, paused | 1 << rsv, 3, &mut c);
    assert_eq!(sb2.queue, rsv);
    a.on_enqueue(9, NO_UPQ, 0, rsv.into(), sb2.slot, fb, 1500, 0, 2, 3);
    assert_eq!(a.assign(0, fc, 0b111, 0, 4, &mut c).queue, shared);
    // No new flow is mapped to rsvQ, even when it is the only empty queue.
    let sd = a.assign(0, 4003, 0b111 & !(1 << rsv), paused | 1 << rsv, 5, &mut c);
    assert!(c.is_empty());
    assert_ne!(sd.queue, rsv);
    a.unassign(0, sd.slot, 4003, sd.queue, 5);

    // RESUME(fb) while its old packet is still in the shared queue: rsvQ stays paused.
    a.on_signal(
        0,
        &Signal::FlowResume {
            queue: shared,
            fid: fb,
        },
        0,
        &mut c,
    );
    assert!(c.is_empty());
    // The old packet leaves: rsvQ resumes (in order: nothing of fb is ahead any more).
    dq(
        &mut a,
        0,
        shared.into(),
        sb.slot,
        fb,
        1500,
        false,
        9,
        NO_UPQ,
        6,
        &mut c,
    );
    assert_eq!(c, vec![QueueCmd::Resume(rsv)]);
    c.clear();
    assert_eq!(
        a.queue_table(0).rsv(),
        Some(rsv),
        "fb still has a packet in rsvQ"
    );
    // Its packet in rsvQ leaves: fb has nothing left, rsvQ is released.
    dq(
        &mut a,
        0,
        rsv.into(),
        sb2.slot,
        fb,
        1500,
        false,
        9,
        NO_UPQ,
        7,
        &mut c,
    );
    assert_eq!(a.queue_table(0).rsv(), None);
    assert_eq!(a.queue_table(0).stats.rsv_releases, 1);
    // RESUME(fa) resumes its queue.
    a.on_signal(0, &Signal::FlowResume { queue: 0, fid: fa }, 0, &mut c);
    assert_eq!(c, vec![QueueCmd::Resume(sa.queue)]);
    // Not ours: BFC's signals are left to BFC.
    assert!(!a.on_signal(0, &Signal::Pause(1), 0, &mut c));
}

/// An upstream port with FIFO queues, its pause bits driven by the table's commands.
struct Upstream {
    a: Aquarius,
    qs: Vec<VecDeque<(u32, u32, u32)>>,
    paused: u128,
    cmds: Vec<QueueCmd>,
    fids: [u32; 2],
    seq: [u32; 2],
    got: [Vec<u32>; 2],
    now: u64,
}

impl Upstream {
    /// Flows 11 and 22 on `a`'s port 0 of `queues` queues, nothing sent yet.
    fn new(a: Aquarius, queues: usize) -> Self {
        Upstream {
            a,
            qs: vec![VecDeque::new(); queues],
            paused: 0,
            cmds: Vec::new(),
            fids: [11, 22],
            seq: [0; 2],
            got: [Vec::new(), Vec::new()],
            now: 0,
        }
    }

    fn apply(&mut self) {
        for cmd in self.cmds.drain(..) {
            match cmd {
                QueueCmd::Pause(q) => self.paused |= 1 << q,
                QueueCmd::Resume(q) => self.paused &= !(1 << q),
            }
        }
    }

    fn nonempty(&self) -> u128 {
        (0..self.qs.len())
            .filter(|&q| !self.qs[q].is_empty())
            .fold(0, |m, q| m | 1 << q)
    }

    /// A packet of flow `i`; `view` overrides the non-empty bitmap the mapping sees.
    fn send(&mut self, i: usize, view: Option<u128>) -> usize {
        self.now += 1;
        let ne = view.unwrap_or_else(|| self.nonempty());
        let fid = self.fids[i];
        let s = self
            .a
            .assign(0, fid, ne, self.paused, self.now, &mut self.cmds);
        let q = usize::from(s.queue);
        self.a
            .on_enqueue(9, NO_UPQ, 0, q, s.slot, fid, 1000, 0, 1, self.now);
        self.qs[q].push_back((fid, self.seq[i], s.slot));
        self.seq[i] += 1;
        self.apply();
        q
    }

    /// A packet of `len` bytes of a flow outside `fids` into an empty queue (the mapping
    /// sees `view`).
    fn filler(&mut self, fid: u32, len: u32, view: u128) -> usize {
        let s = self.a.assign(0, fid, view, 0, self.now, &mut self.cmds);
        let q = usize::from(s.queue);
        self.a
            .on_enqueue(9, NO_UPQ, 0, q, s.slot, fid, len, 0, 1, self.now);
        self.qs[q].push_back((fid, 0, s.slot));
        q
    }

    /// One packet of queue `q`.
    fn serve_queue(&mut self, q: usize) {
        if let Some((fid, s, slot)) = self.qs[q].pop_front() {
            dq(
                &mut self.a,
                0,
                q,
                slot,
                fid,
                1000,
                false,
                9,
                NO_UPQ,
                self.now,
                &mut self.cmds,
            );
            if let Some(i) = self.fids.iter().position(|&f| f == fid) {
                self.got[i].push(s);
            }
            self.apply();
        }
    }

    /// One packet from the first unpaused non-empty queue.
    fn serve(&mut self) -> bool {
        self.now += 1;
        for q in 0..self.qs.len() {
            if self.paused & (1 << q) != 0 {
                continue;
            }
            if let Some((fid, s, slot)) = self.qs[q].pop_front() {
                dq(
                    &mut self.a,
                    0,
                    q,
                    slot,
                    fid,
                    1000,
                    false,
                    9,
                    NO_UPQ,
                    self.now,
                    &mut self.cmds,
                );
                let i = self.fids.iter().position(|&f| f == fid).unwrap();
                self.got[i].push(s);
                self.apply();
                return true;
            }
        }
        false
    }

    fn signal(&mut self, s: Signal) {
        self.a.on_signal(0, &s, self.paused, &mut self.cmds);
        self.apply();
    }
}

/// A flow moved into rsvQ while it has packets in its shared queue, resumed, and moved back
/// is delivered in order, and the other flow of the shared queue keeps moving meanwhile.
#[test]
fn in_order_across_moves_into_and_out_of_rsvq() {
    let mut u = Upstream::new(aq(3, 1), 3);
    // Both flows in one queue: flow 1 arrives while fillers occupy the other queues with
    // more bytes, so flow 0's is the least occupied. The fillers then leave.
    let q0 = u.send(0, None);
    let f1 = u.filler(33, 1000, u.nonempty());
    let f2 = u.filler(44, 1000, u.nonempty());
    // Fillers hold 1000 B each, like flow 0's queue: ties go to the lowest index, q0.
    assert_eq!((q0, f1, f2), (0, 1, 2));
    assert_eq!(u.send(1, None), q0);
    u.serve_queue(1);
    u.serve_queue(2);
    for k in 0..6 {
        u.send(k % 2, None);
    }
    // The downstream pauses flow 0: it moves to rsvQ (paused); flow 1 keeps going.
    u.signal(Signal::FlowPause {
        queue: q0 as u8,
        fid: 11,
    });
    let rsv = usize::from(u.a.queue_table(0).rsv().unwrap());
    assert_eq!(u.paused, 1 << rsv);
    for k in 0..6 {
        let q = u.send(k % 2, None);
        assert_eq!(q, if k % 2 == 0 { rsv } else { q0 });
        u.serve();
    }
    assert!(u.got[1].len() >= 3, "flow 1 served while flow 0 is held");
    // Resumed: rsvQ runs once flow 0's packets ahead in q0 have left.
    u.signal(Signal::FlowResume {
        queue: rsv as u8,
        fid: 11,
    });
    for _ in 0..8 {
        u.serve();
    }
    // Later packets of flow 0: in rsvQ behind its earlier ones while any is there, back in
    // its own queue once none is.
    for _ in 0..3 {
        u.send(0, None);
    }
    while u.serve() {}
    for i in 0..2 {
        assert_eq!(
            u.got[i].len() as u32,
            u.seq[i],
            "flow {i}: everything delivered"
        );
        assert!(
            u.got[i].windows(2).all(|w| w[0] < w[1]),
            "flow {i} in order: {:?}",
            u.got[i]
        );
    }
    assert_eq!(u.paused, 0);
    assert_eq!(u.a.queue_table(0).rsv(), None, "rsvQ released");
}

/// Forced placement: a flow alone in a forced queue for now is treated as sharing it (every
/// later flow is mapped there), so it moves to rsvQ and the queue keeps running.
#[test]
fn a_lone_flow_in_a_forced_queue_moves_to_rsvq() {
    let mut a = aq(4, 1);
    a.limit_mapping(0, 1);
    let mut c = Vec::new();
    let s3 = a.assign(0, 3, 0, 0, 0, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, 0, s3.slot, 3, 1500, 0, 1, 0);
    assert!(a.on_signal(0, &Signal::FlowPause { queue: 0, fid: 3 }, 0, &mut c));
    assert_eq!(c, vec![QueueCmd::Pause(1)]);
    assert_eq!(a.queue_table(0).rsv(), Some(1));
    c.clear();
    // Flow 4 arrives: forced into queue 0, which runs; flow 3's later packets go to rsvQ.
    assert_eq!(a.assign(0, 4, 1, 0b10, 1, &mut c).queue, 0);
    assert_eq!(a.assign(0, 3, 1, 0b10, 2, &mut c).queue, 1);
    // Without the forcing the same flow alone has its own queue paused.
    let mut b = aq(4, 1);
    let s = b.assign(0, 3, 0, 0, 0, &mut c);
    b.on_enqueue(9, NO_UPQ, 0, 0, s.slot, 3, 1500, 0, 1, 0);
    c.clear();
    b.on_signal(0, &Signal::FlowPause { queue: 0, fid: 3 }, 0, &mut c);
    assert_eq!(c, vec![QueueCmd::Pause(s.queue)]);
}

/// A flow held by pausing its own queue (it was alone) that drains completely and comes
/// back is still held: it returns to its paused queue instead of taking a fresh one.
#[test]
fn a_queue_paused_flow_returning_empty_stays_held() {
    let mut a = aq(4, 1);
    let mut c = Vec::new();
    let s = a.assign(0, 5, 0, 0, 0, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, s.queue.into(), s.slot, 5, 1500, 0, 1, 0);
    a.on_signal(
        0,
        &Signal::FlowPause {
            queue: s.queue,
            fid: 5,
        },
        0,
        &mut c,
    );
    assert_eq!(c, vec![QueueCmd::Pause(s.queue)]);
    c.clear();
    dq(
        &mut a,
        0,
        s.queue.into(),
        s.slot,
        5,
        1500,
        false,
        9,
        NO_UPQ,
        1,
        &mut c,
    );
    // Empty in the switch, queue still paused: its next packet goes back there.
    let again = a.assign(0, 5, 0, 1 << s.queue, 2, &mut c);
    assert_eq!(again.queue, s.queue);
    assert!(c.is_empty());
    // After the RESUME it is a new flow again.
    a.on_enqueue(9, NO_UPQ, 0, s.queue.into(), again.slot, 5, 1500, 0, 1, 2);
    dq(
        &mut a,
        0,
        s.queue.into(),
        again.slot,
        5,
        1500,
        false,
        9,
        NO_UPQ,
        3,
        &mut c,
    );
    a.on_signal(
        0,
        &Signal::FlowResume {
            queue: s.queue,
            fid: 5,
        },
        0,
        &mut c,
    );
    assert_eq!(c, vec![QueueCmd::Resume(s.queue)]);
    assert_eq!(a.queue_table(0).paused_home(5), None);
}

/// A configured HRTT beyond an hour is refused with a reason (it would overflow the u64-ps
/// timers, as a fuzzed BFC `hrtt` did); one hour itself is taken, and the thresholds saturate
/// rather than wrap at absurd rates.
#[test]
fn absurd_hrtt_is_refused_and_thresholds_saturate() {
    let cfg = |hrtt_ps| AquariusConfig {
        hrtt_ps: Some(hrtt_ps),
        ..AquariusConfig::default()
    };
    let e = Aquarius::new(cfg(MAX_INTERVAL_PS + 1), &[port(8)]).unwrap_err();
    assert!(matches!(e, AquariusError::Hrtt(_)), "{e}");
    assert!(e.to_string().contains("one hour"), "{e}");
    let mut fast = port(8);
    fast.rate_bps = u64::MAX;
    let a = Aquarius::new(cfg(MAX_INTERVAL_PS), &[fast]).unwrap();
    assert_eq!(a.hrtt_ps(), MAX_INTERVAL_PS);
    assert_eq!(threshold_bytes(u64::MAX, u64::MAX, 1), u64::MAX);
    assert_eq!(t_min_ps(u32::MAX, 1, u32::MAX), u64::MAX);
}

/// A reserved (strict, ACK) queue is out of Aquarius: no new flow is mapped to it, even when
/// it is the only empty queue, and it is never taken for `rsvQ` (a flow sharing its queue is
/// then held by pausing the shared queue, counted as `no_rsv`).
#[test]
fn reserved_queue_is_never_mapped_nor_rsvq() {
    let mut a = aq(3, 1);
    a.reserve(0, 0b100).unwrap();
    assert!(
        a.reserve(0, 0b111).is_err(),
        "no queue left for the mapping"
    );
    assert_eq!(a.reserved(0), 0b100);
    let mut c = Vec::new();
    let (fa, fb, fc) = (1000, 2001, 3002);
    let sa = a.assign(0, fa, 0, 0, 0, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, sa.queue.into(), sa.slot, fa, 3000, 0, 1, 0);
    let sb = a.assign(0, fb, 1 << sa.queue, 0, 1, &mut c);
    a.on_enqueue(9, NO_UPQ, 0, sb.queue.into(), sb.slot, fb, 1500, 0, 2, 1);
    assert!(sa.queue < 2 && sb.queue < 2 && sa.queue != sb.queue);
    // Queues 0 and 1 busy, queue 2 empty but reserved: fc joins the least occupied (fb's).
    let sc = a.assign(0, fc, 0b011, 0, 2, &mut c);
    assert_eq!(sc.queue, sb.queue);
    a.on_enqueue(9, NO_UPQ, 0, sc.queue.into(), sc.slot, fc, 1500, 1500, 2, 2);
    // PAUSE(fb), which shares with fc: the only empty queue is reserved, so no rsvQ.
    let pause = Signal::FlowPause {
        queue: sb.queue,
        fid: fb,
    };
    assert!(a.on_signal(0, &pause, 0, &mut c));
    assert_eq!(c, vec![QueueCmd::Pause(sb.queue)]);
    assert_eq!(a.queue_table(0).rsv(), None);
    assert_eq!(a.queue_table(0).stats.no_rsv, 1);
}

/// A packet entering a paused queue meets thresholds of 0 (`NQ_active` 0: the queue drains
/// at 0, its share of `μ` over an HRTT is nothing), so it is marked and its flow paused
/// upstream. With `NQ_active` taken as 1 there, a paused queue took a full HRTT·μ from every
/// flow before pausing any (1 039 frames dropped past the ingress limit in 1 ms of the §4 Web
/// Server run, none with 0).
#[test]
fn a_paused_queue_pauses_every_flow_entering_it() {
    let mut a = aq(8, 2);
    let mut c = Vec::new();
    let s = a.assign(0, 7, 0, 0, 0, &mut c);
    // The same 1500 B packet into an empty queue: unpaused (NQ_active 1) it passes...
    let (m, p) = a.on_enqueue(1, 3, 0, s.queue.into(), s.slot, 7, 1500, 0, 1, 0);
    assert_eq!((m, p), (None, None));
    // ...into the same queue paused (NQ_active 0) it is marked and PAUSEs its flow.
    let (m, p) = a.on_enqueue(1, 3, 0, s.queue.into(), s.slot, 7, 1500, 1500, 0, 1);
    assert_eq!(m, Some(Mark::QHigh));
    assert_eq!(
        p.map(|p| (p.0, p.1.signal)),
        Some((1, Signal::FlowPause { queue: 3, fid: 7 }))
    );
}

/// PAUSE(fa) for a flow whose flow-table entry it shares with fb (a hash collision), fb held
/// in `rsvQ` already with later packets there: fa's old packets are the entry's less fb's in
/// `rsvQ`. Counted in, fa waited for packets behind the paused `rsvQ` itself, `rsvQ` never
/// resumed and held both flows for good (a deadlock that spread upstream, §4 Web Server run).
#[test]
fn rsvq_resumes_when_a_colliding_flow_is_held_in_it() {
    let mut a = aq(4, 1);
    a.limit_mapping(0, 1); // every flow in queue 0: shared, so a PAUSE moves to rsvQ
    let mut c = Vec::new();
    let fa = 0x100;
    let sa = a.assign(0, fa, 0, 0, 0, &mut c).slot;
    let fb = (0x101..0x100_000)
        .find(|&f| {
            let mut t = aq(4, 1);
            t.limit_mapping(0, 1);
            t.assign(0, fa, 0, 0, 0, &mut c);
            t.assign(0, f, 1, 0, 0, &mut c).slot == sa
        })
        .expect("a colliding FID");
    a.on_enqueue(9, NO_UPQ, 0, 0, sa, fa, 1500, 0, 1, 0);
    let sb = a.assign(0, fb, 1, 0, 1, &mut c);
    assert_eq!((sb.slot, sb.queue), (sa, 0));
    a.on_enqueue(9, NO_UPQ, 0, 0, sb.slot, fb, 1500, 1500, 1, 1);
    // PAUSE(fb): moved to rsvQ (queue 1), paused; its next two packets go there.
    assert!(a.on_signal(0, &Signal::FlowPause { queue: 0, fid: fb }, 0, &mut c));
    assert_eq!(c, vec![QueueCmd::Pause(1)]);
    for k in 0..2 {
        let s = a.assign(0, fb, 1, 0b10, 2 + k, &mut c);
        assert_eq!(s.queue, 1);
        a.on_enqueue(9, NO_UPQ, 0, 1, s.slot, fb, 1500, 1500 * k, 1, 2 + k);
    }
    // PAUSE(fa): the entry holds 4 packets, 2 of them fb's in rsvQ; fa's old ones are 2.
    assert!(a.on_signal(0, &Signal::FlowPause { queue: 0, fid: fa }, 0b10, &mut c));
    assert_eq!(a.queue_table(0).rsv_flows(), 2);
    // Queue 0 drains (fa's packet, fb's old one), both RESUMEs come: rsvQ resumes.
    c.clear();
    dq(&mut a, 0, 0, sa, fa, 1500, false, 9, NO_UPQ, 10, &mut c);
    dq(&mut a, 0, 0, sa, fb, 1500, false, 9, NO_UPQ, 11, &mut c);
    a.on_signal(0, &Signal::FlowResume { queue: 0, fid: fb }, 0b10, &mut c);
    a.on_signal(0, &Signal::FlowResume { queue: 0, fid: fa }, 0b10, &mut c);
    assert!(c.contains(&QueueCmd::Resume(1)), "rsvQ resumes: {c:?}");
    // fb's packets leave rsvQ; it is released.
    for k in 0..2 {
        dq(&mut a, 0, 1, sa, fb, 1500, false, 9, NO_UPQ, 12 + k, &mut c);
    }
    assert_eq!(a.queue_table(0).rsv(), None);
}

/// Every queue of a port paused for a flow alone in it, the last empty one held back for
/// `rsvQ`: a new flow joins the least occupied (paused) queue, which is shared from then on
/// (§3.3's shared case): the held flow's later packets go to `rsvQ`, paused, the queue
/// resumes so the newcomer is not held behind another flow's pause, and both flows are
/// delivered in order. With `share_on_join` off the newcomer waits behind the pause.
#[test]
fn a_flow_joining_a_queue_paused_for_a_lone_flow_shares_it_out() {
    for share in [true, false] {
        let cfg = AquariusConfig {
            share_on_join: share,
            ..AquariusConfig::default()
        };
        let mut u = Upstream::new(Aquarius::new(cfg, &[port(4)]).unwrap(), 4);
        let q0 = u.send(0, None);
        let f1 = u.filler(33, 3000, u.nonempty());
        let f2 = u.filler(44, 3000, u.nonempty());
        assert_eq!((q0, f1, f2), (0, 1, 2), "queue 3 is held back for rsvQ");
        for (q, fid) in [(0, 11), (1, 33), (2, 44)] {
            u.signal(Signal::FlowPause { queue: q, fid });
        }
        assert_eq!(
            u.paused, 0b111,
            "each flow alone in its queue: queues paused"
        );
        // Flow 22 joins queue 0 (all paused, the fewest bytes).
        assert_eq!(u.send(1, None), 0);
        let qt = u.a.queue_table(0);
        if !share {
            assert_eq!(u.paused, 0b111, "the newcomer waits behind 11's pause");
            assert_eq!((qt.rsv(), qt.stats.shared_on_join), (None, 0));
            continue;
        }
        assert_eq!(u.paused, 0b1110, "queue 0 resumed, rsvQ (3) paused");
        assert_eq!((qt.rsv(), qt.stats.shared_on_join), (Some(3), 1));
        // Flow 11's later packets go to rsvQ; its earlier one and 22's leave queue 0.
        assert_eq!(u.send(0, None), 3);
        assert!(u.serve() && u.serve());
        assert_eq!((u.got[0].clone(), u.got[1].clone()), (vec![0], vec![0]));
        assert!(!u.serve(), "rsvQ stays paused until 11's RESUME");
        // RESUME: rsvQ runs (11's old packet has left), then is released.
        u.signal(Signal::FlowResume { queue: 0, fid: 11 });
        assert!(u.serve());
        assert_eq!(u.got[0], vec![0, 1]);
        assert_eq!(u.a.queue_table(0).rsv(), None, "rsvQ released");
        for (q, fid) in [(1, 33), (2, 44)] {
            u.signal(Signal::FlowResume { queue: q, fid });
            u.serve_queue(usize::from(q));
        }
        assert_eq!(u.paused, 0);
    }
}

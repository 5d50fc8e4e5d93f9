//! The decision path of `decision_path` split over two pipes, as `xoff run --workers 2` runs
//! a switch whose ingress and egress ports belong to different workers: pipe A receives on
//! p1 and hands every frame over (`runtime::Handoffs`) to pipe B, which owns p3 and p4 (the
//! ECMP next hops) and queues, schedules and sends it. For the A/B of the hand-off rings
//! (issue 20 item 6).
//!
//! `handoff_path ringbuf|crossbeam PACKETS`: both pipes in one thread, A's bursts of 64 taken
//! by B after each, on heap frame memory, so that an instruction counter
//! (`bench/callgrind-handoff.sh`) gives the same total on every run.
//!
//! `handoff_path ringbuf|crossbeam PACKETS --threads`: A and B on two threads over a UMEM (as
//! root), A waiting for room rather than dropping; prints the wall-clock time per packet.

use bench::decision::TOPO;
use dataplane::frame::HeapMem;
use dataplane::port::xsk::UmemMem;
use dataplane::runtime::{HandoffRing, Handoffs};
use dataplane::switch::Outputs;
use dataplane::{FrameMem, Switch, SwitchShared};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Ports p1, p2 belong to pipe A (0), p3, p4 to pipe B (1).
const OWNER: [u16; 4] = [0, 0, 1, 1];
/// Frames A hands over at a time (the runtime's RX burst).
const BURST: usize = 64;
const RING: usize = dataplane::runtime::HANDOFF_RING;
/// One 64-byte frame time at 100 Gbit/s, ps.
const FRAME_PS: u64 = 6_720;

/// Pipe B's part: take up to a burst of what waits, serve p3 and p4 at `now`, free what
/// leaves. Returns the frames taken and sent.
fn serve<M: FrameMem>(
    b: &mut Switch,
    end: &mut Handoffs,
    mem: &mut M,
    out: &mut Outputs,
    now: u64,
) -> (u64, u64) {
    let mut took = 0;
    while let Some(h) = (took < BURST as u64).then(|| end.recv()).flatten() {
        b.accept_handoff(mem, h, now, out);
        took += 1;
    }
    for p in [2u16, 3] {
        b.service(mem, p, now, out);
    }
    let sent = out.tx.len() as u64;
    for (f, _) in out.tx.drain(..) {
        mem.free(f);
    }
    (took, sent)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(ring), Some(n)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: handoff_path ringbuf|crossbeam PACKETS [--threads]");
    };
    let ring: HandoffRing = ring.parse().map_err(anyhow::Error::msg)?;
    let n: u64 = n.parse()?;
    let threads = args.get(3).is_some_and(|a| a == "--threads");
    let (spec, frames) = bench::decision::spec_and_frames(TOPO, "handoff_path.toml")?;
    let shared = SwitchShared::new(spec);
    // B serves a burst at a time: its shaper catches up as a worker's does.
    let lag = dataplane::switch::REALTIME_MAX_LAG_PS;
    let mut a = Switch::new(shared.clone(), OWNER.to_vec(), 0, lag)?;
    let mut b = Switch::new(shared.clone(), OWNER.to_vec(), 1, lag)?;
    let mut ends = Handoffs::new(2, RING, ring)?;
    let mut b_end = ends.pop().expect("two ends");
    let mut a_end = ends.pop().expect("two ends");
    let mut out = Outputs::new();
    if !threads {
        let mut mem = HeapMem::new(4096, 1792);
        let mut out_b = Outputs::new();
        let (mut now, mut sent) = (0u64, 0u64);
        for i in 0..n {
            let f = mem
                .alloc_with(&frames[(i & 63) as usize])
                .expect("a free frame");
            a.receive(&mut mem, 0, f, 64, now, &mut out);
            now += FRAME_PS;
            if out.handoff.len() == BURST || i + 1 == n {
                a_end.send(&OWNER, &shared, a.ledger(), &mut mem, &mut out);
                sent += serve(&mut b, &mut b_end, &mut mem, &mut out_b, now).1;
            }
        }
        // The frames still on the emulated wire.
        while b.next_wakeup(2, now).is_some() || b.next_wakeup(3, now).is_some() {
            now += FRAME_PS;
            sent += serve(&mut b, &mut b_end, &mut mem, &mut out_b, now).1;
        }
        println!("{ring:?}: {n} frames in, {sent} out");
        anyhow::ensure!(sent == n, "lost {} frames", n - sent);
        return Ok(());
    }
    const FRAMES: u32 = 32768;
    let mut mem_a = UmemMem::anonymous(FRAMES)?;
    let mut mem_b = mem_a.handle();
    // Frames B is done with travel back to A, as the runtime's pool does.
    let pool = Arc::new(crossbeam_queue::ArrayQueue::new(FRAMES as usize));
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let consumer = {
        let (pool, done) = (pool.clone(), done.clone());
        std::thread::spawn(move || {
            let mut out = Outputs::new();
            let (mut took, mut sent) = (0u64, 0u64);
            loop {
                let finished = done.load(Ordering::Acquire);
                // Virtual time follows the frames taken, one frame time each, so that the
                // queues stay short however late this thread runs.
                let now = (took + 1) * FRAME_PS;
                let (t, s) = serve(&mut b, &mut b_end, &mut mem_b, &mut out, now);
                took += t;
                sent += s;
                for f in mem_b.take_free(usize::MAX) {
                    let _ = pool.push(f);
                }
                if finished && b_end.pending() == 0 && took == n {
                    // Drain the emulated wire.
                    let mut now = now;
                    while b.next_wakeup(2, now).is_some() || b.next_wakeup(3, now).is_some() {
                        now += FRAME_PS;
                        sent += serve(&mut b, &mut b_end, &mut mem_b, &mut out, now).1;
                    }
                    break;
                }
            }
            sent
        })
    };
    for i in 0..n {
        let f = loop {
            if let Some(f) = mem_a.alloc() {
                break f;
            }
            mem_a.give_free(std::iter::from_fn(|| pool.pop()).take(1024));
            std::hint::spin_loop();
        };
        let src = &frames[(i & 63) as usize];
        mem_a.with_mut(f, |d| d[..64].copy_from_slice(src));
        a.receive(&mut mem_a, 0, f, 64, i * FRAME_PS, &mut out);
        if out.handoff.len() == BURST || i + 1 == n {
            while a_end.in_ring_to(1) > RING - BURST {
                std::hint::spin_loop();
            }
            a_end.send(&OWNER, &shared, a.ledger(), &mut mem_a, &mut out);
        }
    }
    done.store(true, Ordering::Release);
    let sent = consumer
        .join()
        .map_err(|_| anyhow::anyhow!("pipe B panicked"))?;
    let dt = t0.elapsed();
    println!(
        "{ring:?} threads: {n} frames in, {sent} out, {:.1} ns/frame, {:.3} Mpps",
        dt.as_nanos() as f64 / n as f64,
        n as f64 / dt.as_secs_f64() / 1e6
    );
    anyhow::ensure!(sent == n, "lost {} frames", n - sent);
    Ok(())
}

//! The AFC command path (`flowctl::afc`): the shared-memory command ring another process
//! writes (`NAME.afc`, Tofino2-style 32-bit words) and the unit that applies its words to the
//! pause registers. The writer is untrusted: besides well-behaved pushes, the fuzzer stores
//! arbitrary values anywhere in the ring (tails, heads, counters, slots, the header), as a
//! buggy or hostile controller could. The consumer must never panic, take no more than it
//! may, count every word it takes as applied or refused, and leave the pause registers
//! consistent (no bit beyond a port's queues, no lapsed pause reported in force).
#![no_main]

use arbitrary::Arbitrary;
use flowctl::{Afc, AfcCmd, ShmLayout, ShmRing};
use libfuzzer_sys::fuzz_target;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[derive(Arbitrary, Debug)]
enum Op {
    /// A producer following the protocol.
    Push { lane: u8, word: u32 },
    /// A store anywhere in the lanes' memory.
    Poke { at: u16, value: u32 },
    /// A store anywhere in the header.
    PokeHeader { at: u8, value: u64 },
    /// The switch's poll at `now + dt`.
    Drain { max: u8, dt: u32 },
    /// Another switch process attaching to this memory.
    Attach,
}

#[derive(Arbitrary, Debug)]
struct Input {
    lanes: u8,
    capacity_log2: u8,
    /// Queues of each port of the switch (0..=130: beyond 128 is clamped by the unit).
    queues: Vec<u8>,
    ops: Vec<Op>,
}

fn check_regs(afc: &Afc, queues: &[usize], now: u64) {
    for (p, &q) in queues.iter().enumerate() {
        let r = afc.port(p);
        let n = q.clamp(1, 128);
        assert_eq!(r.queues(), n);
        let m = r.paused_mask(now);
        assert_eq!(m.checked_shr(n as u32).unwrap_or(0), 0);
        if let Some(t) = r.next_expiry(now) {
            assert!(t > now);
        }
    }
}

fuzz_target!(|inp: Input| {
    let Ok(layout) = ShmLayout::new(u32::from(inp.lanes % 9), 1 << (inp.capacity_log2 % 7)) else {
        return;
    };
    let queues: Vec<usize> = inp
        .queues
        .iter()
        .take(16)
        .map(|&q| usize::from(q % 131))
        .collect();
    let afc = Afc::new(queues.iter().copied());
    let header: Vec<AtomicU64> = (0..ShmRing::HEADER_WORDS)
        .map(|_| AtomicU64::new(0))
        .collect();
    let lanes: Vec<AtomicU32> = (0..layout.lane_words())
        .map(|_| AtomicU32::new(0))
        .collect();
    let ring = ShmRing::init(&header, &lanes, layout, 1000).expect("views sized by the layout");
    let (mut cursor, mut now, mut header_poked) = (0u32, 0u64, false);
    for op in inp.ops.iter().take(256) {
        match op {
            Op::Push { lane, word } => {
                let _ = ring.producer(u32::from(*lane)).push_word(*word);
            }
            Op::Poke { at, value } => {
                lanes[usize::from(*at) % lanes.len()].store(*value, Ordering::Relaxed);
            }
            Op::PokeHeader { at, value } => {
                header[usize::from(*at) % header.len()].store(*value, Ordering::Relaxed);
                header_poked = true;
            }
            Op::Drain { max, dt } => {
                now += u64::from(*dt);
                let (a0, r0) = (afc.applied(), afc.refused());
                let (ok0, bad0) = (ring.applied(), ring.refused());
                let max = usize::from(*max);
                let mut seen = 0usize;
                let taken = ring.drain(&mut cursor, max, |w| {
                    seen += 1;
                    let Ok(cmd) = AfcCmd::decode(w) else {
                        afc.count_refused();
                        return false;
                    };
                    afc.apply(cmd, now, 512).is_ok()
                });
                assert!(taken <= max && seen == taken);
                assert!(cursor <= layout.lanes());
                // Every word taken is applied or refused, once.
                assert_eq!(afc.applied() - a0 + afc.refused() - r0, taken as u64);
                if !header_poked {
                    // The ring's own counters agree with the unit's: applied words exactly,
                    // refused words plus lanes found written against the protocol.
                    assert_eq!(ring.applied() - ok0, afc.applied() - a0);
                    assert!(ring.refused() - bad0 >= afc.refused() - r0);
                }
                check_regs(&afc, &queues, now);
            }
            Op::Attach => {
                let _ =
                    ShmRing::attach(&header, &lanes).map(|r| (r.layout(), r.poll_us(), r.full()));
            }
        }
    }
});

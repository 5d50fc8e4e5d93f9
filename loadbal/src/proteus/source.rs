//! Algorithm 1 at the source edge (§III-B.1) and the shim it writes (§III-B.2, §IV-A).
//!
//! A flow table entry per flow (as §IV-A's: flow id, last forwarded time, selected path, three
//! alternatives) remembers where the flow goes. A packet of a new flow runs SelectPath over
//! all active paths. A packet of a known flow is routed again only when its current path `p`
//! is congested: Algorithm 1 "is triggered at edge switches for the cases of a new flow packet
//! arriving or the current path is congested (lines 3-11)" (§III-B.1), read as Table II's
//! states other than non-congested (delay ≥ `RTT_low`: undetermined or congested). When
//! triggered it may move only to a path `p'` whose delay is lower than `p`'s by less than the
//! gap since the flow's previous packet (`0 < p.t_pd − p'.t_pd < t_cur − t_pre`, lines 6–8): it
//! then arrives after that packet, so the reroute preserves order; among such paths SelectPath
//! decides. Otherwise it stays. The second inequality is checked on the previous packet's
//! confirmed arrival rather than on delay estimates (below).
//!
//! Without the trigger (the listing alone) a flow on a non-congested path hopped whenever
//! another path's fed-back delay read a few ns lower. Those delays are period means a feedback
//! trip old, and their differences between non-congested paths are noise (a path carrying
//! ACKs reads ~230 ns below one carrying full-size frames at 100 Gbit/s): issue 18 traced the
//! §V-B reordering (`xoff repro proteus --quick`, load 0.7) to such moves, 3 255 of 5 953
//! reorder events came from reroutes whose estimated gain was under 100 ns, and in 1 147 of
//! the 1 208 reroutes that reordered, the overtaken packet took longer than the delay fed back
//! for its path (by 1–50 µs: a spine queue building or a PFC pause the destination edge could
//! not report before the packet arrived). With the trigger the same cell goes from 16 437 to
//! 220 source reroutes and from 3 486 to 747 reordered packets.
//!
//! The rule holds only if `t_pre + p.t_pd` is when the previous packet arrives. Two things in
//! between are this switch's own, and both used to reorder (issue 18: 8 % of Proteus's packets
//! at §V-B): the previous packet may still sit in the egress queue here (behind a PFC pause,
//! for as long as the pause lasts), and its time in that queue is not in the gap. So, as
//! §IV-A's table keeps it, `t_pre` is when the flow's last packet was *forwarded* (left this
//! switch, [`ProteusSource::departed`]); while a packet of the flow is still queued here the
//! flow stays where it is, and `p.t_pd` is the delay measured from departure (see
//! [`super::path`]).
//!
//! **The arrival is confirmed, not predicted (issue 18).** Beyond this switch `p.t_pd` is a
//! period's mean fed back a trip late, and lines 6–8 are only as good as it: with them alone
//! 0.21 % of §V-B's packets (quick run) were reordered, because the margin the rule works with
//! (a median estimated gain of 0.13 µs, the gap between two packets of a flow at line rate) is
//! ten times smaller than the error of the fed-back delays (a spine queue building, a PFC
//! pause the destination edge reports only after it). No bound on that error exists under PFC
//! (a pause may last any time), so a "conservative" version of the same inequality cannot
//! guarantee order either. What does: the destination edge, which §III-A/§IV-C already make
//! measure every path's delay from the packets' send times, feeds back with each measurement
//! the path's *arrival frontier*, the send time of the latest packet of the path that arrived
//! ([`super::PathMeter`]). A path is one FIFO queue per hop, so every packet sent on it before
//! then has arrived too, and the source edge knows exactly whether the flow's previous packet
//! (sent at `t_pre`) is in ([`super::PathEntry::arrived_ps`]). If it is, lines 6–8's
//! inequality holds for every path (this packet can only arrive later), so {P'} is every path
//! faster than `p`; if not, no move is known to keep order and the flow stays (line 13). The
//! same holds for Algorithm 2 at this edge ([`ProteusSource::order_safe`]): moving a packet
//! past the flow's packets waiting at the paused egress, or still in flight on the old path,
//! is exactly what `t_td ≤ t_qd` would otherwise do. The cost is that a flow moves only after
//! a gap of about a measurement period and a feedback trip; in a continuous line-rate stream
//! that gap never comes, which is also where lines 6–8 (gap ~0.1 µs) almost never admitted a
//! move. Assumed: one lossless class per path (the frontier is per path, not per class), and
//! no reroute by Algorithm 2 downstream of the source edge (a packet moved off `p` there is
//! not behind `p`'s frontier; in a two-tier leaf-spine the spines have a single way to the
//! destination edge, so Algorithm 2 can only act at the source edge).
//!
//! The shim carries the chosen path, the next three paths in SelectPath order over all active
//! paths (the alternatives a downstream switch reroutes to, in priority order), and the
//! tolerable delay `t_td`: the delay difference between the optimal and the sub-optimal path,
//! `D_ps − D_po` of §III-C, 0 if the alternative is the faster one.
//!
//! Ties among equal paths are broken by the flow key (`PathTable::select_salted`), so flows
//! that start before any feedback spread like ECMP instead of all taking the first path.
//!
//! The table is hashed on the flow key like the paper's hardware table (CRC-16 flow ids there,
//! a 32-bit key here), in sets of [`WAYS`]. A flow that misses takes a free way, else the way
//! of a settled flow (nothing queued here, last packet confirmed arrived), else the way that
//! sent longest ago. An evicted flow comes back as new and may take any path, which is only
//! order-safe if it was settled: direct-mapped, two flows between the same leaves that shared a
//! slot reordered 99 packets of §V-B's quick run once the order rule itself was exact.

use super::path::{PathId, PathState, PathTable};

/// Ways of a flow table set.
pub const WAYS: usize = 4;

/// What Proteus writes into a packet (the 9-byte shim of §IV-A, in host units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shim {
    /// The selected path.
    pub path: PathId,
    /// Alternatives in priority order; [`PathId::NONE`] where there are fewer.
    pub alts: [PathId; 3],
    /// Tolerable delay `t_td`, ps; decremented by the sojourn time at every switch.
    pub t_td_ps: u64,
}

impl Shim {
    /// Largest `t_td` the wire carries (24 bits of ns, §IV-A), ps.
    pub const T_TD_MAX_PS: u64 = 0xFF_FFFF * 1000;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct FlowEntry {
    key: u32,
    valid: bool,
    /// Path table index.
    path: u16,
    alts: [u16; 3],
    n_alts: u8,
    /// `t_pre`: when the flow's last packet was forwarded (left this switch), ps.
    t_pre: u64,
    /// Packets of the flow routed here and not yet forwarded.
    queued: u32,
}

/// Names a flow table entry from routing to departure (kept with the packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRef {
    /// Flow table slot.
    pub slot: u16,
    /// The flow key's top byte: a departing packet of an evicted flow does not count for the
    /// flow that took its slot.
    pub tag: u8,
}

impl FlowRef {
    fn of(slot: usize, key: u32) -> Self {
        FlowRef {
            slot: slot as u16,
            tag: (key >> 24) as u8,
        }
    }
}

/// Where the flow's previous packet is, for the order rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prev {
    /// None: a new flow may take any path.
    New,
    /// Still queued here: any other path could overtake it.
    Queued,
    /// It left on path table index `path`, `gap` ps before this packet; `arrived`: the
    /// destination edge has confirmed it arrived (the path's arrival frontier is past it).
    Departed {
        path: usize,
        gap: u64,
        arrived: bool,
    },
}

/// One packet's routing at the source edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Path table index of the chosen path.
    pub index: usize,
    /// Its local egress port.
    pub port: u16,
    pub shim: Shim,
    /// The flow was known and moved (an order-preserving reroute).
    pub rerouted: bool,
    /// Where the flow's previous packet was when this one was routed.
    pub prev: Prev,
    /// The flow's entry: hand it to [`ProteusSource::departed`] when the packet leaves.
    pub flow: FlowRef,
}

/// Algorithm 1 for the paths to one destination edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProteusSource {
    pub table: PathTable,
    flows: Vec<FlowEntry>,
}

impl ProteusSource {
    /// `flow_slots` is rounded up to a power of two (at least one set of [`WAYS`]).
    pub fn new(table: PathTable, flow_slots: usize) -> Self {
        ProteusSource {
            table,
            flows: vec![FlowEntry::default(); flow_slots.max(WAYS).next_power_of_two()],
        }
    }

    /// The first slot of `key`'s set.
    #[inline]
    fn set(&self, key: u32) -> usize {
        // Fibonacci hashing spreads keys that differ only in high bits.
        let sets = self.flows.len() / WAYS;
        (key.wrapping_mul(0x9E37_79B9) as usize & (sets - 1)) * WAYS
    }

    /// The slot holding flow `key`, if any.
    #[inline]
    fn find(&self, key: u32) -> Option<usize> {
        let b = self.set(key);
        (b..b + WAYS).find(|&i| self.flows[i].valid && self.flows[i].key == key)
    }

    /// Whether the destination edge has confirmed that the last packet the flow in `e` sent
    /// arrived (its path's arrival frontier is past it).
    #[inline]
    fn arrived(&self, e: &FlowEntry) -> bool {
        self.table
            .paths
            .get(usize::from(e.path))
            .is_some_and(|p| e.t_pre < p.arrived_ps)
    }

    /// Whether the flow in `e` has no packet that a move could overtake: none queued here, and
    /// the last one confirmed arrived.
    #[inline]
    fn settled(&self, e: &FlowEntry) -> bool {
        e.queued == 0 && self.arrived(e)
    }

    /// The slot for a flow not in the table: a free way of its set, else the way whose flow
    /// settled longest ago, else (every way holds a flow with packets in flight: rare) the
    /// way that sent least recently.
    #[inline]
    fn victim(&self, key: u32) -> usize {
        let b = self.set(key);
        if let Some(i) = (b..b + WAYS).find(|&i| !self.flows[i].valid) {
            return i;
        }
        (b..b + WAYS)
            .min_by_key(|&i| {
                let e = &self.flows[i];
                (!self.settled(e), e.t_pre)
            })
            .unwrap_or(b)
    }

    /// Routes one packet of flow `key` at `now` (Algorithm 1); `None` without an active path.
    /// The packet counts as queued here until [`Self::departed`].
    #[inline]
    pub fn route(&mut self, key: u32, now: u64) -> Option<Decision> {
        let (s, known) = match self.find(key) {
            Some(s) => (s, true),
            None => (self.victim(key), false),
        };
        let e = self.flows[s];
        let t = &self.table;
        let prev = if !known {
            Prev::New
        } else if e.queued > 0 {
            Prev::Queued
        } else {
            Prev::Departed {
                path: usize::from(e.path),
                gap: now.saturating_sub(e.t_pre),
                arrived: self.arrived(&e),
            }
        };
        let (path, alts, n_alts, rerouted) = if known {
            let stay = (
                usize::from(e.path),
                e.alts.map(usize::from),
                e.n_alts as usize,
                false,
            );
            match prev {
                // §III-B.1's trigger: only off a path that is not non-congested.
                // The previous packet has arrived: lines 6–8's `p.t_pd − p'.t_pd < t_cur −
                // t_pre` (a prediction that it arrives before this one) is known to hold for
                // every path, so {P'} is every path faster than `p`.
                Prev::Departed {
                    path,
                    arrived: true,
                    ..
                } if t.paths[path].state(&t.params) != PathState::NonCongested => {
                    let p = t.paths[path].delay_ps();
                    let faster = |_: usize, q: &super::PathEntry| q.delay_ps() < p;
                    let (r, n) = t.select_salted(faster, key as usize);
                    if n == 0 {
                        // Line 13: no order-preserving better path, stay.
                        stay
                    } else {
                        let (alts, n) = alternatives(t, r[0], key as usize);
                        (r[0], alts, n, true)
                    }
                }
                // Not triggered, a packet of the flow is still here, or one is on its way
                // and not yet confirmed (any move could overtake it).
                _ => stay,
            }
        } else {
            let (r, n) = t.select_salted(|_, _| true, key as usize);
            if n == 0 {
                return None;
            }
            let (alts, n) = alternatives(t, r[0], key as usize);
            (r[0], alts, n, false)
        };
        let chosen = &t.paths[path];
        let mut shim = Shim {
            path: chosen.id,
            alts: [PathId::NONE; 3],
            t_td_ps: Shim::T_TD_MAX_PS,
        };
        for (k, &a) in alts.iter().take(n_alts).enumerate() {
            shim.alts[k] = t.paths[a].id;
        }
        if n_alts > 0 {
            shim.t_td_ps = t.paths[alts[0]]
                .delay_ps()
                .saturating_sub(chosen.delay_ps())
                .min(Shim::T_TD_MAX_PS);
        }
        let port = chosen.port;
        self.flows[s] = FlowEntry {
            key,
            valid: true,
            path: path as u16,
            alts: alts.map(|a| a as u16),
            n_alts: n_alts as u8,
            t_pre: if known { e.t_pre } else { now },
            queued: if known { e.queued.saturating_add(1) } else { 1 },
        };
        Some(Decision {
            index: path,
            port,
            shim,
            rerouted,
            prev,
            flow: FlowRef::of(s, key),
        })
    }

    /// A packet of the flow `f` names left this switch at `now`: `t_pre` of its flow.
    #[inline]
    pub fn departed(&mut self, f: FlowRef, now: u64) {
        let Some(e) = self.flows.get_mut(usize::from(f.slot)) else {
            return;
        };
        if e.valid && (e.key >> 24) as u8 == f.tag && e.queued > 0 {
            e.queued -= 1;
            e.t_pre = e.t_pre.max(now);
        }
    }

    /// Whether a packet whose flow's previous packet is `prev` may take path table index `to`
    /// and still arrive after it: the order rule of Algorithm 1 (lines 6–8) with the arrival
    /// confirmed rather than predicted, for a switch reroute by Algorithm 2 at this edge too.
    /// Staying on the previous packet's path is always safe (one FIFO per hop).
    #[inline]
    pub fn order_safe(&self, prev: Prev, to: usize) -> bool {
        match prev {
            Prev::New => true,
            Prev::Queued => false,
            Prev::Departed { path, arrived, .. } => arrived || path == to,
        }
    }
}

impl ProteusSource {
    /// Algorithm 2 moved flow `key`'s packet to path `to` at this (source) switch: the flow
    /// follows it, so that its later packets take the same path as the rerouted one ("all
    /// rerouted packets are sent to the same path", §III-B.2) rather than returning to the old
    /// path when PFC resumes and overtaking or being overtaken there.
    pub fn follow(&mut self, key: u32, to: PathId) {
        let Some(s) = self.find(key) else {
            return;
        };
        let Some(i) = self.table.index_of(to) else {
            return;
        };
        let e = &mut self.flows[s];
        {
            let (alts, n) = alternatives(&self.table, i, key as usize);
            e.path = i as u16;
            e.alts = alts.map(|a| a as u16);
            e.n_alts = n as u8;
        }
    }
}

/// The three best active paths other than `chosen`, in SelectPath order (ties salted as the
/// choice was).
#[inline]
fn alternatives(t: &PathTable, chosen: usize, salt: usize) -> ([usize; 3], usize) {
    let (r, n) = t.select_salted(|_, _| true, salt);
    let mut out = [usize::MAX; 3];
    let mut k = 0;
    for &i in r.iter().take(n) {
        if i != chosen && k < 3 {
            out[k] = i;
            k += 1;
        }
    }
    (out, k)
}

#[cfg(test)]
mod tests {
    use super::super::path::{Params, PathEntry};
    use super::*;

    const US: u64 = 1_000_000;

    /// Four paths, base one-way delay 10 us (RTT_low 13 us), ports 0..4.
    fn table(t_pd_us: [u64; 4], u: [u32; 4]) -> PathTable {
        PathTable::new(
            Params::default(),
            (0..4)
                .map(|i| {
                    let mut e = PathEntry::new(PathId(100 + i as u16), i as u16, 10 * US);
                    e.t_pd_ps = t_pd_us[i] * US;
                    e.u_permille = u[i];
                    e
                })
                .collect(),
        )
    }

    #[test]
    fn new_flow_selects_and_fills_the_shim() {
        // Path 101 non-congested 11 us; 102 non-congested 12 us; 100 undetermined (PFC,
        // u 0.3, 20 us); 103 congested (u 1, 15 us).
        let mut s = ProteusSource::new(table([20, 11, 12, 15], [300, 500, 500, 1000]), 16);
        let d = s.route(7, 0).unwrap();
        assert_eq!(d.port, 1);
        assert!(!d.rerouted);
        assert_eq!(d.shim.path, PathId(101));
        assert_eq!(d.shim.alts, [PathId(102), PathId(100), PathId(103)]);
        // t_td = D_ps − D_po = 12 − 11 us.
        assert_eq!(d.shim.t_td_ps, US);
    }

    /// Routes a packet of `key` at `now` that leaves this switch at once.
    fn send(s: &mut ProteusSource, key: u32, now: u64) -> Decision {
        let d = s.route(key, now).unwrap();
        s.departed(d.flow, now);
        d
    }

    /// Issue 18: a known flow moves only once the destination edge has confirmed that its
    /// previous packet arrived (the path's arrival frontier is past its departure). Lines 6–8
    /// predict that arrival from fed-back delays; here the prediction said "safe" and was not
    /// (2 us gap, 3 us gain: the previous packet would arrive at 16 us, the moved one at
    /// 15 us), and said "unsafe" where the packet had in fact arrived.
    #[test]
    fn existing_flow_moves_only_once_its_previous_packet_arrived() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        assert_eq!(send(&mut s, 1, 0).shim.path, PathId(100));
        // Path 100 slows to 16 us (undetermined); 101 is 5 us faster, 102 4 us, 103 3 us.
        s.table.feedback(PathId(100), 16 * US, 0);
        // 2 us later, the first packet unconfirmed: stay, whatever the delays say.
        let d = send(&mut s, 1, 2 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(100), false));
        assert_eq!(
            d.prev,
            Prev::Departed {
                path: 0,
                gap: 2 * US,
                arrived: false
            }
        );
        // 100 us on, the packet of 2 us still unconfirmed (a long pause on the spine, say):
        // still stay. The listing would move it by any gain under 98 us.
        let d = send(&mut s, 1, 100 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(100), false));
        assert!(
            !s.order_safe(d.prev, 3),
            "Algorithm 2 may not move it either"
        );
        // The destination edge confirms the packet sent at 99 us: not the one of 100 us.
        assert!(s.table.confirm(PathId(100), 99 * US));
        let d = send(&mut s, 1, 101 * US);
        assert_eq!(d.shim.path, PathId(100));
        // Now up to 101 us: 100 ns later every faster path keeps order (the listing would need
        // a gain under 100 ns); SelectPath among {101, 102, 103}: 101, non-congested, 11 us.
        s.table.confirm(PathId(100), 101 * US);
        let d = s.route(1, 101 * US + US / 10).unwrap();
        assert_eq!(
            d.prev,
            Prev::Departed {
                path: 0,
                gap: US / 10,
                arrived: true
            }
        );
        assert!(s.order_safe(d.prev, 3));
        assert_eq!((d.shim.path, d.rerouted), (PathId(101), true));
        // Its alternatives rank all other active paths: 102 (12 us, non-congested) first;
        // 103 (13 us, exactly RTT_low) and 100 (16 us) are both undetermined (RTT ≥ RTT_low,
        // u 0 < 1), equal by utilisation, so the tie goes cyclically from table index
        // key % 4 = 1 on: 103 (index 3) before 100 (index 0).
        assert_eq!(d.shim.alts, [PathId(102), PathId(103), PathId(100)]);
        // The alternative is slower by 1 us: t_td = D_ps − D_po.
        assert_eq!(d.shim.t_td_ps, US);
        s.departed(d.flow, 102 * US);
        // On 101 (non-congested) it stays even once confirmed and 102 reads 1 us faster
        // (§III-B.1's trigger).
        s.table.confirm(PathId(101), 102 * US);
        s.table.feedback(PathId(102), 10 * US, 0);
        let d = send(&mut s, 1, 200 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(101), false));
        // A move never goes to a slower path: 101 turns undetermined at 14 us; 102 (10 us) is
        // the one faster path.
        s.table.feedback(PathId(101), 14 * US, 500);
        s.table.confirm(PathId(101), 200 * US);
        let d = send(&mut s, 1, 201 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(102), true));
    }

    /// §III-B.1's trigger, hand-worked (issue 18): base 10 us, RTT_low 13 us. A flow on path
    /// 100 at 12.9 us (non-congested) stays even when 101 is 0.9 us faster and the gap is 1 ms:
    /// the listing's lines 6–8 alone would move it, on a difference a stale period mean cannot
    /// resolve. At 13 us (undetermined) the same gap moves it to 101 (12 us; 102 at 12.5 us is
    /// the alternative, 103 at 13 us is not faster).
    #[test]
    fn a_known_flow_is_rerouted_only_off_a_congested_path() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        assert_eq!(send(&mut s, 2, 0).shim.path, PathId(100));
        s.table.confirm(PathId(100), 1000 * US);
        s.table.feedback(PathId(100), 12_900_000, 300);
        s.table.feedback(PathId(101), 12 * US, 300);
        s.table.feedback(PathId(102), 12_500_000, 300);
        let d = send(&mut s, 2, 1000 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(100), false));
        // The local queue counts too: 0.2 us on port 0 makes 100 read 13.1 us, undetermined.
        s.table.set_local(0, 200_000, 0);
        s.table.confirm(PathId(100), 2000 * US);
        let d = send(&mut s, 2, 2000 * US);
        assert_eq!((d.shim.path, d.rerouted), (PathId(101), true));
        assert_eq!(d.shim.alts[0], PathId(102));
    }

    /// Issue 18: `t_pre` is when the previous packet left this switch (§IV-A: "timestamp for
    /// the last forwarded packet"), a flow whose packet is still queued here does not move,
    /// and one whose packet left moves once that departure is confirmed arrived. Before, the gap ran from the previous packet's routing, so a
    /// packet that sat in a (PFC-paused) egress queue here was overtaken by the next one.
    #[test]
    fn a_flow_moves_only_after_its_previous_packet_left() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        let d0 = s.route(1, 0).unwrap();
        assert_eq!((d0.shim.path, d0.prev), (PathId(100), Prev::New));
        // Path 100 reads 16 us now; 103 is 3 us faster. 10 us later the first packet is still
        // queued here: whatever the gap, the second stays behind it.
        s.table.feedback(PathId(100), 16 * US, 0);
        let d1 = s.route(1, 10 * US).unwrap();
        assert_eq!(
            (d1.shim.path, d1.rerouted, d1.prev),
            (PathId(100), false, Prev::Queued)
        );
        assert!(
            !s.order_safe(d1.prev, 3),
            "Algorithm 2 may not move it either"
        );
        // The first leaves at 11 us, the second at 12 us; a third at 14 us has a gap of 2 us
        // (not 4 us from the second's routing). The destination edge has confirmed the first
        // (sent at 11 us), not the second: stay.
        s.departed(d0.flow, 11 * US);
        s.departed(d1.flow, 12 * US);
        s.table.confirm(PathId(100), 11 * US);
        let d2 = s.route(1, 14 * US).unwrap();
        assert_eq!(
            (d2.shim.path, d2.rerouted, d2.prev),
            (
                PathId(100),
                false,
                Prev::Departed {
                    path: 0,
                    gap: 2 * US,
                    arrived: false
                }
            )
        );
        assert!(s.order_safe(d2.prev, 0), "staying keeps order");
        assert!(!s.order_safe(d2.prev, 3));
        s.departed(d2.flow, 15 * US + US / 2);
        // Confirmed up to the third (left at 15.5 us): the fourth moves to 101 (5 us faster).
        s.table.confirm(PathId(100), 15 * US + US / 2);
        let d3 = s.route(1, 16 * US).unwrap();
        assert_eq!((d3.shim.path, d3.rerouted), (PathId(101), true));
        // A departure of an evicted flow's packet (other tag) does not count.
        let other = FlowRef {
            slot: d3.flow.slot,
            tag: d3.flow.tag ^ 1,
        };
        s.departed(other, 30 * US);
        assert_eq!(s.route(1, 40 * US).unwrap().prev, Prev::Queued);
    }

    /// Issue 18: a flow table miss evicts a flow, and an evicted flow comes back as new, free
    /// to take any path while its packets may be in flight (the last 99 reordered packets of
    /// §V-B's quick run: two flows between the same leaves sharing a direct-mapped slot).
    /// A set of 4 ways evicts a settled flow first (nothing queued here, last packet confirmed
    /// arrived: a new choice cannot overtake anything), else the one that sent longest ago.
    #[test]
    fn a_miss_evicts_a_settled_flow_first() {
        let one = PathTable::new(
            Params::default(),
            vec![PathEntry::new(PathId(5), 0, 10 * US)],
        );
        let mut s = ProteusSource::new(one, 4);
        for k in 1..=4 {
            assert_eq!(send(&mut s, k, u64::from(k) * US).prev, Prev::New);
        }
        // Flows 1 and 2 (sent at 1 and 2 us) are confirmed, 3 and 4 not.
        s.table.confirm(PathId(5), 2 * US);
        assert_eq!(send(&mut s, 5, 5 * US).prev, Prev::New);
        // Flow 1, settled longest, made room; 2, 3 and 4 are still known.
        for k in [2, 3, 4] {
            assert!(matches!(
                send(&mut s, k, 6 * US).prev,
                Prev::Departed { .. }
            ));
        }
        // Nothing settled now: flow 1 evicts the flow that sent longest ago, 5 (at 5 us).
        assert_eq!(send(&mut s, 1, 7 * US).prev, Prev::New);
        assert_eq!(send(&mut s, 5, 8 * US).prev, Prev::New);
        assert!(matches!(
            send(&mut s, 1, 9 * US).prev,
            Prev::Departed { .. }
        ));
    }

    /// The delay of a path includes the queue on its first port here now (`local`).
    #[test]
    fn the_local_queue_counts_in_a_paths_delay() {
        let mut s = ProteusSource::new(table([10, 10, 10, 10], [0; 4]), 16);
        // 4 us of queue on ports 0 and 1, 2 us on 2, none on 3: path 103 for a new flow,
        // t_td = 2 us against 102.
        s.table.set_local(0, 4 * US, 0);
        s.table.set_local(1, 4 * US, 0);
        s.table.set_local(2, 2 * US, 0);
        let d = s.route(5, 0).unwrap();
        assert_eq!(d.shim.path, PathId(103));
        assert_eq!(d.shim.alts[0], PathId(102));
        assert_eq!(d.shim.t_td_ps, 2 * US);
    }

    /// Issue 18 (`deploy/sim/proteus-leafspine.toml`): before any feedback every path reads
    /// its base delay and an uplink carrying a line-rate flow has no queue, so the salt alone
    /// placed flows, and two keys with the same salt took one uplink while another stayed
    /// idle. Among equal paths a new flow now takes the first hop this edge sent least on
    /// lately; the salt only orders paths equal in that too. A faster path still wins over
    /// a less loaded one.
    #[test]
    fn equal_paths_go_to_the_least_loaded_first_hop() {
        let mut s = ProteusSource::new(table([10, 10, 10, 10], [0; 4]), 16);
        // Keys 4 and 8 salt alike (index 0 first).
        assert_eq!(s.route(4, 0).unwrap().shim.path, PathId(100));
        // 100 has carried the first flow's packets: the second takes 101, the third 102.
        s.table.set_local(0, 0, 3000);
        assert_eq!(s.route(8, 0).unwrap().shim.path, PathId(101));
        s.table.set_local(1, 0, 1500);
        let d = s.route(12, 0).unwrap();
        assert_eq!(d.shim.path, PathId(102));
        // Alternatives in the same order: 103 idle, then 101 (1500 B), then 100 (3000 B).
        assert_eq!(d.shim.alts, [PathId(103), PathId(101), PathId(100)]);
        // A lower delay beats a lighter first hop.
        s.table.set_local(3, 0, 1500);
        s.table.feedback(PathId(100), 9 * US, 0);
        assert_eq!(s.route(16, 0).unwrap().shim.path, PathId(100));
    }

    #[test]
    fn an_existing_flow_never_moves_to_a_slower_path() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        send(&mut s, 3, 0);
        // Its path turns congested (14 us, full); the others turn undetermined at 20 us.
        // A new flow prefers undetermined to congested (line 20 before 23) ...
        s.table.feedback(PathId(100), 14 * US, 1000);
        for id in 101..104 {
            s.table.feedback(PathId(id), 20 * US, 100);
        }
        assert_eq!(s.route(4, 0).unwrap().shim.path, PathId(101));
        // ... but the existing flow only ever moves to a faster path (lines 6–8): none is.
        for k in 1..10 {
            let d = send(&mut s, 3, k * 1000 * US);
            assert_eq!((d.shim.path, d.rerouted), (PathId(100), false));
        }
    }

    #[test]
    fn inactive_paths_are_skipped_and_no_path_means_none() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        s.table.set_port_active(0, false);
        let d = s.route(9, 0).unwrap();
        assert_eq!(d.shim.path, PathId(101));
        assert_eq!(d.shim.alts, [PathId(102), PathId(103), PathId::NONE]);
        for p in 0..4 {
            s.table.set_port_active(p, false);
        }
        assert_eq!(s.route(10, 0), None);
    }

    #[test]
    fn a_flow_follows_a_local_reroute() {
        let mut s = ProteusSource::new(table([10, 11, 12, 13], [0; 4]), 16);
        assert_eq!(s.route(5, 0).unwrap().shim.path, PathId(100));
        s.follow(5, PathId(102));
        let d = s.route(5, 100).unwrap();
        assert_eq!((d.shim.path, d.rerouted), (PathId(102), false));
        // Its stored alternatives exclude the new path; another flow is not moved.
        assert!(!d.shim.alts.contains(&PathId(102)));
        s.follow(6, PathId(103));
        assert_eq!(s.route(6, 0).unwrap().shim.path, PathId(100));
    }

    #[test]
    fn single_path_tolerates_everything() {
        let t = PathTable::new(
            Params::default(),
            vec![PathEntry::new(PathId(5), 2, 10 * US)],
        );
        let mut s = ProteusSource::new(t, 1);
        let d = s.route(1, 0).unwrap();
        assert_eq!(d.shim.alts, [PathId::NONE; 3]);
        assert_eq!(d.shim.t_td_ps, Shim::T_TD_MAX_PS);
    }
}

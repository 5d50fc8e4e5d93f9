//! Load balancing in virtual time (issue 18): DRILL beside ECMP on the same leaf-spine, same
//! flows, same seed, and Proteus's source edge on hand-made frames. Transport: the fabric's
//! constant-rate UDP flows (no congestion control; DCQCN is issue 19).
//!
//! The Proteus paper's §II-B.3 case study (Fig. 4, `deploy/sim/{proteus,drill}-fig4.toml`:
//! victim f1's FCT under ECMP, DRILL and Proteus, reordering) is reproduced by
//! `xoff repro proteus` (`tools/src/repro/proteus.rs`, checked by `tools/tests/repro.rs`).

use dataplane::config::LoadBalancer;
use dataplane::fabric::{Fabric, FabricOptions, SimReport};
use dataplane::Topology;
use std::path::{Path, PathBuf};

fn sim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim")
}

fn run(file: &str) -> SimReport {
    let mut f = Fabric::load(
        sim_dir().join(file),
        &FabricOptions {
            seed: None,
            duration: None,
        },
    )
    .unwrap();
    f.run();
    f.report()
}

#[test]
fn lb_key_defaults_to_ecmp_and_selects_drill() {
    let plain = Topology::load(sim_dir().join("leafspine.toml")).unwrap();
    let drill = Topology::load(sim_dir().join("drill-leafspine.toml")).unwrap();
    let p = plain.resolve().unwrap();
    let d = drill.resolve().unwrap();
    for (a, b) in p.switches.iter().zip(&d.switches) {
        assert_eq!(a.spec.lb, LoadBalancer::Ecmp, "{}", a.name());
        let want = if b.name().starts_with("leaf") {
            LoadBalancer::Drill
        } else {
            LoadBalancer::Ecmp
        };
        assert_eq!(b.spec.lb, want, "{}", b.name());
    }
    let bad = std::fs::read_to_string(sim_dir().join("drill-leafspine.toml"))
        .unwrap()
        .replacen("\nlb = \"drill\"", "\nlb = \"spray\"", 1);
    let e = Topology::parse(&bad, Path::new("x.toml")).unwrap_err();
    assert_eq!(e.key, "lb", "{e}");
}

/// The leaf-spine permutation (16 line-rate flows, 4 uplinks per leaf): seeded ECMP collides
/// flows on uplinks (some lose half their packets to 512 KiB tail drops), DRILL(2, 1) spreads
/// per packet, so nothing is lost and every flow runs near line rate, at the price of
/// reordering, which the receivers count.
#[test]
fn drill_removes_ecmp_collisions_and_reorders() {
    let e = run("leafspine.toml");
    let d = run("drill-leafspine.toml");
    assert_eq!(e.flows.len(), d.flows.len());
    let lost = |r: &SimReport| r.flows.iter().map(|f| f.lost).sum::<u64>();
    let reord = |r: &SimReport| r.flows.iter().map(|f| f.reordered).sum::<u64>();
    let worst = |r: &SimReport| {
        r.flows
            .iter()
            .map(|f| f.throughput_gbps)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        lost(&e) > 0,
        "ECMP must collide for this comparison to mean anything"
    );
    assert_eq!(reord(&e), 0, "ECMP keeps a flow on one path");
    assert_eq!(lost(&d), 0);
    assert!(reord(&d) > 0, "per-packet spraying reorders");
    assert!(worst(&d) > 95.0, "worst DRILL flow {} Gbit/s", worst(&d));
    assert!(worst(&e) < 60.0, "worst ECMP flow {} Gbit/s", worst(&e));
}

/// The Clos of the Proteus paper's Fig. 1 reduced to what one flow needs: leaves L1 (S1, S2)
/// and L3 (R1), spines C1 and C2, 40 Gbit/s, 1 µs links, PFC on priority 3, `lb` everywhere.
fn clos(lb: &str) -> String {
    let sw = |name: &str, ports: &[&str], routes: &[(&str, &[&str])]| {
        let mut s = format!(
            "[[switch]]\nname = \"{name}\"\nlb = \"{lb}\"\n\
             defaults = {{ rate = \"40Gbit\", delay = \"1us\", queues = 8 }}\n\
             buffer = {{ buffer_bytes = 9000000, headroom_mode = \"dsh\", response_ps = 0 }}\n\
             pfc = {{ enable_mask = 8 }}\nport = ["
        );
        s += &ports
            .iter()
            .map(|p| format!("{{ name = \"{p}\" }}"))
            .collect::<Vec<_>>()
            .join(", ");
        s += "]\n";
        for (prefix, via) in routes {
            let via: Vec<String> = via.iter().map(|v| format!("\"{v}\"")).collect();
            s += &format!(
                "[[switch.route]]\nprefix = \"{prefix}\"\nvia = [{}]\n",
                via.join(", ")
            );
        }
        s
    };
    let mut t = String::from("name = \"clos\"\n");
    t += &sw(
        "L1",
        &["s1", "s2", "up1", "up2"],
        &[
            ("10.0.1.1/32", &["s1"]),
            ("10.0.1.2/32", &["s2"]),
            ("10.0.3.0/24", &["up1", "up2"]),
        ],
    );
    t += &sw(
        "L3",
        &["r1", "up1", "up2"],
        &[("10.0.3.1/32", &["r1"]), ("10.0.1.0/24", &["up1", "up2"])],
    );
    for c in ["C1", "C2"] {
        t += &sw(
            c,
            &["l1", "l3"],
            &[("10.0.1.0/24", &["l1"]), ("10.0.3.0/24", &["l3"])],
        );
    }
    for (h, ip, gw) in [
        ("s1", "10.0.1.1/24", "10.0.1.254"),
        ("s2", "10.0.1.2/24", "10.0.1.254"),
        ("r1", "10.0.3.1/24", "10.0.3.254"),
    ] {
        t += &format!("[[host]]\nname = \"{h}\"\nip = \"{ip}\"\ngateway = \"{gw}\"\n");
    }
    for (a, b) in [
        ("s1", "L1:s1"),
        ("s2", "L1:s2"),
        ("r1", "L3:r1"),
        ("L1:up1", "C1:l1"),
        ("L1:up2", "C2:l1"),
        ("L3:up1", "C1:l3"),
        ("L3:up2", "C2:l3"),
    ] {
        t += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    t
}

mod proteus_at_the_source_edge {
    use super::clos;
    use dataplane::frame::{FrameMem, HeapMem};
    use dataplane::scheme::pfc::emit_pfc;
    use dataplane::switch::Outputs;
    use dataplane::wire::data::FrameTemplate;
    use dataplane::{Switch, Topology};
    use flowctl::wire::pfc::PfcRepr;
    use flowctl::wire::proteus::{FeedbackEntry, FeedbackRepr, ShimRepr};
    use std::path::Path;

    const US: u64 = 1_000_000;

    struct Leaf {
        sw: Switch,
        mem: HeapMem,
        up: [u16; 2],
        s1: u16,
        /// Path ids L1 → L3 by uplink.
        path: [u16; 2],
        tmpl: FrameTemplate,
    }

    fn leaf() -> Leaf {
        let t = Topology::parse(&clos("proteus"), Path::new("clos.toml")).unwrap();
        let r = t.resolve().unwrap();
        let l1 = r.switch("L1").unwrap();
        let spec = l1.spec.clone();
        let ps = spec
            .proteus
            .clone()
            .expect("lb = proteus gives L1 the path model");
        let up = [l1.port_index("up1").unwrap(), l1.port_index("up2").unwrap()];
        let s1 = l1.port_index("s1").unwrap();
        // L3 is edge 1: its table holds one path per uplink, in route order.
        let paths: Vec<(u16, u16)> = ps.tables[1]
            .iter()
            .map(|&(id, port, _)| (id, port))
            .collect();
        assert_eq!(paths.iter().map(|p| p.1).collect::<Vec<_>>(), up.to_vec());
        let h = &r.hosts[r.host_index("s1").unwrap() as usize];
        let dst = r.hosts[r.host_index("r1").unwrap() as usize].ip;
        let tmpl = FrameTemplate {
            src_mac: h.mac,
            dst_mac: h.peer_mac.unwrap(),
            src_ip: h.ip,
            dst_ip: dst,
            sport: 49152,
            dport: 4791,
            prio: 3,
            vlan: false,
            ecn: false,
        };
        Leaf {
            sw: Switch::single(spec, 0).unwrap(),
            mem: HeapMem::new(256, 2048),
            up,
            s1,
            path: [paths[0].0, paths[1].0],
            tmpl,
        }
    }

    impl Leaf {
        fn rx(&mut self, port: u16, bytes: &[u8], now: u64) {
            let f = self.mem.alloc_with(bytes).unwrap();
            let mut out = Outputs::new();
            self.sw
                .receive(&mut self.mem, port, f, bytes.len() as u32, now, &mut out);
        }

        fn data(&mut self, now: u64) {
            let mut b = vec![0u8; 1000];
            self.tmpl.emit_headers(&mut b, 1000);
            self.rx(self.s1, &b, now);
        }

        fn pfc(&mut self, up: usize, quanta: u16, now: u64) {
            let mut q = [0u16; 8];
            q[3] = quanta;
            let r = PfcRepr {
                src_addr: [2, 0, 0, 0, 0, 9],
                class_enable: 1 << 3,
                quanta: q,
            };
            let mut b = vec![0u8; 128];
            let n = emit_pfc(&r, &mut b);
            self.rx(self.up[up], &b[..n], now);
        }

        /// Feedback from L3 for both paths at `t_pd_ns` (idle links), with uplink `i`'s path's
        /// arrival frontier at `arrived_ns` (the other's at 0).
        fn feedback(&mut self, i: usize, t_pd_ns: u32, arrived_ns: u32, now: u64) {
            let mut arrived = [0; 2];
            arrived[i] = arrived_ns;
            self.feedback_of([t_pd_ns; 2], [0; 2], arrived, i, now);
        }

        /// Feedback from L3, arriving on uplink `on`: per path (uplink order) `t_pd`, `u_link`
        /// and the arrival frontier.
        fn feedback_of(
            &mut self,
            t_pd_ns: [u32; 2],
            u_permille: [u16; 2],
            arrived_ns: [u32; 2],
            on: usize,
            now: u64,
        ) {
            let entries = (0..2)
                .map(|k| FeedbackEntry {
                    path: self.path[k],
                    t_pd_ns: t_pd_ns[k],
                    u_permille: u_permille[k],
                    arrived_ns: arrived_ns[k],
                })
                .collect();
            let fb = FeedbackRepr {
                dst_addr: [1, 0x80, 0xc2, 0, 0, 0x0e],
                src_addr: [2, 0, 0, 0, 0, 9],
                edge: 0,
                entries,
            };
            let mut b = vec![0u8; 128];
            let n = fb.emit(&mut b);
            self.rx(self.up[on], &b[..n], now);
        }

        /// Data packets queued on uplink `i` so far.
        fn enq(&self, i: usize) -> u64 {
            let p = usize::from(self.up[i]);
            self.sw.shared.counters[p].queues[3].enq_pkts.get()
        }

        /// Serves uplink `i` from `now` for 20 µs; the Proteus shims of the frames it sent.
        fn drain(&mut self, i: usize, now: u64) -> Vec<ShimRepr> {
            let mut out = Outputs::new();
            for k in 0..200 {
                self.sw
                    .service(&mut self.mem, self.up[i], now + k * US / 10, &mut out);
            }
            out.tx
                .iter()
                .filter_map(|&(f, len)| {
                    let d = &self.mem.data(f)[..len as usize];
                    (d[12..14] == [0x88, 0xb6]).then(|| {
                        ShimRepr::parse(&flowctl::wire::proteus::Frame::new_unchecked(d)).unwrap()
                    })
                })
                .collect()
        }
    }

    /// A leaf with one packet of the flow queued on an uplink: (leaf, that uplink, the other).
    fn leaf_with_a_packet_queued() -> (Leaf, usize, usize) {
        let mut l = leaf();
        l.data(0);
        let first = (0..2)
            .find(|&i| l.enq(i) == 1)
            .expect("queued on an uplink");
        (l, first, 1 - first)
    }

    /// §III-B.2 on real frames: with equal paths `t_td` is 0, so a packet that meets a
    /// PFC-paused uplink takes the alternative once the flow's previous packet has left, the
    /// path is out until PFC resumes, and the flow stays on the alternative after it resumes;
    /// frames leave with the version-2 shim naming the path they took.
    #[test]
    fn a_pause_on_the_chosen_uplink_moves_the_flow_to_the_other_spine() {
        let (mut l, first, other) = leaf_with_a_packet_queued();
        let sent = l.drain(first, 0);
        assert_eq!(sent.len(), 1);
        // L3 confirms that packet arrived (its path's arrival frontier; both paths at 3 µs,
        // under RTT_low 3.4 µs, so t_td stays 0).
        l.feedback(first, 3_000, sent[0].sent_ns, 25 * US);
        // The uplink is paused; the flow's next packet (its previous one arrived) moves.
        l.pfc(first, 0xFFFF, 30 * US);
        l.data(32 * US);
        assert_eq!((l.enq(first), l.enq(other)), (1, 1), "rerouted");
        l.pfc(first, 0, 33 * US);
        l.data(34 * US);
        assert_eq!((l.enq(first), l.enq(other)), (1, 2), "the flow followed");
        let st = l.sw.scheme_stats(35 * US).unwrap().proteus.unwrap();
        assert_eq!((st.routed, st.hop_reroutes), (3, 1));
        let on_other = l.drain(other, 40 * US);
        assert_eq!(on_other.len(), 2);
        for s in &on_other {
            assert_eq!(s.path, l.path[other]);
            assert!(!s.alts.contains(&l.path[other]));
        }
        assert_eq!(sent[0].path, l.path[first]);
        assert_eq!(sent[0].alts[0], l.path[other]);
    }

    /// Issue 18: a packet whose flow still has a packet waiting at the paused uplink stays
    /// behind it; moving it to the other spine would overtake that packet (Algorithm 2's
    /// `t_td ≤ t_qd` is the condition for exactly that). Before the fix it moved, and the
    /// receiver got the flow's packets out of order.
    #[test]
    fn a_pause_does_not_move_a_packet_past_its_flows_queued_packet() {
        let (mut l, first, other) = leaf_with_a_packet_queued();
        // The uplink is paused with the first packet still queued behind the pause.
        l.pfc(first, 0xFFFF, 10);
        l.data(2 * US);
        assert_eq!(
            (l.enq(first), l.enq(other)),
            (2, 0),
            "stayed behind its packet"
        );
        let st = l.sw.scheme_stats(3 * US).unwrap().proteus.unwrap();
        assert_eq!((st.hop_reroutes, st.hop_reroutes_held), (0, 1));
        l.pfc(first, 0, 3 * US);
        // Both leave on the first uplink in order, each with its departure as send time.
        assert_eq!(l.drain(first, 4 * US).len(), 2);
        assert!(l.drain(other, 4 * US).is_empty());
    }

    /// Issue 18: the flow's previous packet has left the leaf but L3 has not confirmed that it
    /// arrived: it may still be queued at the spine, so a packet moved to the other spine could
    /// overtake it. Algorithm 2 holds the move until the confirmation (before, the order rule's
    /// estimate from fed-back delays let it move, and 0.2 % of §V-B's packets were reordered).
    #[test]
    fn a_pause_does_not_move_a_flow_whose_last_packet_is_unconfirmed() {
        let (mut l, first, other) = leaf_with_a_packet_queued();
        let sent = l.drain(first, 0);
        assert_eq!(sent.len(), 1);
        // A confirmation of an earlier send time does not cover it.
        l.feedback(first, 3_000, sent[0].sent_ns - 1, 25 * US);
        l.pfc(first, 0xFFFF, 30 * US);
        l.data(32 * US);
        assert_eq!((l.enq(first), l.enq(other)), (2, 0), "held");
        let st = l.sw.scheme_stats(33 * US).unwrap().proteus.unwrap();
        assert_eq!((st.hop_reroutes, st.hop_reroutes_held), (0, 1));
    }

    /// Better late than never for a packet at the head of a paused queue: with the other path
    /// 7 µs slower (`t_td` = 7 µs) and nothing of the flow queued or unconfirmed, a packet
    /// meeting a pause that began 10 µs before it takes the other path (the pause's age counts
    /// in `t_qd`); before, the empty queue's `t_qd` of 0 made it wait out a pause of any
    /// length, and the flow's later packets could not pass it (issue 18, real frames).
    #[test]
    fn a_pause_older_than_t_td_moves_an_idle_flow_at_once() {
        let mut l = leaf();
        // As below: the path via up2 at 3 us (non-congested), via up1 at 10 us.
        let fb = |l: &mut Leaf, arrived_ns: u32, now: u64| {
            l.feedback_of([10_000, 3_000], [0, 500], [0, arrived_ns], 0, now);
        };
        fb(&mut l, 0, 0);
        l.data(US);
        assert_eq!((l.enq(0), l.enq(1)), (0, 1), "the faster path");
        let sent = l.drain(1, 2 * US);
        assert_eq!(sent.len(), 1);
        fb(&mut l, sent[0].sent_ns, 25 * US);
        l.pfc(1, 0xFFFF, 30 * US);
        l.data(40 * US);
        assert_eq!(
            (l.enq(0), l.enq(1)),
            (1, 1),
            "moved: paused 10 us >= t_td 7 us"
        );
        let st = l.sw.scheme_stats(41 * US).unwrap().proteus.unwrap();
        assert_eq!((st.hop_reroutes, st.hop_reroutes_held), (1, 0));
    }

    /// Better late than never: with feedback saying the other path is 7 µs slower
    /// (`t_td` = 7 µs), a pause in front of one packet (`t_qd` ≈ 0.2 µs) is tolerated.
    #[test]
    fn a_short_pause_is_waited_out_when_the_alternative_is_much_slower() {
        let mut l = leaf();
        // Feedback for L1 (edge 0): path via up2 at 3 µs (non-congested: base 2 × (1 µs +
        // 306 ns), RTT_low 1.3 × that = 3.4 µs), path via up1 at 10 µs and idle
        // (undetermined).
        l.feedback_of([10_000, 3_000], [0, 500], [0, 0], 0, 0);
        l.data(US);
        assert_eq!((l.enq(0), l.enq(1)), (0, 1), "the faster path");
        l.pfc(1, 0xFFFF, 2 * US);
        l.data(3 * US);
        assert_eq!((l.enq(0), l.enq(1)), (0, 2), "tolerated: t_td 7 us > t_qd");
        let st = l.sw.scheme_stats(4 * US).unwrap().proteus.unwrap();
        assert_eq!((st.feedback_applied, st.hop_reroutes), (1, 0));
        l.pfc(1, 0, 5 * US);
        let shims = l.drain(1, 5 * US);
        assert_eq!(shims.len(), 2);
        // t_td = D_ps − D_po less each packet's sojourn here (CST). The first: 10 − 3 = 7 µs,
        // waited from 1 µs to 5 µs (3 µs left). The second found the first queued on its
        // path's uplink (1000 bytes, 200 ns at 40 Gbit/s, in its path's delay): 10 − 3.2 =
        // 6.8 µs, waited from 3 µs until the wire is free after the first's 1016-byte frame
        // (203.2 ns), which `drain`'s 100 ns service steps see at 5.3 µs: 4.5 µs left. Each
        // leaves with its departure as send time.
        assert_eq!(shims[0].t_td_ns, 3_000, "{shims:?}");
        assert_eq!(shims[1].t_td_ns, 4_500, "{shims:?}");
        assert_eq!((shims[0].sent_ns, shims[1].sent_ns), (5_000, 5_300));
    }
}

//! Pyrrha's per-packet cost (`flowctl::pyrrha` + the path calculation), no I/O:
//!
//! * `pyrrha/hooks`: what the pipeline does per data packet on a ToR uplink of
//!   `deploy/topologies/leafspine.toml`: the unseeded ECMP hash of the 5-tuple (`on_parsed`),
//!   the onward path through the downstream switches' ECMP (`select_queue`), the match against
//!   the congestion-root table and the IQ choice, and the enqueue/dequeue threshold hooks.
//!   64 flows to every other rack's hosts; two roots paused (a spine's port toward leaf 3 and
//!   leaf 3's port toward h31), so some flows take IQs and some the OQ. Target ≤ 150 ns.
//! * `pyrrha/hooks_no_root`: the same with an empty root table (the common case).
//!
//! Run: `cargo bench -p bench --bench pyrrha -- --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dataplane::config::Topology;
use dataplane::scheme::pyrrha::path::{flow_hash, OnwardPath, PathModel};
use flowctl::pyrrha::{Choice, Pyrrha, PyrrhaConfig, PyrrhaPort, RootId};
use loadbal::FiveTuple;
use std::hint::black_box;
use std::net::IpAddr;
use std::path::Path;

fn hooks(c: &mut Criterion) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/topologies/leafspine.toml");
    let r = Topology::load(p).unwrap().resolve().unwrap();
    let model = PathModel::new(&r);
    let leaf1 = r.switch_index("leaf1").unwrap();
    let sw = &r.switches[leaf1 as usize];
    let ports: Vec<PyrrhaPort> = sw
        .spec
        .ports
        .iter()
        .map(|_| PyrrhaPort {
            bdp_bytes: 25_000,
            iqs: (1..16).collect(),
            queues: 16,
        })
        .collect();
    let src = r.hosts[r.host_index("h11").unwrap() as usize].ip;
    let flows: Vec<FiveTuple> = r
        .hosts
        .iter()
        .filter(|h| !h.name.starts_with("h1"))
        .flat_map(|h| {
            (0..16u16).map(move |i| FiveTuple {
                proto: 17,
                src: IpAddr::V4(src),
                dst: IpAddr::V4(h.ip),
                sport: 49152 + i,
                dport: 4791,
            })
        })
        .collect();
    // The uplink the leaf's own ECMP picks (the forward stage's work, not Pyrrha's).
    let outs: Vec<u16> = flows.iter().map(|t| sw.ecmp_port(t).unwrap()).collect();
    let spine1_l3 = r.port_of("spine1", "l3").unwrap();
    let leaf3_h1 = r.port_of("leaf3", "h1").unwrap();
    let up1 = usize::from(sw.port_index("up1").unwrap());
    let up2 = usize::from(sw.port_index("up2").unwrap());

    for (name, roots) in [("hooks", true), ("hooks_no_root", false)] {
        let mut py = Pyrrha::new(PyrrhaConfig::default(), leaf1 as u16, &ports).unwrap();
        if roots {
            let s = RootId::new(spine1_l3.0 as u16, spine1_l3.1);
            let l = RootId::new(leaf3_h1.0 as u16, leaf3_h1.1);
            for up in [up1, up2] {
                py.on_pause(up, l, 2, 0);
            }
            py.on_pause(up1, s, 1, 0);
        }
        let mut path = OnwardPath::default();
        let mut depth = [0u64; 16];
        let mut i = 0usize;
        let mut now = 0u64;
        // One data packet through the hooks; whether it took an IQ.
        let mut packet = || {
            let t = &flows[i % flows.len()];
            let out = outs[i % flows.len()];
            i += 1;
            now += 1_000;
            // on_parsed
            let h0 = flow_hash(black_box(t));
            let IpAddr::V4(d) = t.dst else { unreachable!() };
            // select_queue
            model.onward_hashed(leaf1 as u16, out, Some(u32::from(d)), h0, &mut path);
            let q = match py.select(usize::from(out), 0, path.as_slice(), now) {
                Choice::Oq => 0u8,
                Choice::Iq(q) => q,
            };
            // on_enqueue, then the departure of a packet of the same queue
            let qi = usize::from(q);
            depth[qi] += 1500;
            py.on_enqueue(usize::from(out), q, Some(0), depth[qi], now);
            depth[qi] -= 1500;
            py.on_dequeue(usize::from(out), q, depth[qi], now);
            py.drain_cmds().for_each(drop);
            py.drain_msgs().for_each(drop);
            black_box(q) != 0
        };
        // One round over every flow before measuring, so the mix the bench measures is
        // checked however few iterations criterion runs (`--test` runs one): with the roots
        // paused some flows take an IQ and some the OQ, without them none takes an IQ.
        let iq_pkts = (0..flows.len()).filter(|_| packet()).count();
        if roots {
            assert!(
                iq_pkts > 0 && iq_pkts < flows.len(),
                "{iq_pkts} of {} packets took an IQ",
                flows.len()
            );
        } else {
            assert_eq!(iq_pkts, 0, "an IQ without a root");
        }
        let mut g = c.benchmark_group("pyrrha");
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| b.iter(&mut packet));
        g.finish();
    }
}

criterion_group!(benches, hooks);
criterion_main!(benches);

//! The virtual-time fabric: it runs the production `Switch` pipeline, is deterministic per
//! seed, and gets the physics right at 100 Gbit/s with 1 µs links.

use dataplane::fabric::{
    DataHeader, Fabric, FabricOptions, FrameTemplate, HostCtx, HostModel, ProbeTarget, QueueCounter,
};
use dataplane::frame::{FrameId, FrameMem};
use dataplane::units::ser_ps;
use dataplane::{Switch, Topology};
use std::path::{Path, PathBuf};

const GBIT: u64 = 1_000_000_000;
const US: u64 = 1_000_000;

/// One 100 Gbit/s switch, 1 µs links, three hosts; `{sw}` is spliced into the port defaults
/// and `{flows}` appended.
fn one_switch(sw: &str, flows: &str) -> String {
    format!(
        r#"
name = "t"
[[switch]]
name = "s1"
defaults = {{ rate = "100Gbit", delay = "1us", queues = 2 {sw} }}
port = [{{ name = "p1" }}, {{ name = "p2" }}, {{ name = "p3" }}]
route = [{{ prefix = "10.0.9.0/24", via = ["p3"] }}]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
gateway = "10.0.0.254"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.0.9.1/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
{flows}
"#
    )
}

fn build(text: &str, seed: Option<u64>) -> Fabric {
    let t = Topology::parse(text, Path::new("test.toml")).unwrap();
    Fabric::new(
        &t,
        &FabricOptions {
            seed,
            duration: None,
        },
    )
    .unwrap()
}

fn sim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sim")
}

/// Two line-rate flows into h3's 100 Gbit/s port: "low" h1→h3 (prio 0 → queue 0) and "high"
/// h2→h3 (prio 1 → queue 1), both routed to 10.0.9.0/24 through their gateway, with the
/// egress scheduler `sched` and 1 MB per queue.
fn two_flows(sched: &str) -> String {
    one_switch(
        &format!(", scheduler = \"{sched}\", queue_limit = \"1MB\""),
        r#"
[sim]
duration = "100us"
[[flow]]
name = "low"
src = "h1"
dst = "h3"
prio = 0
[[flow]]
name = "high"
src = "h2"
dst = "h3"
prio = 1
"#,
    )
    .replace(
        "name = \"h2\"\nip = \"10.0.0.2/24\"",
        "name = \"h2\"\nip = \"10.0.0.2/24\"\ngateway = \"10.0.0.254\"",
    )
}

#[test]
fn single_packet_delay_is_serialization_plus_propagation() {
    let mut f = build(
        &one_switch(
            "",
            r#"
[[flow]]
name = "one"
src = "h1"
dst = "h2"
size = 1500
pkt = 1500
"#,
        ),
        None,
    );
    f.run();
    let r = f.flows().by_name("one").unwrap();
    assert_eq!((r.tx_pkts, r.rx_pkts), (1, 1));
    // Formula: host NIC serialization + propagation, then the switch's egress serialization +
    // propagation (store and forward; the parser/FIB take no virtual time):
    //   d = 2 × ((1500 + 20) B × 8 / 100 Gbit/s + 1 µs) = 2 × (121.6 ns + 1000 ns) = 2243.2 ns.
    let ser = (1500.0 + 20.0) * 8.0 / 100e9 * 1e12; // ps
    let formula = 2.0 * (ser + 1e6);
    let d = r.delays_ps[0] as f64;
    assert!(
        (d - formula).abs() <= 1000.0,
        "delay {d} ps, formula {formula} ps"
    );
    assert_eq!(r.delays_ps[0], 2 * (ser_ps(1500, 100 * GBIT) + US));
    assert_eq!(r.fct_ps(), Some(r.delays_ps[0]));
    // It went through the switch's ports.
    let sw = f.switch("s1").unwrap();
    assert_eq!(sw.shared.counters[0].rx_pkts.get(), 1);
    assert_eq!(sw.shared.counters[1].tx_pkts.get(), 1);
}

#[test]
fn drr_splits_one_egress_evenly_between_two_line_rate_flows() {
    let mut f = build(&two_flows("drr"), None);
    // Measure during the traffic window (afterwards the backlog drains).
    f.run_until(100 * US);
    for name in ["low", "high"] {
        let g = f.flows().by_name(name).unwrap().throughput_bps() / 1e9;
        assert!((g - 50.0).abs() <= 0.5, "{name}: {g} Gbit/s");
    }
    f.run();
    assert_eq!(
        f.mem().in_use(),
        0,
        "every frame was freed at a sink or a drop"
    );
}

#[test]
fn strict_priority_starves_the_lower_flow() {
    let mut f = build(&two_flows("sp"), None);
    f.run_until(100 * US);
    let high = f.flows().by_name("high").unwrap();
    let low = f.flows().by_name("low").unwrap();
    let g = high.throughput_bps() / 1e9;
    assert!((g - 100.0).abs() <= 0.5, "high: {g} Gbit/s");
    assert_eq!(low.rx_pkts, 0, "low got through while high was sending");
    assert!(low.tx_pkts > 800);
    // Once high stops, low's backlog (the 1 MB queue) drains; the rest was dropped.
    f.run();
    let low = f.flows().by_name("low").unwrap();
    assert!(low.rx_pkts > 600 && low.lost() > 0, "{low:?}");
    let q0 = &f.switch("s1").unwrap().shared.counters[2].queues[0];
    assert_eq!(q0.drops.get(), low.lost());
}

#[test]
fn two_to_one_overload_grows_the_queue_at_line_rate() {
    let text = two_flows("drr")
        .replace("queue_limit = \"1MB\"", "queue_limit = \"16MB\"")
        .replace("prio = 1", "prio = 0")
        .replace("duration = \"100us\"", "duration = \"50us\"\nprobe_interval = \"1us\"\nprobe = [{ switch = \"s1\", port = \"p3\", queue = 0, counter = \"depth_bytes\" }]");
    let mut f = build(&text, None);
    f.run_until(50 * US);
    let s = f.probes().series("s1:p3:q0:depth_bytes").unwrap();
    let at = |t: u64| s.iter().find(|&&(x, _)| x == t).map(|&(_, v)| v).unwrap();
    let (t1, t2) = (10 * US, 40 * US);
    let growth = (at(t2) - at(t1)) as f64 * 8.0 / ((t2 - t1) as f64 / 1e12) / 1e9;
    // 200 Gbit/s in, 100 Gbit/s out (wire bits). The queue holds frame bytes, i.e. 1500/1520
    // of the wire bits: 98.7 Gbit/s of frames.
    let expect = 100.0 * 1500.0 / 1520.0;
    assert!(
        (growth - expect).abs() / expect < 0.01,
        "growth {growth} Gbit/s"
    );
    assert!(
        (growth - 100.0).abs() / 100.0 < 0.03,
        "growth {growth} Gbit/s"
    );
    let csv = f.probes().csv();
    assert!(
        csv.starts_with("time_ps,s1:p3:q0:depth_bytes\n0,0\n1000000,"),
        "{csv}"
    );
    // No drops with a 16 MB queue: nothing is lost.
    f.run();
    let lost: u64 = f.flows().flows.iter().map(|r| r.lost()).sum();
    assert_eq!(lost, 0);
}

#[test]
fn fabric_runs_the_production_switch_and_its_config() {
    let text = two_flows("drr");
    let mut f = build(&text, None);
    // The fabric holds `dataplane::Switch` values: the pipeline type `xoff run` runs.
    let sw: &Switch = f.switch("s1").unwrap();
    assert_eq!(sw.shared.spec.ports.len(), 3);
    f.run();
    let rep = f.report();
    // Its counters are the switch's `SwitchShared` counters.
    let sw = f.switch("s1").unwrap();
    for (i, p) in rep.switches[0].ports.iter().enumerate() {
        let c = &sw.shared.counters[i];
        assert_eq!(p.rx_pkts, c.rx_pkts.get());
        assert_eq!(p.tx_pkts, c.tx_pkts.get());
        assert_eq!(
            p.queues[0].watermark_bytes,
            c.queues[0].watermark_bytes.get()
        );
    }
    let tx: u64 = rep.flows.iter().map(|r| r.tx_pkts).sum();
    assert_eq!(
        rep.switches[0].ports[0].rx_pkts + rep.switches[0].ports[1].rx_pkts,
        tx
    );

    // Changing the scheduler in the config changes the result (DRR → SP, tested above too).
    let mut sp = build(&two_flows("sp"), None);
    sp.run_until(100 * US);
    assert_eq!(sp.flows().by_name("low").unwrap().rx_pkts, 0);

    // Changing a route changes where packets go: 10.0.9.0/24 via p2 sends h1's flow to h2.
    let mut f = build(&text, None);
    f.run();
    let h3_rx = f.hosts()[2].nic.rx_pkts;
    assert!(h3_rx > 0 && f.hosts()[1].nic.rx_pkts == 0);
    let mut g = build(&text.replace("via = [\"p3\"]", "via = [\"p2\"]"), None);
    g.run();
    assert_eq!(g.hosts()[2].nic.rx_pkts, 0);
    assert!(g.hosts()[1].nic.rx_pkts > 0);
    // h2's own flow is now routed back out of its own port (p2 → p2), which the FIB allows
    // for routed traffic; both flows land at h2.
    let rx: u64 = g.flows().flows.iter().map(|r| r.rx_pkts).sum();
    assert_eq!(rx, g.hosts()[1].nic.rx_pkts);
}

fn leafspine(seed: Option<u64>) -> String {
    let path = sim_dir().join("leafspine.toml");
    let mut f = Fabric::load(
        &path,
        &FabricOptions {
            seed,
            duration: Some(20 * US),
        },
    )
    .unwrap();
    f.run();
    f.report().to_json()
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let a = leafspine(Some(1));
    let b = leafspine(Some(1));
    assert_eq!(a, b);
    let c = leafspine(Some(2));
    assert_ne!(a, c);
}

#[test]
fn example_files_run() {
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(sim_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    for p in entries {
        let mut f = Fabric::load(
            &p,
            &FabricOptions {
                seed: None,
                duration: Some(20 * US),
            },
        )
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        f.run();
        let r = f.report();
        let rx: u64 = r.flows.iter().map(|x| x.rx_pkts).sum();
        assert!(rx > 0, "{}", p.display());
        assert_eq!(r.unknown_rx, 0);
        assert_eq!(f.mem().in_use(), 0, "{}", p.display());
        assert!(!r.table().is_empty());
        n += 1;
    }
    assert!(n >= 3);
}

#[test]
fn incast_losses_match_switch_drops_and_sized_flows_complete() {
    // As shipped (1 MB queue) every flow completes; with 256 KiB the incast overflows it.
    let path = sim_dir().join("incast.toml");
    let mut f = Fabric::load(&path, &FabricOptions::default()).unwrap();
    f.run();
    let r = f.report();
    assert!(r.flows.iter().all(|x| x.lost == 0 && x.fct_ps.is_some()));
    let wm = r.switches[0].ports[0].queues[0].watermark_bytes;
    assert!(wm > 300_000, "max depth {wm}");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("queue_limit = \"1MB\"", "queue_limit = \"256KiB\"");
    let t = Topology::parse(&text, &path).unwrap();
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    f.run();
    let r = f.report();
    let lost: u64 = r.flows.iter().map(|x| x.lost).sum();
    let drops: u64 = r.switches[0].ports[0].queues.iter().map(|q| q.drops).sum();
    assert!(lost > 0, "8 × 64 KB into a 256 KiB queue must overflow");
    assert_eq!(lost, drops);
    for fl in &r.flows {
        assert_eq!(fl.tx_bytes, 64_000);
        assert_eq!(fl.reordered, 0);
        assert_eq!(fl.fct_ps.is_some(), fl.lost == 0, "{fl:?}");
    }
}

#[test]
fn on_off_source_sends_during_on_periods_only() {
    let mut f = build(
        &one_switch(
            "",
            r#"
[[flow]]
name = "oo"
src = "h1"
dst = "h2"
stop = "100us"
pattern = "onoff"
on = "10us"
off = "10us"
"#,
        ),
        None,
    );
    f.run();
    let r = f.flows().by_name("oo").unwrap();
    // Five on periods of 10 µs at 100 Gbit/s, 1500 B frames (121.6 ns each).
    let per_on = (10 * US).div_ceil(ser_ps(1500, 100 * GBIT));
    assert_eq!(r.tx_pkts, 5 * per_on);
    assert_eq!(r.rx_pkts, r.tx_pkts);
    // Delays never exceed the unloaded path: nothing queues.
    assert_eq!(r.delay_max_ps, r.delay_min_ps);
}

#[test]
fn seed_moves_flow_start_jitter() {
    let text = one_switch(
        "",
        r#"
[[flow]]
name = "j"
src = "h1"
dst = "h2"
size = 1500
jitter = "10us"
"#,
    );
    let s1 = build(&text, Some(1)).flows().flows[0].start_ps;
    let s1b = build(&text, Some(1)).flows().flows[0].start_ps;
    let s2 = build(&text, Some(2)).flows().flows[0].start_ps;
    assert_eq!(s1, s1b);
    assert_ne!(s1, s2);
    assert!(s1 <= 10 * US && s2 <= 10 * US);
}

#[test]
fn config_errors_name_file_and_key() {
    let bad = |flows: &str| {
        let t = Topology::parse(&one_switch("", flows), Path::new("bad.toml")).unwrap();
        match Fabric::new(&t, &FabricOptions::default()) {
            Err(dataplane::fabric::FabricError::Config(e)) => e,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted: {flows}"),
        }
    };
    let e = bad("[[flow]]\nsrc = \"h9\"\ndst = \"h2\"\nsize = 1000\n");
    assert_eq!(
        (e.file.as_str(), e.key.as_str()),
        ("bad.toml", "flow[0].src")
    );
    let e = bad("[[flow]]\nsrc = \"h1\"\ndst = \"h2\"\n");
    assert_eq!(e.key, "flow[0].size");
    assert!(e.reason.contains("endless"), "{e}");
    // h2 has no gateway and 10.0.9.1 is not in its subnet.
    let e = bad("[[flow]]\nsrc = \"h2\"\ndst = \"h3\"\nsize = 1000\n");
    assert_eq!(e.key, "flow[0].dst");
    let e = bad("[sim]\nprobe_interval = \"1us\"\nprobe = [{ switch = \"s1\", port = \"p1\", counter = \"depth\" }]\n");
    assert_eq!(e.key, "sim.probe[0].counter");
    let e = Topology::parse(
        &one_switch("", "[[flow]]\nsrc = \"h1\"\ndst = \"h2\"\nspeed = 3\n"),
        Path::new("bad.toml"),
    )
    .unwrap_err();
    assert_eq!(e.key, "speed");
}

/// A host model other than the built-in one: sends a burst of 10 frames at start with its own
/// template (the interface a later workload emulator uses).
struct Burst {
    tmpl: FrameTemplate,
}

impl HostModel for Burst {
    fn start(&mut self, ctx: &mut HostCtx<'_>) {
        ctx.set_timer(5 * US, 0);
    }
    fn on_timer(&mut self, ctx: &mut HostCtx<'_>, _token: u64) {
        for seq in 0..10 {
            let f = ctx.mem.alloc().unwrap();
            let tmpl = self.tmpl;
            let now = ctx.now;
            ctx.mem.with_mut(f, |d| {
                let off = tmpl.emit_headers(d, 200);
                DataHeader {
                    flow: 0,
                    seq,
                    sent_ps: now,
                }
                .emit(&mut d[off..]);
            });
            assert!(ctx.send(f, 200));
        }
    }
    fn on_receive(&mut self, ctx: &mut HostCtx<'_>, frame: FrameId, _len: u32) {
        ctx.mem.free(frame);
    }
}

#[test]
fn custom_host_models_plug_in() {
    // Flow 0 is declared (so the sink has a record) but h1 runs a custom model instead.
    let text = one_switch(
        "",
        "[[flow]]\nname = \"burst\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 2000\n",
    );
    let mut f = build(&text, None);
    let (h1, h2) = (f.hosts()[0].info.clone(), f.hosts()[1].info.clone());
    let tmpl = FrameTemplate {
        src_mac: h1.mac,
        dst_mac: h2.mac,
        src_ip: h1.ip,
        dst_ip: h2.ip,
        sport: 1,
        dport: 2,
        prio: 1,
        vlan: true,
        ecn: false,
    };
    assert!(f.set_host_model("h1", Box::new(Burst { tmpl })));
    let sw = f.nodes()[0].shared().clone();
    f.add_probe(
        "q1",
        ProbeTarget::Queue {
            shared: sw,
            port: 1,
            queue: 1,
            counter: QueueCounter::EnqPkts,
        },
    );
    f.set_probe_interval(US);
    f.run();
    let r = f.flows().by_name("burst").unwrap();
    assert_eq!(r.rx_pkts, 10);
    assert_eq!(r.delay_min_ps, 2 * (ser_ps(200, 100 * GBIT) + US));
    // 10 back-to-back 200 B frames: the last waited for the nine before it on the NIC.
    assert_eq!(r.delay_max_ps, r.delay_min_ps + 9 * ser_ps(200, 100 * GBIT));
    // VLAN PCP 1 → queue 1 of the egress port.
    let q1 = f.probes().series("q1").unwrap();
    assert_eq!(q1.last().unwrap().1, 10);
}

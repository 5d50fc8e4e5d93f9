//! The host stack speaking BFC in virtual time (BFC §5: NICs that insert `upstreamQ` and
//! are paused per queue): a 4:1 incast of host stacks through a `scheme = "bfc"` switch at
//! 100 Gbit/s, with `[sim] honor_bfc` making every stack a BFC NIC. The switch pauses and
//! resumes single NIC queues of the senders, nothing is lost and every flow completes; the
//! same run with NICs that do not speak BFC overflows the switch.

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::host::report::{base_rtt_ps, merge};
use dataplane::host::{fabric::install, StackConfig};
use dataplane::workload::FlowSpec;
use dataplane::Topology;
use serde_json::Value;
use std::path::Path;

const G100: u64 = 100_000_000_000;

fn topology(honor_bfc: bool) -> Topology {
    let text = format!(
        r#"name = "incast-bfc"
[sim]
honor_bfc = {honor_bfc}
nic_bfc_queues = 8

[[switch]]
name = "s1"
scheme = "bfc"
defaults = {{ rate = "100Gbit", delay = "1us", queues = 8 }}
port = [{{ name = "p1" }}, {{ name = "p2" }}, {{ name = "p3" }}, {{ name = "p4" }}, {{ name = "p5" }}]
{hosts}"#,
        hosts = (1..=5)
            .map(|i| {
                let name = if i == 5 { "rx".into() } else { format!("h{i}") };
                format!(
                    "[[host]]\nname = \"{name}\"\nip = \"10.0.0.{i}/24\"\n\
                     [[link]]\na = \"{name}\"\nb = \"s1:p{i}\"\n"
                )
            })
            .collect::<String>()
    );
    Topology::parse(&text, Path::new("incast-bfc.toml")).unwrap()
}

/// Two 2 MB flows from each of h1..h4 (host indices 0..3) to rx (4), 1 µs apart.
fn schedule() -> Vec<FlowSpec> {
    (0..8)
        .map(|i| FlowSpec {
            id: i,
            src: i % 4,
            dst: 4,
            size: 2_000_000,
            start_ps: 1_000_000 + u64::from(i) * 1_000_000,
            prio: 3,
        })
        .collect()
}

type Stacks = Vec<std::rc::Rc<std::cell::RefCell<dataplane::host::HostStack>>>;

fn run(honor_bfc: bool, until_ps: u64) -> (Fabric, Stacks, u64) {
    let mut fab = Fabric::new(&topology(honor_bfc), &FabricOptions::default()).unwrap();
    let mss = StackConfig::new(0, G100, 0).mss;
    let rtt = base_rtt_ps(&[(G100, 1_000_000), (G100, 1_000_000)], mss);
    let stacks = install(&mut fab, &schedule(), |i| {
        let mut c = StackConfig::new(0, i.nic_rate_bps, rtt);
        // The window never limits: only the switch's backpressure holds the senders.
        c.window_bytes = 4_000_000;
        c.rto_ps = 10_000_000_000;
        c
    });
    fab.run_until(until_ps);
    (fab, stacks, rtt)
}

fn drops(fab: &Fabric) -> u64 {
    fab.report()
        .switches
        .iter()
        .flat_map(|s| &s.ports)
        .map(|p| p.drops.values().sum::<u64>())
        .sum()
}

fn sum(v: &Value) -> u64 {
    v.as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
}

#[test]
fn incast_of_bfc_stack_hosts_is_paused_per_queue_and_lossless() {
    let (fab, stacks, rtt) = run(true, 1_000_000_000_000);
    let stacks: Vec<_> = stacks.iter().map(|s| s.borrow()).collect();
    let mss = stacks[0].cfg.mss;
    // The stacks run BFC themselves; the fabric NICs are plain FIFOs.
    for (h, st) in fab.hosts().iter().zip(&stacks) {
        assert!(h.nic.bfc.is_none(), "{}: double queueing", h.info.name);
        assert_eq!(st.cfg.bfc_queues, 8);
    }
    let tx: Vec<_> = stacks.iter().flat_map(|s| s.tx_records()).collect();
    let rx: Vec<_> = stacks.iter().flat_map(|s| s.rx_records()).collect();
    let flows = merge(&tx, &rx, mss, G100, rtt);
    assert_eq!(flows.len(), 8);
    let sw = fab.switch("s1").unwrap();
    let bfc = serde_json::to_value(sw.scheme_stats(fab.now()).unwrap().bfc.unwrap()).unwrap();
    let snap = &fab.report().switches[0];
    let peak = snap.ports[4]
        .queues
        .iter()
        .map(|q| q.watermark_bytes)
        .max()
        .unwrap();
    let last = flows.iter().filter_map(|f| f.fct_ps).max().unwrap();
    let bytes: u64 = schedule().iter().map(|f| f.size).sum();
    println!(
        "4:1 incast, 8 x 2 MB, BFC NICs with 8 queues: all done at {:.1} us ({:.1} Gbit/s of \
         goodput), peak queue at rx's port {} B, switch drops {}",
        last as f64 / 1e6,
        bytes as f64 * 8.0 / (last as f64 / 1e12) / 1e9,
        peak,
        drops(&fab)
    );
    for f in &flows {
        println!(
            "flow {} from h{}: fct {:.1} us, slowdown {:.2}, lost {}, retx {}",
            f.id,
            f.src + 1,
            f.fct_ps.unwrap_or(0) as f64 / 1e6,
            f.slowdown.unwrap_or(0.0),
            f.lost,
            f.retx
        );
        assert!(f.completed, "{f:?}");
        assert_eq!((f.lost, f.retx, f.duplicates), (0, 0, 0), "{f:?}");
    }
    assert_eq!(drops(&fab), 0);
    for (i, st) in stacks.iter().take(4).enumerate() {
        let c = st.counters;
        let pauses = &bfc["ports"][i]["pauses_sent"];
        println!(
            "h{}: signals_rx {}, pauses_rx {}, resumes_rx {}; s1:p{} paused its NIC queues {}",
            i + 1,
            c.signals_rx,
            c.pauses_rx,
            c.resumes_rx,
            i + 1,
            pauses
        );
        // The switch's pauses reached the host, which honoured them per NIC queue: both of
        // its flows (in NIC queues 0 and 1) were paused, each on its own.
        assert!(c.pauses_rx > 0 && c.resumes_rx > 0, "h{}: {c:?}", i + 1);
        assert_eq!(c.pauses_rx, sum(pauses), "h{}", i + 1);
        assert!(pauses["0"].as_u64().unwrap_or(0) > 0 && pauses["1"].as_u64().unwrap_or(0) > 0);
        assert_eq!(st.bfc().unwrap().paused, 0, "resumed at the end");
    }
    // The receiver's port holds about a threshold per active queue, not the senders' windows.
    assert!(peak < 200_000, "peak {peak}");

    // Control: the same incast with NICs that do not speak BFC overflows the switch.
    let (fab, stacks, _) = run(false, 5_000_000_000);
    let d = drops(&fab);
    println!(
        "without BFC NICs: switch drops {d}, host pauses_rx {}",
        stacks
            .iter()
            .map(|s| s.borrow().counters.pauses_rx)
            .sum::<u64>()
    );
    assert!(d > 0);
}

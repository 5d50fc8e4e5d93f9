//! A switch runs a list of schemes: BFC with PFC beside it as the fallback (as the BFC paper
//! keeps it). A BFC pause stops one queue of a port; a PFC pause stops the whole priority,
//! which under BFC's dynamic queue assignment is every data queue; lifting one never lifts
//! the other. Both arrive as real frames through `Switch::receive`.

use dataplane::frame::HeapMem;
use dataplane::scheme::{pfc::emit_pfc, Scheme};
use dataplane::switch::Outputs;
use dataplane::{Switch, Topology};
use flowctl::wire::pfc::PfcRepr;
use flowctl::wire::signal::{Signal, SignalRepr, DST_SIGNAL};
use std::path::Path;

const TOPO: &str = r#"
[[switch]]
name = "s1"
scheme = "bfc"
defaults = { rate = "100Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }]
pfc = { enable_mask = 8 }
buffer = { buffer_bytes = 4000000 }
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
"#;

fn receive(sw: &mut Switch, mem: &mut HeapMem, port: u16, bytes: &[u8], now: u64) {
    let f = mem.alloc_with(bytes).expect("frame");
    let mut out = Outputs::new();
    sw.receive(mem, port, f, bytes.len() as u32, now, &mut out);
}

fn signal(s: Signal) -> Vec<u8> {
    let r = SignalRepr {
        dst_addr: DST_SIGNAL,
        src_addr: [2, 0, 0, 0, 0, 9],
        signal: s,
    };
    let mut b = vec![0u8; 128];
    let n = r.emit_into(&mut b);
    b.truncate(n);
    b
}

fn pfc(quanta3: u16) -> Vec<u8> {
    let mut quanta = [0u16; 8];
    quanta[3] = quanta3;
    let r = PfcRepr {
        src_addr: [2, 0, 0, 0, 0, 9],
        class_enable: 1 << 3,
        quanta,
    };
    let mut b = vec![0u8; 128];
    let n = emit_pfc(&r, &mut b);
    b.truncate(n);
    b
}

#[test]
fn bfc_pauses_one_queue_pfc_pauses_the_priority() {
    let t = Topology::parse(TOPO, Path::new("schemes.toml")).unwrap();
    let mut sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
    let kinds: Vec<&str> = sw
        .schemes()
        .list()
        .iter()
        .map(|s| match s {
            Scheme::Bfc(_) => "bfc",
            Scheme::Pfc(_) => "pfc",
            Scheme::Pyrrha(_) => "pyrrha",
            Scheme::Aquarius(_) => "aquarius",
            Scheme::Proteus(_) => "proteus",
            Scheme::Conga(_) => "conga",
        })
        .collect();
    assert_eq!(kinds, ["bfc", "pfc"]);
    let mut mem = HeapMem::new(64, 2048);
    let free = mem.available();
    let regs = |sw: &Switch, now| sw.shared.afc.port(1).paused_mask(now);

    // The downstream of p2 pauses its queue 5: only that queue stops.
    receive(&mut sw, &mut mem, 1, &signal(Signal::Pause(5)), 0);
    assert_eq!(regs(&sw, 1), 1 << 5);
    // PFC XOFF for priority 3 on the same link: every data queue stops (BFC may have put the
    // priority's flows in any of them), for 0xFFFF quanta.
    receive(&mut sw, &mut mem, 1, &pfc(0xFFFF), 10);
    assert_eq!(regs(&sw, 11), 0xFF);
    // PFC XON lifts the link-level pause, not BFC's.
    receive(&mut sw, &mut mem, 1, &pfc(0), 20);
    assert_eq!(regs(&sw, 21), 1 << 5);
    // BFC's RESUME lifts its own.
    receive(&mut sw, &mut mem, 1, &signal(Signal::Resume(5)), 30);
    assert_eq!(regs(&sw, 31), 0);
    // p1 never saw any of it; every control frame was consumed and its chunk returned.
    assert_eq!(sw.shared.afc.port(0).paused_mask(31), 0);
    assert_eq!(mem.available(), free);
    // Every pause and resume went through the AFC unit: 1 + 8 + 8 + 1 commands.
    assert_eq!(sw.shared.afc.applied(), 18);
    let st = sw.scheme_stats(40).unwrap();
    assert_eq!(st.bfc.unwrap().ports[1].pauses_received["5"], 1);
    let p = st.pfc.unwrap();
    let prio3 = p.ports[1].iter().find(|c| c.prio == 3).unwrap();
    assert_eq!((prio3.xoff_received, prio3.xon_received), (1, 1));
}

#[test]
fn a_pfc_pause_without_bfc_stops_only_the_priority_queue() {
    let text = TOPO.replace("scheme = \"bfc\"\n", "");
    let t = Topology::parse(&text, Path::new("schemes.toml")).unwrap();
    let mut sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
    assert_eq!(sw.schemes().list().len(), 1);
    let mut mem = HeapMem::new(64, 2048);
    receive(&mut sw, &mut mem, 1, &pfc(0xFFFF), 0);
    let q = sw.shared.spec.ports[1].prio_map[3];
    assert_eq!(sw.shared.afc.port(1).paused_mask(1), 1 << q);
    // Without BFC, an Xoff signal frame is nobody's: counted and dropped.
    receive(&mut sw, &mut mem, 1, &signal(Signal::Pause(5)), 2);
    assert_eq!(sw.shared.afc.port(1).paused_mask(3), 1 << q);
    let drops = &sw.shared.counters[1].drops;
    let mac_control = dataplane::stats::DropReason::MacControl.index();
    assert_eq!(drops[mac_control].get(), 1);
}

#[test]
fn a_pfc_xon_wakes_the_port_it_resumes() {
    // An event-driven caller (the virtual-time fabric) services only ports reported as having
    // work: an XON must report its port, or a paused queue would wait for its 0xFFFF-quanta
    // pause to lapse (335 us at 100 Gbit/s) instead of resuming at once.
    let text = TOPO.replace("scheme = \"bfc\"\n", "");
    let t = Topology::parse(&text, Path::new("schemes.toml")).unwrap();
    let mut sw = Switch::single(t.switch_spec("s1").unwrap(), 0).unwrap();
    let mut mem = HeapMem::new(64, 2048);
    let mut out = Outputs::tracking();
    let f = mem.alloc_with(&pfc(0xFFFF)).unwrap();
    sw.receive(&mut mem, 1, f, 60, 0, &mut out);
    assert!(out.touched.is_empty(), "an XOFF gives the port no work");
    let f = mem.alloc_with(&pfc(0)).unwrap();
    sw.receive(&mut mem, 1, f, 60, 10, &mut out);
    assert_eq!(out.touched, [1]);
}

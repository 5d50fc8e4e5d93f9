//! PFC in virtual time at paper scale: an N-to-1 incast through two 100 Gbit/s switches.
//!
//! `s1` has N/2 senders and an uplink to `s2`; `s2` has the other N/2 senders and the
//! receiver. The receiver's port is the bottleneck: `s2` pauses its own senders and the
//! inter-switch link, `s1`'s uplink queue then backs up and `s1` pauses its senders in turn.
//! 2 µs links, 16 MiB buffers, lossless priorities 3 and 4, no software response term
//! (virtual time has no poll latency), so `η` is exactly DSH Eq. (1): 56 840 B.
//!
//! What must hold (with PFC honoured by switches and host NICs): zero loss for SIH and DSH,
//! PFC frames on switch→switch and switch→host links, the counters of the two ends of the
//! inter-switch link agree, and what an upstream sent after being paused never exceeds `η`.
//! Without PFC the same traffic drops.

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use mmu::config::HeadroomMode;
use mmu::MmuConfig;
use std::fmt::Write;
use std::path::Path;

/// Bytes each sender sends.
const FLOW_BYTES: u64 = 4_000_000;
const PRIO: usize = 3;

fn incast(n: usize, mode: HeadroomMode, pfc: bool) -> Topology {
    let half = n / 2;
    let pfc_line = if pfc {
        "pfc = { enable_mask = 24 }\n"
    } else {
        ""
    };
    let mut s = format!(
        "name = \"incast-{n}\"\n[sim]\nseed = 1\nhonor_pfc = {pfc}\n\
         [[switch]]\nname = \"s1\"\n\
         defaults = {{ rate = \"100Gbit\", delay = \"2us\", queues = 8 }}\n{pfc_line}port = [{{ name = \"up\" }}"
    );
    for i in 0..half {
        let _ = write!(s, ", {{ name = \"h{i}\" }}");
    }
    let _ = write!(
        s,
        "]\n[[switch]]\nname = \"s2\"\n\
         defaults = {{ rate = \"100Gbit\", delay = \"2us\", queues = 8 }}\n{pfc_line}\
         port = [{{ name = \"up\" }}, {{ name = \"rx\" }}"
    );
    for i in half..n {
        let _ = write!(s, ", {{ name = \"h{i}\" }}");
    }
    s.push_str("]\n[[link]]\na = \"s1:up\"\nb = \"s2:up\"\n");
    s.push_str(
        "[[host]]\nname = \"rx\"\nip = \"10.0.0.200/24\"\n[[link]]\na = \"rx\"\nb = \"s2:rx\"\n",
    );
    for i in 0..n {
        let sw = if i < half { "s1" } else { "s2" };
        let _ = write!(
            s,
            "[[host]]\nname = \"h{i}\"\nip = \"10.0.0.{}/24\"\n[[link]]\na = \"h{i}\"\nb = \"{sw}:h{i}\"\n\
             [[flow]]\nname = \"f{i}\"\nsrc = \"h{i}\"\ndst = \"rx\"\nprio = {PRIO}\nsize = {FLOW_BYTES}\n",
            i + 1
        );
    }
    let mut t = Topology::parse(&s, Path::new("incast.toml")).unwrap();
    for sw in &mut t.switches {
        sw.buffer = Some(
            MmuConfig {
                headroom_mode: mode,
                response_ps: 0,
                ..MmuConfig::default()
            }
            .into(),
        );
    }
    t
}

fn run(n: usize, mode: HeadroomMode, pfc: bool) -> Fabric {
    let t = incast(n, mode, pfc);
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    f.run();
    f
}

/// PFC counter `key` of (switch, port name), priority `PRIO`.
fn pfc_counter(f: &Fabric, sw: &str, port: &str, key: &str) -> u64 {
    let s = f.switch(sw).unwrap();
    let p = s
        .shared
        .spec
        .ports
        .iter()
        .position(|x| x.name == port)
        .unwrap();
    let st = s.scheme_stats(f.now()).unwrap().pfc.unwrap();
    st.ports[p]
        .iter()
        .find(|c| c.prio == PRIO)
        .map_or(0, |c| match key {
            "xoff_sent" => c.xoff_sent,
            "xon_sent" => c.xon_sent,
            "xoff_received" => c.xoff_received,
            "xon_received" => c.xon_received,
            k => panic!("no PFC counter {k}"),
        })
}

fn host_ports(f: &Fabric, sw: &str) -> Vec<String> {
    f.switch(sw)
        .unwrap()
        .shared
        .spec
        .ports
        .iter()
        .map(|p| p.name.clone())
        .filter(|n| n.starts_with('h'))
        .collect()
}

/// Per switch: the largest post-XOFF arrival of any (port, PG) and the largest headroom /
/// insurance occupancy, against that port's `η` (all in cells). Returns the worst ratio.
fn headroom_check(f: &Fabric, log: &mut String) -> f64 {
    let mut worst = 0.0f64;
    for sw in ["s1", "s2"] {
        let m = f.switch(sw).unwrap().buffer().mmu().unwrap();
        let st = m.stats();
        let table = m.headroom_table();
        for (p, row) in table.iter().enumerate() {
            assert_eq!(row.eta_formula_bytes, 56_840, "DSH Eq. (1) at 100G, 2 µs");
            assert_eq!(row.response_bytes, 0);
            let eta = f64::from(row.eta_cells);
            let pg = &st.pgs[p * 8 + PRIO];
            let port = &st.ports[p];
            let peak = pg
                .absorbed_peak
                .max(pg.headroom_peak)
                .max(port.insurance_peak);
            if pg.xoff + port.port_xoff > 0 {
                let _ = writeln!(
                    log,
                    "  {sw} port {p}: xoff {} port_xoff {}, after XOFF {} cells, headroom peak {} \
                     cells, insurance peak {} cells, η {} cells ({} B)",
                    pg.xoff,
                    port.port_xoff,
                    pg.absorbed_peak,
                    pg.headroom_peak,
                    port.insurance_peak,
                    row.eta_cells,
                    row.eta_bytes
                );
            }
            worst = worst.max(f64::from(peak) / eta);
        }
    }
    worst
}

fn lossless_drops(f: &Fabric) -> u64 {
    ["s1", "s2"]
        .iter()
        .map(|s| {
            let m = f.switch(s).unwrap().buffer().mmu().unwrap();
            m.stats().counters.drops.lossless()
        })
        .sum()
}

/// N-to-1 incast through two switches, N = 8 and 16, SIH and DSH: lossless, PFC on both hops,
/// consistent counters on the inter-switch link, post-pause arrivals within `η`.
#[test]
fn two_switch_incast_is_lossless_with_pfc_within_headroom() {
    let mut log = String::new();
    for n in [8, 16] {
        for mode in [HeadroomMode::Sih, HeadroomMode::Dsh] {
            let f = run(n, mode, true);
            let _ = writeln!(log, "N = {n}, {mode:?}: end {} us", f.now() / 1_000_000);
            let flows = &f.flows().flows;
            let lost: u64 = flows.iter().map(|r| r.lost()).sum();
            assert_eq!(lost, 0, "N={n} {mode:?}: lost packets");
            assert_eq!(lossless_drops(&f), 0, "N={n} {mode:?}");
            for r in flows {
                assert_eq!(r.rx_bytes, FLOW_BYTES, "{}", r.name);
                assert!(r.completed_ps.is_some(), "{}", r.name);
            }
            for sw in ["s1", "s2"] {
                let s = f.switch(sw).unwrap();
                for (i, c) in s.shared.counters.iter().enumerate() {
                    let d: u64 = c.queues.iter().map(|q| q.drops.get()).sum();
                    assert_eq!(d, 0, "{sw} port {i} dropped");
                }
            }

            // Switch → switch: s2 pauses the inter-switch link, s1 receives exactly that.
            let s2_up_xoff = pfc_counter(&f, "s2", "up", "xoff_sent");
            let s2_up_xon = pfc_counter(&f, "s2", "up", "xon_sent");
            assert!(s2_up_xoff > 0, "N={n} {mode:?}: s2 never paused s1");
            assert_eq!(s2_up_xoff, pfc_counter(&f, "s1", "up", "xoff_received"));
            assert_eq!(s2_up_xon, pfc_counter(&f, "s1", "up", "xon_received"));
            assert_eq!(
                pfc_counter(&f, "s1", "up", "xoff_sent"),
                pfc_counter(&f, "s2", "up", "xoff_received")
            );
            // Switch → host on both switches; the NICs got every frame their port sent.
            for sw in ["s1", "s2"] {
                let mut sent = 0;
                for p in host_ports(&f, sw) {
                    let x = pfc_counter(&f, sw, &p, "xoff_sent");
                    let y = pfc_counter(&f, sw, &p, "xon_sent");
                    let nic = &f.hosts().iter().find(|h| h.info.name == p).unwrap().nic;
                    assert_eq!(nic.pfc_rx, x + y, "{sw}:{p}");
                    sent += x;
                }
                assert!(sent > 0, "N={n} {mode:?}: {sw} never paused a host");
                let _ = writeln!(
                    log,
                    "  {sw}: PFC XOFF frames to hosts {sent}; inter-switch XOFF {s2_up_xoff} XON {s2_up_xon}"
                );
            }
            let worst = headroom_check(&f, &mut log);
            let _ = writeln!(log, "  worst post-pause arrival / η = {worst:.3}");
            assert!(worst <= 1.0, "N={n} {mode:?}: exceeded η\n{log}");
            assert!(
                worst > 0.5,
                "N={n} {mode:?}: pauses absorbed nothing?\n{log}"
            );
        }
    }
    println!("{log}");
}

/// The same incast without PFC (no `pfc` table, NICs not honouring): lossless traffic
/// overruns its headroom and drops, which is what the run above shows PFC prevents.
#[test]
fn two_switch_incast_without_pfc_drops() {
    let mut log = String::new();
    for n in [8, 16] {
        for mode in [HeadroomMode::Sih, HeadroomMode::Dsh] {
            let f = run(n, mode, false);
            let lost: u64 = f.flows().flows.iter().map(|r| r.lost()).sum();
            let drops = lossless_drops(&f);
            let frames: u64 = f.hosts().iter().map(|h| h.nic.pfc_rx).sum();
            let worst = headroom_check(&f, &mut log);
            let _ = writeln!(
                log,
                "N = {n}, {mode:?} without PFC: lost {lost}, lossless drops {drops}, \
                 worst post-XOFF arrival / η = {worst:.2}"
            );
            assert!(
                lost > 0 && drops > 0,
                "N={n} {mode:?}: no drops without PFC"
            );
            assert_eq!(lost, drops, "every loss is an MMU lossless drop");
            assert_eq!(frames, 0);
            assert!(
                worst > 1.0,
                "N={n} {mode:?}: the headroom check cannot fail?"
            );
        }
    }
    println!("{log}");
}

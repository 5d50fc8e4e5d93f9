//! CONGA in virtual time (issue 18's baseline, `loadbal::conga`, `dataplane::scheme::conga`):
//! two leaves, two spines, 40 Gbit/s, every switch `lb = "conga"`. Transport: the fabric's
//! constant-rate UDP flows.
//!
//! - New flowlets avoid an uplink that other traffic loads (CONGA §3.4: the uplink with the
//!   smaller max(local DRE, remote metric)).
//! - A PFC-paused uplink carries nothing, so its DRE decays and CONGA takes it for new
//!   flowlets: the Proteus paper's §II-B.1 point ("a path with low link utilization due to PFC
//!   pausing ... may be misinterpreted as a good path").

use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::scheme::conga::FlowletChoice;
use dataplane::Topology;
use std::fmt::Write;
use std::path::Path;

/// Leaves L1 (hosts a1..a4, 10.0.1.0/24) and L2 (b1..b4), and with `third` L3 (c1..c4),
/// spines C1, C2, 40 Gbit/s, 1 µs links; `pfc`: PFC on priority 3 with a 1 MB buffer at every
/// switch; `flows`: the `[[flow]]` tables.
fn topology(pfc: bool, third: bool, flows: &str) -> String {
    let buf = if pfc {
        "buffer = { buffer_bytes = 1000000, headroom_mode = \"dsh\", response_ps = 0 }\n\
         pfc = { enable_mask = 8 }\n"
    } else {
        ""
    };
    let leaves: &[(&str, u8, &str)] = if third {
        &[("L1", 1, "a"), ("L2", 2, "b"), ("L3", 3, "c")]
    } else {
        &[("L1", 1, "a"), ("L2", 2, "b")]
    };
    let mut t = format!("name = \"conga-test\"\n[sim]\nseed = 3\nhonor_pfc = {pfc}\n");
    for &(leaf, subnet, hosts) in leaves {
        let _ = write!(
            t,
            "[[switch]]\nname = \"{leaf}\"\nlb = \"conga\"\n\
             defaults = {{ rate = \"40Gbit\", delay = \"1us\", queues = 8 }}\n\
             port = [{{ name = \"h1\" }}, {{ name = \"h2\" }}, {{ name = \"h3\" }}, \
             {{ name = \"h4\" }}, {{ name = \"up1\" }}, {{ name = \"up2\" }}]\n{buf}"
        );
        for h in 1..=4 {
            let _ = write!(
                t,
                "[[switch.route]]\nprefix = \"10.0.{subnet}.{h}/32\"\nvia = [\"h{h}\"]\n"
            );
        }
        for &(_, other, _) in leaves.iter().filter(|l| l.1 != subnet) {
            let _ = write!(
                t,
                "[[switch.route]]\nprefix = \"10.0.{other}.0/24\"\nvia = [\"up1\", \"up2\"]\n"
            );
        }
        for h in 1..=4 {
            let _ = write!(
                t,
                "[[host]]\nname = \"{hosts}{h}\"\nip = \"10.0.{subnet}.{h}/24\"\n\
                 gateway = \"10.0.{subnet}.254\"\n[[link]]\na = \"{hosts}{h}\"\nb = \"{leaf}:h{h}\"\n"
            );
        }
    }
    for (i, c) in ["C1", "C2"].iter().enumerate() {
        let ports: Vec<String> = leaves
            .iter()
            .map(|l| format!("{{ name = \"l{}\" }}", l.1))
            .collect();
        let _ = write!(
            t,
            "[[switch]]\nname = \"{c}\"\nlb = \"conga\"\n\
             defaults = {{ rate = \"40Gbit\", delay = \"1us\", queues = 8 }}\n\
             port = [{}]\n{buf}",
            ports.join(", ")
        );
        for &(leaf, subnet, _) in leaves {
            let _ = write!(
                t,
                "[[switch.route]]\nprefix = \"10.0.{subnet}.0/24\"\nvia = [\"l{subnet}\"]\n\
                 [[link]]\na = \"{leaf}:up{n}\"\nb = \"{c}:l{subnet}\"\n",
                n = i + 1
            );
        }
    }
    t + flows
}

/// Runs `text` to its end; L1's new-flowlet decisions.
fn run(text: &str) -> (Fabric, Vec<FlowletChoice>) {
    let t = Topology::parse(text, Path::new("conga-test.toml")).unwrap();
    let mut f = Fabric::new(&t, &FabricOptions::default()).unwrap();
    f.run();
    let now = f.now();
    let c = f
        .switch("L1")
        .unwrap()
        .scheme_stats(now)
        .and_then(|s| s.conga)
        .expect("L1 runs CONGA");
    (f, c.choices)
}

/// A 30 Gbit/s flow holds one uplink from t = 0; a probe sends 20 µs line-rate bursts every
/// 220 µs (gaps above T_fl = 125 µs at 40 Gbit/s), so each burst is a new flowlet: every one
/// must take the other uplink.
#[test]
fn new_flowlets_avoid_the_loaded_uplink() {
    let text = topology(
        false,
        false,
        "[[flow]]\nname = \"load\"\nsrc = \"a1\"\ndst = \"b1\"\nprio = 3\nrate = \"30Gbit\"\n\
         stop = \"1500us\"\nsport = 1000\n\
         [[flow]]\nname = \"probe\"\nsrc = \"a2\"\ndst = \"b2\"\nprio = 3\nstart = \"100us\"\n\
         stop = \"1500us\"\npattern = \"onoff\"\non = \"20us\"\noff = \"200us\"\nsport = 2000\n",
    );
    let (f, choices) = run(&text);
    let load: Vec<_> = choices.iter().filter(|c| c.sport == 1000).collect();
    assert_eq!(load.len(), 1, "one flowlet for a gapless flow: {load:?}");
    let busy = load[0].uplink;
    let probes: Vec<_> = choices.iter().filter(|c| c.sport == 2000).collect();
    assert!(probes.len() >= 5, "a flowlet per burst: {probes:?}");
    for p in &probes {
        assert_ne!(p.uplink, busy, "{p:?}");
        // Why: the loaded uplink's local DRE is high (30/40 of C·τ → 6 of 7), the other's low.
        assert!(p.local[usize::from(busy)] >= 5, "{p:?}");
    }
    let report = f.report();
    assert!(report.flows.iter().all(|r| r.lost == 0));
    // A flowlet switches paths only after a gap: nothing is reordered.
    assert!(report.flows.iter().all(|r| r.reordered == 0));
}

/// Three line-rate senders into b1 (two under L2, one from L1): b1's port backs up, L2 pauses
/// its ingress ports, the spine carrying the L1 flow pauses toward L2 and the pause reaches
/// L1's uplink to it. That uplink then sends only what b1's third of 40 Gbit/s lets through,
/// so its DRE reads low, while the other uplink carries a 25 Gbit/s flow (started 20 µs
/// later, so CONGA put it on the other uplink) and reads busier: the probe's new flowlets go
/// to the paused uplink. CONGA does not avoid the paused path.
#[test]
fn a_pfc_paused_uplink_looks_idle_and_new_flowlets_take_it() {
    let text = topology(
        true,
        false,
        "[[flow]]\nname = \"victim-maker\"\nsrc = \"a1\"\ndst = \"b1\"\nprio = 3\n\
         stop = \"1500us\"\nsport = 1000\n\
         [[flow]]\nname = \"bg\"\nsrc = \"a3\"\ndst = \"b3\"\nprio = 3\nrate = \"25Gbit\"\n\
         start = \"20us\"\nstop = \"1500us\"\nsport = 3000\n\
         [[flow]]\nname = \"i2\"\nsrc = \"b2\"\ndst = \"b1\"\nprio = 3\nstop = \"1500us\"\n\
         sport = 4000\n\
         [[flow]]\nname = \"i4\"\nsrc = \"b4\"\ndst = \"b1\"\nprio = 3\nstop = \"1500us\"\n\
         sport = 4001\n\
         [[flow]]\nname = \"probe\"\nsrc = \"a2\"\ndst = \"b2\"\nprio = 3\nstart = \"100us\"\n\
         stop = \"1500us\"\npattern = \"onoff\"\non = \"20us\"\noff = \"200us\"\nsport = 2000\n",
    );
    let (_, choices) = run(&text);
    let probes: Vec<_> = choices.iter().filter(|c| c.sport == 2000).collect();
    let during: Vec<_> = probes
        .iter()
        .filter(|c| c.paused.iter().filter(|&&p| p).count() == 1)
        .collect();
    assert!(
        during.len() >= 2,
        "probe flowlets while one uplink is paused: {probes:#?}"
    );
    let into_pause = during
        .iter()
        .filter(|c| c.paused[usize::from(c.uplink)])
        .count();
    assert!(
        into_pause * 2 > during.len(),
        "CONGA took the paused uplink for most new flowlets: {during:#?}"
    );
    for c in during {
        let p = c.paused.iter().position(|&p| p).unwrap();
        assert!(
            c.local[p] <= c.local[1 - p],
            "the paused uplink reads idle: {c:?}"
        );
    }
}

/// Congestion L1 cannot see locally: L3 sends 38 Gbit/s to b1 through C1 only (its route to
/// L2 has just up1), so C1's link to L2 is nearly full while L1's own uplinks stay idle. The
/// probe's flowlets from L1 to L2 carry CE = C1→L2's DRE when they cross C1; L2 stores it
/// and feeds it back on b2's ACK stream; from then on L1 reads uplink 1 (to C1) as congested
/// through Congestion-To-Leaf alone and new flowlets take uplink 2 (CONGA §3.2–3.4: global,
/// leaf-to-leaf congestion awareness).
#[test]
fn remote_congestion_fed_back_steers_new_flowlets() {
    let text = topology(
        false,
        true,
        "[[flow]]\nname = \"load\"\nsrc = \"c1\"\ndst = \"b1\"\nprio = 3\nrate = \"38Gbit\"\n\
         stop = \"1500us\"\nsport = 1000\n\
         [[flow]]\nname = \"probe\"\nsrc = \"a2\"\ndst = \"b2\"\nprio = 3\nstart = \"50us\"\n\
         stop = \"1500us\"\npattern = \"onoff\"\non = \"20us\"\noff = \"200us\"\nsport = 2000\n\
         [[flow]]\nname = \"ack\"\nsrc = \"b2\"\ndst = \"a2\"\nprio = 6\nrate = \"1Gbit\"\n\
         pkt = 66\nstop = \"1500us\"\nsport = 5201\ndport = 2000\n",
    );
    // L3 reaches L2 by C1 only.
    let (head, l3) = text.split_at(text.find("name = \"L3\"").unwrap());
    let text = head.to_string()
        + &l3.replacen(
            "prefix = \"10.0.2.0/24\"\nvia = [\"up1\", \"up2\"]",
            "prefix = \"10.0.2.0/24\"\nvia = [\"up1\"]",
            1,
        );
    let (f, choices) = run(&text);
    let probes: Vec<_> = choices.iter().filter(|c| c.sport == 2000).collect();
    let informed: Vec<_> = probes.iter().filter(|c| c.remote[0] >= 5).collect();
    assert!(
        informed.len() >= 3,
        "L1 learned C1→L2's congestion from L2's feedback: {probes:#?}"
    );
    for c in &informed {
        assert_eq!(c.uplink, 1, "{c:?}");
        assert!(c.local[0] <= 1, "uplink 1 is idle locally: {c:?}");
    }
    let st = f
        .switch("L1")
        .unwrap()
        .scheme_stats(f.now())
        .and_then(|s| s.conga)
        .unwrap();
    assert!(st.feedback_applied > 0, "{st:?}");
}

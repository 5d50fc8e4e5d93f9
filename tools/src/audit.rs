//! `xoff testbed audit FILE`: the lossless audit of a whole testbed (issue 21 item 3). Every
//! switch's own audit (`dataplane::audit`, over its control socket), and every link between
//! two switches checked end to end from the switches' own counters: what one end put on its
//! transmit ring arrived at the other's receive ring or was dropped there by the kernel
//! (XDP_STATISTICS). Host ends are whatever the user runs (kernel stacks, iperf3), so their
//! ring losses are counted where they are known: `xoff experiment` adds those of its
//! `xoff host` ends to each cell's audit.

use anyhow::{Context, Result};
use dataplane::audit::Audit;
use dataplane::config::Peer;
use dataplane::ctl::{self, Request, Response};
use dataplane::stats::SwitchSnapshot;
use deploy::testbed::{socket_path, Testbed};
use serde::Serialize;
use std::fmt::Write;

/// One direction of a switch-to-switch link.
#[derive(Debug, Clone, Serialize)]
pub struct WireAudit {
    /// "s1:p3 -> s2:p1".
    pub link: String,
    pub sent: u64,
    pub received: u64,
    pub ring_lost: u64,
    /// `sent − received − ring_lost`: frames lost on the wire (0 when balanced; a veth
    /// loses none, so anything else is a counting error or frames in flight).
    pub wire_lost: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TestbedAudit {
    pub testbed: String,
    pub switches: Vec<Audit>,
    pub wires: Vec<WireAudit>,
    /// Every switch balances and every wire lost nothing.
    pub balanced: bool,
    pub lost: u64,
    pub lossless_lost: u64,
}

/// Audits every switch of `tb` that runs on this machine, then the links between them.
pub fn testbed(tb: &Testbed) -> Result<TestbedAudit> {
    let plan = tb.plan();
    let mut audits = Vec::new();
    let mut snaps: Vec<Option<SwitchSnapshot>> = Vec::new();
    for s in &tb.topo.switches {
        if !plan.nodes.contains(&s.name) {
            snaps.push(None);
            continue;
        }
        let sock = socket_path(&tb.name, &s.name);
        let ask = |r: &Request| {
            ctl::request(&sock, r)
                .with_context(|| format!("switch `{}` at {}", s.name, sock.display()))
        };
        match ask(&Request::Audit)? {
            Response::Audit(a) => audits.push(*a),
            other => anyhow::bail!("switch `{}`: unexpected answer {other:?}", s.name),
        }
        match ask(&Request::Stats)? {
            Response::Stats(st) => snaps.push(Some(*st)),
            other => anyhow::bail!("switch `{}`: unexpected answer {other:?}", s.name),
        }
    }
    let mut wires = Vec::new();
    for &i in &plan.veths {
        let (a, b) = tb.resolved.links[i];
        let (Peer::Port(sa, pa), Peer::Port(sb, pb)) = (a, b) else {
            continue;
        };
        let (Some(x), Some(y)) = (&snaps[sa as usize], &snaps[sb as usize]) else {
            continue;
        };
        for ((from, fp), (to, tp)) in [((x, pa), (y, pb)), ((y, pb), (x, pa))] {
            let (o, i) = (&from.ports[usize::from(fp)], &to.ports[usize::from(tp)]);
            let ring_lost = i.xdp.lost();
            wires.push(WireAudit {
                link: format!("{}:{} -> {}:{}", from.switch, o.name, to.switch, i.name),
                sent: o.tx_pkts,
                received: i.rx_pkts,
                ring_lost,
                wire_lost: o.tx_pkts as i64 - i.rx_pkts as i64 - ring_lost as i64,
            });
        }
    }
    let balanced = audits.iter().all(|a| a.balanced) && wires.iter().all(|w| w.wire_lost == 0);
    let wire_lost: u64 = wires.iter().map(|w| w.wire_lost.max(0) as u64).sum();
    Ok(TestbedAudit {
        testbed: tb.name.clone(),
        lost: audits.iter().map(|a| a.lost).sum::<u64>() + wire_lost,
        lossless_lost: audits.iter().map(|a| a.lossless_lost).sum(),
        switches: audits,
        wires,
        balanced,
    })
}

impl TestbedAudit {
    pub fn ok(&self) -> bool {
        self.balanced && self.lossless_lost == 0
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "testbed {}: {}; lost {}, lossless lost {}\n",
            self.testbed,
            if self.balanced {
                "balanced"
            } else {
                "NOT BALANCED"
            },
            self.lost,
            self.lossless_lost
        );
        for a in &self.switches {
            let _ = writeln!(s, "{}", a.table());
        }
        if !self.wires.is_empty() {
            let _ = writeln!(
                s,
                "{:<24} {:>10} {:>10} {:>9} {:>9}",
                "link", "sent", "received", "ring lost", "wire lost"
            );
            for w in &self.wires {
                let _ = writeln!(
                    s,
                    "{:<24} {:>10} {:>10} {:>9} {:>9}",
                    w.link, w.sent, w.received, w.ring_lost, w.wire_lost
                );
            }
        }
        s
    }
}

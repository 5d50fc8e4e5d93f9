//! The virtual-time runner (`mode = "virtual"`): one cell in the deterministic fabric with
//! the same host stack as `xoff host`, switch telemetry sampled by fabric probes in virtual
//! time.

use super::plan::{CellSetup, Plan};
use super::results::{flow_results, CellOut, CellResult, PortTimeline, Series};
use super::spec::Timing;
use anyhow::{anyhow, Result};
use dataplane::fabric::{Fabric, FabricOptions, FcCounter, PortCounter, ProbeTarget};
use dataplane::host::report::{RxRecord, TxRecord};
use dataplane::host::StackConfig;
use dataplane::units::{parse_size, parse_time};
use std::collections::BTreeMap;

/// Runs cell `c` of plan `p` in virtual time: the fabric of the cell's topology, every host's
/// stack with the cell's congestion control sending its schedule, until the traffic window
/// and the drain are over (or every flow is done).
pub(super) fn run(p: &Plan, c: &CellSetup) -> Result<CellOut> {
    let (exp, f) = (&p.exp, p.fname.as_str());
    let (rate, rtt) = (p.paths.rate, p.paths.rtt);
    let Timing {
        duration,
        drain,
        interval,
    } = p.timing;
    let window = match &exp.host.window {
        Some(w) => Some(
            parse_size(w)
                .map_err(|e| anyhow!("{f}: host.window: {e}"))?
                .max(1),
        ),
        None => None,
    };
    let ooo = match &exp.host.out_of_order {
        Some(o) => o
            .parse()
            .map_err(|e| anyhow!("{f}: host.out_of_order: {e}"))?,
        None => dataplane::host::OutOfOrder::default(),
    };
    let rto = match &exp.host.rto {
        Some(r) => Some(parse_time(r).map_err(|e| anyhow!("{f}: host.rto: {e}"))?),
        None => None,
    };
    let mut fab = Fabric::new(&c.topo, &FabricOptions::default())?;
    let stacks = dataplane::host::fabric::install(&mut fab, &c.sched, |i| {
        // Every NIC paces at `host.rate` if given, else at its own port's rate.
        let r = if exp.host.rate.is_some() {
            rate
        } else {
            i.nic_rate_bps
        };
        let mut s = StackConfig::new(i.index as u32, r, rtt);
        s.cc = c.cc;
        s.ack_prio = exp.host.ack_prio;
        s.mss = p.paths.mss;
        s.out_of_order = ooo;
        if let Some(w) = window {
            s.window_bytes = w;
        }
        if let Some(t) = rto {
            s.rto_ps = t;
        }
        s
    });
    // Telemetry of every switch port in virtual time: bytes queued (all queues, fullest
    // queue) and pause signals sent (PFC XOFF frames, BFC pauses).
    struct Cols {
        key: String,
        depth: usize,
        maxq: usize,
        pauses: Vec<usize>,
    }
    let mut targets = Vec::new();
    let mut cols = Vec::new();
    let base = fab.probes().names.len();
    for (si, n) in fab.nodes().iter().enumerate() {
        let sh = n.shared();
        for (pi, p) in sh.spec.ports.iter().enumerate() {
            let key = format!("{}:{}", n.name, p.name);
            let mut add = |what: &str, t: ProbeTarget| {
                targets.push((format!("{key}:{what}"), t));
                base + targets.len() - 1
            };
            let port = |counter| ProbeTarget::Port {
                shared: sh.clone(),
                port: pi,
                counter,
            };
            let fc = |counter| ProbeTarget::Fc {
                switch: si,
                port: pi,
                counter,
            };
            let depth = add("depth_bytes", port(PortCounter::DepthBytes));
            let maxq = add("max_queue_bytes", port(PortCounter::MaxQueueBytes));
            let mut pauses = Vec::new();
            if sh.spec.pfc.is_some() {
                pauses.push(add("pfc_xoff_sent", fc(FcCounter::PfcXoffSent)));
            }
            if sh.schemes.bfc.is_some() {
                pauses.push(add("bfc_pauses_sent", fc(FcCounter::BfcPausesSent)));
            }
            cols.push(Cols {
                key,
                depth,
                maxq,
                pauses,
            });
        }
    }
    fab.set_probe_interval(interval);
    for (name, t) in targets {
        fab.add_probe(name, t);
    }
    fab.run_until(duration + drain);
    let mut r = CellResult::default();
    let mut tx: Vec<TxRecord> = Vec::new();
    let mut rx: Vec<RxRecord> = Vec::new();
    for s in &stacks {
        let s = s.borrow();
        tx.extend(s.tx_records());
        rx.extend(s.rx_records());
        r.add_host(&s.counters);
    }
    let flows = flow_results(p, &tx, &rx);
    // Goodput over the virtual time the run took (it stops once every flow is done).
    r.set_flows(&flows, fab.now().clamp(1, duration + drain));
    // Final counters, with each switch's flow-control statistics (PFC, BFC).
    let report = fab.report();
    r.add_switches(&report.switches, false);
    for (n, snap) in fab.nodes().iter().zip(&report.switches) {
        r.audit.add(&n.shared().audit(snap), &n.shared().spec);
    }
    let pr = fab.probes();
    let w = pr.names.len();
    let mut series = Series {
        interval_ps: interval,
        t_ps: pr.times.clone(),
        ports: BTreeMap::new(),
    };
    for port in &cols {
        let col = |i: usize| -> Vec<u64> {
            (0..pr.times.len())
                .map(|row| pr.values[row * w + i])
                .collect()
        };
        let mut pauses = vec![0; pr.times.len()];
        for &i in &port.pauses {
            for (p, v) in pauses.iter_mut().zip(col(i)) {
                *p += v;
            }
        }
        series.ports.insert(
            port.key.clone(),
            PortTimeline {
                depth_bytes: col(port.depth),
                max_queue_bytes: col(port.maxq),
                pauses,
            },
        );
    }
    Ok((r, flows, series))
}

//! Pyrrha §6's incast-mix experiment (Fig. 11) in virtual time: the non-blocking Clos, the
//! workload, one run per flow-control scheme and the vulnerable-flow metrics. Shared by
//! `dataplane/tests/pyrrha_fidelity.rs` and `xoff repro pyrrha` (one definition, so the test
//! and the report run the same experiment).
//!
//! As the paper (§6 "Topology", "Workloads", "Parameters", and its ns-3 artefact
//! NASA-NJU/Pyrrha-NS3, `generate_load_poisson_fromcdf_incast` with `one_incast_dst`):
//!
//! * **Topology.** `tors` ToRs of `hosts_per_tor` hosts and `cores` cores (the paper: 10, 16,
//!   4), host links at `host_rate` and ToR–core links at `core_rate` (100 / 400 Gbit/s:
//!   non-blocking), 600 ns per hop, 20 MB shared buffers, `queues` data queues per port
//!   (32: BFC-32's count; Pyrrha's IQs are the queues no priority maps to).
//! * **Workload.** Poisson flows from every host to hosts of other racks (the artefact's
//!   queue pairs are inter-rack) with sizes from a CDF at `load` of each host's link (0.8),
//!   except to or from the incast receiver (host 0, which "does not receive Poisson
//!   arrival flows"). Periodic incast to host 0: each event is `incast_flows` flows (720 in
//!   the paper: "720-to-1") of 30–40 full packets each, from senders drawn uniformly from the
//!   other racks (with repetition), events one `incast_load` (0.5) of host 0's link apart.
//! * **Metric.** FCT of the *vulnerable* flows — Poisson flows into the receiver's rack or
//!   out of it (the artefact's `get_victim_others_fct.py`: destination in rack 0 or source in
//!   rack 0), which share the cores' and the receiver ToR's ports with the incast — average
//!   and 99th percentile, and the other Poisson ("background") flows' and the incast flows'.
//! * **Hosts.** The xoff host stack ([`crate::host`]) with a 1-BDP window and no congestion
//!   control (§6.1 compares flow control alone). PFC cells honour PFC; BFC cells are BFC
//!   NICs; Pyrrha cells honour Pyrrha's PAUSE per root (`[switch.pyrrha] hosts = true`).

use crate::fabric::{Fabric, FabricError, FabricOptions};
use crate::host::report::{base_rtt_ps, merge, FlowResult};
use crate::host::{fabric::install, StackConfig};
use crate::rng::Rng;
use crate::workload::{self, Arrival, Cdf, Dests, FlowSpec, LoadSpec};
use crate::Topology;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// The priority every flow uses (lossless where PFC is on).
pub const PRIO: u8 = 3;

/// A flow-control scheme of Fig. 11.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cell {
    /// Pyrrha, hosts honouring its PAUSE per root; `pfc`: PFC beside it as the lossless
    /// fallback.
    Pyrrha { pfc: bool },
    /// PFC alone (DT α = 2, as the paper's).
    Pfc,
    /// BFC with this many queues per port (and per NIC).
    Bfc(usize),
}

impl Cell {
    pub fn name(&self) -> String {
        match self {
            Cell::Pyrrha { pfc: false } => "pyrrha".into(),
            Cell::Pyrrha { pfc: true } => "pyrrha+pfc".into(),
            Cell::Pfc => "pfc".into(),
            Cell::Bfc(n) => format!("bfc-{n}"),
        }
    }
}

/// The experiment's parameters.
#[derive(Debug, Clone)]
pub struct IncastMix {
    pub tors: usize,
    pub hosts_per_tor: usize,
    pub cores: usize,
    pub host_rate_bps: u64,
    pub core_rate_bps: u64,
    pub hop_delay_ps: u64,
    pub buffer_bytes: u64,
    pub queues: usize,
    /// Poisson flow sizes.
    pub cdf: Cdf,
    /// Poisson load per host, fraction of its link.
    pub load: f64,
    /// Incast load, fraction of the receiver's link.
    pub incast_load: f64,
    /// Flows per incast event.
    pub incast_flows: u32,
    /// Packets per incast flow, inclusive range.
    pub incast_pkts: (u64, u64),
    /// How long flows arrive, ps.
    pub duration_ps: u64,
    /// The run ends here at the latest (virtual time), ps.
    pub max_time_ps: u64,
    /// The hosts' retransmission timeout floor (RFC 6298 §2.4), ps; `None`: the stack's
    /// default (max(1 ms, 4 × base RTT)).
    pub rto_ps: Option<u64>,
    pub seed: u64,
}

/// FCT statistics of a set of flows, µs.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Fct {
    pub flows: usize,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Fct {
    fn of(mut v: Vec<f64>) -> Fct {
        if v.is_empty() {
            return Fct::default();
        }
        v.sort_by(f64::total_cmp);
        // The artefact's percentile: the value at rank round(p·n) (1-based).
        let at = |p: f64| v[((p * v.len() as f64).round() as usize).clamp(1, v.len()) - 1];
        Fct {
            flows: v.len(),
            avg_us: v.iter().sum::<f64>() / v.len() as f64,
            p50_us: at(0.5),
            p99_us: at(0.99),
        }
    }
}

/// What one cell measured.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CellResult {
    pub cell: String,
    /// Poisson flows into or out of the incast receiver's rack.
    pub vulnerable: Fct,
    /// The same, flows under 100 KB.
    pub vulnerable_short: Fct,
    /// The other Poisson flows.
    pub background: Fct,
    pub incast: Fct,
    /// Flows not completed when the run ended.
    pub incomplete: usize,
    pub timeouts: u64,
    pub retransmissions: u64,
    /// Frames the switches dropped (any reason).
    pub switch_drops: u64,
    /// PFC frames the host stacks received.
    pub host_pfc_rx: u64,
    /// Pyrrha / BFC signal frames the host stacks honoured.
    pub host_signals_rx: u64,
    /// Pyrrha: most IQs any switch port had in use at once, and roots detected / merged.
    pub iqs_max: u64,
    pub roots_detected: u64,
    pub merges: u64,
    pub end_us: f64,
    pub events: u64,
}

impl IncastMix {
    /// The paper's setup (§6): 10 ToRs × 16 hosts, 4 cores, 100/400 Gbit/s, 600 ns hops,
    /// 20 MB buffers, 32 queues per port, Poisson at 0.8 plus a 720-to-1 incast at 0.5.
    pub fn paper(cdf: Cdf, duration_ps: u64) -> IncastMix {
        IncastMix {
            tors: 10,
            hosts_per_tor: 16,
            cores: 4,
            host_rate_bps: 100_000_000_000,
            core_rate_bps: 400_000_000_000,
            hop_delay_ps: 600_000,
            buffer_bytes: 20_000_000,
            queues: 32,
            cdf,
            load: 0.8,
            incast_load: 0.5,
            incast_flows: 720,
            incast_pkts: (30, 40),
            duration_ps,
            max_time_ps: 20 * duration_ps + 50_000_000_000,
            rto_ps: None,
            seed: 1,
        }
    }

    /// The paper's setup scaled to run in seconds: 4 ToRs × 8 hosts and 2 cores (still
    /// non-blocking: 8 × 100 down, 2 × 400 up), a 72-to-1 incast (a tenth of the paper's
    /// 720-to-1) and the buffer scaled with it to 2 MB (a tenth of 20 MB), so one incast
    /// event overflows the receiver's port as the paper's does (72 × 35 MTU ≈ 3.8 MB, as 720 ×
    /// 35 ≈ 38 MB against 20 MB). With the paper's 20 MB and a 72-to-1 incast no buffer fills:
    /// PFC never pauses a core, nothing spreads, and the three schemes' FCTs are the same (a
    /// 0.5 ms run: vulnerable p99 Pyrrha 361.8, PFC 353.8, BFC-32 411.4 µs, no PFC frame).
    pub fn scaled(cdf: Cdf, duration_ps: u64) -> IncastMix {
        IncastMix {
            tors: 4,
            hosts_per_tor: 8,
            cores: 2,
            incast_flows: 72,
            buffer_bytes: 2_000_000,
            ..IncastMix::paper(cdf, duration_ps)
        }
    }

    /// Bytes a host link carries per payload byte of the Poisson workload: each data packet
    /// adds its frame overhead ([`crate::host::FRAME_OVERHEAD`]) and preamble/IFG
    /// ([`crate::units::WIRE_OVERHEAD`]), and its ACK, as large, comes back on the link of a
    /// host that sends as much as it receives. `load` is offered payload, as the paper's
    /// artefact offers it (`lambda = bw·load/mean`): the link carries `load × wire_factor`.
    /// The expectation of packets per flow is taken over 100 000 evenly spaced quantiles.
    pub fn wire_factor(&self, mss: u32) -> f64 {
        const N: u32 = 100_000;
        let per_pkt =
            2.0 * f64::from(crate::host::FRAME_OVERHEAD + crate::units::WIRE_OVERHEAD as u32);
        let (mut bytes, mut pkts) = (0.0, 0.0);
        for i in 0..N {
            let s = self
                .cdf
                .quantile((f64::from(i) + 0.5) / f64::from(N))
                .round()
                .max(1.0);
            bytes += s;
            pkts += (s / f64::from(mss)).ceil();
        }
        (bytes + per_pkt * pkts) / bytes
    }

    pub fn hosts(&self) -> usize {
        self.tors * self.hosts_per_tor
    }

    fn rack(&self, h: u32) -> usize {
        h as usize / self.hosts_per_tor
    }

    /// The topology of `cell` as a topology file.
    pub fn topology_text(&self, cell: Cell) -> String {
        let gbit = |b: u64| format!("{}Gbit", b / 1_000_000_000);
        let mut s = format!(
            "name = \"pyrrha-incastmix\"\n[sim]\nseed = {}\nmax_time = \"{}ps\"\n",
            self.seed, self.max_time_ps
        );
        if let Cell::Bfc(n) = cell {
            let _ = writeln!(s, "honor_bfc = true\nnic_bfc_queues = {n}");
        }
        let (scheme, pfc) = match cell {
            Cell::Pyrrha { pfc } => ("scheme = \"pyrrha\"\npyrrha = { hosts = true }\n", pfc),
            Cell::Pfc => ("", true),
            Cell::Bfc(_) => ("scheme = \"bfc\"\n", false),
        };
        let queues = match cell {
            Cell::Bfc(n) => n,
            _ => self.queues,
        };
        // Where PFC runs, and for BFC, the flows' priority is a lossless PG of a DSH MMU (DT
        // α = 2, the paper's PFC setting). Pyrrha alone runs the paper's "shared buffer mode"
        // (§6 "Parameters"): no PG is lossless — with nothing to pause the upstream at an
        // XOFF, a PG's DT share and headroom are only a drop limit: a ToR's host port
        // overflowed its insurance while its packets waited in paused IQs and the buffer had
        // room (issue 17: 61 drops in a 0.5 ms Web Server run) — and a packet is admitted
        // while the buffer has room, as the artefact admits without PFC (`buffer_size > size +
        // used`): one pool, DT α at its largest (256: a queue may take all but 1/257 of what
        // is free).
        let alone = cell == Cell::Pyrrha { pfc: false };
        let pfc = if pfc {
            format!("pfc = {{ enable_mask = {} }}\n", 1u32 << PRIO)
        } else {
            String::new()
        };
        let buffer = if alone {
            "lossless_pgs = [], lossless_share = 0.0, egress_alpha = { fraction = 256.0 }"
                .to_string()
        } else {
            format!(
                "lossless_pgs = [{PRIO}], alpha = {{ fraction = 2.0 }}, headroom_mode = \"dsh\", \
                 response_ps = 0"
            )
        };
        let sw = |s: &mut String, name: &str, seed: usize, ports: &[(String, u64)]| {
            let ports: Vec<String> = ports
                .iter()
                .map(|(p, r)| format!("{{ name = \"{p}\", rate = \"{}\" }}", gbit(*r)))
                .collect();
            let _ = write!(
                s,
                "[[switch]]\nname = \"{name}\"\nseed = {seed}\n{scheme}{pfc}\
                 defaults = {{ delay = \"{}ps\", queues = {queues}, prio_map = [0, 0, 0, 0, 0, 0, 0, 0] }}\n\
                 buffer = {{ buffer_bytes = {}, {buffer} }}\n\
                 port = [{}]\n",
                self.hop_delay_ps,
                self.buffer_bytes,
                ports.join(", ")
            );
        };
        for t in 1..=self.tors {
            let mut ports: Vec<(String, u64)> = (1..=self.hosts_per_tor)
                .map(|h| (format!("h{h}"), self.host_rate_bps))
                .collect();
            ports.extend((1..=self.cores).map(|c| (format!("u{c}"), self.core_rate_bps)));
            sw(&mut s, &format!("tor{t}"), 10 + t, &ports);
            for h in 1..=self.hosts_per_tor {
                let _ = writeln!(
                    s,
                    "[[switch.route]]\nprefix = \"10.{t}.{h}.1/32\"\nvia = [\"h{h}\"]"
                );
            }
            let ups: Vec<String> = (1..=self.cores).map(|c| format!("\"u{c}\"")).collect();
            for o in (1..=self.tors).filter(|&o| o != t) {
                let _ = writeln!(
                    s,
                    "[[switch.route]]\nprefix = \"10.{o}.0.0/16\"\nvia = [{}]",
                    ups.join(", ")
                );
            }
        }
        for c in 1..=self.cores {
            let ports: Vec<(String, u64)> = (1..=self.tors)
                .map(|t| (format!("t{t}"), self.core_rate_bps))
                .collect();
            sw(&mut s, &format!("core{c}"), 100 + c, &ports);
            for t in 1..=self.tors {
                let _ = writeln!(
                    s,
                    "[[switch.route]]\nprefix = \"10.{t}.0.0/16\"\nvia = [\"t{t}\"]"
                );
            }
        }
        for t in 1..=self.tors {
            for h in 1..=self.hosts_per_tor {
                let _ = write!(
                    s,
                    "[[host]]\nname = \"h{t}x{h}\"\nip = \"10.{t}.{h}.1/24\"\ngateway = \"10.{t}.{h}.254\"\n\
                     [[link]]\na = \"h{t}x{h}\"\nb = \"tor{t}:h{h}\"\n"
                );
            }
            for c in 1..=self.cores {
                let _ = write!(s, "[[link]]\na = \"tor{t}:u{c}\"\nb = \"core{c}:t{t}\"\n");
            }
        }
        s
    }

    /// The flows: Poisson between racks (not to or from host 0) and the incast to host 0.
    pub fn schedule(&self, mss: u32) -> Vec<FlowSpec> {
        let hosts = self.hosts() as u32;
        let receiver = 0u32;
        let mut poisson = Vec::new();
        for s in 1..hosts {
            let dests: Vec<u32> = (1..hosts)
                .filter(|&d| self.rack(d) != self.rack(s))
                .collect();
            let spec = LoadSpec {
                cdf: self.cdf.clone(),
                load: self.load,
                rate_bps: self.host_rate_bps,
                arrival: Arrival::Poisson,
                hosts,
                senders: vec![s],
                dests: Dests::List(dests),
                prios: vec![PRIO],
                duration_ps: self.duration_ps,
                start_ps: 0,
            };
            poisson.extend(spec.generate(self.seed, 0));
        }
        // Incast events: `incast_flows` flows of 30–40 full packets each from senders in
        // other racks, one event per `incast_load` of the receiver's link.
        let (lo, hi) = self.incast_pkts;
        let mean = (lo + hi) as f64 / 2.0 * f64::from(mss) * f64::from(self.incast_flows);
        let period = workload::mean_interarrival_ps(mean, self.incast_load, self.host_rate_bps);
        let outside: Vec<u32> = (0..hosts)
            .filter(|&h| self.rack(h) != self.rack(receiver))
            .collect();
        let mut rng = Rng::stream(self.seed, 0x5e_c6_1c);
        let mut incast = Vec::new();
        let mut t = 0.0;
        while t < self.duration_ps as f64 && !outside.is_empty() {
            for _ in 0..self.incast_flows {
                let src = outside[rng.upto(outside.len() as u64 - 1) as usize];
                let pkts = lo + rng.upto(hi - lo);
                incast.push(FlowSpec {
                    id: 0,
                    src,
                    dst: receiver,
                    size: pkts * u64::from(mss),
                    // The artefact's up to 100 ns of spread within an event.
                    start_ps: t as u64 + rng.upto(100_000),
                    prio: PRIO,
                });
            }
            t += period;
        }
        workload::combine(poisson, incast, 0)
    }

    /// Runs `cell` to completion (or `max_time_ps`).
    pub fn run(&self, cell: Cell) -> Result<CellResult, FabricError> {
        let text = self.topology_text(cell);
        let topo = Topology::parse(&text, Path::new("pyrrha-incastmix.toml"))?;
        let mut fab = Fabric::new(&topo, &FabricOptions::default())?;
        let mss = StackConfig::new(0, self.host_rate_bps, 0).mss;
        let d = self.hop_delay_ps;
        // Host → ToR → core → ToR → host.
        let rtt = base_rtt_ps(
            &[
                (self.host_rate_bps, d),
                (self.core_rate_bps, d),
                (self.core_rate_bps, d),
                (self.host_rate_bps, d),
            ],
            mss,
        );
        let sched = self.schedule(mss);
        let stacks = install(&mut fab, &sched, |i| {
            let mut c = StackConfig::new(0, i.nic_rate_bps, rtt);
            if let Some(r) = self.rto_ps {
                c.rto_ps = r;
            }
            c
        });
        fab.run();
        let mut r = CellResult {
            cell: cell.name(),
            end_us: fab.now() as f64 / 1e6,
            events: fab.stats().events,
            ..CellResult::default()
        };
        let (mut tx, mut rx) = (Vec::new(), Vec::new());
        for s in &stacks {
            let s = s.borrow();
            r.host_pfc_rx += s.counters.pfc_rx;
            r.host_signals_rx += s.counters.signals_rx;
            r.timeouts += s.counters.timeouts;
            tx.extend(s.tx_records());
            rx.extend(s.rx_records());
        }
        let flows = merge(&tx, &rx, mss, self.host_rate_bps, rtt);
        r.retransmissions = flows.iter().map(|f| f.retx).sum();
        r.incomplete = flows.iter().filter(|f| !f.completed).count();
        let rack0 = self.rack(0);
        let fct = |keep: &dyn Fn(&FlowResult) -> bool| {
            Fct::of(
                flows
                    .iter()
                    .filter(|f| keep(f))
                    .filter_map(|f| f.fct_ps.map(|x| x as f64 / 1e6))
                    .collect(),
            )
        };
        let vulnerable =
            |f: &FlowResult| f.dst != 0 && (self.rack(f.dst) == rack0 || self.rack(f.src) == rack0);
        r.vulnerable = fct(&vulnerable);
        r.vulnerable_short = fct(&|f| vulnerable(f) && f.size < 100_000);
        r.background = fct(&|f| f.dst != 0 && !vulnerable(f));
        r.incast = fct(&|f| f.dst == 0);
        let now = fab.now();
        for n in fab.nodes() {
            let sw = n.switch();
            for p in &n.shared().snapshot(now as f64 / 1e12, None).ports {
                r.switch_drops += p.drops.values().sum::<u64>();
            }
            if let Some(p) = sw.scheme_stats(now).and_then(|s| s.pyrrha) {
                for port in &p.ports {
                    r.iqs_max = r.iqs_max.max(port.iqs_in_use_max);
                    r.roots_detected += port.roots_detected;
                    r.merges += port.merges_sent;
                }
            }
        }
        Ok(r)
    }
}

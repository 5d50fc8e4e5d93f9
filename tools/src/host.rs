//! `xoff host`: the host stack (`dataplane::host`) on a testbed host's `eth0` over AF_XDP,
//! with the monotonic clock. It sends this host's flows of a schedule, receives and ACKs
//! everybody else's, honours PFC, and writes `<out>/<host>.json` (per-flow sender and
//! receiver records, counters, the socket's XDP_STATISTICS). With `--bfc-queues N` it speaks
//! BFC to its switch: N NIC queues with dynamic flow assignment, the Xoff data shim carrying
//! each data frame's NIC queue, and Xoff signal frames pausing and resuming single queues
//! (counted in `counters.signals_rx`, `pauses_rx`, `resumes_rx`). That NIC also honours
//! Aquarius's per-flow FLOW PAUSE / FLOW RESUME (`--aquarius`: the same NIC, 8 queues by
//! default). `--pyrrha` honours Pyrrha's PAUSE per congestion root (`counters.pauses_rx`,
//! `resumes_rx`, `merges_rx`). `--cc` picks the flows'
//! congestion control (DCQCN, DCTCP, HPCC; `counters.ce_rx`, `cnp_tx`, `ece_rx`, `cnp_rx`
//! count the ECN feedback).

use anyhow::{anyhow, bail, Context, Result};
use dataplane::config::{HostInfo, Topology};
use dataplane::frame::FrameMem;
use dataplane::host::fabric::peer_table;
use dataplane::host::report::{RxRecord, TxRecord};
use dataplane::host::wire::emit_segment;
use dataplane::host::{HostStack, StackConfig, StackCounters};
use dataplane::port::{sys, xsk, PortIo};
use dataplane::stats::XdpSnapshot;
use dataplane::units::{parse_rate, parse_size, parse_time};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(clap::Args, Debug, Clone)]
pub struct HostArgs {
    /// Topology file (host addresses, MACs, gateways, link rates).
    #[arg(long)]
    pub topology: PathBuf,
    /// This host's name in the topology.
    #[arg(long)]
    pub host: String,
    /// Flow schedule (CSV `id,src,dst,size,start_ps,prio`; host indices in topology order).
    #[arg(long)]
    pub schedule: PathBuf,
    /// Directory for `<host>.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// Experiment start, Unix time in ns (default: now + 300 ms).
    #[arg(long)]
    pub start_at: Option<u128>,
    /// How long to run after the start (flows + drain), e.g. "3s".
    #[arg(long, default_value = "3s")]
    pub run: String,
    /// NIC rate to pace at (default: the rate of the switch port the host is linked to).
    #[arg(long)]
    pub rate: Option<String>,
    /// Base RTT for the default window and RTO.
    #[arg(long, default_value = "200us")]
    pub base_rtt: String,
    /// Per-flow in-flight cap (default: 1 BDP at the NIC rate and base RTT).
    #[arg(long)]
    pub window: Option<String>,
    /// Initial and minimum retransmission timeout (RFC 6298 §2.1, §2.4; default: max(1 ms,
    /// 4 × base RTT)). Above it the RTO adapts to the measured RTT, backs off on timeouts
    /// and does not run while the flow is paused (see `dataplane::host`).
    #[arg(long)]
    pub rto: Option<String>,
    /// Ceiling of the RTO (RFC 6298 §2.5; default: 64 × the minimum).
    #[arg(long)]
    pub rto_max: Option<String>,
    /// Ignore received PFC frames.
    #[arg(long)]
    pub ignore_pfc: bool,
    /// Speak BFC with this many NIC queues (1..=128): flows take NIC queues dynamically,
    /// data frames carry the Xoff data shim (upstreamQ = NIC queue), Xoff signal frames pause
    /// and resume single queues. 0: off (a NIC queue per priority).
    #[arg(long, default_value_t = 0)]
    pub bfc_queues: usize,
    /// Speak Aquarius (§3.3) to the first-hop switch: the BFC NIC above (8 queues unless
    /// `--bfc-queues` says otherwise), which also honours per-flow FLOW PAUSE / FLOW RESUME
    /// signals: the named flow (known by the FID the switch computes from its frames) moves
    /// to a reserved NIC queue that is paused, and the flows sharing its queue keep sending.
    #[arg(long)]
    pub aquarius: bool,
    /// Honour Pyrrha's PAUSE / RESUME / MERGE per congestion root (§4.4; the switch needs
    /// `[switch.pyrrha] hosts = true`): the stack computes each flow's path as the switches
    /// do (from the topology file) and holds exactly the flows whose path crosses a paused
    /// root, in 32 NIC queues (the OQ and 31 IQs); the others keep sending.
    #[arg(long)]
    pub pyrrha: bool,
    /// Congestion control of this host's flows: none, window (the fixed per-flow window,
    /// default), dcqcn, dctcp or hpcc (`dataplane::host::cc`). DCQCN and DCTCP send data
    /// ECN-capable and need ECN-marking switches; HPCC needs switches that append INT.
    #[arg(long, default_value = "window")]
    pub cc: String,
    /// Run DCQCN's timers (α, rate decrease, rate increase) and the receiver's one CNP per
    /// flow per 50 µs this many times slower than the paper's. The paper tuned them for
    /// microsecond fabrics; on a slow link, or behind a software loop that sees its frames
    /// milliseconds apart, the marking band's queueing delay and the feedback are that much
    /// longer (tools/tests/cc.rs runs 100 Mbit/s with 10). Senders and receiver must agree.
    #[arg(long, default_value_t = 1)]
    pub dcqcn_time_scale: u32,
    /// What the receiver does with a data packet above the one it expects: `buffer` (keep
    /// it, ACK cumulatively: a reordering buffer), `buffer:TIME` (a reordering buffer that
    /// gives up on a hole after TIME, then NAKs it) or `go-back-n` (drop it and NAK the
    /// expected one once; the sender goes back to it, as commodity RoCE NICs do).
    #[arg(long, default_value = "buffer")]
    pub out_of_order: String,
    /// Interface.
    #[arg(long, default_value = "eth0")]
    pub iface: String,
}

/// What `xoff host` writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostOutput {
    pub host: String,
    pub index: u32,
    pub rate_bps: u64,
    pub mss: u32,
    pub tx: Vec<TxRecord>,
    pub rx: Vec<RxRecord>,
    pub counters: StackCounters,
    pub xdp: Option<XdpSnapshot>,
    /// Frames the UMEM could not provide when the stack had one to send.
    pub no_frame: u64,
}

/// Every host of a topology as the stack sees it (index = topology order), its NIC at the
/// rate and delay of the switch port it hangs off (0 if it hangs off none).
pub fn host_infos(topo: &Topology) -> Result<Vec<HostInfo>> {
    let r = topo.resolve()?;
    Ok((0..r.hosts.len())
        .map(|i| {
            let port = r.host_port(i);
            r.host_info(
                i,
                port.map_or(0, |p| p.rate_bps),
                port.map_or(0, |p| p.delay_ps),
            )
        })
        .collect())
}

/// The Pyrrha NIC of host `me`: its switch must run Pyrrha (whose path model it shares).
fn pyrrha_nic(topo: &Topology, me: usize) -> Result<dataplane::host::pyrrha::PyrrhaNicConfig> {
    let r = topo.resolve()?;
    let (sw, _) = r.hosts[me].port().ok_or_else(|| {
        anyhow!(
            "--pyrrha: host `{}` is linked to no switch",
            r.hosts[me].name
        )
    })?;
    let spec = &r.switches[sw as usize].spec;
    let p = spec.pyrrha.as_ref().ok_or_else(|| {
        anyhow!(
            "--pyrrha: switch `{}` (host `{}`'s) does not run Pyrrha",
            spec.name,
            r.hosts[me].name
        )
    })?;
    Ok(dataplane::host::pyrrha::PyrrhaNicConfig {
        model: p.model.clone(),
        tor: sw as u16,
        queues: dataplane::host::fabric::PYRRHA_NIC_QUEUES,
    })
}

/// Wall-clock time in ns since the Unix epoch (the shared start instant of a testbed's hosts).
pub(crate) fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

pub fn run(a: HostArgs) -> Result<i32> {
    let topo = Topology::load(&a.topology)?;
    let infos = host_infos(&topo)?;
    let me = infos
        .iter()
        .position(|h| h.name == a.host)
        .ok_or_else(|| anyhow!("{}: no host named `{}`", a.topology.display(), a.host))?;
    let text = std::fs::read_to_string(&a.schedule)
        .with_context(|| format!("reading {}", a.schedule.display()))?;
    let sched = dataplane::workload::from_csv(&text, &a.schedule.display().to_string())?;
    let rate = match &a.rate {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("--rate: {e}"))?,
        None => infos[me].nic_rate_bps,
    };
    if rate == 0 {
        bail!("--rate: host `{}` has no linked port; give a rate", a.host);
    }
    let base_rtt = parse_time(&a.base_rtt).map_err(|e| anyhow!("--base-rtt: {e}"))?;
    let mut cfg = StackConfig::new(me as u32, rate, base_rtt);
    if let Some(w) = &a.window {
        cfg.window_bytes = parse_size(w).map_err(|e| anyhow!("--window: {e}"))?.max(1);
    }
    if let Some(r) = &a.rto {
        cfg.rto_ps = parse_time(r).map_err(|e| anyhow!("--rto: {e}"))?;
    }
    if let Some(r) = &a.rto_max {
        cfg.rto_max_ps = Some(parse_time(r).map_err(|e| anyhow!("--rto-max: {e}"))?);
    }
    cfg.honor_pfc = !a.ignore_pfc;
    if a.bfc_queues > dataplane::host::nicq::MAX_QUEUES {
        bail!(
            "--bfc-queues: {} (at most {})",
            a.bfc_queues,
            dataplane::host::nicq::MAX_QUEUES
        );
    }
    cfg.bfc_queues = match (a.aquarius, a.bfc_queues) {
        (true, 0) => 8,
        (_, n) => n,
    };
    if a.pyrrha {
        if cfg.bfc_queues > 0 {
            bail!("--pyrrha: the NIC speaks one scheme (not with --bfc-queues or --aquarius)");
        }
        cfg.pyrrha = Some(pyrrha_nic(&topo, me)?);
    }
    cfg.cc = a.cc.parse().map_err(|e| anyhow!("--cc: {e}"))?;
    if a.dcqcn_time_scale == 0 {
        bail!("--dcqcn-time-scale: 0 (1 is the paper's timers)");
    }
    cfg.dcqcn_time_scale = a.dcqcn_time_scale;
    cfg.out_of_order = a
        .out_of_order
        .parse()
        .map_err(|e| anyhow!("--out-of-order: {e}"))?;
    // How much sending time a stalled loop may make up: the NIC 200 us (more would send the
    // stall's backlog at veth speed: beside a CPU hog, 10 ms gave bursts that the switch
    // marked, and DCQCN's split in tools/tests/cc.rs went 30/63 Mbit/s in 3 of 5 runs); a
    // flow's rate limiter 10 ms, caught up at the NIC's pace (an RDMA NIC's limiter is not
    // held up by the host: with 200 us, DCQCN senders beside a hog lost a fifth of their
    // rate while their control saw no congestion).
    cfg.max_lag_ps = 200_000_000;
    cfg.rate_lag_ps = 10_000_000_000;
    let run_ps = parse_time(&a.run).map_err(|e| anyhow!("--run: {e}"))?;
    let mss = cfg.mss;
    let mut stack = HostStack::new(cfg, &sched);
    stack.set_addresses(infos[me].ip, infos.iter().map(|h| h.ip).collect());
    let peers = peer_table(&infos, me);
    let info = infos[me].clone();

    let (mut ports, mut mem) = xsk::open_ports(std::slice::from_ref(&a.iface), 8192, None)
        .with_context(|| format!("opening AF_XDP on {}", a.iface))?;
    let port = ports
        .first_mut()
        .ok_or_else(|| anyhow!("no AF_XDP port on {}", a.iface))?;
    let fd = port.poll_fd();

    // Common start: wall clock across processes, monotonic within this one.
    let start_at = a.start_at.unwrap_or_else(|| unix_ns() + 300_000_000);
    let wait = start_at.saturating_sub(unix_ns());
    let t0 = Instant::now() + Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX));
    let now_ps = || {
        Instant::now()
            .checked_duration_since(t0)
            .map_or(0, |d| d.as_nanos() as u64 * 1000)
    };
    let mut rxv = Vec::with_capacity(64);
    let mut txq: Vec<(dataplane::FrameId, u32)> = Vec::with_capacity(128);
    let mut done = Vec::with_capacity(256);
    let mut no_frame = 0u64;
    // Keep the fill ring stocked while waiting for the start.
    while Instant::now() < t0 {
        port.refill(mem.free_list());
        rxv.clear();
        port.rx_burst(&mut rxv, 64);
        for &(f, _) in &rxv {
            mem.free(f);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    loop {
        let now = now_ps();
        if now >= run_ps {
            break;
        }
        let mut busy = false;
        rxv.clear();
        if port.rx_burst(&mut rxv, 64) > 0 {
            busy = true;
        }
        for &(f, len) in &rxv {
            {
                let d = mem.data(f);
                stack.on_receive(now, &d[..(len as usize).min(d.len())], len);
            }
            mem.free(f);
        }
        port.refill(mem.free_list());
        done.clear();
        port.completions(&mut done);
        for &f in &done {
            mem.free(f);
        }
        stack.on_tick(now);
        while txq.len() < 64 {
            if mem.free_count() == 0 {
                no_frame += 1;
                break;
            }
            let Some(seg) = stack.poll_send(now) else {
                break;
            };
            let Some(p) = peers.get(seg.dst as usize) else {
                continue;
            };
            let Some(f) = mem.alloc() else {
                break;
            };
            let len = mem.with_mut(f, |d| emit_segment(&info, p, &seg, d));
            txq.push((f, len));
        }
        if !txq.is_empty() {
            let n = port.tx_burst(&txq);
            txq.drain(..n);
            busy = true;
        }
        if !busy {
            let wake = stack.next_wakeup(now).unwrap_or(now + 1_000_000_000);
            let dt = wake.saturating_sub(now_ps()).min(200_000_000);
            if dt > 20_000_000 {
                if let Some(fd) = fd {
                    sys::wait_readable(&[fd], dt - 10_000_000);
                }
            } else {
                std::thread::yield_now();
            }
        }
    }
    let out = HostOutput {
        host: a.host.clone(),
        index: me as u32,
        rate_bps: rate,
        mss,
        tx: stack.tx_records(),
        rx: stack.rx_records(),
        counters: stack.counters,
        xdp: port.ring_stats(),
        no_frame,
    };
    write_output(&a.out, &out)?;
    Ok(0)
}

fn write_output(dir: &Path, out: &HostOutput) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let p = dir.join(format!("{}.json", out.host));
    std::fs::write(&p, serde_json::to_string(out)?)
        .with_context(|| format!("writing {}", p.display()))
}

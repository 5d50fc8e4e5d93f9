//! `xoff run`: one switch of a topology on AF_XDP ports, until SIGINT/SIGTERM.

use anyhow::{bail, Result};
use dataplane::ctl::{self, Request, Response};
use dataplane::port::bpf::XdpMode;
use dataplane::port::shm::AfcShm;
use dataplane::port::xsk::ifindex;
use dataplane::runtime::{self, PollMode, RunOptions};
use dataplane::{ConfigError, Topology};
use flowctl::afc::ShmLayout;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Topology file.
    #[arg(long)]
    config: PathBuf,
    /// Which switch of the file to run.
    #[arg(long)]
    switch: String,
    /// Worker threads (ports are divided among them).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// busy: spin; adaptive: sleep when idle.
    #[arg(long, default_value = "adaptive")]
    poll: String,
    /// Force an XDP mode (native or generic); default tries native, then generic.
    #[arg(long)]
    xdp_mode: Option<String>,
    /// Control socket path (default /run/xoff/NAME.sock).
    #[arg(long)]
    ctl: Option<PathBuf>,
    /// RX burst size.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Shared-memory AFC command ring for external controllers (default: NAME.afc next to
    /// the control socket; `none` to run without one).
    #[arg(long)]
    afc: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9100; inside a
    /// testbed that is the switch's own namespace).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Measure the reaction time: the XDP program stamps each frame's arrival, and
    /// `xoff ctl stats --json` shows `nic.reaction`, the time from the frame that crossed a
    /// PFC threshold to its XOFF on the TX ring (costs a tail adjustment per frame).
    #[arg(long)]
    reaction: bool,
    /// Queues between workers: ringbuf (SPSC per worker pair) or crossbeam (MPMC per
    /// worker), for the A/B of `xoff bench line-rate --peers xoff-2w-ringbuf,xoff-2w-crossbeam`.
    #[arg(long, default_value = "ringbuf", hide = true)]
    handoff: runtime::HandoffRing,
}

/// Lanes (concurrent controller processes) of the AFC ring.
const AFC_LANES: u32 = 8;
/// Command words each lane holds.
const AFC_CAPACITY: u32 = 1024;

pub fn run(a: RunArgs) -> Result<i32> {
    let topo = Topology::load(&a.config)?;
    let spec = topo.switch_spec(&a.switch)?;
    let si = topo
        .switches
        .iter()
        .position(|s| s.name == a.switch)
        .unwrap_or(0);
    for (pi, p) in spec.ports.iter().enumerate() {
        if ifindex(&p.iface).is_none() {
            return Err(ConfigError {
                file: a.config.display().to_string(),
                key: format!("switch[{si}].port[{pi}].iface"),
                reason: format!("interface `{}` does not exist", p.iface),
            }
            .into());
        }
    }
    let poll = match a.poll.as_str() {
        "busy" => PollMode::Busy,
        "adaptive" => PollMode::Adaptive,
        o => bail!("--poll {o}: use busy or adaptive"),
    };
    let xdp_mode = match a.xdp_mode.as_deref() {
        None => None,
        Some("native") => Some(XdpMode::Native),
        Some("generic") => Some(XdpMode::Generic),
        Some(o) => bail!("--xdp-mode {o}: use native or generic"),
    };
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    let name = spec.name.clone();
    let sock = a.ctl.clone().unwrap_or_else(|| ctl::default_socket(&name));
    let afc_path = match a.afc.as_deref() {
        Some(p) if p == Path::new("none") => None,
        Some(p) => Some(p.to_path_buf()),
        None => Some(ctl::afc_path(&sock, &name)),
    };
    let afc = match &afc_path {
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // One credit = one PFC quantum (512 bit times) of the target port, so a
            // controller can mirror PFC pause times.
            let credit_ps = spec
                .ports
                .iter()
                .map(|p| flowctl::wire::pfc::quanta_to_ps(1, p.rate_bps))
                .collect();
            let layout = ShmLayout::new(AFC_LANES, AFC_CAPACITY)?;
            Some(Arc::new(AfcShm::create(p, layout, credit_ps)?))
        }
        None => None,
    };
    let opts = RunOptions {
        workers: a.workers,
        poll,
        batch: a.batch,
        xdp_mode,
        umem_frames: None,
        afc: afc.clone(),
        reaction: a.reaction,
        handoff: a.handoff,
    };
    let ports: Vec<(String, u64, u64)> = spec
        .ports
        .iter()
        .map(|p| (p.iface.clone(), p.rate_bps, p.delay_ps))
        .collect();
    let running = Arc::new(runtime::start(spec, &opts, stop.clone())?);
    for ((iface, rate, delay), (_, mode)) in ports.iter().zip(&running.modes) {
        tracing::info!(switch = %name, %iface, rate_bps = rate, delay_ns = delay / 1000, ?mode, "port up");
    }
    if let Some(rows) = &running.headroom {
        eprint!(
            "headroom table (switch {name}):\n{}",
            mmu::headroom::format_headroom_table(rows)
        );
    }
    let ring_full = {
        let afc = afc.clone();
        move || afc.as_ref().map(|r| r.ring().full())
    };
    if let Some(addr) = &a.metrics {
        let (r, ring_full) = (running.clone(), ring_full.clone());
        crate::metrics::serve(
            addr,
            Arc::new(move || {
                let mut s = r.snapshot();
                s.afc_ring_full = ring_full();
                s
            }),
        )?;
    }
    let r2 = running.clone();
    let shared = running.shared.clone();
    // Link state on the control loop: every change logged there at INFO and counted here.
    let links = ctl::LinkWatch {
        ifaces: ports.iter().map(|(iface, _, _)| iface.clone()).collect(),
        on_change: Box::new({
            let shared = running.shared.clone();
            move |ch: &ctl::LinkChange| {
                let c = &shared.counters[ch.port];
                if ch.went_down() {
                    c.link_down.add_shared(1);
                    shared.set_carrier(ch.port, false);
                }
                if ch.came_up() {
                    c.link_up.add_shared(1);
                    shared.set_carrier(ch.port, true);
                }
            }
        }),
    };
    ctl::serve_with_taps(
        &sock,
        ctl::Limits::default(),
        Some(links),
        running.shared.taps.clone(),
        move |req| match req {
            Request::Stats => {
                let mut s = r2.snapshot();
                s.afc_ring_full = ring_full();
                Response::Stats(Box::new(s))
            }
            Request::Audit => Response::Audit(Box::new(r2.audit())),
            Request::Pause { port, queue } => {
                // An untimed pause as the AFC word (credit 0) that a P4 program would write.
                let cmd = u16::try_from(port)
                    .ok()
                    .zip(u8::try_from(queue).ok())
                    .and_then(|(p, q)| flowctl::AfcCmd::pause(p, q, 0).ok());
                match cmd.map(|c| shared.afc.apply(c, 0, 1)) {
                    Some(Ok(())) => Response::Ok,
                    _ => Response::Error(format!("no queue {queue} on port {port}")),
                }
            }
            Request::Resume { port, queue } => match shared.afc.resume(port, queue) {
                Ok(()) => Response::Ok,
                Err(_) => Response::Error(format!("no queue {queue} on port {port}")),
            },
        },
    )?;
    tracing::info!(switch = %name, socket = %sock.display(), afc = ?afc_path, workers = opts.workers, "running");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::info!(switch = %name, "stopping");
    let _ = std::fs::remove_file(&sock);
    running.join();
    if let Some(p) = &afc_path {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(dataplane::port::shm::bell_path(p));
    }
    Ok(0)
}

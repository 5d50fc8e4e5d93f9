//! `xoff bench`: the line-rate harness and its traffic tools (see the `bench` crate).

use anyhow::{Context, Result};
use dataplane::wire::MacAddr;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// Forwarding rate, CPU per packet and latency of xoff and its peers, side by side.
    #[command(after_help = "Example:\n  xoff bench line-rate --sizes 64,512,1500 --duration 4")]
    LineRate {
        #[arg(long)]
        json: bool,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        #[arg(long, value_delimiter = ',', default_value = "64,512,1500")]
        sizes: Vec<usize>,
        /// Peers to measure (default: all).
        #[arg(long, value_delimiter = ',')]
        peers: Option<Vec<String>>,
        /// Where to append the results (default bench/RESULTS.md of this checkout).
        #[arg(long)]
        results: Option<PathBuf>,
        /// Do not append to RESULTS.md.
        #[arg(long)]
        no_record: bool,
    },
    /// The switch's reaction time on real frames (a frame crossing a PFC threshold → its
    /// XOFF on the TX ring), busy and adaptive polling, DUT core idle and shared with a hog;
    /// prints the percentiles and the `response_ps` they support.
    #[command(after_help = "Example:\n  xoff bench reaction --duration 10")]
    Reaction {
        #[arg(long)]
        json: bool,
        /// Seconds of bursts per case.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
    },
    /// AF_XDP traffic generator (used by line-rate).
    #[command(
        after_help = "Example:\n  ip netns exec gen xoff bench gen --iface veth0 --src-mac 02:00:00:00:00:01 --dst-mac 02:00:00:00:00:02 --size 64 --duration 4\n  (xoff bench line-rate runs it for you)"
    )]
    Gen {
        #[arg(long)]
        iface: String,
        #[arg(long)]
        src_mac: MacAddr,
        #[arg(long)]
        dst_mac: MacAddr,
        #[arg(long, default_value = "10.9.0.1")]
        src_ip: Ipv4Addr,
        #[arg(long, default_value = "10.9.0.2")]
        dst_ip: Ipv4Addr,
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Frames per second (default: as fast as possible).
        #[arg(long)]
        rate: Option<f64>,
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Timestamp every frame (for the latency sink).
        #[arg(long)]
        stamp: bool,
        #[arg(long, default_value_t = 0)]
        dscp: u8,
        /// Send bursts of this many frames, `--gap-us` apart.
        #[arg(long)]
        burst: Option<u64>,
        #[arg(long, default_value_t = 5000)]
        gap_us: u64,
    },
    /// The bare two-port AF_XDP forwarder: the ceiling for a user-space switch here.
    Fwd {
        #[arg(long)]
        a: String,
        #[arg(long)]
        b: String,
    },
    /// Sink: count and drop in XDP (prints `count <seconds> <frames>` every 100 ms), or with
    /// `--latency` receive over AF_XDP and print one-way latency percentiles as JSON.
    Sink {
        #[arg(long)]
        iface: String,
        #[arg(long, default_value_t = 6.0)]
        duration: f64,
        #[arg(long)]
        latency: bool,
    },
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    Ok(stop)
}

pub fn run(cmd: BenchCmd) -> Result<i32> {
    match cmd {
        BenchCmd::LineRate {
            json,
            duration,
            sizes,
            peers,
            results,
            no_record,
        } => {
            let default_results =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/RESULTS.md");
            let install = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/install.sh");
            if install.exists() {
                let st = std::process::Command::new(&install)
                    .arg("--bench")
                    .status()
                    .context("deploy/install.sh --bench")?;
                if !st.success() {
                    eprintln!("warning: installing the benchmark peers failed; peers that cannot run are reported");
                }
            }
            let opts = bench::linerate::Opts {
                xoff: std::env::current_exe()?,
                duration,
                sizes,
                peers: peers.unwrap_or_else(|| {
                    bench::linerate::PEERS
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                }),
                results: if no_record {
                    None
                } else {
                    Some(results.unwrap_or(default_results))
                },
            };
            let r = bench::linerate::run(&opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", bench::linerate::table(&r));
            }
            Ok(0)
        }
        BenchCmd::Reaction { json, duration } => {
            let cases = bench::reaction::run(&bench::reaction::Opts {
                xoff: std::env::current_exe()?,
                duration,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&cases)?);
            } else {
                print!("{}", bench::reaction::table(&cases));
            }
            Ok(0)
        }
        BenchCmd::Gen {
            iface,
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            size,
            rate,
            duration,
            stamp,
            dscp,
            burst,
            gap_us,
        } => {
            let stop = stop_flag()?;
            let o = bench::traffic::GenOpts {
                iface,
                src_mac,
                dst_mac,
                src_ip,
                dst_ip,
                size,
                rate_pps: rate,
                duration: Duration::from_secs_f64(duration),
                stamp,
                dscp,
                burst: burst.map(|n| (n.max(1), Duration::from_micros(gap_us))),
            };
            let sent = bench::traffic::generate(&o, &stop)?;
            println!("sent {sent}");
            Ok(0)
        }
        BenchCmd::Fwd { a, b } => {
            let stop = stop_flag()?;
            let n = bench::traffic::forward(&a, &b, &stop)?;
            println!("forwarded {n}");
            Ok(0)
        }
        BenchCmd::Sink {
            iface,
            duration,
            latency,
        } => {
            let stop = stop_flag()?;
            if latency {
                let r =
                    bench::traffic::sink_latency(&iface, Duration::from_secs_f64(duration), &stop)?;
                println!("{}", serde_json::to_string(&r)?);
                return Ok(0);
            }
            let idx = dataplane::port::xsk::ifindex(&iface)
                .with_context(|| format!("no interface {iface}"))?;
            let c = dataplane::port::bpf::XdpCounter::attach(idx)?;
            let t = Instant::now();
            while t.elapsed().as_secs_f64() < duration
                && !stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                let line = bench::traffic::count_line(t.elapsed().as_secs_f64(), c.count()?);
                println!("{line}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(0)
        }
    }
}

//! `xoff ctl tap`: mirror a running switch's port to a pcap file (issue 22 item 2). The
//! switch streams the frames over its control socket (`dataplane::tap` says why and how the
//! window is delimited); this side writes them with the `pcap-file` crate, nanosecond
//! timestamps from the switch's real clock, and prints the window's summary.

use anyhow::{Context, Result};
use dataplane::tap::{self, TapDir, TapRequest};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct TapArgs {
    /// Port name (e.g. `p1`) or index.
    #[arg(long)]
    port: String,
    /// Frames as received, as transmitted, or both.
    #[arg(long, default_value = "both", value_parser = ["rx", "tx", "both"])]
    dir: String,
    /// Stop after this many frames of the port (copied or over budget); else at Ctrl-C or
    /// `--duration`.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Frames the switch may hold for this client at once; beyond it frames are counted
    /// (`over_budget`), not queued.
    #[arg(long, default_value_t = tap::DEFAULT_BUDGET)]
    budget: usize,
    /// pcap file to write (`-`: standard output, e.g. into `wireshark -k -i -`).
    #[arg(long)]
    out: PathBuf,
    /// Print the window's summary as JSON on standard output (not with `--out -`).
    #[arg(long)]
    json: bool,
}

/// Standard output for a live reader: every write goes out at once (a pipe into Wireshark
/// should show a frame when it arrives, not when a buffer fills).
struct Flushing<W: Write>(W);

impl<W: Write> Write for Flushing<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(b)?;
        self.0.flush()?;
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

pub fn run(sock: &Path, switch: &str, a: TapArgs) -> Result<i32> {
    let req = TapRequest {
        port: a.port.clone(),
        dir: TapDir::parse(&a.dir).map_err(anyhow::Error::msg)?,
        count: a.count.unwrap_or(0),
        budget: a.budget,
    };
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    if let Some(d) = a.duration {
        let (stop, d) = (stop.clone(), Duration::from_secs_f64(d.max(0.0)));
        std::thread::spawn(move || {
            let t = Instant::now();
            while t.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
    let to_stdout = a.out.as_os_str() == "-";
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(Flushing(std::io::stdout()))
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&a.out)
                .with_context(|| format!("creating {}", a.out.display()))?,
        ))
    };
    let header = PcapHeader {
        snaplen: tap::SNAP as u32,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::native(),
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(sink, header)?;
    let mut written = 0u64;
    let summary = tap::capture(
        sock,
        &req,
        &stop,
        |s| {
            eprintln!(
                "tapping switch {switch} port {} ({}, port {}) {}, budget {} frames",
                s.name,
                s.iface,
                s.port,
                s.dir.as_str(),
                s.budget
            )
        },
        |f| {
            let ts = Duration::from_nanos(f.unix_ns);
            w.write_packet(&PcapPacket::new(ts, f.orig_len, f.data))
                .map_err(std::io::Error::other)?;
            written += 1;
            Ok(())
        },
    )
    .with_context(|| format!("switch `{switch}` at {}", sock.display()))?;
    w.into_writer().flush()?;
    eprintln!(
        "{written} frames to {}; window: rx {} frames ({}..{}), tx {} frames ({}..{}); \
         {} seen, {} over budget{}",
        a.out.display(),
        summary.rx_end - summary.rx_start,
        summary.rx_start,
        summary.rx_end,
        summary.tx_end - summary.tx_start,
        summary.tx_start,
        summary.tx_end,
        summary.seen_rx + summary.seen_tx,
        summary.over_budget,
        if summary.complete {
            ""
        } else {
            " (incomplete: the port's worker never closed the window)"
        }
    );
    if a.json && !to_stdout {
        println!("{}", serde_json::to_string(&summary)?);
    }
    Ok(if summary.complete { 0 } else { 1 })
}

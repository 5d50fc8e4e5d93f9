//! Traffic tools for the line-rate harness, on the same AF_XDP port module as the switch:
//! a generator (max rate or paced, optional timestamps), the bare two-port forwarder that is
//! the ceiling for any user-space AF_XDP switch here, and a latency sink.

use dataplane::frame::{FrameId, FrameMem};
use dataplane::port::sys::monotonic_ns;
use dataplane::port::xsk::open_ports;
use dataplane::port::PortIo;
use dataplane::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Offset of the send timestamp (u64 ns, CLOCK_MONOTONIC) in generated frames: after the UDP
/// header.
pub const STAMP_OFF: usize = 42;

/// One line of `xoff bench sink`'s count output: seconds since it started, frames counted.
pub fn count_line(secs: f64, frames: u64) -> String {
    format!("count {secs:.3} {frames}")
}

/// Reads a [`count_line`] back (other lines: `None`).
pub fn parse_count_line(line: &str) -> Option<(f64, u64)> {
    let mut w = line.split_whitespace();
    match (w.next(), w.next(), w.next()) {
        (Some("count"), Some(t), Some(n)) => Some((t.parse().ok()?, n.parse().ok()?)),
        _ => None,
    }
}

/// What to send.
#[derive(Debug, Clone)]
pub struct GenOpts {
    pub iface: String,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// Frame size without FCS (≥ 60).
    pub size: usize,
    /// Frames per second; `None` = as fast as possible.
    pub rate_pps: Option<f64>,
    pub duration: Duration,
    /// Write a send timestamp into every frame.
    pub stamp: bool,
    /// DSCP of the packets.
    pub dscp: u8,
    /// Send in bursts: this many frames (at `rate_pps` or as fast as possible), then nothing
    /// for the gap, again and again (`xoff bench reaction`: one PFC pause per burst).
    pub burst: Option<(u64, Duration)>,
}

fn template(o: &GenOpts) -> Vec<u8> {
    let size = o.size.max(60);
    let mut f = vec![0u8; size];
    EthernetRepr {
        src: o.src_mac,
        dst: o.dst_mac,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src: o.src_ip,
        dst: o.dst_ip,
        protocol: 17,
        dscp: o.dscp,
        ecn: 0,
        ttl: 64,
        payload_len: size - 34,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
    f[34..36].copy_from_slice(&9u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&((size - 34) as u16).to_be_bytes());
    f
}

/// Sends frames for `duration`; returns how many the kernel accepted.
pub fn generate(o: &GenOpts, stop: &AtomicBool) -> io::Result<u64> {
    let (mut ports, mut mem) =
        open_ports(std::slice::from_ref(&o.iface), 8192, None).map_err(io::Error::other)?;
    let port = &mut ports[0];
    let t = template(o);
    let mut free = mem.take_free(usize::MAX);
    for &f in &free {
        mem.with_mut(f, |d| d[..t.len()].copy_from_slice(&t));
    }
    let len = t.len() as u32;
    let start = Instant::now();
    let mut sent = 0u64;
    let mut batch: Vec<(FrameId, u32)> = Vec::with_capacity(64);
    let mut comp = Vec::with_capacity(2048);
    let mut rested = false;
    while start.elapsed() < o.duration && !stop.load(Ordering::Relaxed) {
        comp.clear();
        port.completions(&mut comp);
        free.extend_from_slice(&comp);
        let mut n = free.len().min(64);
        if let Some((size, gap)) = o.burst {
            let left = size - sent % size;
            if left == size && sent > 0 && !std::mem::take(&mut rested) {
                std::thread::sleep(gap);
                rested = true;
                continue;
            }
            n = n.min(left as usize);
        }
        if let Some(r) = o.rate_pps {
            let due = (start.elapsed().as_secs_f64() * r) as u64;
            n = n.min(due.saturating_sub(sent) as usize);
            if n == 0 {
                // Ahead of schedule: sleep rather than spin, so a paced generator leaves the
                // CPU to the device under test and the sink.
                let next = (sent + 1) as f64 / r;
                let wait = next - start.elapsed().as_secs_f64();
                if wait > 100e-6 {
                    std::thread::sleep(Duration::from_secs_f64(wait - 50e-6));
                } else {
                    // Let a sink sharing this core run instead of waiting out our time slice.
                    std::thread::yield_now();
                }
                continue;
            }
        }
        batch.clear();
        for _ in 0..n {
            let Some(f) = free.pop() else { break };
            if o.stamp {
                let ts = monotonic_ns();
                mem.with_mut(f, |d| {
                    d[STAMP_OFF..STAMP_OFF + 8].copy_from_slice(&ts.to_be_bytes())
                });
            }
            batch.push((f, len));
        }
        let k = port.tx_burst(&batch);
        sent += k as u64;
        rested = false;
        free.extend(batch[k..].iter().map(|&(f, _)| f));
    }
    Ok(sent)
}

/// The bare forwarder: whatever arrives on one port leaves on the other, nothing else.
pub fn forward(a: &str, b: &str, stop: &AtomicBool) -> io::Result<u64> {
    let (mut ports, mut mem) =
        open_ports(&[a.to_string(), b.to_string()], 16384, None).map_err(io::Error::other)?;
    let mut free = mem.take_free(usize::MAX);
    let mut rx = Vec::with_capacity(64);
    let mut pending: [Vec<(FrameId, u32)>; 2] = [Vec::new(), Vec::new()];
    let mut comp = Vec::new();
    let mut fwd = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..2 {
            comp.clear();
            ports[i].completions(&mut comp);
            free.extend_from_slice(&comp);
            ports[i].refill(&mut free);
            rx.clear();
            ports[i].rx_burst(&mut rx, 64);
            pending[1 - i].extend_from_slice(&rx);
        }
        for i in 0..2 {
            if !pending[i].is_empty() {
                let k = ports[i].tx_burst(&pending[i]);
                fwd += k as u64;
                pending[i].drain(..k);
                // A full TX ring: drop the excess rather than stall RX.
                if pending[i].len() > 4096 {
                    free.extend(pending[i].drain(..).map(|(f, _)| f));
                }
            }
        }
    }
    Ok(fwd)
}

/// One-way latencies of timestamped frames arriving on `iface`, busy polling.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LatencyReport {
    pub received: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

pub fn sink_latency(
    iface: &str,
    duration: Duration,
    stop: &AtomicBool,
) -> io::Result<LatencyReport> {
    let (mut ports, mut mem) =
        open_ports(&[iface.to_string()], 8192, None).map_err(io::Error::other)?;
    let mut free = mem.take_free(usize::MAX);
    let mut rx = Vec::with_capacity(64);
    let mut lat: Vec<u64> = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        ports[0].refill(&mut free);
        rx.clear();
        if ports[0].rx_burst(&mut rx, 64) == 0 {
            // Block until a frame arrives: the sink must not take CPU from what it measures.
            if let Some(fd) = ports[0].poll_fd() {
                dataplane::port::sys::wait_readable(&[fd], 1_000_000_000);
            }
            continue;
        }
        let now = monotonic_ns();
        for &(f, len) in &rx {
            let d = mem.data(f);
            if len as usize >= STAMP_OFF + 8 {
                let mut b = [0u8; 8];
                b.copy_from_slice(&d[STAMP_OFF..STAMP_OFF + 8]);
                let ts = u64::from_be_bytes(b);
                if ts != 0 && ts <= now && lat.len() < lat.capacity() {
                    lat.push(now - ts);
                }
            }
            free.push(f);
        }
    }
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    Ok(LatencyReport {
        received: lat.len() as u64,
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        max_ns: lat.last().copied().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_lines_read_back() {
        assert_eq!(count_line(2.5, 1234), "count 2.500 1234");
        assert_eq!(parse_count_line("count 2.500 1234"), Some((2.5, 1234)));
        assert_eq!(parse_count_line(&count_line(0.1, 0)), Some((0.1, 0)));
        assert_eq!(parse_count_line("sent 1025909"), None);
        assert_eq!(parse_count_line("count x 3"), None);
    }
}

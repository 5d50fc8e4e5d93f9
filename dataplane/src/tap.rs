//! Packet taps (issue 22 item 2): a running switch mirrors one port's frames, as received
//! and/or as transmitted (data shim included), to a client of its control socket, which
//! writes them to a pcap file (`xoff ctl tap`), without stopping forwarding.
//!
//! **Path of a frame.** The worker owning the port copies each frame into a buffer taken from
//! a fixed pool (the copy budget) and pushes it on a lock-free bounded queue
//! (`crossbeam_queue::ArrayQueue`); the control loop (`crate::ctl`) drains the queue into the
//! tap connection and gives the buffers back. A frame that finds the pool empty is counted
//! (`over_budget`), never queued, so a slow client costs frames in the capture, not memory or
//! time in the switch. When no tap is active the worker pays one relaxed atomic load per port
//! and burst ([`Taps::session`]).
//!
//! **Why the frames are streamed over the control connection** rather than written by the
//! switch: the client owns the file (its path, permissions, and the mount namespace it lives
//! in: the switch runs as root inside a testbed's namespaces), it can write to a pipe
//! (`--out -` into `wireshark -k -i -`), and the tap lives exactly as long as the connection,
//! so a client killed with Ctrl-C never leaves a switch copying frames for nobody. The cost is
//! a binary framing on a socket that otherwise speaks JSON lines; it starts only after the
//! `tap` request's first JSON line, so other requests are untouched.
//!
//! **The window.** The worker opens the window at its first look at the port after the tap is
//! attached and closes it when the client stops (EOF or `stop`), or inside a burst when
//! `count` frames were seen. At both edges it records the port's `rx_pkts` and `tx_pkts`. It is
//! these counters' only writer and takes them where every frame before the edge is counted
//! and none after it, so over the window `seen_rx == rx_end − rx_start` (and the same for tx)
//! holds exactly, and `captured + over_budget == seen_rx + seen_tx` for the tapped
//! directions: a capture can be checked frame for frame against the port counters.
//!
//! Stream after the request line `tap PORT DIR COUNT BUDGET`: one JSON line
//! (`{"tap":{..}}` or `{"error":".."}`), then records of a 17-byte header (caplen u32,
//! orig_len u32, Unix time ns u64, direction u8: 0 rx, 1 tx; big endian) and the frame bytes;
//! then an end record (caplen `u32::MAX`, the rest zero) and one JSON line, the
//! [`TapSummary`].

use crossbeam_queue::ArrayQueue;
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default copy budget: frames in flight between the worker and the client. At the veth
/// testbeds' ~100k frames/s and a 2 ms control-loop tick it is ~20 ticks of slack.
pub const DEFAULT_BUDGET: usize = 4096;
/// Largest budget a request may ask for (each frame buffer holds [`SNAP`] bytes).
pub const MAX_BUDGET: usize = 1 << 16;
/// Bytes kept of each frame: a whole UMEM chunk, so nothing a port can carry is cut.
pub const SNAP: usize = crate::port::xsk::CHUNK as usize;
/// How long the control loop waits for the worker to close a window it was asked to close
/// before reporting the tap incomplete (the port's worker stopped or the port died).
pub const STOP_GRACE: Duration = Duration::from_secs(2);
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 17;
/// `caplen` of the end record.
const END: u32 = u32::MAX;

/// Which frames of the port a tap copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TapDir {
    /// As received, before the pipeline touches them (shim still on).
    Rx,
    /// As handed to the TX ring (shim pushed).
    Tx,
    Both,
}

impl TapDir {
    pub fn parse(s: &str) -> Result<TapDir, String> {
        match s {
            "rx" => Ok(TapDir::Rx),
            "tx" => Ok(TapDir::Tx),
            "both" => Ok(TapDir::Both),
            _ => Err(format!("direction must be rx, tx or both, not `{s}`")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TapDir::Rx => "rx",
            TapDir::Tx => "tx",
            TapDir::Both => "both",
        }
    }

    fn rx(self) -> bool {
        self != TapDir::Tx
    }

    fn tx(self) -> bool {
        self != TapDir::Rx
    }
}

/// A `tap` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapRequest {
    /// Port name or index.
    pub port: String,
    pub dir: TapDir,
    /// Close the window after this many frames seen (0: when the client stops).
    pub count: u64,
    /// Copy budget (frames).
    pub budget: usize,
}

impl TapRequest {
    /// Parses `tap PORT DIR COUNT BUDGET`; `None` if the line is not a tap request at all.
    pub fn parse(line: &str) -> Option<Result<TapRequest, String>> {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() != Some(&"tap") {
            return None;
        }
        Some((|| {
            if w.len() != 5 {
                return Err("usage: tap PORT rx|tx|both COUNT BUDGET".to_string());
            }
            let num = |s: &str| s.parse::<u64>().map_err(|e| format!("bad number: {e}"));
            let budget = num(w[4])?;
            if budget == 0 || budget > MAX_BUDGET as u64 {
                return Err(format!("budget must be 1..={MAX_BUDGET} frames"));
            }
            Ok(TapRequest {
                port: w[1].to_string(),
                dir: TapDir::parse(w[2])?,
                count: num(w[3])?,
                budget: budget as usize,
            })
        })())
    }

    pub fn to_line(&self) -> String {
        format!(
            "tap {} {} {} {}",
            self.port,
            self.dir.as_str(),
            self.count,
            self.budget
        )
    }
}

/// What the switch says when a tap starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapStarted {
    pub port: usize,
    pub name: String,
    pub iface: String,
    pub dir: TapDir,
    pub budget: usize,
}

/// What the switch says when a tap ends: the window's edges and what was seen in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapSummary {
    pub port: usize,
    pub name: String,
    pub dir: TapDir,
    /// The port's `rx_pkts` / `tx_pkts` when the window opened and closed.
    pub rx_start: u64,
    pub rx_end: u64,
    pub tx_start: u64,
    pub tx_end: u64,
    /// Frames of the tapped directions seen in the window.
    pub seen_rx: u64,
    pub seen_tx: u64,
    /// Frames sent to the client, and frames that found the copy budget used up.
    pub captured: u64,
    pub over_budget: u64,
    /// Unix time (ns) of the window's edges.
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// False if the worker never closed the window (its port went away): then the counters
    /// are those at the last look.
    pub complete: bool,
}

/// Session states.
const ARMED: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;

/// One copied frame.
struct Record {
    ts_ns: u64,
    orig_len: u32,
    tx: bool,
    data: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Edge {
    rx: u64,
    tx: u64,
    unix_ns: u64,
}

/// A tap on one port: written by the port's worker, read by the control loop.
pub struct Session {
    port: usize,
    dir: TapDir,
    count: u64,
    state: AtomicU8,
    stop: AtomicBool,
    full: ArrayQueue<Record>,
    free: ArrayQueue<Vec<u8>>,
    // Single writer (the worker): plain load/store, read by the control loop after DONE.
    seen_rx: AtomicU64,
    seen_tx: AtomicU64,
    captured: AtomicU64,
    over_budget: AtomicU64,
    edges: Mutex<(Edge, Edge)>,
}

fn bump(c: &AtomicU64) -> u64 {
    let v = c.load(Ordering::Relaxed) + 1;
    c.store(v, Ordering::Relaxed);
    v
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Session {
    fn new(port: usize, dir: TapDir, count: u64, budget: usize) -> Session {
        let free = ArrayQueue::new(budget);
        for _ in 0..budget {
            let _ = free.push(Vec::with_capacity(SNAP));
        }
        Session {
            port,
            dir,
            count,
            state: AtomicU8::new(ARMED),
            stop: AtomicBool::new(false),
            full: ArrayQueue::new(budget),
            free,
            seen_rx: AtomicU64::new(0),
            seen_tx: AtomicU64::new(0),
            captured: AtomicU64::new(0),
            over_budget: AtomicU64::new(0),
            edges: Mutex::new((Edge::default(), Edge::default())),
        }
    }

    /// A window edge, on the worker: opens an armed window, closes one the client stopped.
    /// `rx`/`tx` are the port's counters now. True while the window is open.
    fn boundary(&self, rx: u64, tx: u64) -> bool {
        match self.state.load(Ordering::Acquire) {
            ARMED => {
                if let Ok(mut e) = self.edges.lock() {
                    e.0 = Edge {
                        rx,
                        tx,
                        unix_ns: unix_ns(),
                    };
                }
                self.state.store(RUNNING, Ordering::Release);
            }
            DONE => return false,
            _ => {}
        }
        if self.stop.load(Ordering::Acquire) {
            self.finish(rx, tx);
            return false;
        }
        true
    }

    fn finish(&self, rx: u64, tx: u64) {
        if let Ok(mut e) = self.edges.lock() {
            e.1 = Edge {
                rx,
                tx,
                unix_ns: unix_ns(),
            };
        }
        self.state.store(DONE, Ordering::Release);
    }

    /// Copies one frame if the budget allows; true if it was the window's last.
    fn offer(&self, tx: bool, data: &[u8], ts_ns: u64) -> bool {
        let seen = bump(if tx { &self.seen_tx } else { &self.seen_rx });
        match self.free.pop() {
            Some(mut buf) => {
                buf.clear();
                buf.extend_from_slice(&data[..data.len().min(SNAP)]);
                let r = Record {
                    ts_ns,
                    orig_len: data.len() as u32,
                    tx,
                    data: buf,
                };
                // `full` holds as many slots as there are buffers: never refused.
                if self.full.push(r).is_ok() {
                    bump(&self.captured);
                } else {
                    bump(&self.over_budget);
                }
            }
            None => {
                bump(&self.over_budget);
            }
        }
        let other = if tx { &self.seen_rx } else { &self.seen_tx };
        self.count != 0 && seen + other.load(Ordering::Relaxed) >= self.count
    }

    /// The worker's look at a received burst, before the pipeline counts it: `rx`/`tx` are
    /// the port's counters before the burst (frame i is counted as `rx + i + 1`).
    pub fn on_rx<'a>(&self, frames: impl Iterator<Item = &'a [u8]>, rx: u64, tx: u64) {
        if !self.boundary(rx, tx) || !self.dir.rx() {
            return;
        }
        let ts = unix_ns();
        for (i, f) in frames.enumerate() {
            if self.offer(false, f, ts) {
                return self.finish(rx + i as u64 + 1, tx);
            }
        }
    }

    /// The worker's look at the frames the TX ring took, before they are added to `tx_pkts`:
    /// `rx`/`tx` are the port's counters now.
    pub fn on_tx<'a>(&self, frames: impl Iterator<Item = &'a [u8]>, rx: u64, tx: u64) {
        if !self.boundary(rx, tx) || !self.dir.tx() {
            return;
        }
        let ts = unix_ns();
        for (i, f) in frames.enumerate() {
            if self.offer(true, f, ts) {
                return self.finish(rx, tx + i as u64 + 1);
            }
        }
    }
}

struct PortTap {
    name: String,
    iface: String,
    on: AtomicBool,
    slot: Mutex<Option<Arc<Session>>>,
}

/// The tap slots of a switch's ports (in `SwitchShared`): at most one tap per port.
pub struct Taps {
    ports: Vec<PortTap>,
}

impl std::fmt::Debug for Taps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on: Vec<&str> = self
            .ports
            .iter()
            .filter(|p| p.on.load(Ordering::Relaxed))
            .map(|p| p.name.as_str())
            .collect();
        f.debug_struct("Taps").field("tapped", &on).finish()
    }
}

impl Taps {
    pub fn new(spec: &crate::SwitchSpec) -> Taps {
        Taps {
            ports: spec
                .ports
                .iter()
                .map(|p| PortTap {
                    name: p.name.clone(),
                    iface: p.iface.clone(),
                    on: AtomicBool::new(false),
                    slot: Mutex::new(None),
                })
                .collect(),
        }
    }

    /// The tap on `port`, if any: one relaxed load when there is none.
    #[inline]
    pub fn session(&self, port: usize) -> Option<Arc<Session>> {
        let p = self.ports.get(port)?;
        if !p.on.load(Ordering::Relaxed) {
            return None;
        }
        Self::attached(p)
    }

    #[cold]
    fn attached(p: &PortTap) -> Option<Arc<Session>> {
        p.slot.lock().ok()?.clone()
    }

    fn port_index(&self, port: &str) -> Result<usize, String> {
        if let Some(i) = self.ports.iter().position(|p| p.name == port) {
            return Ok(i);
        }
        match port.parse::<usize>() {
            Ok(i) if i < self.ports.len() => Ok(i),
            _ => Err(format!("no port `{port}`")),
        }
    }

    fn detach(&self, port: usize) {
        let p = &self.ports[port];
        p.on.store(false, Ordering::Relaxed);
        if let Ok(mut s) = p.slot.lock() {
            *s = None;
        }
    }
}

/// The control loop's side of one tap: owns the session until the summary is written.
pub struct TapStream {
    taps: Arc<Taps>,
    session: Arc<Session>,
    stop_at: Option<Instant>,
    finished: bool,
}

impl TapStream {
    /// Attaches a tap; returns it and its first answer line (newline included).
    pub fn open(taps: &Arc<Taps>, req: &TapRequest) -> Result<(TapStream, Vec<u8>), String> {
        let port = taps.port_index(&req.port)?;
        let p = &taps.ports[port];
        let session = Arc::new(Session::new(port, req.dir, req.count, req.budget));
        {
            let mut slot = p.slot.lock().map_err(|_| "tap slot poisoned".to_string())?;
            if slot.is_some() {
                return Err(format!("port `{}` is already tapped", p.name));
            }
            *slot = Some(session.clone());
        }
        p.on.store(true, Ordering::Release);
        let started = TapStarted {
            port,
            name: p.name.clone(),
            iface: p.iface.clone(),
            dir: req.dir,
            budget: req.budget,
        };
        let mut line = serde_json::to_vec(&serde_json::json!({ "tap": started }))
            .map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok((
            TapStream {
                taps: taps.clone(),
                session,
                stop_at: None,
                finished: false,
            },
            line,
        ))
    }

    /// The client stopped: the worker closes the window at its next look at the port.
    pub fn request_stop(&mut self) {
        if self.stop_at.is_none() {
            self.stop_at = Some(Instant::now());
            self.session.stop.store(true, Ordering::Release);
        }
    }

    /// Moves copied frames into `out` while it holds fewer than `room` more bytes; once the
    /// window is closed and drained, appends the end record and the summary, detaches the tap
    /// and returns true.
    pub fn pump(&mut self, out: &mut Vec<u8>, room: usize) -> bool {
        if self.finished {
            return true;
        }
        let s = &self.session;
        // Read before draining: every record pushed before DONE is then in the queue.
        let done = s.state.load(Ordering::Acquire) == DONE;
        let limit = out.len().saturating_add(room);
        while out.len() < limit {
            let Some(r) = s.full.pop() else { break };
            let caplen = r.data.len() as u32;
            out.extend_from_slice(&caplen.to_be_bytes());
            out.extend_from_slice(&r.orig_len.to_be_bytes());
            out.extend_from_slice(&r.ts_ns.to_be_bytes());
            out.push(u8::from(r.tx));
            out.extend_from_slice(&r.data);
            let _ = s.free.push(r.data);
        }
        let lost = !done && self.stop_at.is_some_and(|t| t.elapsed() > STOP_GRACE);
        if !(done && s.full.is_empty() || lost) {
            return false;
        }
        if lost {
            // Whatever the worker copied is sent; the window has no closing edge.
            while let Some(r) = s.full.pop() {
                let _ = s.free.push(r.data);
            }
        }
        let (start, end) = s.edges.lock().map(|e| *e).unwrap_or_default();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let summary = TapSummary {
            port: s.port,
            name: self.taps.ports[s.port].name.clone(),
            dir: s.dir,
            rx_start: start.rx,
            rx_end: end.rx,
            tx_start: start.tx,
            tx_end: end.tx,
            seen_rx: load(&s.seen_rx),
            seen_tx: load(&s.seen_tx),
            captured: load(&s.captured),
            over_budget: load(&s.over_budget),
            start_unix_ns: start.unix_ns,
            end_unix_ns: end.unix_ns,
            complete: !lost,
        };
        out.extend_from_slice(&END.to_be_bytes());
        out.extend_from_slice(&[0u8; RECORD_HEADER - 4]);
        if let Ok(v) = serde_json::to_vec(&summary) {
            out.extend_from_slice(&v);
        }
        out.push(b'\n');
        self.taps.detach(s.port);
        self.finished = true;
        true
    }
}

impl Drop for TapStream {
    /// A connection closed under a running tap detaches it.
    fn drop(&mut self) {
        if !self.finished {
            self.session.stop.store(true, Ordering::Release);
            self.taps.detach(self.session.port);
        }
    }
}

/// A frame as the client receives it.
#[derive(Debug, Clone, Copy)]
pub struct TapFrame<'a> {
    pub unix_ns: u64,
    pub orig_len: u32,
    pub tx: bool,
    pub data: &'a [u8],
}

/// Errors of [`capture`].
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("switch refused the tap: {0}")]
    Refused(String),
    #[error("bad tap stream: {0}")]
    Protocol(String),
}

/// Runs a tap on the switch at `sock`: calls `started` once, `frame` for every frame, and
/// returns the summary. The tap ends at the request's count, or when `stop` becomes true
/// (then the client half-closes the connection and the switch closes the window).
pub fn capture(
    sock: &Path,
    req: &TapRequest,
    stop: &AtomicBool,
    started: impl FnOnce(&TapStarted),
    mut frame: impl FnMut(TapFrame<'_>) -> io::Result<()>,
) -> Result<TapSummary, TapError> {
    let mut s = UnixStream::connect(sock)?;
    s.write_all(format!("{}\n", req.to_line()).as_bytes())?;
    let mut rd = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    rd.read_line(&mut line)?;
    let v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| TapError::Protocol(e.to_string()))?;
    if let Some(e) = v.get("error") {
        return Err(TapError::Refused(
            e.as_str().unwrap_or_default().to_string(),
        ));
    }
    let st: TapStarted = serde_json::from_value(v.get("tap").cloned().unwrap_or_default())
        .map_err(|e| TapError::Protocol(e.to_string()))?;
    started(&st);
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf: Vec<u8> = rd.buffer().to_vec();
    drop(rd);
    let mut at = 0usize;
    let mut stopped = false;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        // Every complete record in `buf`.
        while buf.len() - at >= RECORD_HEADER {
            let h = &buf[at..at + RECORD_HEADER];
            let caplen = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            if caplen == END {
                let rest = &buf[at + RECORD_HEADER..];
                if let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                    return serde_json::from_slice(&rest[..nl])
                        .map_err(|e| TapError::Protocol(e.to_string()));
                }
                break;
            }
            let caplen = caplen as usize;
            if caplen > SNAP {
                return Err(TapError::Protocol(format!("record of {caplen} bytes")));
            }
            if buf.len() - at < RECORD_HEADER + caplen {
                break;
            }
            let orig_len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&h[8..16]);
            frame(TapFrame {
                unix_ns: u64::from_be_bytes(ts),
                orig_len,
                tx: h[16] == 1,
                data: &buf[at + RECORD_HEADER..at + RECORD_HEADER + caplen],
            })?;
            at += RECORD_HEADER + caplen;
        }
        buf.drain(..at);
        at = 0;
        if !stopped && stop.load(Ordering::Relaxed) {
            stopped = true;
            s.shutdown(std::net::Shutdown::Write)?;
        }
        match s.read(&mut chunk) {
            Ok(0) => {
                return Err(TapError::Protocol(
                    "the switch closed the tap without a summary".into(),
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taps(n: usize) -> Arc<Taps> {
        Arc::new(Taps {
            ports: (0..n)
                .map(|i| PortTap {
                    name: format!("p{}", i + 1),
                    iface: format!("veth{i}"),
                    on: AtomicBool::new(false),
                    slot: Mutex::new(None),
                })
                .collect(),
        })
    }

    fn req(port: &str, dir: TapDir, count: u64, budget: usize) -> TapRequest {
        TapRequest {
            port: port.into(),
            dir,
            count,
            budget,
        }
    }

    /// Decodes a server stream into (frames, summary).
    fn decode(mut b: &[u8]) -> (Vec<(bool, Vec<u8>)>, TapSummary) {
        let mut frames = Vec::new();
        loop {
            let caplen = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if caplen == END {
                let s = &b[RECORD_HEADER..];
                let nl = s.iter().position(|&c| c == b'\n').unwrap();
                return (frames, serde_json::from_slice(&s[..nl]).unwrap());
            }
            let n = caplen as usize;
            frames.push((b[16] == 1, b[RECORD_HEADER..RECORD_HEADER + n].to_vec()));
            b = &b[RECORD_HEADER + n..];
        }
    }

    #[test]
    fn request_line_roundtrip_and_refusals() {
        let r = req("p2", TapDir::Both, 10, 64);
        assert_eq!(TapRequest::parse(&r.to_line()), Some(Ok(r)));
        assert_eq!(TapRequest::parse("stats"), None);
        assert!(TapRequest::parse("tap p1 up 0 1").unwrap().is_err());
        assert!(TapRequest::parse("tap p1 rx 0 0").unwrap().is_err());
        assert!(TapRequest::parse("tap p1 rx 0").unwrap().is_err());
    }

    /// Off costs nothing visible: no session; a second tap on a port is refused; a tap on
    /// an unknown port is refused.
    #[test]
    fn attach_and_refuse() {
        let t = taps(2);
        assert!(t.session(0).is_none());
        let (s, line) = TapStream::open(&t, &req("p1", TapDir::Rx, 0, 4)).unwrap();
        assert!(String::from_utf8(line)
            .unwrap()
            .contains("\"iface\":\"veth0\""));
        assert!(t.session(0).is_some() && t.session(1).is_none());
        assert!(TapStream::open(&t, &req("0", TapDir::Tx, 0, 4)).is_err());
        assert!(TapStream::open(&t, &req("p9", TapDir::Tx, 0, 4)).is_err());
        drop(s);
        assert!(t.session(0).is_none(), "dropping the stream detaches");
    }

    /// Window accounting: the worker's edges bracket exactly the frames it offered; frames
    /// beyond the budget are counted, not queued.
    #[test]
    fn window_is_exact_with_budget_overflow() {
        let t = taps(1);
        let (mut st, _) = TapStream::open(&t, &req("p1", TapDir::Both, 0, 3)).unwrap();
        let s = t.session(0).unwrap();
        let (mut rx, mut tx) = (100u64, 50u64);
        let f: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        // Burst 1: 5 frames received; budget 3: 2 over.
        s.on_rx(f.iter().map(|v| &v[..]), rx, tx);
        rx += 5;
        // The control loop drains 3: room for 3 more.
        let mut out = Vec::new();
        assert!(!st.pump(&mut out, usize::MAX));
        // Burst 2: 2 frames transmitted.
        s.on_tx(f[..2].iter().map(|v| &v[..]), rx, tx);
        tx += 2;
        st.request_stop();
        assert!(
            !st.pump(&mut out, usize::MAX),
            "the worker has not looked yet"
        );
        s.on_rx(std::iter::empty(), rx, tx); // next look closes the window
        assert!(st.pump(&mut out, usize::MAX));
        let (frames, sum) = decode(&out);
        assert_eq!(frames.len(), 5);
        assert_eq!(frames[0], (false, f[0].clone()));
        assert_eq!(frames[3], (true, f[0].clone()));
        assert_eq!(
            (sum.rx_start, sum.rx_end, sum.tx_start, sum.tx_end),
            (100, 105, 50, 52)
        );
        assert_eq!((sum.seen_rx, sum.seen_tx), (5, 2));
        assert_eq!((sum.captured, sum.over_budget), (5, 2));
        assert!(sum.complete);
        assert!(t.session(0).is_none(), "detached after the summary");
    }

    /// `count` closes the window inside a burst, at the frame that reaches it.
    #[test]
    fn count_closes_mid_burst() {
        let t = taps(1);
        let (mut st, _) = TapStream::open(&t, &req("p1", TapDir::Tx, 3, 16)).unwrap();
        let s = t.session(0).unwrap();
        let f = vec![vec![7u8; 64]; 5];
        s.on_rx(f.iter().map(|v| &v[..]), 10, 20); // opens; rx not tapped
        s.on_tx(f.iter().map(|v| &v[..]), 15, 20);
        let mut out = Vec::new();
        assert!(st.pump(&mut out, usize::MAX));
        let (frames, sum) = decode(&out);
        assert_eq!(frames.len(), 3);
        assert_eq!(
            (sum.tx_start, sum.tx_end, sum.seen_tx, sum.seen_rx),
            (20, 23, 3, 0)
        );
        assert_eq!((sum.rx_start, sum.rx_end), (10, 15));
    }

    /// The control loop moves no more than the connection has room for.
    #[test]
    fn room_bounds_the_output() {
        let t = taps(1);
        let (mut st, _) = TapStream::open(&t, &req("p1", TapDir::Rx, 0, 8)).unwrap();
        let s = t.session(0).unwrap();
        let f = vec![vec![1u8; 100]; 4];
        s.on_rx(f.iter().map(|v| &v[..]), 0, 0);
        let mut out = Vec::new();
        st.pump(&mut out, 1);
        assert_eq!(
            out.len(),
            RECORD_HEADER + 100,
            "one record, then the room is used"
        );
    }
}

//! The control socket of a running switch: a Unix stream socket (mode 0600) answering one
//! request per line with one JSON document per line.
//!
//! Requests: `stats`; `pause <port> <queue>`; `resume <port> <queue>`. External controllers
//! that need microseconds rather than a socket round trip write the AFC ring next to the socket
//! instead ([`afc_path`], `dataplane::port::shm`).
//!
//! One `mio` event loop (the design card's event-loop crate; issue 21 item 7) serves every
//! connection at once, so a client that connects and says nothing holds nobody else up. Each
//! connection's memory is bounded: a request line longer than [`Limits::max_request`] is
//! answered with a short error (the request is never echoed) and the connection closed; a
//! client that does not read its answers stops being read once [`Limits::max_pending`] bytes
//! wait for it; a connection silent for [`Limits::idle`] is closed. The same loop watches link
//! state through an rtnetlink socket ([`LinkWatch`]), so a port going down, up or vanishing is
//! seen the moment the kernel says so rather than by a failing send.
//!
//! A `tap` request ([`crate::tap`], served when the loop is given the switch's taps by
//! [`serve_with_taps`]) turns its connection into a stream of the port's frames until the
//! client half-closes it or the requested count is reached; such a connection is exempt from
//! the idle limit, and the loop wakes every [`TAP_TICK`] while one is open to move frames.

use crate::stats::SwitchSnapshot;
use mio::net::{UnixListener, UnixStream as MioStream};
use mio::{Events, Interest, Poll, Token, Waker};
use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest request line the server reads (bytes, without the newline). Real requests are a
/// few dozen bytes; the bound keeps a client that never sends a newline from growing memory.
pub const MAX_REQUEST: usize = 64 * 1024;

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Stats,
    /// The lossless audit (`crate::audit`).
    Audit,
    Pause {
        port: usize,
        queue: usize,
    },
    Resume {
        port: usize,
        queue: usize,
    },
}

/// How much of an unknown request word an error message repeats.
const ECHO_MAX: usize = 32;

impl Request {
    pub fn parse(line: &str) -> Result<Request, String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<usize, String> {
            w.get(i)
                .ok_or("missing argument")?
                .parse::<usize>()
                .map_err(|e| format!("bad number: {e}"))
        };
        match w.first().copied() {
            Some("stats") => Ok(Request::Stats),
            Some("audit") => Ok(Request::Audit),
            Some("pause") => Ok(Request::Pause {
                port: num(1)?,
                queue: num(2)?,
            }),
            Some("resume") => Ok(Request::Resume {
                port: num(1)?,
                queue: num(2)?,
            }),
            // Only the start of an unknown word is repeated: the answer stays short whatever
            // a client sends.
            Some(c) => Err(match c.char_indices().nth(ECHO_MAX) {
                Some((cut, _)) => format!("unknown request `{}...`", &c[..cut]),
                None => format!("unknown request `{c}`"),
            }),
            None => Err("empty request".into()),
        }
    }

    pub fn to_line(&self) -> String {
        match self {
            Request::Stats => "stats".into(),
            Request::Audit => "audit".into(),
            Request::Pause { port, queue } => format!("pause {port} {queue}"),
            Request::Resume { port, queue } => format!("resume {port} {queue}"),
        }
    }
}

/// A control response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Stats(Box<SwitchSnapshot>),
    Audit(Box<crate::audit::Audit>),
    Ok,
    Error(String),
}

/// Bounds on what one client may make the server hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest request line in bytes; a longer one is refused and its connection closed.
    pub max_request: usize,
    /// Answer bytes a connection may leave unread before the server stops reading its
    /// requests (one answer is always written, so a large `stats` still goes out).
    pub max_pending: usize,
    /// A connection without a byte in either direction for this long is closed (the old
    /// one-at-a-time server's read timeout).
    pub idle: Duration,
    /// Connections served at once; one more is told so and closed.
    pub max_conns: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request: MAX_REQUEST,
            max_pending: 1 << 20,
            idle: Duration::from_secs(5),
            max_conns: 4096,
        }
    }
}

/// A change of a port's link state, as rtnetlink reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkChange {
    /// Index of the port (in the order of [`LinkWatch::ifaces`]).
    pub port: usize,
    pub iface: String,
    pub state: LinkState,
    /// The state before (`None`: never seen, e.g. deleted before the first dump named it).
    pub was: Option<LinkState>,
}

impl LinkChange {
    /// The port went from up (or unknown) to down or gone: a `port_down`.
    pub fn went_down(&self) -> bool {
        self.state != LinkState::Up && matches!(self.was, Some(LinkState::Up) | None)
    }

    /// The port came up: a `port_up`.
    pub fn came_up(&self) -> bool {
        self.state == LinkState::Up
    }
}

/// Link state of a port: up means administratively up with carrier (`IFF_UP` and
/// `IFF_LOWER_UP`), which is what forwarding needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Up,
    Down,
    /// The interface was deleted (or moved out of the namespace).
    Gone,
}

/// Ports whose link state the control loop watches, and what to do on a change (the switch
/// counts it). Every change is also logged at INFO with the interface name.
pub struct LinkWatch {
    pub ifaces: Vec<String>,
    pub on_change: Box<dyn FnMut(&LinkChange) + Send>,
}

/// A running control server. Dropping it leaves the server running for the life of the
/// process (as `xoff run` wants); [`Server::shutdown`] stops it.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the loop, closes every connection and removes the socket file.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves requests on `path` with the default [`Limits`] until the process exits; `handle`
/// answers each request.
pub fn serve(
    path: &Path,
    handle: impl FnMut(Request) -> Response + Send + 'static,
) -> io::Result<Server> {
    serve_with(path, Limits::default(), None, handle)
}

/// How often the loop moves tapped frames to their clients while a tap is open.
pub const TAP_TICK: Duration = Duration::from_millis(2);

/// [`serve_with`], also answering `tap` requests on the switch's `taps`.
pub fn serve_with_taps(
    path: &Path,
    limits: Limits,
    links: Option<LinkWatch>,
    taps: Arc<crate::tap::Taps>,
    handle: impl FnMut(Request) -> Response + Send + 'static,
) -> io::Result<Server> {
    serve_inner(path, limits, links, Some(taps), handle)
}

/// Serves requests on `path` within `limits`, watching `links` on the same loop. Raises the
/// process's soft open-file limit to its hard limit (`port::sys::raise_nofile`).
pub fn serve_with(
    path: &Path,
    limits: Limits,
    links: Option<LinkWatch>,
    handle: impl FnMut(Request) -> Response + Send + 'static,
) -> io::Result<Server> {
    serve_inner(path, limits, links, None, handle)
}

fn serve_inner(
    path: &Path,
    limits: Limits,
    links: Option<LinkWatch>,
    taps: Option<Arc<crate::tap::Taps>>,
    handle: impl FnMut(Request) -> Response + Send + 'static,
) -> io::Result<Server> {
    // Room for `max_conns` clients besides the switch's own sockets.
    if let Err(e) = crate::port::sys::raise_nofile() {
        tracing::warn!("control socket: cannot raise the open-file limit: {e}");
    }
    let listener = bind_private(path)?;
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let links = links.map(LinkMonitor::new).transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut lp = Loop {
        poll,
        listener,
        links,
        conns: Vec::new(),
        free: Vec::new(),
        live: 0,
        limits,
        handle: Box::new(handle),
        stop: stop.clone(),
        accept_paused: false,
        taps,
        tapping: 0,
    };
    lp.register()?;
    let thread = std::thread::Builder::new()
        .name("xoff-ctl".into())
        .spawn(move || lp.run())?;
    Ok(Server {
        path: path.to_path_buf(),
        stop,
        waker,
        thread: Some(thread),
    })
}

/// Binds the socket under a temporary name, makes it 0600 and renames it into place, so the
/// socket is never reachable at `path` with the umask's wider mode.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const NETLINK: Token = Token(2);
const FIRST_CONN: usize = 3;

/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 16 * 1024;

/// How often idle connections are looked for (at most; the idle limit may be shorter in tests).
const SWEEP: Duration = Duration::from_millis(250);

struct Conn {
    stream: MioStream,
    /// Bytes of requests not yet answered: at most `max_request + READ_CHUNK`.
    inbuf: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    last: Instant,
    /// The peer will send no more (EOF) or the connection is being closed after an error:
    /// nothing more is read; the connection closes once its answers are written.
    closing: bool,
    /// A tap streaming on this connection (`crate::tap`).
    tap: Option<crate::tap::TapStream>,
}

struct Loop {
    poll: Poll,
    listener: UnixListener,
    links: Option<LinkMonitor>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    limits: Limits,
    handle: Box<dyn FnMut(Request) -> Response + Send>,
    stop: Arc<AtomicBool>,
    /// `accept` failed (e.g. out of file descriptors): retried at the next sweep rather than
    /// spinning on a listener that stays readable.
    accept_paused: bool,
    /// The switch's taps, if this server answers `tap` requests.
    taps: Option<Arc<crate::tap::Taps>>,
    /// Connections with an open tap.
    tapping: usize,
}

impl Loop {
    fn register(&mut self) -> io::Result<()> {
        self.poll
            .registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)?;
        if let Some(l) = &mut self.links {
            self.poll
                .registry()
                .register(&mut l.sock, NETLINK, Interest::READABLE)?;
            l.request_dump();
            l.drain();
        }
        Ok(())
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let sweep_every = SWEEP
            .min(self.limits.idle / 4)
            .max(Duration::from_millis(1));
        let mut next_sweep = Instant::now() + sweep_every;
        while !self.stop.load(Ordering::Acquire) {
            let mut timeout = next_sweep.saturating_duration_since(Instant::now());
            if self.tapping > 0 {
                timeout = timeout.min(TAP_TICK);
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("control socket event loop: {e}");
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    NETLINK => {
                        if let Some(l) = &mut self.links {
                            l.drain();
                        }
                    }
                    Token(t) => self.pump(t - FIRST_CONN),
                }
            }
            if self.tapping > 0 {
                self.pump_taps();
            }
            if Instant::now() >= next_sweep {
                self.sweep();
                if self.accept_paused {
                    self.accept_paused = false;
                    self.accept();
                }
                next_sweep = Instant::now() + sweep_every;
            }
        }
    }

    fn accept(&mut self) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("control socket: accept: {e}; retrying shortly");
                    self.accept_paused = true;
                    return;
                }
            };
            if self.live >= self.limits.max_conns {
                // A fresh socket's send buffer is empty: the short line fits.
                let _ = stream.write_all(&error_line("too many connections"));
                continue;
            }
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let reg = self.poll.registry().register(
                &mut stream,
                Token(slot + FIRST_CONN),
                Interest::READABLE | Interest::WRITABLE,
            );
            if reg.is_err() {
                self.free.push(slot);
                continue;
            }
            self.conns[slot] = Some(Conn {
                stream,
                inbuf: Vec::new(),
                out: Vec::new(),
                sent: 0,
                last: Instant::now(),
                closing: false,
                tap: None,
            });
            self.live += 1;
            self.pump(slot);
        }
    }

    /// Moves a connection as far as it can go: writes pending answers, answers complete
    /// requests while the answer budget allows, reads more. Readiness is edge-triggered, so
    /// this runs until the socket would block (or the budget says stop).
    fn pump(&mut self, slot: usize) {
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        let limits = &self.limits;
        let handle = &mut self.handle;
        let had_tap = c.tap.is_some();
        let mut buf = [0u8; READ_CHUNK];
        let keep = loop {
            match flush(c) {
                Ok(()) => {}
                Err(_) => break false,
            }
            if c.out.len() - c.sent > limits.max_pending {
                break true; // wait for the client to read; WRITABLE brings us back
            }
            if let Some(t) = &mut c.tap {
                let room = limits.max_pending - (c.out.len() - c.sent);
                let before = c.out.len();
                if t.pump(&mut c.out, room) {
                    c.tap = None;
                    c.closing = true;
                }
                if c.out.len() > before {
                    continue;
                }
            }
            if let Some(i) = c.inbuf.iter().position(|&b| b == b'\n') {
                if i > limits.max_request {
                    refuse_long(c, limits);
                    continue;
                }
                let mut line: Vec<u8> = c.inbuf.drain(..=i).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if let Some(t) = &mut c.tap {
                    // A tapping connection reads only `stop`; it writes nothing but frames.
                    if line.trim_ascii() == b"stop" {
                        t.request_stop();
                    }
                    continue;
                }
                if let Some(tap) = tap_request(&self.taps, &line) {
                    match tap {
                        Ok((t, first)) => {
                            c.out.extend_from_slice(&first);
                            c.tap = Some(t);
                        }
                        Err(e) => c.out.extend_from_slice(&error_line(&e)),
                    }
                    continue;
                }
                answer(c, handle, &line);
                continue;
            }
            if c.inbuf.len() > limits.max_request {
                refuse_long(c, limits);
                continue;
            }
            if c.closing {
                if let Some(t) = &mut c.tap {
                    t.request_stop();
                    break true; // the tick brings the rest of the window
                }
                if c.sent == c.out.len() {
                    break false;
                }
                break true;
            }
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    // EOF: a last line without its newline is still a request (as
                    // `BufRead::lines` had it).
                    c.closing = true;
                    if !c.inbuf.is_empty() {
                        let line = std::mem::take(&mut c.inbuf);
                        answer(c, handle, &line);
                    }
                }
                Ok(n) => {
                    c.last = Instant::now();
                    c.inbuf.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break false,
            }
        };
        let has_tap = matches!(&self.conns[slot], Some(c) if c.tap.is_some());
        if !keep {
            self.close(slot); // drops a tap still open: it detaches
        }
        let has_tap = has_tap && keep;
        match (had_tap, has_tap) {
            (false, true) => self.tapping += 1,
            (true, false) => self.tapping -= 1,
            _ => {}
        }
    }

    /// Moves tapped frames on every connection with an open tap.
    fn pump_taps(&mut self) {
        let open: Vec<usize> = (0..self.conns.len())
            .filter(|&i| matches!(&self.conns[i], Some(c) if c.tap.is_some()))
            .collect();
        for i in open {
            self.pump(i);
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut c) = self.conns[slot].take() {
            let _ = self.poll.registry().deregister(&mut c.stream);
            self.free.push(slot);
            self.live -= 1;
        }
    }

    /// Closes connections silent for longer than the idle limit.
    fn sweep(&mut self) {
        let now = Instant::now();
        let idle = self.limits.idle;
        let stale: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .filter(|c| c.tap.is_none() && now.duration_since(c.last) > idle)
                    .map(|_| i)
            })
            .collect();
        for i in stale {
            self.close(i);
        }
    }
}

/// Writes what is pending; Ok when done or the socket would block.
fn flush(c: &mut Conn) -> io::Result<()> {
    while c.sent < c.out.len() {
        match c.stream.write(&c.out[c.sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                c.sent += n;
                c.last = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.out.clear();
    c.sent = 0;
    Ok(())
}

/// Answers a request line that is too long: a short error naming the limit, never the
/// request; nothing more is read and the connection closes once the error is written.
fn refuse_long(c: &mut Conn, limits: &Limits) {
    c.inbuf = Vec::new();
    c.closing = true;
    c.out.extend_from_slice(&error_line(&format!(
        "request longer than {} bytes",
        limits.max_request
    )));
}

fn answer(c: &mut Conn, handle: &mut Box<dyn FnMut(Request) -> Response + Send>, line: &[u8]) {
    let resp = match std::str::from_utf8(line) {
        Ok(s) => match Request::parse(s) {
            Ok(r) => handle(r),
            Err(e) => Response::Error(e),
        },
        Err(_) => Response::Error("request is not UTF-8".into()),
    };
    let mut s = serde_json::to_string(&resp).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    c.out.extend_from_slice(s.as_bytes());
}

/// A `tap` line opens a tap when the server has taps; `None` if the line is no tap request.
#[allow(clippy::type_complexity)]
fn tap_request(
    taps: &Option<Arc<crate::tap::Taps>>,
    line: &[u8],
) -> Option<Result<(crate::tap::TapStream, Vec<u8>), String>> {
    let req = crate::tap::TapRequest::parse(std::str::from_utf8(line).ok()?)?;
    let Some(taps) = taps else {
        return Some(Err("this server has no taps".into()));
    };
    Some(req.and_then(|r| crate::tap::TapStream::open(taps, &r)))
}

fn error_line(msg: &str) -> Vec<u8> {
    let mut s = serde_json::to_string(&Response::Error(msg.into()))
        .unwrap_or_else(|_| "{\"error\":\"error\"}".into());
    s.push('\n');
    s.into_bytes()
}

/// An rtnetlink socket subscribed to link changes (`RTMGRP_LINK`), with the last state seen
/// of every watched port.
struct LinkMonitor {
    sock: netlink_sys::Socket,
    watch: LinkWatch,
    /// Last state of each port; `None` until the first dump or event names it.
    state: Vec<Option<LinkState>>,
    buf: Vec<u8>,
}

/// rtnetlink multicast group of link messages (`RTMGRP_LINK` in `linux/rtnetlink.h`).
const RTMGRP_LINK: u32 = 1;

impl LinkMonitor {
    fn new(watch: LinkWatch) -> io::Result<Self> {
        let mut sock = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        sock.bind(&netlink_sys::SocketAddr::new(0, RTMGRP_LINK))?;
        sock.set_non_blocking(true)?;
        // Link messages come in bursts when many veths change at once (a testbed going
        // down): room for them, and a full buffer is caught up on by a dump (`drain`).
        let _ = sock.set_rx_buf_sz(1 << 20);
        let state = vec![None; watch.ifaces.len()];
        Ok(LinkMonitor {
            sock,
            watch,
            state,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Asks the kernel for every link; the answers go through `on_link` like events, so a
    /// state that changed while messages were lost is still seen.
    fn request_dump(&mut self) {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut msg = NetlinkMessage::new(
            header,
            NetlinkPayload::from(RouteNetlinkMessage::GetLink(LinkMessage::default())),
        );
        msg.finalize();
        let mut out = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut out);
        if let Err(e) = self
            .sock
            .send_to(&out, &netlink_sys::SocketAddr::new(0, 0), 0)
        {
            tracing::warn!("rtnetlink link dump request: {e}");
        }
    }

    /// Reads every pending datagram.
    fn drain(&mut self) {
        loop {
            self.buf.clear();
            match self.sock.recv(&mut self.buf, 0) {
                Ok(_) => {
                    let data = std::mem::take(&mut self.buf);
                    self.parse(&data);
                    self.buf = data;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    tracing::warn!("rtnetlink: link messages were lost; asking for every link");
                    self.request_dump();
                }
                Err(e) => {
                    tracing::warn!("rtnetlink: {e}");
                    return;
                }
            }
        }
    }

    /// Walks the netlink messages of one datagram.
    fn parse(&mut self, mut data: &[u8]) {
        while let Ok(nb) = NetlinkBuffer::new_checked(data) {
            let len = nb.length() as usize;
            if len == 0 || len > data.len() {
                return;
            }
            if let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data[..len]) {
                match m.payload {
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                        let up = l.header.flags.contains(LinkFlags::Up)
                            && l.header.flags.contains(LinkFlags::LowerUp);
                        self.on_link(&l, if up { LinkState::Up } else { LinkState::Down });
                    }
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(l)) => {
                        self.on_link(&l, LinkState::Gone);
                    }
                    _ => {}
                }
            }
            data = &data[len.next_multiple_of(4).min(data.len())..];
        }
    }

    fn on_link(&mut self, l: &LinkMessage, state: LinkState) {
        let Some(name) = l.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.as_str()),
            _ => None,
        }) else {
            return;
        };
        let Some(port) = self.watch.ifaces.iter().position(|i| i == name) else {
            return;
        };
        let prev = self.state[port].replace(state);
        if prev == Some(state) {
            return;
        }
        if prev.is_none() && state != LinkState::Gone {
            // First sight (the start-up dump): nothing changed.
            tracing::debug!(iface = name, port, ?state, "link state");
            return;
        }
        match state {
            LinkState::Up => tracing::info!(iface = name, port, "link up"),
            LinkState::Down => tracing::info!(iface = name, port, "link down"),
            LinkState::Gone => tracing::info!(iface = name, port, "link gone: interface deleted"),
        }
        let change = LinkChange {
            port,
            iface: name.to_string(),
            state,
            was: prev,
        };
        (self.watch.on_change)(&change);
    }
}

/// Sends one request to the socket at `path`.
pub fn request(path: &Path, req: &Request) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{}\n", req.to_line()).as_bytes())?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Default socket of switch `name`.
pub fn default_socket(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{name}.sock"))
}

/// The AFC command ring of switch `name` whose control socket is `sock`: `NAME.afc` in the
/// same directory.
pub fn afc_path(sock: &Path, name: &str) -> PathBuf {
    sock.with_file_name(format!("{name}.afc"))
}

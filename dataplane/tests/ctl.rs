//! The control socket's event loop (`dataplane::ctl`, issue 21 item 7): many connections at
//! once, bounded requests, an idle timeout, mode 0600, and the request/response bytes the
//! `xoff ctl` client and the experiment probes rely on. Sockets live under a temp directory.

use dataplane::config::Topology;
use dataplane::ctl::{self, Limits, Request, Response, Server};
use dataplane::switch::SwitchShared;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const TOPO: &str = r#"
[[switch]]
name = "s1"
port = [{ name = "p1" }, { name = "p2" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
"#;

fn sock_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "xoff-ctl-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s1.sock")
}

/// A server answering like `xoff run`: stats from a real switch's counters, pause/resume.
fn start(path: &Path, limits: Limits) -> Server {
    let t = Topology::parse(TOPO, Path::new("t.toml")).unwrap();
    let shared = SwitchShared::new(t.switch_spec("s1").unwrap());
    ctl::serve_with(path, limits, None, move |req| match req {
        Request::Stats => Response::Stats(Box::new(shared.snapshot(1.0, None))),
        Request::Audit => Response::Audit(Box::new(shared.audit(&shared.snapshot(1.0, None)))),
        Request::Pause { port, .. } | Request::Resume { port, .. } if port < 2 => Response::Ok,
        Request::Pause { port, queue } | Request::Resume { port, queue } => {
            Response::Error(format!("no queue {queue} on port {port}"))
        }
    })
    .unwrap()
}

/// A control server alone in a child process (this test binary, running
/// [`server_child`]), so its resident memory can be measured: the harness runs other tests
/// side by side in this process, and their allocations moved this process's RSS by more
/// than a bound (17.7 MB against 16 in one `./test.sh` run). Killed when dropped.
struct Child {
    proc: std::process::Child,
    path: PathBuf,
}

impl Child {
    fn start(tag: &str, max_pending: usize) -> Child {
        let path = sock_path(tag);
        let proc = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "ctl::server_child", "--ignored", "--nocapture"])
            .env("XOFF_CTL_CHILD_SOCK", &path)
            .env("XOFF_CTL_CHILD_PENDING", max_pending.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while UnixStream::connect(&path).is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "child server not up");
            std::thread::sleep(Duration::from_millis(10));
        }
        Child { proc, path }
    }

    /// The child's resident memory, KiB.
    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.proc.id()))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// The server of [`Child`]: runs only when a parent test started it (ignored otherwise).
#[test]
#[ignore = "the child process of the memory tests"]
fn server_child() {
    let Ok(path) = std::env::var("XOFF_CTL_CHILD_SOCK") else {
        return;
    };
    let max_pending = std::env::var("XOFF_CTL_CHILD_PENDING")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Limits::default().max_pending);
    let _srv = start(
        Path::new(&path),
        Limits {
            max_pending,
            ..Limits::default()
        },
    );
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn socket_is_private() {
    let path = sock_path("mode");
    let srv = start(&path, Limits::default());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {:o}", mode & 0o777);
    // No temporary name is left beside it.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("s1.sock")]);
    srv.shutdown();
    assert!(!path.exists(), "shutdown removes the socket");
}

/// The exact bytes of answers, several requests pipelined on one connection, and a last
/// request without its newline (as `BufRead::lines` served it before).
#[test]
fn protocol_bytes_are_unchanged() {
    let path = sock_path("bytes");
    let srv = start(&path, Limits::default());
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"pause 1 0\r\nresume 7 3\nfrobnicate\n\nstats")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut lines = BufReader::new(s).lines().map(Result::unwrap);
    assert_eq!(lines.next().unwrap(), r#""ok""#);
    assert_eq!(lines.next().unwrap(), r#"{"error":"no queue 3 on port 7"}"#);
    assert_eq!(
        lines.next().unwrap(),
        r#"{"error":"unknown request `frobnicate`"}"#
    );
    assert_eq!(lines.next().unwrap(), r#"{"error":"empty request"}"#);
    let stats: Response = serde_json::from_str(&lines.next().unwrap()).unwrap();
    match stats {
        Response::Stats(s) => assert_eq!(s.ports.len(), 2),
        r => panic!("{r:?}"),
    }
    assert!(lines.next().is_none(), "closed after the last answer");
    // The library client too.
    assert!(matches!(
        ctl::request(&path, &Request::Stats).unwrap(),
        Response::Stats(_)
    ));
    match ctl::request(&path, &Request::Audit).unwrap() {
        Response::Audit(a) => assert!(a.balanced && a.ports.len() == 2, "{a:?}"),
        r => panic!("{r:?}"),
    }
    srv.shutdown();
}

/// 1 000 clients that connect and say nothing: a `stats` request is still answered at once
/// (the one-at-a-time server made it wait 5 s behind each of them).
#[test]
fn silent_connections_do_not_hold_up_a_request() {
    let path = sock_path("silent");
    let srv = start(&path, Limits::default());
    let silent: Vec<UnixStream> = (0..1000)
        .map(|i| UnixStream::connect(&path).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // Some of them half a request.
    for s in silent.iter().step_by(3) {
        (&*s).write_all(b"sta").unwrap();
    }
    let t = Instant::now();
    let r = ctl::request(&path, &Request::Stats).unwrap();
    let took = t.elapsed();
    assert!(matches!(r, Response::Stats(_)), "{r:?}");
    assert!(took < Duration::from_millis(500), "stats took {took:?}");
    drop(silent);
    srv.shutdown();
}

/// A 10 MB request line: a short error (not the request), the connection closed, and the
/// server's memory does not grow by the request.
#[test]
fn a_10_mb_request_is_refused_and_closed() {
    let srv = Child::start("big", Limits::default().max_pending);
    let path = srv.path.clone();
    let before = srv.rss_kib();
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0usize;
        while sent < 10_000_000 {
            match w.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break, // the server closed the connection
            }
        }
        sent
    });
    // The answer, then the end: EOF, or ECONNRESET since the server closes with the rest of
    // the request unread (a Unix stream socket reports that to the peer after the data).
    let mut answer = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    let sent = writer.join().unwrap();
    let text = String::from_utf8(answer).unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"error\":\"request longer than {} bytes\"}}\n",
            ctl::MAX_REQUEST
        ),
        "answer then EOF"
    );
    assert!(
        sent < 10_000_000,
        "the server read all {sent} bytes instead of closing"
    );
    let grew = srv.rss_kib().saturating_sub(before);
    assert!(grew < 4 * 1024, "the server's RSS grew by {grew} KiB");
    // A request just under the limit is still a request (answered as an unknown word, cut).
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = vec![b'y'; ctl::MAX_REQUEST];
    req.push(b'\n');
    s.write_all(&req).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert_eq!(
        line,
        format!(
            "{{\"error\":\"unknown request `{}...`\"}}\n",
            "y".repeat(32)
        )
    );
    drop(srv);
}

/// A connection that stays silent past the idle limit is closed; one that keeps talking is not.
#[test]
fn idle_connections_are_closed() {
    let path = sock_path("idle");
    let limits = Limits {
        idle: Duration::from_millis(300),
        ..Limits::default()
    };
    let srv = start(&path, limits);
    let mut quiet = UnixStream::connect(&path).unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut busy = UnixStream::connect(&path).unwrap();
    busy.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut rd = BufReader::new(busy.try_clone().unwrap());
    while t.elapsed() < Duration::from_millis(900) {
        busy.write_all(b"pause 0 0\n").unwrap();
        let mut line = String::new();
        rd.read_line(&mut line).unwrap();
        assert_eq!(line, "\"ok\"\n");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut b = [0u8; 1];
    let n = quiet.read(&mut b).unwrap();
    let closed_after = t.elapsed();
    assert_eq!(n, 0, "idle connection got data instead of EOF");
    assert!(
        closed_after < Duration::from_secs(2),
        "closed only after {closed_after:?}"
    );
    // The busy one was never idle for 300 ms and still works.
    busy.write_all(b"pause 0 0\n").unwrap();
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    assert_eq!(line, "\"ok\"\n");
    srv.shutdown();
}

/// A client that sends requests without reading the answers is not read past its answer
/// budget: the server holds at most that much for it.
#[test]
fn unread_answers_stop_reading() {
    let srv = Child::start("unread", 64 * 1024);
    let path = srv.path.clone();
    let s = UnixStream::connect(&path).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let before = srv.rss_kib();
    let mut sent = 0usize;
    let req = b"stats\n".repeat(1000);
    // Socket buffers fill and the write times out once the server stops reading.
    while sent < 200 * req.len() {
        match (&s).write(&req) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    let answered_at_most = sent / 6;
    assert!(
        sent < 200 * req.len(),
        "the server kept reading: {answered_at_most} stats requests"
    );
    let grew = srv.rss_kib().saturating_sub(before);
    assert!(grew < 16 * 1024, "the server's RSS grew by {grew} KiB");
    // Others are served meanwhile.
    assert!(matches!(
        ctl::request(&path, &Request::Stats).unwrap(),
        Response::Stats(_)
    ));
    drop(s);
    drop(srv);
}

/// Past `max_conns` a client is told so and closed; a slot freed by a client leaving is
/// served again.
#[test]
fn connections_beyond_the_limit_are_told_and_closed() {
    let path = sock_path("limit");
    let limits = Limits {
        max_conns: 4,
        ..Limits::default()
    };
    let srv = start(&path, limits);
    let mut held: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // Let the loop accept them before the fifth arrives.
    std::thread::sleep(Duration::from_millis(100));
    let mut extra = UnixStream::connect(&path).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = String::new();
    extra.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "{\"error\":\"too many connections\"}\n");
    held.pop();
    std::thread::sleep(Duration::from_millis(100));
    assert!(matches!(
        ctl::request(&path, &Request::Stats).unwrap(),
        Response::Stats(_)
    ));
    drop(held);
    srv.shutdown();
}

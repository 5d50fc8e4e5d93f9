//! Taps through the control loop (`dataplane::tap`, issue 22 item 2) without AF_XDP: a thread
//! plays the port's worker (counting frames as the pipeline does and showing each burst to
//! the tap), the `capture` client reads the stream. Checks the exact window accounting end to
//! end, the idle limit not closing a quiet tap, other requests still answered meanwhile, and
//! a client that disconnects detaching its tap.

use dataplane::config::Topology;
use dataplane::ctl::{self, Limits, Request, Response};
use dataplane::switch::SwitchShared;
use dataplane::tap::{self, TapDir, TapRequest};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TOPO: &str = r#"
[[switch]]
name = "s1"
port = [{ name = "p1" }, { name = "p2" }]
"#;

fn sock(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xoff-tap-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s1.sock")
}

/// A worker for port 1 (`p2`): bursts of `burst` frames every 200 µs until `stop`; frame i
/// holds i's bytes. Counts rx and tx like the runtime and shows every burst to a tap.
fn worker(
    shared: Arc<SwitchShared>,
    stop: Arc<AtomicBool>,
    burst: usize,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let c = &shared.counters[1];
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let frames: Vec<Vec<u8>> = (0..burst)
                .map(|k| (i + k as u64).to_be_bytes().repeat(8))
                .collect();
            if let Some(t) = shared.taps.session(1) {
                t.on_rx(
                    frames.iter().map(|f| &f[..]),
                    c.rx_pkts.get(),
                    c.tx_pkts.get(),
                );
            }
            c.rx_pkts.add(burst as u64);
            if let Some(t) = shared.taps.session(1) {
                t.on_tx(
                    frames.iter().map(|f| &f[..]),
                    c.rx_pkts.get(),
                    c.tx_pkts.get(),
                );
            }
            c.tx_pkts.add(burst as u64);
            i += burst as u64;
            std::thread::sleep(Duration::from_micros(200));
        }
        i
    })
}

fn start(path: &Path, limits: Limits) -> (Arc<SwitchShared>, ctl::Server) {
    let t = Topology::parse(TOPO, Path::new("t.toml")).unwrap();
    let shared = SwitchShared::new(t.switch_spec("s1").unwrap());
    let s2 = shared.clone();
    let server = ctl::serve_with_taps(
        path,
        limits,
        None,
        shared.taps.clone(),
        move |req| match req {
            Request::Stats => Response::Stats(Box::new(s2.snapshot(1.0, None))),
            _ => Response::Ok,
        },
    )
    .unwrap();
    (shared, server)
}

#[test]
fn tap_stream_is_exact_and_survives_the_idle_limit() {
    let path = sock("exact");
    let limits = Limits {
        idle: Duration::from_millis(100),
        ..Limits::default()
    };
    let (shared, server) = start(&path, limits);
    let stop_w = Arc::new(AtomicBool::new(false));
    let w = worker(shared.clone(), stop_w.clone(), 5);
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            // Longer than the idle limit; stats answered meanwhile on another connection.
            std::thread::sleep(Duration::from_millis(400));
            let r = ctl::request(&path, &Request::Stats).unwrap();
            assert!(matches!(r, Response::Stats(_)), "stats during a tap: {r:?}");
            stop.store(true, Ordering::Relaxed);
        })
    };
    let mut got: Vec<(bool, Vec<u8>)> = Vec::new();
    let req = TapRequest {
        port: "p2".into(),
        dir: TapDir::Both,
        count: 0,
        budget: 64,
    };
    let mut started = None;
    let s = tap::capture(
        &path,
        &req,
        &stop,
        |s| started = Some(s.clone()),
        |f| {
            assert_eq!(f.orig_len as usize, f.data.len());
            got.push((f.tx, f.data.to_vec()));
            Ok(())
        },
    )
    .unwrap();
    stopper.join().unwrap();
    stop_w.store(true, Ordering::Relaxed);
    w.join().unwrap();
    let started = started.unwrap();
    assert_eq!((started.port, started.name.as_str()), (1, "p2"));
    assert!(s.complete, "{s:?}");
    assert_eq!(s.seen_rx, s.rx_end - s.rx_start);
    assert_eq!(s.seen_tx, s.tx_end - s.tx_start);
    assert!(s.seen_rx > 100, "a few hundred ms of bursts: {s:?}");
    assert_eq!(s.captured, got.len() as u64);
    assert_eq!(s.captured + s.over_budget, s.seen_rx + s.seen_tx);
    // Received frames in order and unaltered: frame k of the window holds rx_start + k.
    let rx: Vec<&Vec<u8>> = got.iter().filter(|(tx, _)| !tx).map(|(_, d)| d).collect();
    if s.over_budget == 0 {
        for (k, d) in rx.iter().enumerate() {
            assert_eq!(**d, (s.rx_start + k as u64).to_be_bytes().repeat(8));
        }
    }
    assert!(
        shared.taps.session(1).is_none(),
        "detached after the summary"
    );
    server.shutdown();
}

#[test]
fn a_client_that_goes_away_detaches_its_tap_and_a_second_tap_is_refused() {
    let path = sock("gone");
    let (shared, server) = start(&path, Limits::default());
    let req = TapRequest {
        port: "p1".into(),
        dir: TapDir::Rx,
        count: 0,
        budget: 4,
    };
    // A raw client: the request, then it reads the first line and disconnects.
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    use std::io::{BufRead, BufReader, Write};
    c.write_all(format!("{}\n", req.to_line()).as_bytes())
        .unwrap();
    let mut line = String::new();
    BufReader::new(&c).read_line(&mut line).unwrap();
    assert!(line.starts_with("{\"tap\":"), "{line}");
    assert!(shared.taps.session(0).is_some());
    // The same port again: refused with a JSON error.
    let never = AtomicBool::new(false);
    let e = tap::capture(&path, &req, &never, |_| {}, |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("already tapped"), "{e}");
    drop(c);
    let t0 = std::time::Instant::now();
    while shared.taps.session(0).is_some() {
        // No worker looks at the port here, so the loop gives up on the window after
        // STOP_GRACE and detaches.
        assert!(t0.elapsed() < tap::STOP_GRACE * 2, "tap not detached");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.shutdown();
}

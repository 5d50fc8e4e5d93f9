//! Faults on real frames, under load (issue 21 item 4). Each test runs UDP load through a
//! three-host switch, injects one fault, and checks what a researcher relies on: the switch
//! does not crash and leaves no XDP program behind, forwarding between the ports the fault
//! does not touch never stops (a 100 Hz ping probe's longest gap), traffic through the
//! faulted port resumes within 1 s of the fault's end, the free UMEM chunks return to their
//! idle value (a leak check), and the lossless audit (`xoff ctl audit`) balances and counts
//! every packet the senders lost. The PFC storm (`tools/tests/pfc.rs`) and the control socket
//! under 1 000 silent clients (`dataplane/tests/ctl.rs`) are covered elsewhere; here the
//! control socket is flooded while the switch forwards. Requires root.

use crate::common;

use common::{eth0_counter, serial, three_hosts, Bed};
use dataplane::audit::Audit;
use dataplane::ctl::{self, Request, Response};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn sock(bed: &Bed) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{}/s1.sock", bed.name))
}

fn audit(bed: &Bed) -> Audit {
    match ctl::request(&sock(bed), &Request::Audit).expect("audit request") {
        Response::Audit(a) => *a,
        r => panic!("unexpected response {r:?}"),
    }
}

/// Free UMEM chunks once the switch has settled (the value stops moving for 0.5 s: every
/// worker publishes it at housekeeping, every 100 ms).
fn idle_umem(bed: &Bed) -> u64 {
    let read = || bed.stats("s1").umem.expect("umem in stats").idle();
    let t = Instant::now();
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = read();
        if now == last || t.elapsed() > Duration::from_secs(10) {
            return now;
        }
        last = now;
    }
}

/// A 100 Hz ping from `from` to `to`, timestamps kept (`ping -D`).
struct Probe {
    child: Child,
    out: PathBuf,
}

impl Probe {
    fn start(bed: &Bed, from: &str, to: &str) -> Probe {
        let out = std::env::temp_dir().join(format!("{}-{from}-{to}.ping", bed.name));
        let child = Command::new("ip")
            .args(["netns", "exec", &bed.ns(from)])
            .args(["ping", "-D", "-n", "-i", "0.01", "-W", "1", to])
            .stdout(std::fs::File::create(&out).expect("probe file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("ping");
        Probe { child, out }
    }

    /// Reply times (unix seconds).
    fn stop(mut self) -> Vec<f64> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let _ = std::fs::remove_file(&self.out);
        text.lines()
            .filter(|l| l.contains("bytes from"))
            .filter_map(|l| l.strip_prefix('[')?.split(']').next()?.parse().ok())
            .collect()
    }
}

/// Longest time without a reply between `a` and `b`.
fn longest_gap(ts: &[f64], a: f64, b: f64) -> f64 {
    let mut prev = a;
    let mut gap = 0f64;
    for &t in ts.iter().filter(|&&t| t > a && t < b) {
        gap = gap.max(t - prev);
        prev = t;
    }
    gap.max(b - prev)
}

/// Seconds from `t` to the first reply after it.
fn resumed_after(ts: &[f64], t: f64) -> f64 {
    ts.iter().find(|&&x| x > t).map_or(f64::INFINITY, |x| x - t)
}

/// UDP load: an iperf3 client in `from` toward a one-test server in `to`, in the background.
fn udp_load(bed: &Bed, from: &str, to: &str, ip: &str, rate: &str, secs: u32) -> Child {
    bed.iperf_server(to);
    Command::new("ip")
        .args(["netns", "exec", &bed.ns(from)])
        .args(["iperf3", "--json", "-u", "-l", "1400", "-b", rate, "-t"])
        .arg(secs.to_string())
        .args(["-c", ip])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 client")
}

/// The client's report: (datagrams sent, datagrams the server lost).
fn udp_result(c: Child) -> (u64, u64) {
    let out = c.wait_with_output().expect("iperf3");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    // iperf3's own `lost_packets` counts sequence gaps, so datagrams dropped after the last
    // one received go uncounted: received = bytes / datagram size instead.
    let sent = v["end"]["sum_sent"]["packets"].as_u64().unwrap_or(0);
    let got = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0) / 1400;
    (sent, sent.saturating_sub(got))
}

/// Packets `host`'s own kernel dropped, before or after the network: its veth's RX and TX
/// drops (e.g. the receive backlog full), UDP receive errors (the iperf3 server's socket
/// buffer full when it did not read in time on the shared CPUs), UDP send-buffer errors, and
/// datagrams that arrived after the iperf3 server closed its socket (`UdpNoPorts`: the tail
/// still queued at a shaped port when the test ended; delivered, but counted lost by
/// iperf3). No switch sees these, so the audit cannot count them; the tests add them.
fn host_drops(bed: &Bed, host: &str) -> u64 {
    let sys = |f: &str| eth0_counter(&bed.ns(host), f);
    let out = bed.run(
        host,
        &["nstat", "-a", "-z", "UdpInErrors", "UdpSndbufErrors"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let snmp: u64 = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            matches!(
                w.next(),
                Some("UdpInErrors" | "UdpSndbufErrors" | "UdpNoPorts")
            )
            .then(|| w.next()?.parse::<u64>().ok())?
        })
        .sum();
    sys("rx_dropped") + sys("tx_dropped") + snmp
}

/// Packets of the flows entering at `port` that the audit counts lost there.
fn row_drops(a: &Audit, port: usize) -> u64 {
    a.ports[port]
        .prios
        .iter()
        .flat_map(|r| r.dropped.values())
        .sum()
}

/// Datagrams iperf3 counts lost that the network delivered: those still in flight (a TX
/// batch, the receiver's backlog) when its server stopped counting at the end of the test.
const TAIL: u64 = 64;

/// Checks the audit explains what iperf3 lost of the datagrams entering at `port`: drops in
/// that port's rows, plus what the kernel discarded on transmit at the switch (which ingress
/// port those came from is not known, so at most that many), plus the receiver's socket
/// buffer overflows. The iperf3 control connection's TCP segments enter at the same port and
/// may be dropped too (TCP resends them; iperf3 does not count them): a few, allowed for.
fn assert_explained(a: &Audit, port: usize, iperf_lost: u64, rcvbuf: u64) {
    let kernel: u64 = a
        .ports
        .iter()
        .map(|p| p.kernel_tx_dropped + p.wire_dropped)
        .sum();
    let at_port = row_drops(a, port);
    eprintln!(
        "iperf3 lost {iperf_lost}: the audit counts {at_port} dropped at the switch, \
         {kernel} discarded on transmit or on the wire; the receiver's kernel {rcvbuf}"
    );
    assert!(
        iperf_lost <= at_port + kernel + rcvbuf + TAIL,
        "iperf3 lost {iperf_lost}, more than the audit explains"
    );
    assert!(
        at_port + rcvbuf <= iperf_lost + 50,
        "the audit counts {at_port} drops for {iperf_lost} datagrams lost"
    );
}

/// Packets the audit says the switch lost, after the traffic has drained.
fn settled_audit(bed: &Bed) -> Audit {
    std::thread::sleep(Duration::from_millis(500));
    let a = audit(bed);
    eprint!("{}", a.table());
    assert!(a.balanced, "audit does not balance");
    a
}

/// p2 goes down for 1 s on the switch's side while h3 sends 200 Mbit/s of UDP to h2:
/// h1 <-> h3 never stops, h1 -> h2 resumes within 1 s of p2 coming back, and every datagram
/// iperf3 lost is a `port_down` drop in the audit (pings lost to p2 too).
#[test]
fn port_flap_under_load() {
    let _g = serial();
    let bed = Bed::up_text(&three_hosts(""), "fflap");
    assert!(bed.ping("h1", "10.0.0.2") && bed.ping("h1", "10.0.0.3"));
    let idle = idle_umem(&bed);
    let before = audit(&bed);
    let load = udp_load(&bed, "h3", "h2", "10.0.0.2", "200M", 5);
    let (other, faulted) = (
        Probe::start(&bed, "h1", "10.0.0.3"),
        Probe::start(&bed, "h1", "10.0.0.2"),
    );
    let t0 = unix_now();
    std::thread::sleep(Duration::from_millis(1500));
    let down = unix_now();
    bed.run("s1", &["ip", "link", "set", "dev", "p2", "down"]);
    std::thread::sleep(Duration::from_secs(1));
    bed.run("s1", &["ip", "link", "set", "dev", "p2", "up"]);
    let up = unix_now();
    let (sent, lost) = udp_result(load);
    std::thread::sleep(Duration::from_millis(500));
    let end = unix_now();
    let (o, f) = (other.stop(), faulted.stop());
    let gap = longest_gap(&o, t0 + 0.2, end);
    let back = resumed_after(&f, up);
    eprintln!(
        "p2 down {:.2} s; h1<->h3 longest gap {:.0} ms; h1->h2 back {:.0} ms after p2 up; \
         iperf3: {sent} sent, {lost} lost",
        up - down,
        gap * 1e3,
        back * 1e3
    );
    assert!(
        gap < 0.5,
        "forwarding between p1 and p3 stopped for {gap:.3} s"
    );
    assert!(back < 1.0, "h1 -> h2 resumed {back:.3} s after p2 came up");
    assert!(
        lost > 0,
        "p2 was down for 1 s and nothing was lost: no fault?"
    );
    let a = settled_audit(&bed);
    let down_drops: u64 = a
        .ports
        .iter()
        .flat_map(|p| &p.prios)
        .filter_map(|r| r.dropped.get("port_down"))
        .sum();
    let kernel: u64 = a
        .ports
        .iter()
        .map(|p| p.kernel_tx_dropped + p.wire_dropped)
        .sum();
    assert_eq!(
        a.lost - before.lost,
        down_drops + kernel,
        "every loss is a port_down drop or a frame sent as the link went"
    );
    assert_explained(&a, 2, lost, host_drops(&bed, "h2"));
    let now = idle_umem(&bed);
    assert_eq!(
        now, idle,
        "free UMEM chunks {now}, {idle} before the fault: a leak"
    );
    assert!(bed.xdp_attached("s1"), "the switch lost its XDP program");
}

/// SIGKILL while 200 Mbit/s of UDP runs: no XDP program left; a restarted switch on the same
/// interfaces forwards within 1 s of answering its control socket, balances its audit and
/// leaks no UMEM chunk.
#[test]
fn sigkill_under_load_and_restart() {
    let _g = serial();
    let bed = Bed::up_text(&three_hosts(""), "fkill");
    assert!(bed.ping("h1", "10.0.0.2"));
    let idle = idle_umem(&bed);
    let load = udp_load(&bed, "h3", "h2", "10.0.0.2", "200M", 4);
    let probe = Probe::start(&bed, "h1", "10.0.0.2");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = bed.pid("s1");
    dataplane::port::sys::signal(pid, libc::SIGKILL);
    let t = Instant::now();
    while dataplane::port::sys::alive(pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!bed.xdp_attached("s1"), "XDP program left after SIGKILL");
    let file = std::env::temp_dir().join(format!("{}.toml", bed.name));
    std::fs::write(&file, three_hosts("")).unwrap();
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.ns("s1"),
            common::xoff(),
            "run",
            "--config",
        ])
        .arg(&file)
        .args(["--switch", "s1", "--ctl"])
        .arg(sock(&bed))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("restart xoff run");
    let t = Instant::now();
    while ctl::request(&sock(&bed), &Request::Stats).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "restart did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ready = unix_now();
    let (sent, lost) = udp_result(load);
    std::thread::sleep(Duration::from_millis(300));
    let f = probe.stop();
    let back = resumed_after(&f, ready);
    eprintln!(
        "restart answered after {:?}; h1->h2 back {:.0} ms later; iperf3: {sent} sent, {lost} lost (killed switch)",
        t.elapsed(),
        back * 1e3
    );
    assert!(
        back < 1.0,
        "forwarding resumed {back:.3} s after the restart"
    );
    let a = settled_audit(&bed);
    // Frames that met the new switch before its rings were ready are lost, and counted
    // (the table above says where); the balance is the claim.
    eprintln!(
        "the restarted switch lost {} frames under load, all accounted",
        a.lost
    );
    // The leak check within the restarted process: idle after more traffic as before it
    // (two processes settle a few chunks apart: the kernel's copy-mode RX path holds a
    // varying handful, so the killed one's count is no reference).
    let restarted = idle_umem(&bed);
    udp_result(udp_load(&bed, "h3", "h2", "10.0.0.2", "200M", 1));
    let now = idle_umem(&bed);
    eprintln!("idle free UMEM: {idle} before the kill, {restarted} after the restart, {now} after its traffic");
    assert_eq!(now, restarted, "the restarted switch leaked UMEM chunks");
    dataplane::port::sys::signal(child.id() as i32, libc::SIGTERM);
    assert!(child.wait().expect("wait").success());
    assert!(!bed.xdp_attached("s1"), "XDP program left after SIGTERM");
}

/// h3's namespace is deleted while h1 sends 200 Mbit/s of UDP to h2: h3's veth vanishes with
/// it, the switch logs the port gone and goes on with p1 and p2 without a gap.
#[test]
fn host_namespace_deleted_under_load() {
    let _g = serial();
    let bed = Bed::up_text(&three_hosts(""), "fns");
    assert!(bed.ping("h1", "10.0.0.2") && bed.ping("h1", "10.0.0.3"));
    let load = udp_load(&bed, "h1", "h2", "10.0.0.2", "200M", 4);
    let probe = Probe::start(&bed, "h2", "10.0.0.1");
    let t0 = unix_now();
    std::thread::sleep(Duration::from_millis(1500));
    let out = Command::new("ip")
        .args(["netns", "del", &bed.ns("h3")])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (sent, lost) = udp_result(load);
    let end = unix_now();
    let o = probe.stop();
    let gap = longest_gap(&o, t0 + 0.2, end);
    eprintln!(
        "h3 deleted; h1<->h2 longest gap {:.0} ms; iperf3: {sent} sent, {lost} lost",
        gap * 1e3
    );
    assert!(
        gap < 0.5,
        "forwarding between p1 and p2 stopped for {gap:.3} s"
    );
    let st = bed.stats("s1");
    assert_eq!(st.ports[2].port_down, Some(1), "p3's loss not counted");
    let a = settled_audit(&bed);
    assert_explained(&a, 0, lost, host_drops(&bed, "h2"));
    assert!(bed.ping("h1", "10.0.0.2"));
}

/// Offered load far above what p2 drains (h1 and h3 each send 1 Gbit/s of UDP into a
/// 100 Mbit/s port with a 256 KiB queue) for 10 s: the switch tail-drops and counts, and
/// afterwards forwards at once, holds no chunk more than idle, and the audit's drops are the
/// datagrams iperf3 lost.
#[test]
fn overload_for_10_seconds_leaks_nothing() {
    let _g = serial();
    let bed = Bed::up_text(
        &three_hosts(", rate = \"100Mbit\", queue_limit = \"256KiB\""),
        "fover",
    );
    assert!(bed.ping("h1", "10.0.0.2"));
    let idle = idle_umem(&bed);
    let before = audit(&bed);
    bed.iperf_server("h2");
    // A second server on another port for the second sender.
    let out = bed.run("h2", &["iperf3", "-s", "-D", "-1", "-p", "5202"]);
    assert!(out.status.success());
    let a1 = Command::new("ip")
        .args(["netns", "exec", &bed.ns("h1")])
        .args([
            "iperf3", "--json", "-u", "-l", "1400", "-b", "1G", "-t", "10", "-c", "10.0.0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let a3 = Command::new("ip")
        .args(["netns", "exec", &bed.ns("h3")])
        .args([
            "iperf3", "--json", "-u", "-l", "1400", "-b", "1G", "-t", "10", "-p", "5202", "-c",
            "10.0.0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (s1, l1) = udp_result(a1);
    let (s3, l3) = udp_result(a3);
    let end = Instant::now();
    let probe = Probe::start(&bed, "h1", "10.0.0.2");
    let t = unix_now();
    std::thread::sleep(Duration::from_millis(1200));
    let back = resumed_after(&probe.stop(), t);
    eprintln!(
        "overload: {s1} + {s3} sent, {l1} + {l3} lost; forwarding {:.0} ms after the senders stopped ({:?})",
        back * 1e3,
        end.elapsed()
    );
    assert!(l1 + l3 > (s1 + s3) / 2, "not an overload");
    assert!(
        back < 1.0,
        "forwarding resumed {back:.3} s after the overload"
    );
    let a = settled_audit(&bed);
    let rcvbuf = host_drops(&bed, "h2");
    let senders = host_drops(&bed, "h1") + host_drops(&bed, "h3");
    let lost = a.lost - before.lost;
    eprintln!(
        "iperf3 lost {}; the audit counts {lost}; the receiver's kernel {rcvbuf} socket-buffer \
         overflows, the senders' kernels {senders} drops",
        l1 + l3
    );
    // The tail: up to a full p2 queue (256 KiB of 1400 B datagrams) still on its way when
    // iperf3 stopped counting.
    let tail = (256 << 10) / 1400 + TAIL;
    assert!(
        l1 + l3 <= lost + rcvbuf + senders + tail,
        "iperf3 lost more than the audit explains"
    );
    assert!(
        lost <= l1 + l3 + 50,
        "the audit counts {lost} for {} lost",
        l1 + l3
    );
    let now = idle_umem(&bed);
    assert_eq!(
        now, idle,
        "free UMEM chunks {now}, {idle} before the overload: a leak"
    );
}

/// 1 000 clients connect to the switch's control socket and say nothing, and one sends a
/// 10 MB request, while 200 Mbit/s of UDP crosses the switch: stats are still answered at
/// once, the big request is refused, and forwarding never pauses.
#[test]
fn control_socket_flood_under_load() {
    let _g = serial();
    let bed = Bed::up_text(&three_hosts(""), "fctl");
    assert!(bed.ping("h1", "10.0.0.2"));
    let load = udp_load(&bed, "h3", "h2", "10.0.0.2", "200M", 4);
    let probe = Probe::start(&bed, "h1", "10.0.0.2");
    let t0 = unix_now();
    std::thread::sleep(Duration::from_millis(500));
    let silent: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(sock(&bed)).expect("connect"))
        .collect();
    let mut big = UnixStream::connect(sock(&bed)).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut written = 0usize;
    big.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    for _ in 0..10 {
        match big.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    let t = Instant::now();
    assert!(matches!(
        ctl::request(&sock(&bed), &Request::Stats),
        Ok(Response::Stats(_))
    ));
    let answered = t.elapsed();
    let (sent, lost) = udp_result(load);
    let end = unix_now();
    let gap = longest_gap(&probe.stop(), t0 + 0.2, end);
    drop(silent);
    eprintln!(
        "1000 silent clients + {written} B request: stats answered in {answered:?}; \
         forwarding's longest gap {:.0} ms; iperf3 {sent} sent, {lost} lost",
        gap * 1e3
    );
    assert!(answered < Duration::from_secs(1));
    assert!(gap < 0.5, "forwarding stopped for {gap:.3} s");
    assert!(
        written < 10 << 20,
        "the switch read a 10 MB request whole instead of refusing it"
    );
    settled_audit(&bed);
}

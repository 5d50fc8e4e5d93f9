//! External AFC controllers on real frames: a Python process writes pause/resume words into a
//! switch's shared-memory command ring (`deploy/afc/afc.py`) while traffic flows. Requires root.

use crate::common;

use common::{repo, serial, xoff, Bed};
use dataplane::stats::SwitchSnapshot;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// h1 → h2 crosses s1's port 1 (p2); DSCP 0 traffic uses its queue 0.
const PORT: usize = 1;
const QUEUE: usize = 0;

fn ring(bed: &Bed) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{}/s1.afc", bed.name))
}

/// Runs the Python client against `bed`'s ring.
fn afc_py(bed: &Bed, args: &[&str]) -> Output {
    Command::new("python3")
        .arg(repo().join("deploy/afc/afc.py"))
        .arg(ring(bed))
        .args(args)
        .output()
        .expect("python3 deploy/afc/afc.py")
}

/// Stdout of a successful client run.
fn afc_ok(bed: &Bed, args: &[&str]) -> String {
    let out = afc_py(bed, args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "afc.py {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The numbers after each of `keys` in a line like `written 10 refused 3`.
fn fields(line: &str, keys: &[&str]) -> Vec<f64> {
    let w: Vec<&str> = line.split_whitespace().collect();
    keys.iter()
        .map(|k| {
            let i = w.iter().position(|x| x == k).expect(k);
            w[i + 1].parse().expect("number")
        })
        .collect()
}

/// `xoff ctl stats --json`, as a user would read it.
fn ctl_stats(bed: &Bed) -> SwitchSnapshot {
    let out = Command::new(xoff())
        .args([
            "ctl",
            "--testbed",
            &bed.name,
            "--switch",
            "s1",
            "stats",
            "--json",
        ])
        .output()
        .expect("xoff ctl stats");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stats JSON")
}

fn tx(bed: &Bed) -> u64 {
    bed.stats("s1").ports[PORT].tx_pkts
}

/// Packets s1 sent toward h2 during `d`.
fn sent_during(bed: &Bed, d: Duration) -> u64 {
    let a = tx(bed);
    std::thread::sleep(d);
    tx(bed) - a
}

/// Resumes a stopped switch even when the test fails, so the testbed can come down.
struct Stopped(i32);

impl Stopped {
    fn new(pid: i32) -> Stopped {
        assert!(Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .expect("kill")
            .success());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

#[test]
fn python_controller_pauses_and_resumes_a_queue_under_traffic() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/single.toml"), "afc");
    let ring_mode = std::fs::metadata(ring(&bed))
        .expect("ring file")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&ring_mode) & 0o777,
        0o600
    );
    bed.iperf_server("h2");
    let (p, q) = (PORT.to_string(), QUEUE.to_string());
    std::thread::scope(|s| {
        let client = s.spawn(|| {
            bed.iperf(
                "h1",
                &[
                    "-c", "10.0.0.2", "-u", "-b", "200M", "-l", "1400", "-t", "5",
                ],
            )
        });
        std::thread::sleep(Duration::from_millis(1000));
        let before = sent_during(&bed, Duration::from_millis(500));
        assert_eq!(afc_ok(&bed, &["pause", &p, &q]).trim(), "ok");
        // Words in flight and the frame on the wire finish within a few ms.
        std::thread::sleep(Duration::from_millis(100));
        let paused = sent_during(&bed, Duration::from_millis(1000));
        let held = bed.stats("s1").ports[PORT].queues[QUEUE].depth_bytes;
        assert_eq!(afc_ok(&bed, &["resume", &p, &q]).trim(), "ok");
        std::thread::sleep(Duration::from_millis(100));
        let after = sent_during(&bed, Duration::from_millis(500));
        eprintln!(
            "packets to h2: {before} in 0.5 s before, {paused} in 1 s paused ({held} B held), \
             {after} in 0.5 s after the resume"
        );
        assert!(before > 2_000, "traffic did not flow before the pause");
        assert_eq!(paused, 0, "the paused queue kept sending");
        assert!(held > 10_000, "nothing queued behind the pause: {held} B");
        assert!(after > 2_000, "traffic did not flow again after the resume");
        client.join().expect("iperf3 client");
    });
    let s = ctl_stats(&bed);
    assert_eq!(
        (s.afc_applied, s.afc_refused, s.afc_ring_full),
        (2, 0, Some(0))
    );
    // A word for a port the switch does not have is written, then refused by the switch.
    assert_eq!(afc_ok(&bed, &["pause", "9", "0"]).trim(), "ok");
    let t0 = Instant::now();
    while ctl_stats(&bed).afc_refused == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "bad word not refused"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let c = afc_ok(&bed, &["counters"]);
    assert_eq!(fields(&c, &["applied", "refused", "full"]), [2.0, 1.0, 0.0]);
    // `xoff ctl pause|resume` goes through the same AFC unit and is counted with the ring's
    // words (the ring's own header counts only ring words).
    let ctl = |args: &[&str]| {
        Command::new(xoff())
            .args(["ctl", "--testbed", &bed.name, "--switch", "s1"])
            .args(args)
            .output()
            .expect("xoff ctl")
            .status
            .success()
    };
    assert!(ctl(&["pause", "--port", &p, "--queue", &q]));
    assert!(!bed.ping("h1", "10.0.0.2"), "ping crossed a paused queue");
    assert!(ctl(&["resume", "--port", &p, "--queue", &q]));
    assert!(bed.ping("h1", "10.0.0.2"), "ping blocked after the resume");
    assert!(!ctl(&["pause", "--port", "9", "--queue", "0"]));
    let s = ctl_stats(&bed);
    assert_eq!((s.afc_applied, s.afc_refused), (4, 2));
    let c = afc_ok(&bed, &["counters"]);
    assert_eq!(fields(&c, &["applied", "refused", "full"]), [2.0, 1.0, 0.0]);
}

#[test]
fn a_flood_beyond_capacity_is_refused_and_never_blocks_forwarding() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/single.toml"), "afl");
    let bytes = std::fs::read(ring(&bed)).expect("ring file");
    let cap = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    // With the switch stopped nothing drains: a lane takes `cap` words and refuses the rest at
    // once; the writer never waits for the switch.
    let extra = 3_000u32;
    let flood = {
        let _stopped = Stopped::new(bed.pid("s1"));
        let t0 = Instant::now();
        let out = afc_ok(&bed, &["flood", "2", "7", &(cap + extra).to_string()]);
        assert!(t0.elapsed() < Duration::from_secs(10), "the writer waited");
        out
    };
    assert_eq!(
        fields(&flood, &["written", "refused"]),
        [f64::from(cap), f64::from(extra)],
        "{flood}"
    );
    let t0 = Instant::now();
    while ctl_stats(&bed).afc_applied < u64::from(cap) {
        assert!(t0.elapsed() < Duration::from_secs(2), "ring not drained");
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = ctl_stats(&bed);
    assert_eq!(
        (s.afc_applied, s.afc_refused, s.afc_ring_full),
        (u64::from(cap), 0, Some(u64::from(extra)))
    );

    // The figure: UDP h1 → h2 for 2 s alone, then 2 s while a controller floods pause/resume
    // pairs for another port's queue as fast as it can.
    let udp = |bed: &Bed| {
        bed.iperf_server("h2");
        let v = bed.iperf(
            "h1",
            &[
                "-c", "10.0.0.2", "-u", "-b", "300M", "-l", "1400", "-t", "2",
            ],
        );
        v["end"]["sum"]["bits_per_second"].as_f64().unwrap_or(0.0)
            * (1.0 - v["end"]["sum"]["lost_percent"].as_f64().unwrap_or(100.0) / 100.0)
            / 1e6
    };
    let alone = udp(&bed);
    let a0 = ctl_stats(&bed);
    let (with, out) = std::thread::scope(|s| {
        let f = s.spawn(|| afc_ok(&bed, &["flood", "2", "7", "2.2"]));
        std::thread::sleep(Duration::from_millis(100));
        let with = udp(&bed);
        (with, f.join().expect("flood"))
    });
    let a1 = ctl_stats(&bed);
    let v = fields(&out, &["written", "refused", "seconds"]);
    let secs = v[2];
    let applied = (a1.afc_applied - a0.afc_applied) as f64 / secs;
    let full = (a1.afc_ring_full.unwrap() - a0.afc_ring_full.unwrap()) as f64 / secs;
    eprintln!(
        "AFC flood: {applied:.0} words/s applied, {full:.0} words/s refused (lane full); \
         UDP goodput h1 -> h2 {alone:.0} Mbit/s alone, {with:.0} Mbit/s during the flood"
    );
    assert_eq!(a1.afc_applied - a0.afc_applied, v[0] as u64, "{out}");
    assert_eq!(a1.afc_refused, 0);
    assert!(
        applied > 10_000.0,
        "too few commands applied: {applied:.0}/s"
    );
    assert!(alone > 100.0, "UDP alone: {alone:.0} Mbit/s");
    assert!(
        with > alone / 2.0,
        "forwarding collapsed under the flood: {with:.0} vs {alone:.0} Mbit/s"
    );
}

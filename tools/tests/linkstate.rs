//! Link state on real interfaces (issue 21 item 7): `xoff run`'s control loop watches rtnetlink,
//! so a port going down, coming up or vanishing is logged at INFO with its interface name and
//! counted (`port_down`/`port_up` in `xoff ctl stats --json`) as it happens, while the other
//! ports keep forwarding. A veth testbed in uniquely named namespaces. Requires root.

use crate::common;

use common::{serial, three_hosts, Bed};
use dataplane::stats::SwitchSnapshot;
use std::process::Command;
use std::time::{Duration, Instant};

fn ip(ns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("ip");
    assert!(
        out.status.success(),
        "ip -n {ns} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (port_down, port_up) of every port.
fn flaps(s: &SwitchSnapshot) -> Vec<(u64, u64)> {
    s.ports
        .iter()
        .map(|p| {
            (
                p.port_down.expect("port_down in stats"),
                p.port_up.expect("port_up in stats"),
            )
        })
        .collect()
}

/// Polls the counters until they read `want`; returns how long that took.
fn wait_for(bed: &Bed, want: &[(u64, u64)], what: &str) -> Duration {
    let t = Instant::now();
    loop {
        let got = flaps(&bed.stats("s1"));
        if got == want {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{what}: counters {got:?}, expected {want:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn log(bed: &Bed) -> String {
    std::fs::read_to_string(format!("/run/xoff/{}/s1.log", bed.name)).expect("switch log")
}

/// Lines of the switch log at INFO that say `what` about interface `iface`.
fn logged(bed: &Bed, what: &str, iface: &str) -> usize {
    log(bed)
        .lines()
        .filter(|l| l.contains("INFO") && l.contains(what) && l.contains(&format!("\"{iface}\"")))
        .count()
}

#[test]
fn port_down_up_and_deleted_are_logged_and_counted() {
    let _g = serial();
    let bed = Bed::up_text(&three_hosts(""), "ls");
    let sw = bed.ns("s1");
    assert_eq!(
        flaps(&bed.stats("s1")),
        vec![(0, 0); 3],
        "no flaps at start"
    );
    assert!(bed.ping("h1", "10.0.0.2"), "h1 cannot ping h2 at start");

    // Administratively down, then up, on the switch's side.
    ip(&sw, &["link", "set", "dev", "p1", "down"]);
    let t = wait_for(&bed, &[(1, 0), (0, 0), (0, 0)], "p1 down");
    eprintln!("p1 down counted after {t:?}");
    assert_eq!(logged(&bed, "link down", "p1"), 1, "log:\n{}", log(&bed));
    assert!(bed.ping("h2", "10.0.0.3"), "h2 -> h3 stopped with p1 down");
    ip(&sw, &["link", "set", "dev", "p1", "up"]);
    let t = wait_for(&bed, &[(1, 1), (0, 0), (0, 0)], "p1 up");
    eprintln!("p1 up counted after {t:?}");
    assert_eq!(logged(&bed, "link up", "p1"), 1, "log:\n{}", log(&bed));

    // Carrier lost: the host's end goes down.
    ip(&bed.ns("h2"), &["link", "set", "dev", "eth0", "down"]);
    wait_for(&bed, &[(1, 1), (1, 0), (0, 0)], "p2 lost carrier");
    assert_eq!(logged(&bed, "link down", "p2"), 1, "log:\n{}", log(&bed));
    ip(&bed.ns("h2"), &["link", "set", "dev", "eth0", "up"]);
    wait_for(&bed, &[(1, 1), (1, 1), (0, 0)], "p2 carrier back");

    // The interface vanishes.
    ip(&sw, &["link", "del", "p3"]);
    let t = wait_for(&bed, &[(1, 1), (1, 1), (1, 0)], "p3 deleted");
    eprintln!("p3 deletion counted after {t:?}");
    assert_eq!(logged(&bed, "link gone", "p3"), 1, "log:\n{}", log(&bed));
    // The switch goes on with the others.
    assert!(bed.ping("h1", "10.0.0.2"), "h1 -> h2 after p3 vanished");
    assert_eq!(flaps(&bed.stats("s1")), vec![(1, 1), (1, 1), (1, 0)]);
}

//! `xoff top` tested as a person uses it: in a terminal (tmux), while traffic runs, reading
//! the screen. Requires root and tmux.

use crate::common;

use common::{repo, serial, xoff, Bed};
use std::process::Command;
use std::time::Duration;

/// A tmux session, killed on drop.
struct Tmux(String);

impl Tmux {
    fn capture(&self) -> String {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

/// The cells of `port`'s row in `switch`'s box of a captured screen.
fn row(screen: &str, switch: &str, port: &str) -> Vec<String> {
    let mut in_box = false;
    for l in screen.lines() {
        if l.starts_with('┌') {
            in_box = l.contains(&format!(" {switch} — "));
            continue;
        }
        let cells: Vec<String> = l
            .trim_matches(|c| c == '│' || c == ' ')
            .split_whitespace()
            .map(String::from)
            .collect();
        if in_box && cells.first().is_some_and(|c| c == port) {
            return cells;
        }
    }
    panic!("no row {switch}/{port} on screen:\n{screen}");
}

/// A rate cell (`86.6M`, `50.1K`, `0.0`) in bit/s.
fn bps(cell: &str) -> f64 {
    let (num, mul) = match cell.chars().last() {
        Some('G') => (&cell[..cell.len() - 1], 1e9),
        Some('M') => (&cell[..cell.len() - 1], 1e6),
        Some('K') => (&cell[..cell.len() - 1], 1e3),
        _ => (cell, 1.0),
    };
    num.parse::<f64>()
        .unwrap_or_else(|_| panic!("not a rate: {cell}"))
        * mul
}

#[test]
fn top_shows_rates_queues_and_pauses_moving_with_traffic() {
    let _g = serial();
    let bed = Bed::up(&repo().join("deploy/topologies/chain-pfc.toml"), "t");
    let tmux = Tmux(bed.name.clone());
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", &tmux.0, "-x", "160", "-y", "40"])
        .arg(format!("{} top --testbed {}", xoff(), bed.name))
        .status()
        .expect("tmux (deploy/install.sh installs it)");
    assert!(st.success(), "tmux new-session failed");
    std::thread::sleep(Duration::from_millis(1200));
    let idle = tmux.capture();
    assert!(idle.contains("xoff top: 2 switch(es)"), "{idle}");
    let before = row(&idle, "s2", "p3");
    assert_eq!(before[1], "up", "{idle}");
    assert!(
        bps(&before[2]) < 1e6,
        "s2 p3 busy before any traffic:\n{idle}"
    );

    // Priority 3 from h1 toward h4's 100 Mbit/s port: s2 queues and pauses s1.
    bed.iperf_server("h4");
    let busy = std::thread::scope(|sc| {
        let t = sc.spawn(|| {
            bed.iperf(
                "h1",
                &[
                    "-c", "10.0.0.4", "-u", "-b", "300M", "-S", "0x60", "-l", "1400", "-t", "3",
                ],
            )
        });
        std::thread::sleep(Duration::from_millis(1800));
        let s = tmux.capture();
        t.join().expect("iperf");
        s
    });
    let s2p3 = row(&busy, "s2", "p3");
    let s2p2 = row(&busy, "s2", "p2");
    let s1p1 = row(&busy, "s1", "p1");
    // s1 receives h1's 300 Mbit/s; s2 drains toward h4 at its 100 Mbit/s line rate.
    assert!(bps(&s1p1[2]) > 150e6, "s1 p1 rx {}:\n{busy}", s1p1[2]);
    let h4 = bps(&s2p2[3]);
    assert!(
        (70e6..=110e6).contains(&h4),
        "s2 p2 tx {}:\n{busy}",
        s2p2[3]
    );
    // s2's port toward s1 has sent PFC XOFF on priority 3: "p3 N/0" with N > 0.
    // (The first "p3" is the port's name; the PFC cell comes after the queue column.)
    let pfc = 1 + s2p3[1..].iter().position(|c| c == "p3").expect("PFC cell");
    let sent: u64 = s2p3[pfc + 1]
        .split('/')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("xoff count");
    assert!(sent > 0, "no PFC on screen:\n{busy}");
    assert_ne!(idle, busy, "the screen did not change");
    // And after the traffic, the rates fall back.
    std::thread::sleep(Duration::from_millis(1500));
    let after = tmux.capture();
    assert!(
        bps(&row(&after, "s1", "p1")[2]) < 1e6,
        "s1 p1 still receiving:\n{after}"
    );
    eprintln!("{busy}");
}

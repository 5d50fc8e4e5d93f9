//! `xoff run --metrics`: scraped from a running testbed during PFC traffic, checked by
//! `promtool check metrics`, counters monotonic across scrapes and equal to `xoff ctl stats`
//! once traffic stops. Requires root.

use crate::common;

use common::{repo, serial, Bed};
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One scrape of `switch`'s metrics from inside its namespace.
fn scrape(bed: &Bed, switch: &str) -> String {
    let out = bed.run(
        switch,
        &[
            "curl",
            "-sS",
            "--max-time",
            "5",
            "http://127.0.0.1:9100/metrics",
        ],
    );
    assert!(
        out.status.success(),
        "scrape of {switch}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

/// `promtool check metrics` on an exposition: its verdict and what it printed.
fn promtool(text: &str) -> (bool, String) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (deploy/install.sh installs the prometheus package)");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), said)
}

/// Samples of counter families: series (name + labels) → value.
fn counters(text: &str) -> HashMap<String, f64> {
    let fams: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let name = series.split('{').next().unwrap_or("");
            fams.contains(&name)
        })
        .map(|(s, v)| (s.to_string(), v.parse().expect("sample value")))
        .collect()
}

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_scraped_during_pfc_traffic_are_valid_monotonic_and_exact() {
    let _g = serial();
    let bed = Bed::up_with(
        &repo().join("deploy/topologies/chain-pfc.toml"),
        "m",
        &["--metrics", "127.0.0.1:9100"],
    );
    assert!(bed.ping("h1", "10.0.0.4"), "no connectivity");
    let first = scrape(&bed, "s2");
    let (ok, said) = promtool(&first);
    assert!(ok, "promtool check metrics: {said}");
    // Priority 3 from h1 into h4's 100 Mbit/s port: s2 pauses s1 with PFC while we scrape.
    bed.iperf_server("h4");
    let during = std::thread::scope(|sc| {
        let scraper = sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            scrape(&bed, "s2")
        });
        bed.iperf(
            "h1",
            &[
                "-c", "10.0.0.4", "-u", "-b", "300M", "-S", "0x60", "-l", "1400", "-t", "3",
            ],
        );
        scraper.join().expect("scraper")
    });
    let (ok, said) = promtool(&during);
    assert!(ok, "promtool check metrics during traffic: {said}");
    std::thread::sleep(Duration::from_millis(500));
    let last = scrape(&bed, "s2");
    let stats = bed.stats("s2");
    let (ok, said) = promtool(&last);
    assert!(ok, "promtool check metrics after traffic: {said}");

    // Counters never go down, and the traffic moved the ones it should.
    let (a, b, c) = (counters(&first), counters(&during), counters(&last));
    assert!(a.len() > 50, "only {} counter series: {first}", a.len());
    for (series, v) in &a {
        let (w, x) = (b[series], c[series]);
        assert!(
            *v <= w && w <= x,
            "{series} went {v} -> {w} -> {x} across scrapes"
        );
    }
    let rx = r#"xoff_port_rx_packets_total{switch="s2",port="p3"}"#;
    assert!(a[rx] < b[rx] && b[rx] < c[rx], "s2 p3 rx: {a:?}");
    let xoff = r#"xoff_scheme_ports_xoff_sent_total{switch="s2",port="2",prio="3"}"#;
    assert!(
        c[xoff] > 0.0,
        "s2 sent no PFC XOFF on port 2 prio 3:\n{last}"
    );

    // Idle now: the scrape and the control socket report the same counts.
    for (i, p) in stats.ports.iter().enumerate() {
        let l = format!(r#"{{switch="s2",port="{}"}}"#, p.name);
        assert_eq!(
            value(&last, &format!("xoff_port_rx_packets_total{l}")),
            p.rx_pkts as f64
        );
        assert_eq!(
            value(&last, &format!("xoff_port_tx_packets_total{l}")),
            p.tx_pkts as f64
        );
        for (q, qs) in p.queues.iter().enumerate() {
            let l = format!(r#"{{switch="s2",port="{}",queue="{q}"}}"#, p.name);
            assert_eq!(
                value(&last, &format!("xoff_queue_dequeued_bytes_total{l}")),
                qs.deq_bytes as f64,
                "port {i} queue {q}"
            );
        }
    }
    let pfc = serde_json::to_value(stats.pfc.as_ref().expect("PFC")).unwrap();
    assert_eq!(
        c[xoff],
        pfc["ports"][2][3]["xoff_sent"].as_f64().unwrap(),
        "XOFF count differs from xoff ctl stats"
    );
    // Anything but /metrics is a 404, not a crash.
    let o = bed.run(
        "s2",
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "http://127.0.0.1:9100/",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "404");
}

//! `xoff top`: a live view of running switches from their control sockets, refreshed every
//! 200 ms: per switch and port, receive/transmit rates, queue depths, pause frames sent and
//! received per priority and per scheme, drops. `--once` prints one frame as text (two
//! snapshots an interval apart), for scripts and terminals without a screen.

use anyhow::{bail, Context, Result};
use dataplane::ctl::{self, Request, Response};
use dataplane::stats::SwitchSnapshot;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::Constraint;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct TopArgs {
    /// Watch the switches of this testbed (its sockets in /run/xoff/NAME/); default: every
    /// switch socket under /run/xoff.
    #[arg(long)]
    testbed: Option<String>,
    /// A switch's control socket (repeatable); overrides --testbed.
    #[arg(long)]
    socket: Vec<PathBuf>,
    /// Refresh interval, milliseconds.
    #[arg(long, default_value_t = 200)]
    interval_ms: u64,
    /// Print one frame as text and exit.
    #[arg(long)]
    once: bool,
}

/// The control sockets to watch.
fn sockets(a: &TopArgs) -> Result<Vec<PathBuf>> {
    if !a.socket.is_empty() {
        return Ok(a.socket.clone());
    }
    let dirs: Vec<PathBuf> = match &a.testbed {
        Some(tb) => vec![Path::new("/run/xoff").join(tb)],
        None => {
            let mut d = vec![PathBuf::from("/run/xoff")];
            if let Ok(rd) = std::fs::read_dir("/run/xoff") {
                d.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
            d
        }
    };
    let mut socks: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sock"))
        .collect();
    socks.sort();
    if socks.is_empty() {
        bail!(
            "no switch control sockets in {} (is a switch running? `--socket PATH` names one)",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(socks)
}

/// One snapshot per socket (`None` where the switch did not answer), with the time taken.
fn poll(socks: &[PathBuf]) -> (Instant, Vec<Option<SwitchSnapshot>>) {
    let t = Instant::now();
    let s = socks
        .iter()
        .map(|p| match ctl::request(p, &Request::Stats) {
            Ok(Response::Stats(s)) => Some(*s),
            _ => None,
        })
        .collect();
    (t, s)
}

/// `x` bit/s as `12.3M`, `950K`, `1.2G`.
fn rate(bps: f64) -> String {
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "G")
    } else if bps >= 1e6 {
        (bps / 1e6, "M")
    } else if bps >= 1e3 {
        (bps / 1e3, "K")
    } else {
        (bps, "")
    };
    format!("{v:.1}{u}")
}

fn bytes(b: u64) -> String {
    crate::plot::tick(b as f64, crate::plot::Unit::Bytes).replace(' ', "")
}

pub const HEADER: [&str; 8] = [
    "port",
    "up",
    "rx bit/s",
    "tx bit/s",
    "queued",
    "PFC xoff tx/rx",
    "scheme pauses",
    "drops",
];

/// The rows of one switch: per port its rates over `dt` since `prev`, queue depths, pause
/// counts and drops.
pub fn rows(prev: Option<&SwitchSnapshot>, cur: &SwitchSnapshot, dt: f64) -> Vec<[String; 8]> {
    let pauses = crate::congestion::port_pauses(std::slice::from_ref(cur));
    cur.ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let old = prev.and_then(|s| s.ports.get(i));
            let per_s = |now: u64, then: Option<u64>| {
                then.filter(|_| dt > 0.0)
                    .map_or(0.0, |t| now.saturating_sub(t) as f64 * 8.0 / dt)
            };
            let rx = per_s(p.rx_bytes, old.map(|o| o.rx_bytes));
            let tx = per_s(p.tx_bytes, old.map(|o| o.tx_bytes));
            let queued: Vec<String> = p
                .queues
                .iter()
                .enumerate()
                .filter(|(_, q)| q.depth_bytes > 0)
                .map(|(n, q)| format!("q{n}:{}", bytes(q.depth_bytes)))
                .collect();
            let pfc = cur.pfc.as_ref().map_or(String::from("-"), |st| {
                // Per priority that ever paused: "p3 208/0".
                let mut v: Vec<String> = Vec::new();
                for prio in 0..8 {
                    let (mut sent, mut recv) = (0, 0);
                    for pipe in st.pipes() {
                        if let Some(q) = pipe
                            .pfc
                            .as_ref()
                            .and_then(|x| x.ports.get(i))
                            .and_then(|ps| ps.iter().find(|q| q.prio == prio))
                        {
                            sent += q.xoff_sent;
                            recv += q.xoff_received;
                        }
                    }
                    if sent + recv > 0 {
                        v.push(format!("p{prio} {sent}/{recv}"));
                    }
                }
                if v.is_empty() {
                    // No priority sent or received an XOFF on this port.
                    "0/0".into()
                } else {
                    v.join(" ")
                }
            });
            let scheme = pauses
                .iter()
                .find(|x| x.port == p.name)
                .map(|x| {
                    [("BFC", x.bfc), ("Aqu", x.aquarius), ("Pyr", x.pyrrha)]
                        .iter()
                        .filter(|(_, n)| *n > 0)
                        .map(|(w, n)| format!("{w} {n}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let drops: u64 = p.drops.values().sum::<u64>() + p.xdp.lost();
            let why = p
                .drops
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(k, _)| format!(" ({k})"))
                .unwrap_or_default();
            [
                p.name.clone(),
                if p.up { "up" } else { "DOWN" }.into(),
                rate(rx),
                rate(tx),
                if queued.is_empty() {
                    "-".into()
                } else {
                    queued.join(" ")
                },
                pfc,
                if scheme.is_empty() {
                    "-".into()
                } else {
                    scheme
                },
                format!("{drops}{why}"),
            ]
        })
        .collect()
}

/// One frame as plain text (the `--once` output).
fn text_frame(
    socks: &[PathBuf],
    prev: &[Option<SwitchSnapshot>],
    cur: &[Option<SwitchSnapshot>],
    dt: f64,
) -> String {
    let mut out = String::new();
    for (i, s) in cur.iter().enumerate() {
        let Some(s) = s else {
            out.push_str(&format!("{}: no answer\n", socks[i].display()));
            continue;
        };
        out.push_str(&format!("switch {} (up {:.1} s)\n", s.switch, s.uptime_s));
        let rows = rows(prev[i].as_ref(), s, dt);
        let mut w = HEADER.map(str::len);
        for r in &rows {
            for (k, c) in r.iter().enumerate() {
                w[k] = w[k].max(c.chars().count());
            }
        }
        let line = |cells: [&str; 8]| {
            let mut l = String::new();
            for (k, c) in cells.iter().enumerate() {
                l.push_str(&format!("{c:<width$}  ", width = w[k]));
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(HEADER));
        for r in &rows {
            out.push_str(&line(r.each_ref().map(String::as_str)));
        }
    }
    out
}

pub fn run(a: TopArgs) -> Result<i32> {
    let socks = sockets(&a)?;
    let every = Duration::from_millis(a.interval_ms.max(50));
    let (mut t0, mut prev) = poll(&socks);
    if a.once {
        std::thread::sleep(every);
        let (t1, cur) = poll(&socks);
        print!(
            "{}",
            text_frame(&socks, &prev, &cur, (t1 - t0).as_secs_f64())
        );
        return Ok(0);
    }
    let mut term = ratatui::try_init().context("xoff top needs a terminal (try --once)")?;
    let res = (|| -> Result<()> {
        loop {
            if event::poll(every)? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press
                        && matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                    {
                        return Ok(());
                    }
                }
            }
            let (t1, cur) = poll(&socks);
            let dt = (t1 - t0).as_secs_f64();
            term.draw(|f| {
                let area = f.area();
                let mut tables: Vec<(String, Vec<[String; 8]>)> = Vec::new();
                for (i, s) in cur.iter().enumerate() {
                    match s {
                        Some(s) => tables.push((
                            format!(" {} — up {:.1} s ", s.switch, s.uptime_s),
                            rows(prev[i].as_ref(), s, dt),
                        )),
                        None => tables.push((
                            format!(" {}: no answer ", socks[i].display()),
                            Vec::new(),
                        )),
                    }
                }
                let heights: Vec<Constraint> = tables
                    .iter()
                    .map(|(_, r)| Constraint::Length(r.len() as u16 + 3))
                    .chain([Constraint::Min(1)])
                    .collect();
                let chunks = ratatui::layout::Layout::vertical(heights).split(area);
                for (k, (title, rows)) in tables.iter().enumerate() {
                    let widths = [
                        Constraint::Length(8),
                        Constraint::Length(5),
                        Constraint::Length(9),
                        Constraint::Length(9),
                        Constraint::Min(12),
                        Constraint::Min(14),
                        Constraint::Length(14),
                        Constraint::Min(10),
                    ];
                    let t = Table::new(
                        rows.iter().map(|r| Row::new(r.iter().cloned())),
                        widths,
                    )
                    .header(
                        Row::new(HEADER).style(Style::default().add_modifier(Modifier::BOLD)),
                    )
                    .block(Block::bordered().title(title.as_str()));
                    f.render_widget(t, chunks[k]);
                }
                f.render_widget(
                    Line::from(format!(
                        "xoff top: {} switch(es), every {} ms, rates over the last interval; q quits",
                        socks.len(),
                        every.as_millis()
                    )),
                    chunks[tables.len()],
                );
            })?;
            (t0, prev) = (t1, cur);
        }
    })();
    ratatui::restore();
    res.map(|()| 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::stats::{PortSnapshot, QueueSnapshot, XdpSnapshot};

    fn snap(rx_bytes: u64, depth: u64) -> SwitchSnapshot {
        let q = |d| QueueSnapshot {
            enq_pkts: 0,
            enq_bytes: 0,
            deq_pkts: 0,
            deq_bytes: 0,
            depth_bytes: d,
            depth_pkts: 0,
            watermark_bytes: 0,
            drops: 0,
            ecn_marked: 0,
        };
        SwitchSnapshot {
            switch: "s1".into(),
            uptime_s: 2.0,
            ports: vec![PortSnapshot {
                name: "p1".into(),
                up: true,
                rx_pkts: 0,
                rx_bytes,
                tx_pkts: 0,
                tx_bytes: 0,
                drops: [("queue_full".to_string(), 3)].into_iter().collect(),
                port_down: None,
                port_up: None,
                xdp: XdpSnapshot::default(),
                kernel_tx_dropped: 0,
                queues: vec![q(0), q(depth)],
            }],
            mmu: None,
            pfc: None,
            afc_applied: 0,
            afc_refused: 0,
            afc_ring_full: None,
            umem: None,
            nic: None,
        }
    }

    #[test]
    fn a_row_shows_rates_depths_and_drops() {
        let r = rows(Some(&snap(1_000, 0)), &snap(126_000, 12_500), 0.2);
        // 125 000 B in 0.2 s = 5 Mbit/s.
        assert_eq!(r[0][2], "5.0M");
        assert_eq!(r[0][4], "q1:12.5KB");
        assert_eq!(r[0][7], "3 (queue_full)");
        // The first frame has no earlier snapshot: no rate yet.
        assert_eq!(rows(None, &snap(126_000, 0), 0.2)[0][2], "0.0");
    }
}

//! The congestion-tree picture of an experiment cell: which switch port asked which
//! neighbour to stop sending (PFC XOFF, BFC, Aquarius and Pyrrha pauses), and for how long,
//! drawn with Graphviz over the topology. A tree of pauses is how head-of-line blocking
//! spreads (PFC) or stays contained (BFC, Aquarius, Pyrrha), so this is the figure to look at
//! first when a lossless cell's tail latency is bad.

use anyhow::{bail, Context, Result};
use dataplane::config::Endpoint;
use dataplane::scheme::pfc::PfcCount;
use dataplane::stats::SwitchSnapshot;
use dataplane::Topology;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Pause signals one switch port sent over a run (ports that sent none are left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortPauses {
    pub switch: String,
    pub port: String,
    /// PFC frames with a non-zero pause time (XOFF and refreshes).
    pub pfc_xoff: u64,
    /// Time the port held its peer paused by PFC (longest over priorities), seconds.
    pub pfc_pause_s: f64,
    pub bfc: u64,
    pub aquarius: u64,
    pub pyrrha: u64,
}

impl PortPauses {
    pub fn signals(&self) -> u64 {
        self.pfc_xoff + self.bfc + self.aquarius + self.pyrrha
    }

    /// Adds another port's signals (the longest pause time stays: ports pause in parallel).
    fn absorb(&mut self, o: &PortPauses) {
        self.pfc_xoff += o.pfc_xoff;
        self.pfc_pause_s = self.pfc_pause_s.max(o.pfc_pause_s);
        self.bfc += o.bfc;
        self.aquarius += o.aquarius;
        self.pyrrha += o.pyrrha;
    }

    /// "208 PFC XOFF (3.07 s)", "12 BFC", ... joined.
    fn label(&self) -> String {
        let mut parts = Vec::new();
        if self.pfc_xoff > 0 {
            parts.push(format!(
                "{} PFC XOFF ({})",
                self.pfc_xoff,
                crate::plot::tick(self.pfc_pause_s * 1e6, crate::plot::Unit::Micros)
            ));
        }
        for (n, what) in [
            (self.bfc, "BFC"),
            (self.aquarius, "Aquarius"),
            (self.pyrrha, "Pyrrha"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        parts.join(", ")
    }
}

/// One edge of the picture: a pausing port toward its peer, or (`host_ports` > 0) all of a
/// switch's pausing host ports toward one "hosts" node.
struct Edge {
    from: String,
    to: String,
    host_ports: usize,
    /// The signals summed over the edge's ports; the pause time is the longest.
    sum: PortPauses,
}

impl Edge {
    fn label(&self) -> String {
        if self.host_ports > 0 {
            format!("{} host ports: {}", self.host_ports, self.sum.label())
        } else {
            format!("{}: {}", self.sum.port, self.sum.label())
        }
    }
}

/// The pause signals each port of `snaps` sent.
pub fn port_pauses(snaps: &[SwitchSnapshot]) -> Vec<PortPauses> {
    let mut out = Vec::new();
    for s in snaps {
        let Some(st) = &s.pfc else { continue };
        for (i, p) in s.ports.iter().enumerate() {
            let pipes = st.pipes();
            let pfc_pause_us = pipes
                .iter()
                .filter_map(|x| x.pfc.as_ref()?.ports.get(i))
                .flatten()
                .map(|q| q.tx_pause_us)
                .fold(0.0, f64::max);
            let aquarius = pipes
                .iter()
                .filter_map(|x| x.aquarius.as_ref()?.ports.get(i))
                .map(|a| a.pauses_sent_qhigh + a.pauses_sent_contribution)
                .sum();
            // Pyrrha's and BFC's state is shared by a switch's pipes: count one pipe's.
            let pyrrha = pipes
                .iter()
                .find_map(|x| x.pyrrha.as_ref()?.ports.get(i))
                .map_or(0, |y| y.pauses_sent);
            let pp = PortPauses {
                switch: s.switch.clone(),
                port: p.name.clone(),
                pfc_xoff: st.pfc_total(i, PfcCount::XoffSent),
                pfc_pause_s: pfc_pause_us / 1e6,
                bfc: st.bfc_port(i).map_or(0, |b| b.pauses()),
                aquarius,
                pyrrha,
            };
            if pp.signals() > 0 {
                out.push(pp);
            }
        }
    }
    out
}

/// The node at the far end of `switch:port`'s link.
fn peer(topo: &Topology, switch: &str, port: &str) -> Option<String> {
    topo.endpoints().into_iter().find_map(|(a, b)| {
        let me = |e: &Endpoint| matches!(e, Endpoint::Port(s, p) if s == switch && p == port);
        let node = |e: &Endpoint| match e {
            Endpoint::Host(h) => h.clone(),
            Endpoint::Port(s, _) => s.clone(),
        };
        if me(&a) {
            Some(node(&b))
        } else if me(&b) {
            Some(node(&a))
        } else {
            None
        }
    })
}

/// Switch-to-switch links drawn in grey at most (more would hide the pause edges).
const MAX_GREY_LINKS: usize = 24;
/// Paused hosts drawn one by one at most; beyond, one node per switch.
const MAX_HOSTS: usize = 16;

/// Edges labelled in a dense graph: the heaviest ones and every host edge. A Clos with BFC
/// pausing on every uplink has ~130 edges; labelled, Graphviz spread them over 13 000 px.
const MAX_LABELS: usize = 24;

/// Graphviz source: every switch, the hosts that were paused, switch-to-switch links in grey,
/// and one red edge per pausing port toward the node it paused, wider for longer or more
/// pauses.
pub fn dot(title: &str, topo: &Topology, pauses: &[PortPauses]) -> String {
    let mut s = String::new();
    let q = |x: &str| format!("\"{}\"", x.replace('"', "'"));
    let _ = writeln!(s, "digraph congestion {{");
    let _ = writeln!(
        s,
        "  label={}; labelloc=t; fontsize=18; rankdir=TB; node [shape=box, style=rounded, fontsize=11]; edge [fontsize=9];",
        q(&format!("{title}: who paused whom (edge: pausing port → paused neighbour)"))
    );
    // Tiers, top to bottom: switches without hosts (spines), switches with hosts (leaves),
    // then the hosts that were paused.
    let links = topo.endpoints();
    let has_host = |sw: &str| {
        links.iter().any(|(a, b)| {
            let at = |e: &Endpoint| matches!(e, Endpoint::Port(s, _) if s == sw);
            (at(a) && matches!(b, Endpoint::Host(_))) || (at(b) && matches!(a, Endpoint::Host(_)))
        })
    };
    let (edge_sw, core_sw): (Vec<&str>, Vec<&str>) = topo
        .switches
        .iter()
        .map(|w| w.name.as_str())
        .partition(|w| has_host(w));
    let edges: Vec<(&PortPauses, String)> = pauses
        .iter()
        .filter_map(|p| Some((p, peer(topo, &p.switch, &p.port)?)))
        .collect();
    // One edge per pausing port, except that with more than MAX_HOSTS paused hosts each
    // switch's host ports become one edge to one node ("leaf3 hosts"): a Clos's 128 hosts in
    // a row are unreadable.
    let is_host = |n: &str| topo.hosts.iter().any(|h| h.name == n);
    let paused_hosts = {
        let mut v: Vec<&str> = edges
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| is_host(t))
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let mut lines: Vec<Edge> = Vec::new();
    for (p, to) in &edges {
        if paused_hosts > MAX_HOSTS && is_host(to) {
            let node = format!("{} hosts", p.switch);
            match lines
                .iter_mut()
                .find(|l| l.from == p.switch && l.to == node)
            {
                Some(l) => {
                    l.sum.absorb(p);
                    l.host_ports += 1;
                }
                None => lines.push(Edge {
                    from: p.switch.clone(),
                    to: node,
                    host_ports: 1,
                    sum: (*p).clone(),
                }),
            }
        } else {
            lines.push(Edge {
                from: p.switch.clone(),
                to: to.clone(),
                host_ports: 0,
                sum: (*p).clone(),
            });
        }
    }
    let mut hosts: Vec<&str> = Vec::new();
    for l in &lines {
        if (l.host_ports > 0 || is_host(&l.to)) && !hosts.contains(&l.to.as_str()) {
            hosts.push(&l.to);
        }
    }
    for (tier, attrs) in [
        (&core_sw, "style=\"rounded,filled\", fillcolor=\"#e8eef7\""),
        (&edge_sw, "style=\"rounded,filled\", fillcolor=\"#e8eef7\""),
        (&hosts, "shape=ellipse"),
    ] {
        if tier.is_empty() {
            continue;
        }
        let _ = write!(s, "  {{ rank=same;");
        for n in tier.iter() {
            let _ = write!(s, " {} [{attrs}];", q(n));
        }
        let _ = writeln!(s, " }}");
    }
    // The switch-to-switch links in grey, unless so many would hide the pauses (a 128-host
    // Clos has 64).
    let fabric: Vec<(&str, &str)> = links
        .iter()
        .filter_map(|(a, b)| match (a, b) {
            (Endpoint::Port(x, _), Endpoint::Port(y, _)) => Some((x.as_str(), y.as_str())),
            _ => None,
        })
        .collect();
    if fabric.len() <= MAX_GREY_LINKS {
        for (x, y) in fabric {
            let _ = writeln!(
                s,
                "  {} -> {} [dir=none, color=\"#bbbbbb\", style=dashed];",
                q(x),
                q(y)
            );
        }
    }
    let heaviest = lines
        .iter()
        .map(|l| weight(&l.sum))
        .fold(f64::MIN_POSITIVE, f64::max);
    // With many edges only the heaviest switch-to-switch ones keep a label (width still
    // shows every edge's weight); the title says so.
    let labelled: Vec<bool> = if lines.len() <= MAX_LABELS {
        vec![true; lines.len()]
    } else {
        let mut by_weight: Vec<usize> = (0..lines.len()).collect();
        by_weight.sort_by(|&a, &b| weight(&lines[b].sum).total_cmp(&weight(&lines[a].sum)));
        let mut keep = vec![false; lines.len()];
        for &i in by_weight.iter().take(MAX_LABELS) {
            keep[i] = true;
        }
        for (k, l) in keep.iter_mut().zip(&lines) {
            *k |= l.host_ports > 0 || is_host(&l.to);
        }
        let _ = writeln!(
            s,
            "  label={}; labelloc=t; fontsize=18;",
            q(&format!(
                "{title}: who paused whom (edge: pausing port → paused neighbour; width: pause \
                 time or count; labels on the {MAX_LABELS} heaviest of {} switch edges)",
                lines.len()
            ))
        );
        keep
    };
    for (l, &lab) in lines.iter().zip(&labelled) {
        let w = 1.0 + 5.0 * weight(&l.sum) / heaviest;
        let label = if lab {
            format!(", label={}", q(&l.label()))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {} -> {} [color=\"#c0392b\", penwidth={w:.1}{label}];",
            q(&l.from),
            q(&l.to)
        );
    }
    let _ = writeln!(s, "}}");
    s
}

/// An edge's weight: pause time when PFC measured one, else the signal count.
fn weight(p: &PortPauses) -> f64 {
    if p.pfc_pause_s > 0.0 {
        p.pfc_pause_s * 1e3
    } else {
        p.signals() as f64
    }
}

/// Renders `dot_src` to `stem.svg` and `stem.png` with Graphviz (`dot`).
pub fn render(dot_src: &str, stem: &Path) -> Result<Vec<PathBuf>> {
    let src = stem.with_extension("dot");
    std::fs::write(&src, dot_src)?;
    let mut out = Vec::new();
    for fmt in ["svg", "png"] {
        let file = stem.with_extension(fmt);
        let o = Command::new("dot")
            .arg(format!("-T{fmt}"))
            .arg(&src)
            .arg("-o")
            .arg(&file)
            .output()
            .context("run Graphviz `dot` (deploy/install.sh installs graphviz)")?;
        if !o.status.success() {
            bail!(
                "dot -T{fmt} {}: {}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        out.push(file);
    }
    Ok(out)
}

/// The congestion tree of each cell, drawn into its directory (`congestion_tree.{svg,png}`).
/// Cells that paused nothing get none.
pub fn draw_cells<'a>(
    cells: impl Iterator<Item = (&'a str, &'a Path, &'a [PortPauses])>,
) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for (cell, dir, pauses) in cells {
        if pauses.is_empty() {
            continue;
        }
        let topo = Topology::load(dir.join("topology.toml"))?;
        for f in render(&dot(cell, &topo, pauses), &dir.join("congestion_tree"))? {
            files.push(f.display().to_string());
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: &str = r#"
name = "t"
[[switch]]
name = "s1"
port = [{ name = "p1" }, { name = "p3" }]
[[switch]]
name = "s2"
port = [{ name = "p2" }, { name = "p3" }]
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h4"
ip = "10.0.0.4/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "s1:p3"
b = "s2:p3"
[[link]]
a = "h4"
b = "s2:p2"
"#;

    #[test]
    fn edges_go_from_the_pausing_switch_to_the_node_it_paused() {
        let topo = Topology::parse(TOPO, Path::new("t.toml")).unwrap();
        let pauses = vec![
            PortPauses {
                switch: "s2".into(),
                port: "p3".into(),
                pfc_xoff: 208,
                pfc_pause_s: 3.07,
                ..Default::default()
            },
            PortPauses {
                switch: "s1".into(),
                port: "p1".into(),
                bfc: 12,
                ..Default::default()
            },
        ];
        let d = dot("cell", &topo, &pauses);
        assert!(
            d.contains(r##""s2" -> "s1" [color="#c0392b", penwidth=6.0, label="p3: 208 PFC XOFF (3.07 s)"];"##),
            "{d}"
        );
        assert!(d.contains(r##""s1" -> "h1" [color="#c0392b""##), "{d}");
        assert!(d.contains(r#"{ rank=same; "h1" [shape=ellipse]; }"#), "{d}");
        // h4 paused nobody and was not paused: not drawn.
        assert!(!d.contains("\"h4\""), "{d}");
        assert!(d.contains(r#""s1" -> "s2" [dir=none"#), "{d}");
        // Both switches have hosts: one tier.
        assert!(d.contains(r#"{ rank=same; "s1" ["#), "{d}");
    }

    #[test]
    fn many_paused_hosts_become_one_node_per_switch() {
        let mut t = String::from("name = \"big\"\n[[switch]]\nname = \"s1\"\nport = [");
        for h in 0..20 {
            t += &format!("{{ name = \"p{h}\" }}, ");
        }
        t += "]\n";
        for h in 0..20 {
            t += &format!("[[host]]\nname = \"h{h}\"\nip = \"10.0.0.{}/24\"\n", h + 1);
            t += &format!("[[link]]\na = \"h{h}\"\nb = \"s1:p{h}\"\n");
        }
        let topo = Topology::parse(&t, Path::new("big.toml")).unwrap();
        let pauses: Vec<PortPauses> = (0..20)
            .map(|h| PortPauses {
                switch: "s1".into(),
                port: format!("p{h}"),
                pfc_xoff: 10,
                pfc_pause_s: 0.001 * f64::from(h),
                ..Default::default()
            })
            .collect();
        let d = dot("cell", &topo, &pauses);
        assert!(
            d.contains(r##""s1" -> "s1 hosts" [color="#c0392b", penwidth=6.0, label="20 host ports: 200 PFC XOFF (19 ms)"];"##),
            "{d}"
        );
        assert!(!d.contains("\"h3\""), "{d}");
    }

    #[test]
    fn a_dense_fabric_labels_only_its_heaviest_edges() {
        let mut t = String::from("name = \"clos\"\n");
        for l in 0..8 {
            t += &format!("[[switch]]\nname = \"leaf{l}\"\nport = [{{ name = \"h\" }}");
            for u in 0..8 {
                t += &format!(", {{ name = \"up{u}\" }}");
            }
            t += "]\n";
        }
        for u in 0..8 {
            t += &format!("[[switch]]\nname = \"spine{u}\"\nport = [");
            t += &(0..8)
                .map(|l| format!("{{ name = \"l{l}\" }}"))
                .collect::<Vec<_>>()
                .join(", ");
            t += "]\n";
        }
        for l in 0..8 {
            t += &format!("[[host]]\nname = \"h{l}\"\nip = \"10.0.{l}.1/24\"\n");
            t += &format!("[[link]]\na = \"h{l}\"\nb = \"leaf{l}:h\"\n");
            for u in 0..8 {
                t += &format!("[[link]]\na = \"leaf{l}:up{u}\"\nb = \"spine{u}:l{l}\"\n");
            }
        }
        let topo = Topology::parse(&t, Path::new("clos.toml")).unwrap();
        let pauses: Vec<PortPauses> = (0..8u64)
            .flat_map(|l| (0..8u64).map(move |u| (l, u)))
            .map(|(l, u)| PortPauses {
                switch: format!("leaf{l}"),
                port: format!("up{u}"),
                bfc: 1 + l * 8 + u,
                ..Default::default()
            })
            .collect();
        let d = dot("cell", &topo, &pauses);
        assert_eq!(d.matches(" -> ").count(), 64, "{d}");
        assert_eq!(d.matches(", label=").count(), MAX_LABELS, "{d}");
        // The heaviest edge (leaf7 up7, 64 pauses) keeps its label; the lightest does not.
        assert!(
            d.contains(r##""leaf7" -> "spine7" [color="#c0392b", penwidth=6.0, label="##),
            "{d}"
        );
        assert!(
            d.contains(r##""leaf0" -> "spine0" [color="#c0392b", penwidth=1.1];"##),
            "{d}"
        );
    }
}

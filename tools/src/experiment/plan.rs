//! An experiment's plan: the cells of its matrix × seeds, what each cell sets in the topology
//! (`scheme`, `headroom`, `lb`, `queues`, `cc`, `load`), the rates and base RTTs every cell
//! shares, and the digest `xoff experiment merge` checks shards by.

use super::spec::{ExpFile, Mode, Timing, BFC_QUEUES};
use anyhow::{anyhow, bail, Context, Result};
use dataplane::config::Topology;
use dataplane::host::{cc::CcKind, paths::HostGraph, StackConfig};
use dataplane::units::{parse_rate, parse_time};
use dataplane::workload::FlowSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One cell of the matrix × seeds, in table order.
pub(super) struct CellSpec {
    pub(super) index: usize,
    pub(super) params: BTreeMap<String, String>,
    pub(super) seed: u64,
    pub(super) label: String,
}

/// A cell made ready to run: its directory, its topology as the cell's settings patched it
/// (written to `topology.toml`), its flows (`schedule.csv`), its congestion control and its
/// queues per port.
pub(super) struct CellSetup<'a> {
    pub(super) spec: &'a CellSpec,
    pub(super) dir: PathBuf,
    pub(super) tpath: PathBuf,
    pub(super) topo: Topology,
    pub(super) sched: Vec<FlowSpec>,
    pub(super) cc: CcKind,
    pub(super) queues: Option<usize>,
}

/// An experiment file read and checked, with what every cell shares.
pub(super) struct Plan {
    pub(super) exp: ExpFile,
    pub(super) fname: String,
    pub(super) base: PathBuf,
    pub(super) topo_path: PathBuf,
    pub(super) topo_text: String,
    pub(super) paths: Paths,
    pub(super) cells: Vec<CellSpec>,
    /// FNV-1a of the experiment, topology and workload files (after `duration` overrides).
    pub(super) digest: String,
    /// The traffic window, drain and sampling interval (after `duration` overrides).
    pub(super) timing: Timing,
    /// `response_ps = "auto"` on real frames: what the first cell's switches measured, by
    /// switch; later cells reuse it (`real_frames::calibrate`).
    pub(super) calibrated: std::sync::Mutex<
        std::collections::BTreeMap<String, dataplane::calibrate::CalibrationSnapshot>,
    >,
}

/// Reads and checks the experiment `file` (with `duration` and `seeds` replaced if given) and
/// lists its cells.
pub(super) fn plan(file: &Path, duration: Option<&str>, seeds: Option<&[u64]>) -> Result<Plan> {
    let fname = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {fname}"))?;
    let mut exp: ExpFile = toml::from_str(&text).map_err(|e| anyhow!("{fname}: {e}"))?;
    if let Some(d) = duration {
        exp.duration = d.to_string();
    }
    if let Some(v) = seeds {
        exp.seeds = v.to_vec();
    }
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let topo_path = base.join(&exp.topology);
    let topo_text = std::fs::read_to_string(&topo_path)
        .with_context(|| format!("{fname}: topology: reading {}", topo_path.display()))?;
    let timing = exp.timing(&fname)?;
    let topo0 = Topology::load(&topo_path)?;
    // Rates and delays do not change between cells.
    let paths = path_params(&exp, &topo0, &fname)?;
    for k in exp.matrix.keys() {
        if !["scheme", "headroom", "lb", "cc", "queues", "load"].contains(&k.as_str()) {
            bail!(
                "{fname}: matrix.{k}: unknown setting (use scheme, headroom, lb, cc, queues, load)"
            );
        }
    }
    if exp.matrix.contains_key("load") && exp.workload.kind != "load" {
        bail!("{fname}: matrix.load: only a `load` workload has an offered load");
    }
    for (i, e) in exp.exclude.iter().enumerate() {
        if let Some(k) = e.keys().find(|k| !exp.matrix.contains_key(*k)) {
            bail!("{fname}: exclude[{i}].{k}: not a matrix key");
        }
    }
    if exp.seeds.is_empty() {
        bail!("{fname}: seeds: give at least one seed");
    }
    match exp.host.ack_prio {
        Some(_) if exp.mode == Mode::Real => {
            bail!("{fname}: host.ack_prio: virtual time only (`xoff host` acks in the flow's priority)")
        }
        Some(p) if p > 7 => bail!("{fname}: host.ack_prio: {p}: a priority is 0..=7"),
        _ => {}
    }
    if exp.host.mss.is_some() && exp.mode == Mode::Real {
        bail!("{fname}: host.mss: virtual time only (`xoff host` sends 1500-B frames)");
    }
    dataplane::config::expand_buffer_preset(&mut exp.buffer)
        .map_err(|e| anyhow!("{fname}: buffer: {e}"))?;
    check_buffer(&exp.buffer, &fname)?;
    if let Some(o) = &exp.host.out_of_order {
        o.parse::<dataplane::host::OutOfOrder>()
            .map_err(|e| anyhow!("{fname}: host.out_of_order: {e}"))?;
    }
    let mut cells = Vec::new();
    for params in cells_of(&exp.matrix)
        .into_iter()
        .filter(|p| !excluded(&exp, p))
    {
        for &seed in &exp.seeds {
            cells.push(CellSpec {
                index: cells.len(),
                label: cell_label(&params, seed, exp.seeds.len()),
                params: params.clone(),
                seed,
            });
        }
    }
    // What a shard's results depend on: the files, not their paths (shards may run on
    // machines that keep the repository elsewhere).
    let mut h = Fnv::default();
    h.field(text.as_bytes());
    h.field(exp.duration.as_bytes());
    if seeds.is_some() {
        h.field(format!("{:?}", exp.seeds).as_bytes());
    }
    h.field(topo_text.as_bytes());
    if let Some(c) = &exp.workload.cdf {
        let p = base.join(c);
        h.field(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?);
    }
    Ok(Plan {
        digest: format!("{:016x}", h.0),
        exp,
        fname,
        base,
        topo_path,
        topo_text,
        paths,
        cells,
        timing,
        calibrated: Default::default(),
    })
}

/// 64-bit FNV-1a: a stable digest (std's hasher may change between Rust releases).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Hashes a length-prefixed field, so ("ab", "c") and ("a", "bc") differ.
    fn field(&mut self, b: &[u8]) {
        for &x in (b.len() as u64).to_le_bytes().iter().chain(b) {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A cell directory's name inside the output directory.
pub(super) fn cell_dir_name(label: &str) -> String {
    label.replace([' ', '='], "_")
}

/// Every combination of the matrix values, in key order.
fn cells_of(m: &BTreeMap<String, Vec<String>>) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![BTreeMap::new()];
    for (k, vs) in m {
        let mut next = Vec::new();
        for c in &out {
            for v in vs {
                let mut c2 = c.clone();
                c2.insert(k.clone(), v.clone());
                next.push(c2);
            }
        }
        out = next;
    }
    out
}

/// Whether the cell with settings `p` matches an entry of the file's `exclude` (not run).
fn excluded(exp: &ExpFile, p: &BTreeMap<String, String>) -> bool {
    exp.exclude
        .iter()
        .any(|e| e.iter().all(|(k, v)| p.get(k) == Some(v)))
}

/// A cell's congestion control: matrix `cc`, else `host.cc`, else `window`.
pub(super) fn cell_cc(exp: &ExpFile, p: &BTreeMap<String, String>) -> Result<CcKind> {
    match p.get("cc").or(exp.host.cc.as_ref()) {
        Some(c) => c.parse().map_err(|e| anyhow!("cc: {e}")),
        None => Ok(CcKind::default()),
    }
}

/// A cell's name: its settings, and its seed when the file has several.
fn cell_label(p: &BTreeMap<String, String>, seed: u64, seeds: usize) -> String {
    let mut s: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if seeds > 1 {
        s.push(format!("seed={seed}"));
    }
    if s.is_empty() {
        "base".into()
    } else {
        s.join(" ")
    }
}

/// The cell's `queues` (per port, as the topology allows: 1..=127 data queues).
pub(super) fn cell_queues(p: &BTreeMap<String, String>) -> Result<Option<usize>> {
    match p.get("queues") {
        Some(q) => match q.parse::<usize>() {
            Ok(n) if (1..=127).contains(&n) => Ok(Some(n)),
            _ => bail!("matrix.queues: `{q}`: a number of queues per port, 1 to 127"),
        },
        None => Ok(None),
    }
}

/// The cell's `load` (a load workload's offered load per host, fraction of the NIC rate).
pub(super) fn cell_load(p: &BTreeMap<String, String>) -> Result<Option<f64>> {
    match p.get("load") {
        Some(l) => match l.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.5 => Ok(Some(x)),
            _ => bail!("matrix.load: `{l}`: an offered load in (0, 1.5]"),
        },
        None => Ok(None),
    }
}

/// `[buffer]` must read as MMU settings on its own: a wrong key or value names the file and
/// the key here, not a cell's generated topology later.
fn check_buffer(b: &toml::Table, fname: &str) -> Result<()> {
    if b.is_empty() {
        return Ok(());
    }
    let cfg: mmu::MmuConfig = toml::Value::Table(b.clone())
        .try_into()
        .map_err(|e| anyhow!("{fname}: buffer: {e}"))?;
    cfg.validate()
        .map_err(|e| anyhow!("{fname}: buffer: {e}"))?;
    Ok(())
}

/// Applies a cell's settings to every switch of the topology text. BFC cells in virtual time
/// also make the host NICs speak BFC unless `[sim]` already chooses how hosts take part.
pub(super) fn patch_topology(
    text: &str,
    p: &BTreeMap<String, String>,
    exp: &ExpFile,
) -> Result<String> {
    let prio = exp.workload.prio.unwrap_or(3);
    let mut v: toml::Value = toml::from_str(text)?;
    let scheme = p.get("scheme").map(String::as_str);
    let bfc = match scheme {
        None | Some("none" | "pfc") => false,
        Some("bfc" | "bfc-stochastic" | "bfc-single") => true,
        Some("aquarius") => true,
        Some(o) => bail!(
            "matrix.scheme: `{o}`: use none, pfc, bfc, bfc-stochastic, bfc-single or aquarius"
        ),
    };
    let queues = cell_queues(p)?.map(|n| n as i64);
    if let Some(h) = p.get("headroom") {
        if !["sih", "dsh"].contains(&h.as_str()) {
            bail!("matrix.headroom: `{h}`: use sih or dsh");
        }
    }
    // Issue 18: the switches' path policy.
    if let Some(lb) = p.get("lb") {
        if !["ecmp", "drill", "conga", "proteus"].contains(&lb.as_str()) {
            bail!("matrix.lb: `{lb}`: use ecmp, drill, conga or proteus");
        }
    }
    let cc = cell_cc(exp, p)?;
    let dctcp = cc == CcKind::Dctcp;
    let switches = v
        .get_mut("switch")
        .and_then(|s| s.as_array_mut())
        .ok_or_else(|| anyhow!("no [[switch]]"))?;
    for sw in switches.iter_mut() {
        let Some(t) = sw.as_table_mut() else { continue };
        if !exp.buffer.is_empty() {
            let b = t
                .entry("buffer")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(b) = b.as_table_mut() {
                b.extend(exp.buffer.clone());
            }
        }
        match scheme {
            None => {}
            Some("none") => {
                t.remove("pfc");
                t.remove("watchdog");
                t.remove("scheme");
            }
            Some("pfc") => {
                t.remove("scheme");
                if !t.contains_key("pfc") {
                    let mut pfc = toml::Table::new();
                    pfc.insert("enable_mask".into(), toml::Value::Integer(1 << prio));
                    t.insert("pfc".into(), toml::Value::Table(pfc));
                }
            }
            Some(s) => {
                // BFC alone: PFC's class-wide pauses would stop every dynamically assigned
                // queue of the class.
                t.remove("pfc");
                t.remove("watchdog");
                t.insert("scheme".into(), toml::Value::String(s.into()));
                if s.starts_with("bfc") {
                    // BFC's switch is a plain shared buffer that drops only when full (BFC
                    // §6.2.1: "the shared buffer memory model", 12 MB; §5: "BFC never
                    // incurred drops except under a 2000-to-1 incast"). With PFC gone, what
                    // a lossless class has is only a drop limit: its pool (`lossless_share`
                    // of the buffer, 3/4 by default), less the headroom reserved for XOFFs
                    // nobody sends (DSH insurance sized for minimum-size frames, 100 KB a
                    // port), left the 12 MB leaf of bfc-fig9 6.5 MB shared (and each ingress
                    // port its 100 KB): with 128 NIC queues its uplink queues filled that and
                    // it dropped 33 122 frames, 45 % of its buffer never usable. So no PG is
                    // lossless and the whole buffer
                    // is one pool, DT α at its largest (a queue may take all but 1/257 of
                    // what is free), as Pyrrha's "shared buffer mode"
                    // (`dataplane::scheme::pyrrha::incast_mix`). The audit still holds BFC
                    // to no loss on every priority (`dataplane::audit::lossless_prios`).
                    if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
                        let mut a = toml::Table::new();
                        a.insert(
                            "fraction".into(),
                            toml::Value::Float(mmu::config::Alpha::MAX_FRACTION),
                        );
                        b.insert("egress_alpha".into(), toml::Value::Table(a));
                        b.insert("lossless_pgs".into(), toml::Value::Array(Vec::new()));
                        b.insert("lossless_share".into(), toml::Value::Float(0.0));
                        b.remove("alpha");
                    }
                }
            }
        }
        if let Some(h) = p.get("headroom") {
            if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
                b.insert("headroom_mode".into(), toml::Value::String(h.clone()));
            }
        }
        if let Some(lb) = p.get("lb") {
            t.insert("lb".into(), toml::Value::String(lb.clone()));
        }
        if let Some(n) = queues {
            let d = t
                .entry("defaults")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(d) = d.as_table_mut() {
                d.insert("queues".into(), toml::Value::Integer(n));
            }
        }
        if cc.uses_int() {
            // HPCC's senders read the INT records every switch appends.
            t.insert("int".into(), toml::Value::Boolean(true));
        }
        if let Some(b) = t.get_mut("buffer").and_then(|b| b.as_table_mut()) {
            if dctcp && !b.contains_key("ecn") {
                // DCTCP §3.1: mark above one threshold K (HPCC's run.py: 30 KB per 10 Gbit/s).
                let mut e = toml::Table::new();
                e.insert("k_min_bytes".into(), toml::Value::Integer(30_000));
                e.insert("k_max_bytes".into(), toml::Value::Integer(30_000));
                e.insert("p_max".into(), toml::Value::Float(1.0));
                e.insert("ref_rate_bps".into(), toml::Value::Integer(10_000_000_000));
                b.insert("ecn".into(), toml::Value::Table(e));
            }
        }
    }
    if exp.mode == Mode::Virtual && scheme.is_some() {
        let root = v
            .as_table_mut()
            .ok_or_else(|| anyhow!("not a TOML table"))?;
        let sim = root
            .entry("sim")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let sim = sim
            .as_table_mut()
            .ok_or_else(|| anyhow!("sim: not a table"))?;
        if bfc {
            // BFC hosts: the host stack's BFC mode (`dataplane::host::fabric::install` turns
            // it on for NICs that honour BFC, with their queue count).
            if !sim.contains_key("honor_bfc") && !sim.contains_key("inflight_cap") {
                sim.insert("honor_bfc".into(), toml::Value::Boolean(true));
            }
            if let Some(n) = queues {
                // The NIC has as many queues as the switch ports (BFC-8: 8 everywhere).
                sim.insert("nic_bfc_queues".into(), toml::Value::Integer(n));
            } else if !sim.contains_key("nic_bfc_queues") {
                let q = exp.host.bfc_queues.unwrap_or(BFC_QUEUES);
                sim.insert("nic_bfc_queues".into(), toml::Value::Integer(q as i64));
            }
        } else {
            // A NIC pushing the BFC data shim toward a switch without BFC would confuse it.
            sim.insert("honor_bfc".into(), toml::Value::Boolean(false));
            if let Some(nics) = sim.get_mut("nic").and_then(|n| n.as_table_mut()) {
                for (_, n) in nics.iter_mut() {
                    if let Some(n) = n.as_table_mut() {
                        n.remove("honor_bfc");
                    }
                }
            }
        }
    }
    Ok(toml::to_string(&v)?)
}

/// Line rate and base RTTs of an experiment's topology (the same in every cell).
pub(super) struct Paths {
    /// Line rate for ideal FCTs (the slowest host NIC, or `host.rate`).
    pub(super) rate: u64,
    /// Payload bytes of a full data packet (`host.mss`).
    pub(super) mss: u32,
    /// Base RTT for default windows (and every ideal FCT with `host.base_rtt`): the longest
    /// host-to-host path's, so a window of one BDP fills every path.
    pub(super) rtt: u64,
    /// Per source and destination host (see [`HostGraph::rtts`]).
    pub(super) rtts: Vec<Vec<Option<u64>>>,
    /// The first host's NIC rate (load workloads: the rate `load` is a fraction of).
    pub(super) nic_rate: u64,
}

/// The rates and base RTTs of `topo` as `exp`'s hosts see them.
fn path_params(exp: &ExpFile, topo: &Topology, f: &str) -> Result<Paths> {
    let g = HostGraph::new(&topo.resolve()?);
    let rate = match &exp.host.rate {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("{f}: host.rate: {e}"))?,
        None => g
            .access
            .iter()
            .flatten()
            .map(|&(r, _)| r)
            .min()
            .unwrap_or(1),
    };
    let full = StackConfig::new(0, rate, 0).mss;
    let mss = match exp.host.mss {
        None => full,
        Some(m) if (64..=full).contains(&m) => m,
        Some(m) => bail!(
            "{f}: host.mss: {m}: payload bytes of a data packet, 64..={full} (a full packet \
             must fit the switches' 1500-B frames)"
        ),
    };
    let (derived, rtts) = g.base_rtt(mss, rate);
    let rtt = match &exp.host.base_rtt {
        Some(s) => parse_time(s).map_err(|e| anyhow!("{f}: host.base_rtt: {e}"))?,
        None => derived,
    };
    Ok(Paths {
        rate,
        mss,
        rtt,
        rtts,
        nic_rate: g.access.iter().flatten().next().map_or(0, |&(r, _)| r),
    })
}

#[cfg(test)]
mod matrix_tests {
    use super::*;

    const EXP: &str = r#"
name = "t"
topology = "t.toml"
mode = "virtual"
duration = "1ms"
[workload]
kind = "load"
cdf = "x.cdf"
[matrix]
scheme = ["bfc", "aquarius"]
queues = ["32", "8"]
[[exclude]]
scheme = "aquarius"
queues = "32"
"#;

    const TOPO: &str = r#"
name = "t"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", queues = 32 }
pfc = { enable_mask = 8 }
port = [{ name = "p1" }]
"#;

    /// `queues` sets every switch's queues per port and the BFC NICs' queues; `aquarius`
    /// drops PFC and makes the hosts honour the schemes' signals; `exclude` removes cells.
    #[test]
    fn queues_aquarius_and_exclude() {
        let exp: ExpFile = toml::from_str(EXP).unwrap();
        let p = |s: &str, q: &str| {
            BTreeMap::from([
                ("scheme".to_string(), s.into()),
                ("queues".into(), q.into()),
            ])
        };
        let t: toml::Value =
            toml::from_str(&patch_topology(TOPO, &p("aquarius", "8"), &exp).unwrap()).unwrap();
        let sw = &t["switch"][0];
        assert_eq!(sw["scheme"].as_str(), Some("aquarius"));
        assert_eq!(sw["defaults"]["queues"].as_integer(), Some(8));
        assert!(sw.get("pfc").is_none());
        assert_eq!(t["sim"]["honor_bfc"].as_bool(), Some(true));
        assert_eq!(t["sim"]["nic_bfc_queues"].as_integer(), Some(8));
        assert!(patch_topology(TOPO, &p("bfc", "0"), &exp).is_err());
        assert!(patch_topology(TOPO, &p("bfc", "128"), &exp).is_err());
        assert!(patch_topology(TOPO, &p("bfc", "127"), &exp).is_ok());
        // Real frames too: `xoff host --aquarius` honours the per-flow pauses.
        let real = ExpFile {
            mode: Mode::Real,
            ..exp.clone()
        };
        assert!(patch_topology(TOPO, &p("aquarius", "8"), &real).is_ok());
        assert_eq!(cell_queues(&p("aquarius", "8")).unwrap(), Some(8));
        let cells: Vec<_> = cells_of(&exp.matrix)
            .into_iter()
            .filter(|c| !excluded(&exp, c))
            .collect();
        assert_eq!(cells.len(), 3);
        assert!(!cells.contains(&p("aquarius", "32")));
    }

    /// BFC cells share the buffer completely: a BFC switch drops only when its whole buffer
    /// is full (BFC §6.2.1, §5), not at a lossless pool and headroom meant for PFC. On the
    /// fig. 9 leaf (24 ports of 100 Gbit/s, 12 MB, DSH, PG 3 lossless) the lossless class
    /// as BFC cells had it (α = 256) admitted 7.97 MB of the 11.72 MB of MTU frames 12 MB
    /// holds (6.5 MB shared, then each ingress port's insurance) before the first drop; the
    /// BFC cell now admits all of it. Aquarius and PFC cells keep the topology's buffer.
    #[test]
    fn bfc_cells_share_the_buffer() {
        let exp: ExpFile = toml::from_str(EXP).unwrap();
        let ports: Vec<String> = (0..24).map(|i| format!("{{ name = \"p{i}\" }}")).collect();
        let topo = format!(
            "name = \"t\"\n[[switch]]\nname = \"s1\"\n\
             defaults = {{ rate = \"100Gbit\", delay = \"1us\", queues = 32 }}\n\
             buffer = {{ buffer_bytes = 12000000, lossless_pgs = [3], headroom_mode = \"dsh\", \
             response_ps = 0 }}\npfc = {{ enable_mask = 8 }}\nport = [{}]\n",
            ports.join(", ")
        );
        let buffer_of = |exp: &ExpFile, scheme: &str| -> mmu::MmuConfig {
            let p = BTreeMap::from([("scheme".to_string(), scheme.to_string())]);
            let t: toml::Value = toml::from_str(&patch_topology(&topo, &p, exp).unwrap()).unwrap();
            t["switch"][0]["buffer"].clone().try_into().unwrap()
        };
        let buffer = |scheme: &str| buffer_of(&exp, scheme);
        // Bytes of 1500-B frames from the first 16 ports (hosts) to the 32 queues of the last
        // 8 (uplinks), in turn, admitted before the first drop.
        let until_drop = |cfg: &mmu::MmuConfig| -> u64 {
            let params = mmu::PortParams {
                rate_bps: 100_000_000_000,
                delay_ps: 1_000_000,
                mtu: 1500,
                queues: 32,
            };
            let mut m = mmu::Mmu::new(cfg, &[params; 24]).unwrap();
            let mut admitted = 0;
            for i in 0.. {
                let pkt = mmu::PacketInfo {
                    in_port: i % 16,
                    pg: 3,
                    out_port: 16 + i % 8,
                    queue: (i / 8) % 32,
                    bytes: 1500,
                    lossless: true,
                    ecn_capable: false,
                };
                match m.admit(&pkt, 0) {
                    mmu::Admission::Admitted { .. } => admitted += 1500,
                    mmu::Admission::Dropped(_) => break,
                }
            }
            admitted
        };
        // 1500-B frames take 6 cells of 256 B: at most 1500/1536 of the buffer.
        let full = 12_000_000 * 1500 / 1536;
        for s in ["bfc", "bfc-stochastic", "bfc-single"] {
            let got = until_drop(&buffer(s));
            assert!(got * 100 >= full * 99, "{s}: {got} B admitted of {full}");
        }
        let pfc = buffer("pfc");
        let own = until_drop(&pfc);
        assert!(own < full * 6 / 10, "the topology's own buffer: {own} B");
        assert_eq!(pfc.lossless_pgs, vec![3]);
        assert_eq!(buffer("aquarius").lossless_pgs, vec![3]);

        // `[buffer]` reaches every cell: BFC §6.2.1's PFC, "as in the HPCC paper" (a port
        // pauses above 1/8 of the free buffer, all of it lossless, headroom 3·C·D a port).
        // 16 ingress ports then hold 2/3 of what headroom leaves before their thresholds,
        // plus their headroom: 7.80 MB of MTU frames, where the topology's 3/4 pool at
        // α = 1/16 and DSH held 4.80 MB.
        let mut paper = exp.clone();
        paper.buffer =
            toml::from_str("lossless_share = 1.0\nheadroom_mode = \"hpcc\"\nalpha = { shift = 3 }")
                .unwrap();
        let pfc = buffer_of(&paper, "pfc");
        assert_eq!(pfc.headroom_mode, mmu::config::HeadroomMode::Hpcc);
        assert_eq!(pfc.lossless_share, 1.0);
        let got = until_drop(&pfc);
        assert!(
            got > full * 65 / 100 && got > own,
            "{got} B admitted of {full}"
        );
        for s in ["bfc", "bfc-stochastic", "bfc-single"] {
            let got = until_drop(&buffer_of(&paper, s));
            assert!(got * 100 >= full * 99, "{s}: {got} B admitted of {full}");
        }
        // A wrong key names the file and the key.
        let bad: toml::Table = toml::from_str("lossless_shar = 1.0").unwrap();
        let e = check_buffer(&bad, "x.toml").unwrap_err().to_string();
        assert!(
            e.contains("x.toml: buffer") && e.contains("lossless_shar"),
            "{e}"
        );
        let bad: toml::Table = toml::from_str("lossless_share = 2.0").unwrap();
        let e = check_buffer(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("lossless_share"), "{e}");
    }

    /// `preset = "hpcc"` in `[buffer]` stands for the eight keys BFC §6.2's experiment files
    /// spelled out before it, a key beside it wins (bfc-fig9-cc-ack.toml's lossy pool for the
    /// ACK class), and both override the topology's buffer as written-out keys do.
    #[test]
    fn buffer_preset_is_its_keys() {
        let topo = "name = \"t\"\n[[switch]]\nname = \"s1\"\n\
             buffer = { buffer_bytes = 12000000, lossless_pgs = [3], headroom_mode = \"dsh\", \
             alpha = { shift = 4 }, response_ps = 0 }\nport = [{ name = \"p0\" }]\n";
        let buffer_of = |buffer: &str| -> mmu::MmuConfig {
            let mut exp: ExpFile = toml::from_str(EXP).unwrap();
            exp.buffer = toml::from_str(buffer).unwrap();
            dataplane::config::expand_buffer_preset(&mut exp.buffer).unwrap();
            check_buffer(&exp.buffer, "x.toml").unwrap();
            let p = BTreeMap::from([("scheme".to_string(), "pfc".to_string())]);
            let t: toml::Value = toml::from_str(&patch_topology(topo, &p, &exp).unwrap()).unwrap();
            t["switch"][0]["buffer"].clone().try_into().unwrap()
        };
        let written = "cell_bytes = 1\nheadroom_mode = \"hpcc\"\nalpha = { shift = 3 }\n\
                       lossless_share = 1.0\nprivate_bytes = 4096\ndelta_bytes = 3072\n\
                       headroom_mtu_slack = false\nsmall_packet_percentage = 0";
        let preset = buffer_of("preset = \"hpcc\"");
        assert_eq!(preset, buffer_of(written));
        assert_eq!(
            preset.buffer_bytes, 12_000_000,
            "the switch's own size stays"
        );
        assert_eq!(preset.lossless_pgs, vec![3], "and so do its lossless PGs");
        let ack = buffer_of("preset = \"hpcc\"\nlossless_share = 0.98");
        assert_eq!(ack.lossless_share, 0.98);
        assert_eq!(
            mmu::MmuConfig {
                lossless_share: 1.0,
                ..ack
            },
            preset
        );
        // An unknown preset names itself and what is known.
        let mut bad: toml::Table = toml::from_str("preset = \"hpc\"").unwrap();
        let e = dataplane::config::expand_buffer_preset(&mut bad).unwrap_err();
        assert!(e.contains("`hpc`") && e.contains("hpcc"), "{e}");
    }

    /// `host.mss` sets the payload of a full packet for the hosts' segmentation and for ideal
    /// FCTs (BFC §6.2.1's 1 KB MTU); outside what a 1500-B frame holds it names the file and
    /// the key.
    #[test]
    fn host_mss_reaches_the_paths() {
        let topo = dataplane::config::Topology::parse(
            "name = \"t\"\n[[switch]]\nname = \"s1\"\n\
             defaults = { rate = \"100Gbit\", delay = \"1us\" }\n\
             [[switch.port]]\nname = \"p1\"\n[[switch.port]]\nname = \"p2\"\n\
             [[host]]\nname = \"h1\"\nip = \"10.0.0.1/24\"\n\
             [[host]]\nname = \"h2\"\nip = \"10.0.0.2/24\"\n\
             [[link]]\na = \"h1\"\nb = \"s1:p1\"\n[[link]]\na = \"h2\"\nb = \"s1:p2\"\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let mut exp: ExpFile = toml::from_str(EXP).unwrap();
        let full = path_params(&exp, &topo, "x.toml").unwrap();
        assert_eq!(full.mss, StackConfig::new(0, 1, 0).mss);
        exp.host.mss = Some(1000);
        let kb = path_params(&exp, &topo, "x.toml").unwrap();
        assert_eq!(kb.mss, 1000);
        // A full packet serializes faster, so the base RTT the ideal FCTs use is shorter.
        assert!(kb.rtt < full.rtt, "{} vs {}", kb.rtt, full.rtt);
        for bad in [0, 63, full.mss + 1] {
            exp.host.mss = Some(bad);
            let Err(e) = path_params(&exp, &topo, "x.toml") else {
                panic!("mss {bad} accepted");
            };
            assert!(e.to_string().contains("x.toml: host.mss"), "{e}");
        }
    }

    /// `load` replaces the workload's offered load per cell; `lb = conga` is a path choice.
    #[test]
    fn load_and_conga() {
        let l = |v: &str| BTreeMap::from([("load".to_string(), v.to_string())]);
        assert_eq!(cell_load(&l("0.397")).unwrap(), Some(0.397));
        assert_eq!(cell_load(&BTreeMap::new()).unwrap(), None);
        for bad in ["0", "1.6", "x", "-0.2"] {
            assert!(cell_load(&l(bad)).is_err(), "{bad}");
        }
        let exp: ExpFile = toml::from_str(EXP).unwrap();
        let lb = BTreeMap::from([("lb".to_string(), "conga".to_string())]);
        let t: toml::Value = toml::from_str(&patch_topology(TOPO, &lb, &exp).unwrap()).unwrap();
        assert_eq!(t["switch"][0]["lb"].as_str(), Some("conga"));
        let bad = BTreeMap::from([("lb".to_string(), "hermes".to_string())]);
        assert!(patch_topology(TOPO, &bad, &exp).is_err());
    }
}

//! Issue 23 item 1: parallel and sharded experiment sweeps. `--jobs N` and `--shard I/N` +
//! `merge` must give what one serial run gives, and `merge` must refuse what does not add up.
//! The experiment is `deploy/experiments/websearch-pfc.toml` (virtual time) shortened to 3 ms
//! with two seeds: 8 cells, a few seconds per run. Also checks the cluster recipes in
//! `deploy/cluster/` (the YAML parses, the Slurm script passes `bash -n`, both use the flags).

mod common;

use common::{repo, xoff};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Cell files every run writes; compared byte for byte.
const CELL_FILES: [&str; 4] = ["flows.csv", "timeline.csv", "schedule.csv", "topology.toml"];
/// Plots compared byte for byte (the PNGs are rasterised from the same data).
const PLOTS: [&str; 5] = [
    "fct_slowdown.svg",
    "fct_cdf.svg",
    "queue_depth.svg",
    "queue_max.svg",
    "pause_timeline.svg",
];

/// websearch-pfc.toml with `duration` and `seeds` replaced and its paths made absolute.
fn experiment(tag: &str, duration: &str) -> PathBuf {
    let src = repo().join("deploy/experiments/websearch-pfc.toml");
    let dir = src.parent().expect("experiment directory");
    let text = std::fs::read_to_string(&src).expect("read experiment");
    let mut out = String::new();
    let mut replaced = 0;
    for line in text.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let val = line.split_once('=').map_or("", |(_, v)| v.trim());
        let l = match key {
            "duration" => format!("duration = \"{duration}\""),
            "seeds" => "seeds = [1, 2]".to_string(),
            "topology" | "cdf" => {
                let rel = val.trim_matches('"');
                format!("{key} = \"{}\"", dir.join(rel).display())
            }
            _ => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
        };
        replaced += 1;
        out.push_str(&l);
        out.push('\n');
    }
    assert_eq!(replaced, 4, "websearch-pfc.toml changed shape");
    let path = std::env::temp_dir().join(format!("{}.toml", common::unique(tag)));
    std::fs::write(&path, out).expect("write experiment");
    path
}

fn xoff_cmd(args: &[&str], paths: &[&Path]) -> Output {
    let mut c = Command::new(xoff());
    c.args(["experiment"]).args(args);
    for p in paths {
        c.arg(p);
    }
    c.output().expect("run xoff experiment")
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "xoff failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn run(file: &Path, tag: &str, extra: &[&str]) -> PathBuf {
    let out = std::env::temp_dir().join(common::unique(tag));
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    ok(xoff_cmd(&args, &[file, Path::new("--out"), &out]));
    out
}

fn results(dir: &Path) -> Value {
    let t = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    serde_json::from_str(&t).expect("results.json parses")
}

/// results.json with the fields that name the output directory made relative to it: each
/// cell's `dir` and the `plots` list. Nothing else is excluded: a virtual-time cell has no
/// wall-clock field (FCTs, goodput and timelines are all in virtual time).
fn normalized(dir: &Path) -> Value {
    let mut v = results(dir);
    let prefix = format!("{}/", dir.display());
    let strip = |s: &mut Value| {
        let rel = s
            .as_str()
            .and_then(|x| x.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{s} is not under {prefix}"))
            .to_string();
        *s = Value::String(rel);
    };
    for c in v["cells"].as_array_mut().expect("cells") {
        strip(&mut c["dir"]);
    }
    for p in v["plots"].as_array_mut().expect("plots") {
        strip(p);
    }
    v
}

/// Asserts that `b` holds exactly what the serial run `a` holds.
fn assert_same(a: &Path, b: &Path, what: &str) {
    let (va, vb) = (normalized(a), normalized(b));
    let cells = va["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 8, "2 schemes x 2 headroom modes x 2 seeds");
    for (ca, cb) in cells.iter().zip(vb["cells"].as_array().expect("cells")) {
        assert_eq!(ca, cb, "{what}: cell {} differs", ca["cell"]);
    }
    assert_eq!(va, vb, "{what}: results.json differs");
    for c in cells {
        let d = c["dir"].as_str().expect("dir");
        for f in CELL_FILES {
            let x = std::fs::read(a.join(d).join(f)).expect("serial cell file");
            let y = std::fs::read(b.join(d).join(f)).unwrap_or_default();
            assert!(x == y, "{what}: {d}/{f} differs");
        }
    }
    for p in PLOTS {
        let x = std::fs::read(a.join(p)).expect("serial plot");
        let y = std::fs::read(b.join(p)).unwrap_or_default();
        assert!(x == y, "{what}: {p} differs");
    }
}

#[test]
fn jobs_shards_and_merge_equal_a_serial_run() {
    let file = experiment("swp", "3ms");
    let serial = run(&file, "sws", &[]);
    let s = results(&serial);
    // The comparison means something only if the cells differ from each other.
    let flows: Vec<u64> = s["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["summary"]["flows"].as_u64().unwrap_or(0))
        .collect();
    assert!(flows.iter().all(|&n| n > 50), "flows per cell: {flows:?}");
    assert_ne!(
        flows[0], flows[1],
        "seeds 1 and 2 should draw different workloads"
    );
    assert!(s.get("shard").is_none(), "a whole run is not a shard");

    let par = run(&file, "swj", &["--jobs", "3"]);
    assert_same(&serial, &par, "--jobs 3");

    let shards: Vec<PathBuf> = (0..3)
        .map(|i| run(&file, "swh", &["--shard", &format!("{i}/3")]))
        .collect();
    // Stable assignment: shard I has the cells whose index is I mod 3.
    for (i, d) in shards.iter().enumerate() {
        let r = results(d);
        let idx: Vec<u64> = r["shard"]["cells"]
            .as_array()
            .expect("shard.cells")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        let want: Vec<u64> = (0..8).filter(|c| c % 3 == i as u64).collect();
        assert_eq!(idx, want, "shard {i}/3");
        assert_eq!(r["cells"].as_array().map(Vec::len), Some(want.len()));
    }
    let merged = std::env::temp_dir().join(common::unique("swm"));
    let sp: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    // Shards given in any order.
    let o = ok(xoff_cmd(
        &["merge"],
        &[sp[2], sp[0], sp[1], Path::new("--out"), &merged],
    ));
    assert!(String::from_utf8_lossy(&o.stdout).contains("headroom=dsh scheme=none seed=2"));
    assert_same(&serial, &merged, "3 shards + merge");
    assert!(
        !merged
            .join("headroom_sih_scheme_pfc_seed_1/cell.json")
            .exists(),
        "merge output carries shard-only files"
    );

    // What merge refuses.
    let refuse = |dirs: &[&Path], want: &str| {
        let out = std::env::temp_dir().join(common::unique("swr"));
        let mut args: Vec<&Path> = dirs.to_vec();
        args.extend([Path::new("--out"), out.as_path()]);
        let o = xoff_cmd(&["merge"], &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "merge accepted {dirs:?}");
        assert!(
            err.contains(want),
            "merge of {dirs:?}: `{want}` not in: {err}"
        );
        assert!(
            !out.join("results.json").exists(),
            "a refused merge wrote results"
        );
    };
    refuse(&[sp[0], sp[1]], "2 of 8 cells missing");
    refuse(&[sp[0], sp[1], sp[2], sp[1]], "is in two shards");
    refuse(&[sp[0], sp[1], &serial], "not a shard");
    // The same experiment name from a different file (another traffic window).
    let other = experiment("swo", "2ms");
    let odd = run(&other, "swd", &["--shard", "2/3"]);
    refuse(&[sp[0], sp[1], &odd], "shards of different experiments");
    // A shard of another split (2/4 here) does not pair with 0/3 and 1/3.
    let four = run(&file, "swf", &["--shard", "3/4"]);
    refuse(&[sp[0], sp[1], &four], "shard count");
}

#[test]
fn shard_and_jobs_flags_are_checked() {
    let file = experiment("swx", "3ms");
    for (args, want) in [
        (vec!["run", "--shard", "3/3"], "0 <= I < N"),
        (vec!["run", "--shard", "1"], "use I/N"),
        (vec!["run", "--jobs", "0"], "--jobs"),
    ] {
        let o = xoff_cmd(&args, &[&file]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: `{want}` not in: {err}");
    }
}

/// The YAML documents of a manifest file, parsed.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("manifest");
    text.split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|d| serde_norway::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// The command line of a Job's first container.
fn job_cmd(job: &Value) -> Vec<String> {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    c["command"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(c["args"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// The Kubernetes Indexed Job parses as YAML and runs `--shard $(JOB_COMPLETION_INDEX)/N` with
/// N = completions, its merge Job lists exactly those N shard directories; the Slurm script
/// passes `bash -n` and runs `--shard $SLURM_ARRAY_TASK_ID/N` in an array of N tasks, then a
/// merge that depends on it.
#[test]
fn cluster_recipes_use_the_flags() {
    let dir = repo().join("deploy/cluster");
    let docs = yaml_docs(&dir.join("xoff-sweep.k8s.yaml"));
    let job = docs
        .iter()
        .find(|d| d["kind"] == "Job" && d["spec"]["completionMode"] == "Indexed")
        .expect("an Indexed Job");
    let n = job["spec"]["completions"].as_u64().expect("completions");
    assert!(n > 1);
    let cmd = job_cmd(job);
    assert_eq!(cmd[..3], ["xoff", "experiment", "run"], "{cmd:?}");
    let flag = |k: &str| {
        cmd.iter()
            .position(|a| a == k)
            .and_then(|i| cmd.get(i + 1))
            .map(String::as_str)
    };
    assert_eq!(
        flag("--shard"),
        Some(format!("$(JOB_COMPLETION_INDEX)/{n}").as_str())
    );
    assert_eq!(
        flag("--out"),
        Some("/results/shard-$(JOB_COMPLETION_INDEX)")
    );
    assert!(flag("--jobs").is_some_and(|j| j.parse::<u16>().is_ok_and(|j| j >= 1)));
    // The experiment it names exists in the image's copy of deploy/.
    let exp = cmd[3]
        .strip_prefix("/opt/xoff/")
        .expect("experiment under /opt/xoff");
    assert!(repo().join(exp).is_file(), "{exp}");

    let merge = yaml_docs(&dir.join("xoff-merge.k8s.yaml"));
    let mj = merge
        .iter()
        .find(|d| d["kind"] == "Job")
        .expect("merge Job");
    let m = job_cmd(mj);
    assert_eq!(m[..3], ["xoff", "experiment", "merge"], "{m:?}");
    let want: Vec<String> = (0..n).map(|i| format!("/results/shard-{i}")).collect();
    assert_eq!(m[3..3 + n as usize], want[..], "merge lists every shard");
    assert_eq!(m[3 + n as usize..], ["--out", "/results/merged"]);

    let slurm = dir.join("xoff-sweep.slurm");
    let st = Command::new("bash")
        .arg("-n")
        .arg(&slurm)
        .status()
        .expect("bash");
    assert!(st.success(), "bash -n {}", slurm.display());
    let s = std::fs::read_to_string(&slurm).expect("slurm script");
    assert!(s.contains("--array=0-$((N - 1))"), "array of N tasks");
    assert!(
        s.contains("--shard \"$SLURM_ARRAY_TASK_ID/$N\""),
        "shard flag"
    );
    assert!(s.contains("--dependency=afterok:"), "dependent merge job");
    assert!(s.contains("experiment merge"), "merge step");
}

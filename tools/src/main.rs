//! `xoff`: the command-line edge of Xoff. Logic lives in the library crates; this file parses
//! arguments, reports errors and wires things together.

#![forbid(unsafe_code)]

mod audit;
mod bench;
mod congestion;
mod experiment;
mod host;
mod metrics;
mod plot;
mod repro;
mod run;
mod sim;
mod tap;
mod top;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use dataplane::ctl::{self, Request, Response};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "xoff",
    version,
    about = "A poll-mode userspace switch with a datacenter ASIC's buffer and flow control"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one switch of a topology file on its interfaces (AF_XDP).
    #[command(
        after_help = "Example:\n  xoff run --config deploy/topologies/single.toml --switch s1 --metrics 127.0.0.1:9100"
    )]
    Run(run::RunArgs),
    /// Talk to a running switch.
    #[command(after_help = "Example:\n  xoff ctl --testbed single --switch s1 stats --json")]
    Ctl(CtlArgs),
    /// Benchmarks against peers (Linux bridge, bare AF_XDP forwarder, OVS, testpmd).
    #[command(after_help = "Example:\n  xoff bench line-rate --sizes 64,512 --duration 4")]
    Bench {
        #[command(subcommand)]
        cmd: bench::BenchCmd,
    },
    /// Run a topology + traffic file in deterministic virtual time.
    #[command(after_help = "Example:\n  xoff sim deploy/sim/incast-pfc.toml --json")]
    Sim(sim::SimArgs),
    /// Run an end host (workload sender/receiver, honours PFC) on a testbed host's eth0.
    #[command(
        after_help = "Example:\n  ip netns exec incast9-h1 xoff host --topology deploy/experiments/topo/incast9.toml --host h1 --schedule schedule.csv --out /tmp/h1 --run 3s\n  (xoff experiment run starts one per host: see deploy/experiments/incast-pfc.toml)"
    )]
    Host(host::HostArgs),
    /// Run an experiment file: testbed or virtual time, matrix of settings, table and plots.
    #[command(
        after_help = "Example:\n  xoff experiment run deploy/experiments/websearch-pfc.toml --jobs 2 --out /tmp/ws"
    )]
    Experiment {
        #[command(subcommand)]
        cmd: experiment::ExperimentCmd,
    },
    /// Reproduce the papers' headline results in virtual time: paper vs measured, a verdict
    /// per row, REPORT.md and plots.
    #[command(after_help = "Example:\n  xoff repro all --quick --out /tmp/repro")]
    Repro(repro::ReproArgs),
    /// Live view of running switches: rates, queue depths, pauses, drops (q quits).
    ///
    /// Example: `xoff top --testbed chainpfc` (or `--once` for one text frame).
    Top(top::TopArgs),
    /// Build, use and remove a netns testbed from a topology file.
    #[command(
        after_help = "Example:\n  xoff testbed up deploy/topologies/chain-pfc.toml && xoff top --testbed chainpfc"
    )]
    Testbed {
        #[command(subcommand)]
        cmd: TestbedCmd,
    },
}

#[derive(clap::Args)]
struct CtlArgs {
    /// Switch name.
    #[arg(long)]
    switch: String,
    /// Control socket (default /run/xoff/NAME.sock; `--testbed` finds a testbed's).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Name of the testbed the switch belongs to.
    #[arg(long)]
    testbed: Option<String>,
    #[command(subcommand)]
    cmd: CtlCmd,
}

#[derive(Subcommand)]
enum CtlCmd {
    /// Per-port and per-queue counters.
    #[command(after_help = "Example:\n  xoff ctl --switch s1 --testbed single stats")]
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Where every received frame went, per port and priority: forwarded, dropped (by
    /// reason), queued or in a hand-off ring; exits 1 if it does not balance or a lossless
    /// priority lost frames. Exact once traffic has stopped.
    #[command(after_help = "Example:\n  xoff ctl --switch s1 --testbed single audit")]
    Audit {
        #[arg(long)]
        json: bool,
    },
    /// Pause an egress queue through the AFC channel.
    #[command(
        after_help = "Example:\n  xoff ctl --switch s1 --testbed single pause --port 2 --queue 3"
    )]
    Pause {
        #[arg(long)]
        port: usize,
        #[arg(long)]
        queue: usize,
    },
    /// Resume an egress queue.
    #[command(
        after_help = "Example:\n  xoff ctl --switch s1 --testbed single resume --port 2 --queue 3"
    )]
    Resume {
        #[arg(long)]
        port: usize,
        #[arg(long)]
        queue: usize,
    },
    /// Mirror a port's frames (as received / as transmitted, shim included) to a pcap file.
    #[command(
        after_help = "Example:\n  xoff ctl --switch s1 --testbed single tap --port p1 --dir both --duration 5 --out p1.pcap\n  xoff ctl --switch s1 --testbed single tap --port p1 --out - | wireshark -k -i -"
    )]
    Tap(tap::TapArgs),
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Create namespaces, links, addresses and start the switches.
    #[command(
        after_help = "Example:\n  xoff testbed up deploy/topologies/leafspine.toml --run-args=\"--workers 2\""
    )]
    Up {
        file: PathBuf,
        /// Testbed name (prefix of namespaces); defaults to the file's `name`.
        #[arg(long)]
        name: Option<String>,
        /// Extra arguments for every `xoff run` (e.g. "--workers 2").
        #[arg(long, allow_hyphen_values = true)]
        run_args: Option<String>,
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Stop the switches and remove everything `up` created.
    #[command(after_help = "Example:\n  xoff testbed down deploy/topologies/leafspine.toml")]
    Down {
        file: PathBuf,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Write the testbed as another tool's lab definition on stdout, e.g. `xoff testbed
    /// export --containerlab FILE > lab.clab.yml` (containerlab `linux` nodes: switches run
    /// `xoff run` on their ports' interfaces, hosts use eth1).
    #[command(
        after_help = "Example:\n  xoff testbed export --containerlab deploy/topologies/leafspine.toml > lab.clab.yml"
    )]
    Export {
        file: PathBuf,
        /// containerlab topology YAML (the only format so far).
        #[arg(long, required = true)]
        containerlab: bool,
        /// Container image of every node: must hold `xoff`, `ip`, `ethtool`, `sysctl`.
        #[arg(long, default_value = "xoff:latest")]
        image: String,
        /// Lab name; defaults to the file's `name`.
        #[arg(long)]
        name: Option<String>,
        /// Extra arguments for every `xoff run` (as `testbed up --run-args`).
        #[arg(long, allow_hyphen_values = true)]
        run_args: Option<String>,
    },
    /// The lossless audit of every switch of a running testbed and of every link between
    /// two switches; exits 1 if it does not balance or a lossless priority lost frames.
    /// Exact once traffic has stopped.
    #[command(after_help = "Example:\n  xoff testbed audit deploy/topologies/leafspine.toml")]
    Audit {
        file: PathBuf,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Run a command inside a host's namespace.
    #[command(
        after_help = "Example:\n  xoff testbed exec deploy/topologies/leafspine.toml h11 -- ping -c 2 10.0.3.2"
    )]
    Exec {
        file: PathBuf,
        host: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
}

/// Where a testbed spread over machines is built (the file's `[[machine]]` tables).
#[derive(clap::Args)]
struct MachineArgs {
    /// Build (or remove) only this machine's nodes; links to other machines become VXLAN
    /// tunnels. Without it every node is built here and every link is a veth.
    #[arg(long)]
    machine: Option<String>,
    /// Namespace holding this machine's underlay address (default: the current one, i.e. the
    /// root namespace on a real machine); e.g. an "underlay" namespace standing in for a
    /// machine in a one-box demo.
    #[arg(long, requires = "machine")]
    underlay_netns: Option<String>,
}

impl MachineArgs {
    fn apply(self, tb: deploy::testbed::Testbed) -> Result<deploy::testbed::Testbed> {
        Ok(match &self.machine {
            Some(m) => tb.on_machine(m, self.underlay_netns.as_deref())?,
            None => tb,
        })
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Run(a) => run::run(a),
        Cmd::Ctl(a) => ctl_cmd(a),
        Cmd::Bench { cmd } => bench::run(cmd),
        Cmd::Sim(a) => sim::run(a).map(|()| 0),
        Cmd::Testbed { cmd } => testbed_cmd(cmd),
        Cmd::Host(a) => host::run(a),
        Cmd::Experiment { cmd } => experiment::run(cmd),
        Cmd::Repro(a) => repro::run(a),
        Cmd::Top(a) => top::run(a),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xoff: {e:#}");
            std::process::exit(1);
        }
    }
}

fn ctl_cmd(a: CtlArgs) -> Result<i32> {
    let path = match (&a.socket, &a.testbed) {
        (Some(p), _) => p.clone(),
        (None, Some(tb)) => deploy::testbed::socket_path(tb, &a.switch),
        (None, None) => ctl::default_socket(&a.switch),
    };
    let req = match a.cmd {
        CtlCmd::Tap(t) => return tap::run(&path, &a.switch, t),
        CtlCmd::Stats { .. } => Request::Stats,
        CtlCmd::Audit { .. } => Request::Audit,
        CtlCmd::Pause { port, queue } => Request::Pause { port, queue },
        CtlCmd::Resume { port, queue } => Request::Resume { port, queue },
    };
    let resp = ctl::request(&path, &req)
        .with_context(|| format!("switch `{}` at {}", a.switch, path.display()))?;
    match (resp, a.cmd) {
        (Response::Stats(s), CtlCmd::Stats { json: true }) => {
            println!("{}", serde_json::to_string_pretty(&s)?)
        }
        (Response::Stats(s), _) => print!("{}", s.table()),
        (Response::Audit(au), CtlCmd::Audit { json }) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&au)?);
            } else {
                print!("{}", au.table());
            }
            if !au.lossless_ok() {
                return Ok(1);
            }
        }
        (Response::Audit(au), _) => print!("{}", au.table()),
        (Response::Ok, _) => println!("ok"),
        (Response::Error(e), _) => bail!("switch `{}`: {e}", a.switch),
    }
    Ok(0)
}

fn testbed_cmd(c: TestbedCmd) -> Result<i32> {
    use deploy::testbed::Testbed;
    match c {
        TestbedCmd::Up {
            file,
            name,
            run_args,
            machine,
        } => {
            let tb = machine.apply(Testbed::load(&file, name.as_deref())?)?;
            let extra: Vec<String> = run_args
                .map(|s| s.split_whitespace().map(String::from).collect())
                .unwrap_or_default();
            tb.up(&extra)?;
            let on = tb
                .machine
                .as_ref()
                .map_or(String::new(), |m| format!(" on machine `{m}`"));
            println!(
                "testbed `{}` is up{on}; logs in {}",
                tb.name,
                tb.dir.display()
            );
            Ok(0)
        }
        TestbedCmd::Down {
            file,
            name,
            machine,
        } => {
            let tb = machine.apply(Testbed::load(&file, name.as_deref())?)?;
            tb.down()?;
            let on = tb
                .machine
                .as_ref()
                .map_or(String::new(), |m| format!(" on machine `{m}`"));
            println!("testbed `{}` is down{on}", tb.name);
            Ok(0)
        }
        TestbedCmd::Export {
            file,
            containerlab: _,
            image,
            name,
            run_args,
        } => {
            let opts = deploy::clab::ClabOptions {
                image,
                name,
                run_args: run_args
                    .map(|s| s.split_whitespace().map(String::from).collect())
                    .unwrap_or_default(),
            };
            let lab = deploy::clab::export(&file, &opts)?;
            print!("{}", deploy::clab::to_yaml(&lab)?);
            Ok(0)
        }
        TestbedCmd::Audit {
            file,
            name,
            json,
            machine,
        } => {
            let tb = machine.apply(Testbed::load(&file, name.as_deref())?)?;
            let a = audit::testbed(&tb)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&a)?);
            } else {
                print!("{}", a.table());
            }
            Ok(if a.ok() { 0 } else { 1 })
        }
        TestbedCmd::Exec {
            file,
            host,
            name,
            cmd,
        } => {
            let tb = Testbed::load(&file, name.as_deref())?;
            Ok(tb.exec(&host, &cmd)?)
        }
    }
}

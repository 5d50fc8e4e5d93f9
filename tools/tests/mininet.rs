//! Xoff as a Mininet switch (`deploy/mininet/xoff_mininet.py`). Requires root and Debian's
//! Mininet (`deploy/install.sh --mininet`).
//!
//! `mn` (and `mn -c`, which `mn` runs itself after an error) cleans up with `killall`,
//! `pkill -f`, `rm -f /tmp/*.log`, `ip link del` and sysctl writes. So every Mininet run here
//! happens inside `unshare --kill-child --net --pid --fork --mount-proc --mount`: its own
//! network namespace (only `lo`, brought up), its own PID namespace with its own `/proc` (the
//! clean-ups see only sandbox processes), a private tmpfs on `/tmp` and a read-only
//! `/proc/sys` (Mininet's sysctl writes fail with a warning). When the script ends, the
//! sandbox is killed as a whole. The checks that no `xoff` process and no XDP program remain
//! run inside the sandbox, after Mininet stopped and before the sandbox exits.

use crate::common;

use common::{repo, require_root, serial, xoff};
use std::path::Path;
use std::process::Command;

/// Runs `script` (bash) in a fresh sandbox from the repository root and returns stdout+stderr.
/// After the script, the sandbox prints `xoff-procs: N` (running xoff processes) and
/// `xdp-ifaces: N` (interfaces of its root namespace with an XDP program).
fn sandbox(script: &str) -> (bool, String) {
    require_root();
    assert!(
        Path::new("/usr/bin/mn").exists(),
        "Mininet is not installed: run deploy/install.sh --mininet"
    );
    let body = format!(
        r#"set -u
# A private /tmp that still shows the checkout when the checkout itself lives under /tmp.
mkdir -p /run/xoff-sandbox-tmp && mount --bind /tmp /run/xoff-sandbox-tmp
mount -t tmpfs -o mode=1777 xoff-test-tmp /tmp
case "$PWD/" in /tmp/*) mkdir -p "$PWD" && mount --bind "/run/xoff-sandbox-tmp${{PWD#/tmp}}" "$PWD" && cd "$PWD";; esac
mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
ip link set lo up
rc=0
( {script}
) 2>&1 || rc=$?
echo "script-rc: $rc"
echo "xoff-procs: $(pgrep -x xoff | wc -l)"
echo "xdp-ifaces: $(ip -d link show | grep -c -E 'prog/xdp|xdpgeneric|xdpdrv|xdpoffload| xdp ')"
for f in /tmp/xoff-mininet/*.log; do [ -e "$f" ] && {{ echo "--- $f"; cat "$f"; }}; done
exit $rc
"#
    );
    let out = Command::new("unshare")
        .args([
            "--kill-child",
            "--net",
            "--pid",
            "--fork",
            "--mount-proc",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            &body,
        ])
        .current_dir(repo())
        .env("XOFF_BIN", xoff())
        .env("XOFF_MININET_DIR", "/tmp/xoff-mininet")
        .output()
        .expect("run unshare");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    (out.status.success(), text)
}

/// Nothing of Xoff left in the sandbox after the network stopped, and every `xoff run`
/// exited 0 on SIGTERM (XoffSwitch reports any other status).
fn assert_clean(text: &str) {
    assert!(
        text.contains("xoff-procs: 0\n"),
        "xoff processes left after Mininet stopped"
    );
    assert!(
        text.contains("xdp-ifaces: 0\n"),
        "XDP programs left after Mininet stopped"
    );
    assert!(
        !text.contains("xoff run exited with status") && !text.contains("ignored SIGTERM"),
        "an xoff run did not exit cleanly on SIGTERM"
    );
}

fn mn(args: &str) -> String {
    format!(
        "/usr/bin/mn --custom deploy/mininet/xoff_mininet.py --switch xoff --controller none {args}"
    )
}

#[test]
fn mn_single3_pingall_drops_nothing_and_leaves_nothing() {
    let _g = serial();
    let (ok, text) = sandbox(&mn("--topo single,3 --test pingall"));
    assert!(ok, "mn failed");
    assert!(
        text.contains("*** Results: 0% dropped (6/6 received)"),
        "pingall on single,3 lost pings"
    );
    assert_clean(&text);
}

#[test]
fn mn_linear3_and_tree2_pingall_with_shaped_links_and_mmu_params() {
    let _g = serial();
    // linear,3 with rate and delay from the link parameters; tree,depth=2 (3 switches,
    // 4 hosts) with the MMU configured from switch parameters.
    let (ok, text) = sandbox(&format!(
        "{} && grep -H -E 'rate|delay' /tmp/xoff-mininet/s2.toml && {} && cat /tmp/xoff-mininet/s1.toml",
        mn("--link default,bw=50,delay=100us --topo linear,3 --test pingall"),
        mn("--switch xoff,scheme=pfc,headroom=dsh,buffer=4MiB,lossless=3+4 --topo tree,depth=2 --test pingall"),
    ));
    assert!(ok, "mn failed");
    assert_eq!(
        text.matches("*** Results: 0% dropped (6/6 received)")
            .count(),
        1,
        "pingall on linear,3 lost pings"
    );
    assert!(
        text.contains("*** Results: 0% dropped (12/12 received)"),
        "pingall on tree,depth=2 lost pings"
    );
    // s2 of linear,3 has three ports, each at the link's 50 Mbit/s and 100 us.
    assert_eq!(
        text.matches("s2.toml:rate = \"50Mbit\"").count(),
        3,
        "link bw not used"
    );
    assert_eq!(
        text.matches("s2.toml:delay = \"100us\"").count(),
        3,
        "link delay not used"
    );
    for line in [
        "[switch.buffer]",
        "buffer_bytes = 4194304",
        "headroom_mode = \"dsh\"",
        "lossless_pgs = [3, 4]",
        "[switch.pfc]",
        "enable_mask = 24",
    ] {
        assert!(text.contains(line), "tree config lacks `{line}`");
    }
    assert_clean(&text);
}

#[test]
fn unknown_scheme_is_rejected_with_a_clear_error() {
    let _g = serial();
    // mn reports the exception, cleans up (inside the sandbox) and exits 0.
    let (_, text) = sandbox(&mn("--switch xoff,scheme=bfc --topo single,2 --test none"));
    assert!(
        !text.contains("*** Starting 1 switches"),
        "mn built a network with scheme=bfc"
    );
    assert!(
        text.contains("unknown scheme 'bfc': XoffSwitch supports none, pfc"),
        "no clear error for scheme=bfc"
    );
    assert_clean(&text);
}

#[test]
fn xoff_run_survives_its_interfaces_disappearing_and_exits_cleanly() {
    let _g = serial();
    // What Mininet does at stop (links deleted before switch.stop()), with checks between.
    let py = r#"
import sys, time
sys.path.insert(0, 'deploy/mininet')
from mininet.net import Mininet
from mininet.topo import SingleSwitchTopo
from xoff_mininet import XoffSwitch
net = Mininet(SingleSwitchTopo(3), switch=XoffSwitch, controller=None)
net.start()
s1 = net.switches[0]
print('pingall-loss', net.pingAll())
for link in list(net.links)[:2]:
    net.delLink(link)
time.sleep(0.5)
print('alive-after-two-links-deleted', s1.running())
print(s1.stats())
for link in list(net.links):
    net.delLink(link)
time.sleep(0.5)
print('alive-after-all-links-deleted', s1.running())
print('exit-status', s1.stop_xoff())
net.stop()
"#;
    let (ok, text) = sandbox(&format!("/usr/bin/python3 - <<'EOF'\n{py}\nEOF"));
    assert!(ok, "script failed");
    assert!(text.contains("pingall-loss 0.0"), "pings lost");
    assert!(
        text.contains("alive-after-two-links-deleted True")
            && text.contains("alive-after-all-links-deleted True"),
        "xoff run died when its interfaces disappeared"
    );
    // The table shows the first two ports down, the third up.
    for (port, up) in [("s1-eth1", "NO"), ("s1-eth2", "NO"), ("s1-eth3", "yes")] {
        assert!(
            text.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 2 && w[0] == port && w[1] == up
            }),
            "{port} should be shown up={up}"
        );
    }
    assert_eq!(
        text.matches("interface disappeared").count(),
        3,
        "each lost interface is reported once"
    );
    assert!(
        text.contains("exit-status 0"),
        "xoff run did not exit 0 on SIGTERM"
    );
    assert_clean(&text);
}

/// Python API (`Mininet(topo, switch=XoffSwitch, controller=None)`), `linear,3`, every link
/// `bw=100`: iperf3 (TCP, 10 s) from h1 to h3 crosses three Xoff shapers at 100 Mbit/s.
///
/// Range: the shaper charges each frame its length + 20 B (preamble/IFG); a full-size TCP
/// segment is a 1514 B frame carrying 1448 B of payload (with timestamps), so the goodput
/// ceiling is 100 × 1448 / 1534 = 94.4 Mbit/s. The upper bound 96 leaves measurement slack and
/// still fails if the links were not shaped (unshaped veth runs at Gbit/s). The lower bound
/// 85 allows for slow start within 10 s and a loaded 2-core machine; below it the rate is not
/// the configured one.
#[test]
fn python_api_linear3_bw100_iperf3_runs_at_the_link_rate() {
    let _g = serial();
    let (ok, text) = sandbox(
        "/usr/bin/python3 deploy/mininet/iperf3_ends.py --topo linear,3 --bw 100 --seconds 10",
    );
    assert!(ok, "script failed");
    assert!(text.contains("pingall: 0% dropped"), "pings lost");
    let line = text
        .lines()
        .find(|l| l.starts_with("iperf3: h1 -> h3 receiver"))
        .unwrap_or_else(|| panic!("no iperf3 result"));
    let rate: f64 = line
        .split_whitespace()
        .nth(5)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse `{line}`"));
    assert!(
        (85.0..=96.0).contains(&rate),
        "TCP through three 100 Mbit/s Xoff hops: {rate:.2} Mbit/s (expected 85-96)"
    );
    assert_clean(&text);
}

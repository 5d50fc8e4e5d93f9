#!/usr/bin/env python3
"""The speed of an `xoff sim` scenario in ns-3, for the fabric bench to print beside xoff's.

Installs ns-3 from PyPI (the `ns3` package: prebuilt ns-3 libraries and headers) into its own
virtualenv, compiles bench/ns3/scenario.cc against them, turns an xoff sim TOML (switches,
hosts, links, [[flow]]s, [sim] duration) into the scenario's spec, and runs it.

    bench/ns3/run.py setup                      install + compile; prints the ns-3 version,
                                                or a line starting "ns-3: skipped" (exit 3)
    bench/ns3/run.py run FILE [--runs N] [--duration-us D] [--seed S] [--scheduler T]
    bench/ns3/run.py spec FILE [--duration-us D] print the spec only

What maps to what (xoff -> ns-3):
  - a switch           -> a node with the IPv4 stack (a router), Ipv4GlobalRouting with
                          RandomEcmpRouting (ns-3's ECMP; per packet, it has no flow hash)
  - a link             -> a PointToPoint link: each end's DataRate is that end's egress rate
                          (switch port or host NIC), the channel Delay the propagation delay,
                          and InterframeGap the 20 B of preamble + IFG xoff's shaper charges
  - a port's queue     -> the device's DropTail queue, no queue disc in front of it:
                          `queue_limit` bytes (every flow here uses one priority, so one of
                          the port's queues); a switch with a shared buffer and no
                          queue_limit gets buffer_bytes / 2 per port (what one congested
                          queue takes under Dynamic Thresholds with alpha = 1)
  - a host NIC         -> the host's device queue, `[sim] nic_queue` frames (default 1024)
  - a constant-rate [[flow]] -> UdpClient (one frame every wire time at the flow's rate,
                          frame bytes = xoff's frame bytes, PPP header in the Ethernet
                          header's stead) to a UdpServer, start + uniform jitter, stopping at
                          the traffic window's end; the run ends when the network drains
  - packet-hops        -> PhyRxEnd of every device (a frame received over a link)
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

NS3_VERSION = "3.44.post0"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
WORK = Path(os.environ.get("XOFF_NS3_DIR", ROOT / "target" / "ns3"))
VENV = WORK / "venv"
BIN = WORK / f"scenario-{NS3_VERSION}"
# Compile definitions of the wheel's libraries (lib64/cmake/ns3/ns3Targets.cmake): its
# "release" build profile with logging and asserts compiled in.
DEFINES = ["-DNS3_BUILD_PROFILE_RELEASE", "-DNS3_LOG_ENABLE", "-DNS3_ASSERT_ENABLE"]
LIBS = ["core", "network", "internet", "point-to-point", "applications", "traffic-control"]


def skip(why):
    print(f"ns-3: skipped ({why})")
    sys.exit(3)


def ns3_root():
    # Isolated (-I) and from WORK: run from bench/, `ns3` would find this directory.
    py = VENV / "bin" / "python"
    out = subprocess.run(
        [str(py), "-I", "-c", "import importlib.util as u; print(u.find_spec('ns3').submodule_search_locations[0])"],
        capture_output=True, text=True, cwd=WORK)
    if out.returncode != 0:
        return None
    return Path(out.stdout.strip())


def setup(quiet=False):
    """Installs ns-3 (pip) and compiles the scenario; returns the binary, or skips."""
    WORK.mkdir(parents=True, exist_ok=True)
    root = ns3_root() if (VENV / "bin" / "python").exists() else None
    if root is None:
        if not quiet:
            print(f"ns-3: installing ns3=={NS3_VERSION} from PyPI into {VENV} (once)", flush=True)
        r = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"python3 -m venv failed: {r.stderr.strip()[-300:]}")
        # Only the wheel's C++ libraries and headers are used: its Python bindings'
        # dependencies (cppyy, compiled from source) are not needed.
        r = subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "--no-deps", f"ns3=={NS3_VERSION}"],
            capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"pip install ns3=={NS3_VERSION} failed: {r.stderr.strip()[-300:]}")
        root = ns3_root()
        if root is None:
            skip("the ns3 package installed but cannot be found")
    inc, lib = root / "include", root / "lib64"
    if not (inc / "ns3" / "core-module.h").exists():
        skip(f"no ns-3 headers under {inc}")
    src = HERE / "scenario.cc"
    if not BIN.exists() or BIN.stat().st_mtime < src.stat().st_mtime:
        cxx = os.environ.get("CXX", "g++")
        cmd = [cxx, "-O2", "-std=c++20", *DEFINES, f"-I{inc}", str(src), "-o", str(BIN),
               f"-L{lib}", f"-Wl,-rpath,{lib}", *[f"-lns3.44-{m}" for m in LIBS]]
        if not quiet:
            print("ns-3: " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"compiling {src.name} failed: {r.stderr.strip()[-500:]}")
    return BIN


UNITS_RATE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
UNITS_TIME = {"ps": 1, "ns": 1e3, "us": 1e6, "µs": 1e6, "ms": 1e9, "s": 1e12}
UNITS_SIZE = {"": 1, "b": 1, "kb": 1e3, "k": 1e3, "mb": 1e6, "m": 1e6, "gb": 1e9, "g": 1e9,
              "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


def split(v):
    if isinstance(v, (int, float)):
        return float(v), ""
    m = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([A-Za-zµ/]*)\s*", v)
    if not m:
        raise ValueError(f"cannot read `{v}`")
    return float(m.group(1)), m.group(2).lower()


def rate(v):  # as dataplane/src/units.rs parse_rate
    x, u = split(v)
    for suf in ("bit/s", "bps", "bit", "b"):
        if u.endswith(suf):
            u = u[: -len(suf)]
            break
    return round(x * UNITS_RATE[u])


def ptime(v):
    x, u = split(v)
    return round(x * (UNITS_TIME[u] if u else 0 if x == 0 else 1))


def size(v):
    x, u = split(v)
    return round(x * UNITS_SIZE[u])


def spec(path, duration_us=None, seed=None):
    """The scenario spec of an xoff sim TOML (see scenario.cc)."""
    t = tomllib.loads(Path(path).read_text())
    sim = t.get("sim", {})
    ports = {}  # "switch:port" -> (rate, delay, queue)
    lines = []
    for sw in t.get("switch", []):
        lines.append(f"node {sw['name']} switch")
        d = sw.get("defaults", {})
        buf = sw.get("buffer", {}).get("buffer_bytes")
        for p in sw.get("port", []):
            q = p.get("queue_limit", d.get("queue_limit"))
            if q is not None:
                q = f"{size(q)}B"
            elif buf is not None:
                q = f"{size(buf) // 2}B"
            else:
                raise SystemExit(f"{path}: switch {sw['name']} has neither queue_limit nor buffer")
            ports[f"{sw['name']}:{p['name']}"] = (
                rate(p.get("rate", d.get("rate"))), ptime(p.get("delay", d.get("delay", 0))), q)
    peer = {}
    for l in t.get("link", []):
        peer[l["a"]], peer[l["b"]] = l["b"], l["a"]
    nic_q = f"{sim.get('nic_queue', 1024)}p"
    nics = {}
    for h in t.get("host", []):
        lines.append(f"node {h['name']} host")
        p = ports[peer[h["name"]]]
        o = sim.get("nic", {}).get(h["name"], {})
        nics[h["name"]] = (rate(o["rate"]) if "rate" in o else p[0],
                           ptime(o["delay"]) if "delay" in o else p[1], nic_q)
    for l in t.get("link", []):
        a = nics.get(l["a"]) or ports[l["a"]]
        b = nics.get(l["b"]) or ports[l["b"]]
        if a[0] != b[0]:
            raise SystemExit(f"{path}: link {l['a']}-{l['b']}: ends of different rates")
        lines.append(f"link {l['a'].split(':')[0]} {l['b'].split(':')[0]} {a[0]} {a[1]} {a[2]} {b[2]}")
    for f in t.get("flow", []):
        for k in ("cc", "size", "stop", "pattern", "on", "off"):
            if k in f and not (k == "pattern" and f[k] == "constant"):
                raise SystemExit(f"{path}: flow {f.get('name')}: `{k}` has no ns-3 counterpart here")
        r = rate(f["rate"]) if "rate" in f else nics[f["src"]][0]
        lines.append(f"flow {f['src']} {f['dst']} {r} {int(f.get('pkt', 1500))} "
                     f"{ptime(f.get('start', 0))} {ptime(f.get('jitter', 0))}")
    dur = duration_us * 1_000_000 if duration_us else ptime(sim["duration"])
    lines.append(f"duration {dur}")
    lines.append(f"seed {seed if seed is not None else sim.get('seed', 1)}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    for name in ("run", "spec"):
        p = sub.add_parser(name)
        p.add_argument("file")
        p.add_argument("--runs", type=int, default=1)
        p.add_argument("--duration-us", type=int)
        p.add_argument("--seed", type=int)
        p.add_argument("--scheduler", default="ns3::MapScheduler")
    a = ap.parse_args()
    if a.cmd == "setup":
        b = setup()
        print(f"ns-3 {NS3_VERSION} (PyPI ns3 wheel): {b}")
        return
    text = spec(a.file, a.duration_us, a.seed)
    if a.cmd == "spec":
        sys.stdout.write(text)
        return
    b = setup(quiet=True)
    WORK.mkdir(parents=True, exist_ok=True)
    sp = WORK / (Path(a.file).stem + ".spec")
    sp.write_text(text)
    rates = []
    for i in range(a.runs):
        cmd = [str(b), str(sp), "--scheduler", a.scheduler]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"the scenario failed: {r.stderr.strip()[-500:]}")
        line = r.stdout.strip().splitlines()[-1]
        print(f"{line} (run {i}: {' '.join(cmd)})", flush=True)
        rates.append(float(re.search(r"= ([0-9.]+) M packet-hops/s", line).group(1)))
    print(f"ns-3 {NS3_VERSION} {Path(a.file).stem}: median {statistics.median(rates):.4f} "
          f"M packet-hops/s over {a.runs} runs")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The Xoff demo: builds deploy/topologies/single.toml (1 switch, 3 hosts; h3's port shaped to
# 100 Mbit/s with 100 µs delay), pings through the switch, runs iperf3 into the shaped port
# and into an unshaped one, prints the switch's counters and tears everything down; then runs
# the incast experiment (PFC vs no flow control, SIH vs DSH headroom) and prints its table.
# Run as root. Installs system packages if missing.
set -euo pipefail
cd "$(dirname "$0")"
deploy/install.sh
cargo build --release -q
X=./target/release/xoff
TOPO=deploy/topologies/single.toml
NAME=demo$$
trap '$X testbed down $TOPO --name $NAME >/dev/null 2>&1 || true' EXIT
$X testbed up $TOPO --name $NAME
ex() { $X testbed exec $TOPO --name $NAME "$@"; }
echo "== ping h1 -> h2, h1 -> h3 (through the switch)"
ex h1 -- ping -c 3 -i 0.2 10.0.0.2 | tail -2
ex h1 -- ping -c 3 -i 0.2 10.0.0.3 | tail -2
echo "== iperf3 TCP h1 -> h3: h3's port is shaped to 100 Mbit/s"
ex h3 -- iperf3 -s -D -1 >/dev/null; sleep 0.3
ex h1 -- iperf3 -c 10.0.0.3 -t 5 | grep -E "sender|receiver"
echo "== iperf3 TCP h2 -> h1: 1 Gbit/s ports"
ex h1 -- iperf3 -s -D -1 >/dev/null; sleep 0.3
ex h2 -- iperf3 -c 10.0.0.1 -t 5 | grep -E "sender|receiver"
echo "== switch counters"
$X ctl --switch s1 --testbed $NAME stats
$X testbed down $TOPO --name $NAME >/dev/null
echo "== experiment: 8:1 incast on real frames, PFC vs none, SIH vs DSH (deploy/experiments/incast-pfc.toml)"
$X experiment run deploy/experiments/incast-pfc.toml --out results/incast
echo "plots and per-flow CSVs in results/incast/"
echo "== the same incast with 7 lossless classes and the switch's measured response term (response_ps = \"auto\")"
$X experiment run deploy/experiments/incast-pfc-auto.toml --out results/incast-auto

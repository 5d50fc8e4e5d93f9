#!/usr/bin/env bash
# Instructions per packet-hop of the virtual-time fabric (`xoff sim`), counted by valgrind's
# callgrind: unlike timings, the counts repeat exactly on a noisy machine. Per hop =
# (I(2D) - I(D)) / (hops(2D) - hops(D)) for traffic windows D and 2D, which cancels start-up,
# topology parsing and the report.
#   bench/callgrind-fabric.sh [FILE] [D_US]   (default deploy/sim/leafspine.toml, 100)
#   XOFF=path/to/xoff bench/callgrind-fabric.sh ...   (another build, e.g. a base checkout's)
#   MISSES=1 bench/callgrind-fabric.sh ...   (also data-cache misses per hop, simulated)
# With MISSES=1 callgrind also simulates the data caches of one core of CI's AMD EPYC (L1d
# 32 KiB and L2 512 KiB, 8-way, 64 B lines; the L2 stands in valgrind's last level): the
# footprint of a hop, which decides how the fabric slows as it grows (the 128-host Clos
# keeps ~50 MB live; the 16-host one fits the L2), as exactly repeatable as the instructions.
# Simulated misses ignore prefetches, the L3 and the TLB: a change that moves them is a
# change in footprint, not a wall-clock measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
file=${1:-deploy/sim/leafspine.toml}
d=${2:-100}
if [ -z "${XOFF:-}" ]; then
  cargo build --release -q -p tools --bin xoff
  XOFF=${CARGO_TARGET_DIR:-target}/release/xoff
fi
sim=()
if [ -n "${MISSES:-}" ]; then
  sim=(--cache-sim=yes --D1=32768,8,64 --LL=524288,8,64)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # window (us) -> "instructions hops events D1-misses L2-misses"
  valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$tmp/out" "$XOFF" sim "$file" \
    --json --duration "${1}us" >"$tmp/json" 2>"$tmp/err"
  # Events: Ir, or with the cache simulation Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw.
  read -r -a e < <(sed -n 's/^summary: *//p' "$tmp/out")
  local d1=0 l2=0
  if [ "${#e[@]}" -ge 9 ]; then
    d1=$((e[4] + e[5]))
    l2=$((e[7] + e[8]))
  fi
  echo "${e[0]} $(jq '.stats.link_hops' "$tmp/json") $(jq '.stats.events' "$tmp/json") $d1 $l2"
}
per_hop() { awk -v a="$1" -v b="$2" -v x="$h1" -v y="$h2" 'BEGIN { printf "%.2f", (b - a) / (y - x) }'; }
read -r i1 h1 e1 m1 l1 < <(count "$d")
read -r i2 h2 e2 m2 l2 < <(count $((2 * d)))
printf '%-28s %8s %14s %10s %10s %12s %12s\n' file window instructions hops events "instr/hop" "events/hop"
printf '%-28s %8s %14d %10d %10d\n' "$(basename "$file")" "${d}us" "$i1" "$h1" "$e1"
printf '%-28s %8s %14d %10d %10d %12.1f %12.3f\n' "" "$((2 * d))us" "$i2" "$h2" "$e2" \
  "$(per_hop "$i1" "$i2")" "$(per_hop "$e1" "$e2")"
if [ -n "${MISSES:-}" ]; then
  echo "simulated data-cache misses per hop (reads + writes): L1d $(per_hop "$m1" "$m2"), L2 $(per_hop "$l1" "$l2")"
fi

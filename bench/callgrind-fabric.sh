#!/usr/bin/env bash
# Instructions per packet-hop of the virtual-time fabric (`xoff sim`), counted by valgrind's
# callgrind: unlike timings, the counts repeat exactly on a noisy machine. Per hop =
# (I(2D) - I(D)) / (hops(2D) - hops(D)) for traffic windows D and 2D, which cancels start-up,
# topology parsing and the report.
#   bench/callgrind-fabric.sh [FILE] [D_US]   (default deploy/sim/leafspine.toml, 100)
#   XOFF=path/to/xoff bench/callgrind-fabric.sh ...   (another build, e.g. a base checkout's)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
file=${1:-deploy/sim/leafspine.toml}
d=${2:-100}
if [ -z "${XOFF:-}" ]; then
  cargo build --release -q -p tools --bin xoff
  XOFF=${CARGO_TARGET_DIR:-target}/release/xoff
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # window (us) -> "instructions hops events"
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$XOFF" sim "$file" --json \
    --duration "${1}us" >"$tmp/json" 2>"$tmp/err"
  echo "$(sed -n 's/^summary: *//p' "$tmp/out") $(jq '.stats.link_hops' "$tmp/json") $(jq '.stats.events' "$tmp/json")"
}
read -r i1 h1 e1 < <(count "$d")
read -r i2 h2 e2 < <(count $((2 * d)))
printf '%-28s %8s %14s %10s %10s %12s %12s\n' file window instructions hops events "instr/hop" "events/hop"
printf '%-28s %8s %14d %10d %10d\n' "$(basename "$file")" "${d}us" "$i1" "$h1" "$e1"
printf '%-28s %8s %14d %10d %10d %12.1f %12.3f\n' "" "$((2 * d))us" "$i2" "$h2" "$e2" \
  "$(awk -v a="$i1" -v b="$i2" -v x="$h1" -v y="$h2" 'BEGIN { print (b - a) / (y - x) }')" \
  "$(awk -v a="$e1" -v b="$e2" -v x="$h1" -v y="$h2" 'BEGIN { print (b - a) / (y - x) }')"

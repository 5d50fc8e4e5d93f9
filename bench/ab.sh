#!/usr/bin/env bash
# Criterion before/after in one run: the same benches of two checkouts (e.g. a worktree of the
# commit before a change, and this one), run alternately ROUNDS times so both see the same
# machine noise; prints each bench's point estimate per round and the lowest per checkout
# (on a shared machine the lowest is the least disturbed run).
#   bench/ab.sh BASE_CHECKOUT [ROUNDS] [FILTER]     (default 5 rounds, filter "full_path")
#   e.g.  git worktree add ../base 58237a3 && bench/ab.sh ../base 5 full_path
# Builds `--bench pipeline` and `--bench bfc` in both (each with its own target dir).
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(cd "${1:?usage: bench/ab.sh BASE_CHECKOUT [ROUNDS] [FILTER]}" && pwd)
rounds=${2:-5}
filter=${3:-full_path}
here=$(pwd)
build() { # checkout -> bench executables, one per line
  (cd "$1" && CARGO_TARGET_DIR="$1/target" cargo bench -q -p bench --bench pipeline --bench bfc \
    --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .target.kind == ["bench"]) | .executable')
}
mapfile -t exe_base < <(build "$base")
mapfile -t exe_here < <(build "$here")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for side in base here; do
    if [ $side = base ]; then dir=$base; exes=("${exe_base[@]}"); else dir=$here; exes=("${exe_here[@]}"); fi
    for e in "${exes[@]}"; do
      (cd "$dir" && "$e" --bench "$filter" --measurement-time 3 --warm-up-time 1 --noplot 2>/dev/null) |
        awk -v side=$side -v r="$r" '
          /^[A-Za-z0-9_\/]+ *$/ { name = $1 }
          /^[A-Za-z0-9_\/]+ +time:/ { name = $1 }
          /time:/ && !/change/ { for (i = 1; i <= NF; i++) if ($i == "time:") { v = $(i + 3); u = $(i + 4) }
                    if (u != "ns" && u != "µs" && u != "ps") next
                    if (u == "µs") v *= 1000; if (u == "ps") v /= 1000; printf "%s %s %s %.2f\n", r, side, name, v }' >>"$out"
    done
  done
done
printf '%-28s %-6s %s\n' bench side "ns per round (point estimate) -> lowest"
sort -k3,3 -k2,2 -k1,1n "$out" | awk '
  { key = $3 " " $2; v[key] = v[key] " " $4; if (!(key in lo) || $4 < lo[key]) lo[key] = $4 }
  END { for (k in v) { split(k, a, " "); printf "%-28s %-6s%s -> %.2f\n", a[1], a[2], v[k], lo[k] } }' | sort

#!/usr/bin/env bash
# Instructions per packet of the full decision path (parse, FIB + path policy, classify, MMU
# admit/release, enqueue, scheduler, shaper, delay line), static queues and BFC, counted by
# valgrind's callgrind: unlike timings, the counts repeat exactly on a noisy machine, so a
# hot-path regression shows without noise. Per packet = (I(2N) - I(N)) / N, which cancels
# start-up and topology parsing.
#   bench/callgrind.sh [N]        (default N = 20000)
# Compare two commits by running it in both checkouts.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
n=${1:-20000}
cargo build --release -q -p bench --bin decision_path
bin=${CARGO_TARGET_DIR:-target}/release/decision_path
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # scheme packets -> total instructions
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" "$1" "$2" >/dev/null 2>"$tmp/err"
  sed -n 's/^summary: *//p' "$tmp/out"
}
printf '%-8s %14s %14s %12s\n' path "I($n)" "I($((2 * n)))" "instr/pkt"
for s in static bfc; do
  a=$(count "$s" "$n")
  b=$(count "$s" $((2 * n)))
  printf '%-8s %14d %14d %12.1f\n' "$s" "$a" "$b" "$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { print (b - a) / n }')"
done

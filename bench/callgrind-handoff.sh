#!/usr/bin/env bash
# Instructions per packet of the two-pipe decision path (`handoff_path`: pipe A receives and
# hands every frame to pipe B, which queues and sends it) with each kind of hand-off ring,
# counted by valgrind's callgrind (exact on a noisy machine; see bench/callgrind.sh). Per
# packet = (I(2N) - I(N)) / N. The one-pipe path of bench/callgrind.sh is the baseline: the
# difference is the cost of crossing pipes. Counts instructions only: a locked instruction or
# a cache line moving between cores costs far more than one, so time the two-thread case too
# (`handoff_path RING N --threads`).
#   bench/callgrind-handoff.sh [N]        (default N = 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
n=${1:-20000}
cargo build --release -q -p bench --bin handoff_path --bin decision_path
dir=${CARGO_TARGET_DIR:-target}/release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # binary arg packets -> total instructions
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$dir/$1" "$2" "$3" >/dev/null 2>"$tmp/err"
  sed -n 's/^summary: *//p' "$tmp/out"
}
printf '%-22s %14s %14s %12s\n' path "I($n)" "I($((2 * n)))" "instr/pkt"
for p in "decision_path static" "handoff_path crossbeam" "handoff_path ringbuf"; do
  set -- $p
  a=$(count "$1" "$2" "$n")
  b=$(count "$1" "$2" $((2 * n)))
  printf '%-22s %14d %14d %12.1f\n' "$1 $2" "$a" "$b" "$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { print (b - a) / n }')"
done

#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ (issue 21) for SECONDS each (default 60), one job at a
# time under `nice -n 19`, and prints per target the executions and the crashes found.
#   tools/fuzz.sh [SECONDS] [TARGET...]
#   FUZZ_RUNS=10000000 tools/fuzz.sh 3600 switch   # stop at 10^7 executions or an hour
# FUZZ_RUNS makes a target stop at that many executions (or SECONDS, whichever comes first), so a
# count can be reached on a machine whose other work takes the CPU from the niced fuzzer.
# Needs the nightly toolchain (libFuzzer's sanitizer flags); installs cargo-fuzz from crates.io
# when it is missing. CI does not fuzz: ./test.sh never calls this. Crashing inputs land in
# fuzz/artifacts/TARGET/; the corpus grows in fuzz/corpus/TARGET/ (both git-ignored). Exits 1
# if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
shift || true

rustup toolchain list | grep -q '^nightly' || {
  echo "fuzz.sh needs the nightly toolchain (rustup toolchain install nightly)" >&2
  exit 1
}
command -v cargo-fuzz >/dev/null || nice -n 19 cargo install cargo-fuzz --locked
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# Optimised, with overflow checks and debug assertions (an occupancy or counter that would go
# negative panics rather than wraps); no AddressSanitizer: the code under test is safe Rust
# (the only `unsafe` is the AF_XDP ports, which no target touches), and ASan would cost the
# allocation-heavy targets (TOML, the switch) half their executions.
nice -n 19 cargo +nightly fuzz build -O -a -s none >&2
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir=$CARGO_TARGET_DIR/$triple/release

targets=("$@")
((${#targets[@]})) || mapfile -t targets < <(cargo +nightly fuzz list)

# The whole-switch target is built a second time without comparison tracing
# (-sanitizer-coverage-trace-compares): its input is structured (`arbitrary`), so tracing the
# comparisons guides no mutation, and most of its time went to tracing the invariant checks it
# runs after every frame (perf: 47 % in __sanitizer_cov_trace_cmp8). Without it, 16.9 k instead of
# 8.2 k executions/s on a fresh corpus. The decoders keep the tracing: it finds their magic values.
no_cmp=" switch "
bin_of() {
  if [[ $no_cmp == *" $1 "* ]]; then
    echo "$CARGO_TARGET_DIR/no-cmp/$triple/release/$1"
  else
    echo "$bin_dir/$1"
  fi
}
for t in "${targets[@]}"; do
  [[ $no_cmp == *" $t "* ]] || continue
  CARGO_TARGET_DIR=$CARGO_TARGET_DIR/no-cmp nice -n 19 \
    cargo +nightly fuzz build -O -a -s none --no-trace-compares "$t" >&2
done

# Seeds: the project's own topology files for the TOML loader.
mkdir -p corpus/topology
cp -n ../deploy/topologies/*.toml ../deploy/sim/*.toml corpus/topology/ 2>/dev/null || true

printf '%-10s %14s %10s %8s\n' target executions exec/s crashes
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t" "logs/$t"
  before=$(find "artifacts/$t" -type f | wc -l)
  # -jobs=1 runs the fuzzer in one child process whose output goes to logs/$t/fuzz-0.log.
  (cd "logs/$t" && rm -f fuzz-0.log &&
    nice -n 19 "$(bin_of "$t")" -jobs=1 -max_total_time="$secs" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$PWD/../../artifacts/$t/" "$PWD/../../corpus/$t" >/dev/null 2>&1) || true
  log=logs/$t/fuzz-0.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=$(($(find "artifacts/$t" -type f | wc -l) - before))
  grep -q '^==[0-9]*==ERROR\|^SUMMARY: libFuzzer\|panicked at' "$log" && ((crashes == 0)) && crashes=1
  printf '%-10s %14s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes"
  ((crashes == 0)) || failed=1
done
exit $failed

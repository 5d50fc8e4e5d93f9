#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ (issue 21) for SECONDS each (default 60), one job at a
# time under `nice -n 19`, and prints per target the executions and the crashes found.
#   tools/fuzz.sh [SECONDS] [TARGET...]
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
bin_dir=$CARGO_TARGET_DIR/$(rustc +nightly -vV | sed -n 's/^host: //p')/release

targets=("$@")
((${#targets[@]})) || mapfile -t targets < <(cargo +nightly fuzz list)

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
    nice -n 19 "$bin_dir/$t" -jobs=1 -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
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

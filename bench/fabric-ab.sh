#!/usr/bin/env bash
# Fabric speed before/after in one run: `xoff sim FILE --duration D` of two xoff binaries,
# alternated ROUNDS times so both see the same machine noise. Prints every run's packet-hops/s
# (xoff sim times `Fabric::run` only, not loading or the report) and the median per binary.
#   bench/fabric-ab.sh BASE_XOFF NEW_XOFF [ROUNDS] [D_US] [FILE...]
#   default: 5 rounds, 2000 us, deploy/sim/leafspine.toml and bench/sim/leafspine128.toml
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: bench/fabric-ab.sh BASE_XOFF NEW_XOFF [ROUNDS] [D_US] [FILE...]}
b=${2:?usage: bench/fabric-ab.sh BASE_XOFF NEW_XOFF [ROUNDS] [D_US] [FILE...]}
rounds=${3:-5}
d=${4:-2000}
shift $(($# < 4 ? $# : 4))
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(deploy/sim/leafspine.toml bench/sim/leafspine128.toml)
rate() { "$1" sim "$2" --duration "${d}us" | sed -n 's/^wall clock .*: \([0-9.]*\) M packet-hops\/s$/\1/p'; }
printf '%-20s %-5s %s\n' file side "M packet-hops/s per round -> median"
for f in "${files[@]}"; do
  ra=() rb=()
  for _ in $(seq "$rounds"); do
    ra+=("$(rate "$a" "$f")")
    rb+=("$(rate "$b" "$f")")
  done
  for side in base new; do
    if [ $side = base ]; then v=("${ra[@]}"); else v=("${rb[@]}"); fi
    med=$(printf '%s\n' "${v[@]}" | sort -g | awk '{ x[NR] = $1 } END { print x[int((NR + 1) / 2)] }')
    printf '%-20s %-5s %s -> %s\n' "$(basename "$f" .toml)" $side "${v[*]}" "$med"
  done
done

#!/usr/bin/env bash
# Soak (issue 21 item 6): MINUTES of mixed traffic through deploy/topologies/leafspine.toml
# with a shared-buffer MMU and PFC on priority 3 on every switch:
#   - iperf3 TCP h11 -> h21 (kernel stacks, priority 0: lossy, may be dropped),
#   - a 3:1 incast of `xoff host` flows on priority 3 (h12, h22, h31 -> h32; the hosts honour
#     PFC, so this traffic must be lossless),
#   - malformed frames from h11's kernel (random bytes, truncated IPv4, unknown EtherTypes,
#     MAC control it does not understand) at ~100/s, which the switches count and drop.
# Every minute it prints each switch's RSS; at the end it checks
#   - RSS flat within +-5 % after the first minute of warm-up (every switch),
#   - the testbed audit balanced with 0 lossless frames lost (xoff testbed audit),
#   - the incast's receiver saw no sequence gap it did not recover, and no AF_XDP ring drop
#     at any xoff host end,
# and exits 1 if any check fails. Requires root.
#   tools/soak.sh [MINUTES]     (default 30; CI runs 2)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
[ "$(id -u)" = 0 ] || { echo "soak: needs root" >&2; exit 2; }
xoff=${XOFF:-target/release/xoff}
[ -x "$xoff" ] || cargo build --release -q -p tools
name=soak$$
work=$(mktemp -d)
topo=$work/leafspine-pfc.toml
# leafspine.toml, every switch with an 8 MB DSH buffer and PFC on priority 3, reserving the
# 10 ms software response term for MTU traffic as chain-pfc.toml does (see there).
sed 's/^defaults = \(.*\)$/defaults = \1\nbuffer = { buffer_bytes = 8000000, lossless_pgs = [3], headroom_mode = "dsh", response_ps = 10000000000, small_packet_percentage = 0 }\npfc = { enable_mask = 8 }/' \
  deploy/topologies/leafspine.toml > "$topo"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$xoff" testbed down "$topo" --name "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$xoff" testbed up "$topo" --name "$name" >/dev/null
ns() { echo "$name-$1"; }
run_s=$((minutes * 60))

# TCP at 300 Mbit/s, lossy priority, for the whole run (iperf3 restarts if it ends early).
ip netns exec "$(ns h21)" iperf3 -s -D >/dev/null
( end=$((SECONDS + run_s)); while [ $SECONDS -lt $end ]; do
    ip netns exec "$(ns h11)" iperf3 -c 10.0.2.1 -b 300M -t $((end - SECONDS)) >/dev/null 2>&1 || sleep 1
  done ) & pids+=($!)

# The incast: hosts in topology order h11=0 h12=1 h21=2 h22=3 h31=4 h32=5; each sender
# starts a 1 MB flow every 100 ms on priority 3: h32's 1 Gbit/s port sees 3:1 bursts
# (240 Mbit/s on average) and PFC pauses back through the leaves and spines. The rates are
# what 5 switches, 4 `xoff host` stacks and iperf3 sustain on 2 cores without any AF_XDP
# ring overflowing (a switch too slow to read its RX ring loses frames no PFC can save:
# at 1 MB every 50 ms and unlimited TCP the audit showed leaf3 losing h32's ACKs that way).
sched=$work/schedule.csv
python3 - "$run_s" > "$sched" <<'EOF'
import sys
run = int(sys.argv[1])
i = 0
for k in range(run * 10 - 20):
    for src in (1, 3, 4):
        print(f"{i},{src},5,1000000,{k * 100_000_000_000},3")
        i += 1
EOF
start=$(( $(date +%s%N) + 1000000000 ))
for h in h12 h22 h31 h32; do
  ip netns exec "$(ns $h)" "$xoff" host --topology "$topo" --host $h --schedule "$sched" \
    --out "$work/out" --start-at $start --run "${run_s}s" >"$work/$h.log" 2>&1 & pids+=($!)
done

# Malformed frames from h11's kernel.
ip netns exec "$(ns h11)" python3 - "$run_s" <<'EOF' & pids+=($!)
import os, random, socket, sys, time
run = int(sys.argv[1])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
dst, src = b"\xff" * 6, b"\x02\x00\x00\x00\x00\x99"
end = time.time() + run
while time.time() < end:
    kind = random.randrange(4)
    if kind == 0:
        f = os.urandom(random.randrange(1, 14))            # runt
    elif kind == 1:
        f = dst + src + b"\x08\x00" + os.urandom(random.randrange(0, 19))  # truncated IPv4
    elif kind == 2:
        f = dst + src + b"\x88\x08" + os.urandom(random.randrange(2, 46))  # unknown MAC control
    else:
        et = random.choice([0x0101, 0x1234, 0x9999, 0xfefe])
        f = dst + src + et.to_bytes(2, "big") + os.urandom(random.randrange(0, 1400))
    try:
        s.send(f)
    except OSError:
        pass
    time.sleep(0.01)
EOF

rss() { # switch -> VmRSS in KiB
  awk '/VmRSS/ {print $2}' "/proc/$(cat /run/xoff/$name/$1.pid)/status"
}
switches="leaf1 leaf2 leaf3 spine1 spine2"
lossless() { # lossless frames lost so far, all switches (the audit is live: a few in motion)
  # A live audit may not balance (frames in motion) and then exits 1: the count still holds.
  { "$xoff" testbed audit "$topo" --name "$name" --json 2>/dev/null || true; } |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["lossless_lost"])' 2>/dev/null || echo "?"
}
printf '%-6s' min; for s in $switches; do printf ' %10s' "$s"; done; echo "   (RSS KiB)   lossless lost so far"
declare -A base
fail=0
for m in $(seq 1 "$minutes"); do
  sleep 60
  printf '%-6s' "$m"
  for s in $switches; do
    r=$(rss $s); printf ' %10s' "$r"
    if [ "$m" = 1 ]; then base[$s]=$r; else
      awk -v r="$r" -v b="${base[$s]}" 'BEGIN { exit !(r > b * 1.05 || r < b * 0.95) }' && { fail=1; echo -n " <- $s RSS moved >5%"; }
    fi
  done
  printf '   %s\n' "$(lossless)"
done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
sleep 1
echo
"$xoff" testbed audit "$topo" --name "$name" --json > "$work/audit.json" || true
python3 - "$work/audit.json" <<'EOF' || fail=1
import json, sys
a = json.load(open(sys.argv[1]))
consumed = sum(p["consumed"] for s in a["switches"] for p in s["ports"])
malformed = sum(sum(p["dropped_pre"].values()) for s in a["switches"] for p in s["ports"])
print(f"testbed audit: {'balanced' if a['balanced'] else 'NOT BALANCED'}; lost {a['lost']} "
      f"(lossy TCP), lossless lost {a['lossless_lost']}; PFC frames consumed {consumed}; "
      f"malformed frames counted and dropped {malformed}")
for s in a["switches"]:
    if not s["balanced"] or s["lossless_lost"]:
        print(f"  {s['switch']}: balanced {s['balanced']}, lossless lost {s['lossless_lost']}")
        for p in s["ports"]:
            why = {k: v for r in p["prios"] if r["lossless"] for k, v in r["dropped"].items()}
            for k in ("ring_lost", "wire_dropped", "kernel_tx_dropped"):
                if p.get(k):
                    why[k] = p[k]
            if why:
                print(f"    port {p['name']}: {why}")
sys.exit(0 if a["balanced"] and a["lossless_lost"] == 0 and consumed > 0 and malformed > 0 else 1)
EOF
python3 - "$work/out" <<'EOF' || fail=1
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
flows = gaps = recovered = ring = done = 0
for f in sorted(out.glob("*.json")):
    h = json.loads(f.read_text())
    ring += sum(v for k, v in (h.get("xdp") or {}).items() if k in ("rx_dropped", "rx_ring_full", "rx_invalid_descs", "tx_invalid_descs"))
    for r in h["rx"]:
        flows += 1
        gaps += r["gaps"]
        recovered += r["recovered"]
        done += r["complete_ps"] is not None
print(f"incast: {flows} flows received, {done} complete; sequence gaps {gaps} "
      f"(recovered {recovered}); AF_XDP ring drops at the hosts {ring}")
sys.exit(0 if gaps == 0 and ring == 0 and flows > 0 else 1)
EOF
if [ $fail = 0 ]; then echo "soak: $minutes min OK"; else echo "soak: FAILED"; exit 1; fi

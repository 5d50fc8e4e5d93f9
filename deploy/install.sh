#!/usr/bin/env bash
# Installs the system packages Xoff builds and tests with, only those missing.
#   deploy/install.sh            build + test dependencies
#   deploy/install.sh --mininet  also Mininet (for deploy/mininet)
#   deploy/install.sh --bench    also the benchmark peers (Open vSwitch, DPDK)
set -euo pipefail

pkgs=(clang llvm libelf-dev zlib1g-dev m4 pkg-config make gcc
      iproute2 ethtool iperf3 iputils-ping tcpdump tshark python3 procps fonts-dejavu-core
      prometheus curl graphviz tmux)  # promtool + curl: --metrics; dot: congestion trees; tmux: xoff top test
for a in "$@"; do
  case "$a" in
    --mininet) pkgs+=(mininet iputils-ping) ;;
    --bench) pkgs+=(openvswitch-switch dpdk dpdk-dev librte-net-af-xdp23 librte-mempool-ring23 netsniff-ng linux-perf) ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "cargo (Rust toolchain) is required: https://rustup.rs" >&2; exit 1; }

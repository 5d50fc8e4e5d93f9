#!/usr/bin/env bash
# The whole test suite, including the root/netns tests. Installs system packages if missing.
# Run as root (the tests create network namespaces, veth pairs and XDP programs).
set -euo pipefail
cd "$(dirname "$0")"
deploy/install.sh --mininet   # Mininet for tools/tests/mininet.rs
cargo build --release --workspace
cargo test --release --workspace
target/release/xoff repro all --quick --out target/repro-quick   # fails on a broken verdict
tools/soak.sh 2   # mixed traffic through a PFC leaf-spine: flat RSS, audit balanced, 0 lossless lost

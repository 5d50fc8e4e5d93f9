#!/usr/bin/env bash
# The whole test suite, including the root/netns tests. Installs system packages if missing.
# Run as root (the tests create network namespaces, veth pairs and XDP programs).
set -euo pipefail
cd "$(dirname "$0")"
deploy/install.sh --mininet   # Mininet for tools/tests/mininet.rs
cargo build --release --workspace
cargo test --release --workspace
# `xoff repro all --quick` runs inside `cargo test` (tools/tests/repro.rs) and fails it on a
# broken verdict; running it here again cost CI a minute for nothing.
tools/soak.sh 2   # mixed traffic through a PFC leaf-spine: flat RSS, audit balanced, 0 lossless lost

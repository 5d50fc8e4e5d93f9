#!/usr/bin/env bash
# Runs a command (mn, a Mininet script) in a sandbox, so that Mininet's clean-ups (`mn -c`,
# and `mn` after an error: killall, pkill -f, rm -f /tmp/*.log, ip link del) only see the
# sandbox: new network, PID and mount namespaces, a private /tmp, /proc of the sandbox and
# /proc/sys read-only, so Mininet's sysctl tweaks (some machine-wide: fs.file-max,
# kernel.pty.max) fail harmlessly with a warning; XOFF_SANDBOX_SYSCTL=rw leaves /proc/sys
# writable (e.g. to set per-host TCP sysctls). When the command ends, every process of the
# sandbox is killed and its interfaces disappear with it.
#
#   sudo deploy/mininet/sandbox.sh mn --custom deploy/mininet/xoff_mininet.py \
#        --switch xoff --controller none --topo single,3 --test pingall
#
# Xoff's per-switch files go to $XOFF_MININET_DIR (default here: /tmp/xoff-mininet, inside
# the sandbox; set it to a shared path such as /run/xoff/mininet to reach the control
# sockets from outside).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
export XOFF_MININET_DIR="${XOFF_MININET_DIR:-/tmp/xoff-mininet}"
export XOFF_SANDBOX_SYSCTL="${XOFF_SANDBOX_SYSCTL:-ro}"
exec unshare --kill-child --net --pid --fork --mount-proc --mount --propagation private \
  bash -c '
    set -e
    # A private /tmp that still shows the checkout (and XOFF_BIN) if they live under /tmp.
    mkdir -p /run/xoff-sandbox-tmp && mount --bind /tmp /run/xoff-sandbox-tmp
    mount -t tmpfs -o mode=1777 xoff-mininet-tmp /tmp
    for keep in "$PWD" "$(dirname "${XOFF_BIN:-/}")"; do
      case "$keep/" in
        /tmp/*) [ -d "$keep" ] || { mkdir -p "$keep" && mount --bind "/run/xoff-sandbox-tmp${keep#/tmp}" "$keep"; } ;;
      esac
    done
    cd "$PWD"
    if [ "$XOFF_SANDBOX_SYSCTL" != rw ]; then
      mount --bind /proc/sys /proc/sys
      mount -o remount,bind,ro /proc/sys
    fi
    ip link set lo up
    # Not exec: this shell stays PID 1 of the sandbox and reaps orphans.
    "$@"' sandbox "$@"

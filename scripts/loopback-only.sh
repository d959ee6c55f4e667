#!/usr/bin/env bash
# Run a command in a network namespace of its own whose only interface is loopback, so that what
# it starts (a Ray cluster binds the machine's address otherwise) sends nothing beyond 127.0.0.1.
# Already in one (`lo` is the only interface): run the command as it is. Needs root (or
# unprivileged user namespaces, tried second).
set -euo pipefail
if [ "$(python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))')" = "lo" ]; then
    ip link set lo up 2>/dev/null || true
    exec env FLOWTAPE_LOOPBACK_ONLY=1 "$@"
fi
inner='ip link set lo up && exec env FLOWTAPE_LOOPBACK_ONLY=1 "$@"'
if unshare -n true 2>/dev/null; then
    exec unshare -n bash -c "$inner" bash "$@"
fi
exec unshare -r -n bash -c "$inner" bash "$@"

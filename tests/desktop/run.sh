#!/usr/bin/env bash
# The desktop smoke test: the real app in a virtual X display with a private D-Bus session.
#   bash tests/desktop/run.sh <output folder> <leadline binary>
set -euo pipefail
out="${1:-target/desktop-test}"
bin="${2:-target/debug/leadline}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$(dirname "$0")/inside_session.sh" "$out" "$bin"

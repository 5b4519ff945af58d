#!/usr/bin/env bash
# The desktop tests: the real app in a virtual X display with a private D-Bus session — the smoke test (the demo,
# notifications, a replay through the native dialog), then the always-on desk (tray, closing the window, quit),
# the same on a desktop without a tray (how to come back, quitting from Settings), then the app as a desk of a team server (first start's choice, keyring, live feed, lost and found server).
#   bash tests/desktop/run.sh <output folder> <leadline binary>
set -euo pipefail
out="${1:-target/desktop-test}"
bin="${2:-target/debug/leadline}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$(dirname "$0")/inside_session.sh" "$out" "$bin"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$(dirname "$0")/tray_session.sh" "$out/tray" "$bin"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$(dirname "$0")/no_tray_session.sh" "$out/no-tray" "$bin"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$(dirname "$0")/desk_session.sh" "$out/desk" "$bin"

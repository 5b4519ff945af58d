#!/usr/bin/env bash
# Runs the tray probe under Xvfb with a private D-Bus session and a fake tray host, and prints its memory after 15 s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/target/release/tray-probe}"
[ -n "${INSIDE_XVFB:-}" ] || exec env INSIDE_XVFB=1 xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$0" "$bin"
dir=$(mktemp -d)
/usr/bin/python3 "$here/../../tests/desktop/fake_tray_host.py" "$dir/items" > /dev/null 2>&1 &
host=$!
trap 'kill "$app" "$host" 2>/dev/null || true; rm -rf "$dir"' EXIT
sleep 1
NO_AT_BRIDGE=1 "$bin" > "$dir/log" 2>&1 &
app=$!
sleep 15
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$app/status"; }
printf 'tray probe: RSS %.1f MiB (anon %.1f, file %.1f), PSS %.1f MiB\n' "$(echo "$(kib VmRSS)/1024" | bc -l)" \
  "$(echo "$(kib RssAnon)/1024" | bc -l)" "$(echo "$(kib RssFile)/1024" | bc -l)" \
  "$(echo "$(awk '$1 == "Pss:" {print $2}' "/proc/$app/smaps_rollup")/1024" | bc -l)"

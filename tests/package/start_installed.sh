#!/usr/bin/env bash
# Runs inside `xvfb-run` + `dbus-run-session` (tests/package/run.sh): starts the installed binary on the demo
# (`--demo`, in throwaway data and config folders; started from the desktop entry, without arguments, a first start
# asks how to run — tests/desktop/desk_session.sh covers that window), waits for its window and for the UI
# to ask the backend for the overview, checks the window's class is the one the desktop entry names (how docks
# tie the window to its launcher), takes a screenshot of the window and checks it is drawn — not one flat colour —,
# then stops the app and checks it shut its worker down.
#   bash tests/package/start_installed.sh <output folder> <installed binary> [the desktop entry's StartupWMClass]
set -euo pipefail
out="$1"
bin="$2"
wm_expected="${3:-}"
export NO_AT_BRIDGE=1
export XDG_DATA_HOME="$out/data" XDG_CONFIG_HOME="$out/config" XDG_CACHE_HOME="$out/cache"
rm -rf "$out/data" "$out/config" "$out/cache" "$out/window.png" "$out/failure.png"
fail() {
  echo "package test: $*" >&2
  import -window root "$out/failure.png" 2>/dev/null || true
  echo "--- the app's log ($out/app.log), last 40 lines:" >&2
  tail -40 "$out/app.log" >&2 || true
  exit 1
}

RUST_LOG=info "$bin" --demo > "$out/app.log" 2>&1 &
app=$!
cleanup() { kill "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; }
trap cleanup EXIT

# The window (up to 60 s: the first start creates the demo's database and seeds four weeks of history).
win=""
for _ in $(seq 120); do
  kill -0 "$app" 2>/dev/null || fail "the installed app exited before it opened a window"
  # The shown window, not GTK's unmapped 10x10 client leader, which carries the application's name too.
  win=$(xdotool search --onlyvisible --name '^Leadline$' 2>/dev/null | head -1 || true)
  [ -n "$win" ] && break
  sleep 0.5
done
[ -n "$win" ] || fail "no window named Leadline after 60 s"
echo "window $win: $(xwininfo -id "$win" | awk -F: '/Width|Height/ {gsub(/ /, "", $2); printf "%s ", $2}')"
# The UI has loaded from the embedded files and called the backend (the overview's first request).
for _ in $(seq 120); do grep -q "first overview request" "$out/app.log" && break; sleep 0.25; done
grep "first overview request" "$out/app.log" || fail "the UI in the installed app never asked for the overview"

wm_class=$(xprop -id "$win" WM_CLASS | sed 's/.*= //')
echo "WM_CLASS: $wm_class"
if [ -n "$wm_expected" ]; then
  grep -qF "\"$wm_expected\"" <<< "$wm_class" ||
    fail "the window's WM_CLASS ($wm_class) does not contain the desktop entry's StartupWMClass ($wm_expected)"
fi

# Drawn: give the charts a moment, then the window's own pixels. A window whose web view did not render is one
# flat colour (white, or the dark theme's background): a handful of colours at most. The overview has text, tiles
# and charts: hundreds.
sleep 3
import -window "$win" "$out/window.png" || fail "could not take a screenshot of window $win"
colours=$(identify -format '%k' "$out/window.png")
spread=$(identify -format '%[fx:standard_deviation]' "$out/window.png")
echo "screenshot $out/window.png: $colours colours, standard deviation $spread"
[ "$colours" -ge 64 ] || fail "the window looks blank: $colours colours in $out/window.png"
awk "BEGIN {exit !($spread > 0.03)}" || fail "the window looks blank: standard deviation $spread in $out/window.png"

kill -TERM "$app"
for _ in $(seq 40); do kill -0 "$app" 2>/dev/null || break; sleep 0.5; done
kill -0 "$app" 2>/dev/null && fail "the app did not exit within 20 s of SIGTERM"
wait "$app" || true
grep -q "worker stopped" "$out/app.log" || fail "the app did not shut its worker down cleanly"
echo "the installed app started, drew its window and stopped cleanly"

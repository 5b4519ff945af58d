#!/usr/bin/env bash
# A desktop with no system tray (stock GNOME without its AppIndicator extension: no StatusNotifierWatcher on the
# session bus), in the real window (runs inside `xvfb-run` + `dbus-run-session`, started by run.sh):
#   1. Leadline starts and delivers without a tray, and says in its log that no tray shows its icon;
#   2. closing the window leaves delivery running, and the notification says how to come back without a tray
#      (start Leadline again) and where to quit (Settings) — not "from the icon in the tray";
#   3. starting Leadline again opens the window; the Settings page says the same, and its "Quit Leadline…" asks
#      through the native dialog: Cancel keeps Leadline running, Quit ends it cleanly.
set -euo pipefail
out="$1"
bin="$2"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
rm -rf "$out" && mkdir -p "$out"
export NO_AT_BRIDGE=1
export HOME="$out/home" XDG_DATA_HOME="$out/data" XDG_CONFIG_HOME="$out/config"
mkdir -p "$HOME"
records="$out/crm-records"
log="$out/app.log"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
logged() { plain_log | grep -q "$1"; }
fail() {
  echo "no-tray test: $*"
  import -window root "$out/failure.png" 2>/dev/null || true
  plain_log | tail -30
  exit 1
}
count() { grep -c . "$records" 2>/dev/null || true; }
crm_has() { [ "$(count)" -ge "$1" ]; }
send() { post_lead "$ingest" "$1" "$2" || fail "could not send lead $1"; } # ref, name
shown() { # whether a Leadline window is on screen
  for w in $(xdotool search --name '^Leadline$' 2>/dev/null); do xwininfo -id "$w" | grep -q IsViewable && return 0; done
  return 1
}
dialog_shown() { xdotool search --name '^Quit Leadline$' >/dev/null 2>&1; }
# The dialog sits at the top-left (no window manager); its buttons are the bottom row: Quit on the left, Cancel on
# the right.
answer_dialog() { # left | right
  local dialog
  dialog=$(xdotool search --name '^Quit Leadline$' | head -1)
  eval "$(xdotool getwindowgeometry --shell "$dialog")"
  if [ "$1" = left ]; then xdotool mousemove $((X + WIDTH / 4)) $((Y + HEIGHT - 18)) click 1
  else xdotool mousemove $((X + WIDTH * 3 / 4)) $((Y + HEIGHT - 18)) click 1; fi
}
# The Settings page: the last entry of the navigation; its "Quit Leadline…" button below the start-at-login switch
# and the two lines that say how to come back without a tray (the window fills the 1280x800 screen).
quit_in_settings() {
  xdotool mousemove 48 293 click 1
  sleep 2
  xdotool mousemove 290 234 click 1
}

/usr/bin/python3 "$here/fake_notifications.py" "$out/notifications.jsonl" > "$out/fake.log" 2>&1 &
pids+=($!)
start_mock_crm
wait_for 10 grep -q ready "$out/fake.log" || fail "the fake notification service did not start"
! dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner \
  string:org.kde.StatusNotifierWatcher | grep -q 'boolean true' || fail "this session has a tray; the test needs none"

webform_config "127.0.0.1:0" > "$out/leadline.toml"

RUST_LOG=info "$bin" --config "$out/leadline.toml" > "$log" 2>&1 &
app=$!
pids+=($app)
wait_for 60 xdotool search --name '^Leadline$' >/dev/null || fail "no Leadline window"
wait_for 60 logged 'leadline listening' || fail "the app did not start listening"
wait_for 60 logged 'first overview request' || fail "the window never drew its overview"
ingest=$(plain_log | sed -n 's/.*leadline listening addr=\([0-9.:]*\).*/\1/p' | head -1)
[ -n "$ingest" ] || fail "the app did not log its listen address"

# 1. No tray, and Leadline delivers all the same.
logged 'no system tray to show' || fail "the app did not notice that no tray shows its icon"
send N-1 "Ada Lovelace"
wait_for 20 crm_has 1 || fail "the first lead did not reach the CRM"

# 2. Closing the window: delivery goes on, and the notification says how to come back without a tray.
for _ in 1 2 3 4 5; do
  /usr/bin/python3 "$here/close_window.py" $(xdotool search --name '^Leadline$') || fail "could not ask the window to close"
  wait_for 3 logged 'window closed: released' && break
done
logged 'window closed: released' || fail "the app did not release its window"
kill -0 "$app" 2>/dev/null || fail "closing the window ended the app"
send N-2 "Grace Hopper"
wait_for 20 crm_has 2 || fail "a lead sent with the window closed was not delivered: $(count) of 2 in the CRM"
wait_for 10 grep -q 'still running' "$out/notifications.jsonl" || fail "closing the window did not say Leadline goes on"
said=$(grep 'still running' "$out/notifications.jsonl")
grep -q 'no tray icons: start Leadline again' <<<"$said" || fail "the notification does not say how to come back: $said"
! grep -q "icon in the tray" <<<"$said" || fail "the notification points at a tray this desktop does not have: $said"

# 3. Started again, Leadline opens its window; Settings says where to quit, and its Quit asks first.
RUST_LOG=info timeout 15 "$bin" --config "$out/leadline.toml" > "$out/second-start.log" 2>&1 ||
  fail "a second start did not hand over and end: $(cat "$out/second-start.log")"
wait_for 30 shown || fail "starting Leadline again did not open its window"
overviews() { [ "$(plain_log | grep -c "the window's overview asked")" -ge 2 ]; }
wait_for 30 overviews || fail "the reopened window never drew its overview"
sleep 2
quit_in_settings
wait_for 20 dialog_shown || fail "Quit Leadline… on the Settings page showed no dialog"
import -window root "$out/settings-quit.png"
asked=$(plain_log | grep 'asking for confirmation title="Quit Leadline"' | tail -1)
[ -n "$asked" ] || fail "the engine did not ask the quit question"
! grep -q 'tray' <<<"$asked" || fail "the quit question points at a tray this desktop does not have: $asked"
answer_dialog right
wait_for 10 logged 'confirmation answered title="Quit Leadline" yes=false' || fail "Cancel was not taken as no"
sleep 1
kill -0 "$app" 2>/dev/null || fail "Leadline ended although the quit was cancelled"
send N-3 "Katherine Johnson"
wait_for 20 crm_has 3 || fail "after a cancelled quit a lead was not delivered"

xdotool mousemove 290 234 click 1
wait_for 20 dialog_shown || fail "Quit Leadline… showed no dialog the second time"
answer_dialog left
wait_for 10 logged 'quitting from the window' || fail "Quit was not confirmed"
wait_for 30 bash -c "! kill -0 $app 2>/dev/null" || fail "the app did not exit after Quit"
logged 'worker stopped' || fail "the worker did not stop cleanly"
! shown || fail "the window outlived the engine"
echo "no-tray test passed: $(count) CRM records, closing and quitting said and done without a tray"

#!/usr/bin/env bash
# Part of the desktop smoke test (called by inside_session.sh with the app running in the demo): replays the
# newest dead letter through the real UI and the real native confirmation dialog, which is answered with xdotool,
# first "Cancel" (nothing may change: no replay, the dead letter stays open, the CRM has no record of the lead),
# then "Replay" (the lead is delivered: the demo CRM holds it, the dead letter is resolved as replayed).
#
# The web view is clicked at coordinates: the window fills the 1280x800 Xvfb screen and the layout is the one in
# docs/screenshots/desktop-confirm.png. Without a window manager the GTK message dialog sits at the top-left
# corner; its two buttons share its bottom row, the confirming one on the left. Every failure leaves a
# screenshot ($out/failure.png) and the app's log.
set -euo pipefail
out="$1"
log="$out/app.log"
db=$(ls "$out"/data/*/leadline-demo.db)
plain_log() { sed 's/\x1b\[[0-9;]*m//g' "$log"; }
fail() {
  echo "desktop replay: $*"
  import -window root "$out/failure.png" || true
  plain_log | tail -30
  exit 1
}
sql() { /usr/bin/python3 -c 'import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=5)
for row in c.execute(sys.argv[2]): print("|".join("" if v is None else str(v) for v in row))' "$db" "$1"; }
click() { xdotool mousemove "$1" "$2" click 1; }
crm=$(plain_log | sed -n 's/.*demo CRM listening addr=\([0-9.:]*\).*/\1/p' | head -1)
[ -n "$crm" ] || fail "the app did not log the demo CRM's address"
# How many times the demo HubSpot wrote the contact with this external id (HubSpot's read by unique property;
# the mock adds the count of writes in X-Mock-Writes): 0 when it has none.
records_for() {
  local writes
  writes=$(curl -s -D - -o /dev/null -H "Authorization: Bearer demo-hubspot-token" \
    "http://$crm/crm/v3/objects/contacts/$(/usr/bin/python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1")?idProperty=leadline_id" |
    tr -d '\r' | sed -n 's/^[Xx]-[Mm]ock-[Ww]rites: //p')
  echo "${writes:-0}"
}

# HubSpot's phone rule and expired token must be over, so that a replay can deliver.
for _ in $(seq 120); do plain_log | grep -q 'demo HubSpot phase="normal"' && break; sleep 0.5; done
plain_log | grep -q 'demo HubSpot phase="normal"' || fail "the demo HubSpot never became healthy again"

# Layout of the dead-letter page and the replay panel at 1280x800, and spots that turn the primary button colour
# once a button is there and enabled (the UI renders asynchronously: the script waits for them, not for a time).
NAV_DEAD_LETTERS=(63 108)
FIRST_ROW_CHECKBOX=(225 396)
REPLAY_SELECTED=(463 290)
REPLAY_SELECTED_ENABLED=(372 290)
REASON=(640 360)
REPLAY_GO=(860 413)
REPLAY_GO_ENABLED=(792 402)
PRIMARY="srgb(15,118,110)"
pixel() { import -window root -crop "1x1+$1+$2" -depth 8 txt:- 2>/dev/null | sed -n 's/.* \(srgb([0-9,]*)\).*/\1/p' | tail -1; }
wait_primary() {
  for _ in $(seq 80); do [ "$(pixel "$1" "$2")" = "$PRIMARY" ] && return 0; sleep 0.25; done
  return 1
}

dialog_title="Replay dead letters"
wait_dialog() {
  for _ in $(seq 80); do
    xdotool search --name "^${dialog_title}\$" 2>/dev/null | head -1 && return 0
    sleep 0.25
  done
  return 1
}
wait_dialog_gone() {
  for _ in $(seq 40); do xdotool search --name "^${dialog_title}\$" >/dev/null 2>&1 || return 0; sleep 0.25; done
  return 1
}
# Clicks the dialog's button: 1 = the left one ("Replay"), 3 = the right one ("Cancel").
answer() {
  eval "$(xdotool getwindowgeometry --shell "$1")"
  click $((X + WIDTH * $2 / 4)) $((Y + HEIGHT - 18))
}

click "${NAV_DEAD_LETTERS[@]}"
sleep 2
# The list shows the newest dead letter first.
IFS='|' read -r id source ref < <(sql "SELECT d.id, e.source, e.source_ref FROM delivery d JOIN inbound_event e
  ON e.id = d.event_id WHERE d.state = 'dead' AND d.resolution = 'open' ORDER BY d.id DESC LIMIT 1") || true
[ -n "${id:-}" ] || fail "no open dead letter to replay"
external="$source:$ref"
echo "replaying dead letter $id ($external) through the native dialog"
[ "$(records_for "$external")" = 0 ] || fail "the CRM already holds $external"
click "${FIRST_ROW_CHECKBOX[@]}"
wait_primary "${REPLAY_SELECTED_ENABLED[@]}" || fail "\"Replay selected\" did not become enabled"
click "${REPLAY_SELECTED[@]}"
wait_primary "${REPLAY_GO_ENABLED[@]}" || fail "the replay panel did not show its preview"
click "${REASON[@]}"
# No spaces: a key still queued when the dialog takes the focus must not press its button.
xdotool type --delay 20 "desktop-smoke-test"
sleep 1
click "${REPLAY_GO[@]}"

# 1. The dialog appears with its title and wording; "Cancel" changes nothing.
dialog=$(wait_dialog) || fail "no native dialog titled \"$dialog_title\""
xprop -id "$dialog" _NET_WM_WINDOW_TYPE | grep -q _NET_WM_WINDOW_TYPE_DIALOG || fail "window $dialog is not a dialog"
sleep 0.5
import -window root "$out/desktop-confirm.png"
asked=$(plain_log | grep 'asking for confirmation' | tail -1)
for words in "title=\"$dialog_title\"" "Replay 1 lead to crm?" "Reason: desktop-smoke-test"; do
  grep -qF "$words" <<<"$asked" || fail "the dialog does not say \`$words\`: $asked"
done
answer "$dialog" 3
wait_dialog_gone || fail "the dialog did not close on Cancel"
sleep 1
plain_log | grep -q 'confirmation answered.*yes=false' || fail "the app did not get the Cancel"
[ "$(sql "SELECT COUNT(*) FROM replay")" = 0 ] || fail "Cancel started a replay"
[ "$(sql "SELECT state || ' ' || resolution FROM delivery WHERE id = $id")" = "dead open" ] ||
  fail "Cancel changed dead letter $id"
[ "$(records_for "$external")" = 0 ] || fail "Cancel sent $external to the CRM"
echo "Cancel: no replay, dead letter $id still open, nothing sent"

# 2. The panel is back at its preview: the same button asks again; "Replay" replays.
wait_primary "${REPLAY_GO_ENABLED[@]}" || fail "the replay panel did not return to its preview after Cancel"
click "${REPLAY_GO[@]}"
dialog=$(wait_dialog) || fail "no native dialog on the second try"
answer "$dialog" 1
wait_dialog_gone || fail "the dialog did not close on Replay"
for _ in $(seq 80); do
  [ "$(sql "SELECT state || ' ' || resolution FROM delivery WHERE id = $id")" = "delivered replayed" ] && break
  sleep 0.25
done
[ "$(sql "SELECT state || ' ' || resolution FROM delivery WHERE id = $id")" = "delivered replayed" ] ||
  fail "dead letter $id was not delivered by the replay"
[ "$(sql "SELECT group_concat(delivery_id) FROM replay_item")" = "$id" ] ||
  fail "the replay did not take dead letter $id (the first row): $(sql "SELECT delivery_id FROM replay_item")"
[ "$(records_for "$external")" = 1 ] || fail "the CRM does not hold $external exactly once"
[ "$(sql "SELECT COUNT(*) || ' ' || MAX(reason) FROM replay")" = "1 desktop-smoke-test" ] ||
  fail "expected one replay with the typed reason: $(sql "SELECT id, reason FROM replay")"
import -window root "$out/desktop-replayed.png"
echo "Replay: dead letter $id delivered, the CRM holds $external once"

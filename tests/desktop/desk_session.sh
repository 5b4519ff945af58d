#!/usr/bin/env bash
# The desktop app as a desk of a team server, in the real window (runs inside `xvfb-run` + `dbus-run-session`,
# started by run.sh), against a real `leadline serve` with a real Secret Service (gnome-keyring-daemon):
#   1. first start (no configuration, no choice made): the window asks how to run;
#   2. "connect to a team server": the server's address and Alice's token are typed into the window (xdotool);
#      the desk checks them with the server, keeps the token in the keyring (not in any file) and runs no worker
#      and no ingest server; the window reads the server through the desk (its API calls are logged);
#   3. a dead letter on the server turns the desk's tray red and raises exactly one notification;
#   4. the server stops: the desk says it cannot reach it (tray, window) and keeps trying; the server comes back
#      and the desk follows it again by itself;
#   5. the app restarted connects again without asking (the token from the keyring);
#   6. Alice's token is revoked on the server: the desk says so.
# Screenshots: first-start.png, desk.png, desk-settings.png, desk-offline.png, desk-refused.png in the output folder.
set -euo pipefail
out="$1"
bin="$2"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
rm -rf "$out" && mkdir -p "$out"
export NO_AT_BRIDGE=1
export HOME="$out/home" XDG_DATA_HOME="$out/data" XDG_CONFIG_HOME="$out/config" XDG_RUNTIME_DIR="$out/run"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
items="$out/tray-items"
records="$out/crm-records"
log="$out/app.log"
server_log="$out/server.log"
pids=()
app=""
server=""
cleanup() {
  for p in $app $server "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
plain() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }
fail() {
  echo "desk test: $*"
  import -window root "$out/failure.png" 2>/dev/null || true
  plain "$log" | tail -30
  echo "--- server"
  plain "$server_log" | tail -15
  exit 1
}
logged() { plain "$log" | grep -q "$1"; }
logged_times() { plain "$log" | grep -c "$1" || true; }
tray() { /usr/bin/python3 "$here/tray_client.py" "$items" "$@"; }
tray_says() { tray state 2>/dev/null | grep -q "$1"; }

# A real Secret Service on this session's bus, with an unlocked login keyring.
printf 'leadline-test-password' | gnome-keyring-daemon --unlock --components=secrets --foreground > "$out/keyring.log" 2>&1 &
pids+=($!)
/usr/bin/python3 "$here/fake_tray_host.py" "$items" > "$out/tray-host.log" 2>&1 &
pids+=($!)
/usr/bin/python3 "$here/fake_notifications.py" "$out/notifications.jsonl" > "$out/fake.log" 2>&1 &
pids+=($!)
start_mock_crm
wait_for 10 grep -q ready "$out/tray-host.log" || fail "the fake tray host did not start"
wait_for 10 grep -q ready "$out/fake.log" || fail "the fake notification service did not start"
sleep 1

# The team server: one web form source into the mock CRM, on its own SQLite file, at a fixed port (it restarts).
port=$(free_port)
mkdir -p "$out/server"
{
  webform_config "127.0.0.1:$port"
  printf '\n[database]\nurl = "sqlite://%s"\n' "$out/server/leadline.db"
} > "$out/server/leadline.toml"
start_server() {
  # The server's own environment: no desktop session (its secrets would come from its environment).
  env -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY RUST_LOG=info "$bin" serve --config "$out/server/leadline.toml" >> "$server_log" 2>&1 &
  server=$!
  wait_for 30 curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || fail "the team server did not start"
}
start_server
alice=$(env -u DBUS_SESSION_BUS_ADDRESS "$bin" token create alice --config "$out/server/leadline.toml" 2>/dev/null |
  sed -n 's/^Token for alice .*: \([^ ]*\)$/\1/p')
[ -n "$alice" ] || fail "no token for alice"
send() { post_lead "127.0.0.1:$port" "$1" "$2" || fail "could not send lead $1 to the team server"; } # ref, name
send D-1 "Grace Hopper"
wait_for 20 grep -q D-1 "$records" || fail "the team server did not deliver its first lead"

# 1. First start: the window asks.
launch() {
  RUST_LOG=info,leadline::shells::desktop=debug "$bin" >> "$log" 2>&1 &
  app=$!
}
launch
wait_for 60 xdotool search --name '^Leadline$' >/dev/null || fail "no Leadline window"
wait_for 60 logged 'the window asks how this app runs mode=choose' || fail "the window did not ask how to run"
logged 'leadline listening' && fail "an ingest server started before anyone chose to run here"
sleep 2
import -window root "$out/first-start.png"

# 2. Connect: the address field has the focus (autofocus); keys go to the window under the pointer.
xdotool mousemove 640 700
sleep 0.5
xdotool type --delay 20 "http://127.0.0.1:$port"
xdotool key Tab
xdotool type --delay 20 "$alice"
xdotool key Return
wait_for 20 logged 'desk connected to a team server' || fail "the desk did not connect (see the window: failure.png)"
plain "$log" | grep 'desk connected to a team server' | grep -q 'operator=alice' || fail "the desk does not act as alice"
wait_for 20 logged 'the window asks how this app runs mode=team' || fail "the window did not reload as a desk"
wait_for 20 logged 'desk call method=GET path=/api/health status=200' || fail "the window did not read the server's health"
wait_for 20 logged 'following the team server' || fail "the desk does not follow the server's live feed"
logged 'leadline listening' && fail "the desk started an ingest server of its own"
logged 'worker started' && fail "the desk started a worker of its own"
# The token is in the keyring, and in no file of the app.
[ "$(secret-tool lookup service leadline username team-server-token)" = "$alice" ] || fail "the token is not in the keyring"
if grep -rqF "$alice" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" 2>/dev/null; then fail "the token was written to a file"; fi
grep -q "127.0.0.1:$port" "$XDG_CONFIG_HOME"/*/desk.toml || fail "the choice was not remembered"
sleep 3
import -window root "$out/desk.png"
# The Settings page says which server and who (its "Team server" section); back to the overview.
xdotool mousemove 48 292 click 1
sleep 2
import -window root "$out/desk-settings.png"
xdotool mousemove 52 70 click 1

# 3. A dead letter on the server: the desk's tray turns red, one notification.
wait_for 30 grep -q . "$items" || fail "the desk's tray icon never registered"
send D-2 "reject me"
wait_for 30 tray_says '^menu Leadline — needs a person: 1 dead letter' || fail "the desk's tray does not show the server's dead letter: $(tray state)"
wait_for 20 grep -q 'A new cause of dead letters at crm' "$out/notifications.jsonl" || fail "no notification on the desk"
sleep 3
n=$(grep -c 'A new cause of dead letters at crm' "$out/notifications.jsonl" || true)
[ "$n" -eq 1 ] || fail "expected one notification for the incident, got $n"

# 4. The server stops: the desk says so and keeps trying; it comes back.
kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""
wait_for 20 logged 'cannot reach the team server' || fail "the desk did not notice the server was gone"
wait_for 20 tray_says '^menu Leadline — cannot reach the team server' || fail "the tray does not say the server is gone: $(tray state)"
sleep 2
import -window root "$out/desk-offline.png"
start_server
wait_for 20 bash -c "[ \$(sed 's/\x1b\[[0-9;]*m//g' '$log' | grep -c 'following the team server') -ge 2 ]" ||
  fail "the desk did not find the server again"
wait_for 20 tray_says '^menu Leadline — needs a person: 1 dead letter' || fail "the tray did not come back to the server's state"

# 5. Restarted, the app is a desk again without asking (the token from the keyring).
kill -TERM "$app"; wait "$app" 2>/dev/null || true
: > "$log"
launch
wait_for 60 logged 'the window asks how this app runs mode=team' || fail "the restarted app did not come back as a desk"
wait_for 20 logged 'following the team server' || fail "the restarted desk does not follow the server"
logged 'mode=choose' && fail "the restarted app asked again"

# 6. Alice's token is revoked: the desk stops and says why.
env -u DBUS_SESSION_BUS_ADDRESS "$bin" token revoke alice --config "$out/server/leadline.toml" > /dev/null
wait_for 30 logged 'the team server refused the token' || fail "the desk did not notice the revoked token"
wait_for 10 tray_says '^menu Leadline — the team server refused the token' || fail "the tray does not say the token was refused"
sleep 2
import -window root "$out/desk-refused.png"
echo "desk test passed"

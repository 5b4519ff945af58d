# Helpers the desktop session tests share (tray_session.sh, no_tray_session.sh, desk_session.sh source it). A test
# sets `out`, `here`, `log`, `records` and `pids` before using them, and defines its own `fail`.

wait_for() { # seconds, then a command: true once the command succeeds
  local tries=$(($1 * 4)); shift
  for _ in $(seq "$tries"); do "$@" && return 0; sleep 0.25; done
  return 1
}
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
plain_log() { sed 's/\x1b\[[0-9;]*m//g' "$log"; }

# The mock CRM (mock_crm.py: one record per accepted lead in $records) on a free port, `crm_port`, once it is ready.
start_mock_crm() {
  crm_port=$(free_port)
  /usr/bin/python3 "$here/mock_crm.py" "$crm_port" "$records" > "$out/crm.log" 2>&1 &
  pids+=($!)
  wait_for 10 grep -q ready "$out/crm.log" || fail "the mock CRM did not start"
}

# The tests' configuration: web form leads (source `webform`, its id in `id`) into the mock CRM, listening at $1.
webform_config() {
  cat <<CONFIG
[server]
listen = "$1"

[sources.webform]
id_field = "id"
route = ["crm"]

[targets.crm]
url = "http://127.0.0.1:$crm_port/leads"
strategy = "idempotency_key"
CONFIG
}

# Posts a web form lead to the ingest server at $1 (host:port): its ref $2 and name $3.
post_lead() {
  curl -sf -o /dev/null -H 'Content-Type: application/json' \
    -d "{\"id\": \"$2\", \"name\": \"$3\", \"email\": \"$2@example.com\"}" "http://$1/ingest/webform"
}

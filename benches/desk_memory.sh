#!/usr/bin/env bash
# Memory of a desk at rest with demo traffic (issue #16, point 5).
#   bash benches/desk_memory.sh serve   [binary] [seconds]   # `leadline serve --demo`, headless (the Rust side alone)
#   bash benches/desk_memory.sh desktop [binary] [seconds]   # the desktop app under Xvfb, its whole process tree
#   bash benches/desk_memory.sh tray    [binary] [seconds]   # idle desk (no traffic): window shown, then closed to
#                                                             # the tray; RSS of the tree and CPU in each phase; then
#                                                             # opened from the tray and closed, `cycles=8` times
# The `leadline` process is the engine (the worker, the ingest server, the tray); the window is `leadline-window`,
# its child, with WebKit's processes below it: the tree's figure counts them all.
# Defaults: target/release/leadline, 180 s. Samples VmRSS/VmHWM from /proc every 10 s and prints a table; extra
# environment (LEADLINE_DB_CACHE_MIB=…, MALLOC_ARENA_MAX=…) is passed through to the app for comparisons.
set -euo pipefail
mode="${1:-serve}"
bin="${2:-target/release/leadline}"
secs="${3:-180}"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
here="$(cd "$(dirname "$0")" && pwd)"

kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# Proportional set size: a page shared by n processes (the WebKit libraries mapped by all three) counts 1/n.
pss() { awk '$1 == "Pss:" {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
tree() { local p=$1; echo "$p"; for c in $(pgrep -P "$p" || true); do tree "$c"; done; }

sample() { # sample <pid of the leadline process> <label>
  local app=$1 t=0
  # RSS = anonymous (heap, stacks, caches) + file-backed (the binary's and libraries' touched pages) + shared memory.
  printf '%6s %10s %10s %10s %10s %10s %8s\n' "t (s)" "RSS MiB" "anon MiB" "file MiB" "HWM MiB" "tree MiB" "threads"
  while [ "$t" -le "$secs" ]; do
    kill -0 "$app" 2>/dev/null || { echo "the app exited:"; tail -20 "$dir/app.log"; return 1; }
    local sum=0
    for p in $(tree "$app"); do sum=$((sum + $(kib "$p" VmRSS))); done
    printf '%6d %10.1f %10.1f %10.1f %10.1f %10.1f %8s\n' "$t" "$(echo "$(kib "$app" VmRSS)/1024" | bc -l)" \
      "$(echo "$(kib "$app" RssAnon)/1024" | bc -l)" "$(echo "$(kib "$app" RssFile)/1024" | bc -l)" \
      "$(echo "$(kib "$app" VmHWM)/1024" | bc -l)" "$(echo "$sum/1024" | bc -l)" "$(kib "$app" Threads)"
    [ "$t" -lt "$secs" ] || {
      local pss_sum=0; for p in $(tree "$app"); do pss_sum=$((pss_sum + $(pss "$p"))); done
      printf 'at the end: leadline PSS %.1f MiB, tree PSS %.1f MiB (tree RSS counts shared libraries once per process)\n' \
        "$(echo "$(pss "$app")/1024" | bc -l)" "$(echo "$pss_sum/1024" | bc -l)"; }
    sleep 10; t=$((t + 10))
  done
  echo "processes at the end:"
  for p in $(tree "$app"); do
    printf '  %7d RSS %6.1f MiB, anon %6.1f MiB  %s\n' "$p" "$(echo "$(kib "$p" VmRSS)/1024" | bc -l)" \
      "$(echo "$(kib "$p" RssAnon)/1024" | bc -l)" "$(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-70)"
  done
}

case "$mode" in
  serve)
    dir=$(mktemp -d)
    trap 'kill "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; rm -rf "$dir"' EXIT
    XDG_DATA_HOME="$dir/data" "$bin" serve --demo --listen 127.0.0.1:0 --database "$dir/desk.db" > "$dir/app.log" 2>&1 &
    app=$!
    echo "leadline serve --demo ($bin), ${secs} s, pid $app; a poller asks what the overview page asks"
    for _ in $(seq 100); do grep -q 'token=' "$dir/app.log" && break; sleep 0.2; done
    url=$(sed -n 's/.*Browser access.*: \(http:[^?]*\)?token=\(.*\)$/\1 \2/p' "$dir/app.log" | head -1)
    set -- $url
    ( # The overview page: health every second (the live feed's ticks), its metric series every 5 s.
      n=0; while kill -0 "$app" 2>/dev/null; do
        curl -sf -o /dev/null -H "Authorization: Bearer $2" "${1}api/health" || true
        [ $((n % 5)) -eq 0 ] && { curl -sf -o /dev/null -H "Authorization: Bearer $2" "${1}api/metrics" || true; }
        n=$((n + 1)); sleep 1
      done ) &
    poller=$!
    trap 'kill "$poller" "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; rm -rf "$dir"' EXIT
    sample "$app"
    ;;
  desktop)
    [ -n "${INSIDE_XVFB:-}" ] || exec env INSIDE_XVFB=1 xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$0" desktop "$bin" "$secs"
    dir=$(mktemp -d)
    trap 'kill "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; rm -rf "$dir"' EXIT
    NO_AT_BRIDGE=1 XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" "$bin" --demo > "$dir/app.log" 2>&1 &
    app=$!
    echo "desktop app under Xvfb ($bin --demo: the demo runs here), ${secs} s, pid $app"
    for _ in $(seq 120); do xwininfo -root -tree 2>/dev/null | grep -q '"Leadline"' && break; sleep 0.5; done
    sample "$app"
    ;;
  tray)
    [ -n "${INSIDE_XVFB:-}" ] || exec env INSIDE_XVFB=1 xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash "$0" tray "$bin" "$secs"
    dir=$(mktemp -d)
    trap 'kill "$app" "$host" 2>/dev/null || true; wait "$app" 2>/dev/null || true; rm -rf "$dir"' EXIT
    # A tray to register with (as a desktop panel provides), and a quiet real setup: nothing arrives, nothing is due.
    /usr/bin/python3 "$here/../tests/desktop/fake_tray_host.py" "$dir/items" > "$dir/host.log" 2>&1 &
    host=$!
    printf '[server]\nlisten = "127.0.0.1:0"\n[sources.webform]\nroute = ["crm"]\n[targets.crm]\nurl = "http://127.0.0.1:9/leads"\nstrategy = "idempotency_key"\n' > "$dir/leadline.toml"
    NO_AT_BRIDGE=1 HOME="$dir" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" "$bin" --config "$dir/leadline.toml" > "$dir/app.log" 2>&1 &
    app=$!
    echo "idle desktop app under Xvfb ($bin), ${secs} s shown then ${secs} s in the tray, pid $app"
    for _ in $(seq 120); do xwininfo -root -tree 2>/dev/null | grep -q '"Leadline"' && break; sleep 0.5; done
    ticks() { local t=0; for p in $(tree "$app"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
    phase() { # phase <label>: samples for $secs, then CPU over the phase
      local t0 s0; t0=$(ticks); s0=$(date +%s.%N)
      echo "== window $1"; sample "$app"
      local t1 s1; t1=$(ticks); s1=$(date +%s.%N)
      printf 'window %s: CPU %.2f %% of one core over %.0f s (whole tree)\n' "$1" \
        "$(echo "($t1 - $t0) * 100 / $(getconf CLK_TCK) / ($s1 - $s0)" | bc -l)" "$(echo "$s1 - $s0" | bc -l)"
    }
    phase shown
    /usr/bin/python3 "$here/../tests/desktop/close_window.py" $(xdotool search --name '^Leadline$') > /dev/null
    sleep 2
    grep -q 'window closed: released' "$dir/app.log" || { echo "the window did not go to the tray"; exit 1; }
    phase "hidden in the tray"
    # Opened and closed again and again (from the tray menu, as a person does): the window is made anew each time.
    # Its page's load time, and whether the `leadline` process keeps memory from the windows it made.
    echo "== opened from the tray and closed, ${cycles:=8} times"
    printf '%6s %16s %18s %14s\n' cycle "page asked (ms)" "leadline RSS MiB" "tree RSS MiB"
    for c in $(seq "$cycles"); do
      /usr/bin/python3 "$here/../tests/desktop/tray_client.py" "$dir/items" click "Open Leadline" > /dev/null
      # The first window (at start) asked once already: the c-th reopened one is the (c+1)-th to ask.
      for _ in $(seq 120); do [ "$(grep -c "overview asked" "$dir/app.log")" -gt "$c" ] && break; sleep 0.25; done
      ms=$(sed 's/\x1b\[[0-9;]*m//g' "$dir/app.log" | sed -n 's/.*overview asked \([0-9]*\) ms after.*/\1/p' | sed -n "$((c + 1))p")
      sleep 3
      closed=$(grep -c 'window closed: released' "$dir/app.log")
      for _ in 1 2 3 4 5; do
        /usr/bin/python3 "$here/../tests/desktop/close_window.py" $(xdotool search --name '^Leadline$') > /dev/null || true
        for _ in $(seq 12); do [ "$(grep -c 'window closed: released' "$dir/app.log")" -gt "$closed" ] && break 2; sleep 0.25; done
      done
      sleep 3
      sum=0; for p in $(tree "$app"); do sum=$((sum + $(kib "$p" VmRSS))); done
      printf '%6d %16s %18.1f %14.1f\n' "$c" "${ms:-?}" "$(echo "$(kib "$app" VmRSS)/1024" | bc -l)" "$(echo "$sum/1024" | bc -l)"
    done
    ;;
  *) echo "usage: $0 serve|desktop|tray [binary] [seconds]"; exit 2 ;;
esac

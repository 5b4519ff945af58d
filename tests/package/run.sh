#!/usr/bin/env bash
# The package test: the .deb a user installs, built by the Tauri bundler from the binary cargo already built,
# installed with dpkg, its desktop entry and icons checked, and the INSTALLED binary started in a virtual X display
# until its window has drawn the overview; then the package is removed again.
#   bash tests/package/run.sh <output folder> [debug|release] [auto|dpkg|extract]
# The profile picks the build the package wraps (`cargo build` / `cargo build --release` must have run; this
# script never compiles). As root (CI) or with password-less sudo the package is installed for real with
# `dpkg -i`, which also checks its dependencies against the machine, and removed with `dpkg -r` at the end;
# otherwise (or with `extract`) it is unpacked into a temporary root (`dpkg -x`) and each dependency is looked up
# with dpkg-query.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-${CARGO_TARGET_DIR:-target}/package-test}"
profile="${2:-debug}"
install="${3:-auto}"
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
fail() { echo "package test: $*" >&2; exit 1; }

bin="$target/$profile/leadline"
[ -x "$bin" ] || fail "no $bin: run \`cargo build$([ "$profile" = release ] && echo ' --release')\` first"
tauri=ui/node_modules/.bin/tauri
[ -x "$tauri" ] || fail "no $tauri: run \`npm ci\` in ui/ (bash .ci/setup does)"

echo "== bundle the .deb from $bin (Tauri CLI $("$tauri" --version | awk '{print $2}'), no compilation)"
# `tauri bundle` wraps the binary cargo built; it does not compile (`tauri build` would run cargo and the UI
# build again). --no-binary-patching: otherwise the bundler rewrites the built binary in place to record the bundle
# type for Tauri's updater, which Leadline does not use; the package then holds the very binary the other tests
# ran (and a rewrite would fail while that binary runs).
# The window's program goes beside `leadline` (tauri.conf.json names the default release build's; this build's is
# named here).
window="$(cd "$(dirname "$bin")" && pwd)/leadline-window"
[ -x "$window" ] || fail "no $window beside $bin"
flags=(--bundles deb --no-binary-patching --ci
  --config "{\"bundle\": {\"linux\": {\"deb\": {\"files\": {\"/usr/bin/leadline-window\": \"$window\"}}}}}")
[ "$profile" = debug ] && flags+=(--debug)
rm -rf "$target/$profile/bundle/deb"
started=$(date +%s)
"$tauri" bundle "${flags[@]}" > "$out/bundle.log" 2>&1 || { cat "$out/bundle.log"; fail "tauri bundle failed"; }
echo "bundled in $(( $(date +%s) - started )) s"
deb=$(find "$target/$profile/bundle/deb" -maxdepth 1 -name '*.deb' | head -1)
[ -n "$deb" ] || { cat "$out/bundle.log"; fail "tauri bundle made no .deb under $target/$profile/bundle/deb"; }
# The bundler leaves its staging folder beside the package (a copy of the binary and both tarballs: 750 MB for a
# debug build); only the .deb is kept.
find "$target/$profile/bundle/deb" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +

echo "== the package: $(basename "$deb")"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb" | awk '{print $6}' | tee "$out/contents.txt"
pkg=$(dpkg-deb --field "$deb" Package)
[ "$pkg" = leadline ] || fail "the package is called '$pkg', expected 'leadline'"
depends=$(dpkg-deb --field "$deb" Depends)
for d in libwebkit2gtk-4.1-0 libgtk-3-0 libayatana-appindicator3-1; do
  grep -qw -- "$d" <<< "$depends" || fail "the package does not depend on $d (Depends: $depends)"
done
installed_kib=$(dpkg-deb --field "$deb" Installed-Size)
size=$(stat -c %s "$deb")

# Install: for real when we may, else into a temporary root. A Leadline someone installed on this machine is left
# alone (the test removes what it installs).
sudo_cmd=""
if [ "$(id -u)" -ne 0 ] && [ "$install" != extract ] && sudo -n true 2>/dev/null; then sudo_cmd="sudo -n"; fi
if [ "$install" = dpkg ] && [ "$(id -u)" -ne 0 ] && [ -z "$sudo_cmd" ]; then fail "dpkg -i needs root or password-less sudo"; fi
already=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
case "$already" in *installed*|*unpacked*|*half*)
  [ "$install" = dpkg ] && fail "$pkg is already on this machine ($already): remove it first, or use extract"
  [ "$install" = auto ] && { echo "$pkg is already installed here ($already): the test unpacks into a temporary root instead"; install=extract; } ;;
esac
if [ "$install" != extract ] && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo_cmd" ]; }; then
  mode=dpkg
  root=""
  echo "== dpkg -i $(basename "$deb")"
  # Removed again however the test ends, a failed dpkg -i (an unconfigured package) included.
  cleanup_pkg() { $sudo_cmd dpkg -r "$pkg" > "$out/dpkg-remove.log" 2>&1 || cat "$out/dpkg-remove.log"; }
  trap cleanup_pkg EXIT
  # Another apt or dpkg on the machine holds dpkg's lock for a while: wait for it rather than fail.
  for attempt in $(seq 30); do
    if $sudo_cmd dpkg -i "$deb" > "$out/dpkg.log" 2>&1; then break; fi
    grep -qi 'lock' "$out/dpkg.log" && [ "$attempt" -lt 30 ] && { sleep 2; continue; }
    cat "$out/dpkg.log"; fail "dpkg -i failed (a missing dependency leaves the package unconfigured)"
  done
  status=$(dpkg-query -W -f='${Status}' "$pkg")
  [ "$status" = "install ok installed" ] || fail "after dpkg -i the package's status is '$status'"
  dpkg-query -L "$pkg" > "$out/installed-files.txt"
else
  mode=extract
  root="$(mktemp -d "${TMPDIR:-/tmp}/leadline-root.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "== dpkg -x into $root (not dpkg -i: $([ "$install" = extract ] && echo 'extract' || echo 'not root, no password-less sudo')), dependencies looked up one by one"
  dpkg -x "$deb" "$root"
  # Each dependency (first alternative of each, versions ignored) must be installed on this machine.
  tr ',' '\n' <<< "$depends" | sed 's/|.*//; s/(.*//; s/ //g' | while read -r d; do
    [ -z "$d" ] && continue
    dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || fail "dependency $d is not installed"
  done
  (cd "$root" && find . -mindepth 1 | sed 's/^\.//') > "$out/installed-files.txt"
fi

echo "== what landed"
installed_bin="$root/usr/bin/leadline"
[ -x "$installed_bin" ] || fail "no executable /usr/bin/leadline in the package"
[ -x "$root/usr/bin/leadline-window" ] || fail "no executable /usr/bin/leadline-window (the window) in the package"
# The package's own files only (installed-files.txt), not whatever else the machine has in those folders.
entries=$(grep -c '^/usr/share/applications/[^/]*\.desktop$' "$out/installed-files.txt" || true)
[ "$entries" -eq 1 ] || fail "expected one desktop entry in /usr/share/applications, the package has $entries"
desktop="$root$(grep '^/usr/share/applications/[^/]*\.desktop$' "$out/installed-files.txt")"
cat "$desktop"
if command -v desktop-file-validate > /dev/null; then
  desktop-file-validate "$desktop" || fail "desktop-file-validate refused ${desktop#"$root"}"
else
  echo "desktop-file-validate is missing (desktop-file-utils): the entry was not validated"
fi
entry() { sed -n "s/^$1=//p" "$desktop" | head -1; }
[ "$(entry Type)" = Application ] || fail "the desktop entry's Type is not Application"
[ "$(entry Name)" = Leadline ] || fail "the desktop entry's Name is '$(entry Name)', expected Leadline"
# The launcher runs the Exec line's program through PATH: it must be the binary the package installed.
exec_prog=$(entry Exec | awk '{print $1}')
resolved=$(PATH="$root/usr/bin:$PATH" command -v "$exec_prog" || true)
[ "$resolved" = "$installed_bin" ] ||
  fail "the desktop entry's Exec ($(entry Exec)) starts '${resolved:-nothing}', not the installed $installed_bin"
# Its icon: a themed name with a PNG in hicolor for the sizes menus and docks ask for.
icon=$(entry Icon)
[ -n "$icon" ] || fail "the desktop entry names no Icon"
icons=$(grep "^/usr/share/icons/hicolor/[^/]*/apps/$icon\.png$" "$out/installed-files.txt" | sed "s|^|$root|" | sort)
[ -n "$icons" ] || fail "no hicolor icon named $icon.png"
echo "$icons"
for s in 32x32 128x128; do grep -q "/$s/apps/" <<< "$icons" || fail "no ${s} icon named $icon.png"; done
# Each a PNG of the size its folder names (a scaled folder such as 128x128@2 holds a 256-pixel image).
for f in $icons; do
  dir=$(basename "$(dirname "$(dirname "$f")")")
  want=${dir%@2}
  if [ "$dir" != "$want" ]; then want="$(( ${want%x*} * 2 ))x$(( ${want#*x} * 2 ))"; fi
  got=$(identify -format '%m %wx%h' "$f" 2>/dev/null || true)
  [ "$got" = "PNG $want" ] || fail "${f#"$root"} is '${got:-not an image}', expected a PNG of $want"
done

# What the installed files take on this disk (du: whole blocks), beside the control file's Installed-Size (the
# bundler's sum of the file sizes).
on_disk_kib=$(while read -r f; do if [ -f "$root$f" ] && [ ! -L "$root$f" ]; then printf '%s\0' "$root$f"; fi; done < "$out/installed-files.txt" |
  xargs -0 du -ck | tail -1 | awk '{print $1}')
echo "figures: package=$(basename "$deb") package_bytes=$size package_mib=$(awk "BEGIN {printf \"%.1f\", $size / 1048576}") installed_size_kib=$installed_kib installed_mib=$(awk "BEGIN {printf \"%.1f\", $installed_kib / 1024}") files_on_disk_kib=$on_disk_kib install=$mode" | tee "$out/figures.txt"

echo "== start the installed $installed_bin (Xvfb, private D-Bus session, throwaway data and config folders)"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash tests/package/start_installed.sh "$out" "$installed_bin" \
  "$(entry StartupWMClass)"

if [ "$mode" = dpkg ]; then
  echo "== dpkg -r $pkg"
  trap - EXIT
  $sudo_cmd dpkg -r "$pkg" > "$out/dpkg-remove.log" 2>&1 || { cat "$out/dpkg-remove.log"; fail "dpkg -r failed"; }
  [ ! -e /usr/bin/leadline ] || fail "/usr/bin/leadline is still there after dpkg -r"
  [ ! -e "$desktop" ] || fail "$desktop is still there after dpkg -r"
fi
echo "package test passed"

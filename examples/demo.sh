#!/usr/bin/env bash
# `make demo`: kiln's main job on a real example. Imports this machine's dpkg
# registry, fetches a real Debian source package (zlib by default) with
# `apt-get source` into a cache directory, builds it under `kiln trace` with
# its Build-Depends as the declared dependencies, and prints the report.
#
#   KILN_DEMO_CACHE   cache directory (default ~/.cache/kiln-demo)
#   KILN_DEMO_SOURCE  source package to build (default zlib)
#   DEB_BUILD_PROFILES  build profiles (default nobiarch: no 32-bit build)
#
# /etc/apt is never edited: a private sources list (the system's archive with
# deb-src added) and private lists live under the cache directory
# (examples/lib/debsrc.sh, shared with bench/run-trace).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${KILN_BUILD:-$here/../build}
KILN=$BUILD/kiln
CACHE=${KILN_DEMO_CACHE:-$HOME/.cache/kiln-demo}
SOURCE=${KILN_DEMO_SOURCE:-zlib}
export DEB_BUILD_PROFILES=${DEB_BUILD_PROFILES-nobiarch}
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-"parallel=2"}

say() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

[ -x "$KILN" ] || die "$KILN is not built (run make)"

# The shared-memory map's own demo, when that component is there.
if [ -f "$here/shm-demo.sh" ]; then
  say "the shared-memory map (examples/shm-demo.sh)"
  bash "$here/shm-demo.sh"
fi
# ---- 1-2. the source package (private apt configuration), its build deps ------
DEBSRC_PROG=demo
. "$here/lib/debsrc.sh"
debsrc_init "$CACHE"
src_dir=$(debsrc_fetch "$CACHE" "$SOURCE")
say "source: $src_dir"
debsrc_build_deps "$src_dir"

# ---- 3. this machine's registry ------------------------------------------------
DB=$CACHE/registry.db
say "importing this machine's dpkg registry into $DB"
"$KILN" registry --db "$DB" import dpkg

# ---- 4. the build, in the sandbox ----------------------------------------------
say "building $SOURCE under kiln trace (declared dependencies: Build-Depends of debian/control)"
log=$CACHE/build.log
set +e
(cd "$src_dir" && "$KILN" trace --db "$DB" --deps-from-control debian/control \
   --json -o "$CACHE/report.json" --log "$CACHE/access.log" \
   -- dpkg-buildpackage -b -uc -us) > "$log" 2> "$CACHE/trace.err"
status=$?
set -e
# The report is the end of kiln trace's stderr; the build's own messages
# come first.
sed -n '/^kiln trace report/,$p' "$CACHE/trace.err" >&2
grep '^kiln trace:' "$CACHE/trace.err" >&2 || true
say "build exit status: $status (build output: $log and $CACHE/trace.err)"
say "JSON report: $CACHE/report.json; every path touched: $CACHE/access.log ($(wc -l < "$CACHE/access.log") paths)"
ls "$CACHE/src"/*.deb >/dev/null 2>&1 && say "packages built: $(cd "$CACHE/src" && ls ./*.deb | tr '\n' ' ')"
exit "$status"

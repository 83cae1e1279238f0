#!/usr/bin/env bash
# `make demo`: what a user comes for, on a real Debian package. Imports this
# machine's dpkg registry, fetches a real source package (zlib by default)
# with `apt-get source` into a cache directory, builds it under `kiln trace`
# with its Build-Depends as the declared dependencies and prints the report;
# then runs `kiln meta` on the library that build produced, with the debug
# file of its -dbgsym package.
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
sed -n '/^=== kiln trace report/,$p' "$CACHE/trace.err" >&2
grep '^kiln trace:' "$CACHE/trace.err" >&2 || true
say "build exit status: $status (build output: $log and $CACHE/trace.err)"
say "JSON report: $CACHE/report.json; every path touched: $CACHE/access.log ($(wc -l < "$CACHE/access.log") paths)"
ls "$CACHE/src"/*.deb >/dev/null 2>&1 && say "packages built: $(cd "$CACHE/src" && ls ./*.deb | tr '\n' ' ')"
[ "$status" -eq 0 ] || exit "$status"

# ---- 5. kiln meta on a binary of that build ------------------------------------
# The runtime library of the source package and its -dbgsym, unpacked as a
# user would install them: the binary is stripped, its DWARF is in the
# debug file, found by build id under --debug-root.
root=$CACHE/unpacked
rm -rf "$root"
for deb in "$CACHE"/src/*.deb; do
  case $deb in *-dev_*|*-doc_*) continue ;; esac
  dpkg-deb -x "$deb" "$root"
done
# (zlib's own library rather than minizip's, which sorts first)
pattern='*.so.*'
[ "$SOURCE" = zlib ] && pattern='libz.so.*'
lib=$(find "$root" -path "$root/usr/lib/debug" -prune -o -type f -name "$pattern" -print | sort | head -n1)
[ -n "$lib" ] || die "no shared library in the packages built from $SOURCE"
say "kiln meta on ${lib#"$root"/} (debug file from the -dbgsym package)"
meta() { "$KILN" meta "$@" --debug-root "$root/usr/lib/debug"; }
if [ "$SOURCE" = zlib ]; then
  echo "\$ kiln meta types --type z_stream ${lib##*/} --debug-root ..." >&2
  meta types --type z_stream "$lib" >&2
fi
echo "\$ kiln meta frames ${lib##*/} | head" >&2
meta frames "$lib" > "$CACHE/frames.txt"
head -n 12 "$CACHE/frames.txt" >&2
echo "\$ kiln meta run -- sh -c 'kiln meta all ${lib##*/} --out-dir $CACHE/meta; kiln meta stats'" >&2
mkdir -p "$CACHE/meta"
"$KILN" meta run -- sh -c '"$0" meta all "$1" --debug-root "$2" --out-dir "$3" && "$0" meta stats' \
  "$KILN" "$lib" "$root/usr/lib/debug" "$CACHE/meta" | grep -E '^(jobs|parses) ' >&2
wc -l "$CACHE"/meta/* >&2

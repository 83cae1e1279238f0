#!/usr/bin/env bash
# fetch-source.sh CACHE SOURCE [PKG...]: prints the unpacked tree of Debian
# source package SOURCE, fetched with `apt-get source` into CACHE once
# (examples/lib/debsrc.sh: a private apt configuration, /etc/apt untouched),
# after making sure its build dependencies and the binary packages PKG are
# installed. Installing changes the machine for everyone: it is done as root
# only, under the machine-wide lock /tmp/kiln-bench.lock. SOURCE "-" fetches
# nothing and only installs the PKGs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DEBSRC_PROG=check-packages
. "$here/../../examples/lib/debsrc.sh"
cache=$1 source=$2
shift 2
debsrc_init "$cache"
src=
[ "$source" = - ] || src=$(debsrc_fetch "$cache" "$source")

missing=false
[ -z "$src" ] || (cd "$src" && dpkg-checkbuilddeps >/dev/null 2>&1) || missing=true
for p in "$@"; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = installed ] || missing=true
done
if $missing; then
  exec 9>>/tmp/kiln-bench.lock
  flock 9
  [ -z "$src" ] || debsrc_build_deps "$src"
  [ $# -eq 0 ] || debsrc_install "$@"
fi
[ -z "$src" ] || printf '%s\n' "$src"

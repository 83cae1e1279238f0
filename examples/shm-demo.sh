#!/usr/bin/env bash
# The shared-memory map at work: several processes, each with several threads,
# race to fill one map file with the same keys, read them all back, and the map
# is validated; then the same map is inspected with the kiln shm commands.
set -euo pipefail
KILN="${KILN_BUILD:-build}/kiln"
dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-shm-example.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "== kiln shm demo: 4 processes x 4 threads, 200000 keys, map grows from 64 KiB"
"$KILN" shm demo --procs 4 --threads 4 --keys 200000

echo
echo "== a map file you can look at"
"$KILN" shm create "$dir/cache" --initial 64K --max 64M
"$KILN" shm put "$dir/cache" /usr/include/stdio.h 1
"$KILN" shm put "$dir/cache" /usr/include/stdio.h 2   # first writer wins: stays 1
"$KILN" shm put "$dir/cache" /usr/lib/libfoo.so.1 2
"$KILN" shm demo --map "$dir/cache" --procs 2 --threads 2 --keys 20000 | sed -n '2,3p'
echo "-- kiln shm get $dir/cache /usr/include/stdio.h"
"$KILN" shm get "$dir/cache" /usr/include/stdio.h
echo "-- kiln shm stats"
"$KILN" shm stats "$dir/cache"
echo "-- kiln shm validate"
"$KILN" shm validate "$dir/cache"
echo "-- kiln shm dump | grep stdio.h"
"$KILN" shm dump "$dir/cache" | grep -a usr/include/stdio.h

#!/bin/sh
# Writes the preload library's version script to stdout: the names of the
# generated hooks (hooks.def, expanded by the preprocessor) and of the
# hand-written ones (every KT_EXPORT definition in this directory) are global,
# everything else is local, so kiln's internals (kiln_ask, shmmap_*, ipc
# helpers) can never collide with a program's own symbols.
#   exports.sh CC HOOKS_DIR
set -eu
cc=$1 dir=$2
{
	printf '#define KT_HOOK(r, name, ...) name\n#define KT_HOOK_OPEN(name, ...) name\n#define KT_HOOK_OPEN2(name, ...) name\n#define KT_HOOK_CREAT(name, ...) name\n#define KT_HOOK_STAT(name, ...) name\n#define KT_HOOK_ACCESS(name, ...) name\n#define KT_HOOK_GLIBC(r, name, ...) name\n#define KT_HOOK_GLIBC_VOID(name, ...) name\n#include "hooks.def"\n' |
		"$cc" -E -P -I"$dir" -x c - | tr -s ' \t' '\n\n'
	grep -h '^KT_EXPORT ' "$dir"/*.c | sed -n 's/^KT_EXPORT [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p'
} | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | LC_ALL=C sort -u | {
	printf '{\n  global:\n'
	sed 's/.*/    &;/'
	printf '  local: *;\n};\n'
}

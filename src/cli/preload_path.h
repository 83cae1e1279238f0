/* Where kiln's preload library is, for the in-tree build and for every
 * installed layout. */
#ifndef KILN_CLI_PRELOAD_PATH_H
#define KILN_CLI_PRELOAD_PATH_H

#include <stddef.h>
#include <stdio.h>

/* Finds libkiln-trace.so, in this order:
 *   1. next to the kiln executable (the build tree: build/kiln, build/libkiln-trace.so);
 *   2. EXEDIR/../lib/MULTIARCH/kiln/ (an installed tree wherever it lies:
 *      /usr/bin/kiln and /usr/lib/x86_64-linux-gnu/kiln/, also unpacked
 *      with dpkg -x into another root);
 *   3. the directory `make install` was told (PKGLIBDIR, baked in).
 * Writes its absolute path to OUT. Returns 0, or -1 after a message on ERR
 * naming every place tried. */
int cli_find_preload(char *out, size_t len, const char *cmd, FILE *err);

#endif

/* Libraries a traced process need not ask about: those kiln itself runs
 * with (libc, ld.so, libz...) that are visible to this build for the whole
 * run. Their paths, colon-separated, go to every traced process in
 * KILN_TRUSTED_LIBS; the preload library's check of what the loader loaded
 * (src/trace/hooks/loader.c) skips them, so a process that loads nothing
 * else asks nothing at start-up. */
#ifndef KILN_TRACE_SERVICE_TRUSTED_H
#define KILN_TRACE_SERVICE_TRUSTED_H

#include <stddef.h>

#include "trace/service/sandbox.h"

/* Writes the list into out (cap bytes, NUL-terminated; a path that does not
 * fit is left out). A library is listed when the sandbox allows reading it
 * and the answer is stable (its walk stayed in registry-managed trees). */
void trusted_libs(struct sandbox *s, char *out, size_t cap);

#endif

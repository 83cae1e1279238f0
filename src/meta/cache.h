/* The meta server's models, kept warm between jobs.
 *
 * A model is found by the path as the command line gave it, the options that
 * shape it (--debug-root), and the identity of the file that path names at
 * the time of the request: (dev, ino, size, mtime_ns) and the ELF build id,
 * all re-read on every request (and the separate debug file's identity too),
 * so a binary rewritten in place or replaced by rename is parsed again and
 * never served stale. Two requests for the same binary at once share one
 * parse. Models not in use are evicted, least recently used first, while the
 * estimated memory exceeds the bound. Thread-safe. */
#ifndef KILN_META_CACHE_H
#define KILN_META_CACHE_H

#include <stdint.h>

#include "meta/model.h"

struct meta_cache_stats {
	uint64_t hits, misses, parses, stale, evictions;
	uint64_t models, bytes, max_bytes, peak_bytes;
};

/* max_bytes 0 = unbounded. Returns NULL when out of memory. */
struct meta_cache *meta_cache_new(uint64_t max_bytes);
/* Frees every model; none may be in use. */
void meta_cache_free(struct meta_cache *c);

/* A model of PATH (relative paths against opts->dirfd, else the calling
 * thread's working directory) as meta_model_open_with would build it, with
 * the same errors. *parsed is set to 1 when this call parsed it. */
int meta_cache_get(struct meta_cache *c, const char *path, const struct meta_options *opts,
		   struct meta_model **out, struct meta_err *err, int *parsed);
/* Hands back a model from meta_cache_get. */
void meta_cache_put(struct meta_cache *c, struct meta_model *m);

void meta_cache_get_stats(struct meta_cache *c, struct meta_cache_stats *out);

/* Estimated memory of a model: its arrays, plus the bytes of the binary and
 * its debug file, which libelf maps and libdw reads through. */
uint64_t meta_cache_model_bytes(const struct meta_model *m);

#endif

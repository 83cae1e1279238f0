/* Recalled keys (docs/verdict-cache.md, "Recalled keys"): the questions of
 * the last build of the same sandbox whose answers were STABLE ALLOWs, kept
 * in a small file in the user's cache directory. The next build's server
 * decides each one again, in the idle turns of its loop, and puts the
 * STABLE ALLOWs into the map with the key's number (VC_F_RECALLED) before a
 * process asks: that first asking then costs no round trip. The file is a
 * hint only: every answer is decided afresh against this run's registry and
 * policy, and a key whose decision is anything else (hidden, refused,
 * unknown to the registry, not STABLE) is left for its first asker.
 *
 * A recalled key is logged only once a process uses it: the client sets its
 * bit in the statistics file's recall bitmap first (vcache.h), and
 * recall_read() logs each newly set key's access as a round trip would
 * have. What this build asked the server for (recall_remember) and the
 * recalled keys it used become the file for the next one. */
#ifndef KILN_TRACE_SERVICE_RECALL_H
#define KILN_TRACE_SERVICE_RECALL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/service/sandbox.h"
#include "trace/service/verdict_cache.h"

/* At most this many keys are kept (a build that asks more recalls these). */
#define RECALL_KEEP 32768u

struct recall_key {
	char *path;
	uint8_t access, qflags;
};

struct recall {
	char file[PATH_MAX];      /* where the keys are kept */
	struct recall_key *keys;  /* the last build's, in the order it asked them */
	size_t n;
	size_t next;              /* keys below were decided */
	uint64_t *seen;           /* per key: its bit was read set */
	uint64_t *logged;         /* ... and it was a recalled value: its use logged */
	struct recall_key *asked; /* what this build asked the server (STABLE ALLOWs) */
	size_t nasked, capasked;
	unsigned long put, used;  /* put into the map; used by the build */
	bool lost;                /* out of memory remembering: the file is not written */
};

/* Reads the keys of the file named after `identity` (identity_len bytes:
 * what makes two builds' sandboxes the same) in directory `dir`. No file:
 * no keys. A file that is not a regular file, or not in this format, is
 * ignored with one message in err (returns 1); 0 otherwise; -1 out of
 * memory. */
int recall_open(struct recall *r, const char *dir, const char *identity, size_t identity_len,
		char *err, size_t errlen);

/* Decides up to `max` more keys and puts the STABLE ALLOWs into the map
 * (verdict_cache_recall); returns how many are left. */
size_t recall_ahead(struct recall *r, struct sandbox *sbx, struct verdict_cache *vc, size_t max);
size_t recall_left(const struct recall *r);

/* Each key whose bit a client set since the last call, given once to
 * used(ctx, path, access), its value then made a plain STABLE ALLOW
 * (verdict_cache_recall_done); returns how many. */
size_t recall_read(struct recall *r, struct verdict_cache *vc,
		   void (*used)(void *ctx, const char *path, unsigned access), void *ctx);

/* A question that reached the server (a QUERY, a NOTE) about a key the map
 * holds as a recalled one: its first asking is this one. Marks the key used
 * (its bit set, so that no client's use logs it again) and says whether it
 * was not yet: false for a key used before (or not recalled). */
bool recall_claim(struct recall *r, struct verdict_cache *vc, const char *path,
		  unsigned access, unsigned qflags);

/* A question the server answered with a STABLE ALLOW that was no finding. */
void recall_remember(struct recall *r, const char *path, unsigned access, unsigned qflags);

/* Writes the keys the next build will recall: those this one used, then
 * those it asked. 0, or -1 with a message in err. */
int recall_save(struct recall *r, char *err, size_t errlen);

void recall_free(struct recall *r);

#endif

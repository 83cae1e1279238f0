/* The trace server's side of the shared verdict cache (docs/verdict-cache.md):
 * it creates the map and the statistics file in the run directory, and after
 * each decision inserts what cannot go stale:
 *  - STABLE values: decisions whose walk only visited registry-managed trees
 *    (the walk memo's rule): they hold for the whole run;
 *  - AREA values: decisions on paths whose every node lies in allow/read
 *    areas (the build directory, /tmp...): they hold in every state of the
 *    file system in which the path has no symlink on its way, which the
 *    client checks (openat2 RESOLVE_NO_SYMLINKS) before using one;
 *  - and for a directory of such an area with no rule below it, one 'S'
 *    value per access class: every name in it has that AREA verdict, so a
 *    fresh temporary file costs no round trip (the client writes it into the
 *    access log instead, read back by verdict_cache_read_log).
 * The server is the map's only writer; clients map it read-only. */
#ifndef KILN_TRACE_SERVICE_VERDICT_CACHE_H
#define KILN_TRACE_SERVICE_VERDICT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/shmmap.h"
#include "trace/service/policy.h"
#include "trace/service/sandbox.h"
#include "trace/vcache.h"

struct verdict_cache {
	struct shmmap map;
	struct vc_counters *ctr; /* the statistics file, mapped read-write */
	size_t ctr_len;
	uint64_t pid_words;
	size_t log_off;          /* the access log's slots in the statistics file */
	const struct policy *policy;
	struct sandbox *sbx;
	unsigned long inserts, full;
	bool stop;               /* the map is full: no more inserts */
	unsigned char log_read[VC_LOG_SLOTS / 8]; /* access-log slots handled */
	uint64_t log_from;       /* every slot below was handled */
	uint64_t logged;         /* slots believed */
	uint64_t *recall;        /* the recall bitmap (client-written), or NULL */
	uint32_t recall_bits;
};

/* Creates the map at `path` (mode 0400: the server's fd is the only
 * writable one) and the statistics file at path + VC_COUNTERS_SUFFIX, with
 * a recall bitmap of recall_bits bits (recall.h; 0: none). Returns 0, or -1
 * with a message naming the file in err. */
int verdict_cache_create(struct verdict_cache *vc, const char *path, struct sandbox *sbx,
			 uint32_t recall_bits, char *err, size_t errlen);
void verdict_cache_close(struct verdict_cache *vc);

/* Whether the map holds a value for this question's own key. */
bool verdict_cache_has(const struct verdict_cache *vc, const char *path, unsigned access,
		       unsigned qflags);

/* After a QUERY decided as d (enforcing: the verdict sent is d->verdict). */
void verdict_cache_query(struct verdict_cache *vc, const char *path, unsigned access,
			 unsigned qflags, const struct sbx_decision *d);

/* Recalled key number `index` (recall.h), decided as d before anyone asked:
 * put in as a STABLE ALLOW with its number when d is a STABLE ALLOW and no
 * finding (sbx_stable_allow) and nobody has put the key in yet (the caller
 * looked: an exec key's file is read for its flags). Whether it was. */
bool verdict_cache_recall(struct verdict_cache *vc, const char *path, unsigned access,
			  unsigned qflags, const struct sbx_decision *d, uint32_t index);
/* The recall bitmap clients set bits in (NULL and 0 bits: none). */
uint64_t *verdict_cache_recall_bitmap(const struct verdict_cache *vc, uint32_t *bits);
/* Recalled key number `index`, its use about to be logged: when the map
 * holds it as that recalled value, the value becomes the same answer without
 * VC_F_RECALLED and its number (shmmap_replace), so that later hits do not
 * look at the recall bitmap, and true; else false (a bit set for a key never
 * put in, hidden or asked first, says nothing). */
bool verdict_cache_recall_done(struct verdict_cache *vc, const char *path, unsigned access,
			       unsigned qflags, uint32_t index);
/* The number of the recalled key the map holds for this question, or -1. */
long verdict_cache_recalled(const struct verdict_cache *vc, const char *path, unsigned access,
			    unsigned qflags);
/* After a QUERY_DIR: the directory as asked and its decision (access LIST),
 * the message's `count` entries (validated: u16 length, name) and the answer
 * sent for each. */
void verdict_cache_listing(struct verdict_cache *vc, const char *dir, const struct sbx_decision *d,
			   const char *entries, size_t count, const unsigned char *hidden);

/* After a QUERY_DATA whose answer holds for the run (every file its plan
 * looked at is in a registry-managed tree). */
void verdict_cache_data(struct verdict_cache *vc, unsigned kind, unsigned arg, const char *a,
			size_t alen, const char *b, size_t blen, unsigned answer);

struct verdict_cache_stats {
	uint64_t hits, misses, listings; /* summed from the statistics file (untrusted) */
	uint64_t ahead;                  /* ... misses answered ahead, told (ditto) */
	uint64_t map_bytes, entries;
};
void verdict_cache_stats(const struct verdict_cache *vc, struct verdict_cache_stats *st);

/* During the build (every tick) and after it: each access the clients
 * answered from an 'S' value and wrote into the access log since the last
 * call, whose 'S' value the map really holds, is given once to seen(ctx,
 * pid, path, access) with the AREA verdict ALLOW, and its own key gets the
 * AREA value ALLOW, so later askers hit it without a slot. A slot taken but
 * not yet committed is looked at again next time. Returns the number of
 * slots believed in this call. */
size_t verdict_cache_read_log(struct verdict_cache *vc,
			      void (*seen)(void *ctx, pid_t pid, const char *path, unsigned access),
			      void *ctx);

/* The pid bitmap of processes that used the cache (NULL if unavailable). */
const uint64_t *verdict_cache_pids(const struct verdict_cache *vc, size_t *words);

/* Exposed for unit tests: whether a question on `path` (as asked, absolute
 * and lexically clean) can be answered by the area rule, and the verdict it
 * then has (-1: it cannot). */
int verdict_cache_area_verdict(const struct policy *p, const char *path, unsigned access);
/* Whether no entry of canonical directory `dir` can ever be hidden. */
bool verdict_cache_area_listing(const struct policy *p, const char *dir);
/* Whether every name directly in canonical directory `dir` has the same
 * area verdict: dir's walk is clean, no rule is for a name directly in it,
 * and dir is not / or part of /proc. */
bool verdict_cache_area_names(const struct policy *p, const char *dir);

#endif

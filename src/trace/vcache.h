/* The shared verdict cache of a trace run (docs/verdict-cache.md): what its
 * keys and values look like in the src/shm map, and the layout of the small
 * statistics file next to it. Used by the trace server (the map's only
 * writer) and by the preload library (read-only); nothing here allocates.
 *
 * Keys are the path exactly as asked, a NUL byte (paths never hold one),
 * then a kind letter and its fields:
 *   path \0 'V' access qflags      a verdict for kiln_ask
 *   dir  \0 'D'                    how a listing of dir is filtered
 *   dir  \0 'E' name               whether entry `name` of dir is hidden
 *   dir  \0 'S' access qflags      the AREA verdict of every name directly in
 *                                  dir (a fresh temporary file's first asking)
 * and the plans of glibc's own data loads (kiln_ask_data), whose keys start
 * with a NUL byte (no path does):
 *   \0 'G' kind arg(4 bytes) a \0 b    an enum kiln_data_answer */
#ifndef KILN_TRACE_VCACHE_H
#define KILN_TRACE_VCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shm/shmmap.h"

#define VC_FORMAT 2u
/* The map's header tag (shmmap_params.tag): "kilnvc" and the format. A
 * client checks it in the header copy its attach reads anyway, where a
 * marker key cost a lookup: two page faults in every new process. */
#define VC_TAG (0x6b696c6e76630000ull | VC_FORMAT)

#define VC_COUNTERS_SUFFIX ".stats"  /* the statistics file: map path + this */

/* Value: magic in the top 16 bits (a value without it is garbage: the
 * client asks the server instead), a recalled key's number in bits 24..47
 * (VC_F_RECALLED; else 0), flags in bits 16..23, the kind in bits 8..15,
 * the answer in bits 0..7. */
#define VC_VALUE_MAGIC 0x564bull

enum vc_kind {
	VC_STABLE = 1, /* holds whatever the file system does: registry-managed trees */
	VC_AREA   = 2, /* holds while the path has no symlink on its way (the client checks) */
};

/* Answers of a 'D' (listing) value. */
enum vc_listing {
	VC_LIST_ENTRIES = 0, /* look each entry up ('E' keys); a missing one: ask */
	VC_LIST_ALL     = 1, /* the directory is hidden: so is every entry */
	VC_LIST_NONE    = 2, /* no entry can be hidden */
};

/* Flags of a value. */
enum {
	/* A STABLE ALLOW of the exec class whose file the server read when it
	 * answered: a dynamic ELF (or a file the kernel refuses or runs without
	 * an interpreter kiln checks), neither set-id nor a #! script
	 * (execfile.h: no facts). The exec check runs it by path at once. */
	VC_F_PLAIN_EXEC = 1,
	/* A STABLE ALLOW the server put in before anyone asked, because the
	 * last build of the same sandbox asked it (docs/verdict-cache.md,
	 * Recalled keys). The first process to use it sets the key's bit in the
	 * statistics file's recall bitmap (vc_recall_index), which is how the
	 * server learns that the path was used; without that bitmap, a miss. */
	VC_F_RECALLED = 2,
};
#define VC_F_KNOWN (VC_F_PLAIN_EXEC | VC_F_RECALLED)
#define VC_RECALL_MAX (1u << 24) /* numbers of recalled keys: bits 24..47 */

static inline uint64_t vc_value_flags(unsigned kind, unsigned answer, unsigned flags)
{
	return (VC_VALUE_MAGIC << 48) | ((uint64_t)(flags & 0xff) << 16) |
	       ((uint64_t)(kind & 0xff) << 8) | (answer & 0xff);
}

static inline uint64_t vc_value(unsigned kind, unsigned answer)
{
	return vc_value_flags(kind, answer, 0);
}

static inline unsigned vc_flags(uint64_t v)
{
	return (unsigned)(v >> 16) & 0xff;
}
static inline uint64_t vc_value_recalled(unsigned answer, unsigned flags, uint32_t index)
{
	return vc_value_flags(VC_STABLE, answer, flags | VC_F_RECALLED) |
	       ((uint64_t)(index & (VC_RECALL_MAX - 1)) << 24);
}
static inline uint32_t vc_recall_index(uint64_t v)
{
	return (uint32_t)(v >> 24) & (VC_RECALL_MAX - 1);
}

/* 1 and the kind and answer of a well-formed value, else 0. Flags are only
 * on STABLE values, and only known ones; a number only with VC_F_RECALLED. */
static inline int vc_parse(uint64_t v, unsigned *kind, unsigned *answer)
{
	if ((v >> 48) != VC_VALUE_MAGIC || (vc_flags(v) & ~VC_F_KNOWN) ||
	    ((v & 0xffffff000000ull) && !(vc_flags(v) & VC_F_RECALLED)))
		return 0;
	*kind = (unsigned)(v >> 8) & 0xff;
	*answer = (unsigned)v & 0xff;
	if (vc_flags(v) && *kind != VC_STABLE)
		return 0;
	return *kind == VC_STABLE || *kind == VC_AREA;
}

/* Key builders: return the key length, or 0 when it does not fit in
 * SHMMAP_MAX_KEY bytes (such a question is never cached). out must hold
 * SHMMAP_MAX_KEY bytes; vc_key_verdict's out may be the path itself. */
/* path \0 letter access qflags: the 'V' and 'S' keys. */
static inline size_t vc_key_class(char *out, const char *path, size_t plen, char letter,
				  unsigned access, unsigned qflags)
{
	if (plen + 4 > SHMMAP_MAX_KEY)
		return 0;
	if (out != path) /* in place: the caller's buffer holds the path already */
		memcpy(out, path, plen);
	out[plen] = '\0';
	out[plen + 1] = letter;
	out[plen + 2] = (char)(access & 0xff);
	out[plen + 3] = (char)(qflags & 0xff);
	return plen + 4;
}

static inline size_t vc_key_verdict(char *out, const char *path, size_t plen, unsigned access,
				    unsigned qflags)
{
	return vc_key_class(out, path, plen, 'V', access, qflags);
}

/* dir \0 letter: the 'D' key, or the prefix of the 'E' keys. */
static inline size_t vc_key_dir(char *out, const char *dir, size_t dlen, char letter)
{
	if (dlen + 2 > SHMMAP_MAX_KEY)
		return 0;
	memcpy(out, dir, dlen);
	out[dlen] = '\0';
	out[dlen + 1] = letter;
	return dlen + 2;
}

/* The 'S' key: dir \0 'S' access qflags (out may be dir itself). */
static inline size_t vc_key_names(char *out, const char *dir, size_t dlen, unsigned access,
				  unsigned qflags)
{
	return vc_key_class(out, dir, dlen, 'S', access, qflags);
}

static inline size_t vc_key_listing(char *out, const char *dir, size_t dlen)
{
	return vc_key_dir(out, dir, dlen, 'D');
}

/* Entry keys share their prefix: build it once, then vc_key_entry_name per
 * entry. */
static inline size_t vc_key_entry_prefix(char *out, const char *dir, size_t dlen)
{
	return vc_key_dir(out, dir, dlen, 'E');
}

static inline size_t vc_key_entry_name(char *out, size_t prefix, const char *name, size_t nlen)
{
	if (!prefix || prefix + nlen > SHMMAP_MAX_KEY)
		return 0;
	memcpy(out + prefix, name, nlen);
	return prefix + nlen;
}

/* The key of a kiln_ask_data question. */
static inline size_t vc_key_data(char *out, unsigned kind, unsigned arg, const char *a, size_t alen,
				 const char *b, size_t blen)
{
	if (8 + alen + blen > SHMMAP_MAX_KEY)
		return 0;
	out[0] = '\0';
	out[1] = 'G';
	out[2] = (char)(kind & 0xff);
	memcpy(out + 3, &arg, 4);
	memcpy(out + 7, a, alen);
	out[7 + alen] = '\0';
	memcpy(out + 8 + alen, b, blen);
	return 8 + alen + blen;
}

/* ---- the statistics file ---------------------------------------------------
 *
 * Written by every traced process (so: untrusted numbers, never used for a
 * decision): counters in 63 shards of one cache line each, a process adding
 * to the shard of its pid, and one bit per pid that asked anything, so the
 * report counts processes that never needed the server. */
#define VC_COUNTERS_MAGIC 0x5354534e4c494bull /* "KILNSTS" */
/* 63 shards: with the header they fill the file's first page exactly, and
 * the pid bitmap starts on the next, so a process touches two pages. */
#define VC_SHARDS 63

struct vc_shard {
	uint64_t hits;     /* questions answered from the map */
	uint64_t misses;   /* questions the map did not answer (asked the server) */
	uint64_t listings; /* listing batches answered from the map (also in hits) */
	uint64_t ahead;    /* misses answered ahead by an earlier round trip, told */
	uint64_t pad[4];
};

struct vc_counters {
	uint64_t magic;
	uint64_t pid_words;    /* 64-bit words of pid bitmap after the shards */
	uint64_t log_off;      /* byte offset of the access log's slots in the file */
	uint64_t log_slots;    /* how many */
	uint64_t log_next;     /* the next free slot (clients fetch_add it) */
	uint64_t recall_off;   /* byte offset of the recall bitmap (0: none) */
	uint64_t recall_bits;  /* its bits: one per recalled key, set by its first user */
	uint64_t pad[1];
	struct vc_shard shard[VC_SHARDS];
	/* uint64_t pid_bits[pid_words] follows */
};

_Static_assert(sizeof(struct vc_counters) == 4096, "header and shards: one page");

static inline size_t vc_counters_size(uint64_t pid_words)
{
	return sizeof(struct vc_counters) + pid_words * sizeof(uint64_t);
}

/* ---- the access log ----------------------------------------------------------
 *
 * A path answered by an 'S' value never reached the server; so that the
 * report's path list and --log still name it, the client writes it into a
 * slot of the access log, after the pid bitmap in the statistics file:
 * slot = fetch_add(log_next), path and pid, then the commit word (release).
 * No free slot, or a path too long for one: the client asks the server
 * instead. The server reads the committed slots after the build and
 * believes a slot only if its own map holds the 'S' value it claims. */
#define VC_LOG_SLOT   256u
#define VC_LOG_PATH   (VC_LOG_SLOT - 8u) /* path bytes, NUL included */
#define VC_LOG_SLOTS  65536u             /* 16 MiB of sparse file; pages are touched as used */
#define VC_LOG_MAGIC  0x4c4bu            /* "KL": commit word's top 16 bits */

struct vc_log_slot {
	uint32_t commit; /* VC_LOG_MAGIC << 16 | access << 8 | qflags, written last */
	int32_t pid;
	char path[VC_LOG_PATH];
};

_Static_assert(sizeof(struct vc_log_slot) == VC_LOG_SLOT, "one slot");

static inline uint32_t vc_log_commit(unsigned access, unsigned qflags)
{
	return (VC_LOG_MAGIC << 16) | ((access & 0xff) << 8) | (qflags & 0xff);
}

/* Where the log's slots start for a file with pid_words of bitmap: the
 * next page boundary. */
static inline size_t vc_log_offset(uint64_t pid_words)
{
	return (vc_counters_size(pid_words) + 4095) & ~(size_t)4095;
}

/* ---- the recall bitmap --------------------------------------------------------
 *
 * After the access log: bit i is set (fetch_or) by the first process that
 * uses recalled key number i (VC_F_RECALLED), before it uses it; the server
 * reads the bitmap as it reads the log and logs each newly set key's access
 * as a round trip would have. A process killed before its fetch_or used
 * nothing; one killed after it is logged. */
static inline size_t vc_recall_offset(uint64_t pid_words)
{
	return vc_log_offset(pid_words) + (size_t)VC_LOG_SLOTS * VC_LOG_SLOT;
}

#endif

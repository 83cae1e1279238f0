/* kiln's lock-free shared-memory map: an insert-only hash trie in one mmap'd
 * file, shared by many processes and threads. Keys are byte strings of up to
 * SHMMAP_MAX_KEY bytes, values are uint64_t. The file format is in docs/shm.md.
 *
 * Safety contract (the preload library relies on it):
 *  - shmmap_attach, shmmap_attach_fd, shmmap_lookup, shmmap_insert and
 *    shmmap_detach never allocate, never use stdio, never take a lock, and
 *    make only async-signal-safe syscalls (open, fstat, pread, mmap, munmap,
 *    fallocate, close). They are safe in a signal handler, in a child after
 *    fork in a threaded program, and preserve errno except where documented.
 *  - Every offset read from the shared file is checked against the bytes
 *    known to be backed before it is dereferenced: garbage written into the
 *    file by another process yields a miss or an error, never a crash (the
 *    one exception is a file shrunk behind our back, which only a memfd
 *    sealed with F_SEAL_SHRINK rules out; see docs/shm.md).
 *  - A handle is a caller-provided struct; after attach, any number of
 *    threads may use it at once.
 */
#ifndef KILN_SHM_SHMMAP_H
#define KILN_SHM_SHMMAP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define SHMMAP_MAX_KEY (PATH_MAX + 16)

/* Largest maximum size a map may declare (reserved address space). */
#define SHMMAP_MAX_SIZE_LIMIT (1ull << 40)

/* Attach modes. */
enum shmmap_mode {
	SHMMAP_RDONLY = 0, /* PROT_READ mapping: lookups only */
	SHMMAP_RDWR   = 1, /* lookups and inserts */
};

enum shmmap_status {
	SHMMAP_INSERTED = 0, /* our value is now in the map */
	SHMMAP_EXISTS   = 1, /* the key was there: *winner is the first writer's value */
	SHMMAP_FULL     = 2, /* maximum size reached or the disk refused to grow */
	SHMMAP_INVALID  = 3, /* key too long, or the handle is read-only */
	SHMMAP_CORRUPT  = 4, /* the file holds garbage on this key's path */
};

/* 128-bit key hash. The default is MurmurHash3 x64-128 with the map's seed. */
struct shmmap_hash {
	uint64_t lo, hi;
};
typedef struct shmmap_hash shmmap_hash_fn(const void *key, size_t len, uint64_t seed);

struct shmmap {
	unsigned char *base;     /* mapping of the whole reserved range */
	uint64_t map_len;        /* = the file's maximum size */
	uint64_t safe_size;      /* bytes verified backed by the file (atomic, grows) */
	uint64_t root_off;
	uint64_t seed;
	uint64_t tag;             /* the header's tag, as created (shmmap_params.tag) */
	uint32_t root_bits;
	uint32_t subtrie_bits;
	int fd;
	int writable;
	int own_fd;
	shmmap_hash_fn *hash;    /* NULL = default; see shmmap_test_set_hash */
};

/* Creation parameters. Zero fields take defaults. */
struct shmmap_params {
	uint64_t initial_size; /* bytes committed at creation (default 4 MiB) */
	uint64_t max_size;     /* bytes reserved, never exceeded (default 1 GiB) */
	unsigned root_bits;    /* root table has 2^root_bits slots (default: the
	                          largest <= 18 that fits in the initial size, so
	                          2^16 for 1 MiB, 2^18 from 2 MiB + 4 KiB) */
	unsigned subtrie_bits; /* each subtrie has 2^subtrie_bits slots (default 4) */
	uint64_t seed;         /* hash seed (default: from the clock and pid) */
	unsigned mode;         /* file mode for shmmap_create (default 0600) */
	uint64_t tag;          /* the creator's mark in the header, read back by every
	                          attach from its header copy (no lookup, no page
	                          touched): what kind of map this is (default 0) */
};

/* Creates a new map file at `path` (refuses to replace an existing file; the
 * file appears complete or not at all) and attaches to it read-write.
 * Returns 0, or -1 with a message naming the path in err. Not for hook paths. */
int shmmap_create(struct shmmap *m, const char *path, const struct shmmap_params *p,
		  char *err, size_t errlen);

/* Initializes an empty, writable file descriptor (e.g. a memfd) as a map and
 * attaches read-write. A memfd created with MFD_ALLOW_SEALING is sealed
 * against shrinking. The fd stays owned by the caller. */
int shmmap_create_fd(struct shmmap *m, int fd, const struct shmmap_params *p,
		     char *err, size_t errlen);

/* Attaches to an existing map; mode is SHMMAP_RDONLY or SHMMAP_RDWR. Refuses
 * a file with a bad magic, version or inconsistent bounds. Returns 0, or -1
 * with a message in err (errno is left describing the failure). */
int shmmap_attach(struct shmmap *m, const char *path, int mode, char *err, size_t errlen);

/* Same, from an open fd (not closed by shmmap_detach; for SHMMAP_RDONLY it
 * may be O_RDONLY). */
int shmmap_attach_fd(struct shmmap *m, int fd, int mode, char *err, size_t errlen);

void shmmap_detach(struct shmmap *m);

/* Maps every page of the file that exists now into this process's page
 * tables in one call (madvise MADV_POPULATE_READ), instead of one minor page
 * fault per first-touched page later. A fresh process that will look up many
 * keys gains (see bench-shm: "new process" rows); one that looks up a few
 * loses. Hook-path safe. Returns 0, or -1 (errno preserved) when the kernel
 * cannot (older than 5.14) or the file shrank. */
int shmmap_prefault(struct shmmap *m);

/* Wait-free lookup. Returns 1 and sets *value on a hit, 0 on a miss (also when
 * the path to the key is corrupt). */
int shmmap_lookup(struct shmmap *m, const void *key, size_t len, uint64_t *value);

/* Lock-free insert-if-absent. On INSERTED or EXISTS, *winner (if not NULL) is
 * the value the map holds for the key: the first writer's. */
enum shmmap_status shmmap_insert(struct shmmap *m, const void *key, size_t len,
				 uint64_t value, uint64_t *winner);

/* The writer's one change to a key's value: expected -> value, by a CAS
 * (readers see one or the other). 1 when replaced; 0 when the key is
 * absent, holds another value, or the map is attached read-only. */
int shmmap_replace(struct shmmap *m, const void *key, size_t len, uint64_t expected,
		   uint64_t value);

const char *shmmap_status_name(enum shmmap_status s);

/* Calls fn for every entry exactly once (order unspecified); stops early and
 * returns fn's value when it is non-zero. Entries inserted concurrently may or
 * may not be seen. Returns 0 after a full pass, -1 on a corrupt structure. */
int shmmap_iterate(struct shmmap *m,
		   int (*fn)(const void *key, size_t len, uint64_t value, void *ctx),
		   void *ctx);

struct shmmap_stats {
	uint64_t entries;         /* successful inserts counted in the header */
	uint64_t subtries;        /* subtries published */
	uint64_t bytes_used;      /* allocation end (includes leaked allocations) */
	uint64_t bytes_committed; /* bytes the file is grown to (published) */
	uint64_t max_size;
	unsigned root_bits, subtrie_bits;
	uint32_t version;
};
void shmmap_stats(struct shmmap *m, struct shmmap_stats *st);

/* Full structural check: every reachable slot, subtrie and record is in
 * bounds, well-formed, on the path its hash selects, and no key appears twice.
 * Returns the number of entries (>= 0), or -1 with the first problem found
 * described in err. Not for hook paths (recursion, linear time). */
long long shmmap_validate(struct shmmap *m, char *err, size_t errlen);

/* Lazy, lock-free attach for one handle shared by every thread of a process
 * (the preload library's case): zero-initialize a static struct shmmap_lazy
 * and call shmmap_lazy_get on each lookup. The first caller opens the file
 * with open_fd(ctx) (which must be hook-path safe and return an fd, or -1)
 * and attaches in `mode`; while that is under way, other callers (threads,
 * or a signal handler interrupting it) get NULL at once instead of waiting,
 * as they do for good if opening or attaching failed (or if the process was
 * forked while another thread was attaching): NULL means "go uncached".
 * The fd is closed by shmmap_detach of the lazy map. */
struct shmmap_lazy {
	int state; /* atomic: 0 untried, 1 attaching, 2 ready, 3 failed */
	struct shmmap map;
};
struct shmmap *shmmap_lazy_get(struct shmmap_lazy *l, int (*open_fd)(void *ctx), void *ctx,
			       int mode);

/* The default hash. */
struct shmmap_hash shmmap_hash_default(const void *key, size_t len, uint64_t seed);

/* TEST ONLY: replaces this handle's hash function (NULL restores the default),
 * so tests can force collisions and deep subtries. Every handle on one map must
 * use the same function, or lookups miss. Never call this outside tests. */
void shmmap_test_set_hash(struct shmmap *m, shmmap_hash_fn *fn);

#endif

/* Internals shared by the registry's source files (not part of the API). */
#ifndef KILN_REGISTRY_INTERNAL_H
#define KILN_REGISTRY_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <pthread.h>
#include <sqlite3.h>

#include "registry/registry.h"

#define REGISTRY_SCHEMA_VERSION 2
#define REGISTRY_APPLICATION_ID 0x6b696c6e /* "kiln" */
#define REGISTRY_DEFAULT_BUSY_MS 5000

/* Tables without indexes (bulk import creates those last), then the indexes. */
extern const char registry_schema_tables_sql[];
extern const char registry_schema_indexes_sql[];

enum registry_dep_type {
	REGISTRY_DEP_DEPENDS = 0,
	REGISTRY_DEP_PRE_DEPENDS = 1,
};

struct kiln_registry {
	sqlite3 *db;
	char path[PATH_MAX];
	pthread_mutex_t lock; /* one handle may be shared by threads */
	sqlite3_stmt *st_owners, *st_link_owners, *st_name, *st_dir, *st_resolve,
		*st_resolve_arch;
	/* A closure's statements (closure_kept.c), its base set's by profile
	 * (0 host, 1 chroot): prepared once per handle, not per closure. */
	sqlite3_stmt *st_cl_real, *st_cl_providers, *st_cl_deps, *st_cl_base[2];
	char err[PATH_MAX + 256]; /* last error, for registry_errmsg() */
	void *snap;               /* REGISTRY_SNAPSHOT: the sealed copy, mapped */
	size_t snaplen;
	/* REGISTRY_SNAPSHOT_LATER until registry_snapshot_finish: the copy
	 * being taken, the file read under SQLite's shared lock meanwhile. */
	struct registry_copy *copy;
	/* REGISTRY_SNAPSHOT_LEASE, until a writer comes: the copy not taken
	 * yet (no thread), its fd holding the file under a read lease
	 * (snapshot.c), the file read under SQLite's shared lock. */
	struct registry_copy *lease;
	bool copied_after_lease; /* a writer came: the handle is on a copy */
	bool lease_lost; /* ... but the kernel had broken the lease first */
	/* A snapshot never changes, so its closures (either profile) share
	 * the base sets, the name lookups and the dependency rows, each worked
	 * out once (closure_kept.c); the report's unused Build-Depends need one
	 * closure per declared name. */
	struct registry_closure_memo *closure_memo;
};

/* The copy a snapshot is taken into, by a thread of its own (a WAL
 * database's at once, through SQLite: snapshot.c). */
struct registry_copy {
	pthread_t thread;
	bool threaded; /* the copy is taken by `thread` (a WAL database's is not) */
	int fd;      /* the registry file */
	int memfd;   /* the copy, sealed when complete */
	size_t size;
	int err;     /* the thread's outcome: 0 or an errno */
};

/* Whether the handle's answers cannot change: a snapshot, one being taken
 * (the file under SQLite's shared lock until then), or the file under a
 * read lease. */
static inline bool registry_frozen(const struct kiln_registry *reg)
{
	return reg->snap || reg->copy || reg->lease;
}

/* Finalizes the handle's prepared statements (prepared again when used). */
void registry_finalize_statements(struct kiln_registry *reg);

/* Frees what the closures kept on a snapshot handle. */
void registry_closure_memo_free(struct registry_closure_memo *m);

/* Seals a memfd that only the caller holds against every change: writes,
 * writable mappings, resizing, further seals. 0, or -1 with errno. */
int registry_seal_copy(int memfd);

/* Replaces the handle's file by a sealed in-memory copy of it, taken under a
 * read lock (snapshot.c). 0, or -1 with a message naming the file in err. */
int registry_snapshot(struct kiln_registry *reg, char *err, size_t errlen);
/* The same in two steps: begin takes the read lock and, unless `lease` and
 * the file can be held under a read lease instead, starts the copy in a
 * thread (registry_snapshot_finish, registry.h, ends it); abandon waits for
 * the thread and drops the copy (a handle closed before it finished). */
int registry_snapshot_begin(struct kiln_registry *reg, bool lease, char *err, size_t errlen);
void registry_snapshot_abandon(struct kiln_registry *reg);
/* The least /proc/sys/fs/lease-break-time (seconds) a lease is taken under:
 * the time a writer waits for the copy before the kernel breaks the lease
 * itself. */
#define REGISTRY_LEASE_MIN_BREAK_S 5

/* Formats a clear message for SQLite result code rc on database `path`. */
void registry_sql_message(sqlite3 *db, int rc, const char *path, char *err, size_t errlen);

/* Reads the schema version of `db` into *ver (0: an empty file), refusing
 * another program's database and a newer schema. Returns 0, or -1 with a
 * message naming `path` in err. */
int registry_schema_version(sqlite3 *db, const char *path, int *ver, char *err, size_t errlen);

/* The SQL migrating schema version `from` to from + 1 ("" for none). */
const char *registry_migration_sql(int from);

/* Checks application_id and user_version; migrates an older schema when
 * writable. Returns 0, or -1 with a message naming `path` in err. */
int registry_check_schema(sqlite3 *db, const char *path, bool writable, char *err, size_t errlen);

/* Busy timeout in ms: $KILN_REGISTRY_BUSY_MS, else the default. */
int registry_busy_ms(void);

/* A breadth-first work list over package ids, with the set of ids ever
 * queued (so each package is visited once, cycles included). */
struct registry_queue {
	int64_t *v;
	size_t n, cap;
};
/* Queues id unless `seen` has it (then adds it there). 0, or -1 when out
 * of memory. */
int registry_queue_push(struct registry_queue *q, struct registry_pkgset *seen, int64_t id);

/* Steps `st` to the end collecting column 0: up to cap ids, returns how many
 * rows (may exceed cap), -1 on error (message in reg->err). Resets st. */
int registry_collect_ids(struct kiln_registry *reg, sqlite3_stmt *st, int64_t *ids, size_t cap);

/* The message for a closure's unknown requested name. */
void registry_unknown_name(const struct kiln_registry *reg, const char *name, char *err,
			   size_t errlen);

/* Prepares (once) and resets a cached statement. NULL on error (message in reg->err). */
sqlite3_stmt *registry_stmt(struct kiln_registry *reg, sqlite3_stmt **slot, const char *sql);

#endif

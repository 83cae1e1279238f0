/* Opening the registry database: schema version checks, migrations, and
 * clear messages for missing, locked, corrupt and foreign files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "registry/internal.h"
#include "registry/query.h"

const char *registry_default_path(char *buf, size_t len)
{
	const char *env = getenv("KILN_DB");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return buf;
	}
	const char *cache = getenv("XDG_CACHE_HOME");
	if (cache && cache[0] == '/') {
		snprintf(buf, len, "%s/kiln/registry.db", cache);
		return buf;
	}
	const char *home = getenv("HOME");
	snprintf(buf, len, "%s/.cache/kiln/registry.db", home && *home ? home : "/tmp");
	return buf;
}

int registry_busy_ms(void)
{
	const char *env = getenv("KILN_REGISTRY_BUSY_MS");
	if (env && *env) {
		char *end;
		long v = strtol(env, &end, 10);
		if (!*end && v >= 0 && v < 3600000)
			return (int)v;
	}
	return REGISTRY_DEFAULT_BUSY_MS;
}

void registry_sql_message(sqlite3 *db, int rc, const char *path, char *err, size_t errlen)
{
	const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		snprintf(err, errlen,
			 "%s: database is locked by another process (gave up after %d ms; "
			 "set KILN_REGISTRY_BUSY_MS to wait longer)",
			 path, registry_busy_ms());
		break;
	case SQLITE_NOTADB:
		snprintf(err, errlen, "%s: not a kiln registry database (not an SQLite database)", path);
		break;
	case SQLITE_CORRUPT:
		snprintf(err, errlen,
			 "%s: database is corrupt (%s); remove it and run 'kiln registry import' again", path,
			 msg);
		break;
	case SQLITE_CANTOPEN:
		snprintf(err, errlen, "%s: cannot open database (%s)", path,
			 errno ? strerror(errno) : msg);
		break;
	case SQLITE_READONLY:
		snprintf(err, errlen, "%s: database is read-only (%s)", path, msg);
		break;
	case SQLITE_FULL:
		snprintf(err, errlen, "%s: disk full (%s)", path, msg);
		break;
	default:
		snprintf(err, errlen, "%s: %s", path, msg);
		break;
	}
}

void registry_finalize_statements(struct kiln_registry *reg)
{
	sqlite3_stmt **stmts[] = { &reg->st_owners, &reg->st_link_owners, &reg->st_name, &reg->st_dir,
				   &reg->st_resolve, &reg->st_resolve_arch, &reg->st_cl_real,
				   &reg->st_cl_providers, &reg->st_cl_deps, &reg->st_cl_base[0],
				   &reg->st_cl_base[1] };
	for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
		sqlite3_finalize(*stmts[i]);
		*stmts[i] = NULL;
	}
}

sqlite3_stmt *registry_stmt(struct kiln_registry *reg, sqlite3_stmt **slot, const char *sql)
{
	if (!*slot) {
		int rc = sqlite3_prepare_v3(reg->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL);
		if (rc != SQLITE_OK) {
			registry_sql_message(reg->db, rc, reg->path, reg->err, sizeof reg->err);
			*slot = NULL;
			return NULL;
		}
	} else {
		sqlite3_reset(*slot);
		sqlite3_clear_bindings(*slot);
	}
	return *slot;
}

const char *registry_errmsg(const struct kiln_registry *reg)
{
	return reg->err;
}

const char *registry_path(const struct kiln_registry *reg)
{
	return reg->path;
}

static int pragma_int(sqlite3 *db, const char *sql, int *out)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Migration i brings a database from schema version i to i + 1. */
static int migrate(sqlite3 *db, int from, char *msg, size_t len)
{
	char *e = NULL;
	int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &e);
	for (int v = from; rc == SQLITE_OK && v < REGISTRY_SCHEMA_VERSION; v++) {
		if (v == 0) { /* an empty file: the whole (current) schema at once */
			rc = sqlite3_exec(db, registry_schema_tables_sql, NULL, NULL, &e);
			if (rc == SQLITE_OK)
				rc = sqlite3_exec(db, registry_schema_indexes_sql, NULL, NULL, &e);
			break;
		}
		rc = sqlite3_exec(db, registry_migration_sql(v), NULL, NULL, &e);
	}
	if (rc == SQLITE_OK) {
		char sql[128];
		snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d; COMMIT",
			 REGISTRY_APPLICATION_ID, REGISTRY_SCHEMA_VERSION);
		rc = sqlite3_exec(db, sql, NULL, NULL, &e);
	}
	if (rc != SQLITE_OK) {
		snprintf(msg, len, "%s", e ? e : sqlite3_errstr(rc));
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	sqlite3_free(e);
	return rc;
}

int registry_schema_version(sqlite3 *db, const char *path, int *verp, char *err, size_t errlen)
{
	int app = 0, ver = 0, ntables = 0;
	int rc = pragma_int(db, "PRAGMA application_id", &app);
	if (rc == SQLITE_OK)
		rc = pragma_int(db, "PRAGMA user_version", &ver);
	if (rc == SQLITE_OK)
		rc = pragma_int(db, "SELECT count(*) FROM sqlite_schema", &ntables);
	if (rc != SQLITE_OK) {
		registry_sql_message(db, rc, path, err, errlen);
		return -1;
	}
	if (app != REGISTRY_APPLICATION_ID && (app != 0 || ntables != 0)) {
		snprintf(err, errlen, "%s: not a kiln registry database (an SQLite database of another program)",
			 path);
		return -1;
	}
	if (ver > REGISTRY_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "%s: registry schema version %d is newer than this kiln supports (%d); "
			 "use a newer kiln or re-import into another --db",
			 path, ver, REGISTRY_SCHEMA_VERSION);
		return -1;
	}
	*verp = ntables ? ver : 0;
	return 0;
}

int registry_check_schema(sqlite3 *db, const char *path, bool writable, char *err, size_t errlen)
{
	int ver;
	if (registry_schema_version(db, path, &ver, err, errlen))
		return -1;
	if (ver < REGISTRY_SCHEMA_VERSION) {
		if (!writable) {
			if (ver == 0)
				snprintf(err, errlen,
					 "%s: empty registry database: run 'kiln registry import dpkg' first",
					 path);
			else
				snprintf(err, errlen,
					 "%s: registry schema version %d is older than this kiln's (%d): "
					 "run 'kiln registry import' to re-create it",
					 path, ver, REGISTRY_SCHEMA_VERSION);
			return -1;
		}
		char msg[256];
		int rc = migrate(db, ver, msg, sizeof msg);
		if (rc != SQLITE_OK) {
			if ((rc & 0xff) == SQLITE_BUSY)
				registry_sql_message(db, rc, path, err, errlen);
			else
				snprintf(err, errlen, "%s: migrating schema %d -> %d failed: %s", path, ver,
					 REGISTRY_SCHEMA_VERSION, msg);
			return -1;
		}
	}
	return 0;
}

struct kiln_registry *registry_open(const char *path, int flags, char *err, size_t errlen)
{
	bool rw = flags & REGISTRY_RDWR;
	struct stat st;
	if (!rw && stat(path, &st)) {
		if (errno == ENOENT)
			snprintf(err, errlen,
				 "%s: no registry database here (create one with 'kiln registry import dpkg')",
				 path);
		else
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!rw && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is a directory, not a registry database", path);
		return NULL;
	}
	struct kiln_registry *reg = calloc(1, sizeof *reg);
	if (!reg) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	snprintf(reg->path, sizeof reg->path, "%s", path);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&reg->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	int oflags = (rw ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
		     SQLITE_OPEN_NOMUTEX;
	errno = 0;
	int rc = sqlite3_open_v2(path, &reg->db, oflags, NULL);
	if (rc != SQLITE_OK) {
		registry_sql_message(reg->db, rc, path, err, errlen);
		registry_close(reg);
		return NULL;
	}
	sqlite3_busy_timeout(reg->db, registry_busy_ms());
	sqlite3_extended_result_codes(reg->db, 0);
	if (registry_check_schema(reg->db, path, rw, err, errlen) ||
	    ((flags & REGISTRY_SNAPSHOT) && registry_snapshot(reg, err, errlen)) ||
	    ((flags & REGISTRY_SNAPSHOT_LATER) && registry_snapshot_begin(reg, flags & REGISTRY_SNAPSHOT_LEASE, err, errlen))) {
		registry_close(reg);
		return NULL;
	}
	return reg;
}

void registry_close(struct kiln_registry *reg)
{
	if (!reg)
		return;
	registry_snapshot_abandon(reg);
	registry_finalize_statements(reg);
	sqlite3_close(reg->db);
	if (reg->snap)
		munmap(reg->snap, reg->snaplen);
	registry_closure_memo_free(reg->closure_memo);
	pthread_mutex_destroy(&reg->lock);
	free(reg);
}

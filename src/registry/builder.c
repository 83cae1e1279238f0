#include "registry/builder.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mkdirs.h"
#include "common/outfile.h"
#include "registry/depends.h"
#include "registry/internal.h"

static int sql_fail(struct builder *b, int rc, char *err, size_t errlen)
{
	registry_sql_message(b->db, rc, b->tmp, err, errlen);
	return -1;
}

static int exec(struct builder *b, const char *sql, char *err, size_t errlen)
{
	int rc = sqlite3_exec(b->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : sql_fail(b, rc, err, errlen);
}

/* The old database must be ours (and not newer) before we replace it; an
 * older schema is fine: keep_old() copies what it has. */
static int attach_old(struct builder *b, char *err, size_t errlen)
{
	if (access(b->target, F_OK))
		return 0;
	sqlite3 *old;
	char msg[PATH_MAX + 256];
	int rc = sqlite3_open_v2(b->target, &old, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(old, registry_busy_ms());
		int ver = 0;
		rc = registry_schema_version(old, b->target, &ver, msg, sizeof msg) ? SQLITE_ERROR
										     : SQLITE_OK;
		if (rc == SQLITE_OK && ver == 0) /* the same message as before */
			rc = registry_check_schema(old, b->target, false, msg, sizeof msg) ? SQLITE_ERROR
											  : SQLITE_OK;
		b->old_version = ver;
	} else {
		registry_sql_message(old, rc, b->target, msg, sizeof msg);
	}
	sqlite3_close(old);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s; not replacing it (remove it or choose another --db)", msg);
		return -1;
	}
	sqlite3_stmt *st;
	rc = sqlite3_prepare_v2(b->db, "ATTACH ?1 AS old", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, b->target, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_DONE) {
		registry_sql_message(b->db, rc, b->target, err, errlen);
		return -1;
	}
	return 1;
}

int builder_begin(struct builder *b, const char *target, char *err, size_t errlen)
{
	memset(b, 0, sizeof *b);
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof dir, "%s", target) >= (int)sizeof dir) {
		snprintf(err, errlen, "%s: path too long", target);
		return -1;
	}
	char *d = dirname(dir);
	if (mkdirs(d, 0777)) {
		snprintf(err, errlen, "%s: cannot create directory: %s", d, strerror(errno));
		return -1;
	}
	/* The output rules (common/outfile.h): a symlinked database is
	 * followed and its target replaced; a non-regular file is refused. */
	struct outfile_dest dest;
	if (outfile_resolve(AT_FDCWD, target, OUTFILE_REGULAR_ONLY, &dest, err, errlen))
		return -1;
	if (snprintf(b->target, sizeof b->target, "%s", dest.path) >= (int)sizeof b->target) {
		snprintf(err, errlen, "%s: path too long", target);
		return -1;
	}
	/* Built in memory, written by the output rules at the end: nothing is
	 * on disk until the commit, so a killed import leaves nothing behind. */
	snprintf(b->tmp, sizeof b->tmp, "%.4000s (new, in memory)", b->target);
	int rc = sqlite3_open_v2(":memory:", &b->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		sql_fail(b, rc, err, errlen);
		builder_abort(b);
		return -1;
	}
	sqlite3_extended_result_codes(b->db, 0);
	sqlite3_busy_timeout(b->db, registry_busy_ms());
	/* Nobody else sees this database until the commit: no journal. */
	if (exec(b,
		 "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE;"
		 "PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY",
		 err, errlen) ||
	    exec(b, registry_schema_tables_sql, err, errlen) || attach_old(b, err, errlen) < 0 ||
	    exec(b, "CREATE TEMP TABLE replaced(origin TEXT PRIMARY KEY)", err, errlen) ||
	    exec(b, "BEGIN", err, errlen)) {
		builder_abort(b);
		return -1;
	}
	struct {
		sqlite3_stmt **st;
		const char *sql;
	} stmts[] = {
		{ &b->ins_pkg, "INSERT INTO main.packages(name, version, arch, origin, essential, "
			       "multiarch, priority) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)" },
		{ &b->ins_file, "INSERT INTO main.files(canonical, pkg, listed, kind, diverted) "
				"VALUES (?1, ?2, ?3, ?4, ?5)" },
		{ &b->ins_dep, "INSERT INTO main.deps(pkg, type, clause, alt, name, archq, version) "
			       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)" },
		{ &b->ins_prov, "INSERT INTO main.provides(pkg, name, version) VALUES (?1, ?2, ?3)" },
	};
	for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
		rc = sqlite3_prepare_v2(b->db, stmts[i].sql, -1, stmts[i].st, NULL);
		if (rc != SQLITE_OK) {
			sql_fail(b, rc, err, errlen);
			builder_abort(b);
			return -1;
		}
	}
	return 0;
}

static int run(struct builder *b, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_fail(b, rc, err, errlen);
}

int64_t builder_add_package(struct builder *b, const struct builder_package *p, char *err, size_t errlen)
{
	sqlite3_stmt *st = b->ins_pkg;
	sqlite3_bind_text(st, 1, p->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, p->version ? p->version : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, p->arch ? p->arch : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, p->origin, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, p->essential);
	sqlite3_bind_text(st, 6, p->multiarch ? p->multiarch : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, p->priority ? p->priority : "", -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc == SQLITE_CONSTRAINT)
		return 0;
	if (rc != SQLITE_DONE)
		return sql_fail(b, rc, err, errlen);
	return sqlite3_last_insert_rowid(b->db);
}

int builder_add_file(struct builder *b, int64_t pkg, const char *listed, const char *canonical,
		     int kind, bool diverted, char *err, size_t errlen)
{
	sqlite3_stmt *st = b->ins_file;
	sqlite3_bind_text(st, 1, canonical, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, pkg);
	if (strcmp(listed, canonical))
		sqlite3_bind_text(st, 3, listed, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_int(st, 4, kind);
	sqlite3_bind_int(st, 5, diverted);
	return run(b, st, err, errlen);
}

int builder_add_unowned_dirs(struct builder *b, const struct builder_dir *dirs, size_t n, char *err,
			     size_t errlen)
{
	if (!n)
		return 0;
	sqlite3_stmt *st = NULL;
	if (exec(b, "CREATE TEMP TABLE new_dirs(pkg INTEGER, listed TEXT, canonical TEXT)", err,
		 errlen))
		return -1;
	int rc = sqlite3_prepare_v2(b->db, "INSERT INTO temp.new_dirs VALUES (?1, ?2, ?3)", -1, &st,
				    NULL);
	for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
		sqlite3_bind_int64(st, 1, dirs[i].pkg);
		sqlite3_bind_text(st, 2, dirs[i].listed, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, dirs[i].canonical, -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(b->db);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return sql_fail(b, rc, err, errlen);
	char sql[256];
	snprintf(sql, sizeof sql,
		 "INSERT INTO main.files(canonical, pkg, listed, kind, diverted) "
		 "SELECT DISTINCT canonical, pkg, listed, %d, 0 FROM temp.new_dirs "
		 "WHERE canonical NOT IN (SELECT canonical FROM main.files); DROP TABLE temp.new_dirs",
		 REGISTRY_KIND_DIR);
	return exec(b, sql, err, errlen);
}

struct rel_ctx {
	struct builder *b;
	int64_t pkg;
	int type;
	char *err;
	size_t errlen;
};

static int add_atom(const struct dep_atom *a, void *ctx)
{
	struct rel_ctx *r = ctx;
	sqlite3_stmt *st;
	if (r->type < 0) {
		st = r->b->ins_prov;
		sqlite3_bind_int64(st, 1, r->pkg);
		sqlite3_bind_text(st, 2, a->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, a->version, -1, SQLITE_TRANSIENT);
	} else {
		st = r->b->ins_dep;
		sqlite3_bind_int64(st, 1, r->pkg);
		sqlite3_bind_int(st, 2, r->type);
		sqlite3_bind_int(st, 3, a->clause);
		sqlite3_bind_int(st, 4, a->alt);
		sqlite3_bind_text(st, 5, a->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 6, a->archq, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 7, a->version, -1, SQLITE_TRANSIENT);
	}
	return run(r->b, st, r->err, r->errlen);
}

int builder_add_relations(struct builder *b, int64_t pkg, int type, const char *value,
			  char *err, size_t errlen)
{
	if (!value)
		return 0;
	struct rel_ctx r = { b, pkg, type, err, errlen };
	return deps_parse(value, add_atom, &r, err, errlen) ? -1 : 0;
}

int builder_set_meta(struct builder *b, const char *key, const char *value, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(b->db, "INSERT OR REPLACE INTO main.meta(key, value) VALUES (?1, ?2)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sql_fail(b, rc, err, errlen);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sql_fail(b, rc, err, errlen);
}

int builder_replace_origin(struct builder *b, const char *origin, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(b->db, "INSERT OR IGNORE INTO temp.replaced VALUES (?1)", -1, &st,
				    NULL);
	if (rc != SQLITE_OK)
		return sql_fail(b, rc, err, errlen);
	sqlite3_bind_text(st, 1, origin, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sql_fail(b, rc, err, errlen);
}

/* Copies the old database's packages that this import does not replace. */
static int keep_old(struct builder *b, char *err, size_t errlen)
{
	/* Schema 1 had no priority column. */
	const char *priority = b->old_version >= 2 ? "priority" : "''";
	static const char fmt[] =
		"CREATE TEMP TABLE keep(old INTEGER PRIMARY KEY, new INTEGER);"
		"INSERT INTO keep(old) SELECT o.id FROM old.packages o "
		" WHERE o.origin NOT IN (SELECT origin FROM temp.replaced)"
		"   AND NOT EXISTS (SELECT 1 FROM main.packages n WHERE n.name=o.name AND n.arch=o.arch);"
		"INSERT INTO main.packages(name, version, arch, origin, essential, multiarch, priority)"
		" SELECT name, version, arch, origin, essential, multiarch, %s FROM old.packages"
		" WHERE id IN (SELECT old FROM keep) ORDER BY id;"
		"UPDATE keep SET new=(SELECT n.id FROM main.packages n JOIN old.packages o"
		" ON n.name=o.name AND n.arch=o.arch WHERE o.id=keep.old);"
		"INSERT INTO main.files SELECT f.canonical, k.new, f.listed, f.kind, f.diverted"
		" FROM old.files f JOIN keep k ON k.old=f.pkg;"
		"INSERT INTO main.deps SELECT k.new, d.type, d.clause, d.alt, d.name, d.archq, d.version"
		" FROM old.deps d JOIN keep k ON k.old=d.pkg;"
		"INSERT INTO main.provides SELECT k.new, p.name, p.version"
		" FROM old.provides p JOIN keep k ON k.old=p.pkg;"
		"INSERT OR IGNORE INTO main.meta SELECT key, value FROM old.meta;";
	char sql[sizeof fmt + 16];
	snprintf(sql, sizeof sql, fmt, priority);
	if (exec(b, sql, err, errlen))
		return -1;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(b->db, "SELECT count(*) FROM keep", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			b->kept = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	return exec(b, "DROP TABLE temp.keep", err, errlen);
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

int builder_commit(struct builder *b, char *err, size_t errlen)
{
	bool attached = false;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(b->db, "SELECT 1 FROM pragma_database_list WHERE name='old'", -1, &st,
			       NULL) == SQLITE_OK) {
		attached = sqlite3_step(st) == SQLITE_ROW;
		sqlite3_finalize(st);
	}
	char ver[160];
	snprintf(ver, sizeof ver, "PRAGMA main.application_id=%d; PRAGMA main.user_version=%d",
		 REGISTRY_APPLICATION_ID, REGISTRY_SCHEMA_VERSION);
	if ((attached && keep_old(b, err, errlen)) ||
	    exec(b, registry_schema_indexes_sql, err, errlen) || exec(b, ver, err, errlen) ||
	    exec(b, "COMMIT", err, errlen))
		return -1;
	if (attached && exec(b, "DETACH old", err, errlen))
		return -1;
	sqlite3_stmt *stmts[] = { b->ins_pkg, b->ins_file, b->ins_dep, b->ins_prov };
	for (size_t i = 0; i < 4; i++)
		sqlite3_finalize(stmts[i]);
	b->ins_pkg = b->ins_file = b->ins_dep = b->ins_prov = NULL;
	sqlite3_int64 size = 0;
	unsigned char *image = sqlite3_serialize(b->db, "main", &size, 0);
	sqlite3_close(b->db);
	b->db = NULL;
	if (!image) {
		snprintf(err, errlen, "%s: out of memory writing the new database", b->target);
		return -1;
	}
	/* An unnamed file next to the target, synced, then linked and renamed
	 * over it (common/outfile.h: its mode is kept). */
	struct outfile o;
	int rc = outfile_open(&o, AT_FDCWD, b->target, -1, OUTFILE_REGULAR_ONLY, err, errlen);
	for (sqlite3_int64 off = 0; rc == 0 && off < size;) {
		ssize_t n = write(o.fd, image + off, (size_t)(size - off));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "%s: writing the new database: %s", b->target,
				 n < 0 ? strerror(errno) : "no progress");
			rc = -1;
		}
		off += n > 0 ? n : 0;
	}
	sqlite3_free(image);
	if (rc == 0 && fsync(o.fd) < 0) {
		snprintf(err, errlen, "%s: fsync: %s", b->target, strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		rc = outfile_commit(&o, err, errlen);
	else if (o.fd >= 0)
		outfile_abort(&o);
	if (rc < 0)
		return -1;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", b->target);
	fsync_path(dirname(dir), O_RDONLY | O_DIRECTORY);
	return 0;
}

void builder_abort(struct builder *b)
{
	sqlite3_stmt *stmts[] = { b->ins_pkg, b->ins_file, b->ins_dep, b->ins_prov };
	for (size_t i = 0; i < 4; i++)
		sqlite3_finalize(stmts[i]);
	b->ins_pkg = b->ins_file = b->ins_dep = b->ins_prov = NULL;
	if (b->db)
		sqlite3_close(b->db);
	b->db = NULL;
	b->tmp[0] = '\0';
}

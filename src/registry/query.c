/* Registry lookups: owners of a path, names, managed trees, dependency
 * closures, and the listings `kiln registry` prints. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/internal.h"
#include "registry/query.h"

#define LOCK(reg) pthread_mutex_lock(&(reg)->lock)
#define UNLOCK(reg) pthread_mutex_unlock(&(reg)->lock)

static int step_error(struct kiln_registry *reg, int rc)
{
	registry_sql_message(reg->db, rc, reg->path, reg->err, sizeof reg->err);
	return -1;
}

static int owners_by(struct kiln_registry *reg, sqlite3_stmt **slot, const char *sql,
		     const char *path, int64_t *ids, size_t cap)
{
	LOCK(reg);
	sqlite3_stmt *st = registry_stmt(reg, slot, sql);
	int n = -1;
	if (st) {
		sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
		int rc;
		n = 0;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			if ((size_t)n < cap)
				ids[n] = sqlite3_column_int64(st, 0);
			n++;
		}
		if (rc != SQLITE_DONE)
			n = step_error(reg, rc);
		sqlite3_reset(st);
	}
	UNLOCK(reg);
	return n;
}

int registry_owners(struct kiln_registry *reg, const char *path, int64_t *ids, size_t cap)
{
	return owners_by(reg, &reg->st_owners,
			 "SELECT DISTINCT pkg FROM files WHERE canonical=?1 ORDER BY pkg", path, ids, cap);
}

/* A package that lists entries below the path (by the canonical path or by
 * the path as that package lists it) lists it as a directory. */
int registry_link_owners(struct kiln_registry *reg, const char *path, int64_t *ids, size_t cap)
{
	return owners_by(reg, &reg->st_link_owners,
			 "SELECT DISTINCT f.pkg FROM files f WHERE f.canonical=?1 AND NOT EXISTS ("
			 " SELECT 1 FROM files g WHERE g.pkg=f.pkg AND ("
			 "  substr(coalesce(g.listed, g.canonical), 1, length(?1) + 1) = ?1 || '/' OR"
			 "  substr(coalesce(g.listed, g.canonical), 1,"
			 "         length(coalesce(f.listed, f.canonical)) + 1)"
			 "   = coalesce(f.listed, f.canonical) || '/'))"
			 " ORDER BY f.pkg",
			 path, ids, cap);
}

const char *registry_package_name(struct kiln_registry *reg, int64_t id, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	LOCK(reg);
	sqlite3_stmt *st = registry_stmt(reg, &reg->st_name, "SELECT name FROM packages WHERE id=?1");
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
		else if (rc != SQLITE_DONE)
			step_error(reg, rc);
		sqlite3_reset(st);
	}
	UNLOCK(reg);
	return buf;
}

bool registry_in_managed_tree(struct kiln_registry *reg, const char *path)
{
	char dir[PATH_MAX];
	if (path[0] != '/' || snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
		return false;
	bool found = false;
	LOCK(reg);
	sqlite3_stmt *st = registry_stmt(reg, &reg->st_dir,
					 "SELECT 1 FROM files WHERE canonical=?1 AND kind=1 LIMIT 1");
	for (char *slash = strrchr(dir, '/'); st && !found && slash && slash != dir;
	     slash = strrchr(dir, '/')) {
		*slash = '\0';
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, dir, -1, SQLITE_STATIC);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			found = true;
		else if (rc != SQLITE_DONE)
			step_error(reg, rc);
	}
	if (st)
		sqlite3_reset(st);
	UNLOCK(reg);
	return found;
}

/* ---- package sets ---------------------------------------------------- */

static size_t lower_bound(const struct registry_pkgset *set, int64_t id)
{
	size_t lo = 0, hi = set->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (set->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool registry_pkgset_has(const struct registry_pkgset *set, int64_t id)
{
	size_t i = lower_bound(set, id);
	return i < set->n && set->ids[i] == id;
}

int registry_pkgset_add(struct registry_pkgset *set, int64_t id)
{
	size_t i = lower_bound(set, id);
	if (i < set->n && set->ids[i] == id)
		return 0;
	if (set->n == set->cap) {
		size_t ncap = set->cap ? set->cap * 2 : 64;
		int64_t *n = realloc(set->ids, ncap * sizeof *n);
		if (!n)
			return -1;
		set->ids = n;
		set->cap = ncap;
	}
	memmove(set->ids + i + 1, set->ids + i, (set->n - i) * sizeof *set->ids);
	set->ids[i] = id;
	set->n++;
	return 0;
}

void registry_pkgset_free(struct registry_pkgset *set)
{
	free(set->ids);
	memset(set, 0, sizeof *set);
}

/* ---- name resolution and closure ------------------------------------- */

int registry_collect_ids(struct kiln_registry *reg, sqlite3_stmt *st, int64_t *ids, size_t cap)
{
	int n = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((size_t)n < cap)
			ids[n] = sqlite3_column_int64(st, 0);
		n++;
	}
	if (rc != SQLITE_DONE)
		n = step_error(reg, rc);
	sqlite3_reset(st);
	return n;
}

int registry_find_packages(struct kiln_registry *reg, const char *spec, int64_t *ids, size_t cap)
{
	char name[256];
	snprintf(name, sizeof name, "%s", spec);
	char *colon = strchr(name, ':');
	const char *arch = "";
	if (colon) {
		*colon = '\0';
		arch = colon + 1;
	}
	LOCK(reg);
	int n = -1;
	sqlite3_stmt *st = registry_stmt(reg, &reg->st_resolve_arch,
					 "SELECT id FROM packages WHERE name=?1 AND "
					 "(?2 IN ('', 'any', 'native') OR arch=?2) ORDER BY id");
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, arch, -1, SQLITE_TRANSIENT);
		n = registry_collect_ids(reg, st, ids, cap);
	}
	UNLOCK(reg);
	return n;
}

int registry_satisfiers(struct kiln_registry *reg, const char *name, const char *archq,
			int64_t *ids, size_t cap)
{
	LOCK(reg);
	int n = -1;
	sqlite3_stmt *st = registry_stmt(
		reg, &reg->st_resolve,
		"SELECT id FROM packages WHERE name=?1 AND "
		"(?2 IN ('', 'any', 'native') OR arch=?2 OR arch='all') "
		"UNION SELECT pkg FROM provides WHERE name=?1");
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, archq ? archq : "", -1, SQLITE_TRANSIENT);
		n = registry_collect_ids(reg, st, ids, cap);
	}
	UNLOCK(reg);
	return n;
}

void registry_unknown_name(const struct kiln_registry *reg, const char *name, char *err,
			   size_t errlen)
{
	snprintf(err, errlen,
		 "unknown package '%s' (not installed and not provided by any installed package "
		 "in %s)",
		 name, reg->path);
}

int registry_queue_push(struct registry_queue *q, struct registry_pkgset *seen, int64_t id)
{
	if (registry_pkgset_has(seen, id))
		return 0;
	if (registry_pkgset_add(seen, id))
		return -1;
	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 256;
		int64_t *n = realloc(q->v, ncap * sizeof *n);
		if (!n)
			return -1;
		q->v = n;
		q->cap = ncap;
	}
	q->v[q->n++] = id;
	return 0;
}


/* ---- listings -------------------------------------------------------- */

static void copy_col(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

/* Runs `sql` with ?1 = id through a fresh statement (so callbacks may query
 * the registry again) and calls row(st, ctx) per row. */
static int each_row(struct kiln_registry *reg, const char *sql, int64_t id,
		    int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
	sqlite3_stmt *st;
	LOCK(reg);
	int rc = sqlite3_prepare_v2(reg->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		step_error(reg, rc);
		UNLOCK(reg);
		return -1;
	}
	sqlite3_bind_int64(st, 1, id);
	int ret = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((ret = row(st, ctx)))
			break;
	if (!ret && rc != SQLITE_DONE)
		ret = step_error(reg, rc);
	sqlite3_finalize(st);
	UNLOCK(reg);
	return ret;
}

static int package_row(sqlite3_stmt *st, void *ctx)
{
	struct registry_package *p = ctx;
	p->id = sqlite3_column_int64(st, 0);
	copy_col(p->name, sizeof p->name, st, 1);
	copy_col(p->version, sizeof p->version, st, 2);
	copy_col(p->arch, sizeof p->arch, st, 3);
	copy_col(p->origin, sizeof p->origin, st, 4);
	p->essential = sqlite3_column_int(st, 5);
	copy_col(p->multiarch, sizeof p->multiarch, st, 6);
	copy_col(p->priority, sizeof p->priority, st, 7);
	return 1;
}

int registry_get_package(struct kiln_registry *reg, int64_t id, struct registry_package *out)
{
	int rc = each_row(reg,
			  "SELECT id, name, version, arch, origin, essential, multiarch, priority "
			  "FROM packages WHERE id=?1",
			  id, package_row, out);
	return rc == 1 ? 0 : rc == 0 ? 1 : -1;
}

struct file_ctx {
	registry_file_cb cb;
	void *ctx;
};

static int file_row(sqlite3_stmt *st, void *ctx)
{
	struct file_ctx *f = ctx;
	const char *canonical = (const char *)sqlite3_column_text(st, 0);
	const char *listed = (const char *)sqlite3_column_text(st, 1);
	return f->cb(f->ctx, listed ? listed : canonical, canonical, sqlite3_column_int(st, 2),
		     sqlite3_column_int(st, 3));
}

int registry_each_file(struct kiln_registry *reg, int64_t id, registry_file_cb cb, void *ctx)
{
	struct file_ctx f = { cb, ctx };
	return each_row(reg,
			"SELECT canonical, listed, kind, diverted FROM files WHERE pkg=?1 "
			"ORDER BY coalesce(listed, canonical)",
			id, file_row, &f);
}

struct dep_ctx {
	registry_dep_cb cb;
	void *ctx;
};

static int dep_row(sqlite3_stmt *st, void *ctx)
{
	struct dep_ctx *d = ctx;
	struct registry_dep dep = {
		.type = sqlite3_column_int(st, 0),
		.clause = sqlite3_column_int(st, 1),
		.alt = sqlite3_column_int(st, 2),
		.name = (const char *)sqlite3_column_text(st, 3),
		.archq = (const char *)sqlite3_column_text(st, 4),
		.version = (const char *)sqlite3_column_text(st, 5),
	};
	return d->cb(d->ctx, &dep);
}

int registry_each_dep(struct kiln_registry *reg, int64_t id, registry_dep_cb cb, void *ctx)
{
	struct dep_ctx d = { cb, ctx };
	return each_row(reg,
			"SELECT type, clause, alt, name, archq, version FROM deps WHERE pkg=?1 "
			"ORDER BY type DESC, clause, alt",
			id, dep_row, &d);
}

struct prov_ctx {
	registry_provides_cb cb;
	void *ctx;
};

static int prov_row(sqlite3_stmt *st, void *ctx)
{
	struct prov_ctx *p = ctx;
	return p->cb(p->ctx, (const char *)sqlite3_column_text(st, 0),
		     (const char *)sqlite3_column_text(st, 1));
}

int registry_each_provides(struct kiln_registry *reg, int64_t id, registry_provides_cb cb, void *ctx)
{
	struct prov_ctx p = { cb, ctx };
	return each_row(reg, "SELECT name, version FROM provides WHERE pkg=?1 ORDER BY name", id,
			prov_row, &p);
}

struct name_ctx {
	registry_name_cb cb;
	void *ctx;
};

static int name_row(sqlite3_stmt *st, void *ctx)
{
	struct name_ctx *n = ctx;
	const char *name = (const char *)sqlite3_column_text(st, 0);
	return name ? n->cb(n->ctx, name) : 0;
}

int registry_each_package_name(struct kiln_registry *reg, registry_name_cb cb, void *ctx)
{
	struct name_ctx n = { cb, ctx };
	return each_row(reg, "SELECT DISTINCT name FROM packages WHERE ?1=?1 ORDER BY name", 0, name_row,
			&n);
}

static int set_row(sqlite3_stmt *st, void *ctx)
{
	return registry_pkgset_add(ctx, sqlite3_column_int64(st, 0)) ? -1 : 0;
}

int registry_rdeps(struct kiln_registry *reg, int64_t id, struct registry_pkgset *out)
{
	memset(out, 0, sizeof *out);
	int rc = each_row(reg,
			  "SELECT DISTINCT d.pkg FROM deps d WHERE d.name IN "
			  "(SELECT name FROM packages WHERE id=?1 UNION "
			  " SELECT name FROM provides WHERE pkg=?1)",
			  id, set_row, out);
	if (rc) {
		registry_pkgset_free(out);
		return -1;
	}
	return 0;
}

static int int64_row(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 1;
}

static int text_row(sqlite3_stmt *st, void *ctx)
{
	char **dst = ctx;
	copy_col(dst[0], (size_t)(dst[1] - dst[0]), st, 0);
	return 1;
}

static int meta_get(struct kiln_registry *reg, const char *key, char *buf, size_t len)
{
	char sql[128];
	buf[0] = '\0';
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key='%s' AND ?1=?1", key);
	char *span[2] = { buf, buf + len };
	return each_row(reg, sql, 0, text_row, span) < 0 ? -1 : 0;
}

int registry_meta(struct kiln_registry *reg, const char *key, char *buf, size_t len)
{
	return meta_get(reg, key, buf, len);
}

int registry_get_stats(struct kiln_registry *reg, struct registry_stats *s)
{
	memset(s, 0, sizeof *s);
	static const struct {
		const char *sql;
		size_t off;
	} counts[] = {
		{ "SELECT count(*) FROM packages WHERE ?1=?1", offsetof(struct registry_stats, packages) },
		{ "SELECT count(*) FROM packages WHERE essential=1 AND ?1=?1",
		  offsetof(struct registry_stats, essential) },
		{ "SELECT count(*) FROM packages WHERE priority='required' AND ?1=?1",
		  offsetof(struct registry_stats, required) },
		{ "SELECT count(*) FROM files WHERE ?1=?1", offsetof(struct registry_stats, file_rows) },
		{ "SELECT count(*) FROM (SELECT DISTINCT canonical FROM files) WHERE ?1=?1",
		  offsetof(struct registry_stats, paths) },
		{ "SELECT count(*) FROM deps WHERE ?1=?1", offsetof(struct registry_stats, deps) },
		{ "SELECT count(*) FROM provides WHERE ?1=?1", offsetof(struct registry_stats, provides) },
		{ "SELECT count(*) FROM files WHERE diverted=1 AND ?1=?1",
		  offsetof(struct registry_stats, diverted) },
	};
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
		if (each_row(reg, counts[i].sql, 0, int64_row, (char *)s + counts[i].off) < 0)
			return -1;
	int64_t ver = 0;
	if (each_row(reg, "PRAGMA user_version", 0, int64_row, &ver) < 0)
		return -1;
	s->schema_version = (int)ver;
	if (meta_get(reg, "dpkg_root", s->dpkg_root, sizeof s->dpkg_root) ||
	    meta_get(reg, "dpkg_imported_at", s->dpkg_imported_at, sizeof s->dpkg_imported_at) ||
	    meta_get(reg, "manifest_imported_at", s->manifest_imported_at,
		     sizeof s->manifest_imported_at))
		return -1;
	return 0;
}

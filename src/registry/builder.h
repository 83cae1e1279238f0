/* Builds a new registry database in memory: bulk inserts in one transaction
 * with indexes created at the end; the commit writes its image to an unnamed
 * file next to the target, fsyncs it and renames it over the target
 * (common/outfile.h), so a failed or killed import leaves nothing behind. */
#ifndef KILN_REGISTRY_BUILDER_H
#define KILN_REGISTRY_BUILDER_H

#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct builder {
	sqlite3 *db;
	char target[PATH_MAX];
	char tmp[PATH_MAX];   /* how messages name the database being built */
	sqlite3_stmt *ins_pkg, *ins_file, *ins_dep, *ins_prov;
	long kept;
	int old_version; /* schema version of the database being replaced, 0 if none */
};

struct builder_package {
	const char *name, *version, *arch, *multiarch, *origin;
	const char *priority; /* dpkg Priority ("required", ...), or NULL */
	bool essential;
};

int builder_begin(struct builder *b, const char *target, char *err, size_t errlen);
/* Returns the new package id, 0 if (name, arch) was already added, -1 on error. */
int64_t builder_add_package(struct builder *b, const struct builder_package *p, char *err, size_t errlen);
int builder_add_file(struct builder *b, int64_t pkg, const char *listed, const char *canonical,
		     int kind, bool diverted, char *err, size_t errlen);
struct builder_dir {
	int64_t pkg;
	const char *listed, *canonical;
};
/* Adds each directory dirs[i].canonical as pkg's (listed as dirs[i].listed)
 * unless a file row added so far already has that canonical path. */
int builder_add_unowned_dirs(struct builder *b, const struct builder_dir *dirs, size_t n, char *err,
			     size_t errlen);
/* Parses a relationship field and stores its atoms (type: 0 Depends,
 * 1 Pre-Depends, -1 Provides). Errors are "cause" only: the caller names the
 * file and line. */
int builder_add_relations(struct builder *b, int64_t pkg, int type, const char *value,
			  char *err, size_t errlen);
/* Packages of this origin in the old database are replaced, not kept. */
int builder_replace_origin(struct builder *b, const char *origin, char *err, size_t errlen);
int builder_set_meta(struct builder *b, const char *key, const char *value, char *err, size_t errlen);
/* Keeps packages of other origins from the old target, creates indexes,
 * commits, renames over the target. On failure the target is untouched. */
int builder_commit(struct builder *b, char *err, size_t errlen);
/* Discards the temporary database. Safe after a failed or successful commit. */
void builder_abort(struct builder *b);

#endif

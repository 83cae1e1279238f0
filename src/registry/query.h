/* Registry queries beyond the trace service's API (registry.h): what the
 * `kiln registry` command and the tests use. */
#ifndef KILN_REGISTRY_QUERY_H
#define KILN_REGISTRY_QUERY_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"

/* The message of the last failed call on this handle (names the database). */
const char *registry_errmsg(const struct kiln_registry *reg);
const char *registry_path(const struct kiln_registry *reg);

struct registry_package {
	int64_t id;
	char name[128];
	char version[128];
	char arch[32];
	char multiarch[32];
	char priority[32]; /* "required", "important", ..., or "" */
	char origin[PATH_MAX];
	bool essential;
};

/* 0, 1 if there is no such package, -1 on a database error. */
int registry_get_package(struct kiln_registry *reg, int64_t id, struct registry_package *out);

/* Installed packages named `spec` ("name" or "name:arch"). Returns how many
 * (ids filled up to cap), -1 on error. */
int registry_find_packages(struct kiln_registry *reg, const char *spec, int64_t *ids, size_t cap);

/* Packages that satisfy a dependency on `name` with arch qualifier `archq`
 * ("" / "any" / "native" / an architecture): packages of that name and
 * packages that Provide it. Returns how many, -1 on error. */
int registry_satisfiers(struct kiln_registry *reg, const char *name, const char *archq,
			int64_t *ids, size_t cap);

typedef int (*registry_file_cb)(void *ctx, const char *listed, const char *canonical, int kind,
				bool diverted);
/* Calls cb for each file of package id, sorted by listed path. A non-zero
 * return from cb stops and is returned; -1 on a database error. */
int registry_each_file(struct kiln_registry *reg, int64_t id, registry_file_cb cb, void *ctx);

struct registry_dep {
	int type; /* 0 Depends, 1 Pre-Depends */
	int clause, alt;
	const char *name, *archq, *version;
};
typedef int (*registry_dep_cb)(void *ctx, const struct registry_dep *dep);
int registry_each_dep(struct kiln_registry *reg, int64_t id, registry_dep_cb cb, void *ctx);

typedef int (*registry_provides_cb)(void *ctx, const char *name, const char *version);
int registry_each_provides(struct kiln_registry *reg, int64_t id, registry_provides_cb cb, void *ctx);

typedef int (*registry_name_cb)(void *ctx, const char *name);
/* Calls cb for each installed package's name once (several architectures:
 * one call), sorted. A non-zero return from cb stops and is returned; -1 on
 * a database error. */
int registry_each_package_name(struct kiln_registry *reg, registry_name_cb cb, void *ctx);

/* Packages with a Depends/Pre-Depends on package id (by its name or a name it
 * Provides). Returns 0 or -1. */
int registry_rdeps(struct kiln_registry *reg, int64_t id, struct registry_pkgset *out);

struct registry_stats {
	int64_t packages, essential, required, file_rows, paths, deps, provides, diverted;
	int schema_version;
	char dpkg_root[PATH_MAX], dpkg_imported_at[64], manifest_imported_at[64];
};
int registry_get_stats(struct kiln_registry *reg, struct registry_stats *st);

/* Value of the meta table's KEY into buf ("" when absent, e.g. "dpkg_root",
 * "dpkg_state"). Returns 0 or -1. */
int registry_meta(struct kiln_registry *reg, const char *key, char *buf, size_t len);

/* Adds id to a set (kept sorted). Returns 0 or -1 (out of memory). */
int registry_pkgset_add(struct registry_pkgset *set, int64_t id);

#endif

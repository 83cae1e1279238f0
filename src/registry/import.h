/* Importers: build a new registry database next to the target and rename it
 * over the target, so a reader sees the old database or the new one, never a
 * half-imported one. An import replaces the packages of its own origin (a
 * dpkg import replaces every dpkg package; a manifest import replaces the
 * packages of the same manifest files) and any package of the same name and
 * architecture; packages of other origins are kept. */
#ifndef KILN_REGISTRY_IMPORT_H
#define KILN_REGISTRY_IMPORT_H

#include <stddef.h>

struct registry_import_opts {
	const char *root; /* tree the files live in; NULL or "/" = this system */
	/* Non-fatal problems (a missing .list file, as dpkg itself tolerates). */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

struct registry_import_result {
	long packages;      /* packages imported by this import */
	long skipped;       /* stanzas not installed (config-files, half-installed, ...) */
	long files;         /* file rows imported */
	long diverted;      /* file rows moved by a diversion */
	long missing_lists; /* installed packages without a .list file */
	long kept;          /* packages of other origins kept from the old database */
};

/* Imports the dpkg database of opts->root (ROOT/var/lib/dpkg): status,
 * info/PKG[:ARCH].list and diversions. Returns 0, or -1 with a message naming
 * the file (and line) in err; on failure the target is untouched. */
int registry_import_dpkg(const char *dbpath, const struct registry_import_opts *opts,
			 struct registry_import_result *res, char *err, size_t errlen);

/* Imports kiln manifest files (format: docs/registry.md). */
int registry_import_manifests(const char *dbpath, const char *const *files, size_t nfiles,
			      const struct registry_import_opts *opts,
			      struct registry_import_result *res, char *err, size_t errlen);

#endif

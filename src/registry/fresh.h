/* Is the registry as new as the dpkg database it was imported from? A dpkg
 * import records the state of ROOT/var/lib/dpkg it read (meta "dpkg_state":
 * the status file's mtime and size, the info/ directory's mtime; any
 * install, removal or upgrade changes at least one); kiln trace compares it
 * with the database now and re-imports when they differ, or when the
 * import was made by rules older than this kiln's. */
#ifndef KILN_REGISTRY_FRESH_H
#define KILN_REGISTRY_FRESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What a dpkg import makes of the same dpkg database, by version (meta
 * "dpkg_import_rules"): a registry imported by an older kiln is stale.
 * 2: a directory reached through a listed symlink (docs/registry.md). */
#define REGISTRY_DPKG_RULES 2

/* "status MTIME_NS SIZE info MTIME_NS" of ROOT ("" or "/" = this system).
 * Returns 0, or -1 with errno (no status file). */
int registry_dpkg_state(const char *root, char *out, size_t len);

enum registry_freshness {
	REGISTRY_FRESH = 0,   /* same dpkg state, or no dpkg import in the database */
	REGISTRY_STALE = 1,   /* dpkg changed since (why says what) */
	REGISTRY_UNKNOWN = -1, /* the database cannot be read: left to its user to report */
};

/* Compares database DB with the dpkg database it was imported from; root
 * gets that import's root. */
enum registry_freshness registry_dpkg_freshness(const char *db, char *root, size_t rootlen,
						char *why, size_t whylen);

/* kiln trace's policy: when DB is stale, re-imports it (REFRESH) with a
 * one-line note on MSGS, or warns. Returns 0, or -1 when a re-import
 * failed (reported on MSGS). PROG prefixes messages ("kiln trace"). */
int registry_refresh_if_stale(const char *db, bool refresh, const char *prog, FILE *msgs);

#endif

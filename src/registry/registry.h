/* The package registry: file -> owning package(s), package -> dependencies.
 *
 * This is the C API the trace service uses (and the `kiln registry` command
 * is built on). Paths given to lookups are canonical: absolute, normalised,
 * every directory component resolved through symlinks, the last component
 * NOT followed (so a symlink is looked up as itself). The registry stores,
 * for each listed file, both the listed path and this canonical path
 * (Debian's merged /usr: /bin/bash is listed, /usr/bin/bash is canonical).
 */
#ifndef KILN_REGISTRY_H
#define KILN_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A handle may be shared by threads (calls are serialised inside it). Package
 * ids are stable for the life of a handle; a re-import builds a new file with
 * new ids, which handles opened before it do not see. Failures of these calls
 * are described by registry_errmsg() (registry/query.h). */
struct kiln_registry;

enum registry_open_flags {
	REGISTRY_RDONLY = 0,
	REGISTRY_RDWR = 1,   /* create the database (and its schema) if absent */
	/* Read-only, and read once: the file is copied into sealed memory at
	 * open, so nothing done to the file afterwards (a build rewriting it
	 * in place or through a hard link) changes what the handle answers. */
	REGISTRY_SNAPSHOT = 2,
	/* As REGISTRY_SNAPSHOT, but the copy is taken by a thread while the
	 * handle answers from the file under SQLite's shared lock (no SQLite
	 * writer can commit meanwhile); registry_snapshot_finish() moves the
	 * handle onto the copy, and must be called before anything that may
	 * rewrite the file runs (for kiln trace: before the build starts). */
	REGISTRY_SNAPSHOT_LATER = 4,
	/* With REGISTRY_SNAPSHOT_LATER: rather than copying the file, hold it
	 * under a read lease (fcntl F_SETLEASE) and answer from it under
	 * SQLite's shared lock. Nobody can then open the file for writing or
	 * truncate it before this process is told (SIGIO) and has taken the
	 * copy: the caller blocks SIGIO before opening and calls
	 * registry_snapshot_take() when it arrives. Where no lease can be had
	 * (the file open for writing, another owner's, a file system without
	 * leases, a short lease-break-time, SIGIO not blocked, a WAL
	 * database), the copy is taken as without this flag. */
	REGISTRY_SNAPSHOT_LEASE = 8,
};

enum registry_kind {
	REGISTRY_KIND_FILE = 0,
	REGISTRY_KIND_DIR = 1,
	REGISTRY_KIND_SYMLINK = 2,
};

/* The default database path: $KILN_DB if set, else
 * $XDG_CACHE_HOME/kiln/registry.db (or ~/.cache/kiln/registry.db). */
const char *registry_default_path(char *buf, size_t len);

/* Opens (RDONLY: must exist; RDWR: creates and migrates). On failure returns
 * NULL with a message naming the file and cause in err. */
struct kiln_registry *registry_open(const char *path, int flags, char *err, size_t errlen);
void registry_close(struct kiln_registry *reg);

/* Waits for the copy a REGISTRY_SNAPSHOT_LATER handle is taking and moves
 * the handle onto it (nothing to do for any other handle). 0, or -1 with a
 * message naming the file in err: the handle is then not usable. */
int registry_snapshot_finish(struct kiln_registry *reg, char *err, size_t errlen);

/* A REGISTRY_SNAPSHOT_LEASE handle on the file under its lease: takes the
 * copy now, moves the handle onto it and gives the lease up (the writer
 * waiting for it goes on). Nothing to do for any other handle. 0, or -1
 * with a message in err: the file changed before the copy was taken (the
 * kernel broke the lease after lease-break-time), or the copy failed; the
 * handle's answers can then no longer be vouched for. */
int registry_snapshot_take(struct kiln_registry *reg, char *err, size_t errlen);

/* False if the handle read its file under a lease the kernel broke by
 * itself (after lease-break-time): what it read may not be the registry it
 * started with. A lease being broken is given up after the copy is taken
 * (registry_snapshot_take). True for every other handle. */
bool registry_snapshot_intact(struct kiln_registry *reg);

enum registry_snapshot_kind {
	REGISTRY_SNAPSHOT_NONE,    /* the file itself */
	REGISTRY_SNAPSHOT_COPY,    /* a sealed copy taken at open */
	REGISTRY_SNAPSHOT_LEASED,  /* the file under a read lease */
	REGISTRY_SNAPSHOT_COPY_AFTER_LEASE, /* a copy taken when a writer came */
};
enum registry_snapshot_kind registry_snapshot_kind(const struct kiln_registry *reg);

/* Package ids of every package that lists canonical path `path` (a regular
 * file normally has one owner, a directory many). Writes up to `cap` ids into
 * `ids` and returns the total number of owners (may exceed cap): 0 if the
 * registry does not know the path, -1 on a database error. */
int registry_owners(struct kiln_registry *reg, const char *path, int64_t *ids, size_t cap);

/* The same, of the owners that list nothing below `path`: of a symlink to a
 * directory, the packages that ship it as a symlink, not those that list it
 * as a directory (merged /usr's /lib, listed by the packages whose files
 * were under /lib before the merge). */
int registry_link_owners(struct kiln_registry *reg, const char *path, int64_t *ids, size_t cap);

/* Name of package `id` into buf ("" if unknown). Returns buf. */
const char *registry_package_name(struct kiln_registry *reg, int64_t id, char *buf, size_t len);

/* True if `path` (canonical) lies inside a tree the registry manages, i.e. some
 * ancestor directory of it is listed by a package. Used to report unknown
 * files in managed trees. "/" itself does not count (base-files lists it, so
 * every path would be managed); /tmp, /home, /var/tmp do (base-files lists
 * them too), so callers should exclude their writable areas first. */
bool registry_in_managed_tree(struct kiln_registry *reg, const char *path);

/* A set of package ids, sorted, for fast membership tests. */
struct registry_pkgset {
	int64_t *ids;
	size_t n, cap;
};

/* The dependency closure of `names` (Depends and Pre-Depends, alternatives
 * resolved to whichever installed alternatives exist, virtual packages through
 * Provides). With `with_essential`, every package marked Essential: yes (and
 * its own closure) is included, as Debian policy says build environments
 * have them. Unknown names are an error naming the package. Returns 0, or -1
 * with a message in err. */
int registry_closure(struct kiln_registry *reg, const char *const *names, size_t n,
		     bool with_essential, struct registry_pkgset *out, char *err, size_t errlen);

/* How a closure resolves alternatives and virtual packages (docs/profiles.md). */
enum registry_profile {
	/* Everything installed that the build could use: every installed
	 * alternative of a clause, every provider; base set = Essential. */
	REGISTRY_PROFILE_HOST = 0,
	/* What a clean buildd chroot holds: per clause the alternative apt
	 * would install (none if the closure already satisfies it, else the
	 * first one something installed satisfies), a virtual package's
	 * first provider by Priority, Essential and name; base set =
	 * Essential + Priority: required + apt + build-essential and their
	 * closure, computed before the requested names. */
	REGISTRY_PROFILE_CHROOT = 1,
};

/* The clean-chroot closure of `names` (with_base: on top of the base set).
 * Unknown names are an error, as for registry_closure(). */
int registry_closure_chroot(struct kiln_registry *reg, const char *const *names, size_t n,
			    bool with_base, struct registry_pkgset *out, char *err, size_t errlen);

/* registry_closure() (with_base = with_essential) or registry_closure_chroot(). */
int registry_closure_profile(struct kiln_registry *reg, enum registry_profile profile,
			     const char *const *names, size_t n, bool with_base,
			     struct registry_pkgset *out, char *err, size_t errlen);

/* How many packages have Priority: required (0 for a registry imported
 * before schema 2, or from manifests without Priority), -1 on error. */
int64_t registry_count_required(struct kiln_registry *reg);

bool registry_pkgset_has(const struct registry_pkgset *set, int64_t id);
void registry_pkgset_free(struct registry_pkgset *set);

#endif

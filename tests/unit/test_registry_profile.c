/* The clean-chroot profile against the host profile, on a registry imported
 * from a synthetic dpkg status: the base set from Priority fields,
 * alternatives where both are installed, virtual packages with two
 * providers, the Build-Depends groups of a control file, and a snapshot
 * handle (whose base set is worked out once) giving the same closures. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/import.h"
#include "registry/query.h"
#include "registry/registry.h"
#include "trace/service/control.h"
#include "trace/service/deps.h"
#include "trace/service/unused.h"

static char dir[PATH_MAX], db[PATH_MAX + 32];
static struct kiln_registry *reg;
static char err[2048];

/* One stanza per package: name, Priority, Essential, relationship fields. */
static const char status_text[] =
#define PKG(name, prio, rest)                                                              \
	"Package: " name "\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n" \
	"Priority: " prio "\n" rest "\n"
	PKG("base-files", "required", "Essential: yes\n")
	PKG("dash", "required", "Essential: yes\nPre-Depends: libc6\n")
	PKG("libc6", "optional", "Depends: libgcc-s1\n")
	PKG("libgcc-s1", "optional", "Depends: libc6\n")
	PKG("mawk", "required", "Provides: awk\nPre-Depends: libc6\n")
	PKG("gawk", "optional", "Provides: awk\nDepends: libc6\n")
	PKG("tzdata", "required", "Depends: debconf (>= 0.5) | debconf-2.0\n")
	PKG("debconf", "required", "")
	PKG("cdebconf", "optional", "Provides: debconf-2.0\n")
	PKG("apt", "required", "Depends: libc6\n")
	PKG("build-essential", "optional", "Depends: gcc | c-compiler, make\n")
	PKG("gcc", "optional", "Provides: c-compiler\nDepends: libc6\n")
	PKG("clang", "optional", "Provides: c-compiler\nDepends: libllvm\n")
	PKG("libllvm", "optional", "")
	PKG("make", "optional", "")
	PKG("libssl-dev", "optional", "")
	PKG("libgnutls-dev", "optional", "")
	PKG("app-dev", "optional", "Depends: awk, libssl-dev | libgnutls-dev\n")
	PKG("awkuser", "optional", "Depends: gawk | mawk\n")
	PKG("postfix", "optional", "Provides: mail-transport-agent\n")
	PKG("exim4-daemon-light", "standard", "Provides: mail-transport-agent\n")
	PKG("w3m", "optional", "Provides: www-browser\n")
	PKG("lynx", "optional", "Provides: www-browser\n")
	PKG("locales-all", "optional", "")
	PKG("libq", "optional", "")
	PKG("libq-alt", "optional", "")
	PKG("uses-foreign", "optional", "Depends: libq:i386 | libq-alt\n")
	PKG("uses-native", "optional", "Depends: libq\n")
#undef PKG
	;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void quiet(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-profile-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/var", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/var/lib", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/var/lib/dpkg", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/var/lib/dpkg/info", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/var/lib/dpkg/status", dir);
	write_file(path, status_text);
	snprintf(db, sizeof db, "%s/reg.db", dir);
	struct registry_import_opts io = { .root = dir, .warn = quiet };
	struct registry_import_result res;
	if (registry_import_dpkg(db, &io, &res, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
	return reg ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	registry_close(reg);
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

/* The closure as "a,b,c", sorted by name. */
static const char *names_of(const struct registry_pkgset *set)
{
	static char buf[2048];
	char names[64][128];
	size_t n = set->n < 64 ? set->n : 64;
	for (size_t i = 0; i < n; i++)
		registry_package_name(reg, set->ids[i], names[i], sizeof names[i]);
	qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "," : "", names[i]);
	return buf;
}

static const char *closure_in(struct kiln_registry *h, enum registry_profile profile, bool base,
			      const char *name)
{
	struct registry_pkgset set = { 0 };
	const char *names[] = { name };
	assert_int_equal(registry_closure_profile(h, profile, names, name ? 1 : 0, base, &set,
						  err, sizeof err),
			 0);
	const char *r = names_of(&set);
	registry_pkgset_free(&set);
	return r;
}

static const char *closure(enum registry_profile profile, bool base, const char *name)
{
	return closure_in(reg, profile, base, name);
}

#define CHROOT REGISTRY_PROFILE_CHROOT
#define HOST REGISTRY_PROFILE_HOST

static void base_set_from_priority(void **state)
{
	(void)state;
	/* debootstrap --variant=buildd: Priority: required + apt +
	 * build-essential, each with what apt installs for it. */
	assert_string_equal(closure(CHROOT, true, NULL),
			    "apt,base-files,build-essential,dash,debconf,gcc,libc6,libgcc-s1,"
			    "make,mawk,tzdata");
	/* The host profile's base is the Essential packages only. */
	assert_string_equal(closure(HOST, true, NULL), "base-files,dash,libc6,libgcc-s1");
	assert_int_equal(registry_count_required(reg), 6);
}

static void alternatives_both_installed(void **state)
{
	(void)state;
	/* debconf | debconf-2.0: debconf, though cdebconf provides the second. */
	assert_string_equal(closure(CHROOT, false, "tzdata"), "debconf,tzdata");
	assert_string_equal(closure(HOST, false, "tzdata"), "cdebconf,debconf,tzdata");
	/* gcc | c-compiler: gcc, not clang and its libllvm. */
	assert_string_equal(closure(CHROOT, false, "build-essential"),
			    "build-essential,gcc,libc6,libgcc-s1,make");
	assert_string_equal(closure(HOST, false, "build-essential"),
			    "build-essential,clang,gcc,libc6,libgcc-s1,libllvm,make");
	assert_string_equal(closure(CHROOT, false, "app-dev"),
			    "app-dev,libc6,libgcc-s1,libssl-dev,mawk");
	/* A clause the closure already satisfies adds nothing: with the base
	 * set, mawk is there before awkuser's "gawk | mawk" is looked at. */
	assert_string_equal(closure(CHROOT, false, "awkuser"), "awkuser,gawk,libc6,libgcc-s1");
	const char *with_base = closure(CHROOT, true, "awkuser");
	assert_non_null(strstr(with_base, "awkuser,"));
	assert_null(strstr(with_base, "gawk"));
}

static void virtual_with_two_providers(void **state)
{
	(void)state;
	/* Higher Priority first (standard over optional)... */
	assert_string_equal(closure(CHROOT, false, "mail-transport-agent"), "exim4-daemon-light");
	/* ... then name order among equals. */
	assert_string_equal(closure(CHROOT, false, "www-browser"), "lynx");
	assert_string_equal(closure(HOST, false, "www-browser"), "lynx,w3m");
	/* awk: mawk (required) over gawk (optional). */
	assert_string_equal(closure(CHROOT, false, "awk"), "libc6,libgcc-s1,mawk");
	/* A virtual name the base set already provides adds nothing. */
	char base[2048];
	snprintf(base, sizeof base, "%s", closure(CHROOT, true, NULL));
	assert_string_equal(closure(CHROOT, true, "awk"), base);
	struct registry_pkgset set = { 0 };
	const char *names[] = { "no-such-thing" };
	assert_int_equal(registry_closure_chroot(reg, names, 1, true, &set, err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown package 'no-such-thing'"));
}

static void build_depends_groups(void **state)
{
	(void)state;
	struct dep_list control = { 0 };
	assert_int_equal(deps_parse_field("clang | gcc, libgnutls-dev | libssl-dev, nothere | "
					  "www-browser, missing",
					  "amd64", NULL, &control, err, sizeof err),
			 0);
	char *warnings = NULL;
	size_t wlen = 0;
	FILE *warn = open_memstream(&warnings, &wlen);
	struct registry_pkgset set = { 0 };
	const char **declared;
	size_t nd;
	assert_int_equal(trace_deps_closure_named(reg, CHROOT, NULL, 0, &control, warn, &set,
						  &declared, &nd, err, sizeof err),
			 0);
	fclose(warn);
	/* sbuild's apt resolver takes the first alternative: clang, even though
	 * gcc (build-essential's choice) is in too. */
	assert_int_equal(nd, 4);
	assert_string_equal(declared[0], "clang");
	assert_string_equal(declared[1], "libgnutls-dev");
	assert_string_equal(declared[2], "www-browser");
	assert_string_equal(declared[3], "build-essential");
	const char *got = names_of(&set);
	assert_string_equal(got, "apt,base-files,build-essential,clang,dash,debconf,gcc,"
				 "libc6,libgcc-s1,libgnutls-dev,libllvm,lynx,make,mawk,tzdata");
	assert_non_null(strstr(warnings, "Build-Depends: missing is not installed"));
	assert_null(strstr(warnings, "Priority"));
	free(warnings);
	free(declared);
	registry_pkgset_free(&set);
	dep_list_free(&control);
}

/* The report asks one closure per declared name (unused Build-Depends):
 * on a snapshot the base set is followed once and reused. Every closure,
 * in any order, first or later, is the one a fresh handle works out. */
static const char *const snap_names[] = { "awkuser", NULL, "awk", "tzdata", "app-dev",
					   "build-essential", "www-browser", "awkuser",
					   "uses-foreign", "libq", "uses-native" };

/* Every closure of snap_names under `profile` on the snapshot (in order,
 * twice, with and without the base set, the profiles interleaved when
 * `both`) equals a fresh handle's. */
static void snapshot_closures_match(struct kiln_registry *snap, enum registry_profile profile,
				    bool both)
{
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < sizeof snap_names / sizeof snap_names[0]; i++)
			for (int base = 1; base >= 0; base--) {
				char want[2048];
				snprintf(want, sizeof want, "%s", closure(profile, base, snap_names[i]));
				assert_string_equal(closure_in(snap, profile, base, snap_names[i]), want);
				if (!both)
					continue;
				enum registry_profile other = profile == HOST ? CHROOT : HOST;
				snprintf(want, sizeof want, "%s", closure(other, base, snap_names[i]));
				assert_string_equal(closure_in(snap, other, base, snap_names[i]), want);
			}
}

static void snapshot_reuses_the_base_set(void **state)
{
	(void)state;
	struct kiln_registry *snap = registry_open(db, REGISTRY_SNAPSHOT, err, sizeof err);
	assert_non_null(snap);
	snapshot_closures_match(snap, CHROOT, false);
	/* gawk is not in: mawk, from the reused base set, satisfies "gawk | mawk". */
	assert_null(strstr(closure_in(snap, CHROOT, true, "awkuser"), "gawk"));
	struct registry_pkgset set = { 0 };
	const char *bad[] = { "no-such-thing" };
	assert_int_equal(registry_closure_chroot(snap, bad, 1, true, &set, err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown package 'no-such-thing'"));
	char want[2048];
	snprintf(want, sizeof want, "%s", closure(CHROOT, true, NULL));
	assert_string_equal(closure_in(snap, CHROOT, true, NULL), want);
	registry_close(snap);
}

/* The host profile's closures on a snapshot share the kept answers and
 * Essential's closure: the same sets as a fresh handle's, alone and
 * interleaved with the chroot profile's (both keep answers in one table,
 * each its own base set). */
static void snapshot_host_closures(void **state)
{
	(void)state;
	for (int both = 0; both < 2; both++) {
		struct kiln_registry *snap = registry_open(db, REGISTRY_SNAPSHOT, err, sizeof err);
		assert_non_null(snap);
		snapshot_closures_match(snap, HOST, both);
		/* every alternative and provider: gawk and mawk both, lynx and w3m */
		assert_non_null(strstr(closure_in(snap, HOST, true, "awkuser"), "gawk"));
		assert_string_equal(closure_in(snap, HOST, false, "www-browser"), "lynx,w3m");
		struct registry_pkgset set = { 0 };
		const char *bad[] = { "no-such-thing" };
		assert_int_equal(registry_closure(snap, bad, 1, true, &set, err, sizeof err), -1);
		assert_non_null(strstr(err, "unknown package 'no-such-thing'"));
		registry_close(snap);
	}
}

/* 0, or SQLite's result code, of a write transaction on `path` that does
 * not wait for a lock. */
static int try_write(const char *path)
{
	sqlite3 *w;
	assert_int_equal(sqlite3_open_v2(path, &w, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(w, 0);
	int rc = sqlite3_exec(w, "BEGIN IMMEDIATE; CREATE TABLE probe(x); COMMIT;", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(w);
	return rc == SQLITE_OK ? 0 : rc;
}

/* REGISTRY_SNAPSHOT_LATER: closures worked out while the copy is taken are
 * a fresh handle's; no SQLite writer commits until registry_snapshot_finish
 * has moved the handle onto the copy; after it, rewriting the file in place
 * changes no answer. A handle closed before finishing leaves nothing
 * behind (the thread joined, the copy freed: the sanitizer builds). */
static void snapshot_taken_later(void **state)
{
	(void)state;
	char copy[PATH_MAX + 64];
	snprintf(copy, sizeof copy, "%s/later.db", dir);
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, copy);
	assert_int_equal(system(cmd), 0);

	struct kiln_registry *gone = registry_open(copy, REGISTRY_SNAPSHOT_LATER, err, sizeof err);
	assert_non_null(gone);
	registry_close(gone);

	struct kiln_registry *snap = registry_open(copy, REGISTRY_SNAPSHOT_LATER, err, sizeof err);
	assert_non_null(snap);
	char want[2][2048];
	snprintf(want[0], sizeof want[0], "%s", closure(CHROOT, true, "awkuser"));
	snprintf(want[1], sizeof want[1], "%s", closure(HOST, false, "www-browser"));
	assert_string_equal(closure_in(snap, CHROOT, true, "awkuser"), want[0]);
	assert_int_equal(try_write(copy), SQLITE_BUSY);
	assert_int_equal(registry_snapshot_finish(snap, err, sizeof err), 0);
	assert_int_equal(registry_snapshot_finish(snap, err, sizeof err), 0); /* nothing left */
	assert_int_equal(try_write(copy), 0);

	FILE *f = fopen(copy, "r+");
	assert_non_null(f);
	char junk[4096];
	memset(junk, 'x', sizeof junk);
	for (int i = 0; i < 64; i++)
		assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
	fclose(f);
	assert_string_equal(closure_in(snap, CHROOT, true, "awkuser"), want[0]);
	assert_string_equal(closure_in(snap, HOST, false, "www-browser"), want[1]);
	registry_close(snap);
	unlink(copy);
}

/* One name asked with and without an architecture qualifier in the same
 * closure: two questions, two answers (libq:i386 is not installed, libq
 * is). */
static void qualified_and_plain_name_in_one_closure(void **state)
{
	(void)state;
	assert_string_equal(closure(CHROOT, false, "uses-foreign"), "libq-alt,uses-foreign");
	struct registry_pkgset set = { 0 };
	const char *names[] = { "uses-foreign", "uses-native" };
	assert_int_equal(registry_closure_chroot(reg, names, 2, false, &set, err, sizeof err), 0);
	assert_string_equal(names_of(&set), "libq,libq-alt,uses-foreign,uses-native");
	registry_pkgset_free(&set);
}

/* The closures without each declared name, worked out ahead while a build
 * runs (unused.h, struct unused_ahead), give the end the answer it works out
 * alone; a name the packages touched so far use is not worked out. */
static void unused_closures_ahead(void **state)
{
	(void)state;
	const char *declared[] = { "app-dev", "awkuser", "build-essential", "www-browser", "tzdata" };
	size_t n = sizeof declared / sizeof declared[0];
	for (int p = 0; p < 2; p++) {
		enum registry_profile profile = p ? CHROOT : HOST;
		struct registry_pkgset closure = { 0 }, touched = { 0 };
		assert_int_equal(registry_closure_profile(reg, profile, declared, n, true, &closure, err,
							  sizeof err),
				 0);
		/* the build used tzdata itself, and nothing of the others */
		int64_t tz[4];
		assert_true(registry_find_packages(reg, "tzdata", tz, 4) > 0);
		assert_int_equal(registry_pkgset_add(&touched, tz[0]), 0);
		struct unused_ahead ahead;
		assert_int_equal(unused_ahead_init(&ahead, n), 0);
		int calls = 0;
		while (unused_ahead_update(&ahead, reg, profile, declared, &closure, &touched))
			calls++;
		assert_false(ahead.failed);
		assert_true(calls >= 2);
		assert_true(ahead.known[0] && ahead.known[1] && ahead.known[3]);
		assert_false(ahead.known[2] || ahead.known[4]); /* build-essential; tzdata used */
		size_t alone[8], with[8];
		long k1 = trace_unused_deps(reg, profile, declared, n, &closure, &touched, NULL, alone,
					    err, sizeof err);
		long k2 = trace_unused_deps(reg, profile, declared, n, &closure, &touched, &ahead, with,
					    err, sizeof err);
		assert_true(k1 >= 3);
		assert_int_equal(k1, k2);
		assert_memory_equal(alone, with, (size_t)k1 * sizeof alone[0]);
		assert_int_equal(alone[0], 0); /* app-dev unused */
		/* a closure worked out ahead is the one the end uses: an empty one
		 * makes the whole closure app-dev's own, tzdata with it: used */
		registry_pkgset_free(&ahead.rest[0]);
		k2 = trace_unused_deps(reg, profile, declared, n, &closure, &touched, &ahead, with, err,
				       sizeof err);
		assert_int_equal(k2, k1 - 1);
		assert_int_not_equal(with[0], 0);
		unused_ahead_free(&ahead);
		registry_pkgset_free(&closure);
		registry_pkgset_free(&touched);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(base_set_from_priority),
		cmocka_unit_test(alternatives_both_installed),
		cmocka_unit_test(virtual_with_two_providers),
		cmocka_unit_test(build_depends_groups),
		cmocka_unit_test(snapshot_reuses_the_base_set),
		cmocka_unit_test(snapshot_host_closures),
		cmocka_unit_test(snapshot_taken_later),
		cmocka_unit_test(qualified_and_plain_name_in_one_closure),
		cmocka_unit_test(unused_closures_ahead),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

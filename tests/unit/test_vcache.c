/* The shared verdict cache, both sides in one process: the server's rules
 * for what it inserts (area verdicts, stable walks, listings) and the
 * client's lookups (src/trace/cache.c) against a map the server side
 * filled: stable hits, area hits only while the path has no symlink on its
 * way, listings answered only when every entry is known, garbage values
 * never used. Works in two temporary directories: a managed tree under
 * /tmp (made an ask-tree with its ancestors) and a build directory under
 * /var/tmp (allow) with a deny rule inside; everything else is read. The
 * preload library's code captures KILN_CACHE when the process starts, so
 * main() sets it and runs the tests in a re-executed copy of itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_oracle.h"
#include "trace/kt.h"
#include "trace/service/recall.h"
#include "trace/service/verdict_cache.h"

static char top[PATH_MAX], btop[PATH_MAX], err[1024];
static struct policy pol;
static struct sandbox sbx;
static struct verdict_cache vc;
static struct sbx_decision d;

/* "/build..." lies in btop, anything else in top. */
static char *at(const char *rel)
{
	static char p[8][PATH_MAX + 64];
	static int i;
	i = (i + 1) % 8;
	snprintf(p[i], sizeof p[i], "%s%s", strncmp(rel, "/build", 6) ? top : btop, rel);
	return p[i];
}

static void touch(const char *rel)
{
	FILE *f = fopen(at(rel), "w");
	assert_non_null(f);
	fclose(f);
}

/* The server's part for one question: decide, then insert. */
static int server_ask(const char *path, unsigned access, unsigned qflags)
{
	sandbox_decide(&sbx, 1, path, access, qflags, &d);
	verdict_cache_query(&vc, path, access, qflags, &d);
	return (int)d.verdict;
}

/* The client's part, as the hooks ask: the path in a question buffer (the
 * key is built after it, in place). */
static int client_ask(const char *path, unsigned access, unsigned qflags, int *v)
{
	struct kt_question q;
	size_t len = strlen(path);
	unsigned how;
	memcpy(q.path, path, len + 1);
	int r = kt_cache_ask(q.path, len, access, qflags, 0, v, &how);
	assert_string_equal(q.path, path); /* the buffer still holds the path */
	return r;
}

/* Whether the server put a 'V' value for the path itself. */
static bool map_has_verdict(const char *path, unsigned access, unsigned qflags)
{
	char key[SHMMAP_MAX_KEY];
	uint64_t v;
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	return klen && shmmap_lookup(&vc.map, key, klen, &v);
}

static int setup(void **state)
{
	(void)state;
	snprintf(top, sizeof top, "%s", getenv("KILN_VCACHE_TEST_DIR"));
	strcpy(btop, "/var/tmp/kiln-vcache-XXXXXX");
	assert_non_null(mkdtemp(btop));
	static const char *const dirs[] = { "/build", "/build/sub", "/build/secret", "/managed", "/run" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		assert_int_equal(mkdir(at(dirs[i]), 0700), 0);
	static const char *const files[] = { "/managed/a.h", "/managed/foreign.h", "/build/f.c",
					     "/build/sub/g.c" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		touch(files[i]);
	policy_init(&pol);
	assert_int_equal(policy_add(&pol, POLICY_READ, "/", err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_ASK, "/usr", err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_ALLOW, "/proc", err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_ASK, "/tmp", err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_ALLOW, at("/run"), err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_ALLOW, at("/build"), err, sizeof err), 0);
	assert_int_equal(policy_add(&pol, POLICY_DENY, at("/build/secret"), err, sizeof err), 0);
	policy_compile(&pol);
	sandbox_init(&sbx, &pol, (struct sbx_oracle){ NULL, fake_owner_by_name });
	assert_int_equal(verdict_cache_create(&vc, at("/run/verdicts"), &sbx, 64, err, sizeof err), 0);
	kt_init();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	verdict_cache_close(&vc);
	sandbox_free(&sbx);
	policy_free(&pol);
	char cmd[2 * PATH_MAX + 32];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", top, btop);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_values_and_keys(void **state)
{
	(void)state;
	unsigned kind, ans;
	assert_true(vc_parse(vc_value(VC_STABLE, KILN_V_HIDE), &kind, &ans));
	assert_int_equal(kind, VC_STABLE);
	assert_int_equal(ans, KILN_V_HIDE);
	assert_false(vc_parse(0, &kind, &ans));
	/* bits 24..47 are never set; of the flags (16..23) only known ones,
	 * and only on a STABLE value */
	assert_false(vc_parse(vc_value(VC_STABLE, 0) | 0x1000000, &kind, &ans));
	assert_false(vc_parse(vc_value(VC_STABLE, 0) | 0x800000000000ull, &kind, &ans));
	assert_false(vc_parse(vc_value_flags(VC_STABLE, 0, 0x80), &kind, &ans));
	assert_false(vc_parse(vc_value_flags(VC_AREA, 0, VC_F_PLAIN_EXEC), &kind, &ans));
	uint64_t plain = vc_value_flags(VC_STABLE, KILN_V_ALLOW, VC_F_PLAIN_EXEC);
	assert_true(vc_parse(plain, &kind, &ans));
	assert_int_equal(kind, VC_STABLE);
	assert_int_equal(ans, KILN_V_ALLOW);
	assert_int_equal(vc_flags(plain), VC_F_PLAIN_EXEC);
	assert_int_equal(vc_flags(vc_value(VC_STABLE, KILN_V_ALLOW)), 0);
	assert_false(vc_parse(vc_value(7, 0), &kind, &ans));
	char key[SHMMAP_MAX_KEY];
	assert_int_equal(vc_key_verdict(key, "/a", 2, KILN_A_READ, KILN_Q_NOFOLLOW), 6);
	assert_memory_equal(key, "/a\0V\x02\x01", 6);
	char longp[SHMMAP_MAX_KEY];
	memset(longp, 'x', sizeof longp);
	assert_int_equal(vc_key_verdict(key, longp, SHMMAP_MAX_KEY - 3, KILN_A_READ, 0), 0);
	size_t pre = vc_key_entry_prefix(key, "/d", 2);
	assert_int_equal(vc_key_entry_name(key, pre, "n", 1), 5);
	assert_memory_equal(key, "/d\0En", 5);
}

static void test_area_rules(void **state)
{
	(void)state;
	assert_int_equal(verdict_cache_area_verdict(&pol, at("/build/f.c"), KILN_A_READ), KILN_V_ALLOW);
	assert_int_equal(verdict_cache_area_verdict(&pol, at("/build/n.o"), KILN_A_WRITE | KILN_A_CREATE),
			 KILN_V_ALLOW);
	assert_int_equal(verdict_cache_area_verdict(&pol, at("/build/sub/../f.c"), KILN_A_STAT),
			 KILN_V_ALLOW);
	/* a node under deny, even one only passed through */
	assert_int_equal(verdict_cache_area_verdict(&pol, at("/build/secret/x"), KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, at("/build/secret/../f.c"), KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/var/tmp/../../tmp/x", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/usr/include/stdio.h", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/self/maps", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/thread-self/stat", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/1/root/etc", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/fs/../1/environ", KILN_A_READ), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc", KILN_A_STAT), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/", KILN_A_STAT), -1);
	/* what no process owns: the same for every asker */
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/filesystems", KILN_A_READ), KILN_V_ALLOW);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/sys/kernel/ostype", KILN_A_READ),
			 KILN_V_ALLOW);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/proc/12ab", KILN_A_READ), KILN_V_ALLOW);
	/* outside the writable areas: writes refused whatever the state, but a
	 * create may be a mkdir -p of an existing directory: not cached */
	assert_int_equal(verdict_cache_area_verdict(&pol, "/var/x", KILN_A_WRITE), KILN_V_DENY);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/var/x", KILN_A_DELETE), KILN_V_DENY);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/var/x", KILN_A_CREATE), -1);
	assert_int_equal(verdict_cache_area_verdict(&pol, "/var/x", KILN_A_STAT), KILN_V_ALLOW);
	assert_true(verdict_cache_area_listing(&pol, at("/build/sub")));
	assert_false(verdict_cache_area_listing(&pol, at("/build")));  /* deny below */
	assert_false(verdict_cache_area_listing(&pol, "/"));
	assert_false(verdict_cache_area_listing(&pol, "/usr/include"));
	assert_false(verdict_cache_area_listing(&pol, "/proc"));
	assert_false(verdict_cache_area_listing(&pol, "/proc/1/fd"));
	assert_false(verdict_cache_area_listing(&pol, "/proc/self/task"));
	assert_true(verdict_cache_area_listing(&pol, "/proc/sys/kernel"));
}

static void test_stable_verdicts(void **state)
{
	(void)state;
	int v = -1;
	assert_int_equal(client_ask(at("/managed/a.h"), KILN_A_READ, 0, &v), 0); /* not yet */
	assert_int_equal(server_ask(at("/managed/a.h"), KILN_A_READ, 0), KILN_V_ALLOW);
	assert_true(d.stable);
	assert_int_equal(server_ask(at("/managed/foreign.h"), KILN_A_STAT, 0), KILN_V_HIDE);
	assert_int_equal(server_ask(at("/managed/new.h"), KILN_A_WRITE | KILN_A_CREATE, 0),
			 KILN_V_DENY);
	assert_int_equal(client_ask(at("/managed/a.h"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(v, KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/managed/foreign.h"), KILN_A_STAT, 0, &v), 1);
	assert_int_equal(v, KILN_V_HIDE);
	assert_int_equal(client_ask(at("/managed/new.h"), KILN_A_WRITE | KILN_A_CREATE, 0, &v), 1);
	assert_int_equal(v, KILN_V_DENY);
	/* another access class or flag is another question */
	assert_int_equal(client_ask(at("/managed/a.h"), KILN_A_STAT, 0, &v), 0);
	assert_int_equal(client_ask(at("/managed/a.h"), KILN_A_READ, KILN_Q_NOFOLLOW, &v), 0);
}

static void write_file(const char *rel, const void *data, size_t len, mode_t mode)
{
	FILE *f = fopen(at(rel), "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
	assert_int_equal(chmod(at(rel), mode), 0);
}

static void copy_file(const char *from, const char *rel, mode_t mode)
{
	static char buf[1 << 20];
	FILE *f = fopen(from, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	assert_true(n > 0 && n < sizeof buf);
	write_file(rel, buf, n, mode);
}

/* Only a program with nothing for the exec check to report or check gets
 * VC_F_PLAIN_EXEC, only on an allowed exec, and only then does
 * kt_cache_exec_plain answer. */
static void test_plain_exec_targets(void **state)
{
	(void)state;
	copy_file("/bin/true", "/managed/tool", 0755);
	copy_file("/bin/true", "/managed/setid", 04755);
	write_file("/managed/script", "#!/bin/sh\necho\n", 15, 0755);
	/* a 64-bit ELF header with one PT_LOAD program header: static */
	unsigned char elf[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr)] = { 0 };
	Elf64_Ehdr eh = { .e_phoff = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 1 };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	Elf64_Phdr ph = { .p_type = PT_LOAD };
	memcpy(elf, &eh, sizeof eh);
	memcpy(elf + sizeof eh, &ph, sizeof ph);
	write_file("/managed/static", elf, sizeof elf, 0755);
	assert_int_equal(mkfifo(at("/managed/fifo"), 0755), 0); /* not a program: never flagged */
	struct kt_question q;
	const char *names[] = { "/managed/tool", "/managed/setid", "/managed/script",
				"/managed/static", "/managed/fifo", "/managed/foreign.h" };
	const int plain[] = { 1, 0, 0, 0, 0, 0 };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *p = at(names[i]);
		size_t len = strlen(p);
		memcpy(q.path, p, len + 1);
		assert_int_equal(kt_cache_exec_plain(q.path, len, 0), 0); /* not yet asked */
		server_ask(p, KILN_A_EXEC, 0);
		assert_true(d.stable);
		memcpy(q.path, p, len + 1);
		assert_int_equal(kt_cache_exec_plain(q.path, len, 0), plain[i]);
		assert_string_equal(q.path, p);
		/* another class, or the same file not followed: not this answer */
		assert_int_equal(kt_cache_exec_plain(q.path, len, KILN_Q_NOFOLLOW), 0);
		int v = -1;
		assert_int_equal(client_ask(p, KILN_A_EXEC, 0, &v), 1);
		assert_int_equal(v, !strcmp(names[i], "/managed/foreign.h") ? KILN_V_HIDE : KILN_V_ALLOW);
	}
	/* read, not exec: never flagged */
	server_ask(at("/managed/tool"), KILN_A_READ, 0);
	char key[SHMMAP_MAX_KEY];
	uint64_t v;
	size_t klen = vc_key_verdict(key, at("/managed/tool"), strlen(at("/managed/tool")), KILN_A_READ, 0);
	assert_true(shmmap_lookup(&vc.map, key, klen, &v));
	assert_int_equal(vc_flags(v), 0);
}

static void test_area_verdicts_need_a_symlink_free_path(void **state)
{
	(void)state;
	int v = -1;
	assert_int_equal(server_ask(at("/build/f.c"), KILN_A_READ, 0), KILN_V_ALLOW);
	assert_false(d.stable);
	assert_int_equal(server_ask(at("/build/sub/g.c"), KILN_A_READ, 0), KILN_V_ALLOW);
	assert_int_equal(server_ask(at("/build/gone.c"), KILN_A_READ, 0), KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/f.c"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(v, KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/gone.c"), KILN_A_READ, 0, &v), 1);
	/* through a file (the kernel's ENOTDIR, with no symlink before it):
	 * the area's answer too; through a symlink to that file: not */
	assert_int_equal(server_ask(at("/build/sub/g.c/DEBIAN"), KILN_A_STAT, 0), KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/sub/g.c/DEBIAN"), KILN_A_STAT, 0, &v), 1);
	assert_int_equal(v, KILN_V_ALLOW);
	assert_int_equal(symlink(at("/build/sub/g.c"), at("/build/g.lnk")), 0);
	assert_int_equal(server_ask(at("/build/g.lnk/DEBIAN"), KILN_A_STAT, 0), KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/g.lnk/DEBIAN"), KILN_A_STAT, 0, &v), 0);
	assert_int_equal(unlink(at("/build/g.lnk")), 0);
	/* f.c becomes a symlink to a hidden file; sub a symlink to the
	 * managed tree: both must go to the server now. */
	assert_int_equal(unlink(at("/build/f.c")), 0);
	assert_int_equal(symlink(at("/managed/foreign.h"), at("/build/f.c")), 0);
	assert_int_equal(client_ask(at("/build/f.c"), KILN_A_READ, 0, &v), 0);
	assert_int_equal(server_ask(at("/build/f.c"), KILN_A_READ, 0), KILN_V_HIDE);
	assert_int_equal(rename(at("/build/sub"), at("/build/sub.old")), 0);
	assert_int_equal(symlink(at("/managed"), at("/build/sub")), 0);
	assert_int_equal(client_ask(at("/build/sub/g.c"), KILN_A_READ, 0, &v), 0);
	/* with NOFOLLOW the final symlink itself is what is asked about */
	assert_int_equal(server_ask(at("/build/sub"), KILN_A_STAT, KILN_Q_NOFOLLOW), KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/sub"), KILN_A_STAT, KILN_Q_NOFOLLOW, &v), 1);
	/* a decision the area rule does not give (a symlink on the way) is
	 * not inserted */
	assert_int_equal(server_ask(at("/build/sub/foreign.h"), KILN_A_READ, 0), KILN_V_HIDE);
	assert_int_equal(unlink(at("/build/sub")), 0);
	assert_int_equal(rename(at("/build/sub.old"), at("/build/sub")), 0);
	touch("/build/sub/foreign.h");
	assert_false(map_has_verdict(at("/build/sub/foreign.h"), KILN_A_READ, 0));
	assert_int_equal(client_ask(at("/build/sub/g.c"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(unlink(at("/build/f.c")), 0);
	touch("/build/f.c");
}

/* A policy of "/" read, /tmp allowed, and `rule` for /tmp/build. */
static bool tmp_names_with(enum policy_action rule)
{
	struct policy p;
	policy_init(&p);
	assert_int_equal(policy_add(&p, POLICY_READ, "/", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, POLICY_ALLOW, "/tmp", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, rule, "/tmp/build", err, sizeof err), 0);
	policy_compile(&p);
	bool names = verdict_cache_area_names(&p, "/tmp");
	policy_free(&p);
	return names;
}

static void test_names_beside_a_rule_of_the_same_action(void **state)
{
	(void)state;
	/* the build directory allowed inside /tmp: every other name of /tmp
	 * is allowed just the same, so /tmp keeps its 'S' values; a rule that
	 * makes the name differ (read: writes refused; deny; ask) withholds
	 * them */
	assert_true(tmp_names_with(POLICY_ALLOW));
	assert_false(tmp_names_with(POLICY_READ));
	assert_false(tmp_names_with(POLICY_DENY));
	assert_false(tmp_names_with(POLICY_ASK));
	assert_false(tmp_names_with(POLICY_OWNED));
}

/* The chroot profile hides the invoking user's home; a build directory
 * inside it stays reachable (sandbox.c: a hidden directory on the way to a
 * visible area is walked through). Paths in that build directory are area
 * paths like any other: their value holds whatever the file system does,
 * while nothing else of the home is answered from the map. */
static void test_build_directory_inside_a_hidden_home(void **state)
{
	(void)state;
	static const char *const dirs[] = { "/build/home", "/build/home/u", "/build/home/u/src",
					    "/build/home/u/src/pkg", "/build/home/u/.ssh" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		assert_int_equal(mkdir(at(dirs[i]), 0700), 0);
	static const char *const files[] = { "/build/home/u/src/pkg/f.c", "/build/home/u/.ssh/id",
					     "/build/home/u/src/pkg_1.0.dsc" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		touch(files[i]);
	struct policy p;
	policy_init(&p);
	assert_int_equal(policy_add(&p, POLICY_READ, "/", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, POLICY_ALLOW, at("/build/home/u/src/pkg"), err, sizeof err), 0);
	assert_int_equal(policy_add(&p, POLICY_DENY, at("/build/home"), err, sizeof err), 0);
	assert_int_equal(policy_add(&p, POLICY_READ, at("/build/home/u/src"), err, sizeof err), 0);
	policy_compile(&p);
	struct sandbox s;
	sandbox_init(&s, &p, (struct sbx_oracle){ NULL, fake_owner_by_name });
	struct sbx_decision dd;
	/* every area answer is the server's own decision for that path */
	static const struct {
		const char *rel;
		unsigned access;
		int area;
	} cases[] = {
		{ "/build/home/u/src/pkg/f.c", KILN_A_READ, KILN_V_ALLOW },
		{ "/build/home/u/src/pkg/new.o", KILN_A_WRITE | KILN_A_CREATE, KILN_V_ALLOW },
		{ "/build/home/u/src/pkg", KILN_A_STAT, KILN_V_ALLOW },
		{ "/build/home/u/src/pkg/../pkg_1.0.dsc", KILN_A_READ, KILN_V_ALLOW },
		{ "/build/home/u/src/pkg_1.0.dsc", KILN_A_WRITE, KILN_V_DENY },
		{ "/build/home/u/.ssh/id", KILN_A_READ, -1 },
		{ "/build/home/u/src/pkg/../../.ssh/id", KILN_A_READ, -1 },
		{ "/build/home/u/.profile", KILN_A_STAT, -1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *path = at(cases[i].rel);
		int area = verdict_cache_area_verdict(&p, path, cases[i].access);
		assert_int_equal(area, cases[i].area);
		sandbox_decide(&s, 1, path, cases[i].access, 0, &dd);
		if (area >= 0)
			assert_int_equal((int)dd.verdict, area);
		else if (strstr(path, "/.ssh/")) /* there, and hidden: never from the map */
			assert_int_equal((int)dd.verdict, KILN_V_HIDE);
	}
	/* the build directory's listing and fresh names: from the map; the
	 * hidden home's and its way's: never */
	assert_true(verdict_cache_area_listing(&p, at("/build/home/u/src/pkg")));
	assert_true(verdict_cache_area_names(&p, at("/build/home/u/src/pkg")));
	assert_false(verdict_cache_area_listing(&p, at("/build/home/u")));
	assert_false(verdict_cache_area_names(&p, at("/build/home/u")));
	assert_false(verdict_cache_area_listing(&p, at("/build/home")));
	assert_false(verdict_cache_area_names(&p, at("/build/home")));
	sandbox_free(&s);
	policy_free(&p);
	for (size_t i = sizeof files / sizeof files[0]; i-- > 0;)
		assert_int_equal(unlink(at(files[i])), 0);
	for (size_t i = sizeof dirs / sizeof dirs[0]; i-- > 0;)
		assert_int_equal(rmdir(at(dirs[i])), 0);
}

struct logged {
	char paths[8][PATH_MAX + 64];
	unsigned access[8];
	size_t n;
};

static void collect(void *ctx, pid_t pid, const char *path, unsigned access)
{
	struct logged *l = ctx;
	assert_int_equal(pid, getpid());
	assert_true(l->n < 8);
	snprintf(l->paths[l->n], sizeof l->paths[0], "%s", path);
	l->access[l->n++] = access;
}

/* Writes a slot into the access log as a (hostile) client could. */
static void forge(const char *path, uint32_t commit, bool terminate)
{
	struct vc_log_slot *slots = (struct vc_log_slot *)((char *)vc.ctr + vc.log_off);
	uint64_t i = __atomic_fetch_add(&vc.ctr->log_next, 1, __ATOMIC_RELAXED);
	memset(slots[i].path, 'x', sizeof slots[i].path);
	memcpy(slots[i].path, path, strlen(path) + terminate);
	slots[i].pid = getpid();
	slots[i].commit = commit;
}

static void test_fresh_names_in_an_area_directory(void **state)
{
	(void)state;
	int v = -1;
	/* which directories qualify: none with a rule for a name in it, none
	 * in /proc */
	assert_true(verdict_cache_area_names(&pol, at("/build/sub")));
	assert_true(verdict_cache_area_names(&pol, "/var/cache"));
	assert_true(verdict_cache_area_names(&pol, "/var/tmp")); /* its rules lie two levels down */
	assert_false(verdict_cache_area_names(&pol, btop));      /* a rule for a name in it */
	assert_false(verdict_cache_area_names(&pol, at("/build")));   /* deny below */
	assert_false(verdict_cache_area_names(&pol, at("/managed"))); /* ask-tree */
	assert_false(verdict_cache_area_names(&pol, "/"));
	assert_false(verdict_cache_area_names(&pol, "/proc"));
	assert_false(verdict_cache_area_names(&pol, "/proc/1"));
	assert_false(verdict_cache_area_names(&pol, "/proc/sys"));
	assert_false(verdict_cache_area_names(&pol, "/var/../usr"));
	/* g.c's area answer gave build/sub an 'S' value for reads: a name never
	 * asked is answered and logged; another access class is not; nor is a
	 * name one directory further down, or in /build (rule below) */
	mkdir(at("/build/sub/deeper"), 0700);
	assert_int_equal(client_ask(at("/build/sub/fresh.o"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(v, KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/build/sub/fresh.o"), KILN_A_WRITE | KILN_A_CREATE, 0, &v), 0);
	assert_int_equal(client_ask(at("/build/sub/deeper/x.o"), KILN_A_READ, 0, &v), 0);
	assert_int_equal(client_ask(at("/build/fresh.o"), KILN_A_READ, 0, &v), 0);
	/* a fresh name that is a symlink to a hidden file, or below a
	 * symlinked directory: the server is asked */
	assert_int_equal(symlink(at("/managed/foreign.h"), at("/build/sub/link.h")), 0);
	assert_int_equal(client_ask(at("/build/sub/link.h"), KILN_A_READ, 0, &v), 0);
	assert_int_equal(server_ask(at("/build/sub/link.h"), KILN_A_READ, 0), KILN_V_HIDE);
	assert_int_equal(client_ask(at("/build/sub/link.h"), KILN_A_READ, 0, &v), 0);
	assert_int_equal(unlink(at("/build/sub/link.h")), 0);
	/* forged slots: no 'S' value for /build, not lexically clean, not
	 * terminated, not committed; then one believed like a client's */
	forge(at("/build/f.c"), vc_log_commit(KILN_A_READ, 0), true);
	forge(at("/build/sub/../f.c"), vc_log_commit(KILN_A_READ, 0), true);
	forge(at("/build/sub/a"), vc_log_commit(KILN_A_READ, 0), false);
	forge(at("/build/sub/b"), 0, true);
	forge(at("/build/sub/c"), vc_log_commit(KILN_A_WRITE, 0), true); /* no 'S' for writes */
	forge(at("/build/sub/d"), vc_log_commit(KILN_A_READ, 0), true);
	struct logged l = { .n = 0 };
	assert_int_equal(verdict_cache_read_log(&vc, collect, &l), 2);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.paths[0], at("/build/sub/fresh.o"));
	assert_int_equal(l.access[0], KILN_A_READ);
	assert_string_equal(l.paths[1], at("/build/sub/d"));
	/* a believed slot's own key now has the AREA value: the next asker
	 * hits it without a slot; no slot is given twice; one committed
	 * late is read then */
	assert_true(map_has_verdict(at("/build/sub/fresh.o"), KILN_A_READ, 0));
	assert_false(map_has_verdict(at("/build/sub/c"), KILN_A_WRITE, 0)); /* not believed */
	uint64_t used = __atomic_load_n(&vc.ctr->log_next, __ATOMIC_RELAXED);
	assert_int_equal(client_ask(at("/build/sub/fresh.o"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(__atomic_load_n(&vc.ctr->log_next, __ATOMIC_RELAXED), used);
	assert_int_equal(verdict_cache_read_log(&vc, collect, &l), 0);
	struct vc_log_slot *slots = (struct vc_log_slot *)((char *)vc.ctr + vc.log_off);
	__atomic_store_n(&slots[used - 3].commit, vc_log_commit(KILN_A_READ, 0), __ATOMIC_RELEASE);
	assert_int_equal(verdict_cache_read_log(&vc, collect, &l), 1);
	assert_string_equal(l.paths[2], at("/build/sub/b"));
	assert_int_equal(verdict_cache_read_log(&vc, collect, &l), 0);
	assert_int_equal(vc.logged, 3);
	assert_int_equal(rmdir(at("/build/sub/deeper")), 0);
}

static void test_listings(void **state)
{
	(void)state;
	const char *names[] = { "a.h", "foreign.h", "." };
	unsigned char hidden[3] = { 9, 9, 9 };
	const char *dir = at("/managed");
	assert_int_equal(kt_cache_ask_dir(dir, names, 3, hidden), 0);
	/* the server's answer to a QUERY_DIR of a.h and foreign.h */
	sandbox_decide(&sbx, 1, dir, KILN_A_LIST, 0, &d);
	char entries[64];
	size_t at_ = 0;
	for (int i = 0; i < 2; i++) {
		uint16_t l = (uint16_t)strlen(names[i]);
		memcpy(entries + at_, &l, 2);
		memcpy(entries + at_ + 2, names[i], l);
		at_ += 2 + l;
	}
	unsigned char answer[2] = { 0, 1 };
	verdict_cache_listing(&vc, dir, &d, entries, 2, answer);
	assert_int_equal(kt_cache_ask_dir(dir, names, 3, hidden), 1);
	assert_int_equal(hidden[0], 0);
	assert_int_equal(hidden[1], 1);
	assert_int_equal(hidden[2], 0);
	const char *more[] = { "a.h", "b.h" }; /* b.h never asked: ask the server */
	assert_int_equal(kt_cache_ask_dir(dir, more, 2, hidden), 0);
	/* the build directory's subdirectory: nothing can be hidden there */
	const char *sub = at("/build/sub");
	sandbox_decide(&sbx, 1, sub, KILN_A_LIST, 0, &d);
	verdict_cache_listing(&vc, sub, &d, entries, 2, (unsigned char[2]){ 0, 0 });
	memset(hidden, 9, sizeof hidden);
	assert_int_equal(kt_cache_ask_dir(sub, more, 2, hidden), 1);
	assert_int_equal(hidden[0] | hidden[1], 0);
	/* the build directory itself has a deny rule below: never cached */
	const char *b = at("/build");
	sandbox_decide(&sbx, 1, b, KILN_A_LIST, 0, &d);
	verdict_cache_listing(&vc, b, &d, entries, 2, (unsigned char[2]){ 0, 0 });
	assert_int_equal(kt_cache_ask_dir(b, more, 2, hidden), 0);
}

static void test_counters_and_pids(void **state)
{
	(void)state;
	struct verdict_cache_stats st;
	verdict_cache_stats(&vc, &st);
	assert_int_equal(st.hits, 19);
	assert_int_equal(st.misses, 14);
	assert_int_equal(st.listings, 2);
	assert_true(st.entries >= 10);
	assert_true(st.map_bytes >= 1 << 20);
	size_t words;
	const uint64_t *pids = verdict_cache_pids(&vc, &words);
	pid_t me = getpid();
	assert_true((size_t)me / 64 < words);
	assert_true(pids[me / 64] >> (me % 64) & 1);
	/* the map's fd is one of kiln's, above 100 */
	int fd = kt_cache_fd();
	assert_true(fd >= 100);
	assert_true(kt_is_kiln_fd(fd));
}

static char used_paths[8][PATH_MAX];
static size_t nused;

static void used(void *ctx, const char *path, unsigned access)
{
	(void)ctx;
	assert_true(nused < 8);
	snprintf(used_paths[nused++], PATH_MAX, "%s %u", path, access);
}

/* The last build's keys (recall.h): decided afresh, only STABLE ALLOWs put
 * in, each logged once when a client first uses it; the file the next
 * build reads holds what this one used and asked. */
static void test_recalled_keys(void **state)
{
	(void)state;
	struct recall r;
	char text[4 * PATH_MAX], file[PATH_MAX + 64];
	assert_int_equal(mkdir(at("/run/recall"), 0700), 0);
	snprintf(file, sizeof file, "%s/%016llx", at("/run/recall"), 0xaf63f54c86021707ull);
	/* "x": the file's name is the identity's FNV-1a hash */
	snprintf(text, sizeof text,
		 "kiln-recall 1\n2 0 %s\n1 0 %s\n1 1 %s\n2 0 %s\n1 0 %s\n",
		 at("/managed/recalled.h"), at("/managed/foreign2.h"), at("/managed/none.h"),
		 at("/build/recall.c"), at("/managed/claimed.h"));
	touch("/managed/recalled.h");
	touch("/managed/foreign2.h");
	touch("/build/recall.c");
	touch("/managed/claimed.h");
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(recall_open(&r, at("/run/recall"), "x", 1, err, sizeof err), 0);
	assert_int_equal(r.n, 5);
	assert_int_equal(recall_ahead(&r, &sbx, &vc, 2), 3);
	assert_int_equal(recall_ahead(&r, &sbx, &vc, 16), 0);
	/* hidden (foreign2.h) and not STABLE (the build directory): left for
	 * their first asker */
	assert_int_equal(r.put, 3);
	assert_false(map_has_verdict(at("/managed/foreign2.h"), KILN_A_STAT, 0));
	assert_false(map_has_verdict(at("/build/recall.c"), KILN_A_READ, 0));
	assert_int_equal(recall_read(&r, &vc, used, NULL), 0);
	/* A bit a client sets for a key never put in (foreign2.h: hidden;
	 * recall.c: not STABLE) logs nothing. */
	uint32_t nbits;
	uint64_t *bitmap = verdict_cache_recall_bitmap(&vc, &nbits);
	assert_non_null(bitmap);
	__atomic_fetch_or(&bitmap[0], (1ull << 1) | (1ull << 3), __ATOMIC_RELAXED);
	assert_int_equal(recall_read(&r, &vc, used, NULL), 0);
	assert_int_equal(nused, 0);

	int v = -1;
	assert_int_equal(client_ask(at("/managed/recalled.h"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(v, KILN_V_ALLOW);
	assert_int_equal(client_ask(at("/managed/recalled.h"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(client_ask(at("/managed/none.h"), KILN_A_STAT, KILN_Q_NOFOLLOW, &v), 1);
	assert_int_equal(recall_read(&r, &vc, used, NULL), 2);
	assert_int_equal(nused, 2);
	/* once logged, a plain STABLE ALLOW: later hits look at no bitmap */
	char vkey[SHMMAP_MAX_KEY];
	uint64_t val;
	unsigned vkind, vans;
	const char *rp = at("/managed/recalled.h");
	assert_true(shmmap_lookup(&vc.map, vkey, vc_key_verdict(vkey, rp, strlen(rp), KILN_A_READ, 0),
				  &val));
	assert_true(vc_parse(val, &vkind, &vans));
	assert_int_equal(val, vc_value(VC_STABLE, KILN_V_ALLOW));
	snprintf(text, sizeof text, "%s %u", at("/managed/recalled.h"), KILN_A_READ);
	assert_string_equal(used_paths[0], text);
	assert_int_equal(recall_read(&r, &vc, used, NULL), 0);
	assert_int_equal(client_ask(at("/managed/recalled.h"), KILN_A_READ, 0, &v), 1);
	assert_int_equal(recall_read(&r, &vc, used, NULL), 0);

	/* A question that reached the server about a recalled key nobody used
	 * (it missed before the key went in): claimed once, then not logged
	 * again when a client uses it. */
	assert_true(recall_claim(&r, &vc, at("/managed/claimed.h"), KILN_A_STAT, 0));
	assert_false(map_has_verdict(at("/managed/claimed.h"), KILN_A_STAT, 0) &&
		     verdict_cache_recalled(&vc, at("/managed/claimed.h"), KILN_A_STAT, 0) >= 0);
	assert_false(recall_claim(&r, &vc, at("/managed/claimed.h"), KILN_A_STAT, 0));
	assert_false(recall_claim(&r, &vc, at("/managed/recalled.h"), KILN_A_READ, 0));
	assert_false(recall_claim(&r, &vc, at("/managed/a.h"), KILN_A_READ, 0)); /* not recalled */
	assert_int_equal(client_ask(at("/managed/claimed.h"), KILN_A_STAT, 0, &v), 1);
	assert_int_equal(recall_read(&r, &vc, used, NULL), 0);

	/* A recalled value whose number has no bit: a miss, never an unlogged
	 * hit. */
	char key[SHMMAP_MAX_KEY];
	uint64_t winner;
	const char *b = at("/managed/b.h");
	assert_int_equal(shmmap_insert(&vc.map, key, vc_key_verdict(key, b, strlen(b), KILN_A_READ, 0),
				       vc_value_recalled(KILN_V_ALLOW, 0, 64), &winner),
			 SHMMAP_INSERTED);
	assert_int_equal(client_ask(b, KILN_A_READ, 0, &v), 0);
	unsigned kind, ans;
	assert_true(vc_parse(vc_value_recalled(KILN_V_ALLOW, 0, 5), &kind, &ans));
	assert_int_equal(vc_recall_index(vc_value_recalled(KILN_V_ALLOW, 0, 5)), 5);
	assert_false(vc_parse(vc_value(VC_AREA, 0) | (uint64_t)VC_F_RECALLED << 16, &kind, &ans));

	/* Saved: the keys used (in their order), then those asked, once each. */
	recall_remember(&r, at("/managed/a.h"), KILN_A_READ, 0);
	recall_remember(&r, at("/managed/recalled.h"), KILN_A_READ, 0);
	recall_remember(&r, at("/managed/x.h"), KILN_A_WRITE, 0); /* never a recalled key */
	assert_int_equal(recall_save(&r, err, sizeof err), 0);
	recall_free(&r);
	f = fopen(file, "r");
	assert_non_null(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	char want[4 * PATH_MAX];
	snprintf(want, sizeof want, "kiln-recall 1\n2 0 %s\n1 1 %s\n1 0 %s\n2 0 %s\n",
		 at("/managed/recalled.h"), at("/managed/none.h"), at("/managed/claimed.h"),
		 at("/managed/a.h"));
	assert_string_equal(text, want);

	/* Not a recall file, or a line that is no key: ignored, said. */
	static const char *const bad[] = {
		"kiln-recall 2\n", "kiln-recall 1\n1 0 relative\n", "kiln-recall 1\n4 0 /usr/x\n",
		"kiln-recall 1\n1 8 /usr/x\n", "kiln-recall 1\n1 0 /usr/x", "kiln-recall 1\n1 /usr/x\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		f = fopen(file, "w");
		fputs(bad[i], f);
		fclose(f);
		err[0] = '\0';
		assert_int_equal(recall_open(&r, at("/run/recall"), "x", 1, err, sizeof err), 1);
		assert_int_equal(r.n, 0);
		assert_non_null(strstr(err, file));
		recall_free(&r);
	}
	unlink(file);
	assert_int_equal(mkfifo(file, 0600), 0); /* not a regular file: never waited on */
	assert_int_equal(recall_open(&r, at("/run/recall"), "x", 1, err, sizeof err), 1);
	assert_int_equal(recall_save(&r, err, sizeof err), -1);
	recall_free(&r);
	unlink(file);
	assert_int_equal(recall_open(&r, at("/run/recall"), "x", 1, err, sizeof err), 0);
	assert_int_equal(r.n, 0);
	recall_free(&r);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("KILN_VCACHE_TEST_DIR")) {
		strcpy(top, "/tmp/kiln-vcache-XXXXXX");
		if (!mkdtemp(top))
			return 1;
		char cache[PATH_MAX + 32];
		snprintf(cache, sizeof cache, "%s/run/verdicts", top);
		setenv("KILN_VCACHE_TEST_DIR", top, 1);
		setenv(KILN_ENV_CACHE, cache, 1);
		execv("/proc/self/exe", argv);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_and_keys),
		cmocka_unit_test(test_area_rules),
		cmocka_unit_test(test_stable_verdicts),
		cmocka_unit_test(test_plain_exec_targets),
		cmocka_unit_test(test_area_verdicts_need_a_symlink_free_path),
		cmocka_unit_test(test_fresh_names_in_an_area_directory),
		cmocka_unit_test(test_names_beside_a_rule_of_the_same_action),
		cmocka_unit_test(test_build_directory_inside_a_hidden_home),
		cmocka_unit_test(test_listings),
		cmocka_unit_test(test_counters_and_pids),
		cmocka_unit_test(test_recalled_keys),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* The dynamic loader's own library searches (issue 9, class 6;
 * docs/threat-model.md, "The loader").
 *
 * ld.so opens the libraries a program needs (DT_NEEDED, LD_PRELOAD, found
 * through RPATH, LD_LIBRARY_PATH, ld.so.cache) with internal calls no hook
 * sees. Checking each search with an LD_AUDIT library would cost every
 * process the loading of one more object and a map of its own; instead this
 * constructor looks at what the loader loaded (the link map, read without a
 * lock: nothing else runs yet) and asks about each file. All visible, the
 * usual case: nothing else happens (a lookup per library in the shared
 * cache). One hidden or refused: the process runs itself again (execve of
 * /proc/self/exe, same arguments and environment) with kiln's audit library
 * (libkiln-audit.so, src/trace/audit/), whose la_objsearch makes the loader
 * skip hidden candidates exactly as if they were absent: a search goes on to
 * a visible copy further down the path, a missing DT_NEEDED fails with
 * ld.so's own message and status 127, a hidden LD_PRELOAD entry is "ignored"
 * as ld.so says. What that costs (a second start, the audit library and its
 * own libc) is paid only by processes that reached for a hidden library.
 *
 * Not undone: constructors of the libraries initialised before this one (a
 * hidden library's included) have run once in the first start. If the
 * audited start still has a hidden library (the audit library could not be
 * loaded), the process ends here with status 127 and ld.so's message. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "trace/kt.h"
#include "common/rawsys.h"

extern char **environ;
extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

#define AUDIT_NAME "libkiln-audit.so"

/* The audit library: next to kiln's preload library. */
static int audit_path(char *out, size_t cap)
{
	const char *pre = kt_env(KILN_ENV_PRELOAD);
	const char *slash = pre ? strrchr(pre, '/') : NULL;
	if (!slash || (size_t)(slash - pre) + 1 + sizeof AUDIT_NAME > cap)
		return -1;
	size_t dl = (size_t)(slash - pre) + 1;
	memcpy(out, pre, dl);
	memcpy(out + dl, AUDIT_NAME, sizeof AUDIT_NAME);
	return 0;
}

/* Whether LD_AUDIT (as this process started) names kiln's audit library. */
static int audited(const char *audit)
{
	size_t al = strlen(audit);
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "LD_AUDIT=", 9))
			continue;
		for (const char *p = *e + 9; *p;) {
			size_t n = strcspn(p, ":");
			if (n == al && !memcmp(p, audit, al))
				return 1;
			p += n + (p[n] == ':');
		}
	}
	return 0;
}

static void put(char *buf, size_t *at, size_t cap, const char *s)
{
	while (*s && *at + 1 < cap)
		buf[(*at)++] = *s++;
}

/* ld.so's words for a library it cannot load, and its status. */
__attribute__((noreturn)) static void fail_as_loader(const char *prog, const char *lib, int err)
{
	char msg[KT_PATH_BUF + 256];
	size_t n = 0;
	const char *base = strrchr(lib, '/');
	put(msg, &n, sizeof msg, prog && *prog ? prog : "<program name unknown>");
	put(msg, &n, sizeof msg, ": error while loading shared libraries: ");
	put(msg, &n, sizeof msg, base ? base + 1 : lib);
	put(msg, &n, sizeof msg, err == EACCES ? ": cannot open shared object file: Permission denied\n"
		 : err == ENOENT ? ": cannot open shared object file: No such file or directory\n"
				 : ": cannot open shared object file: Input/output error\n");
	kt_write(2, msg, n);
	for (;;)
		kt_sys1(SYS_exit_group, 127);
}

/* Runs this process again under the audit library. Returns only if that
 * cannot be done. */
static void restart_audited(char **argv, const char *audit)
{
	size_t n = 0;
	for (char **e = environ; e && *e; e++)
		n++;
	if (n > 4096)
		return;
	char *env[n + 3];
	char aud[KT_PATH_BUF + 16], name[sizeof KILN_ENV_EXEC_NAME + 17];
	size_t k = 0, at = 0;
	put(aud, &at, sizeof aud, "LD_AUDIT=");
	put(aud, &at, sizeof aud, audit);
	for (char **e = environ; e && *e; e++) {
		if (!strncmp(*e, "LD_AUDIT=", 9) && (*e)[9]) { /* theirs after ours */
			put(aud, &at, sizeof aud, ":");
			put(aud, &at, sizeof aud, *e + 9);
		} else if (strncmp(*e, KILN_ENV_EXEC_NAME "=", sizeof KILN_ENV_EXEC_NAME)) {
			env[k++] = *e;
		}
	}
	aud[at] = '\0';
	env[k++] = aud;
	/* /proc/self/exe would name the process "exe": keep its name */
	char comm[17] = { 0 };
	if (kt_sys2(SYS_prctl, PR_GET_NAME, comm) == 0) {
		size_t m = 0;
		put(name, &m, sizeof name, KILN_ENV_EXEC_NAME "=");
		put(name, &m, sizeof name, comm);
		name[m] = '\0';
		env[k++] = name;
	}
	env[k] = NULL;
	kt_sys3(SYS_execve, "/proc/self/exe", argv, env);
}

/* The libraries kiln's server found visible for the whole run
 * (KILN_TRUSTED_LIBS: those kiln itself runs with), split once so that each
 * loaded object costs a length compare per entry, not a scan of the list. */
#define TRUSTED_MAX 64

struct trusted {
	const char *at[TRUSTED_MAX];
	unsigned short len[TRUSTED_MAX];
	int n;
};

static void trusted_split(const char *list, struct trusted *t)
{
	t->n = 0;
	for (const char *p = list; p && *p && t->n < TRUSTED_MAX;) {
		const char *e = p;
		while (*e && *e != ':')
			e++;
		if (e - p < 65535) {
			t->at[t->n] = p;
			t->len[t->n++] = (unsigned short)(e - p);
		}
		p = *e ? e + 1 : e;
	}
}

static int has_slash(const char *s)
{
	while (*s && *s != '/')
		s++;
	return *s == '/';
}

static int trusted(const struct trusted *t, const char *path)
{
	size_t pl = strlen(path);
	for (int i = 0; i < t->n; i++)
		if (t->len[i] == pl && !memcmp(t->at[i], path, pl))
			return 1;
	return 0;
}

/* A loaded library must not be: start again audited, or end as ld.so would.
 * Never returns. Out of line: its buffers stay off the common frame. */
__attribute__((noinline, noreturn)) static void hidden_library(char **argv, const char *lib, int e)
{
	char audit[KT_PATH_BUF];
	if (audit_path(audit, sizeof audit) == 0 && !audited(audit) && argv)
		restart_audited(argv, audit);
	fail_as_loader(argv ? argv[0] : NULL, lib, e);
	__builtin_unreachable();
}

static void check_loaded(char **argv)
{
	struct trusted ok;
	trusted_split(kt_env(KILN_ENV_TRUSTED), &ok);
	for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		/* the program (""), the vDSO (no slash), kiln itself, and what
		 * the server said may be skipped */
		if (!l->l_name || !has_slash(l->l_name) || l->l_ld == _DYNAMIC ||
		    trusted(&ok, l->l_name))
			continue;
		struct kt_question q;
		int n = kt_path_at(AT_FDCWD, l->l_name, q.path);
		if (n < 0)
			continue; /* the loader opened it: it is there, or past PATH_MAX */
		int v = kt_ask_question(&q, (size_t)n, KILN_A_READ, 0);
		if (v == KILN_V_ERROR)
			return; /* no server: every file access fails (EIO) and says so */
		int e = kt_verdict_errno(v, KILN_A_READ);
		if (e)
			hidden_library(argv, l->l_name, e);
	}
}

/* A script (or an interpreter) outside the managed trees was run by path
 * (hooks/exec.c): the kernel resolved the path again. The program it runs
 * must be the ELF file checked, whose "dev:ino" the exec passed. */
static void check_expected(char **argv, char **envp)
{
	const char *want = NULL;
	for (char **e = envp; e && *e; e++)
		if ((*e)[0] == 'K' && !memcmp(*e, KILN_ENV_EXEC_EXPECT "=", sizeof KILN_ENV_EXEC_EXPECT))
			want = *e + sizeof KILN_ENV_EXEC_EXPECT;
	if (!want)
		return;
	unsigned long long id[2] = { 0, 0 };
	int k = 0;
	for (const char *p = want; *p && k < 2; p++) {
		if (*p == ':') {
			k++;
			continue;
		}
		unsigned d = *p >= 'a' ? (unsigned)(*p - 'a' + 10) : (unsigned)(*p - '0');
		id[k] = id[k] << 4 | (d & 15);
	}
	struct stat st;
	if (kt_sys4(SYS_newfstatat, AT_FDCWD, "/proc/self/exe", &st, 0) == 0 &&
	    (unsigned long long)st.st_dev == id[0] && (unsigned long long)st.st_ino == id[1])
		return;
	char msg[KT_PATH_BUF + 128];
	size_t n = 0;
	put(msg, &n, sizeof msg, "kiln: ");
	put(msg, &n, sizeof msg, argv && argv[0] ? argv[0] : "?");
	put(msg, &n, sizeof msg, ": the program run is not the file checked (replaced during exec); "
				"refused\n");
	kt_write(2, msg, n);
	kt_sys1(SYS_exit_group, 127);
}

__attribute__((constructor)) static void kt_check_loaded(int argc, char **argv, char **envp)
{
	(void)argc;
	kt_init();
	if (!kt_env(KILN_ENV_SOCKET))
		return; /* not under kiln trace */
	kt_enter();
	check_expected(argv, envp);
	check_loaded(argv);
	kt_leave();
}

/* Calls hooked functions as a program would and prints what each returned.
 *
 *   hookcall CMD ARGS... [-- CMD ARGS...]...
 *
 * One line per call: "NAME RET ERRNO" where ERRNO is the errno name, or "OK"
 * when the call succeeded (listings print their sorted entries after RET).
 * `stats PATH` calls every form of stat on PATH, each line followed by the
 * file's identity and type when it succeeded ("NAME RET OK ino=I mode=M");
 * `accesses PATH` every form of access with every mode.
 * The tests in test_trace_hooks*.py run it under the preload library. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

extern char **environ;

/* glibc exports these; its headers declare them only under _FORTIFY_SOURCE
 * or not at all any more (the __xstat era). */
int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
int __xmknod(int, const char *, mode_t, dev_t *);
int __xmknodat(int, int, const char *, mode_t, dev_t *);
ssize_t __readlink_chk(const char *, char *, size_t, size_t);
ssize_t __readlinkat_chk(int, const char *, char *, size_t, size_t);
char *__realpath_chk(const char *, char *, size_t);

static const char *ename(int ok, int e)
{
	if (ok)
		return "OK";
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

static void show(const char *name, long ret, int ok)
{
	printf("%s %ld %s\n", name, ret, ename(ok, errno));
	fflush(stdout);
}

#define CALL(name, expr)                                                       \
	do {                                                                   \
		errno = 0;                                                     \
		long r_ = (long)(expr);                                        \
		show(name, r_, r_ >= 0);                                       \
	} while (0)

#define CALLP(name, expr)                                                      \
	do {                                                                   \
		errno = 0;                                                     \
		void *p_ = (void *)(expr);                                     \
		show(name, p_ ? 0 : -1, p_ != NULL);                           \
	} while (0)

/* Every form of stat on p, and the ones the kernel or glibc refuse (a bad
 * flag, mask or version), each printed with what it read. */
static void all_stats(const char *p)
{
	struct stat st;
	struct statx sx;
	int d = open(".", O_RDONLY | O_DIRECTORY);
	static const char *const c[] = {
		"stat", "stat64", "lstat", "lstat64", "fstatat", "fstatat-nofollow",
		"fstatat-noautomount", "fstatat-badflag", "fstatat64", "__xstat", "__xstat-v0",
		"__xstat-badver", "__xstat64", "__lxstat", "__lxstat64", "__fxstatat",
		"__fxstatat-nofollow", "__fxstatat64", "statx", "statx-nofollow", "statx-sync",
		"statx-badsync", "statx-badmask", "sys-statx",
	};
	enum { FIRST_STATX = 18 };
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		memset(&st, 0, sizeof st);
		memset(&sx, 0, sizeof sx);
		errno = 0;
		long r;
		switch (i) {
		case 0: r = stat(p, &st); break;
		case 1: r = stat64(p, (struct stat64 *)&st); break;
		case 2: r = lstat(p, &st); break;
		case 3: r = lstat64(p, (struct stat64 *)&st); break;
		case 4: r = fstatat(d, p, &st, 0); break;
		case 5: r = fstatat(d, p, &st, AT_SYMLINK_NOFOLLOW); break;
		case 6: r = fstatat(AT_FDCWD, p, &st, AT_NO_AUTOMOUNT); break;
		case 7: r = fstatat(AT_FDCWD, p, &st, 0x40000000); break;
		case 8: r = fstatat64(d, p, (struct stat64 *)&st, 0); break;
		case 9: r = __xstat(1, p, &st); break;
		case 10: r = __xstat(0, p, &st); break;
		case 11: r = __xstat(7, p, &st); break;
		case 12: r = __xstat64(1, p, (struct stat64 *)&st); break;
		case 13: r = __lxstat(1, p, &st); break;
		case 14: r = __lxstat64(1, p, (struct stat64 *)&st); break;
		case 15: r = __fxstatat(1, d, p, &st, 0); break;
		case 16: r = __fxstatat(1, d, p, &st, AT_SYMLINK_NOFOLLOW); break;
		case 17: r = __fxstatat64(1, d, p, (struct stat64 *)&st, 0); break;
		case 18: r = statx(d, p, 0, STATX_BASIC_STATS, &sx); break;
		case 19: r = statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_TYPE, &sx); break;
		case 20: r = statx(AT_FDCWD, p, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx); break;
		case 21: r = statx(AT_FDCWD, p, AT_STATX_SYNC_TYPE, STATX_BASIC_STATS, &sx); break;
		case 22: r = statx(AT_FDCWD, p, 0, STATX__RESERVED, &sx); break;
		default: r = syscall(SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx); break;
		}
		int e = errno;
		printf("%s %ld %s", c[i], r, ename(r == 0, e));
		if (r == 0 && i >= FIRST_STATX)
			printf(" ino=%llu mode=%o mask=%x", (unsigned long long)sx.stx_ino, sx.stx_mode,
			       sx.stx_mask & (STATX_INO | STATX_TYPE | STATX_MODE));
		else if (r == 0)
			printf(" ino=%llu mode=%o", (unsigned long long)st.st_ino, st.st_mode);
		printf("\n");
	}
	close(d);
}

/* Every form of access on p, with each mode, and the ones the kernel
 * refuses (a bad mode or flag). */
static void all_accesses(const char *p)
{
	static const int modes[] = { F_OK, R_OK, W_OK, X_OK, R_OK | W_OK | X_OK };
	for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		int md = modes[m];
		errno = 0;
		long r = access(p, md);
		printf("access-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = faccessat(AT_FDCWD, p, md, 0);
		printf("faccessat-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = faccessat(AT_FDCWD, p, md, AT_EACCESS);
		printf("faccessat-eaccess-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = faccessat(AT_FDCWD, p, md, AT_SYMLINK_NOFOLLOW);
		printf("faccessat-nofollow-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = eaccess(p, md);
		printf("eaccess-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = euidaccess(p, md);
		printf("euidaccess-%d %ld %s\n", md, r, ename(r == 0, errno));
		errno = 0;
		r = syscall(SYS_faccessat2, AT_FDCWD, p, md, AT_EACCESS);
		printf("sys-faccessat2-%d %ld %s\n", md, r, ename(r == 0, errno));
	}
	errno = 0;
	long r = access(p, 8);
	printf("access-badmode %ld %s\n", r, ename(r == 0, errno));
	errno = 0;
	r = faccessat(AT_FDCWD, p, R_OK, 0x40000000);
	printf("faccessat-badflag %ld %s\n", r, ename(r == 0, errno));
}

static int open_flags(const char *s)
{
	int f = 0;
	if (strchr(s, 'w'))
		f |= strchr(s, 'r') ? O_RDWR : O_WRONLY;
	if (strchr(s, 'c'))
		f |= O_CREAT;
	if (strchr(s, 'e'))
		f |= O_EXCL;
	if (strchr(s, 't'))
		f |= O_TRUNC;
	if (strchr(s, 'd'))
		f |= O_DIRECTORY;
	if (strchr(s, 'n'))
		f |= O_NOFOLLOW;
	if (strchr(s, 'p'))
		f |= O_PATH;
	return f;
}

static int access_mode(const char *s)
{
	int m = 0;
	if (strchr(s, 'r')) m |= R_OK;
	if (strchr(s, 'w')) m |= W_OK;
	if (strchr(s, 'x')) m |= X_OK;
	return m; /* "f" -> F_OK */
}

/* Sorted listing printed on one line. */
static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *names[4096];
static int nnames;

static void add_name(const char *n)
{
	if (!strcmp(n, ".") || !strcmp(n, ".."))
		return;
	if (nnames < 4096)
		names[nnames++] = strdup(n);
}

static void show_list(const char *name, long ret, int ok)
{
	qsort(names, (size_t)nnames, sizeof *names, cmpstr);
	printf("%s %ld %s", name, ret, ename(ok, errno));
	for (int i = 0; i < nnames; i++) {
		printf(" %s", names[i]);
		free(names[i]);
	}
	printf("\n");
	fflush(stdout);
	nnames = 0;
}

static int walk_fn(const char *p, const struct stat *sb, int type, struct FTW *fb)
{
	(void)sb; (void)type; (void)fb;
	add_name(p);
	return 0;
}

static int ftw_fn(const char *p, const struct stat *sb, int type)
{
	(void)sb; (void)type;
	add_name(p);
	return 0;
}

/* ---- threads racing on the first connection ---------------------------- */
static pthread_barrier_t barrier;
static const char *race_path;
static int race_results[64];

static void *race(void *arg)
{
	int i = (int)(long)arg;
	struct stat st;
	pthread_barrier_wait(&barrier);
	errno = 0;
	int bad = 0;
	for (int k = 0; k < 50; k++) {
		int r = stat(race_path, &st);
		if (r != -1 || errno != ENOENT)
			bad = 1;
	}
	race_results[i] = bad ? -1 : ENOENT;
	return NULL;
}

/* ---- fork while other threads are in the middle of a question ---------- */
static volatile int storm_stop;
static const char *storm_path;

static void *storm(void *arg)
{
	(void)arg;
	struct stat st;
	while (!storm_stop)
		stat(storm_path, &st);
	return NULL;
}

static void storm_start(pthread_t t[4])
{
	storm_stop = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, storm, NULL);
}

static void storm_end(pthread_t t[4])
{
	storm_stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

/* ---- what a vfork child found, in the memory it shares with its parent -- */
static volatile int vf_ret, vf_errno;

static int spawn_wait(pid_t pid);

/* The program and arguments of a command from a[first] up to ";" (or the
 * end) into argv (at most 63, NULL-terminated); returns the index of ";". */
static int argv_until_semicolon(char **a, int n, int first, char **argv)
{
	int k = first;
	while (k < n && strcmp(a[k], ";"))
		k++;
	int m = 0;
	for (int i = first; i < k && m < 63; i++)
		argv[m++] = a[i];
	argv[m] = NULL;
	return k;
}


/* vfork, then in the child: dup2(0, dup_fd) if dup_fd >= 0, closefrom(3)
 * if closeall, stat(must_be_absent) if given (ENOENT expected); then exec.
 * A failure in the child sets vf_ret; returns the child's status. */
static __attribute__((noinline)) int vfork_exec(char **argv, int dup_fd, int closeall,
						const char *must_be_absent)
{
	vf_ret = 0;
	pid_t pid = vfork();
	if (pid == 0) {
		struct stat s;
		if (dup_fd >= 0 && dup2(0, dup_fd) != dup_fd)
			vf_ret = -1;
		if (closeall)
			closefrom(3);
		if (must_be_absent && (stat(must_be_absent, &s) != -1 || errno != ENOENT))
			vf_ret = 1;
		execv(argv[0], argv);
		_exit(127);
	}
	return spawn_wait(pid);
}

/* ---- a hook entered from a signal handler ------------------------------- */
static const char *sig_path;
static volatile sig_atomic_t sig_calls, sig_wrong;

static void on_alarm(int s)
{
	(void)s;
	int saved = errno;
	struct stat st;
	int r = stat(sig_path, &st);
	if (r != -1 || errno != ENOENT)
		sig_wrong++;
	/* Stop the timer from here: when one handler outlasts the interval
	 * (under strace or a loaded machine) the next signal is always
	 * pending and the main loop would never run again to see the count. */
	if (++sig_calls >= 200) {
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_REAL, &off, NULL);
	}
	errno = saved;
}

/* ---- another thread using the environment during system() and popen() ---- */
static int envr_in[2], envr_out[2];
static char **envr_before;
static int envr_swapped;

/* Waits until the shell started by system() pokes it, looks at environ and
 * sets a variable while the call is in progress, then lets the shell end. */
static void *envr_thread(void *arg)
{
	(void)arg;
	char c;
	if (read(envr_in[0], &c, 1) == 1) {
		envr_swapped = *(char **volatile *)&environ != envr_before;
		setenv("HOOKCALL_RACE", "set", 1);
	}
	if (write(envr_out[1], "\n", 1) != 1)
		return NULL;
	return NULL;
}

static volatile int envr_stop;
static long envr_seen;

/* Spins, counting the moments environ is not the program's own array. */
static void *envr_spin(void *arg)
{
	(void)arg;
	while (!envr_stop)
		if (*(char **volatile *)&environ != envr_before)
			envr_seen++;
	return NULL;
}

static int run(char **a, int n);

/* openat with the syscall instruction itself: no hook sees it (to obtain an
 * fd of a hidden file, as a program that bypasses the library could). */
static int raw_open(const char *path)
{
	long ret;
	register long r10 __asm__("r10") = 0;
	__asm__ volatile("syscall" : "=a"(ret)
			 : "a"((long)SYS_openat), "D"((long)AT_FDCWD), "S"(path),
			   "d"((long)(O_RDONLY | O_CLOEXEC)), "r"(r10)
			 : "rcx", "r11", "memory");
	return (int)ret;
}

static int spawn_wait(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A child that tried to exec: it says why it failed; the parent reports
 * the status of one that did run. */
static void exec_failed(const char *c)
{
	printf("%s -1 %s\n", c, ename(0, errno));
	fflush(stdout);
	_exit(127);
}

static void exec_report(const char *c, pid_t pid)
{
	int s = spawn_wait(pid);
	if (s != 127)
		printf("%s %d OK\n", c, s);
	fflush(stdout);
}

/* Environment variants for exec: clear, unset LD_PRELOAD, empty it, or point
 * KILN_SOCKET elsewhere. */
static char **env_variant(const char *how)
{
	static char *vec[1024];
	int k = 0;
	if (!strcmp(how, "clear")) {
		vec[0] = NULL;
		return vec;
	}
	for (char **e = environ; *e && k < 1000; e++) {
		if (!strncmp(*e, "LD_PRELOAD=", 11) && strcmp(how, "keep"))
			continue;
		if (!strncmp(*e, "KILN_SOCKET=", 12) && !strcmp(how, "badsock"))
			continue;
		vec[k++] = *e;
	}
	if (!strcmp(how, "empty"))
		vec[k++] = "LD_PRELOAD=";
	if (!strcmp(how, "badsock"))
		vec[k++] = "KILN_SOCKET=/nonexistent/socket";
	vec[k] = NULL;
	return vec;
}

/* Runs one command at a[0] with its arguments; returns how many words it used. */
static int one(char **a, int n)
{
	const char *c = a[0];
	struct stat st;
	char buf[4096];
#define NEED(k) if (n < (k) + 1) { fprintf(stderr, "hookcall: %s needs %d args\n", c, k); exit(2); }
	if (!strcmp(c, "open")) { NEED(2); CALL("open", open(a[1], open_flags(a[2]), 0644)); return 3; }
	if (!strcmp(c, "open64")) { NEED(2); CALL("open64", open64(a[1], open_flags(a[2]), 0644)); return 3; }
	if (!strcmp(c, "openat")) {
		NEED(3);
		int d = open(a[1], O_RDONLY | O_DIRECTORY);
		CALL("openat", openat(d, a[2], open_flags(a[3]), 0644));
		return 4;
	}
	if (!strcmp(c, "raw-openat")) {
		/* a dirfd obtained behind kiln's back: its path still counts */
		NEED(2);
		int d = raw_open(a[1]);
		CALL("raw-openat", openat(d, a[2], O_RDONLY));
		CALL("raw-fstatat", fstatat(d, a[2], &st, 0));
		return 3;
	}
	if (!strcmp(c, "creat")) { NEED(1); CALL("creat", creat(a[1], 0644)); return 2; }
	if (!strcmp(c, "fopen")) { NEED(2); CALLP("fopen", fopen(a[1], a[2])); return 3; }
	if (!strcmp(c, "freopen")) {
		NEED(2);
		FILE *f = fopen("/dev/null", "r");
		CALLP("freopen", freopen(a[1], a[2], f));
		return 3;
	}
	if (!strcmp(c, "stat")) { NEED(1); CALL("stat", stat(a[1], &st)); return 2; }
	if (!strcmp(c, "accesses")) {
		NEED(1);
		all_accesses(a[1]);
		return 2;
	}
	if (!strcmp(c, "stats")) {
		NEED(1);
		all_stats(a[1]);
		return 2;
	}
	if (!strcmp(c, "lstat")) { NEED(1); CALL("lstat", lstat(a[1], &st)); return 2; }
	if (!strcmp(c, "fstatat")) {
		NEED(3);
		int d = open(a[1], O_RDONLY | O_DIRECTORY);
		int fl = !strcmp(a[3], "nofollow") ? AT_SYMLINK_NOFOLLOW : 0;
		CALL("fstatat", fstatat(d, a[2], &st, fl));
		return 4;
	}
	if (!strcmp(c, "fstatat-empty")) {
		NEED(1);
		int fd = open(a[1], O_PATH);
		CALL("fstatat-empty", fstatat(fd, "", &st, AT_EMPTY_PATH));
		return 2;
	}
	if (!strcmp(c, "statx")) {
		NEED(1);
		struct statx sx;
		CALL("statx", statx(AT_FDCWD, a[1], 0, STATX_BASIC_STATS, &sx));
		return 2;
	}
	if (!strcmp(c, "access")) { NEED(2); CALL("access", access(a[1], access_mode(a[2]))); return 3; }
	if (!strcmp(c, "faccessat")) { NEED(2); CALL("faccessat", faccessat(AT_FDCWD, a[1], access_mode(a[2]), 0)); return 3; }
	if (!strcmp(c, "euidaccess")) { NEED(2); CALL("euidaccess", euidaccess(a[1], access_mode(a[2]))); return 3; }
	if (!strcmp(c, "readlink")) { NEED(1); CALL("readlink", readlink(a[1], buf, sizeof buf)); return 2; }
	if (!strcmp(c, "readlinkat")) { NEED(1); CALL("readlinkat", readlinkat(AT_FDCWD, a[1], buf, sizeof buf)); return 2; }
	if (!strcmp(c, "realpath")) { NEED(1); CALLP("realpath", realpath(a[1], buf)); return 2; }
	if (!strcmp(c, "__realpath_chk")) { NEED(1); CALLP(c, __realpath_chk(a[1], buf, sizeof buf)); return 2; }
	if (!strcmp(c, "chdir")) { NEED(1); CALL("chdir", chdir(a[1])); return 2; }
	if (!strcmp(c, "fchdir")) {
		NEED(1);
		int fd = open(a[1], O_RDONLY | O_DIRECTORY);
		CALL("fchdir", fchdir(fd));
		return 2;
	}
	if (!strcmp(c, "mkdir")) { NEED(1); CALL("mkdir", mkdir(a[1], 0755)); return 2; }
	if (!strcmp(c, "mkdirat")) { NEED(1); CALL("mkdirat", mkdirat(AT_FDCWD, a[1], 0755)); return 2; }
	if (!strcmp(c, "mkfifo")) { NEED(1); CALL("mkfifo", mkfifo(a[1], 0644)); return 2; }
	if (!strcmp(c, "mknod")) { NEED(1); CALL("mknod", mknod(a[1], S_IFIFO | 0644, 0)); return 2; }
	if (!strcmp(c, "rmdir")) { NEED(1); CALL("rmdir", rmdir(a[1])); return 2; }
	if (!strcmp(c, "unlink")) { NEED(1); CALL("unlink", unlink(a[1])); return 2; }
	if (!strcmp(c, "unlinkat")) { NEED(1); CALL("unlinkat", unlinkat(AT_FDCWD, a[1], 0)); return 2; }
	if (!strcmp(c, "remove")) { NEED(1); CALL("remove", remove(a[1])); return 2; }
	if (!strcmp(c, "rename")) { NEED(2); CALL("rename", rename(a[1], a[2])); return 3; }
	if (!strcmp(c, "renameat")) { NEED(2); CALL("renameat", renameat(AT_FDCWD, a[1], AT_FDCWD, a[2])); return 3; }
	if (!strcmp(c, "renameat2")) { NEED(2); CALL("renameat2", renameat2(AT_FDCWD, a[1], AT_FDCWD, a[2], 0)); return 3; }
	if (!strcmp(c, "link")) { NEED(2); CALL("link", link(a[1], a[2])); return 3; }
	if (!strcmp(c, "linkat")) { NEED(2); CALL("linkat", linkat(AT_FDCWD, a[1], AT_FDCWD, a[2], 0)); return 3; }
	if (!strcmp(c, "linkat-follow")) {
		NEED(2);
		CALL("linkat-follow", linkat(AT_FDCWD, a[1], AT_FDCWD, a[2], AT_SYMLINK_FOLLOW));
		return 3;
	}
	if (!strcmp(c, "linkat-empty")) { /* a new name for a file opened for reading */
		NEED(2);
		int fd = open(a[1], O_RDONLY);
		CALL("linkat-empty", linkat(fd, "", AT_FDCWD, a[2], AT_EMPTY_PATH));
		return 3;
	}
	if (!strcmp(c, "symlink")) { NEED(2); CALL("symlink", symlink(a[1], a[2])); return 3; }
	if (!strcmp(c, "symlinkat")) { NEED(2); CALL("symlinkat", symlinkat(a[1], AT_FDCWD, a[2])); return 3; }
	if (!strcmp(c, "chmod")) { NEED(1); CALL("chmod", chmod(a[1], 0644)); return 2; }
	if (!strcmp(c, "fchmodat")) { NEED(1); CALL("fchmodat", fchmodat(AT_FDCWD, a[1], 0644, 0)); return 2; }
	if (!strcmp(c, "chown")) { NEED(1); CALL("chown", chown(a[1], getuid(), getgid())); return 2; }
	if (!strcmp(c, "lchown")) { NEED(1); CALL("lchown", lchown(a[1], getuid(), getgid())); return 2; }
	if (!strcmp(c, "fchownat")) { NEED(1); CALL("fchownat", fchownat(AT_FDCWD, a[1], getuid(), getgid(), AT_SYMLINK_NOFOLLOW)); return 2; }
	if (!strcmp(c, "truncate")) { NEED(1); CALL("truncate", truncate(a[1], 0)); return 2; }
	if (!strcmp(c, "utime")) { NEED(1); CALL("utime", utime(a[1], NULL)); return 2; }
	if (!strcmp(c, "utimes")) { NEED(1); CALL("utimes", utimes(a[1], NULL)); return 2; }
	if (!strcmp(c, "lutimes")) { NEED(1); CALL("lutimes", lutimes(a[1], NULL)); return 2; }
	if (!strcmp(c, "utimensat")) { NEED(1); CALL("utimensat", utimensat(AT_FDCWD, a[1], NULL, 0)); return 2; }
	if (!strcmp(c, "mkstemp")) { NEED(1); snprintf(buf, sizeof buf, "%s", a[1]); CALL("mkstemp", mkstemp(buf)); return 2; }
	if (!strcmp(c, "mkdtemp")) { NEED(1); snprintf(buf, sizeof buf, "%s", a[1]); CALLP("mkdtemp", mkdtemp(buf)); return 2; }
	if (!strcmp(c, "oddpaths")) {
		/* NULL and "" are the kernel's to refuse, with its own errno */
		const char *volatile nul = NULL;
		CALL("stat-null", stat(nul, &st));
		CALL("open-null", open(nul, O_RDONLY));
		CALL("stat-empty", stat("", &st));
		CALL("open-empty", open("", O_RDONLY));
		CALL("mkdir-empty", mkdir("", 0755));
		CALL("fstatat-empty-noflag", fstatat(AT_FDCWD, "", &st, 0));
		CALL("readlink-null", readlink(nul, buf, sizeof buf));
		return 1;
	}
	/* ---- the rest of the table, one line each ---- */
	struct stat64 st64;
	struct statfs sfs;
	struct statfs64 sfs64;
	struct statvfs svfs;
	struct statvfs64 svfs64;
	dev_t dev = 0;
	if (!strcmp(c, "__open_2")) { NEED(1); CALL(c, __open_2(a[1], O_RDONLY)); return 2; }
	if (!strcmp(c, "__open64_2")) { NEED(1); CALL(c, __open64_2(a[1], O_RDONLY)); return 2; }
	if (!strcmp(c, "__openat_2")) { NEED(1); CALL(c, __openat_2(AT_FDCWD, a[1], O_RDONLY)); return 2; }
	if (!strcmp(c, "__openat64_2")) { NEED(1); CALL(c, __openat64_2(AT_FDCWD, a[1], O_RDONLY)); return 2; }
	if (!strcmp(c, "openat64")) { NEED(2); CALL(c, openat64(AT_FDCWD, a[1], open_flags(a[2]), 0644)); return 3; }
	if (!strcmp(c, "creat64")) { NEED(1); CALL(c, creat64(a[1], 0644)); return 2; }
	if (!strcmp(c, "fopen64")) { NEED(2); CALLP(c, fopen64(a[1], a[2])); return 3; }
	if (!strcmp(c, "freopen64")) { NEED(2); CALLP(c, freopen64(a[1], a[2], fopen("/dev/null", "r"))); return 3; }
	if (!strcmp(c, "stat64")) { NEED(1); CALL(c, stat64(a[1], &st64)); return 2; }
	if (!strcmp(c, "lstat64")) { NEED(1); CALL(c, lstat64(a[1], &st64)); return 2; }
	if (!strcmp(c, "fstatat64")) { NEED(1); CALL(c, fstatat64(AT_FDCWD, a[1], &st64, 0)); return 2; }
	if (!strcmp(c, "__xstat")) { NEED(1); CALL(c, __xstat(1, a[1], &st)); return 2; }
	if (!strcmp(c, "__xstat64")) { NEED(1); CALL(c, __xstat64(1, a[1], &st64)); return 2; }
	if (!strcmp(c, "__lxstat")) { NEED(1); CALL(c, __lxstat(1, a[1], &st)); return 2; }
	if (!strcmp(c, "__lxstat64")) { NEED(1); CALL(c, __lxstat64(1, a[1], &st64)); return 2; }
	if (!strcmp(c, "__fxstatat")) { NEED(1); CALL(c, __fxstatat(1, AT_FDCWD, a[1], &st, 0)); return 2; }
	if (!strcmp(c, "__fxstatat64")) { NEED(1); CALL(c, __fxstatat64(1, AT_FDCWD, a[1], &st64, 0)); return 2; }
	if (!strcmp(c, "statfs")) { NEED(1); CALL(c, statfs(a[1], &sfs)); return 2; }
	if (!strcmp(c, "statfs64")) { NEED(1); CALL(c, statfs64(a[1], &sfs64)); return 2; }
	if (!strcmp(c, "statvfs")) { NEED(1); CALL(c, statvfs(a[1], &svfs)); return 2; }
	if (!strcmp(c, "statvfs64")) { NEED(1); CALL(c, statvfs64(a[1], &svfs64)); return 2; }
	if (!strcmp(c, "pathconf")) { NEED(1); CALL(c, pathconf(a[1], _PC_NAME_MAX)); return 2; }
	if (!strcmp(c, "eaccess")) { NEED(2); CALL(c, eaccess(a[1], access_mode(a[2]))); return 3; }
	if (!strcmp(c, "__readlink_chk")) { NEED(1); CALL(c, __readlink_chk(a[1], buf, sizeof buf, sizeof buf)); return 2; }
	if (!strcmp(c, "__readlinkat_chk")) { NEED(1); CALL(c, __readlinkat_chk(AT_FDCWD, a[1], buf, sizeof buf, sizeof buf)); return 2; }
	if (!strcmp(c, "canonicalize_file_name")) { NEED(1); CALLP(c, canonicalize_file_name(a[1])); return 2; }
	if (!strcmp(c, "setxattr")) { NEED(1); CALL(c, setxattr(a[1], "user.kiln", "1", 1, 0)); return 2; }
	if (!strcmp(c, "lsetxattr")) { NEED(1); CALL(c, lsetxattr(a[1], "user.kiln", "1", 1, 0)); return 2; }
	if (!strcmp(c, "getxattr")) { NEED(1); CALL(c, getxattr(a[1], "user.kiln", buf, sizeof buf)); return 2; }
	if (!strcmp(c, "lgetxattr")) { NEED(1); CALL(c, lgetxattr(a[1], "user.kiln", buf, sizeof buf)); return 2; }
	if (!strcmp(c, "listxattr")) { NEED(1); CALL(c, listxattr(a[1], buf, sizeof buf)); return 2; }
	if (!strcmp(c, "llistxattr")) { NEED(1); CALL(c, llistxattr(a[1], buf, sizeof buf)); return 2; }
	if (!strcmp(c, "removexattr")) { NEED(1); CALL(c, removexattr(a[1], "user.kiln")); return 2; }
	if (!strcmp(c, "lremovexattr")) { NEED(1); CALL(c, lremovexattr(a[1], "user.kiln")); return 2; }
	if (!strcmp(c, "chroot")) {
		/* in a child: an allowed chroot would change this process's root */
		NEED(1);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			CALL(c, chroot(a[1]));
			_exit(0);
		}
		spawn_wait(pid);
		return 2;
	}
	if (!strcmp(c, "mknodat")) { NEED(1); CALL(c, mknodat(AT_FDCWD, a[1], S_IFIFO | 0644, 0)); return 2; }
	if (!strcmp(c, "__xmknod")) { NEED(1); CALL(c, __xmknod(0, a[1], S_IFIFO | 0644, &dev)); return 2; }
	if (!strcmp(c, "__xmknodat")) { NEED(1); CALL(c, __xmknodat(0, AT_FDCWD, a[1], S_IFIFO | 0644, &dev)); return 2; }
	if (!strcmp(c, "mkfifoat")) { NEED(1); CALL(c, mkfifoat(AT_FDCWD, a[1], 0644)); return 2; }
	if (!strcmp(c, "lchmod")) { NEED(1); CALL(c, lchmod(a[1], 0644)); return 2; }
	if (!strcmp(c, "truncate64")) { NEED(1); CALL(c, truncate64(a[1], 0)); return 2; }
	if (!strcmp(c, "futimesat")) { NEED(1); CALL(c, futimesat(AT_FDCWD, a[1], NULL)); return 2; }
	if (!strcmp(c, "opendir")) { NEED(1); CALLP(c, opendir(a[1])); return 2; }
	if (!strcmp(c, "mkstemp64") || !strcmp(c, "mkostemp") || !strcmp(c, "mkostemp64") ||
	    !strcmp(c, "mkstemps") || !strcmp(c, "mkstemps64") || !strcmp(c, "mkostemps") ||
	    !strcmp(c, "mkostemps64")) {
		NEED(1);
		snprintf(buf, sizeof buf, "%s", a[1]);
		int r = !strcmp(c, "mkstemp64") ? mkstemp64(buf)
			: !strcmp(c, "mkostemp") ? mkostemp(buf, O_CLOEXEC)
			: !strcmp(c, "mkostemp64") ? mkostemp64(buf, O_CLOEXEC)
			: !strcmp(c, "mkstemps") ? mkstemps(buf, 0)
			: !strcmp(c, "mkstemps64") ? mkstemps64(buf, 0)
			: !strcmp(c, "mkostemps") ? mkostemps(buf, 0, O_CLOEXEC)
			: mkostemps64(buf, 0, O_CLOEXEC);
		show(c, r, r >= 0);
		return 2;
	}
	if (!strcmp(c, "tmpfile64")) { CALLP(c, tmpfile64()); return 1; }
	if (!strcmp(c, "tmpfile")) { CALLP("tmpfile", tmpfile()); return 1; }
	if (!strcmp(c, "dlopen")) {
		NEED(1);
		errno = 0;
		void *h = dlopen(a[1], RTLD_NOW);
		const char *msg = h ? NULL : dlerror();
		printf("dlopen %d %s\n", h ? 0 : -1, h ? "OK" : (msg && strstr(msg, "No such file") ? "ENOENT" : msg ? msg : "?"));
		fflush(stdout);
		return 2;
	}
	/* ---- listings ---- */
	if (!strcmp(c, "readdir") || !strcmp(c, "readdir_r") || !strcmp(c, "readdir64")) {
		NEED(1);
		DIR *d = opendir(a[1]);
		if (!d) { show_list(c, -1, 0); return 2; }
		errno = 0;
		if (!strcmp(c, "readdir_r")) {
			struct dirent ent, *res;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
			while (readdir_r(d, &ent, &res) == 0 && res)
				add_name(res->d_name);
#pragma GCC diagnostic pop
		} else if (!strcmp(c, "readdir64")) {
			struct dirent64 *e;
			while ((e = readdir64(d)))
				add_name(e->d_name);
		} else {
			struct dirent *e;
			while ((e = readdir(d)))
				add_name(e->d_name);
		}
		int ok = errno == 0;
		closedir(d);
		show_list(c, ok ? 0 : -1, ok);
		return 2;
	}
	if (!strcmp(c, "manydirs")) {
		/* manydirs N DIR: N streams of DIR open at once, read interleaved;
		 * prints the listing of the last one and how many agreed with it */
		NEED(2);
		int nd = atoi(a[1]);
		DIR *ds[200];
		for (int i = 0; i < nd && i < 200; i++)
			ds[i] = opendir(a[2]);
		char *seen[200][64];
		int cnt[200] = { 0 };
		for (int round = 0, more = 1; more; round++) {
			more = 0;
			for (int i = 0; i < nd; i++) {
				struct dirent *e = ds[i] ? readdir(ds[i]) : NULL;
				if (e && cnt[i] < 64) {
					seen[i][cnt[i]++] = strdup(e->d_name);
					more = 1;
				}
			}
		}
		int agree = 0;
		for (int i = 0; i < nd; i++) {
			int same = cnt[i] == cnt[nd - 1];
			for (int k = 0; same && k < cnt[i]; k++)
				same = !strcmp(seen[i][k], seen[nd - 1][k]);
			agree += same;
		}
		for (int k = 0; k < cnt[nd - 1]; k++)
			add_name(seen[nd - 1][k]);
		for (int i = 0; i < nd; i++)
			if (ds[i])
				closedir(ds[i]);
		printf("manydirs agree=%d", agree);
		show_list("", 0, 1);
		return 3;
	}
	if (!strcmp(c, "getdents64") || !strcmp(c, "sys_getdents64")) {
		NEED(1);
		int fd = open(a[1], O_RDONLY | O_DIRECTORY);
		if (fd < 0) {
			show_list(c, -1, 0);
			return 2;
		}
		long r;
		char dbuf[1024]; /* small: several buffers per directory */
		errno = 0;
		for (;;) {
			r = !strcmp(c, "getdents64") ? getdents64(fd, dbuf, sizeof dbuf)
						     : syscall(SYS_getdents64, fd, dbuf, sizeof dbuf);
			if (r <= 0)
				break;
			for (long p = 0; p < r;) {
				struct dirent64 *e = (struct dirent64 *)(dbuf + p);
				add_name(e->d_name);
				p += e->d_reclen;
			}
		}
		close(fd);
		show_list(c, r, r == 0);
		return 2;
	}
	if (!strcmp(c, "scandir")) {
		NEED(1);
		struct dirent **list;
		errno = 0;
		int k = scandir(a[1], &list, NULL, alphasort);
		for (int i = 0; i < k; i++) {
			add_name(list[i]->d_name);
			free(list[i]);
		}
		if (k >= 0)
			free(list);
		show_list(c, k < 0 ? -1 : 0, k >= 0);
		return 2;
	}
	if (!strcmp(c, "nftw") || !strcmp(c, "ftw")) {
		NEED(1);
		errno = 0;
		int r = !strcmp(c, "nftw") ? nftw(a[1], walk_fn, 8, FTW_PHYS) : ftw(a[1], ftw_fn, 8);
		show_list(c, r, r == 0);
		return 2;
	}
	if (!strcmp(c, "fts_children")) {
		/* fts_children DIR chdir|nochdir: the roots list, then at every
		 * directory fts_read returns, its fts_children list ("c:PATH"),
		 * and what fts_read returns after it ("r:PATH") */
		NEED(2);
		char *roots[] = { a[1], NULL };
		int opts = FTS_PHYSICAL | (!strcmp(a[2], "nochdir") ? FTS_NOCHDIR : 0);
		FTS *f = fts_open(roots, opts, NULL);
		if (!f) {
			show_list(c, -1, 0);
			return 3;
		}
		char buf[8192];
		for (FTSENT *k = fts_children(f, 0); k; k = k->fts_link) {
			snprintf(buf, sizeof buf, "root:%s", k->fts_name);
			add_name(buf);
		}
		FTSENT *e;
		while ((e = fts_read(f))) {
			if (e->fts_info == FTS_DP)
				continue;
			snprintf(buf, sizeof buf, "r:%s", e->fts_path);
			add_name(buf);
			if (e->fts_info != FTS_D)
				continue;
			char dir[4096]; /* fts_children may reuse the path buffer */
			snprintf(dir, sizeof dir, "%s", e->fts_path);
			errno = 0;
			FTSENT *k = fts_children(f, 0);
			if (!k && errno) {
				snprintf(buf, sizeof buf, "error:%s", dir);
				add_name(buf);
			}
			for (; k; k = k->fts_link) {
				snprintf(buf, sizeof buf, "c:%s/%s", dir, k->fts_name);
				add_name(buf);
			}
		}
		errno = 0;
		fts_close(f);
		show_list(c, 0, 1);
		return 3;
	}
	if (!strcmp(c, "fts")) {
		NEED(1);
		char *roots[] = { a[1], NULL };
		errno = 0;
		FTS *f = fts_open(roots, FTS_PHYSICAL, NULL);
		FTSENT *e;
		int ferr = 0;
		while (f && (e = fts_read(f))) {
			if (e->fts_info == FTS_NS || e->fts_info == FTS_ERR || e->fts_info == FTS_DNR)
				ferr = e->fts_errno;
			else if (e->fts_info != FTS_DP)
				add_name(e->fts_path);
		}
		if (ferr)
			errno = ferr;
		int ok = f && errno == 0;
		if (f)
			fts_close(f);
		show_list(c, ok ? 0 : -1, ok);
		return 2;
	}
	if (!strncmp(c, "glob", 4)) {
		NEED(1);
		glob_t g;
		int gf = !strcmp(c, "glob_mark")      ? GLOB_MARK
			 : !strcmp(c, "glob_nocheck") ? GLOB_NOCHECK
			 : !strcmp(c, "glob_nomagic") ? GLOB_NOMAGIC
						      : 0;
		int r = glob(a[1], gf, NULL, &g);
		for (size_t i = 0; r == 0 && i < g.gl_pathc; i++)
			add_name(g.gl_pathv[i]);
		if (r == 0)
			globfree(&g);
		printf("glob %d", r);
		qsort(names, (size_t)nnames, sizeof *names, cmpstr);
		for (int i = 0; i < nnames; i++) {
			printf(" %s", names[i]);
			free(names[i]);
		}
		nnames = 0;
		printf("\n");
		fflush(stdout);
		return 2;
	}
	/* ---- syscall() ---- */
	if (!strcmp(c, "sys_openat2")) {
		NEED(1);
		struct open_how how = { .flags = O_RDONLY };
		CALL("sys_openat2", syscall(SYS_openat2, AT_FDCWD, a[1], &how, sizeof how));
		return 2;
	}
	if (!strcmp(c, "sys_statx")) {
		NEED(1);
		struct statx sx;
		CALL("sys_statx", syscall(SYS_statx, AT_FDCWD, a[1], 0, STATX_BASIC_STATS, &sx));
		return 2;
	}
	if (!strcmp(c, "sys_faccessat2")) { NEED(1); CALL("sys_faccessat2", syscall(SYS_faccessat2, AT_FDCWD, a[1], F_OK, 0)); return 2; }
	if (!strcmp(c, "sys_renameat2")) { NEED(2); CALL("sys_renameat2", syscall(SYS_renameat2, AT_FDCWD, a[1], AT_FDCWD, a[2], 0)); return 3; }
	if (!strcmp(c, "sys_chdir")) {
		/* deliberately unhooked: the coverage check must catch it */
		NEED(1);
		CALL("sys_chdir", syscall(SYS_chdir, a[1]));
		return 2;
	}
	if (!strcmp(c, "sys_openat")) { NEED(1); CALL("sys_openat", syscall(SYS_openat, AT_FDCWD, a[1], O_RDONLY, 0)); return 2; }
	/* ---- fds ---- */
	if (!strcmp(c, "close_range")) { CALL("close_range", close_range(3, ~0u, 0)); return 1; }
	if (!strcmp(c, "sys_close_range")) { CALL("sys_close_range", syscall(SYS_close_range, 3, ~0u, 0)); return 1; }
	if (!strcmp(c, "sys_closeall")) {
		for (int fd = 3; fd < 1024; fd++)
			syscall(SYS_close, fd);
		printf("sys_closeall 0 OK\n");
		return 1;
	}
	if (!strcmp(c, "closefrom")) { closefrom(3); printf("closefrom 0 OK\n"); return 1; }
	if (!strcmp(c, "open_fds") || !strcmp(c, "sys_open_fds")) {
		/* the fds from 3 to 1023 that fcntl(F_GETFD) (or the syscall)
		 * says are open: libbsd's test of closefrom does this */
		int sys = c[0] == 's';
		printf("%s", c);
		for (int fd = 3; fd < 1024; fd++) {
			errno = 0;
			long r = sys ? syscall(SYS_fcntl, fd, F_GETFD) : fcntl(fd, F_GETFD);
			if (r != -1 || errno != EBADF)
				printf(" %d", fd);
		}
		printf("\n");
		return 1;
	}
	if (!strcmp(c, "closeall")) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		printf("closeall 0 OK\n");
		return 1;
	}
	if (!strcmp(c, "dup2all")) {
		/* dup2 onto every number from 3 to 300, then close them again */
		int bad = 0;
		for (int fd = 3; fd < 300; fd++)
			if (dup2(0, fd) != fd)
				bad++;
		for (int fd = 3; fd < 300; fd++)
			close(fd);
		printf("dup2all %d %s\n", bad, bad ? "FAIL" : "OK");
		return 1;
	}
	if (!strcmp(c, "dup3all")) {
		int bad = 0;
		for (int fd = 3; fd < 300; fd++)
			if (dup3(0, fd, O_CLOEXEC) != fd)
				bad++;
		for (int fd = 3; fd < 300; fd++)
			close(fd);
		printf("dup3all %d %s\n", bad, bad ? "FAIL" : "OK");
		return 1;
	}
	/* ---- processes ---- */
	if (!strcmp(c, "fork")) {
		/* fork CMD ARGS... ; -- the child runs CMD and exits */
		NEED(1);
		int k = 1;
		while (k < n && strcmp(a[k], ";"))
			k++;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			run(a + 1, k - 1);
			fflush(stdout);
			_exit(0);
		}
		spawn_wait(pid);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "vfork-exec")) {
		NEED(1);
		fflush(stdout);
		char *argv[64];
		int k = argv_until_semicolon(a, n, 1, argv);
		pid_t pid = vfork();
		if (pid == 0) {
			execv(argv[0], argv);
			_exit(127);
		}
		printf("vfork-exec %d\n", spawn_wait(pid));
		fflush(stdout);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "vfork-stat")) {
		/* vfork-stat PATH: the child asks and _exits; it reports through
		 * the memory it shares with the parent, which prints */
		NEED(1);
		fflush(stdout);
		pid_t pid = vfork();
		if (pid == 0) {
			struct stat s;
			vf_ret = stat(a[1], &s);
			vf_errno = errno;
			_exit(0);
		}
		int w = spawn_wait(pid);
		printf("vfork-stat %d %s%s\n", vf_ret, ename(vf_ret == 0, vf_errno), w ? " FAIL" : "");
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "vfork-dup2-exec") || !strcmp(c, "vfork-closefrom-exec") ||
	    !strcmp(c, "vfork-loop")) {
		/* vfork-dup2-exec FD PROG ARGS... ; the child puts stdin on FD
		 * (as a shell's redirection would) and execs
		 * vfork-closefrom-exec PROG ARGS... ; it closes 3 and up first
		 * vfork-loop N PROG ARGS... ; N children exec PROG, one by one */
		int dup_fd = -1, times = 1, closeall = !strcmp(c, "vfork-closefrom-exec");
		int first = 1;
		if (strcmp(c, "vfork-closefrom-exec")) {
			NEED(2);
			if (!strcmp(c, "vfork-loop"))
				times = atoi(a[1]);
			else
				dup_fd = atoi(a[1]);
			first = 2;
		}
		char *argv[64];
		int k = argv_until_semicolon(a, n, first, argv);
		fflush(stdout);
		int bad = 0, last = 0;
		for (int i = 0; i < times; i++) {
			last = vfork_exec(argv, dup_fd, closeall, NULL);
			bad += last != 0 || vf_ret != 0;
		}
		if (times == 1)
			printf("%s %d%s\n", c, last, vf_ret ? " dup2-FAIL" : "");
		else
			printf("%s %d %s\n", c, bad, bad ? "FAIL" : "OK");
		fflush(stdout);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "dupfd-close")) {
		/* dupfd-close N: a descriptor at N or above is the program's own:
		 * it can be used and closed */
		NEED(1);
		int fd = fcntl(0, F_DUPFD, atoi(a[1]));
		errno = 0;
		int r = fd < 0 ? -1 : close(fd);
		printf("dupfd-close %d %s\n", r, ename(r == 0, errno));
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "vforkstorm")) {
		/* vforkstorm N PATH PROG ARGS... ; 4 threads stat PATH in a loop
		 * while the main thread vforks N children that stat PATH and exec
		 * PROG */
		NEED(3);
		int nf = atoi(a[1]);
		storm_path = a[2];
		char *argv[64];
		int k = argv_until_semicolon(a, n, 3, argv);
		fflush(stdout);
		pthread_t t[4];
		storm_start(t);
		int bad = 0;
		for (int i = 0; i < nf; i++) {
			if (vfork_exec(argv, -1, 0, storm_path) != 0 || vf_ret)
				bad++;
		}
		storm_end(t);
		printf("vforkstorm %d %s\n", bad, bad ? "FAIL" : "OK");
		fflush(stdout);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "spawn") || !strcmp(c, "spawnp") || !strcmp(c, "exec-env") ||
	    !strcmp(c, "execvp") || !strcmp(c, "execl") || !strcmp(c, "fexecve") ||
	    !strcmp(c, "execvpe") || !strcmp(c, "execle") || !strcmp(c, "execlp") ||
	    !strcmp(c, "execveat") || !strcmp(c, "execv") || !strcmp(c, "raw-fexecve")) {
		/* spawn ENVHOW PROG ARGS... ; */
		NEED(2);
		char *argv[64];
		int k = argv_until_semicolon(a, n, 2, argv);
		char **envp = env_variant(a[1]);
		fflush(stdout);
		if (!strcmp(c, "spawn") || !strcmp(c, "spawnp")) {
			pid_t pid;
			int r = !strcmp(c, "spawn") ? posix_spawn(&pid, argv[0], NULL, NULL, argv, envp)
						     : posix_spawnp(&pid, argv[0], NULL, NULL, argv, envp);
			if (r) {
				printf("%s -1 %s\n", c, ename(0, r));
			} else {
				int s = spawn_wait(pid);
				printf("%s %d %s\n", c, s, "OK");
			}
		} else {
			pid_t pid = fork();
			if (pid == 0) {
				if (!strcmp(c, "exec-env"))
					execve(argv[0], argv, envp);
				else if (!strcmp(c, "execvp")) {
					environ = envp;
					execvp(argv[0], argv);
				} else if (!strcmp(c, "execvpe")) {
					execvpe(argv[0], argv, envp);
				} else if (!strcmp(c, "execv")) {
					environ = envp;
					execv(argv[0], argv);
				} else if (!strcmp(c, "execle")) {
					execle(argv[0], argv[0], argv[1], argv[2], argv[3], (char *)NULL, envp);
				} else if (!strcmp(c, "execlp")) {
					environ = envp;
					execlp(argv[0], argv[0], argv[1], argv[2], argv[3], (char *)NULL);
				} else if (!strcmp(c, "execveat")) {
					execveat(AT_FDCWD, argv[0], argv, envp, 0);
				} else if (!strcmp(c, "fexecve") || !strcmp(c, "raw-fexecve")) {
					int fd = c[0] == 'r' ? raw_open(argv[0])
							     : open(argv[0], O_RDONLY | O_CLOEXEC);
					if (fd >= 0)
						fexecve(fd, argv, envp);
				} else {
					environ = envp;
					execl(argv[0], argv[0], argv[1], argv[2], argv[3], (char *)NULL);
				}
				exec_failed(c);
			}
			exec_report(c, pid);
		}
		fflush(stdout);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "spawn-cd")) {
		/* spawn-cd spawn|spawnp [cd:DIR|fcd:DIR|open:FILE|openw:FILE]...
		 *   PROG ARGS... ;
		 * posix_spawn(p) with file actions that change directory (fcd opens
		 * DIR without the hooks, as a program's earlier fd would be) or open
		 * FILE onto fd 50 (read-only, or write-only) */
		NEED(2);
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		int k = 2;
		for (; k < n && (!strncmp(a[k], "cd:", 3) || !strncmp(a[k], "fcd:", 4) ||
				 !strncmp(a[k], "open:", 5) || !strncmp(a[k], "openw:", 6)); k++) {
			if (a[k][0] == 'c')
				posix_spawn_file_actions_addchdir_np(&fa, a[k] + 3);
			else if (a[k][0] == 'f')
				posix_spawn_file_actions_addfchdir_np(&fa, raw_open(a[k] + 4));
			else if (a[k][4] == ':')
				posix_spawn_file_actions_addopen(&fa, 50, a[k] + 5, O_RDONLY, 0);
			else
				posix_spawn_file_actions_addopen(&fa, 50, a[k] + 6, O_WRONLY, 0);
		}
		char *argv[64];
		int m = 0;
		for (; k < n && strcmp(a[k], ";") && m < 63; k++)
			argv[m++] = a[k];
		argv[m] = NULL;
		fflush(stdout);
		pid_t pid;
		int r = !strcmp(a[1], "spawn") ? posix_spawn(&pid, argv[0], &fa, NULL, argv, environ)
					       : posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		if (r)
			printf("%s -1 %s\n", a[1], ename(0, r));
		else
			printf("%s %d OK\n", a[1], spawn_wait(pid));
		fflush(stdout);
		return k < n ? k + 1 : k;
	}
	if (!strcmp(c, "execveat-dirfd") || !strcmp(c, "execveat-empty")) {
		/* execveat-dirfd DIR REL ; or execveat-empty PROG ; with fds opened
		 * behind kiln's back */
		NEED(1);
		int dir = !strcmp(c, "execveat-dirfd");
		int fd = raw_open(a[1]);
		char *argv[] = { dir ? a[2] : a[1], NULL };
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			if (dir)
				execveat(fd, a[2], argv, environ, 0);
			else
				execveat(fd, "", argv, environ, AT_EMPTY_PATH);
			exec_failed(c);
		}
		exec_report(c, pid);
		return dir ? 3 : 2;
	}
	if (!strcmp(c, "system")) {
		NEED(1);
		fflush(stdout);
		int r = system(a[1]);
		printf("system %d %s\n", r < 0 ? -1 : WEXITSTATUS(r), r < 0 ? ename(0, errno) : "OK");
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "popen")) {
		NEED(1);
		fflush(stdout);
		FILE *p = popen(a[1], "r");
		if (!p) {
			printf("popen -1 %s\n", ename(0, errno));
		} else {
			char line[4096];
			while (fgets(line, sizeof line, p))
				fputs(line, stdout);
			printf("popen %d OK\n", WEXITSTATUS(pclose(p)));
		}
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "system-envrace")) {
		/* the shell pokes another thread, which reads environ and calls
		 * setenv, and waits for it before ending */
		if (pipe(envr_in) || pipe(envr_out))
			return 1;
		envr_before = environ;
		pthread_t t;
		pthread_create(&t, NULL, envr_thread, NULL);
		char cmd[128];
		snprintf(cmd, sizeof cmd, "echo x >&%d; read y <&%d", envr_in[1], envr_out[0]);
		int r = system(cmd);
		pthread_join(t, NULL);
		const char *v = getenv("HOOKCALL_RACE");
		printf("system-envrace %d environ=%s setenv=%s\n", r < 0 ? -1 : WEXITSTATUS(r),
		       envr_swapped ? "swapped" : "same", v ? "kept" : "lost");
		fflush(stdout);
		return 1;
	}
	if (!strcmp(c, "popen-envrace")) {
		/* popen N: another thread watches environ during N popen+pclose */
		NEED(1);
		int nrun = atoi(a[1]);
		envr_before = environ;
		pthread_t t;
		pthread_create(&t, NULL, envr_spin, NULL);
		int bad = 0;
		for (int i = 0; i < nrun; i++) {
			FILE *p = popen("exit 3", "r");
			if (!p || pclose(p) != 3 << 8)
				bad++;
		}
		envr_stop = 1;
		pthread_join(t, NULL);
		printf("popen-envrace %d environ=%s\n", bad, envr_seen ? "swapped" : "same");
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "popen-modes")) {
		/* glibc's popen contract: modes, fd flags, earlier streams closed
		 * in the child, fclose waiting like pclose */
		errno = 0;
		FILE *bad = popen("true", "rw");
		printf("mode-rw %s\n", bad ? "OK" : ename(0, errno));
		bad = popen("true", "rx");
		printf("mode-rx %s\n", bad ? "OK" : ename(0, errno));
		FILE *w = popen("read x; true", "w");
		FILE *re = popen("true", "re");
		printf("flags w=%d re=%d\n", fcntl(fileno(w), F_GETFD) & FD_CLOEXEC,
		       fcntl(fileno(re), F_GETFD) & FD_CLOEXEC);
		char cmd[128];
		snprintf(cmd, sizeof cmd, "test -e /proc/self/fd/%d && echo open || echo closed",
			 fileno(w));
		FILE *r = popen(cmd, "r");
		char line[64] = "";
		if (!fgets(line, sizeof line, r))
			strcpy(line, "?\n");
		printf("earlier stream in child: %s", line);
		printf("pclose %d\n", WEXITSTATUS(pclose(r)));
		printf("pclose %d\n", WEXITSTATUS(pclose(re)));
		int (*volatile fc)(FILE *) = fclose; /* on a popen stream, on purpose */
		printf("fclose %d\n", WEXITSTATUS(fc(w)));
		FILE *x = popen("exit 5", "r");
		printf("fclose %d\n", WEXITSTATUS(fc(x)));
		fflush(stdout);
		return 1;
	}
	if (!strcmp(c, "system-raw")) {
		/* the whole wait status, and errno */
		NEED(1);
		fflush(stdout);
		errno = 0;
		int r = system(!strcmp(a[1], "NULL") ? NULL : a[1]);
		if (!strcmp(a[1], "NULL"))
			printf("system-raw NULL %d\n", r);
		else if (r < 0 || !WIFSIGNALED(r))
			printf("system-raw %d %s\n", r < 0 ? r : WEXITSTATUS(r), ename(!errno, errno));
		else
			printf("system-raw signal %d\n", WTERMSIG(r));
		fflush(stdout);
		return 2;
	}
	if (!strcmp(c, "unsetenv")) {
		/* the program drops kiln's variables from its own environment */
		unsetenv("LD_PRELOAD");
		unsetenv("KILN_SOCKET");
		return 1;
	}
	if (!strcmp(c, "threads")) {
		NEED(2);
		int nt = atoi(a[1]);
		if (nt > 64)
			nt = 64;
		race_path = a[2];
		pthread_t t[64];
		pthread_barrier_init(&barrier, NULL, (unsigned)nt);
		for (int i = 0; i < nt; i++)
			pthread_create(&t[i], NULL, race, (void *)(long)i);
		int good = 0;
		for (int i = 0; i < nt; i++) {
			pthread_join(t[i], NULL);
			good += race_results[i] == ENOENT;
		}
		printf("threads %d %s\n", good, good == nt ? "OK" : "FAIL");
		fflush(stdout);
		return 3;
	}
	if (!strcmp(c, "forkstorm")) {
		/* forkstorm N PATH: 4 threads stat PATH in a loop while the main
		 * thread forks N children that each stat PATH once */
		NEED(2);
		int nf = atoi(a[1]);
		storm_path = a[2];
		pthread_t t[4];
		storm_start(t);
		int bad = 0;
		for (int i = 0; i < nf; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				int r = stat(storm_path, &st);
				_exit(r == -1 && errno == ENOENT ? 0 : 1);
			}
			if (spawn_wait(pid) != 0)
				bad++;
		}
		storm_end(t);
		printf("forkstorm %d %s\n", bad, bad ? "FAIL" : "OK");
		fflush(stdout);
		return 3;
	}
	if (!strcmp(c, "signal")) {
		/* stat(hidden) from a SIGALRM handler that interrupts a loop of
		 * stat(allowed): hooks entered while a hook is running. */
		NEED(2);
		sig_path = a[1];
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = { { 0, 200 }, { 0, 200 } };
		setitimer(ITIMER_REAL, &it, NULL);
		int wrong = 0;
		while (sig_calls < 200) {
			if (stat(a[2], &st) != 0)
				wrong++;
		}
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_REAL, &off, NULL);
		printf("signal %d %s\n", wrong + sig_wrong, wrong + sig_wrong ? "FAIL" : "OK");
		fflush(stdout);
		return 3;
	}
	if (!strcmp(c, "wait-stdin")) {
		/* blocks until a line arrives on stdin (the test kills the server) */
		char line[16];
		printf("waiting\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
		return 1;
	}
	if (!strcmp(c, "getenv")) {
		NEED(1);
		const char *v = getenv(a[1]);
		printf("getenv %s=%s\n", a[1], v ? v : "(unset)");
		fflush(stdout);
		return 2;
	}
	fprintf(stderr, "hookcall: unknown command %s\n", c);
	exit(2);
}

static int run(char **a, int n)
{
	while (n > 0) {
		if (!strcmp(a[0], "--")) {
			a++;
			n--;
			continue;
		}
		int used = one(a, n);
		a += used;
		n -= used;
	}
	return 0;
}

int main(int argc, char **argv)
{
	return run(argv + 1, argc - 1);
}

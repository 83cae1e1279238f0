/* The exec family and posix_spawn.
 *
 * glibc runs execvp, posix_spawn, system and popen on internal exec calls
 * that no preload library sees, so each entry point is hooked here: the
 * target (and the interpreter of a #! script, up to the kernel's 4 levels) is
 * checked with the EXEC access class, a set-uid/set-gid target (which loses
 * LD_PRELOAD) or a static binary (which ignores it) is reported to the
 * server, and kiln's environment captured at start-up is put back into the
 * environment the new program gets, whatever the program did to it
 * (`env -i`, `env -u LD_PRELOAD`, `LD_PRELOAD=`). system and popen are in
 * shell.c, on top of kt_spawn. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/execfile.h"
#include "trace/kt.h"
#include "common/rawsys.h"

extern char **environ;

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_execve, *_Atomic real_execveat, *_Atomic real_fexecve,
	*_Atomic real_posix_spawn;

/* ---- what is about to run ------------------------------------------------ */

static long raw_pread(void *ctx, void *buf, size_t n, long off)
{
	return kt_sys4(SYS_pread64, *(int *)ctx, (long)buf, (long)n, off);
}

/* Inspects an executable opened as fd: reports set-id and static binaries,
 * and copies a #! interpreter into interp (empty when none). */
static void inspect(int fd, const char *shown_path, char *interp, size_t cap)
{
	struct stat st;
	unsigned mode = kt_sys4(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH) == 0 ? st.st_mode : 0;
	unsigned facts = kt_execfile_inspect(mode, raw_pread, &fd, interp, cap);
	if (facts & KT_EXEC_SETID)
		kiln_event(KILN_E_SETUID_EXEC, shown_path);
	if (facts & KT_EXEC_STATIC)
		kiln_event(KILN_E_STATIC_EXEC, shown_path);
}

/* Opens an exec target (the absolute clean path of length n in q->path) for
 * inspection, the check bound to the file opened (bind.c). Returns the fd or
 * -errno; *bound: the answer must be bound (the target lies in a mutable
 * area or is reached through a symlink there) or was a refusal, and
 * *readable: the fd can be read (else it is O_PATH: an exec-only file). */
static long open_target(struct kt_question *q, int n, unsigned qf, int *bound, int *readable)
{
	int nofollow = (qf & KILN_Q_NOFOLLOW) ? O_NOFOLLOW : 0;
	struct kt_opener o = { KT_VIA_SYSCALL, NULL, NULL, AT_FDCWD, q->path,
			       O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | nofollow, 0, NULL, 0 };
	unsigned how;
	long fd = kt_open_bound_q(&o, q, n, KILN_A_EXEC, qf, &how);
	*readable = 1;
	if (fd == -EACCES && how != KT_BIND_REFUSED) {
		o.flags = O_PATH | O_CLOEXEC | nofollow;
		fd = kt_open_bound_q(&o, q, n, KILN_A_EXEC, qf, &how);
		*readable = 0;
	}
	/* refused: the exec fails as the answer says */
	*bound = how != KILN_BIND_ANY;
	return fd;
}

/* What the new program must turn out to be, when the kernel resolves paths
 * that could change after the check: a #! script (or interpreter) outside
 * the managed trees runs by path (the kernel hands the interpreter the
 * path, which a script's $0 shows: it cannot be run by fd). The program the
 * kernel finally runs is then checked by kiln's constructor in it against
 * the identity of the ELF file checked here (KILN_EXEC_EXPECT). */
struct expect {
	int set;
	unsigned long long dev, ino;
};

/* Checks an exec target given as an absolute clean path of length n in
 * q->path (the question buffer is reused for each #! interpreter), then its
 * interpreters. Returns 0 or the errno the exec must fail with. When the
 * target is an ELF file whose answer must be bound, *bound_fd gets an fd of
 * the very file checked (close-on-exec), for the caller to run that file
 * (execveat AT_EMPTY_PATH); else -1 and the caller runs the path, with *ex
 * set when what it runs must be verified. */
static int check_exec_abs(struct kt_question *q, int n, unsigned qf, int *bound_fd,
			  struct expect *ex)
{
	int any_bound = 0;
	*bound_fd = -1;
	ex->set = 0;
	for (int depth = 0; depth < 5; depth++) {
		/* A program in the managed trees the server has read: no file to
		 * open here (unless an earlier script was bound: what finally
		 * runs must then be verified by its identity). */
		if (!any_bound && kt_cache_exec_plain(q->path, (size_t)n, qf))
			return 0;
		int bound, readable;
		long fd = open_target(q, n, qf, &bound, &readable);
		if (fd < 0) /* unreadable or missing: the kernel decides, unless bound */
			return bound || fd == -ENOENT || fd == -EIO ? (int)-fd : 0;
		any_bound |= bound;
		char interp[256]; /* inspect reads a #! line of at most 255 bytes */
		interp[0] = '\0';
		if (readable)
			inspect((int)fd, q->path, interp, sizeof interp);
		if (!interp[0] && bound && depth == 0) {
			*bound_fd = (int)fd;
			return 0;
		}
		struct stat st;
		if (!interp[0] && any_bound && kt_sys2(SYS_fstat, fd, &st) == 0)
			*ex = (struct expect){ 1, (unsigned long long)st.st_dev,
					       (unsigned long long)st.st_ino };
		kt_close((int)fd);
		if (!interp[0])
			return 0;
		n = kt_path_at(AT_FDCWD, interp, q->path);
		if (n < 0)
			return -n;
		qf = 0;
	}
	return 0;
}

/* Checks an exec target given as (dirfd, path, atflags), then its #!
 * interpreters, in the caller's question buffer. Returns 0 or the errno the
 * exec must fail with; *bound_fd and *ex as for check_exec_abs (never an fd
 * for an fd the caller gave: that is the file already). */
static int check_exec(struct kt_question *q, int dirfd, const char *path, int atflags,
		      int *bound_fd, struct expect *ex)
{
	*bound_fd = -1;
	ex->set = 0;
	if (!path)
		return 0;
	int n;
	int own_fd = !path[0] && (atflags & AT_EMPTY_PATH);
	if (own_fd)
		n = kt_fd_path(dirfd, q->path);
	else if (!path[0])
		return 0; /* execve reports ENOENT itself */
	else
		n = kt_path_at(dirfd, path, q->path);
	if (n < 0)
		return -n;
	int e = check_exec_abs(q, n, (atflags & AT_SYMLINK_NOFOLLOW) ? KILN_Q_NOFOLLOW : 0, bound_fd,
			       ex);
	if (own_fd && *bound_fd >= 0) {
		kt_close(*bound_fd);
		*bound_fd = -1;
	}
	return e;
}

/* The name the kernel gives a process (its comm) is the last component of
 * the path it was run by; run by fd, it would be the fd's number. */
static const char *exec_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Where a spawn's relative path points in the child: under the directory
 * its file actions leave it in, if they change it. Returns 1 with the
 * absolute path in abs, 0 when the parent's cwd applies, or -errno. */
static int spawn_path(const posix_spawn_file_actions_t *fa, const char *path, char *abs)
{
	if (!fa || path[0] == '/')
		return 0;
	char dir[KT_PATH_BUF];
	int r = kt_spawn_dir(fa, dir);
	if (r <= 0)
		return r;
	int n = kt_path_join(dir, path, abs);
	return n < 0 ? n : 1;
}

/* ---- kiln's environment, restored ------------------------------------------ */

struct env {
	char **vec;
	size_t mapped; /* bytes mmap'd for vec, 0 when on the caller's stack */
	char preload[KT_PATH_BUF + 32];
	char name[sizeof KILN_ENV_EXEC_NAME + 16];     /* "KILN_EXEC_NAME=comm" */
	char expect[sizeof KILN_ENV_EXEC_EXPECT + 40]; /* "KILN_EXEC_EXPECT=dev:ino" */
};

/* Entries of the environment vector kept on the stack; a bigger environment
 * gets a mapped one. Every stack page an exec writes in a forked child is a
 * page fault, so this stays small (a build's environment is a few dozen
 * entries). */
#define ENV_STACK 256

static int is_kept(const char *entry, int replacing_preload)
{
	if (!kt_may_be_kept(entry))
		return 0;
	size_t n;
	const char *const *kept = kt_env_all(&n);
	const char *eq = strchr(entry, '=');
	size_t nl = eq ? (size_t)(eq - entry) : strlen(entry);
	for (size_t i = 0; i < n; i++)
		if (strncmp(kept[i], entry, nl) == 0 && kept[i][nl] == '=')
			return 1;
	/* meant for one new program only: never passed on */
	if (!strncmp(entry, KILN_ENV_EXEC_NAME "=", sizeof KILN_ENV_EXEC_NAME) ||
	    !strncmp(entry, KILN_ENV_EXEC_EXPECT "=", sizeof KILN_ENV_EXEC_EXPECT))
		return 1;
	return replacing_preload && !strncmp(entry, "LD_PRELOAD=", 11);
}

/* LD_PRELOAD for the new program: kiln's library first, then whatever the
 * program itself asked to preload (unless that already names kiln's). */
static const char *preload_entry(char *const envp[], struct env *e)
{
	const char *ours = kt_env(KILN_ENV_PRELOAD);
	const char *captured = kt_env("LD_PRELOAD");
	if (!ours)
		ours = captured;
	if (!ours)
		return NULL;
	const char *theirs = NULL;
	for (size_t i = 0; envp && envp[i]; i++)
		if (kt_may_be_kept(envp[i]) && !strncmp(envp[i], "LD_PRELOAD=", 11))
			theirs = envp[i] + 11;
	if (theirs && strstr(theirs, ours))
		return theirs - 11;
	size_t lo = strlen(ours), lt = theirs ? strlen(theirs) : 0;
	if (11 + lo + 1 + lt + 1 > sizeof e->preload)
		lt = 0;
	memcpy(e->preload, "LD_PRELOAD=", 11);
	memcpy(e->preload + 11, ours, lo);
	size_t at = 11 + lo;
	if (lt) {
		e->preload[at++] = ':';
		memcpy(e->preload + at, theirs, lt);
		at += lt;
	}
	e->preload[at] = '\0';
	return e->preload;
}

static size_t hex(char *out, unsigned long long v)
{
	char d[16];
	size_t n = 0;
	do {
		d[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = d[n - 1 - i];
	return n;
}

/* Builds the new environment into e->vec (stack[] when it fits). A program
 * run by fd gets its name (`comm`, for ps and friends) in KILN_EXEC_NAME, a
 * script run by path the identity of the program it must end up running in
 * KILN_EXEC_EXPECT; kiln's constructor in it reads them and nothing passes
 * them on. */
static void env_build(char *const envp[], struct env *e, char **stack, const char *comm,
		      const struct expect *ex)
{
	size_t n = 0, nk;
	const char *const *kept = kt_env_all(&nk);
	while (envp && envp[n])
		n++;
	size_t need = n + nk + 4;
	e->mapped = 0;
	e->vec = stack;
	if (need > ENV_STACK) {
		size_t bytes = need * sizeof(char *);
		long p = kt_sys6(SYS_mmap, 0, (long)bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (kt_sys_failed(p)) {
			/* No memory: keep the program's entries that fit. */
			n = ENV_STACK - nk - 4;
		} else {
			e->vec = (char **)p;
			e->mapped = bytes;
		}
	}
	const char *pl = preload_entry(envp, e);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!is_kept(envp[i], pl != NULL))
			e->vec[k++] = envp[i];
	for (size_t i = 0; i < nk; i++)
		if (strncmp(kept[i], "LD_PRELOAD=", 11))
			e->vec[k++] = (char *)kept[i];
	if (pl)
		e->vec[k++] = (char *)pl;
	if (comm) {
		size_t at = sizeof KILN_ENV_EXEC_NAME, cl = strlen(comm);
		memcpy(e->name, KILN_ENV_EXEC_NAME "=", at);
		if (cl > sizeof e->name - at - 1)
			cl = sizeof e->name - at - 1;
		memcpy(e->name + at, comm, cl);
		e->name[at + cl] = '\0';
		e->vec[k++] = e->name;
	}
	if (ex && ex->set) {
		size_t at = sizeof KILN_ENV_EXEC_EXPECT;
		char *x = e->expect;
		memcpy(x, KILN_ENV_EXEC_EXPECT "=", at);
		at += hex(x + at, ex->dev);
		x[at++] = ':';
		at += hex(x + at, ex->ino);
		x[at] = '\0';
		e->vec[k++] = x;
	}
	e->vec[k] = NULL;
}

static void env_free(struct env *e)
{
	if (e->mapped)
		kt_sys2(SYS_munmap, e->vec, e->mapped);
}

/* ---- exec ----------------------------------------------------------------- */

/* How the real function names the program it runs. */
enum exec_how { EXEC_PATH, EXEC_AT, EXEC_FD };

/* What every exec hook does: check the target (dirfd, path, atflags) and its
 * #! interpreters, then call the real function (execve, execveat or
 * fexecve, by `how`) with kiln's variables put back into envp. It returns
 * only on failure: -1 with errno. */
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

/* The check and the exec each in a frame of its own (noinline): nested, the
 * checks ran below the environment's 8 KiB as well as the question's 4 KiB,
 * and every stack page a forked child writes is a page fault. */
static __attribute__((noinline)) int check_exec_here(int dirfd, const char *path, int atflags,
						     int *fd, struct expect *ex)
{
	struct kt_question q;
	return check_exec(&q, dirfd, path, atflags, fd, ex);
}

/* Runs the real function with kiln's variables put back into envp; returns
 * the errno it failed with. */
static __attribute__((noinline)) int exec_with_env(enum exec_how how, void *real, int dirfd,
						   const char *path, char *const argv[],
						   char *const envp[], int atflags, int fd,
						   const struct expect *ex)
{
	execveat_fn at = fd >= 0 ? (execveat_fn)kt_real(&real_execveat, "execveat") : NULL;
	char *stack[ENV_STACK];
	struct env env;
	env_build(envp, &env, stack, at ? exec_name(path) : NULL, ex);
	if (at) /* the file checked, not what the path names by now */
		at(fd, "", argv, env.vec, AT_EMPTY_PATH);
	if (!at || errno == ENOSYS) { /* ENOSYS: a kernel before 3.19 */
		if (how == EXEC_PATH)
			((int (*)(const char *, char *const[], char *const[]))real)(path, argv,
										   env.vec);
		else if (how == EXEC_FD)
			((int (*)(int, char *const[], char *const[]))real)(dirfd, argv, env.vec);
		else
			((int (*)(int, const char *, char *const[], char *const[], int))real)(
				dirfd, path, argv, env.vec, atflags);
	}
	int e = errno;
	env_free(&env);
	return e;
}

static int exec_checked(enum exec_how how, void *real, int dirfd, const char *path,
			char *const argv[], char *const envp[], int atflags)
{
	kt_enter();
	int fd;
	struct expect ex;
	int e = check_exec_here(dirfd, path, atflags, &fd, &ex);
	if (!e)
		e = exec_with_env(how, real, dirfd, path, argv, envp, atflags, fd, &ex);
	if (fd >= 0)
		kt_close(fd);
	kt_leave();
	errno = e;
	return -1;
}

/* A forked child that execs would otherwise look the real functions up
 * itself (dlsym: code and data pages of libc and ld.so faulted in, and
 * copied, in every child of a shell that never execs): the fork hook has
 * the parent do it once. */
void kt_exec_resolve(void)
{
	kt_real(&real_execve, "execve");
	kt_real(&real_execveat, "execveat");
}

static int do_execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_checked(EXEC_PATH, kt_real(&real_execve, "execve"), AT_FDCWD, path, argv,
			    envp, 0);
}

/* glibc's fallback for a file the kernel would not run (ENOEXEC): /bin/sh
 * with the file as its script. */
static int exec_as_script(const char *file, char *const argv[], char *const envp[])
{
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char *nargv[argc + 3];
	nargv[0] = (char *)"/bin/sh";
	nargv[1] = (char *)file;
	for (size_t i = 1; i <= argc; i++)
		nargv[i + 1] = argv[i];
	if (argc == 0)
		nargv[2] = NULL;
	return do_execve("/bin/sh", nargv, envp);
}

KT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return do_execve(path, argv, envp);
}

KT_EXPORT int execv(const char *path, char *const argv[])
{
	return do_execve(path, argv, environ);
}

/* PATH searches (execvp family, posix_spawnp) are done here, one candidate
 * at a time as glibc builds them (an empty entry is the current directory):
 * the next candidate for file into buf (KT_PATH_BUF bytes), advancing
 * *cursor (start it at search_path()). Returns 1, -1 for an entry too long
 * to try, 0 when the list is done. */
static const char *search_path(void)
{
	const char *pathvar = getenv("PATH");
	return pathvar ? pathvar : "/bin:/usr/bin";
}

static int next_candidate(const char **cursor, const char *file, char *buf)
{
	const char *start = *cursor;
	if (!start)
		return 0;
	const char *p = start;
	while (*p && *p != ':')
		p++;
	*cursor = *p ? p + 1 : NULL;
	size_t dl = (size_t)(p - start), flen = strlen(file);
	if (dl + 1 + flen >= KT_PATH_BUF)
		return -1;
	if (dl) {
		memcpy(buf, start, dl);
		buf[dl++] = '/';
	}
	memcpy(buf + dl, file, flen + 1);
	return 1;
}

/* execvpe as glibc does it, but every attempt goes through the checked
 * execve: a hidden candidate is skipped like a missing one. */
static int do_execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!file || !*file) {
		errno = ENOENT;
		return -1;
	}
	if (strchr(file, '/')) {
		do_execve(file, argv, envp);
		if (errno == ENOEXEC)
			return exec_as_script(file, argv, envp);
		return -1;
	}
	int got_eacces = 0, more;
	char buf[KT_PATH_BUF];
	for (const char *cur = search_path(); (more = next_candidate(&cur, file, buf));) {
		if (more < 0)
			continue;
		do_execve(buf, argv, envp);
		if (errno == ENOEXEC)
			return exec_as_script(buf, argv, envp);
		if (errno == EACCES)
			got_eacces = 1;
		else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE &&
			 errno != ENODEV && errno != ETIMEDOUT)
			return -1;
	}
	errno = got_eacces ? EACCES : ENOENT;
	return -1;
}

KT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return do_execvpe(file, argv, envp);
}

KT_EXPORT int execvp(const char *file, char *const argv[])
{
	return do_execvpe(file, argv, environ);
}

static size_t count_va(const char *arg0, va_list ap)
{
	size_t n = 1;
	if (!arg0)
		return 0;
	while (va_arg(ap, char *))
		n++;
	return n;
}

#define COLLECT_ARGS(last_fixed, arg0, argv, after)                          \
	va_list ap;                                                          \
	va_start(ap, last_fixed);                                            \
	size_t argc_ = count_va(arg0, ap);                                   \
	va_end(ap);                                                          \
	char *argv[argc_ + 1];                                               \
	va_start(ap, last_fixed);                                            \
	argv[0] = (char *)arg0;                                              \
	for (size_t i_ = 1; i_ <= argc_; i_++)                               \
		argv[i_] = va_arg(ap, char *);                               \
	if (argc_ == 0)                                                      \
		argv[0] = NULL;                                              \
	after;                                                               \
	va_end(ap)

KT_EXPORT int execl(const char *path, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv, (void)0);
	return do_execve(path, argv, environ);
}

KT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv, (void)0);
	return do_execvpe(file, argv, environ);
}

KT_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	COLLECT_ARGS(arg, arg, argv, envp = argc_ ? va_arg(ap, char *const *) : NULL);
	if (argc_ == 0) { /* the NULL arg0 was consumed: envp follows it */
		va_start(ap, arg);
		envp = va_arg(ap, char *const *);
		va_end(ap);
	}
	return do_execve(path, argv, envp);
}

KT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	void *real = kt_real(&real_execveat, "execveat");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return exec_checked(EXEC_AT, real, dirfd, path, argv, envp, flags);
}

KT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	return exec_checked(EXEC_FD, kt_real(&real_fexecve, "fexecve"), fd, "", argv, envp,
			    AT_EMPTY_PATH);
}

/* ---- posix_spawn ---------------------------------------------------------- */

/* "/proc/PID/fd/FD" into out (48 bytes). */
static void fd_link(int pid, int fd, char *out)
{
	char digits[12];
	size_t at = 0;
	const char *parts[] = { "/proc/", NULL, "/fd/", NULL };
	int nums[] = { 0, pid, 0, fd };
	for (int i = 0; i < 4; i++) {
		if (parts[i]) {
			size_t l = strlen(parts[i]);
			memcpy(out + at, parts[i], l);
			at += l;
			continue;
		}
		unsigned v = (unsigned)nums[i];
		int nd = 0;
		do {
			digits[nd++] = (char)('0' + v % 10);
			v /= 10;
		} while (v);
		while (nd)
			out[at++] = digits[--nd];
	}
	out[at] = '\0';
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *, char *const[], char *const[]);

int kt_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
	     const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	int refused = fa ? kt_spawn_refused(fa) : 0;
	if (refused)
		return refused;
	int e, fd = -1;
	struct expect ex = { 0, 0, 0 };
	{ /* its own scope: the compiler reuses its stack for env below */
		struct kt_question q;
		int r = path && path[0] ? spawn_path(fa, path, q.path) : 0;
		e = r < 0 ? -r : r > 0 ? check_exec_abs(&q, (int)strlen(q.path), 0, &fd, &ex)
				       : check_exec(&q, AT_FDCWD, path, 0, &fd, &ex);
	}
	if (e)
		return e;
	/* The file checked, by the parent's fd: the child's own fd table
	 * is the file actions' to change, the parent waits in posix_spawn. */
	char byfd[48];
	if (fd >= 0)
		fd_link(kt_getpid(), fd, byfd);
	char *stack[ENV_STACK];
	struct env env;
	env_build(envp, &env, stack, fd >= 0 ? exec_name(path) : NULL, &ex);
	e = REAL(posix_spawn, spawn_fn)(pid, fd >= 0 ? byfd : path, fa, at, argv, env.vec);
	env_free(&env);
	if (fd >= 0)
		kt_close(fd);
	return e;
}

KT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	kt_enter();
	int e = kt_spawn(pid, path, fa, at, argv, envp);
	kt_leave();
	return e;
}

/* posix_spawnp: the PATH search is done here so that the candidate that runs
 * is the one checked; hidden candidates are skipped like missing ones. */
KT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	if (!*file)
		return ENOENT;
	kt_enter();
	int result = fa ? kt_spawn_refused(fa) : 0, more;
	if (result)
		goto out; /* the child would fail in its file actions, before the search */
	result = ENOENT;
	if (strchr(file, '/')) {
		result = kt_spawn(pid, file, fa, at, argv, envp);
		goto out;
	}
	char buf[KT_PATH_BUF];
	for (const char *cur = search_path(); (more = next_candidate(&cur, file, buf));) {
		if (more < 0)
			continue;
		/* a relative entry is relative to where the child will be */
		char abs[KT_PATH_BUF];
		int r = spawn_path(fa, buf, abs);
		const char *cand = r > 0 ? abs : buf;
		int e = r < 0 ? -r : kt_check(AT_FDCWD, cand, KILN_A_EXEC, 0, 0);
		if (e == EACCES || e == EIO) {
			result = e;
			if (e == EIO)
				goto out;
		} else if (!e && kt_sys4(SYS_faccessat, AT_FDCWD, cand, X_OK, 0) == 0) {
			result = kt_spawn(pid, buf, fa, at, argv, envp);
			goto out;
		}
	}
out:
	kt_leave();
	return result;
}

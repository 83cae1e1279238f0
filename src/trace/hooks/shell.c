/* system, popen and pclose (and fclose of a popen stream), on the checked
 * posix_spawn of exec.c.
 *
 * glibc's own system and popen spawn /bin/sh through internal calls with the
 * current environ. These hooks spawn the shell with kt_spawn instead, which
 * checks /bin/sh and gives the child an environment built with kiln's
 * variables put back, so the program's global environ is never touched (a
 * thread reading it or calling setenv meanwhile sees the program's own).
 * Otherwise they keep glibc 2.36's contract:
 *  - system: the caller ignores SIGINT and SIGQUIT (counted across threads:
 *    the first caller saves the dispositions, the last puts them back) and
 *    blocks SIGCHLD for the call; the shell starts with the caller's old
 *    mask and SIGINT/SIGQUIT at their default unless they were ignored; a
 *    shell that could not be spawned (or is hidden) gives status 127 with
 *    errno set; system(NULL) says whether "exit 0" ran.
 *  - popen: "r" or "w" plus "e" (the caller's end O_CLOEXEC; otherwise it is
 *    inherited by later children, as glibc does), EINVAL for anything else;
 *    the child closes the streams of earlier popen calls; pclose (or fclose)
 *    closes the stream, then waits for the shell and returns its status.
 * The streams are remembered in a fixed table claimed with CAS (no lock, no
 * malloc of kiln's own; fdopen allocates the FILE, as glibc's popen does).
 * Not kept: glibc's lock around the signal counting (two system calls in
 * two threads that start and end at the same instant may leave SIGINT
 * ignored) and its cancellation handler (a cancelled thread leaves the shell
 * running). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/kt.h"
#include "common/rawsys.h"

extern char **environ;

#define SHELL_PATH "/bin/sh"

static KT_HOT void *_Atomic real_pclose, *_Atomic real_fclose;

static pid_t wait_for(pid_t pid, int *status)
{
	pid_t w;
	do
		w = waitpid(pid, status, 0);
	while (w < 0 && errno == EINTR);
	return w;
}

/* ---- system ------------------------------------------------------------------ */

static KT_HOT _Atomic int system_users;
static struct sigaction saved_intr, saved_quit;

static int do_system(const char *line)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigemptyset(&ign.sa_mask);
	if (atomic_fetch_add(&system_users, 1) == 0) {
		sigaction(SIGINT, &ign, &saved_intr);
		sigaction(SIGQUIT, &ign, &saved_quit);
	}
	sigset_t chld, omask;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &omask);

	sigset_t reset;
	sigemptyset(&reset);
	if (saved_intr.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGINT);
	if (saved_quit.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGQUIT);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &omask);
	posix_spawnattr_setsigdefault(&attr, &reset);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)line, NULL };
	pid_t pid;
	kt_enter();
	int err = kt_spawn(&pid, SHELL_PATH, NULL, &attr, argv, environ);
	kt_leave();
	posix_spawnattr_destroy(&attr);

	int status;
	if (err == 0) {
		if (wait_for(pid, &status) != pid)
			status = -1;
	} else {
		status = W_EXITCODE(127, 0);
	}
	if (atomic_fetch_sub(&system_users, 1) == 1) {
		sigaction(SIGINT, &saved_intr, NULL);
		sigaction(SIGQUIT, &saved_quit, NULL);
	}
	sigprocmask(SIG_SETMASK, &omask, NULL);
	if (err)
		errno = err;
	return status;
}

KT_EXPORT int system(const char *line)
{
	if (!line)
		return do_system("exit 0") == 0;
	return do_system(line);
}

/* ---- popen's streams ------------------------------------------------------- */

/* slot.fd: 0 free, -1 claimed (being filled or emptied), else fd + 1. */
#define STREAMS 1024
static struct {
	_Atomic int fd;
	pid_t pid;
} streams[STREAMS];
static KT_HOT _Atomic int streams_used; /* slots below this index were ever claimed */
static KT_HOT _Atomic int streams_live;

/* A popen stream closed with close(fileno(f)) left its slot behind: a fresh
 * fd from the kernel cannot be a live stream, so any slot naming it goes. */
static void forget_stale(int fd)
{
	int used = atomic_load(&streams_used);
	for (int i = 0; i < used; i++) {
		int want = fd + 1;
		if (atomic_compare_exchange_strong(&streams[i].fd, &want, 0))
			atomic_fetch_sub(&streams_live, 1);
	}
}

static int claim_slot(void)
{
	for (int i = 0; i < STREAMS; i++) {
		int want = 0;
		if (!atomic_compare_exchange_strong(&streams[i].fd, &want, -1))
			continue;
		int used = atomic_load(&streams_used);
		while (used < i + 1 && !atomic_compare_exchange_weak(&streams_used, &used, i + 1))
			;
		return i;
	}
	return -1;
}

/* The shell's pid if fd is a popen stream (its slot is then freed), else 0. */
static pid_t take_stream(int fd)
{
	if (fd < 0 || atomic_load(&streams_live) == 0)
		return 0;
	int used = atomic_load(&streams_used);
	for (int i = 0; i < used; i++) {
		int want = fd + 1;
		if (atomic_compare_exchange_strong(&streams[i].fd, &want, -1)) {
			pid_t pid = streams[i].pid;
			atomic_fetch_sub(&streams_live, 1);
			atomic_store(&streams[i].fd, 0);
			return pid;
		}
	}
	return 0;
}

/* ---- popen, pclose ------------------------------------------------------------ */

static FILE *spawn_stream(const char *cmd, int reading, int cloexec, int *err)
{
	int p[2];
	long r = kt_sys2(SYS_pipe2, p, O_CLOEXEC);
	if (r < 0) {
		*err = (int)-r;
		return NULL;
	}
	int parent = reading ? p[0] : p[1], child = reading ? p[1] : p[0];
	int child_std = reading ? STDOUT_FILENO : STDIN_FILENO;
	forget_stale(parent);
	int slot = claim_slot();
	if (slot < 0) {
		kt_close(p[0]);
		kt_close(p[1]);
		*err = EMFILE;
		return NULL;
	}

	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	int e = 0;
	if (child != child_std)
		e = posix_spawn_file_actions_adddup2(&fa, child, child_std);
	else /* already in place: it only must survive the exec */
		kt_sys3(SYS_fcntl, child, F_SETFD, 0);
	int used = atomic_load(&streams_used);
	for (int i = 0; i < used && !e; i++) {
		int fd = atomic_load(&streams[i].fd) - 1;
		if (fd >= 0 && fd != child_std)
			e = posix_spawn_file_actions_addclose(&fa, fd);
	}
	pid_t pid = 0;
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)cmd, NULL };
	if (!e)
		e = kt_spawn(&pid, SHELL_PATH, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	kt_close(child);

	FILE *f = NULL;
	if (!e) {
		if (!cloexec)
			kt_sys3(SYS_fcntl, parent, F_SETFD, 0);
		f = fdopen(parent, reading ? "r" : "w");
		if (!f)
			e = errno;
	}
	if (!f) {
		kt_close(parent);
		if (pid > 0) {
			int status;
			wait_for(pid, &status);
		}
		atomic_store(&streams[slot].fd, 0);
		*err = e;
		return NULL;
	}
	streams[slot].pid = pid;
	atomic_fetch_add(&streams_live, 1);
	atomic_store_explicit(&streams[slot].fd, parent + 1, memory_order_release);
	return f;
}

KT_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	int reading = 0, writing = 0, cloexec = 0, bad = 0;
	for (const char *m = mode; *m; m++) {
		if (*m == 'r')
			reading = 1;
		else if (*m == 'w')
			writing = 1;
		else if (*m == 'e')
			cloexec = 1;
		else
			bad = 1;
	}
	if (bad || reading == writing) {
		errno = EINVAL;
		return NULL;
	}
	kt_enter();
	int err = 0;
	FILE *f = spawn_stream(cmd, reading, cloexec, &err);
	kt_leave();
	if (!f)
		errno = err;
	return f;
}

/* Closes the stream, then waits for its shell: glibc's order (the shell
 * sees EOF or EPIPE first). */
static int close_stream(FILE *f, pid_t pid)
{
	typedef int (*fn)(FILE *);
	((fn)kt_real(&real_fclose, "fclose"))(f);
	int status;
	return wait_for(pid, &status) == pid ? status : -1;
}

KT_EXPORT int pclose(FILE *f)
{
	pid_t pid = take_stream(fileno_unlocked(f));
	if (pid > 0)
		return close_stream(f, pid);
	typedef int (*fn)(FILE *);
	return ((fn)kt_real(&real_pclose, "pclose"))(f);
}

/* glibc's fclose of a popen stream is its pclose. */
KT_EXPORT int fclose(FILE *f)
{
	pid_t pid = atomic_load(&streams_live) && f ? take_stream(fileno_unlocked(f)) : 0;
	if (pid > 0)
		return close_stream(f, pid);
	typedef int (*fn)(FILE *);
	return ((fn)kt_real(&real_fclose, "fclose"))(f);
}

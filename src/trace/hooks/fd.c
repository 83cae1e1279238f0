/* kiln's own fds (its connections to the server, above 100, close-on-exec)
 * survive programs that close or reuse every descriptor: close, close_range,
 * closefrom, dup2 and dup3 leave them alone. To the program they look like
 * descriptors that are not open (EBADF), to fcntl too: a program that
 * checks what closefrom left open (libbsd's test suite) finds nothing.
 * Also fork, whose child forgets the parent's connections (vfork is in
 * vfork.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define REAL(name, type) ((type)kt_real(&real_##name, #name))

static KT_HOT void *_Atomic real_close, *_Atomic real_dup2, *_Atomic real_dup3, *_Atomic real_dup,
	*_Atomic real_fork, *_Atomic real_fcntl, *_Atomic real_fcntl64;

int close_range(unsigned first, unsigned last, int flags);
void closefrom(int lowfd);

KT_EXPORT int close(int fd)
{
	if (kt_is_kiln_fd(fd)) {
		errno = EBADF;
		return -1;
	}
	return REAL(close, int (*)(int))(fd);
}

/* close_range on the pieces of [first, last] that hold none of kiln's fds. */
int kt_close_range_around(unsigned first, unsigned last, int flags)
{
	int fds[KT_MAX_KILN_FDS];
	int n = kt_kiln_fds(fds);
	for (int i = 0; i <= n && first <= last; i++) {
		unsigned stop = last;
		if (i < n) {
			unsigned k = (unsigned)fds[i];
			if (k < first || k > last)
				continue;
			if (k == first) {
				if (k == ~0u)
					break;
				first = k + 1;
				continue;
			}
			stop = k - 1;
		}
		long r = kt_sys3(SYS_close_range, first, stop, flags);
		if (r < 0) {
			errno = (int)-r;
			return -1;
		}
		if (i == n || stop == last)
			break;
		first = stop + 2; /* past the kiln fd */
	}
	return 0;
}

KT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (first > last) {
		errno = EINVAL;
		return -1;
	}
	return kt_close_range_around(first, last, flags);
}

KT_EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	kt_close_range_around((unsigned)lowfd, ~0u, 0);
}

/* fcntl and fcntl64. The third argument, when the command has one, is an
 * int or a pointer: passed on as glibc reads it. */
static int fcntl_through(void *_Atomic *real, const char *name, int fd, int cmd, void *arg)
{
	if (kt_is_kiln_fd(fd)) {
		errno = EBADF;
		return -1;
	}
	return ((int (*)(int, int, ...))kt_real(real, name))(fd, cmd, arg);
}

KT_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_through(&real_fcntl, "fcntl", fd, cmd, arg);
}

KT_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_through(&real_fcntl64, "fcntl64", fd, cmd, arg);
}

int kt_dup_target_ok(int oldfd, int newfd)
{
	if (kt_is_kiln_fd(oldfd))
		return EBADF;
	if (kt_is_kiln_fd(newfd))
		return kt_release_fd_number(newfd);
	return 0;
}

KT_EXPORT int dup(int oldfd)
{
	if (kt_is_kiln_fd(oldfd)) {
		errno = EBADF;
		return -1;
	}
	return REAL(dup, int (*)(int))(oldfd);
}

KT_EXPORT int dup2(int oldfd, int newfd)
{
	int e = kt_dup_target_ok(oldfd, newfd);
	if (e) {
		errno = e;
		return -1;
	}
	return REAL(dup2, int (*)(int, int))(oldfd, newfd);
}

KT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int e = kt_dup_target_ok(oldfd, newfd);
	if (e) {
		errno = e;
		return -1;
	}
	return REAL(dup3, int (*)(int, int, int))(oldfd, newfd, flags);
}

void kt_resolve_before_child(void)
{
	kt_exec_resolve();
	kt_real(&real_close, "close");
	kt_real(&real_dup2, "dup2");
	kt_real(&real_dup3, "dup3");
	kt_real(&real_fcntl, "fcntl");
	kt_real(&real_fcntl64, "fcntl64");
}

KT_EXPORT pid_t fork(void)
{
	kt_resolve_before_child();
	pid_t pid = REAL(fork, pid_t (*)(void))();
	if (pid == 0) {
		kt_client_after_fork();
		kt_cache_after_fork();
	}
	return pid;
}

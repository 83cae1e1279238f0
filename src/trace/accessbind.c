/* access and its kin bound to what was checked (docs/threat-model.md,
 * "Check and use"), as statbind.c binds stat: checked, then resolved again
 * by the kernel, a name swapped between a visible file and a symlink to a
 * hidden one would answer for the hidden file (0 where an absent one says
 * ENOENT).
 *
 * The answer's file is held as an O_PATH fd, and the permission check is
 * faccessat2(fd, "", mode, AT_EMPTY_PATH) on it:
 *  - ANY (the managed trees): the real call.
 *  - NO_SYMLINKS (the area rule): the fd of openat2(RESOLVE_NO_SYMLINKS);
 *    an absent name's ENOENT is the answer; a symlink (ELOOP) asks the
 *    server.
 *  - IDENT: the fd of an open that follows what the real call follows,
 *    whose fstat must be the file the server's walk saw, else asked again.
 *
 * Where the kernel has no faccessat2 (before 5.8), or the real function is
 * not libc's own (a preload library stacked after kiln's), the real call
 * reads the path again: checked, not bound. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define AGAIN (-1000000)

#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif

static KT_HOT _Atomic int no_faccessat2;

typedef int (*access_fn)(const char *, int);
typedef int (*faccessat_fn)(int, const char *, int, int);

static long call(const struct kt_accesser *a)
{
	if (a->via == KT_AVIA_SYS_FACCESSAT2)
		return kt_sys4(SYS_faccessat2, a->dirfd, a->path, a->mode, a->flags);
	int r = a->via == KT_AVIA_ACCESS ? ((access_fn)a->real)(a->path, a->mode)
					  : ((faccessat_fn)a->real)(a->dirfd, a->path, a->mode, a->flags);
	return r < 0 ? -errno : 0;
}

/* Flags and a mode the kernel takes as they are: anything else goes to the
 * real function, which refuses it or knows better. */
static int plain(const struct kt_accesser *a)
{
	return !(a->mode & ~(R_OK | W_OK | X_OK)) &&
	       !(a->flags & ~(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH));
}

/* The permission check on the file held as fd. */
static long check_fd(const struct kt_accesser *a, long fd)
{
	if (!atomic_load_explicit(&no_faccessat2, memory_order_relaxed) && plain(a) &&
	    (a->via == KT_AVIA_SYS_FACCESSAT2 || kt_real_is_libc(a->real, a->direct))) {
		long r = kt_sys4(SYS_faccessat2, fd, "", a->mode, AT_EMPTY_PATH | (a->flags & AT_EACCESS));
		/* EPERM: an immutable file, or a seccomp filter's refusal of
		 * faccessat2: the real call tells which. */
		if (r != -ENOSYS && r != -EPERM)
			return r;
		if (r == -ENOSYS)
			atomic_store_explicit(&no_faccessat2, 1, memory_order_relaxed);
	}
	return call(a);
}

/* The file the answer is about, held: an fd, AGAIN, or -errno (the
 * kernel's answer for the path: no file there). */
static long hold(const struct kiln_binding *b, char *abs, size_t n, int tail, int nofollow)
{
	long fd;
	if (b->how == KILN_BIND_NO_SYMLINKS) {
		struct open_how how = {
			.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
			.resolve = RESOLVE_NO_SYMLINKS,
		};
		fd = kt_openat2_at_tail(abs, n, tail, &how);
		/* A symlink, no openat2, no fd to spare: ask the server, whose
		 * answer binds by identity. */
		if (fd == -ELOOP || fd == -ENOSYS || fd == -EINVAL || fd == -EMFILE || fd == -ENFILE)
			fd = AGAIN;
	} else {
		if (tail) {
			abs[n] = '/';
			abs[n + 1] = '\0';
		}
		fd = kt_sys4(SYS_openat, AT_FDCWD, abs, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0), 0);
		abs[n] = '\0';
		if (fd >= 0) {
			struct stat st;
			if (kt_sys2(SYS_fstat, fd, &st) < 0 ||
			    !kt_is_bound_file((uint64_t)st.st_dev, (uint64_t)st.st_ino, b)) {
				kt_close((int)fd);
				fd = AGAIN;
			}
		} else if (fd == -EMFILE || fd == -ENFILE) {
			fd = AGAIN;
		}
	}
	return fd;
}

static long access_bound(const struct kt_accesser *a)
{
	/* Arguments the kernel refuses are refused whatever the path names. */
	if (!plain(a)) {
		long r = call(a);
		if (r < 0 && r != -ENOENT && r != -ENOTDIR && r != -ELOOP && r != -EACCES)
			return r;
	}
	struct kt_question q;
	int tail;
	int n = kt_path_at_tail(a->dirfd, a->path, q.path, &tail);
	if (n < 0)
		return n;
	int nofollow = (a->flags & AT_SYMLINK_NOFOLLOW) && !tail;
	/* Only asks: a W_OK is a probe, answered as the kernel answers a build
	 * user who is not root (docs/policy.md). */
	unsigned access = KILN_A_STAT | ((a->mode & W_OK) ? KILN_A_WRITE : 0);
	unsigned qflags = ((a->mode & W_OK) ? KILN_Q_PROBE : 0) | (nofollow ? KILN_Q_NOFOLLOW : 0);
	for (int t = 0; t < KT_BIND_TRIES; t++) {
		struct kiln_binding b;
		int v = kt_ask_bound(&q, (size_t)n, access, qflags,
				     KILN_ASK_BIND | KILN_ASK_ABSENT | (t ? KILN_ASK_SERVER : 0), &b);
		int e = kt_verdict_errno(v, access);
		if (e)
			return -e;
		if (b.how == KILN_BIND_ANY)
			return call(a);
		if (b.how == KT_BIND_ABSENT)
			return -ENOENT;
		long fd = hold(&b, q.path, (size_t)n, tail, nofollow);
		if (fd == AGAIN)
			continue;
		if (fd < 0)
			return fd;
		long r = check_fd(a, fd);
		kt_close((int)fd);
		return r;
	}
	return -ENOENT;
}

long kt_access_bound(const struct kt_accesser *a)
{
	if (!a->path || !a->path[0])
		return call(a); /* EFAULT, ENOENT, or AT_EMPTY_PATH: the fd, checked when opened */
	return access_bound(a);
}

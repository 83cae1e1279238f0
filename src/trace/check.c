/* One checked path: make it absolute and clean, ask, turn the verdict into
 * the errno the hooked call fails with. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>

#include "trace/kt.h"

int kt_verdict_errno(int verdict, unsigned access)
{
	switch (verdict) {
	case KILN_V_ALLOW:
		return 0;
	case KILN_V_HIDE:
		/* The name exists (a hidden package owns it): creating it would
		 * clobber it, and EEXIST would reveal it. */
		return (access & KILN_A_CREATE) ? EACCES : ENOENT;
	case KILN_V_DENY:
		return EACCES;
	default:
		return EIO;
	}
}

int kt_path_tail_n(const char *path, size_t len)
{
	/* "link/" and "link/." make the kernel follow the link; the clean
	 * path sent drops both, so say it. */
	return len && (path[len - 1] == '/' ||
		       (path[len - 1] == '.' && (len == 1 || path[len - 2] == '/')));
}

int kt_check(int dirfd, const char *path, unsigned access, unsigned qflags, int atflags)
{
	bool writes = access & (KILN_A_WRITE | KILN_A_CREATE | KILN_A_DELETE);
	if (!path || (!path[0] && !(atflags & AT_EMPTY_PATH)))
		return 0; /* the real call reports EFAULT / ENOENT */
	if (!path[0]) /* AT_EMPTY_PATH: the fd itself, checked when opened */
		return writes ? kt_check_fd_write(dirfd, access) : 0;
	struct kt_question q;
	int tail;
	int n = kt_path_at_tail(dirfd, path, q.path, &tail);
	if (n < 0)
		return -n;
	if (atflags & AT_SYMLINK_NOFOLLOW)
		qflags |= KILN_Q_NOFOLLOW;
	if (tail)
		qflags &= ~KILN_Q_NOFOLLOW;
	return kt_verdict_errno(kt_ask_question(&q, (size_t)n, access, qflags), access);
}

unsigned kt_open_access(int flags)
{
	if (flags & O_PATH)
		return KILN_A_STAT;
	if ((flags & O_TMPFILE) == O_TMPFILE)
		return KILN_A_WRITE | KILN_A_CREATE; /* a new file in that directory */
	unsigned a;
	switch (flags & O_ACCMODE) {
	case O_RDONLY: a = (flags & O_DIRECTORY) ? KILN_A_LIST : KILN_A_READ; break;
	case O_WRONLY: a = KILN_A_WRITE; break;
	default: a = KILN_A_READ | KILN_A_WRITE; break;
	}
	if (flags & O_CREAT)
		a |= KILN_A_CREATE;
	if (flags & O_TRUNC)
		a |= KILN_A_WRITE;
	return a;
}

unsigned kt_open_qflags(int flags)
{
	if ((flags & O_NOFOLLOW) || ((flags & O_CREAT) && (flags & O_EXCL)))
		return KILN_Q_NOFOLLOW;
	return 0;
}

unsigned kt_fopen_access(const char *mode)
{
	if (!mode)
		return KILN_A_READ;
	unsigned a = 0;
	switch (mode[0]) {
	case 'r': a = KILN_A_READ; break;
	case 'w': a = KILN_A_WRITE | KILN_A_CREATE; break;
	case 'a': a = KILN_A_WRITE | KILN_A_CREATE; break;
	default: return KILN_A_READ; /* real fopen fails with EINVAL */
	}
	if (strchr(mode, '+'))
		a |= KILN_A_READ | KILN_A_WRITE;
	return a;
}

unsigned kt_fopen_qflags(const char *mode)
{
	return (mode && mode[0] != 'r' && strchr(mode, 'x')) ? KILN_Q_NOFOLLOW : 0;
}

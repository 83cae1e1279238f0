/* fopen and fopen64, bound to the file they open: glibc's fopen opens with
 * an internal call no hook sees, so checking the path and then calling it
 * would leave the check and the open apart (trace/bind.c). Here the file is
 * opened by the bound open, through the real open64, and handed to fdopen,
 * which is what fopen does inside. A mode with ",ccs=" (a wide stream with a
 * character set, which fdopen does not take) is checked and left to the real
 * fopen. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "trace/kt.h"
#include "common/rawsys.h"

static KT_HOT void *_Atomic real_fopen, *_Atomic real_fopen64, *_Atomic real_fdopen,
	*_Atomic real_open64;
static KT_HOT _Atomic int direct_open64;

/* open(2) flags of an fopen mode, as glibc reads it; -1 for a mode fopen
 * refuses (EINVAL) or one left to the real fopen. */
static int mode_flags(const char *mode)
{
	int flags;
	switch (mode[0]) {
	case 'r': flags = O_RDONLY; break;
	case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
	default: return -1;
	}
	for (const char *m = mode + 1; *m; m++) {
		if (*m == '+')
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'x')
			flags |= O_EXCL;
		else if (*m == 'e')
			flags |= O_CLOEXEC;
		else if (*m == ',')
			return -1; /* ",ccs=CHARSET" */
	}
	return flags;
}

static FILE *bound_fopen(const char *path, const char *mode, void *_Atomic *slot, const char *name)
{
	typedef FILE *(*fopen_fn)(const char *, const char *);
	typedef FILE *(*fdopen_fn)(int, const char *);
	fopen_fn real = (fopen_fn)kt_real(slot, name);
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	int flags = mode ? mode_flags(mode) : -1;
	if (kt_guard || !path || flags < 0) {
		if (kt_guard || !path || !mode)
			return real(path, mode); /* EFAULT / EINVAL: glibc's own answer */
		kt_enter();
		int e = kt_check(AT_FDCWD, path, kt_fopen_access(mode), kt_fopen_qflags(mode), 0);
		FILE *f = e ? NULL : real(path, mode);
		kt_leave();
		if (e)
			errno = e;
		return f;
	}
	void *open64_fn = kt_real(&real_open64, "open64");
	fdopen_fn fdo = (fdopen_fn)kt_real(&real_fdopen, "fdopen");
	if (!open64_fn || !fdo) {
		errno = ENOSYS;
		return NULL;
	}
	kt_enter();
	struct kt_opener o = { KT_VIA_OPEN, open64_fn, &direct_open64, AT_FDCWD, path, flags,
			       0666, NULL, 0 };
	long fd = kt_open_bound(&o, kt_open_access(flags), kt_open_qflags(flags), NULL);
	FILE *f = NULL;
	int e = fd < 0 ? (int)-fd : 0;
	if (fd >= 0) {
		/* fopen's "a" starts at the end (ftell says so); fdopen's
		 * would start where the fd is */
		if (mode[0] == 'a' && !strchr(mode, '+'))
			kt_sys3(SYS_lseek, fd, 0, SEEK_END);
		f = fdo((int)fd, mode);
		if (!f) {
			e = errno;
			kt_close((int)fd);
		}
	}
	kt_leave();
	if (!f)
		errno = e;
	return f;
}

KT_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return bound_fopen(path, mode, &real_fopen, "fopen");
}

KT_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return bound_fopen(path, mode, &real_fopen64, "fopen64");
}

/* The stat family bound to what was checked (docs/threat-model.md, "Check
 * and use"): what bind.c does for opens, for the calls that read a file's
 * metadata. Checked, then resolved again by the kernel, a name swapped
 * between a visible file and a symlink to a hidden one would give the
 * hidden file's inode, size and times (and its existence) to the caller.
 *
 *  - ANY (the managed trees, which the build cannot change): the real call.
 *  - NO_SYMLINKS (the area rule): openat2(O_PATH, RESOLVE_NO_SYMLINKS) of
 *    the path, then the metadata of that fd (fstatat or statx with
 *    AT_EMPTY_PATH): what is read is what was checked. An absent name
 *    (ENOENT, ENOTDIR) is the kernel's answer already, with no second walk.
 *    A symlink on the way (ELOOP) asks the server.
 *  - IDENT (the server's answer for a walk through a symlink): the real
 *    call, whose result names its file: another file than the one the
 *    server's walk saw (or a file where it saw none) asks again.
 *
 * After KT_BIND_TRIES contradicting answers the call fails with ENOENT. The
 * metadata is read with raw system calls only when the real function is
 * libc's own (else a preload library stacked after kiln's, fakeroot's,
 * would not see the call): then the fd is still the check, and the real
 * function reads the path. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define AGAIN    (-1000000)
#define UNUSABLE (-1000001)

typedef int (*stat_fn)(const char *, void *);
typedef int (*fstatat_fn)(int, const char *, void *, int);
typedef int (*xstat_fn)(int, const char *, void *);
typedef int (*fxstatat_fn)(int, int, const char *, void *, int);
typedef int (*statx_fn)(int, const char *, int, unsigned, void *);

static int is_statx(const struct kt_statter *s)
{
	return s->via == KT_SVIA_STATX || s->via == KT_SVIA_SYS_STATX;
}

static long call(const struct kt_statter *s)
{
	int r;
	switch (s->via) {
	case KT_SVIA_STAT:
		r = ((stat_fn)s->real)(s->path, s->buf);
		break;
	case KT_SVIA_FSTATAT:
		r = ((fstatat_fn)s->real)(s->dirfd, s->path, s->buf, s->flags);
		break;
	case KT_SVIA_XSTAT:
		r = ((xstat_fn)s->real)(s->ver, s->path, s->buf);
		break;
	case KT_SVIA_FXSTATAT:
		r = ((fxstatat_fn)s->real)(s->ver, s->dirfd, s->path, s->buf, s->flags);
		break;
	case KT_SVIA_STATX:
		r = ((statx_fn)s->real)(s->dirfd, s->path, s->flags, s->mask, s->buf);
		break;
	default:
		return kt_sys5(SYS_statx, s->dirfd, s->path, s->flags, s->mask, s->buf);
	}
	return r < 0 ? -errno : 0;
}

/* Whether the call's flags, mask and version are ones by_fd reads as the
 * real call would: anything else (a flag of a newer kernel, or one the
 * kernel or glibc refuse) goes to the real function. */
static int plain(const struct kt_statter *s)
{
	unsigned sync = AT_STATX_SYNC_TYPE;
	if (is_statx(s))
		return !(s->flags & ~(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH | sync)) &&
		       (s->flags & sync) != sync && !(s->mask & STATX__RESERVED);
	if ((s->via == KT_SVIA_XSTAT || s->via == KT_SVIA_FXSTATAT) && s->ver != 0 && s->ver != 1)
		return 0; /* glibc refuses other versions (EINVAL) */
	return !(s->flags & ~(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH));
}

/* The metadata of fd, as the real call gives it for the path. */
static long by_fd(const struct kt_statter *s, long fd)
{
	if (is_statx(s))
		return kt_sys5(SYS_statx, fd, "", AT_EMPTY_PATH | (s->flags & AT_STATX_SYNC_TYPE), s->mask,
			       s->buf);
	return kt_sys4(SYS_newfstatat, fd, "", s->buf, AT_EMPTY_PATH);
}

/* abs, n, tail: as for kt_openat2_at_tail. */
static long stat_no_symlinks(const struct kt_statter *s, char *abs, size_t n, int tail,
			     int nofollow)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_NO_SYMLINKS,
	};
	long fd = kt_openat2_at_tail(abs, n, tail, &how);
	/* No fd to spare (EMFILE, ENFILE) is no answer about the path. */
	if (fd == -ENOSYS || fd == -EINVAL || fd == -E2BIG || fd == -EAGAIN || fd == -EXDEV ||
	    fd == -EMFILE || fd == -ENFILE)
		return UNUSABLE;
	if (fd < 0)
		return fd;
	/* Not libc's function, or arguments by_fd does not read: checked,
	 * not bound, the real function reads the path. */
	int direct = s->via == KT_SVIA_SYS_STATX || kt_real_is_libc(s->real, s->direct);
	long r = direct && plain(s) ? by_fd(s, fd) : call(s);
	kt_close((int)fd);
	return r;
}

/* The caller's buffer, kept before a real call whose result may yet be
 * refused: a call that fails leaves it as it was, as the kernel does, not
 * holding what a refused file's stat read into it. Copied by the kernel, so
 * that a bad pointer is the real call's EFAULT and not a fault in here: 0,
 * or -EFAULT. */
struct kept {
	union {
		struct stat st;
		struct statx sx;
	} b;
	size_t size;
};

static long keep(const struct kt_statter *s, struct kept *k)
{
	k->size = is_statx(s) ? sizeof k->b.sx : sizeof k->b.st;
	struct iovec mine = { &k->b, k->size }, theirs = { s->buf, k->size };
	long r = kt_sys6(SYS_process_vm_readv, kt_getpid(), (long)&mine, 1, (long)&theirs, 1, 0);
	if (r == (long)k->size)
		return 0;
	if (r >= 0 || r == -EFAULT)
		return -EFAULT;
	memcpy(&k->b, s->buf, k->size); /* not allowed here (a seccomp filter) */
	return 0;
}

static void put_back(const struct kt_statter *s, const struct kept *k)
{
	memcpy(s->buf, &k->b, k->size); /* the real call wrote it: it is writable */
}

/* The file the call's result names. */
static int read_bound_file(const struct kt_statter *s, const struct kiln_binding *b)
{
	if (is_statx(s)) {
		const struct statx *x = s->buf;
		return kt_is_bound_file(makedev(x->stx_dev_major, x->stx_dev_minor), x->stx_ino, b);
	}
	const struct stat *st = s->buf;
	return kt_is_bound_file(st->st_dev, st->st_ino, b);
}

static long stat_ident(const struct kt_statter *s, const struct kiln_binding *b)
{
	struct kept k;
	long r = keep(s, &k);
	if (r == 0)
		r = call(s);
	if (r < 0)
		return r; /* nothing read: the errno says no more than an absent file's */
	if (read_bound_file(s, b))
		return 0;
	put_back(s, &k);
	return AGAIN;
}

static long stat_bound(const struct kt_statter *s)
{
	/* Arguments the kernel or glibc refuse are refused whatever the path
	 * names, a hidden file as an absent one: asked first. (A flag only a
	 * newer kernel knows reads the file: that call is checked below.) */
	if (!plain(s)) {
		struct kept k;
		long r = keep(s, &k);
		if (r == 0)
			r = call(s);
		if (r < 0 && r != -ENOENT && r != -ENOTDIR && r != -ELOOP && r != -EACCES)
			return r;
		if (r == 0)
			put_back(s, &k);
	}
	struct kt_question q;
	int tail;
	int n = kt_path_at_tail(s->dirfd, s->path, q.path, &tail);
	if (n < 0)
		return n;
	int nofollow = (s->flags & AT_SYMLINK_NOFOLLOW) && !tail;
	unsigned qflags = nofollow ? KILN_Q_NOFOLLOW : 0;
	for (int t = 0; t < KT_BIND_TRIES; t++) {
		struct kiln_binding b;
		int v = kt_ask_bound(&q, (size_t)n, KILN_A_STAT, qflags,
				     KILN_ASK_BIND | KILN_ASK_ABSENT | (t ? KILN_ASK_SERVER : 0), &b);
		int e = kt_verdict_errno(v, KILN_A_STAT);
		if (e)
			return -e;
		if (b.how == KILN_BIND_ANY)
			return call(s);
		if (b.how == KT_BIND_ABSENT)
			return -ENOENT;
		if (b.how == KILN_BIND_NO_SYMLINKS) {
			long r = stat_no_symlinks(s, q.path, (size_t)n, tail, nofollow);
			if (r != -ELOOP && r != UNUSABLE)
				return r;
			if (b.cached)
				continue; /* a value has no identities: the server's answer has */
		}
		long r = stat_ident(s, &b);
		if (r != AGAIN)
			return r;
	}
	return -ENOENT;
}

long kt_stat_bound(const struct kt_statter *s)
{
	if (!s->path || !s->path[0])
		return call(s); /* EFAULT, ENOENT, or AT_EMPTY_PATH: the fd, checked when opened */
	return stat_bound(s);
}

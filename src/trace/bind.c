/* Opening what was checked (issue 9, class 5; docs/threat-model.md).
 *
 * A check and the call it guards resolve the path twice: a process that
 * swaps a symlink in between (a visible file when checked, a hidden one at
 * the call) would otherwise read the hidden file. Here the open itself is
 * tied to the answer (src/ipc/proto.h, enum kiln_bind):
 *
 *  - ANY: the walk stayed in registry-managed trees, which nothing of the
 *    build can change: the real call, as it was asked.
 *  - NO_SYMLINKS: the area rule (build directory, /tmp...): the answer holds
 *    in every state in which the path has no symlink on its way. The open is
 *    one openat2(RESOLVE_NO_SYMLINKS) with the caller's flags, so check and
 *    use are the same system call (and one fewer than an O_PATH check then
 *    the real open). A symlink (ELOOP) sends the question to the server.
 *  - IDENT: anything else (a symlink on the way, a mutable area): the real
 *    call, then fstat: the fd must be the file the server's walk saw, or lie
 *    in the directory it saw for a name to be created there; else it is
 *    closed and the question asked again, so a file replaced in between is
 *    simply reopened. A write open truncates only once the file is known
 *    (O_TRUNC is applied with ftruncate after the check).
 *
 * After KT_BIND_TRIES answers that the file system keeps contradicting, the
 * open fails with ENOENT, as for a file removed under the caller.
 *
 * The real function is called for ANY and IDENT, so a preload library
 * stacked after kiln's still sees those opens; NO_SYMLINKS opens use a raw
 * openat2 only when the real function is libc's own (else they bind by
 * identity, one round trip). */
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <link.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define AGAIN         (-1000000) /* ask again: the file changed under the call */
#define UNUSABLE      (-1000001) /* openat2 cannot express this open */

#define OPEN_FLAGS                                                                          \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |   \
	 O_SYNC | FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME |      \
	 O_CLOEXEC | O_PATH | O_TMPFILE)
#define OPATH_FLAGS (O_DIRECTORY | O_NOFOLLOW | O_PATH | O_CLOEXEC)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);

/* The call the program made, with `flags` in place of its own. */
static long call(const struct kt_opener *o, int flags)
{
	int r;
	switch (o->via) {
	case KT_VIA_OPEN:
		r = ((open_fn)o->real)(o->path, flags, o->mode);
		break;
	case KT_VIA_OPENAT:
		r = ((openat_fn)o->real)(o->dirfd, o->path, flags, o->mode);
		break;
	case KT_VIA_OPEN_2:
		r = ((open2_fn)o->real)(o->path, flags);
		break;
	case KT_VIA_OPENAT_2:
		r = ((openat2_fn)o->real)(o->dirfd, o->path, flags);
		break;
	case KT_VIA_SYSCALL2: {
		if (flags == o->flags || o->how_size < sizeof(struct open_how))
			return kt_sys4(SYS_openat2, o->dirfd, o->path, o->how, o->how_size);
		struct open_how h;
		memcpy(&h, o->how, sizeof h);
		h.flags = (unsigned)flags;
		return kt_sys4(SYS_openat2, o->dirfd, o->path, &h, sizeof h);
	}
	default:
		return kt_sys4(SYS_openat, o->dirfd, o->path, flags, o->mode);
	}
	return r < 0 ? -errno : r;
}

/* ---- is the real function libc's own? ------------------------------------- */

/* The loaded extent of libc, from its link map and the program headers its
 * mapping begins with (read once, without the loader's lock: libc is never
 * unloaded, and its entry is in the list from the start). */
static KT_HOT _Atomic uintptr_t libc_lo, libc_hi;

static void find_libc(void)
{
	for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		size_t n = l->l_name ? strlen(l->l_name) : 0;
		if (n < 10 || strcmp(l->l_name + n - 10, "/libc.so.6"))
			continue;
		const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)l->l_addr;
		if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_phentsize != sizeof(ElfW(Phdr)))
			return;
		const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(l->l_addr + eh->e_phoff);
		uintptr_t lo = UINTPTR_MAX, hi = 0;
		for (int i = 0; i < eh->e_phnum; i++) {
			if (ph[i].p_type != PT_LOAD)
				continue;
			uintptr_t a = l->l_addr + ph[i].p_vaddr;
			if (a < lo)
				lo = a;
			if (a + ph[i].p_memsz > hi)
				hi = a + ph[i].p_memsz;
		}
		atomic_store_explicit(&libc_lo, lo, memory_order_relaxed);
		atomic_store_explicit(&libc_hi, hi, memory_order_release);
		return;
	}
}

int kt_real_is_libc(const void *real, _Atomic int *known)
{
	int d = known ? atomic_load_explicit(known, memory_order_relaxed) : 2;
	if (d == 0) {
		if (!atomic_load_explicit(&libc_hi, memory_order_acquire))
			find_libc();
		uintptr_t a = (uintptr_t)real;
		d = a >= atomic_load_explicit(&libc_lo, memory_order_relaxed) &&
				    a < atomic_load_explicit(&libc_hi, memory_order_acquire)
			? 1
			: 2;
		atomic_store_explicit(known, d, memory_order_relaxed);
	}
	return d == 1;
}

/* Whether a raw openat2 may stand in for the real call: it is libc's own,
 * or the program used syscall(). */
static int direct(const struct kt_opener *o)
{
	if (o->via == KT_VIA_SYSCALL || o->via == KT_VIA_SYSCALL2)
		return 1;
	return kt_real_is_libc(o->real, o->direct);
}

/* ---- NO_SYMLINKS ---------------------------------------------------------- */

long kt_openat2(const char *path, const struct open_how *how)
{
	if (atomic_load_explicit(&kt_no_openat2, memory_order_relaxed))
		return -ENOSYS;
	long fd = kt_sys4(SYS_openat2, AT_FDCWD, path, how, sizeof *how);
	if (fd == -ENOSYS)
		atomic_store_explicit(&kt_no_openat2, 1, memory_order_relaxed);
	return fd;
}

long kt_openat2_at_tail(char *abs, size_t n, int tail, const struct open_how *how)
{
	if (tail) {
		abs[n] = '/';
		abs[n + 1] = '\0';
	}
	long fd = kt_openat2(abs, how);
	abs[n] = '\0';
	return fd;
}

/* abs: the absolute clean path of length n in a question buffer, whose
 * bytes after it are scratch ("/" is put there when the caller's path
 * ended in "/" or "/.": the kernel wants a directory). */
static long open_no_symlinks(const struct kt_opener *o, char *abs, size_t n, int tail)
{
	if (atomic_load_explicit(&kt_no_openat2, memory_order_relaxed) || !direct(o))
		return UNUSABLE;
	/* open(2) ignores unknown flags and, with O_PATH, all but four;
	 * openat2 refuses them: pass what open would use. */
	int flags = o->flags & OPEN_FLAGS;
	if (flags & O_PATH)
		flags &= OPATH_FLAGS;
	struct open_how how = { .flags = (unsigned)flags, .resolve = RESOLVE_NO_SYMLINKS };
	if (o->via == KT_VIA_SYSCALL2) {
		if (o->how_size < sizeof how)
			return UNUSABLE;
		memcpy(&how, o->how, sizeof how);
		how.resolve |= RESOLVE_NO_SYMLINKS;
	} else if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		how.mode = o->mode & 07777;
	}
	long fd = kt_openat2_at_tail(abs, n, tail, &how);
	if (fd == -ENOSYS || fd == -EINVAL || fd == -ENAMETOOLONG || fd == -E2BIG ||
	    fd == -EAGAIN || fd == -EXDEV)
		return UNUSABLE;
	return fd;
}

/* ---- IDENT ------------------------------------------------------------------ */

static int same_id(const struct stat *st, uint64_t dev, uint64_t ino, int dev_only)
{
	return (uint64_t)st->st_dev == dev && (dev_only || (uint64_t)st->st_ino == ino);
}

/* Whether the file open as fd lies in directory (dev, ino): the directory
 * its path (as the kernel names it now) leads to. Rare (creations the
 * server decided): its buffer is not in the common path's stack frame. */
__attribute__((noinline)) static int in_dir(int fd, uint64_t dev, uint64_t ino)
{
	char p[KT_PATH_BUF];
	int n = kt_fd_path(fd, p);
	if (n <= 0)
		return 0;
	/* an unnamed O_TMPFILE file reads "DIR/#INO (deleted)" */
	while (n > 1 && p[n - 1] != '/')
		n--;
	if (n > 1)
		n--;
	p[n] = '\0';
	struct stat st;
	return kt_sys4(SYS_newfstatat, AT_FDCWD, p, &st, 0) == 0 && same_id(&st, dev, ino, 0);
}

static long open_ident(const struct kiln_binding *b, const struct kt_opener *o)
{
	int flags = o->flags;
	int tmpfile = (flags & O_TMPFILE) == O_TMPFILE;
	int excl = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	int trunc = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
	int f = trunc ? flags & ~O_TRUNC : flags;
	int exists = (b->id_flags & KILN_ID_FILE) != 0;
	if (exists && !excl && !tmpfile)
		f &= ~O_CREAT; /* it is there: open that one, create nothing */
	long fd = call(o, f);
	if (fd < 0) {
		/* Gone since the server looked: a creation must now create. */
		if (fd == -ENOENT && exists && (flags & O_CREAT) && !excl)
			return AGAIN;
		return fd;
	}
	struct stat st;
	int ok;
	if (kt_sys2(SYS_fstat, fd, &st) < 0)
		ok = 0;
	else if (tmpfile) /* a new unnamed file: in the directory checked */
		ok = exists && in_dir((int)fd, b->dev, b->ino);
	else if (exists && !excl)
		ok = same_id(&st, b->dev, b->ino, (b->id_flags & KILN_ID_DEV_ONLY) != 0);
	else if (f & O_CREAT) /* created (or found) where the server saw the name */
		ok = (b->id_flags & KILN_ID_DIR) && in_dir((int)fd, b->dir_dev, b->dir_ino);
	else /* the path reached nothing when checked: it has changed */
		ok = 0;
	if (!ok) {
		kt_close((int)fd);
		return AGAIN;
	}
	if (trunc && S_ISREG(st.st_mode) && st.st_size) {
		long r = kt_sys2(SYS_ftruncate, fd, 0);
		if (r < 0) {
			kt_close((int)fd);
			return r;
		}
	}
	return fd;
}

/* ---- the bound open ------------------------------------------------------- */

static long open_bound(const struct kt_opener *o, struct kt_question *q, int n, int tail,
		       unsigned access, unsigned qflags, unsigned *how_used)
{
	if (tail)
		qflags &= ~KILN_Q_NOFOLLOW;
	long r = -ENOENT;
	for (int t = 0; t < KT_BIND_TRIES; t++) {
		struct kiln_binding b;
		int v = kt_ask_bound(q, (size_t)n, access, qflags,
				     KILN_ASK_BIND | (t ? KILN_ASK_SERVER : 0), &b);
		int e = kt_verdict_errno(v, access);
		if (how_used)
			*how_used = e ? KT_BIND_REFUSED : b.how;
		if (e)
			return -e;
		if (b.how == KILN_BIND_ANY)
			return call(o, o->flags);
		if (b.how == KILN_BIND_NO_SYMLINKS) {
			r = open_no_symlinks(o, q->path, (size_t)n, tail);
			if (r != -ELOOP && r != UNUSABLE)
				return r;
			/* A symlink on the way (or the last component under
			 * O_NOFOLLOW), or an open openat2 cannot express: a
			 * cache value has no identities, so the server is
			 * asked; the server's answer has them. */
			if (b.cached)
				continue;
		}
		r = open_ident(&b, o);
		if (r != AGAIN)
			return r;
		r = -ENOENT;
	}
	return r;
}

long kt_open_bound(const struct kt_opener *o, unsigned access, unsigned qflags, unsigned *how_used)
{
	if (how_used)
		*how_used = KILN_BIND_ANY;
	if (!o->path || !o->path[0])
		return call(o, o->flags); /* EFAULT / ENOENT: the kernel says so */
	struct kt_question q;
	int tail;
	int n = kt_path_at_tail(o->dirfd, o->path, q.path, &tail);
	if (n < 0)
		return n;
	return open_bound(o, &q, n, tail, access, qflags, how_used);
}

long kt_open_bound_q(const struct kt_opener *o, struct kt_question *q, int n, unsigned access,
		     unsigned qflags, unsigned *how_used)
{
	/* q->path is clean already: a "/" or "/." the caller's path ended in
	 * was the caller's to judge when it cleaned it. */
	return open_bound(o, q, n, 0, access, qflags, how_used);
}

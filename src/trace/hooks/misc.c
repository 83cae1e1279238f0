/* dlopen (the loader opens libraries with internal calls) and the syscall()
 * entry point for the file system calls programs make through it. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_dlopen, *_Atomic real_dlerror, *_Atomic real_syscall;

/* ---- dlopen --------------------------------------------------------------- */

/* dlerror() text for a library kiln refused, per thread (kept small: static
 * TLS is paid for by every thread of every traced process). */
static KT_TLS char dl_msg[512];
static KT_TLS int dl_msg_set;

static void *dl_refuse(const char *file, int err)
{
	const char *why = err == ENOENT ? ": cannot open shared object file: No such file or directory"
		: err == EACCES         ? ": cannot open shared object file: Permission denied"
					: ": cannot open shared object file: Input/output error";
	size_t wl = strlen(why), fl = strlen(file);
	if (fl > sizeof dl_msg - wl - 1)
		file += fl - (sizeof dl_msg - wl - 1), fl = sizeof dl_msg - wl - 1;
	memcpy(dl_msg, file, fl);
	memcpy(dl_msg + fl, why, wl + 1);
	dl_msg_set = 1;
	return NULL;
}

KT_EXPORT void *dlopen(const char *file, int flags)
{
	typedef void *(*fn)(const char *, int);
	fn real = REAL(dlopen, fn);
	/* Resolved now: dlsym, which resolving it later would call, clears the
	 * error the real dlopen is about to leave for dlerror. */
	REAL(dlerror, char *(*)(void));
	if (!file || kt_guard)
		return real(file, flags);
	kt_enter();
	if (strchr(file, '/')) {
		int e = kt_check(AT_FDCWD, file, KILN_A_READ, 0, 0);
		void *h = e ? dl_refuse(file, e) : real(file, flags);
		kt_leave();
		return h;
	}
	/* A bare name is searched by the loader (LD_LIBRARY_PATH, ld.so.cache,
	 * default directories): check the file it found. Its constructors have
	 * run by then; the program still sees the library as absent. */
	void *h = real(file, flags);
	if (h) {
		struct link_map *lm = NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] == '/') {
			int e = kt_check(AT_FDCWD, lm->l_name, KILN_A_READ, 0, 0);
			if (e) {
				dlclose(h);
				kt_leave();
				return dl_refuse(file, e);
			}
		}
	}
	kt_leave();
	return h;
}

KT_EXPORT char *dlerror(void)
{
	if (dl_msg_set) {
		dl_msg_set = 0;
		return dl_msg;
	}
	return REAL(dlerror, char *(*)(void))();
}

/* ---- syscall() -------------------------------------------------------------- */

ssize_t getdents64(int fd, void *buf, size_t count);

static long sys_result(long r)
{
	if (kt_sys_failed(r)) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* syscall(SYS_open/openat/openat2): bound to the file opened (bind.c). */
static long bound_open(enum kt_open_via via, int dirfd, const char *path, int flags, unsigned mode,
		       const struct open_how *how, size_t how_size)
{
	kt_enter();
	struct kt_opener o = { via, NULL, NULL, dirfd, path, flags, mode, how, how_size };
	long r = kt_open_bound(&o, kt_open_access(flags), kt_open_qflags(flags), NULL);
	kt_leave();
	return sys_result(r);
}

KT_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	int err = -1;
	switch (nr) {
	case SYS_open:
		return bound_open(KT_VIA_SYSCALL, AT_FDCWD, (const char *)a, (int)b, (unsigned)c, NULL, 0);
	case SYS_openat:
		return bound_open(KT_VIA_SYSCALL, (int)a, (const char *)b, (int)c, (unsigned)d, NULL, 0);
	case SYS_openat2: {
		const struct open_how *how = (const struct open_how *)c;
		/* RESOLVE_IN_ROOT resolves "/", ".." and absolute symlinks inside
		 * dirfd: a root the server does not resolve in. Refused with
		 * ENOSYS, so callers fall back to openat (checked). The other
		 * resolve flags only make the kernel stricter than the check. */
		if (how && (size_t)d >= sizeof(struct open_how) && (how->resolve & RESOLVE_IN_ROOT)) {
			errno = ENOSYS;
			return -1;
		}
		if (!how || (size_t)d < sizeof(struct open_how)) /* the kernel's EFAULT / EINVAL */
			return sys_result(kt_sys4(SYS_openat2, a, b, c, d));
		return bound_open(KT_VIA_SYSCALL2, (int)a, (const char *)b, (int)how->flags, 0, how,
				  (size_t)d);
	}
	case SYS_statx: {
		kt_enter();
		struct kt_statter st = { KT_SVIA_SYS_STATX, NULL, NULL, 0, (int)a, (const char *)b,
					 (int)c, (unsigned)d, (void *)e };
		long r = kt_stat_bound(&st);
		kt_leave();
		return sys_result(r);
	}
	case SYS_faccessat2: {
		kt_enter();
		struct kt_accesser ac = { KT_AVIA_SYS_FACCESSAT2, NULL, NULL, (int)a, (const char *)b,
					  (int)c, (int)d };
		long r = kt_access_bound(&ac);
		kt_leave();
		return sys_result(r);
	}
	case SYS_renameat2:
		kt_enter();
		err = kt_check((int)a, (const char *)b, KILN_A_DELETE, KILN_Q_NOFOLLOW, 0);
		if (!err)
			err = kt_check((int)c, (const char *)d, kt_rename_to_class((unsigned)e),
				       KILN_Q_NOFOLLOW, 0);
		break;
	case SYS_ioctl:
		kt_enter();
		err = kt_ioctl_refused((int)a, (unsigned long)b);
		break;
	case SYS_getdents64:
		return getdents64((int)a, (void *)b, (size_t)c);
	/* root, mounts, namespaces (trace/ns.c); clone itself goes to the real
	 * syscall(), which a child on a new stack must return through */
	case SYS_chroot:
	case SYS_setns:
	case SYS_mount:
	case SYS_umount2:
	case SYS_pivot_root:
	case SYS_fsopen:
	case SYS_fsmount:
	case SYS_fspick:
	case SYS_move_mount:
	case SYS_mount_setattr:
	case SYS_unshare:
	case SYS_clone:
	case SYS_clone3:
	case SYS_open_tree: {
		unsigned long fl = nr == SYS_unshare || nr == SYS_clone ? (unsigned long)a
				 : nr == SYS_clone3 ? (a ? ((const struct clone_args *)a)->flags : 0)
				 : nr == SYS_open_tree && !(c & OPEN_TREE_CLONE) ? 0 : KT_NS_ALWAYS;
		int ne = kt_ns_refused(fl);
		if (ne) {
			errno = ne;
			return -1;
		}
		if (nr == SYS_open_tree) {
			kt_enter();
			err = kt_check((int)a, (const char *)b, KILN_A_STAT, 0, (int)c);
			break;
		}
		return REAL(syscall, long (*)(long, ...))(nr, a, b, c, d, e, f);
	}
	/* kiln's own fds, as in hooks/fd.c */
	case SYS_close:
		if (kt_is_kiln_fd((int)a)) {
			errno = EBADF;
			return -1;
		}
		return sys_result(kt_sys1(SYS_close, a));
	case SYS_close_range:
		if ((unsigned)a > (unsigned)b) {
			errno = EINVAL;
			return -1;
		}
		return kt_close_range_around((unsigned)a, (unsigned)b, (int)c);
	case SYS_fcntl:
		if (kt_is_kiln_fd((int)a)) {
			errno = EBADF;
			return -1;
		}
		return REAL(syscall, long (*)(long, ...))(nr, a, b, c, d, e, f);
	case SYS_dup2:
	case SYS_dup3: {
		int de = kt_dup_target_ok((int)a, (int)b);
		if (de) {
			errno = de;
			return -1;
		}
		return sys_result(kt_sys6(nr, a, b, c, d, e, f));
	}
	default:
		return REAL(syscall, long (*)(long, ...))(nr, a, b, c, d, e, f);
	}
	if (err) {
		kt_leave();
		errno = err;
		return -1;
	}
	long r = sys_result(kt_sys6(nr, a, b, c, d, e, f));
	kt_leave();
	return r;
}

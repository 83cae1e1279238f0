/* The wrappers generated from the hook table (hooks.def): each resolves its
 * real function on first use, checks its path arguments, and either fails
 * the way the table says or calls through. No locks, no malloc, no stdio. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>
#include <aliases.h>
#include <grp.h>
#include <iconv.h>
#include <netdb.h>
#include <netinet/ether.h>
#include <pwd.h>
#include <rpc/netdb.h>
#include <shadow.h>
#include <time.h>

#include "trace/kt.h"

/* Declared by glibc only under _FORTIFY_SOURCE, or no longer declared (the
 * __xstat-era names stay exported for binaries built against old glibc). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __xstat(int v, const char *path, struct stat *b);
int __xstat64(int v, const char *path, struct stat64 *b);
int __lxstat(int v, const char *path, struct stat *b);
int __lxstat64(int v, const char *path, struct stat64 *b);
int __fxstatat(int v, int dirfd, const char *path, struct stat *b, int fl);
int __fxstatat64(int v, int dirfd, const char *path, struct stat64 *b, int fl);
int __xmknod(int v, const char *path, mode_t m, dev_t *d);
int __xmknodat(int v, int dirfd, const char *path, mode_t m, dev_t *d);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t bl);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t bl);

/* Vocabulary of the table. */
#define STAT   KILN_A_STAT
#define READ   KILN_A_READ
#define WRITE  KILN_A_WRITE
#define EXEC   KILN_A_EXEC
#define LIST   KILN_A_LIST
#define CREATE KILN_A_CREATE
#define DELETE KILN_A_DELETE
#define NOFOL  KILN_Q_NOFOLLOW
#define P(dirfd, path, acc, qf)        kt_check((dirfd), (path), (acc), (qf), 0)
#define PAT(dirfd, path, acc, qf, atf) kt_check((dirfd), (path), (acc), (qf), (atf))
#define NS(flags)                      kt_ns_refused(flags)
#define FD(fd, acc)                    kt_check_fd_write((fd), (acc))
#define SUN(addr, len, acc)            kt_check_sockaddr((addr), (unsigned)(len), (acc))
#define NS_ALWAYS                      KT_NS_ALWAYS

#define KT_HOOK(ret, name, params, args, denial, check)                        \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	KT_EXPORT ret name params                                              \
	{                                                                      \
		typedef ret(*kt_fn) params;                                    \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return denial;                                         \
		}                                                              \
		if (kt_guard)                                                  \
			return real args;                                      \
		kt_enter();                                                    \
		int kt_err = (check);                                          \
		if (kt_err) {                                                  \
			kt_leave();                                            \
			errno = kt_err;                                        \
			return denial;                                         \
		}                                                              \
		ret kt_ret = real args;                                        \
		kt_leave();                                                    \
		return kt_ret;                                                 \
	}

/* The open forms: the check bound to the file opened (kt_open_bound). */
#define KT_OPEN_BOUND(name, via, dirfd_, path_, flags_, mode_)                 \
	struct kt_opener kt_o = { KT_VIA_##via, (void *)real, &kt_direct_##name, \
				  (dirfd_), (path_), (flags_), (mode_), NULL, 0 }; \
	kt_enter();                                                            \
	long kt_r = kt_open_bound(&kt_o, kt_open_access(flags_),               \
				  kt_open_qflags(flags_), NULL);               \
	kt_leave();                                                            \
	if (kt_r < 0) {                                                        \
		errno = (int)-kt_r;                                            \
		return -1;                                                     \
	}                                                                      \
	return (int)kt_r;

#define KT_HOOK_OPEN(name, via, params, args, dirfd, path, flags)              \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	static KT_HOT _Atomic int kt_direct_##name;                            \
	KT_EXPORT int name params                                              \
	{                                                                      \
		mode_t mode = 0;                                               \
		if (__OPEN_NEEDS_MODE(flags)) {                                \
			va_list ap;                                            \
			va_start(ap, flags);                                   \
			mode = va_arg(ap, mode_t);                             \
			va_end(ap);                                            \
		}                                                              \
		typedef int (*kt_fn) params;                                   \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return -1;                                             \
		}                                                              \
		if (kt_guard)                                                  \
			return real args;                                      \
		KT_OPEN_BOUND(name, via, dirfd, path, flags, mode)             \
	}

#define KT_HOOK_OPEN2(name, via, params, args, dirfd, path, flags)             \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	static KT_HOT _Atomic int kt_direct_##name;                            \
	KT_EXPORT int name params                                              \
	{                                                                      \
		typedef int (*kt_fn) params;                                   \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return -1;                                             \
		}                                                              \
		if (kt_guard)                                                  \
			return real args;                                      \
		KT_OPEN_BOUND(name, via, dirfd, path, flags, 0)                \
	}

#define KT_HOOK_CREAT(name, open_name)                                         \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	static KT_HOT _Atomic int kt_direct_##name;                            \
	KT_EXPORT int name(const char *path, mode_t mode)                      \
	{                                                                      \
		typedef int (*kt_fn)(const char *, int, ...);                  \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #open_name);      \
		int flags = O_CREAT | O_WRONLY | O_TRUNC;                      \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return -1;                                             \
		}                                                              \
		if (kt_guard)                                                  \
			return real(path, flags, mode);                        \
		KT_OPEN_BOUND(name, OPEN, AT_FDCWD, path, flags, mode)         \
	}

/* A bound call's end: 0, or -1 with errno from its -errno. */
#define KT_RETURN_BOUND(expr)                                                  \
	do {                                                                   \
		kt_enter();                                                    \
		long kt_r = (expr);                                            \
		kt_leave();                                                    \
		if (kt_r < 0) {                                                \
			errno = (int)-kt_r;                                    \
			return -1;                                             \
		}                                                              \
		return 0;                                                      \
	} while (0)

/* A call that returns 0 or -1, bound to the file it reads (expr: its
 * kt_*_bound call, which may use `real` and kt_direct_##name). */
#define KT_HOOK_BOUND(name, params, args, expr)                                \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	static KT_HOT _Atomic int kt_direct_##name;                            \
	KT_EXPORT int name params                                              \
	{                                                                      \
		typedef int (*kt_fn) params;                                   \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return -1;                                             \
		}                                                              \
		if (kt_guard)                                                  \
			return real args;                                      \
		KT_RETURN_BOUND(expr);                                         \
	}

/* The stat forms: bound to the file read (kt_stat_bound). */
#define KT_HOOK_STAT(name, via, params, args, ver_, dirfd_, path_, flags_, mask_, buf_) \
	KT_HOOK_BOUND(name, params, args,                                      \
		      kt_stat_bound(&(struct kt_statter){ KT_SVIA_##via, (void *)real, \
							  &kt_direct_##name, (ver_), (dirfd_), \
							  (path_), (flags_), (mask_), (buf_) }))

/* The access forms: bound to the file asked about (kt_access_bound). */
#define KT_HOOK_ACCESS(name, via, params, args, dirfd_, path_, mode_, flags_)  \
	KT_HOOK_BOUND(name, params, args,                                      \
		      kt_access_bound(&(struct kt_accesser){ KT_AVIA_##via, (void *)real, \
							     &kt_direct_##name, (dirfd_), \
							     (path_), (mode_), (flags_) }))

#define KT_HOOK_GLIBC(ret, name, params, args, denial, set)                    \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	KT_EXPORT ret name params                                              \
	{                                                                      \
		typedef ret(*kt_fn) params;                                    \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real) {                                                   \
			errno = ENOSYS;                                        \
			return denial;                                         \
		}                                                              \
		struct kt_window kt_w;                                         \
		if (kt_guard || !kt_data_window(set, &kt_w))                   \
			return real args;                                      \
		ret kt_ret = real args;                                        \
		kt_data_done(set, &kt_w);                                      \
		return kt_ret;                                                 \
	}

#define KT_HOOK_GLIBC_VOID(name, params, args, set)                            \
	static KT_HOT void *_Atomic kt_real_##name;                            \
	KT_EXPORT void name params                                             \
	{                                                                      \
		typedef void (*kt_fn) params;                                  \
		kt_fn real = (kt_fn)kt_real(&kt_real_##name, #name);           \
		if (!real)                                                     \
			return;                                                \
		struct kt_window kt_w;                                         \
		if (kt_guard || !kt_data_window(set, &kt_w)) {                 \
			real args;                                             \
			return;                                                \
		}                                                              \
		real args;                                                     \
		kt_data_done(set, &kt_w);                                      \
	}

#include "trace/hooks/hooks.def"

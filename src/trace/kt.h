/* Internals of the preload library shared by its files (never exported).
 *
 * Everything here runs on the hook path: no locks, no malloc, no stdio; the
 * only system calls are the raw ones of rawsys.h. Functions return 0 or a
 * positive errno value rather than touching errno, so a hook sets errno once,
 * at the very end, and a failed check never disturbs the caller's errno.
 */
#ifndef KILN_TRACE_KT_H
#define KILN_TRACE_KT_H

#include <spawn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/proto.h"
#include "shm/shmmap.h"
#include "trace/verdict.h"

#pragma GCC visibility push(hidden)

/* ---- state.c: process state, captured environment, entry marks --------- */

/* Idempotent; done by the constructor, or by the first hook that runs before
 * it (another library's constructor may call open() first). */
void kt_init(void);

/* Value captured at start-up for one of kiln's variables (LD_PRELOAD,
 * KILN_*), or NULL. Those values are restored into every exec environment. */
const char *kt_env(const char *name);

/* Captured "NAME=value" strings, `*n` of them. */
const char *const *kt_env_all(size_t *n);

/* False for an environment entry that cannot be one of kiln's variables:
 * all of them start with 'L' (LD_PRELOAD) or 'K' (KILN_*), and a build's
 * environment has dozens of entries, scanned at every start and exec. */
static inline int kt_may_be_kept(const char *entry)
{
	return entry[0] == 'L' || entry[0] == 'K';
}

/* The re-entrancy guard: set while the library resolves a real symbol with
 * dlsym (the only place where it calls code that may call a hooked function:
 * the loader, or an allocator initialising itself). A hook entered while it
 * is set calls the real function without a check. */
extern __thread int kt_guard __attribute__((tls_model("initial-exec")));

/* Set (by the vfork hook, hooks/vfork.c) while this thread's memory is a
 * vfork child's too: from vfork until the parent resumes. The child runs on
 * the parent's thread, so it sees the flag and no other thread does. Code
 * running in the child must leave nothing in memory that the parent would
 * read as its own: no connection kept, no fd recorded or moved, no attach.
 * KT_VFORK_COUNTED: the child has been counted as a process. KT_VFORK_NO_FDS:
 * the child put a file of its own on one of kiln's fd numbers (dup2): from
 * then on it has no kiln fds (its copies of the parent's are the program's
 * to close) and no cache (the map's fd is gone), and asks by round trip. */
extern __thread int kt_vfork_child __attribute__((tls_model("initial-exec")));
enum { KT_VFORK_NONE, KT_VFORK_CHILD, KT_VFORK_COUNTED, KT_VFORK_NO_FDS };

/* openat2 is not there: the kernel said ENOSYS, or the process runs under
 * valgrind, which does not emulate it and prints a warning for every call
 * (on the program's stderr, which tests compare). Its users fall back. */
extern _Atomic int kt_no_openat2;

/* Coverage marks (tests): each hook brackets its work with close() of an
 * invalid fd so `strace -f` can tell hooked from unhooked file syscalls.
 * Enabled by KILN_TRACE_MARKS=1; otherwise one predictable branch. */
extern int kt_marks;
#define KT_MARK_START (-4200) /* the constructor ran */
#define KT_MARK_ENTER (-4201)
#define KT_MARK_EXIT  (-4202)
void kt_mark(int which);
static inline void kt_enter(void) { if (__builtin_expect(kt_marks, 0)) kt_mark(KT_MARK_ENTER); }
static inline void kt_leave(void) { if (__builtin_expect(kt_marks, 0)) kt_mark(KT_MARK_EXIT); }

/* Real symbol, resolved on first use and cached in *slot (NULL if libc lacks
 * it: the hook then fails with ENOSYS). */
void *kt_real(void *_Atomic *slot, const char *name);

/* ---- path.c: absolute, lexically clean paths without resolving symlinks - */

#define KT_PATH_BUF (KILN_PATH_MAX + 1)

/* Joins `base` (absolute; ignored when `rel` is absolute) and `rel` into
 * `out` (KT_PATH_BUF bytes), removing empty and "." components and a
 * trailing slash but keeping "..". Returns the length or -ENAMETOOLONG. */
int kt_path_join(const char *base, const char *rel, char *out);

/* Absolute clean form of `path` relative to `dirfd` (AT_FDCWD: the current
 * directory, read with a raw getcwd; else the fd's path from /proc/self/fd).
 * Returns the length or a negative errno. */
int kt_path_at(int dirfd, const char *path, char *out);
/* The same, and *tail (may be NULL) = kt_path_tail_n(path, strlen(path)),
 * found in the same pass over `path`. */
int kt_path_at_tail(int dirfd, const char *path, char *out, int *tail);

/* Path of an open fd (readlink of /proc/self/fd/N). Length or -errno. */
int kt_fd_path(int fd, char *out);

/* ---- client.c: one question ------------------------------------------- */

/* A question as it goes to the server, with room for the cache key after the
 * path: the hook path builds the absolute path into `path` once, the cache
 * key is made in place and the request is sent from the same buffer, so a
 * question takes one page of stack, not four (a new process pays a page
 * fault for each page of stack it touches first). */
struct kt_question {
	struct kiln_msg_hdr h;
	struct kiln_query q;
	char path[SHMMAP_MAX_KEY];
};

/* kiln_ask for the path of length plen in q->path (NUL-terminated). The
 * bytes of q->path after the NUL are scratch. */
int kt_ask_question(struct kt_question *q, size_t plen, unsigned access, unsigned qflags);
/* The same for a call that binds its answer to the file it opens (bind.c;
 * flags: KILN_ASK_*), with how it binds in *b. */
int kt_ask_bound(struct kt_question *q, size_t plen, unsigned access, unsigned qflags,
		 unsigned flags, struct kiln_binding *b);
_Static_assert(sizeof(((struct kt_question *)0)->path) >= KILN_PATH_MAX + 1 + 4,
	       "room for a path and its cache-key suffix");
_Static_assert(__builtin_offsetof(struct kt_question, path) ==
		       sizeof(struct kiln_msg_hdr) + sizeof(struct kiln_query),
	       "a question is sent as one contiguous message");

/* ---- check.c: one checked path --------------------------------------- */

/* Asks for `path` (relative to dirfd) with an access class. atflags may hold
 * AT_SYMLINK_NOFOLLOW (adds KILN_Q_NOFOLLOW) and AT_EMPTY_PATH (an empty path
 * then means the fd itself, which was checked when it was opened). Returns 0
 * (go ahead) or the errno the hooked call must fail with: ENOENT for a
 * hidden path (EACCES when the call would create it), EACCES for a refusal,
 * EIO when no verdict could be had. A NULL or empty path is left to the real
 * call, which reports EFAULT/ENOENT itself. */
int kt_check(int dirfd, const char *path, unsigned access, unsigned qflags, int atflags);

/* The access class of a rename's target, by renameat2's flags: a new name,
 * and what was there is replaced (an empty directory too, where a create
 * alone of an existing directory passes) or, with RENAME_EXCHANGE (2),
 * moved away. Only RENAME_NOREPLACE (1) alone leaves it be. */
static inline unsigned kt_rename_to_class(unsigned flags)
{
	return KILN_A_CREATE | ((flags & 3u) == 1u ? 0 : KILN_A_DELETE);
}

/* errno for a verdict on a call of the given access class. */
int kt_verdict_errno(int verdict, unsigned access);

/* Access class and query flags of an open(2) flag word. */
unsigned kt_open_access(int flags);
unsigned kt_open_qflags(int flags);
/* ... and of an fopen(3) mode string. */
unsigned kt_fopen_access(const char *mode);
unsigned kt_fopen_qflags(const char *mode);

/* True when the last component of the first len bytes of path is followed
 * whatever the call says: "link/", "link/." and "." (the clean path sent
 * drops them). The hooks get it from kt_path_at_tail's pass. */
int kt_path_tail_n(const char *path, size_t len);

/* ---- bind.c: opening what was checked (issue 9, class 5) --------------- */

/* How a hooked open reaches the kernel: its real function's signature, or
 * syscall(SYS_openat/SYS_openat2, ...). */
enum kt_open_via {
	KT_VIA_OPEN,     /* real(path, flags, mode): open, open64 */
	KT_VIA_OPENAT,   /* real(dirfd, path, flags, mode): openat, openat64 */
	KT_VIA_OPEN_2,   /* real(path, flags): __open_2, __open64_2 */
	KT_VIA_OPENAT_2, /* real(dirfd, path, flags): __openat_2, __openat64_2 */
	KT_VIA_SYSCALL,  /* raw openat(dirfd, path, flags, mode) */
	KT_VIA_SYSCALL2, /* raw openat2(dirfd, path, how, how_size) */
};

struct kt_opener {
	enum kt_open_via via;
	void *real;
	_Atomic int *direct; /* per real function: 0 not known yet, 1 libc's, 2 not */
	int dirfd;
	const char *path;
	int flags;
	unsigned mode;
	const void *how;     /* KT_VIA_SYSCALL2: the caller's struct open_how */
	size_t how_size;
};

/* The open o describes, checked with access and qflags and bound to the
 * file it opens (bind.c). Returns the fd or -errno; *how_used (may be NULL)
 * gets the binding of the last answer (enum kiln_bind), or KT_BIND_REFUSED
 * when the answer refused the open (the errno is the answer's). */
#define KT_BIND_REFUSED 255u
long kt_open_bound(const struct kt_opener *o, unsigned access, unsigned qflags,
		   unsigned *how_used);
/* The same with the absolute clean path already in q->path (length n),
 * its tail ("link/", "link/.") already judged by the caller. */
long kt_open_bound_q(const struct kt_opener *o, struct kt_question *q, int n, unsigned access,
		     unsigned qflags, unsigned *how_used);

/* A binding only the client gives (kt_ask_bound with KILN_ASK_ABSENT): the
 * path reaches nothing right now, following symlinks as the call does; the
 * call answers ENOENT without making it. */
#define KT_BIND_ABSENT 3u

/* Whether a file (dev, ino) is the one a server answer's identities name
 * (only its device for /proc's, KILN_ID_DEV_ONLY). */
static inline int kt_is_bound_file(uint64_t dev, uint64_t ino, const struct kiln_binding *b)
{
	return (b->id_flags & KILN_ID_FILE) && dev == b->dev &&
	       ((b->id_flags & KILN_ID_DEV_ONLY) || ino == b->ino);
}

/* Contradicting answers a bound call takes before it fails with ENOENT. */
#define KT_BIND_TRIES 4

/* openat2(AT_FDCWD, path, how): the fd or -errno; -ENOSYS, remembered
 * (kt_no_openat2), where the kernel has no openat2. */
struct open_how;
long kt_openat2(const char *path, const struct open_how *how);

/* kt_openat2 of the absolute clean path of length n in a question buffer,
 * with "/" put after it while it runs when tail is set (the caller's path
 * ended in "/" or "/.": the kernel wants a directory). */
long kt_openat2_at_tail(char *abs, size_t n, int tail, const struct open_how *how);

/* Whether `real` is libc's own function (no preload library stacked after
 * kiln's wraps it), remembered in *known (0 not known yet, 1 libc's, 2 not;
 * NULL: not libc's). */
int kt_real_is_libc(const void *real, _Atomic int *known);

/* ---- statbind.c: reading the metadata of what was checked -------------- */

/* How a hooked stat reaches the kernel: its real function's signature. */
enum kt_stat_via {
	KT_SVIA_STAT,     /* real(path, buf): stat, lstat (flags AT_SYMLINK_NOFOLLOW) */
	KT_SVIA_FSTATAT,  /* real(dirfd, path, buf, flags) */
	KT_SVIA_XSTAT,    /* real(ver, path, buf): __xstat, __lxstat */
	KT_SVIA_FXSTATAT, /* real(ver, dirfd, path, buf, flags): __fxstatat */
	KT_SVIA_STATX,    /* real(dirfd, path, flags, mask, buf) */
	KT_SVIA_SYS_STATX, /* syscall(SYS_statx, dirfd, path, flags, mask, buf) */
};

struct kt_statter {
	enum kt_stat_via via;
	void *real;
	_Atomic int *direct; /* per real function, as kt_opener's */
	int ver;
	int dirfd;
	const char *path;
	int flags;           /* AT_* */
	unsigned mask;       /* statx */
	void *buf;           /* struct stat, or struct statx */
};

/* The call s describes, checked (access class STAT) and bound to the file
 * whose metadata it reads. Returns 0 or -errno. */
long kt_stat_bound(const struct kt_statter *s);

/* ---- accessbind.c: access(2) on what was checked ----------------------- */

enum kt_access_via {
	KT_AVIA_ACCESS,    /* real(path, mode): access; euidaccess, eaccess (flags AT_EACCESS) */
	KT_AVIA_FACCESSAT, /* real(dirfd, path, mode, flags) */
	KT_AVIA_SYS_FACCESSAT2, /* syscall(SYS_faccessat2, dirfd, path, mode, flags) */
};

struct kt_accesser {
	enum kt_access_via via;
	void *real;
	_Atomic int *direct; /* per real function, as kt_opener's */
	int dirfd;
	const char *path;
	int mode;
	int flags;           /* AT_* */
};

/* The call a describes, checked (STAT, and WRITE for W_OK: a probe) and
 * bound to the file it asks about. Returns 0 or -errno. */
long kt_access_bound(const struct kt_accesser *a);

/* ---- fdcheck.c: files named by an fd or a socket address -------------- */

/* A metadata write (access class) through fd: 0 if the fd was opened for
 * writing (checked then), else the answer for the fd's file. */
int kt_check_fd_write(int fd, unsigned access);
/* The errno an ioctl request on fd must fail with, or 0 (hooks/ioctl.c). */
int kt_ioctl_refused(int fd, unsigned long req);

/* A named AF_UNIX address (bind: CREATE; connect, sendto: STAT): checked as
 * its path; 0 for any other address. */
int kt_check_sockaddr(const void *addr, unsigned len, unsigned access);

/* ---- ns.c: changes of root, mounts and namespaces ------------------- */

/* EPERM if a call with these clone/unshare flags (KT_NS_ALWAYS: chroot,
 * mount, setns... whatever their flags) must be refused: they make paths
 * resolve somewhere the server does not look. 0 if the flags create no
 * namespace or kiln's policy allows them ("namespaces allow"). */
#define KT_NS_ALWAYS (~0ul)
int kt_ns_refused(unsigned long flags);

/* ---- client.c: the connection pool ------------------------------------ */

/* True if fd is one of kiln's own (a pooled connection to the server). */
int kt_is_kiln_fd(int fd);

/* kiln's fds in ascending order; returns how many (<= KT_MAX_KILN_FDS). */
#define KT_MAX_KILN_FDS 9 /* the pool and the cache map */
int kt_kiln_fds(int *out);

/* Moves kiln's fd away from `fd` (dup2/dup3 are about to reuse its number).
 * Returns 0, or EBUSY when that connection is in use right now. */
int kt_release_fd_number(int fd);

/* hooks/fd.c: close_range sparing kiln's fds (0 or -1 with errno), and
 * whether dup2/dup3(oldfd, newfd) may go ahead (0 or an errno). */
int kt_close_range_around(unsigned first, unsigned last, int flags);
int kt_dup_target_ok(int oldfd, int newfd);

/* hooks/exec.c: posix_spawn of path after checking it (and its #!
 * interpreters) with kiln's environment put into envp. Returns 0 or an
 * errno, as posix_spawn does. */
int kt_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);

/* hooks/spawndir.c: the directory the file actions fa leave the child in
 * (absolute, lexically clean, into out: KT_PATH_BUF bytes). Returns 1, 0
 * when they do not change directory, or a negative errno. */
int kt_spawn_dir(const posix_spawn_file_actions_t *fa, char *out);

/* ... and the errno a spawn with fa must fail with because one of its open
 * actions names a hidden or refused file (0: none). */
int kt_spawn_refused(const posix_spawn_file_actions_t *fa);

/* In the child of a fork: forget the parent's connections. */
void kt_client_after_fork(void);

/* ahead.c: the read classes a round trip answered ahead for this thread
 * (proto.h, `ahead`), and whether one of them answers (path, access,
 * qflags) now; it is then no longer kept. */
void kt_ahead_keep(const char *path, size_t plen, unsigned qflags, unsigned classes);
int kt_ahead_take(const char *path, size_t plen, unsigned access, unsigned qflags);

/* ---- sud.c: glibc's own system calls, checked (docs/glibc-data.md) --- */

/* Runs fn(arg) with every system call this thread makes outside the
 * preload library trapped and checked as the hooks check theirs (a hidden
 * file is absent for glibc's internal opens too). Returns 0, or -1 when the
 * kernel offers no syscall user dispatch (fn was not run). */
int kt_checked(void (*fn)(void *), void *arg);

/* The same as a pair around a call made in between: open returns 0 (the
 * window is open, or this thread was already in one), or -1 (no syscall
 * user dispatch: nothing to close); close returns 1 if a check in the
 * window refused anything (a hidden file met), else 0. */
struct kt_window {
	uint64_t mask;
	int nested;
};
int kt_window_open(struct kt_window *w);
int kt_window_close(struct kt_window *w);
/* No window from now on in this process, as without syscall user dispatch
 * (valgrind's client: its core makes the client's system calls). */
void kt_window_disable(void);

/* ---- glibcdata.c: when glibc's own loads need the window -------------- */

/* Data sets of the KT_HOOK_GLIBC hooks (hooks.def), in KILN_CLEAN's words. */
enum kt_data_set {
	KT_NSS_ALIASES, KT_NSS_ETHERS, KT_NSS_GROUP, KT_NSS_GSHADOW, KT_NSS_HOSTS,
	KT_NSS_INITGROUPS, KT_NSS_NETGROUP, KT_NSS_NETWORKS, KT_NSS_PASSWD, KT_NSS_PROTOCOLS,
	KT_NSS_PUBLICKEY, KT_NSS_RPC, KT_NSS_SERVICES, KT_NSS_SHADOW,
	KT_DATA_GCONV, KT_DATA_TZ, KT_DATA_NSETS
};

/* Whether a call loading data of `set` must run in the checked window
 * (then it has been opened: call, then kt_data_done). */
int kt_data_window(enum kt_data_set set, struct kt_window *w);
void kt_data_done(enum kt_data_set set, struct kt_window *w);

/* Whether KILN_CLEAN holds the token PREFIX NAME ("mo:" "C.UTF-8"). */
int kt_planned_token(const char *prefix, const char *name);

/* hooks/locale.c: LC_* category names by number (LC_ALL's included). */
extern const char *const kt_lc_names[13];

/* ---- cache.c: the shared verdict cache (docs/verdict-cache.md) --------- */

/* Answers a question from the map: 1, *verdict and how the answer binds
 * (KILN_BIND_ANY, or NO_SYMLINKS for an AREA ALLOW when `bind`: the caller
 * opens with RESOLVE_NO_SYMLINKS instead of this checking), or 0 (ask the
 * server). Attaches the map on first use ($KILN_CACHE; unset: never). `abs`
 * holds the path (plen bytes and a NUL) in a buffer of SHMMAP_MAX_KEY bytes:
 * the key is built in place after it. */
int kt_cache_ask(char *abs, size_t plen, unsigned access, unsigned qflags, int bind, int *verdict,
		 unsigned *how);
/* A STABLE answer stored under a key of its own (vcache.h): 1 and *answer,
 * or 0. */
int kt_cache_ask_key(const char *key, size_t klen, int *answer);
/* 1 when the map says an exec of the path in `abs` (plen bytes, in a
 * buffer as for kt_cache_ask) is allowed and runs a program with nothing to
 * report or check (VC_F_PLAIN_EXEC): the exec check is then done. Else 0,
 * counting nothing (the check goes on and asks as usual). */
int kt_cache_exec_plain(char *abs, size_t plen, unsigned qflags);
/* Same for a listing batch: 1 with hidden[] filled, or 0. */
int kt_cache_ask_dir(const char *dir, const char *const *names, size_t n, unsigned char *hidden);
/* 1 when absolute `path` has no symlink on its way (the last component not
 * counted with nofollow), or does not exist past a symlink-free prefix. */
int kt_no_symlinks(const char *path, int nofollow);
/* 1 when this process has the map and absolute `path` does not exist, with
 * no symlink before its missing component (the last one not followed with
 * nofollow), or, with through_symlinks, with the walk that follows them
 * ending in ENOENT: a read-class question about it may be told, not asked. */
int kt_cache_absent(const char *path, int nofollow, int through_symlinks);
/* The map's fd (one of kiln's fds), or -1; moving it off its number. */
int kt_cache_fd(void);
void kt_cache_move_fd(void);
/* In the child of a fork: count it as a process of its own on its first
 * question. */
void kt_cache_after_fork(void);
/* Counts a question answered ahead (ahead.c) in the statistics file. */
void kt_cache_count_ahead(void);
/* Look up the real functions now, before a child exists: the exec family
 * (exec.c), and close, dup2, dup3 and fcntl, which a child calls before it
 * execs (a shell's redirections and pipes). Called by the fork and vfork
 * hooks: a vfork child must not call dlsym (it locks and may allocate in
 * the parent's memory), and a forked child's lookups would be a dlsym and
 * the page faults of its walk in every child, forgotten when it exits. */
void kt_exec_resolve(void);
void kt_resolve_before_child(void);

#pragma GCC visibility pop

#define KT_EXPORT __attribute__((visibility("default")))
/* The library's process state that every traced process writes (real-symbol
 * slots, the cache and pool state, the captured environment's index): kept
 * together in one section, so a new process (and a forked child, which
 * copies what it writes) faults in one or two pages of it, not one per
 * source file. Big buffers stay in .bss. */
#define KT_HOT __attribute__((section(".data.kt_hot")))
/* Thread-locals of a library that is always loaded at start-up: static TLS,
 * no __tls_get_addr (which may allocate) on the hook path. */
#define KT_TLS __thread __attribute__((tls_model("initial-exec")))

#endif

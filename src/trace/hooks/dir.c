/* Directory listings: hidden entries vanish, and so do kiln's own fds from
 * the process's fd directory.
 *
 * glibc's readdir, scandir, nftw, fts and glob read directories through
 * internal calls no preload library sees, so:
 *  - readdir/readdir64/readdir_r and getdents64 filter each getdents buffer
 *    with one batched question (kiln_ask_dir). readdir reads the DIR's fd into
 *    a buffer of kiln's own (a fixed table of slots claimed with a CAS; the
 *    DIR itself still serves dirfd/closedir), and telldir/seekdir/rewinddir
 *    keep that buffer consistent;
 *  - scandir filters glibc's result in one batch before the caller's filter
 *    and sort run, glob its results, one batch per directory;
 *  - nftw/ftw, fts_read and fts_children drop hidden entries as glibc
 *    reports them (one question per entry, a stat as theirs; a hidden
 *    directory is not descended into). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_readdir64, *_Atomic real_closedir, *_Atomic real_rewinddir,
	*_Atomic real_seekdir, *_Atomic real_telldir, *_Atomic real_getdents64,
	*_Atomic real_scandirat, *_Atomic real_nftw, *_Atomic real_fts_read, *_Atomic real_fts_open, *_Atomic real_fts64_open,
	*_Atomic real_fts_set, *_Atomic real_fts64_read, *_Atomic real_fts64_set,
	*_Atomic real_fts_children, *_Atomic real_fts64_children,
	*_Atomic real_glob, *_Atomic real_glob64;

/* On x86-64 struct dirent and struct dirent64 are the same, and so is the
 * kernel's linux_dirent64. */
_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64), "dirent layout");

/* ---- one getdents buffer, filtered ---------------------------------------- */

/* A 32 KiB getdents buffer holds at most 1365 entries: one batch. Larger
 * buffers (getdents64 called with a big count) take several. Kept small:
 * this is on the stack of whatever thread lists a directory. */
#define MAX_ENTRIES 1400

static int is_dot(const char *nm)
{
	return nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]));
}

/* The number of up to 9 digits at p into *v: where it ends, NULL if none. */
static const char *number(const char *p, long *v)
{
	const char *s = p;
	for (*v = 0; *s >= '0' && *s <= '9' && s - p < 9; s++)
		*v = *v * 10 + (*s - '0');
	return s > p ? s : NULL;
}

/* This process's fd directory: /proc/self/fd, /proc/PID/fd (as the kernel
 * names /proc/self), /proc/thread-self/fd, /proc/PID/task/TID/fd, /dev/fd. */
static bool own_fd_dir(const char *dir)
{
	if (!strcmp(dir, "/dev/fd") || !strcmp(dir, "/proc/self/fd") ||
	    !strcmp(dir, "/proc/thread-self/fd"))
		return true;
	if (strncmp(dir, "/proc/", 6))
		return false;
	long pid, tid;
	const char *p = number(dir + 6, &pid);
	if (p && !strncmp(p, "/task/", 6))
		p = number(p + 6, &tid);
	return p && !strcmp(p, "/fd") && pid == kt_getpid();
}

/* kiln_ask_dir, and kiln's own fds left out of a listing of this process's
 * fd directory: they are not the program's (fcntl and close answer EBADF
 * for them), and a test suite that compares its open fds before and after
 * would take a connection kiln made meanwhile for a leak. */
static int ask_dir(const char *dir, const char *const *names, size_t n, unsigned char *hidden)
{
	if (kiln_ask_dir(dir, names, n, hidden) < 0)
		return -1;
	if (!own_fd_dir(dir))
		return 0;
	for (size_t i = 0; i < n; i++) {
		long fd;
		const char *end = number(names[i], &fd);
		if (end && !*end && kt_is_kiln_fd((int)fd))
			hidden[i] = 1;
	}
	return 0;
}

/* Removes the hidden entries of buf[0..len) (read from directory fd).
 * Returns the new length, or -errno. */
static long filter_buffer(int fd, char *buf, long len)
{
	char dir[KT_PATH_BUF];
	int dl = kt_fd_path(fd, dir);
	if (dl < 0)
		return dl;
	const char *names[MAX_ENTRIES];
	unsigned char hidden[MAX_ENTRIES];
	long out = 0, pos = 0;
	while (pos < len) {
		long start = pos;
		size_t n = 0;
		while (pos < len && n < MAX_ENTRIES) {
			struct dirent64 *e = (struct dirent64 *)(buf + pos);
			if (!is_dot(e->d_name))
				names[n++] = e->d_name;
			pos += e->d_reclen;
		}
		if (n && ask_dir(dir, names, n, hidden) < 0)
			return -EIO;
		/* Same walk, same order: the k-th named entry has hidden[k]. */
		size_t k = 0;
		for (long p = start; p < pos;) {
			struct dirent64 *e = (struct dirent64 *)(buf + p);
			unsigned short rl = e->d_reclen;
			int drop = !is_dot(e->d_name) && hidden[k++];
			if (!drop) {
				if (out != p)
					memmove(buf + out, buf + p, rl);
				out += rl;
			}
			p += rl;
		}
	}
	return out;
}

/* ---- readdir -------------------------------------------------------------- */

#define NSLOTS 64
#define SLOT_BUF 32768

struct dslot {
	DIR *_Atomic owner;
	char *buf; /* mmap'd on first use, kept for the next DIR */
	long off, len;
	long pos;  /* telldir: d_off of the last entry returned */
};
static struct dslot slots[NSLOTS];

static struct dslot *slot_find(DIR *d)
{
	for (int i = 0; i < NSLOTS; i++)
		if (atomic_load_explicit(&slots[i].owner, memory_order_acquire) == d)
			return &slots[i];
	return NULL;
}

static struct dslot *slot_claim(DIR *d)
{
	struct dslot *s = slot_find(d);
	if (s)
		return s;
	for (int i = 0; i < NSLOTS; i++) {
		DIR *none = NULL;
		if (atomic_load_explicit(&slots[i].owner, memory_order_relaxed) == NULL &&
		    atomic_compare_exchange_strong(&slots[i].owner, &none, d)) {
			s = &slots[i];
			if (!s->buf) {
				long p = kt_sys6(SYS_mmap, 0, SLOT_BUF, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (kt_sys_failed(p)) {
					atomic_store(&s->owner, NULL);
					return NULL;
				}
				s->buf = (char *)p;
			}
			s->off = s->len = s->pos = 0;
			return s;
		}
	}
	return NULL;
}

static void slot_reset(DIR *d, long pos)
{
	struct dslot *s = slot_find(d);
	if (s) {
		s->off = s->len = 0;
		s->pos = pos;
	}
}

/* Without a slot (more than NSLOTS streams open): glibc's readdir and one
 * question per entry. */
static struct dirent64 *readdir_unbatched(DIR *d)
{
	char dir[KT_PATH_BUF], path[KT_PATH_BUF];
	if (kt_fd_path(dirfd(d), dir) < 0)
		return REAL(readdir64, struct dirent64 * (*)(DIR *))(d);
	for (;;) {
		struct dirent64 *e = REAL(readdir64, struct dirent64 * (*)(DIR *))(d);
		if (!e)
			return NULL;
		const char *nm = e->d_name;
		if (is_dot(nm))
			return e;
		if (kt_path_join(dir, nm, path) < 0)
			return e;
		int v = kiln_ask(path, KILN_A_STAT, KILN_Q_NOFOLLOW);
		if (v == KILN_V_ERROR) {
			errno = EIO;
			return NULL;
		}
		if (v != KILN_V_HIDE)
			return e;
	}
}

static struct dirent64 *next_entry(DIR *d)
{
	struct dslot *s = slot_claim(d);
	if (!s)
		return readdir_unbatched(d);
	while (s->off >= s->len) {
		int fd = dirfd(d);
		long n = kt_sys3(SYS_getdents64, fd, s->buf, SLOT_BUF);
		if (n <= 0) {
			if (n < 0)
				errno = (int)-n;
			return NULL;
		}
		n = filter_buffer(fd, s->buf, n);
		if (n < 0) {
			errno = (int)-n;
			return NULL;
		}
		s->off = 0;
		s->len = n;
	}
	struct dirent64 *e = (struct dirent64 *)(s->buf + s->off);
	s->off += e->d_reclen;
	s->pos = e->d_off;
	return e;
}

KT_EXPORT struct dirent64 *readdir64(DIR *d)
{
	if (kt_guard)
		return REAL(readdir64, struct dirent64 * (*)(DIR *))(d);
	kt_enter();
	struct dirent64 *e = next_entry(d);
	kt_leave();
	return e;
}

KT_EXPORT struct dirent *readdir(DIR *d)
{
	return (struct dirent *)readdir64(d);
}

static int readdir_into(DIR *d, struct dirent64 *entry, struct dirent64 **result)
{
	int saved = errno;
	errno = 0;
	struct dirent64 *e = readdir64(d);
	int err = errno;
	errno = saved;
	if (!e) {
		*result = NULL;
		return err;
	}
	memcpy(entry, e, offsetof(struct dirent64, d_name) + strlen(e->d_name) + 1);
	*result = entry;
	return 0;
}

KT_EXPORT int readdir64_r(DIR *d, struct dirent64 *entry, struct dirent64 **result)
{
	return readdir_into(d, entry, result);
}

KT_EXPORT int readdir_r(DIR *d, struct dirent *entry, struct dirent **result)
{
	return readdir_into(d, (struct dirent64 *)entry, (struct dirent64 **)result);
}

KT_EXPORT int closedir(DIR *d)
{
	/* Every slot of d: two threads racing on one stream's first readdir
	 * may both have claimed one, and a stale slot would serve the next
	 * DIR allocated at the same address. */
	for (int i = 0; i < NSLOTS; i++) {
		DIR *mine = d;
		atomic_compare_exchange_strong_explicit(&slots[i].owner, &mine, NULL,
							memory_order_release,
							memory_order_relaxed);
	}
	return REAL(closedir, int (*)(DIR *))(d);
}

KT_EXPORT void rewinddir(DIR *d)
{
	REAL(rewinddir, void (*)(DIR *))(d);
	slot_reset(d, 0);
}

KT_EXPORT void seekdir(DIR *d, long loc)
{
	REAL(seekdir, void (*)(DIR *, long))(d, loc);
	slot_reset(d, loc);
}

KT_EXPORT long telldir(DIR *d)
{
	struct dslot *s = slot_find(d);
	if (s)
		return s->pos;
	return REAL(telldir, long (*)(DIR *))(d);
}

KT_EXPORT ssize_t getdents64(int fd, void *buf, size_t count)
{
	if (kt_guard)
		return REAL(getdents64, ssize_t (*)(int, void *, size_t))(fd, buf, count);
	kt_enter();
	long n;
	/* A buffer whose entries were all hidden must not read as the end of
	 * the directory: read on. */
	do {
		n = kt_sys3(SYS_getdents64, fd, buf, count);
		if (n <= 0)
			break;
		n = filter_buffer(fd, buf, n);
	} while (n == 0);
	kt_leave();
	if (n < 0) {
		errno = (int)-n;
		return -1;
	}
	return n;
}

/* ---- scandir ----------------------------------------------------------------- */

typedef int (*scan_filter)(const struct dirent *);
typedef int (*scan_cmp)(const struct dirent **, const struct dirent **);

static int do_scandirat(int dirfd, const char *dir, struct dirent ***out, scan_filter filter,
			scan_cmp cmp)
{
	typedef int (*fn)(int, const char *, struct dirent ***, scan_filter, scan_cmp);
	kt_enter();
	char abs[KT_PATH_BUF];
	int e = kt_check(dirfd, dir, KILN_A_LIST, 0, 0);
	int n = e ? -1 : kt_path_at(dirfd, dir, abs);
	if (!e && n < 0)
		e = -n;
	if (e) {
		kt_leave();
		errno = e;
		return -1;
	}
	struct dirent **list;
	n = REAL(scandirat, fn)(dirfd, dir, &list, NULL, NULL);
	if (n < 0) {
		kt_leave();
		return n;
	}
	/* One batch of questions per MAX_ENTRIES names; hidden ones are freed. */
	int kept = 0;
	for (int base = 0; base < n; base += MAX_ENTRIES) {
		int cnt = n - base < MAX_ENTRIES ? n - base : MAX_ENTRIES;
		const char *names[MAX_ENTRIES];
		unsigned char hidden[MAX_ENTRIES];
		for (int i = 0; i < cnt; i++)
			names[i] = list[base + i]->d_name;
		if (ask_dir(abs, names, (size_t)cnt, hidden) < 0) {
			for (int i = 0; i < kept; i++)
				free(list[i]);
			for (int i = base; i < n; i++)
				free(list[i]);
			free(list);
			kt_leave();
			errno = EIO;
			return -1;
		}
		for (int i = 0; i < cnt; i++) {
			if (hidden[i])
				free(list[base + i]);
			else
				list[kept++] = list[base + i];
		}
	}
	kt_leave();
	/* The caller's filter and sort run outside kiln's marks: they are the
	 * program's own code. */
	if (filter) {
		int k = 0;
		for (int i = 0; i < kept; i++) {
			if (filter(list[i]))
				list[k++] = list[i];
			else
				free(list[i]);
		}
		kept = k;
	}
	if (cmp && kept > 1)
		qsort(list, (size_t)kept, sizeof *list, (int (*)(const void *, const void *))cmp);
	*out = list;
	return kept;
}

KT_EXPORT int scandir(const char *dir, struct dirent ***out, scan_filter filter, scan_cmp cmp)
{
	return do_scandirat(AT_FDCWD, dir, out, filter, cmp);
}

KT_EXPORT int scandirat(int dirfd, const char *dir, struct dirent ***out, scan_filter filter,
			scan_cmp cmp)
{
	return do_scandirat(dirfd, dir, out, filter, cmp);
}

KT_EXPORT int scandir64(const char *dir, struct dirent64 ***out,
			int (*filter)(const struct dirent64 *),
			int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	return do_scandirat(AT_FDCWD, dir, (struct dirent ***)out, (scan_filter)filter,
			    (scan_cmp)cmp);
}

KT_EXPORT int scandirat64(int dirfd, const char *dir, struct dirent64 ***out,
			  int (*filter)(const struct dirent64 *),
			  int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	return do_scandirat(dirfd, dir, (struct dirent ***)out, (scan_filter)filter,
			    (scan_cmp)cmp);
}

/* ---- nftw / ftw ---------------------------------------------------------------- */

typedef int (*nftw_fn)(const char *, const struct stat *, int, struct FTW *);
typedef int (*ftw_fn)(const char *, const struct stat *, int);

struct walk {
	nftw_fn nfn;
	ftw_fn fn;
	int flags;     /* the caller's */
	int ret;       /* the caller's non-zero return, without FTW_ACTIONRETVAL */
	int failed;    /* no verdict: the walk stops with EIO */
	struct walk *outer;
};
static KT_TLS struct walk *cur_walk;

static int walk_step(const char *fpath, const struct stat *sb, int type, struct FTW *fb)
{
	struct walk *w = cur_walk;
	/* With FTW_CHDIR the current directory is the entry's parent. */
	const char *p = (w->flags & FTW_CHDIR) ? fpath + fb->base : fpath;
	int e = kt_check(AT_FDCWD, p, KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
	if (e == ENOENT)
		return (type == FTW_D) ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	if (e) {
		w->failed = e;
		return FTW_STOP;
	}
	kt_leave();
	int r = w->nfn ? w->nfn(fpath, sb, type, fb) : w->fn(fpath, sb, type);
	kt_enter();
	if (w->flags & FTW_ACTIONRETVAL)
		return r;
	if (r) {
		w->ret = r;
		return FTW_STOP;
	}
	return FTW_CONTINUE;
}

static int do_walk(const char *dir, nftw_fn nfn, ftw_fn fn, int nopenfd, int flags)
{
	typedef int (*fn_t)(const char *, nftw_fn, int, int);
	kt_enter();
	int e = kt_check(AT_FDCWD, dir, KILN_A_STAT, 0, 0);
	if (e) {
		kt_leave();
		errno = e;
		return -1;
	}
	struct walk w = { nfn, fn, flags, 0, 0, cur_walk };
	cur_walk = &w;
	int r = REAL(nftw, fn_t)(dir, walk_step, nopenfd, flags | FTW_ACTIONRETVAL);
	cur_walk = w.outer;
	kt_leave();
	if (w.failed) {
		errno = w.failed;
		return -1;
	}
	if (!(flags & FTW_ACTIONRETVAL) && r == FTW_STOP)
		return w.ret;
	return r;
}

KT_EXPORT int nftw(const char *dir, nftw_fn fn, int nopenfd, int flags)
{
	return do_walk(dir, fn, NULL, nopenfd, flags);
}

KT_EXPORT int nftw64(const char *dir,
		     int (*fn)(const char *, const struct stat64 *, int, struct FTW *),
		     int nopenfd, int flags)
{
	return do_walk(dir, (nftw_fn)fn, NULL, nopenfd, flags);
}

KT_EXPORT int ftw(const char *dir, ftw_fn fn, int nopenfd)
{
	return do_walk(dir, NULL, fn, nopenfd, 0);
}

KT_EXPORT int ftw64(const char *dir, int (*fn)(const char *, const struct stat64 *, int),
		    int nopenfd)
{
	return do_walk(dir, NULL, (ftw_fn)fn, nopenfd, 0);
}

/* ---- fts ----------------------------------------------------------------------- */

static FTSENT *fts_next(FTS *f, void *readp, void *setp)
{
	FTSENT *(*rd)(FTS *) = (FTSENT * (*)(FTS *)) readp;
	int (*set)(FTS *, FTSENT *, int) = (int (*)(FTS *, FTSENT *, int))setp;
	kt_enter();
	for (;;) {
		FTSENT *e = rd(f);
		if (!e)
			break;
		/* fts_accpath is relative to the directory fts is in now. */
		int err = kt_check(AT_FDCWD, e->fts_accpath, KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
		if (err == ENOENT) {
			if (e->fts_info == FTS_D)
				set(f, e, FTS_SKIP);
			if (e->fts_level != FTS_ROOTLEVEL || e->fts_info == FTS_DP)
				continue;
			/* A hidden root reads as a missing one does. */
			e->fts_info = FTS_NS;
			e->fts_errno = ENOENT;
			kt_leave();
			return e;
		}
		if (err) {
			kt_leave();
			errno = err;
			return NULL;
		}
		kt_leave();
		return e;
	}
	kt_leave();
	return NULL;
}

/* fts_open stats its roots and opens "." itself; a hidden root is then
 * reported by fts_read as a missing one. */
static FTS *fts_start(char *const *roots, void *openp, int opts,
		      int (*cmp)(const FTSENT **, const FTSENT **))
{
	FTS *(*op)(char *const *, int, int (*)(const FTSENT **, const FTSENT **)) =
		(FTS * (*)(char *const *, int, int (*)(const FTSENT **, const FTSENT **))) openp;
	kt_enter();
	for (char *const *r = roots; r && *r; r++) {
		int e = kt_check(AT_FDCWD, *r, KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
		if (e && e != ENOENT) {
			kt_leave();
			errno = e;
			return NULL;
		}
	}
	FTS *f = op(roots, opts, cmp);
	kt_leave();
	return f;
}

KT_EXPORT FTS *fts_open(char *const *roots, int opts,
			int (*cmp)(const FTSENT **, const FTSENT **))
{
	return fts_start(roots, kt_real(&real_fts_open, "fts_open"), opts, cmp);
}

KT_EXPORT FTS64 *fts64_open(char *const *roots, int opts,
			    int (*cmp)(const FTSENT64 **, const FTSENT64 **))
{
	return (FTS64 *)fts_start(roots, kt_real(&real_fts64_open, "fts64_open"), opts,
				  (int (*)(const FTSENT **, const FTSENT **))cmp);
}

KT_EXPORT FTSENT *fts_read(FTS *f)
{
	return fts_next(f, kt_real(&real_fts_read, "fts_read"), kt_real(&real_fts_set, "fts_set"));
}

KT_EXPORT FTSENT64 *fts64_read(FTS64 *f)
{
	return (FTSENT64 *)fts_next((FTS *)f, kt_real(&real_fts64_read, "fts64_read"),
			kt_real(&real_fts64_set, "fts64_set"));
}

/* fts_children: hidden entries are unlinked from the list (a hidden root
 * stays, reported as missing) (and from
 * f->fts_child, the copy fts_read goes on with). Entries of the roots list
 * are relative to the cwd as they were given; the others are named relative
 * to their directory, whose fts_accpath is valid from the cwd right after
 * fts_read returned it. fts never sees an unlinked entry again, so it stays
 * allocated until exit (freeing it would assume how fts allocates). */
static FTSENT *fts_kids(FTS *f, int opts, void *childp)
{
	FTSENT *(*children)(FTS *, int) = (FTSENT * (*)(FTS *, int)) childp;
	kt_enter();
	FTSENT *head = children(f, opts), *given = head;
	int saved = errno;
	FTSENT **link = &head;
	while (*link) {
		FTSENT *e = *link;
		const char *path = e->fts_accpath;
		char buf[KT_PATH_BUF];
		int err = 0;
		if (e->fts_level != FTS_ROOTLEVEL && e->fts_parent && e->fts_parent->fts_accpath) {
			const char *dir = e->fts_parent->fts_accpath;
			size_t dl = strlen(dir), nl = strlen(e->fts_name);
			if (dl + 1 + nl < sizeof buf) {
				memcpy(buf, dir, dl);
				buf[dl] = '/';
				memcpy(buf + dl + 1, e->fts_name, nl + 1);
				path = buf;
			} else {
				err = ENAMETOOLONG;
			}
		}
		if (!err)
			err = kt_check(AT_FDCWD, path, KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
		if (err == ENOENT && e->fts_level == FTS_ROOTLEVEL) {
			/* a hidden root reads as a missing one, as from fts_read */
			e->fts_info = FTS_NS;
			e->fts_errno = ENOENT;
		} else if (err == ENOENT) {
			*link = e->fts_link;
			continue;
		} else if (err) {
			kt_leave();
			errno = err;
			return NULL;
		}
		link = &e->fts_link;
	}
	if (f->fts_child == given) /* not for the roots list, which fts_read walks itself */
		f->fts_child = head;
	kt_leave();
	errno = saved;
	return head;
}

KT_EXPORT FTSENT *fts_children(FTS *f, int opts)
{
	return fts_kids(f, opts, kt_real(&real_fts_children, "fts_children"));
}

KT_EXPORT FTSENT64 *fts64_children(FTS64 *f, int opts)
{
	return (FTSENT64 *)fts_kids((FTS *)f, opts,
				    kt_real(&real_fts64_children, "fts64_children"));
}

/* ---- glob ---------------------------------------------------------------------- */

/* Where the directory part of glob result or pattern p ends (a trailing
 * '/', GLOB_MARK's, is part of the name): its length, 0 for a name without
 * one. */
static size_t glob_dir_len(const char *p)
{
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		n--;
	while (n > 0 && p[n - 1] != '/')
		n--;
	return n;
}

/* glob reads the directories itself (glibc's internal opendir, which no hook
 * sees): its results are entries of listings and are asked as such, a run
 * of results of one directory in one batch. A hidden one vanishes as from
 * readdir and is no finding of the program, which never looked it up (ld
 * globs the .conf files of /etc/ld.so.conf.d). A last component without
 * magic glob does not list but looks up: those results are asked as stat
 * asks. */
#define GLOB_BATCH 256

/* For GLOB_NOMAGIC, as glibc counts it: '[' with or without its ']'. */
static int glob_magic(const char *pat, int flags)
{
	for (; *pat; pat++)
		if (*pat == '*' || *pat == '?' || *pat == '[' ||
		    (*pat == '\\' && !(flags & GLOB_NOESCAPE)))
			return 1;
	return 0;
}

/* Every result was hidden: what glob gives when nothing matches. With
 * GLOB_NOCHECK (or GLOB_NOMAGIC and a pattern without magic) that is the
 * pattern itself as the one result, in the slot a dropped result left
 * (slot[1] is at most the old terminator's). */
static int glob_none(const char *pat, int flags, glob_t *g, char **slot)
{
	if (!(flags & GLOB_NOCHECK) && !((flags & GLOB_NOMAGIC) && !glob_magic(pat, flags)))
		return GLOB_NOMATCH;
	size_t n = strlen(pat) + 1;
	char *copy = malloc(n);
	if (!copy)
		return GLOB_NOSPACE;
	memcpy(copy, pat, n);
	slot[0] = copy;
	slot[1] = NULL;
	g->gl_pathc++;
	return 0;
}

static int glob_filter(const char *pat, int r, size_t before, int flags, glob_t *g)
{
	if (r != 0)
		return r;
	char **v = g->gl_pathv + ((flags & GLOB_DOOFFS) ? g->gl_offs : 0);
	size_t k = before, i = before, total = g->gl_pathc;
	int failed = 0;
	/* Only a last component with magic makes glob list its directory; each
	 * result of a literal one (a brace alternative too) is the program's
	 * lookup: a question of its own, a hidden one a finding like a stat's. */
	int literal = !glob_magic(pat + glob_dir_len(pat), flags);
	for (; literal && i < g->gl_pathc && !failed; i++) {
		int e = kt_check(AT_FDCWD, v[i], KILN_A_STAT, 0, 0);
		failed = e == EIO;
		if (!failed && e)
			free(v[i]);
		else
			v[k++] = v[i];
	}
	while (i < g->gl_pathc && !failed) {
		size_t dl = glob_dir_len(v[i]), n = 1;
		while (i + n < g->gl_pathc && n < GLOB_BATCH && glob_dir_len(v[i + n]) == dl &&
		       !strncmp(v[i + n], v[i], dl))
			n++;
		char dir[KT_PATH_BUF], abs[KT_PATH_BUF];
		const char *names[GLOB_BATCH];
		unsigned char hidden[GLOB_BATCH];
		char *mark[GLOB_BATCH]; /* GLOB_MARK's '/', lifted while asking */
		if (dl >= sizeof dir) {
			failed = 1;
			break;
		}
		memcpy(dir, dl ? v[i] : ".", dl ? dl : 1);
		dir[dl ? dl : 1] = '\0';
		if (kt_path_at(AT_FDCWD, dir, abs) < 0) {
			failed = 1;
			break;
		}
		/* glob listed it, as opendir would have: a LIST question (and a
		 * line of --log); a hidden directory hides all it holds. */
		int le = kt_check(AT_FDCWD, dir, KILN_A_LIST, 0, 0);
		for (size_t j = 0; j < n; j++) {
			char *nm = v[i + j] + dl;
			size_t nl = strlen(nm);
			mark[j] = nl > 1 && nm[nl - 1] == '/' ? nm + nl - 1 : NULL;
			if (mark[j])
				*mark[j] = '\0';
			names[j] = nm;
			hidden[j] = 1;
		}
		failed = le == EIO || (!le && ask_dir(abs, names, n, hidden) < 0);
		for (size_t j = 0; j < n; j++) {
			if (mark[j])
				*mark[j] = '/';
			if (!failed && hidden[j])
				free(v[i + j]);
			else
				v[k++] = v[i + j];
		}
		i += n;
	}
	while (i < g->gl_pathc) /* what was not asked, kept for globfree */
		v[k++] = v[i++];
	v[k] = NULL;
	g->gl_pathc = k;
	if (failed) {
		errno = EIO;
		return GLOB_ABORTED;
	}
	if (k == before && total > before)
		return glob_none(pat, flags, g, v + k);
	if (k == before && !(flags & GLOB_NOCHECK))
		return GLOB_NOMATCH;
	return 0;
}

typedef int (*glob_errfn)(const char *, int);

KT_EXPORT int glob(const char *pat, int flags, glob_errfn errfn, glob_t *g)
{
	typedef int (*fn)(const char *, int, glob_errfn, glob_t *);
	size_t before = (flags & GLOB_APPEND) ? g->gl_pathc : 0;
	kt_enter();
	int r = REAL(glob, fn)(pat, flags, errfn, g);
	r = glob_filter(pat, r, before, flags, g);
	kt_leave();
	return r;
}

KT_EXPORT int glob64(const char *pat, int flags, glob_errfn errfn, glob64_t *g)
{
	typedef int (*fn)(const char *, int, glob_errfn, glob64_t *);
	_Static_assert(sizeof(glob64_t) == sizeof(glob_t), "glob64_t layout");
	size_t before = (flags & GLOB_APPEND) ? g->gl_pathc : 0;
	kt_enter();
	int r = REAL(glob64, fn)(pat, flags, errfn, g);
	r = glob_filter(pat, r, before, flags, (glob_t *)g);
	kt_leave();
	return r;
}

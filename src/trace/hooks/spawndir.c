/* What posix_spawn's file actions do that kiln must know: where they leave
 * the child's current directory, and whether a file they open is hidden.
 *
 * posix_spawn_file_actions_t is opaque (its actions array has a type private
 * to glibc), so the directory actions are not read back from it: the
 * addchdir_np/addfchdir_np hooks record them, composed, in a side table keyed
 * by the file actions' address (init and destroy free the entry). At spawn
 * time a relative target, or a relative PATH entry of posix_spawnp, is then
 * resolved where the child will be, not where the parent is.
 *
 * An entry is "anchor + relative path": the anchor is the parent's cwd (no
 * absolute chdir yet), "/" (an absolute chdir), or an fd (addfchdir_np, read
 * from the parent's fd table at spawn time). Limits: an fchdir to an fd that
 * earlier actions of the same object opened or dup'ed is taken as the
 * parent's fd of that number; copies of the object (which POSIX leaves
 * undefined) are not followed; with the table full, addchdir_np and
 * addfchdir_np fail with ENOMEM rather than spawn unchecked.
 *
 * The files that addopen names are checked when the action is added (see
 * posix_spawn_file_actions_addopen below). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdatomic.h>
#include <string.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#define ENTRIES 64
enum { ANCHOR_CWD, ANCHOR_ROOT, ANCHOR_FD };

static struct entry {
	const void *_Atomic key; /* the file actions object; NULL: free */
	int anchor, fd;
	char rel[KT_PATH_BUF]; /* relative to the anchor, lexically clean */
	int refused;           /* errno an open action's file got, or 0 */
} table[ENTRIES];
static KT_HOT _Atomic int in_use;

static KT_HOT void *_Atomic real_init, *_Atomic real_destroy, *_Atomic real_addchdir,
	*_Atomic real_addfchdir, *_Atomic real_addopen;

static struct entry *find(const void *fa)
{
	if (!fa || atomic_load_explicit(&in_use, memory_order_acquire) == 0)
		return NULL;
	for (int i = 0; i < ENTRIES; i++)
		if (atomic_load_explicit(&table[i].key, memory_order_acquire) == fa)
			return &table[i];
	return NULL;
}

static struct entry *find_or_claim(const void *fa)
{
	struct entry *e = find(fa);
	if (e)
		return e;
	for (int i = 0; i < ENTRIES; i++) {
		const void *want = NULL;
		if (atomic_compare_exchange_strong(&table[i].key, &want, fa)) {
			table[i].anchor = ANCHOR_CWD;
			table[i].rel[0] = '\0';
			table[i].refused = 0;
			atomic_fetch_add(&in_use, 1);
			return &table[i];
		}
	}
	return NULL;
}

static void forget(const void *fa)
{
	struct entry *e = find(fa);
	if (e) {
		atomic_store(&e->key, NULL);
		atomic_fetch_sub(&in_use, 1);
	}
}

/* The entry after a chdir to path, into (*anchor, rel): rel is kept
 * relative to the anchor, without its leading "/". */
static int compose(const struct entry *e, const char *path, int *anchor, char *rel)
{
	char out[KT_PATH_BUF];
	int n;
	*anchor = e->anchor;
	if (path[0] == '/') {
		*anchor = ANCHOR_ROOT;
		n = kt_path_join("/", path, out);
	} else {
		char base[KT_PATH_BUF];
		base[0] = '/';
		memcpy(base + 1, e->rel, strlen(e->rel) + 1);
		n = kt_path_join(base, path, out);
	}
	if (n < 0)
		return -n;
	memcpy(rel, out + 1, (size_t)n); /* out[n] is the terminator */
	return 0;
}

typedef int (*fa_fn)(posix_spawn_file_actions_t *);

KT_EXPORT int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa)
{
	forget(fa); /* an object reused without destroy */
	return ((fa_fn)kt_real(&real_init, "posix_spawn_file_actions_init"))(fa);
}

KT_EXPORT int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa)
{
	forget(fa);
	return ((fa_fn)kt_real(&real_destroy, "posix_spawn_file_actions_destroy"))(fa);
}

KT_EXPORT int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa,
						    const char *path)
{
	typedef int (*fn)(posix_spawn_file_actions_t *, const char *);
	fn real = (fn)kt_real(&real_addchdir, "posix_spawn_file_actions_addchdir_np");
	if (!real)
		return ENOSYS;
	struct entry *e = find_or_claim(fa);
	if (!e)
		return ENOMEM;
	int anchor;
	char rel[KT_PATH_BUF];
	int r = compose(e, path, &anchor, rel);
	if (!r)
		r = real(fa, path);
	if (!r) {
		e->anchor = anchor;
		memcpy(e->rel, rel, strlen(rel) + 1);
	}
	return r;
}

KT_EXPORT int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t *fa, int fd)
{
	typedef int (*fn)(posix_spawn_file_actions_t *, int);
	fn real = (fn)kt_real(&real_addfchdir, "posix_spawn_file_actions_addfchdir_np");
	if (!real)
		return ENOSYS;
	struct entry *e = find_or_claim(fa);
	if (!e)
		return ENOMEM;
	int r = real(fa, fd);
	if (r)
		return r;
	e->anchor = ANCHOR_FD;
	e->fd = fd;
	e->rel[0] = '\0';
	return 0;
}

/* The directory the actions recorded in e (none: NULL) leave the child in,
 * absolute and clean, into out. Length or -errno. */
static int dir_of(const struct entry *e, char *out)
{
	char base[KT_PATH_BUF];
	int anchor = e ? e->anchor : ANCHOR_CWD;
	if (anchor == ANCHOR_ROOT) {
		base[0] = '/';
		base[1] = '\0';
	} else if (anchor == ANCHOR_FD) {
		int n = kt_fd_path(e->fd, base);
		if (n < 0)
			return n;
	} else {
		long r = kt_sys2(SYS_getcwd, base, sizeof base);
		if (r < 0)
			return (int)r;
		if (base[0] != '/')
			return -ENOENT;
	}
	return kt_path_join(base, e ? e->rel : "", out);
}

int kt_spawn_dir(const posix_spawn_file_actions_t *fa, char *out)
{
	struct entry *e = find(fa);
	if (!e)
		return 0;
	int n = dir_of(e, out);
	return n < 0 ? n : 1;
}

/* addopen: glibc opens the file in the child, before the exec, with an
 * internal call no hook sees. So it is checked here, as the child will name
 * it (a relative name under the directory the earlier actions leave it in,
 * taken from the parent's cwd now), and a refusal is kept for the spawn to
 * fail with, as it would for a missing file. */
KT_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd,
						const char *path, int oflag, mode_t mode)
{
	typedef int (*fn)(posix_spawn_file_actions_t *, int, const char *, int, mode_t);
	fn real = (fn)kt_real(&real_addopen, "posix_spawn_file_actions_addopen");
	kt_enter();
	struct entry *e = find(fa);
	char abs[KT_PATH_BUF];
	int err = 0;
	if (path[0] != '/') {
		char dir[KT_PATH_BUF];
		int n = dir_of(e, dir);
		if (n >= 0)
			n = kt_path_join(dir, path, abs);
		err = n < 0 ? -n : 0;
	}
	if (!err)
		err = kt_check(AT_FDCWD, path[0] == '/' ? path : abs, kt_open_access(oflag),
			       kt_open_qflags(oflag), 0);
	if (err && !e)
		e = find_or_claim(fa);
	kt_leave();
	if (err && !e)
		return ENOMEM;
	if (err && !e->refused)
		e->refused = err;
	return real(fa, fd, path, oflag, mode);
}

int kt_spawn_refused(const posix_spawn_file_actions_t *fa)
{
	struct entry *e = find(fa);
	return e ? e->refused : 0;
}

/* Output files by one set of rules: see outfile.h and docs/output-files.md. */
#include "common/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's MAXSYMLINKS */

static const char *kind_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISLNK(m))
		return "a symlink";
	return "not a regular file";
}

/* N when CUR (a symlink) is /proc/self/fd/N (whatever the path it is
 * reached by: /dev/stdout, /dev/fd/N), -1 when it is not. */
static int own_fd_link(int dirfd, const char *cur)
{
	const char *slash = strrchr(cur, '/');
	const char *name = slash ? slash + 1 : cur;
	char *end;
	long n = strtol(name, &end, 10);
	if (!*name || *end || n < 0 || n > INT_MAX)
		return -1;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur) + (slash == cur) : 1, slash ? cur : ".");
	struct stat d, self, thread;
	if (fstatat(dirfd, dir, &d, 0) < 0)
		return -1;
	bool same = (stat("/proc/self/fd", &self) == 0 && self.st_dev == d.st_dev && self.st_ino == d.st_ino) ||
		    (stat("/proc/thread-self/fd", &thread) == 0 && thread.st_dev == d.st_dev &&
		     thread.st_ino == d.st_ino);
	return same ? (int)n : -1;
}

/* Whether the symlink CUR lives in /proc (a "magic" link to an open file,
 * whose text is not a path to follow). */
static bool on_procfs(int dirfd, const char *cur)
{
	int fd = openat(dirfd, cur, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct statfs sf;
	bool proc = fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
	if (fd >= 0)
		close(fd);
	return proc;
}

/* Follows PATH's symlinks to the final name: d->dir, d->name, d->exists and
 * d->mode. Returns an O_PATH fd of d->dir, -2 for a link to one of our own
 * fds (d->fdnum), or -1 with err set. */
static int follow(int dirfd, const char *path, struct outfile_dest *d, char *err, size_t errlen)
{
	char cur[PATH_MAX];
	if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) {
		snprintf(err, errlen, "cannot write %s: path too long", path);
		return -1;
	}
	for (int hops = 0;; hops++) {
		size_t n = strlen(cur);
		if (!n || cur[n - 1] == '/') {
			snprintf(err, errlen, "cannot write %s: a file name is needed, not a directory", path);
			return -1;
		}
		struct stat st;
		if (fstatat(dirfd, cur, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				break; /* a new file (or a missing directory: seen below) */
			snprintf(err, errlen, "cannot write %s: %s", path,
				 errno == ENOTDIR ? "a component of the path is not a directory" : strerror(errno));
			return -1;
		}
		if (!S_ISLNK(st.st_mode)) {
			d->exists = true;
			d->mode = st.st_mode;
			d->uid = st.st_uid;
			d->gid = st.st_gid;
			break;
		}
		int own = own_fd_link(dirfd, cur);
		if (own >= 0) {
			int fl = fcntl(own, F_GETFL);
			if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
				snprintf(err, errlen, "cannot write %s: file descriptor %d is not open for writing",
					 path, own);
				return -1;
			}
			d->kind = OUTFILE_STDOUT;
			d->fdnum = own;
			snprintf(d->path, sizeof d->path, "%s", cur);
			return -2;
		}
		if (on_procfs(dirfd, cur)) {
			/* another process's fd: the kernel follows it */
			if (fstatat(dirfd, cur, &st, 0) < 0) {
				snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
				return -1;
			}
			d->magic = true;
			d->exists = true;
			d->mode = st.st_mode;
			break;
		}
		if (hops == MAX_LINKS) {
			snprintf(err, errlen, "cannot write %s: too many levels of symbolic links", path);
			return -1;
		}
		char target[PATH_MAX];
		ssize_t t = readlinkat(dirfd, cur, target, sizeof target - 1);
		if (t <= 0) {
			snprintf(err, errlen, "cannot write %s: cannot read the symlink %s: %s", path, cur,
				 t < 0 ? strerror(errno) : "empty");
			return -1;
		}
		target[t] = '\0';
		/* A relative target is relative to the link's directory; the
		 * kernel resolves the joined path (".." physically, as for the
		 * link itself). */
		char *slash = strrchr(cur, '/');
		size_t keep = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
		if (keep + (size_t)t >= sizeof cur) {
			snprintf(err, errlen, "cannot write %s: path too long", path);
			return -1;
		}
		memcpy(cur + keep, target, (size_t)t + 1);
	}
	char *slash = strrchr(cur, '/');
	const char *name = slash ? slash + 1 : cur;
	if (!strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > NAME_MAX) {
		snprintf(err, errlen, "cannot write %s: %s", path,
			 strlen(name) > NAME_MAX ? "file name too long" : "a file name is needed, not a directory");
		return -1;
	}
	strcpy(d->name, name);
	if (!slash)
		strcpy(d->dir, ".");
	else if (slash == cur)
		strcpy(d->dir, "/");
	else
		snprintf(d->dir, sizeof d->dir, "%.*s", (int)(slash - cur), cur);
	snprintf(d->path, sizeof d->path, "%s", cur);
	int pdir = openat(dirfd, d->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pdir < 0) {
		if (errno == ENOENT)
			snprintf(err, errlen, "cannot write %s: directory %s does not exist", path, d->dir);
		else if (errno == ENOTDIR)
			snprintf(err, errlen, "cannot write %s: %s is not a directory", path, d->dir);
		else
			snprintf(err, errlen, "cannot write %s: directory %s: %s", path, d->dir, strerror(errno));
	}
	return pdir;
}

/* The checks of outfile_resolve on an open directory. */
static int check(int pdir, const char *path, int flags, struct outfile_dest *d, char *err, size_t errlen)
{
	if (d->exists && S_ISDIR(d->mode)) {
		snprintf(err, errlen, "cannot write %s: it is a directory (a file name is needed)", path);
		return -1;
	}
	if (d->exists && (flags & OUTFILE_NO_REPLACE)) {
		snprintf(err, errlen, "cannot write %s: already exists", path);
		return -1;
	}
	if (d->exists && (!S_ISREG(d->mode) || d->magic)) {
		if (flags & OUTFILE_REGULAR_ONLY) {
			snprintf(err, errlen, "cannot write %s: it is %s, and a regular file is needed here",
				 path, kind_name(d->mode));
			return -1;
		}
		if (faccessat(pdir, d->name, W_OK, 0) < 0) {
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
			return -1;
		}
		d->kind = OUTFILE_THROUGH;
		return 0;
	}
	if (faccessat(pdir, ".", W_OK | X_OK, 0) < 0) {
		snprintf(err, errlen, "cannot write %s: cannot create files in %s: %s", path, d->dir,
			 strerror(errno));
		return -1;
	}
	d->kind = OUTFILE_REPLACE;
	return 0;
}

static int resolve_open(int dirfd, const char *path, int flags, struct outfile_dest *d, char *err,
			size_t errlen)
{
	memset(d, 0, sizeof *d);
	if (!strcmp(path, "-")) {
		if (flags & OUTFILE_REGULAR_ONLY) {
			snprintf(err, errlen, "'-' (standard output) cannot be used here: a file is needed");
			return -1;
		}
		d->kind = OUTFILE_STDOUT;
		d->fdnum = -1;
		snprintf(d->path, sizeof d->path, "-");
		return AT_FDCWD;
	}
	int pdir = follow(dirfd, path, d, err, errlen);
	if (pdir == -2) {
		if (!(flags & OUTFILE_REGULAR_ONLY))
			return AT_FDCWD;
		snprintf(err, errlen, "cannot write %s: it is an open file descriptor, and a regular file is needed here", path);
		return -1;
	}
	if (pdir >= 0 && check(pdir, path, flags, d, err, errlen) < 0) {
		close(pdir);
		pdir = -1;
	}
	return pdir;
}

int outfile_resolve(int dirfd, const char *path, int flags, struct outfile_dest *d, char *err,
		    size_t errlen)
{
	int pdir = resolve_open(dirfd, path, flags, d, err, errlen);
	if (pdir >= 0)
		close(pdir);
	return pdir == -1 ? -1 : 0;
}

int outfile_check(int dirfd, const char *path, int flags, char *err, size_t errlen)
{
	struct outfile_dest d;
	return outfile_resolve(dirfd, path, flags, &d, err, errlen);
}

static int connect_socket(int pdir, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", pdir, name) >=
	    (int)sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	return fd;
}

/* A named temporary file next to the target, for file systems without
 * O_TMPFILE. */
static int named_temp(struct outfile *o)
{
	static atomic_uint counter; /* jobs of a meta server commit concurrently */
	for (int k = 0; k < 100; k++) {
		snprintf(o->tmp, sizeof o->tmp, ".%.200s.kiln-%ld-%u", o->d.name, (long)getpid(),
			 atomic_fetch_add(&counter, 1));
		int fd = openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

int outfile_open(struct outfile *o, int dirfd, const char *path, int stdout_fd, int flags, char *err,
		 size_t errlen)
{
	memset(o, 0, sizeof *o);
	o->fd = o->dirfd = -1;
	o->flags = flags;
	o->shown = path;
	int pdir = resolve_open(dirfd, path, flags, &o->d, err, errlen);
	if (pdir == -1)
		return -1;
	switch (o->d.kind) {
	case OUTFILE_STDOUT:
		o->fd = o->d.fdnum >= 0 ? o->d.fdnum : stdout_fd;
		return 0;
	case OUTFILE_THROUGH:
		o->fd = S_ISSOCK(o->d.mode) ? connect_socket(pdir, o->d.name)
			: openat(pdir, o->d.name, O_WRONLY | O_CLOEXEC | O_NOCTTY |
				 (o->d.magic ? (S_ISREG(o->d.mode) ? O_TRUNC : 0) : O_NOFOLLOW));
		close(pdir);
		if (o->fd < 0) {
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
			return -1;
		}
		return 0;
	case OUTFILE_REPLACE:
		break;
	}
	o->dirfd = pdir;
	o->fd = openat(pdir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
	if (o->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
		o->fd = named_temp(o);
	if (o->fd < 0) {
		snprintf(err, errlen, "cannot write %s: cannot create a temporary file in %s: %s", path,
			 o->d.dir, strerror(errno));
		outfile_abort(o);
		return -1;
	}
	if (o->d.exists) {
		/* The replacement keeps the file's owner (if we may) and mode. */
		if (geteuid() == 0 && fchown(o->fd, o->d.uid, o->d.gid) < 0) {
			/* not fatal: the file is ours then */
		}
		if (fchmod(o->fd, o->d.mode & 07777) < 0) {
			snprintf(err, errlen, "cannot write %s: cannot keep its mode: %s", path, strerror(errno));
			outfile_abort(o);
			return -1;
		}
	}
	return 0;
}

FILE *outfile_stream(struct outfile *o, char *err, size_t errlen)
{
	if (o->f)
		return o->f;
	/* For "-" the stream gets a copy: closing it leaves the caller's fd. */
	int fd = o->d.kind == OUTFILE_STDOUT ? fcntl(o->fd, F_DUPFD_CLOEXEC, 0) : o->fd;
	o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!o->f) {
		snprintf(err, errlen, "cannot write %s: %s", o->shown, strerror(errno));
		if (fd >= 0 && fd != o->fd)
			close(fd);
		return NULL;
	}
	if (fd == o->fd)
		o->fd = -2; /* owned by the stream now; fileno(o->f) */
	return o->f;
}

FILE *outfile_fopen(struct outfile *o, int dirfd, const char *path, int stdout_fd, int flags,
		    char *err, size_t errlen)
{
	if (outfile_open(o, dirfd, path, stdout_fd, flags, err, errlen) < 0)
		return NULL;
	FILE *f = outfile_stream(o, err, errlen);
	if (!f)
		outfile_abort(o);
	return f;
}

static int data_fd(const struct outfile *o)
{
	return o->fd == -2 ? fileno(o->f) : o->fd;
}

/* Gives the unnamed temporary file the name NAME in the directory. */
static int link_tmpfile(const struct outfile *o, const char *name)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", data_fd(o));
	if (linkat(AT_FDCWD, proc, o->dirfd, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return -1;
	/* no /proc: needs CAP_DAC_READ_SEARCH */
	return linkat(data_fd(o), "", o->dirfd, name, AT_EMPTY_PATH);
}

static int install(struct outfile *o, char *err, size_t errlen)
{
	struct stat st;
	bool now = fstatat(o->dirfd, o->d.name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (now && (o->flags & OUTFILE_NO_REPLACE)) {
		snprintf(err, errlen, "cannot write %s: already exists", o->shown);
		return -1;
	}
	if (now && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "cannot write %s: it became %s meanwhile; not replaced", o->shown,
			 kind_name(st.st_mode));
		return -1;
	}
	if (!o->tmp[0] && (o->flags & OUTFILE_NO_REPLACE)) {
		if (link_tmpfile(o, o->d.name) == 0)
			return 0;
		snprintf(err, errlen, "cannot write %s: %s", o->shown,
			 errno == EEXIST ? "already exists" : strerror(errno));
		return -1;
	}
	if (!o->tmp[0]) {
		static atomic_uint counter; /* jobs of a meta server commit concurrently */
		int rc = -1;
		for (int k = 0; k < 100 && rc < 0; k++) {
			snprintf(o->tmp, sizeof o->tmp, ".%.200s.kiln-%ld-%u", o->d.name, (long)getpid(),
				 atomic_fetch_add(&counter, 1));
			rc = link_tmpfile(o, o->tmp);
			if (rc < 0 && errno != EEXIST)
				break;
		}
		if (rc < 0) {
			snprintf(err, errlen, "cannot write %s: cannot name the new file in %s: %s", o->shown,
				 o->d.dir, strerror(errno));
			o->tmp[0] = '\0';
			return -1;
		}
	}
	int rc = o->flags & OUTFILE_NO_REPLACE ? renameat2(o->dirfd, o->tmp, o->dirfd, o->d.name, RENAME_NOREPLACE)
					       : renameat(o->dirfd, o->tmp, o->dirfd, o->d.name);
	if (rc < 0) {
		snprintf(err, errlen, "cannot write %s: %s", o->shown,
			 errno == EEXIST ? "already exists" : strerror(errno));
		return -1;
	}
	o->tmp[0] = '\0';
	return 0;
}

int outfile_commit(struct outfile *o, char *err, size_t errlen)
{
	int rc = 0;
	if (o->f && (fflush(o->f) != 0 || ferror(o->f))) {
		snprintf(err, errlen, "cannot write %s: %s", o->shown, strerror(errno ? errno : EIO));
		rc = -1;
	}
	if (!rc && o->d.kind == OUTFILE_REPLACE)
		rc = install(o, err, errlen);
	if (o->f && fclose(o->f) != 0 && !rc) {
		snprintf(err, errlen, "cannot write %s: %s", o->shown, strerror(errno));
		rc = -1;
	}
	o->f = NULL;
	if (o->fd >= 0 && o->d.kind != OUTFILE_STDOUT)
		close(o->fd);
	o->fd = -1;
	outfile_abort(o);
	return rc;
}

void outfile_abort(struct outfile *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->fd >= 0 && o->d.kind != OUTFILE_STDOUT)
		close(o->fd);
	o->fd = -1;
	if (o->dirfd >= 0) {
		if (o->tmp[0])
			unlinkat(o->dirfd, o->tmp, 0);
		close(o->dirfd);
	}
	o->tmp[0] = '\0';
	o->dirfd = -1;
}

/* A registry handle that no later change to its file can reach: the file is
 * copied (in the kernel, sendfile) into a memfd that is then sealed against
 * every write, mapped read-only and handed to SQLite with
 * sqlite3_deserialize. About 13-25 ms for Debian's 22 MB registry, against
 * 250 ms for an SQLite backup into :memory:.
 *
 * The copy is taken by a thread under SQLite's shared lock (a read
 * transaction: no SQLite writer can commit), while the handle goes on
 * answering from the file under the same lock; registry_snapshot_finish
 * then moves the handle onto the copy. The trace server works out the
 * dependency closure and its plans meanwhile, and finishes before the
 * build starts, so the build never sees a handle that is not the copy.
 *
 * A WAL database is copied through SQLite instead (copy_through_sqlite).
 *
 * Or, with REGISTRY_SNAPSHOT_LEASE, no copy until someone wants to write:
 * the file is held under a read lease, so every open of it for writing and
 * every truncation waits until this process, told by SIGIO, has taken the
 * copy (registry_snapshot_take) and given the lease up. Most builds never
 * write the registry, and save the copy's time and memory. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/internal.h"

int registry_seal_copy(int memfd)
{
	/* F_SEAL_FUTURE_WRITE, not F_SEAL_WRITE: both refuse every write and
	 * every writable mapping from then on, and the copy has no writable
	 * mapping and no other holder for F_SEAL_WRITE's extra checks to find.
	 * But F_SEAL_WRITE also waits (about 170 ms) for every other reference
	 * to the file's pages to go, then fails with EBUSY: a page the kernel
	 * briefly holds (a per-CPU LRU batch, compaction) failed `kiln trace`
	 * once in CI. */
	return fcntl(memfd, F_ADD_SEALS,
		     F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

/* Fills a new memfd (c->memfd) with c->size bytes, from c->fd or, when
 * not NULL, from buf, and seals it; c->err: 0 or an errno. */
static void fill_copy(struct registry_copy *c, const unsigned char *buf)
{
	c->memfd = memfd_create("kiln-registry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->memfd < 0) {
		c->err = errno;
		return;
	}
	for (off_t off = 0; (size_t)off < c->size;) {
		size_t left = c->size - (size_t)off;
		ssize_t n = buf ? write(c->memfd, buf + off, left) : sendfile(c->memfd, c->fd, &off, left);
		if (n <= 0) {
			c->err = n < 0 ? errno : EIO; /* shorter than it was: changed under us */
			return;
		}
		if (buf)
			off += n;
	}
	if (registry_seal_copy(c->memfd) < 0)
		c->err = errno;
}

/* The thread started by registry_snapshot_begin. */
static void *copy_main(void *arg)
{
	fill_copy(arg, NULL);
	return NULL;
}

/* A WAL database's newest pages are in its -wal file until a checkpoint: a
 * copy of the main file would miss them, and sqlite3_deserialize refuses a
 * WAL header anyway. So its copy is taken here, before the build, through
 * SQLite: a backup into memory of every page as the read transaction
 * already open on db sees it, serialised, and marked as a rollback-journal
 * database (header bytes 18 and 19: the pages are complete without the
 * -wal file). About 50 ms for Debian's registry, not in parallel with the
 * closure (one connection); kiln's own imports never write WAL. c->err: 0
 * or an errno. */
static void copy_through_sqlite(sqlite3 *db, struct registry_copy *c)
{
	sqlite3 *mem = NULL;
	unsigned char *bytes = NULL;
	sqlite3_int64 n = 0;
	c->err = ENOMEM;
	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK)
		goto out;
	c->err = EIO;
	sqlite3_backup *b = sqlite3_backup_init(mem, "main", db, "main");
	if (!b)
		goto out;
	int rc = sqlite3_backup_step(b, -1);
	if (sqlite3_backup_finish(b) != SQLITE_OK || rc != SQLITE_DONE)
		goto out;
	bytes = sqlite3_serialize(mem, "main", &n, 0);
	if (!bytes || n < 100)
		goto out;
	bytes[18] = bytes[19] = 1;
	c->err = 0;
	c->size = (size_t)n;
	fill_copy(c, bytes);
out:
	sqlite3_free(bytes);
	sqlite3_close(mem);
}

static void copy_free(struct registry_copy *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->memfd >= 0)
		close(c->memfd);
	free(c);
}

static bool sigio_blocked(void)
{
	sigset_t cur;
	return pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, SIGIO) == 1;
}

static bool lease_break_time_ok(void)
{
	long s = -1;
	FILE *f = fopen("/proc/sys/fs/lease-break-time", "re");
	if (f) {
		if (fscanf(f, "%ld", &s) != 1)
			s = -1;
		fclose(f);
	}
	return s >= REGISTRY_LEASE_MIN_BREAK_S;
}

/* Puts fd's file under a read lease, unless none can be relied on: the
 * caller cannot be told of a writer (SIGIO not blocked, so it would kill
 * it), the kernel would break the lease itself before a copy is likely
 * taken, or the kernel refuses (the file open for writing: EAGAIN; another
 * user's: EACCES; no leases on its file system). A WAL database is never
 * leased (its -wal file, which SQLite reads too, would not be under it).
 * fd stays open either way: closing any fd of the file would drop the
 * POSIX locks SQLite holds on it (its shared lock among them). */
static bool lease_try(int fd)
{
	return sigio_blocked() && lease_break_time_ok() && fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
}

/* SQLite's file format: header bytes 18 and 19 (write and read versions)
 * are 2 for WAL. Unreadable: not WAL (the copy then fails on its own). */
static bool is_wal(int fd)
{
	unsigned char hdr[20];
	return pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && (hdr[18] == 2 || hdr[19] == 2);
}

int registry_snapshot_begin(struct kiln_registry *reg, bool lease, char *err, size_t errlen)
{
	/* A read transaction holds SQLite's shared lock on the file: no SQLite
	 * writer can change it while it is copied (or held under the lease).
	 * The file is opened again by its path, before the build exists. */
	int rc = sqlite3_exec(reg->db, "BEGIN; SELECT count(*) FROM sqlite_schema;", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		registry_sql_message(reg->db, rc, reg->path, err, errlen);
		return -1;
	}
	struct registry_copy *c = calloc(1, sizeof *c);
	struct stat st;
	if (!c) {
		snprintf(err, errlen, "%s: out of memory", reg->path);
		goto fail;
	}
	c->memfd = -1;
	c->fd = open(reg->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (c->fd < 0 || fstat(c->fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot read the registry: %s", reg->path, strerror(errno));
		goto fail;
	}
	c->size = (size_t)st.st_size;
	if (is_wal(c->fd)) {
		copy_through_sqlite(reg->db, c);
		reg->copy = c;
		return 0;
	}
	if (lease && lease_try(c->fd)) {
		reg->lease = c;
		return 0;
	}
	c->threaded = true;
	if ((rc = pthread_create(&c->thread, NULL, copy_main, c)) != 0) {
		snprintf(err, errlen, "%s: cannot copy the registry into memory: %s", reg->path,
			 strerror(rc));
		goto fail;
	}
	reg->copy = c;
	return 0;
fail:
	if (c)
		copy_free(c);
	sqlite3_exec(reg->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* Moves the handle onto the copy c has taken, ending the read transaction
 * the file was read under; frees c. */
static int adopt_copy(struct kiln_registry *reg, struct registry_copy *c, char *err, size_t errlen)
{
	/* Statements stepped on the file would keep its read transaction open
	 * (sqlite3_deserialize refuses then); they are prepared again on the
	 * copy as they are used. */
	registry_finalize_statements(reg);
	if (c->err) {
		snprintf(err, errlen, "%s: cannot copy the registry into memory: %s", reg->path,
			 strerror(c->err));
		copy_free(c);
		sqlite3_exec(reg->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	sqlite3_exec(reg->db, "COMMIT", NULL, NULL, NULL);
	size_t len = c->size;
	void *p = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, c->memfd, 0) : NULL;
	copy_free(c);
	if (len && p == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map the registry copy: %s", reg->path, strerror(errno));
		return -1;
	}
	int rc = sqlite3_deserialize(reg->db, "main", p, (sqlite3_int64)len, (sqlite3_int64)len,
				     SQLITE_DESERIALIZE_READONLY);
	if (rc != SQLITE_OK) {
		if (p)
			munmap(p, len);
		registry_sql_message(reg->db, rc, reg->path, err, errlen);
		return -1;
	}
	reg->snap = p;
	reg->snaplen = len;
	/* The copy must be the file SQLite checked: same schema, readable. */
	return registry_check_schema(reg->db, reg->path, false, err, errlen);
}

int registry_snapshot_finish(struct kiln_registry *reg, char *err, size_t errlen)
{
	struct registry_copy *c = reg->copy;
	if (!c)
		return 0; /* a snapshot, the file under its lease, or no snapshot */
	reg->copy = NULL;
	if (c->threaded)
		pthread_join(c->thread, NULL);
	return adopt_copy(reg, c, err, errlen);
}

int registry_snapshot_take(struct kiln_registry *reg, char *err, size_t errlen)
{
	struct registry_copy *c = reg->lease;
	if (!c)
		return 0;
	reg->lease = NULL;
	copy_main(c);
	/* Every write and truncation waits for the lease, so the copy is of
	 * the file as it was if the lease still existed once the copy was
	 * complete: then giving it up succeeds (the writer goes on now, not
	 * when the fd is closed, which a child forked meanwhile would
	 * prevent). EAGAIN: the kernel had removed it (lease-break-time), the
	 * writer went on before this process got to it, and nothing can be
	 * vouched for. */
	bool held = fcntl(c->fd, F_SETLEASE, F_UNLCK) == 0;
	if (!c->err && !held) {
		reg->lease_lost = true;
		registry_finalize_statements(reg);
		copy_free(c);
		sqlite3_exec(reg->db, "ROLLBACK", NULL, NULL, NULL);
		snprintf(err, errlen,
			 "%s: the registry was written before its copy could be taken (the kernel "
			 "gave the writer its way after /proc/sys/fs/lease-break-time); answers from "
			 "here on would not be the registry the build started with",
			 reg->path);
		return -1;
	}
	if (adopt_copy(reg, c, err, errlen) < 0)
		return -1;
	reg->copied_after_lease = true;
	return 0;
}

bool registry_snapshot_intact(struct kiln_registry *reg)
{
	if (reg->lease && fcntl(reg->lease->fd, F_GETLEASE) != F_RDLCK) {
		/* Being broken, or broken by the kernel: which, only giving it
		 * up tells; taking the copy first keeps the handle answering. */
		char err[64];
		registry_snapshot_take(reg, err, sizeof err);
	}
	return !reg->lease_lost;
}

enum registry_snapshot_kind registry_snapshot_kind(const struct kiln_registry *reg)
{
	if (reg->lease)
		return REGISTRY_SNAPSHOT_LEASED;
	if (reg->snap)
		return reg->copied_after_lease ? REGISTRY_SNAPSHOT_COPY_AFTER_LEASE : REGISTRY_SNAPSHOT_COPY;
	return reg->copy ? REGISTRY_SNAPSHOT_COPY : REGISTRY_SNAPSHOT_NONE;
}

void registry_snapshot_abandon(struct kiln_registry *reg)
{
	if (reg->lease) {
		fcntl(reg->lease->fd, F_SETLEASE, F_UNLCK);
		copy_free(reg->lease);
		reg->lease = NULL;
	}
	struct registry_copy *c = reg->copy;
	if (!c)
		return;
	reg->copy = NULL;
	if (c->threaded)
		pthread_join(c->thread, NULL);
	copy_free(c);
}

int registry_snapshot(struct kiln_registry *reg, char *err, size_t errlen)
{
	if (registry_snapshot_begin(reg, false, err, errlen) < 0)
		return -1;
	return registry_snapshot_finish(reg, err, errlen);
}

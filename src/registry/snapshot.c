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
 * build starts, so the build never sees a handle that is not the copy. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* Copies `size` bytes of c->fd into a new memfd (c->memfd), in the thread
 * started by registry_snapshot_begin; c->err: 0 or an errno. */
static void *copy_main(void *arg)
{
	struct registry_copy *c = arg;
	c->memfd = memfd_create("kiln-registry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->memfd < 0) {
		c->err = errno;
		return NULL;
	}
	off_t off = 0;
	while ((size_t)off < c->size) {
		ssize_t n = sendfile(c->memfd, c->fd, &off, c->size - (size_t)off);
		if (n <= 0) {
			c->err = n < 0 ? errno : EIO; /* shorter than it was: changed under us */
			return NULL;
		}
	}
	if (registry_seal_copy(c->memfd) < 0)
		c->err = errno;
	return NULL;
}

static void copy_free(struct registry_copy *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->memfd >= 0)
		close(c->memfd);
	free(c);
}

int registry_snapshot_begin(struct kiln_registry *reg, char *err, size_t errlen)
{
	/* A read transaction holds SQLite's shared lock on the file: no SQLite
	 * writer can change it while it is copied. The copy is read from the
	 * path, so check that it still names the file SQLite has open. */
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
	c->fd = open(reg->path, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0 || fstat(c->fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot read the registry: %s", reg->path, strerror(errno));
		goto fail;
	}
	c->size = (size_t)st.st_size;
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

int registry_snapshot_finish(struct kiln_registry *reg, char *err, size_t errlen)
{
	struct registry_copy *c = reg->copy;
	if (!c)
		return 0;
	reg->copy = NULL;
	pthread_join(c->thread, NULL);
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

void registry_snapshot_abandon(struct kiln_registry *reg)
{
	struct registry_copy *c = reg->copy;
	if (!c)
		return;
	reg->copy = NULL;
	pthread_join(c->thread, NULL);
	copy_free(c);
}

int registry_snapshot(struct kiln_registry *reg, char *err, size_t errlen)
{
	if (registry_snapshot_begin(reg, err, errlen) < 0)
		return -1;
	return registry_snapshot_finish(reg, err, errlen);
}

/* A registry handle that no later change to its file can reach: the file is
 * copied (in the kernel, sendfile) into a memfd that is then sealed against
 * every write, mapped read-only and handed to SQLite with
 * sqlite3_deserialize. About 35 ms for Debian's 22 MB registry, against
 * 250 ms for an SQLite backup into :memory:. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

/* A memfd holding the `size` bytes of fd, sealed; -1 with errno. */
static int sealed_copy(int fd, size_t size)
{
	int m = memfd_create("kiln-registry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m < 0)
		return -1;
	off_t off = 0;
	while ((size_t)off < size) {
		ssize_t n = sendfile(m, fd, &off, size - (size_t)off);
		if (n <= 0) {
			int e = n < 0 ? errno : EIO; /* shorter than it was: changed under us */
			close(m);
			errno = e;
			return -1;
		}
	}
	if (registry_seal_copy(m) < 0) {
		int e = errno;
		close(m);
		errno = e;
		return -1;
	}
	return m;
}

int registry_snapshot(struct kiln_registry *reg, char *err, size_t errlen)
{
	/* A read transaction holds SQLite's shared lock on the file: no SQLite
	 * writer can change it while it is copied. The copy is read from the
	 * path, so check that it still names the file SQLite has open. */
	int rc = sqlite3_exec(reg->db, "BEGIN; SELECT count(*) FROM sqlite_schema;", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		registry_sql_message(reg->db, rc, reg->path, err, errlen);
		return -1;
	}
	int m = -1;
	struct stat st;
	int fd = open(reg->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot read the registry: %s", reg->path, strerror(errno));
		goto fail;
	}
	if ((m = sealed_copy(fd, (size_t)st.st_size)) < 0) {
		snprintf(err, errlen, "%s: cannot copy the registry into memory: %s", reg->path,
			 strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	sqlite3_exec(reg->db, "COMMIT", NULL, NULL, NULL);
	size_t len = (size_t)st.st_size;
	void *p = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, m, 0) : NULL;
	close(m);
	if (len && p == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map the registry copy: %s", reg->path, strerror(errno));
		return -1;
	}
	rc = sqlite3_deserialize(reg->db, "main", p, (sqlite3_int64)len, (sqlite3_int64)len,
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
fail:
	if (fd >= 0)
		close(fd);
	sqlite3_exec(reg->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* Attaching to a map: header validation, the one mapping of the reserved
 * range, and the process-local bound on bytes known to be backed. Runs on the
 * preload library's hook path: no malloc, no stdio, no locks. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "shm/errbuf.h"
#include "shm/layout.h"
#include "shm/sys.h"

struct shmmap_header *shmmap_hdr(const struct shmmap *m)
{
	return (struct shmmap_header *)m->base;
}

int shmmap_ensure_safe(struct shmmap *m, uint64_t end)
{
	uint64_t safe = __atomic_load_n(&m->safe_size, __ATOMIC_RELAXED);
	if (end <= safe)
		return 0;
	if (end > m->map_len)
		return -1;
	/* The file may have grown since we last looked: only its real size, never
	 * a number read from shared memory, says which pages are backed. */
	struct stat st;
	if (shm_sys_fstat(m->fd, &st) != 0 || st.st_size < 0)
		return -1;
	uint64_t real = (uint64_t)st.st_size;
	if (real > m->map_len)
		real = m->map_len;
	while (safe < real &&
	       !__atomic_compare_exchange_n(&m->safe_size, &safe, real, 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return end <= real ? 0 : -1;
}

static void describe(struct shm_errbuf *e, const char *path, int fd)
{
	if (path) {
		shm_eb_str(e, path);
	} else {
		shm_eb_str(e, "shm map fd ");
		shm_eb_u64(e, (uint64_t)fd);
	}
	shm_eb_str(e, ": ");
}

/* Checks a header copy against the file size; on failure writes why. */
static int check_header(const struct shmmap_header *h, uint64_t file_size, struct shm_errbuf *e)
{
	if (file_size < SHMMAP_HEADER_SIZE) {
		shm_eb_str(e, "file is ");
		shm_eb_u64(e, file_size);
		shm_eb_str(e, " bytes, too small to be a kiln shm map");
		return -1;
	}
	if (memcmp(h->magic, SHMMAP_MAGIC, 8) != 0) {
		shm_eb_str(e, "bad magic: not a kiln shm map");
		return -1;
	}
	if (h->version != SHMMAP_VERSION) {
		shm_eb_str(e, "unsupported shm map version ");
		shm_eb_u64(e, h->version);
		shm_eb_str(e, " (this kiln reads version ");
		shm_eb_u64(e, SHMMAP_VERSION);
		shm_eb_str(e, ")");
		return -1;
	}
	shm_eb_str(e, "inconsistent header: ");
	if (h->header_size != SHMMAP_HEADER_SIZE) {
		shm_eb_str(e, "header size ");
		shm_eb_u64(e, h->header_size);
		return -1;
	}
	if (h->root_bits < SHMMAP_ROOT_BITS_MIN || h->root_bits > SHMMAP_ROOT_BITS_MAX ||
	    h->subtrie_bits < SHMMAP_SUBTRIE_BITS_MIN || h->subtrie_bits > SHMMAP_SUBTRIE_BITS_MAX) {
		shm_eb_str(e, "table bits out of range (root ");
		shm_eb_u64(e, h->root_bits);
		shm_eb_str(e, ", subtrie ");
		shm_eb_u64(e, h->subtrie_bits);
		shm_eb_str(e, ")");
		return -1;
	}
	if (h->root_off != SHMMAP_HEADER_SIZE) {
		shm_eb_str(e, "root table at ");
		shm_eb_u64(e, h->root_off);
		return -1;
	}
	if (h->max_key != SHMMAP_MAX_KEY) {
		shm_eb_str(e, "maximum key length ");
		shm_eb_u64(e, h->max_key);
		shm_eb_str(e, " (expected ");
		shm_eb_u64(e, SHMMAP_MAX_KEY);
		shm_eb_str(e, ")");
		return -1;
	}
	uint64_t root_end = h->root_off + (8ull << h->root_bits);
	if (h->max_size > SHMMAP_MAX_SIZE_LIMIT || h->max_size % SHMMAP_GROW_UNIT ||
	    h->max_size < root_end) {
		shm_eb_str(e, "maximum size ");
		shm_eb_u64(e, h->max_size);
		return -1;
	}
	if (file_size < root_end || file_size > h->max_size) {
		shm_eb_str(e, "file is ");
		shm_eb_u64(e, file_size);
		shm_eb_str(e, " bytes, outside [");
		shm_eb_u64(e, root_end);
		shm_eb_str(e, ", ");
		shm_eb_u64(e, h->max_size);
		shm_eb_str(e, "]");
		return -1;
	}
	uint64_t committed = atomic_load_explicit(&h->committed, memory_order_relaxed);
	uint64_t alloc_end = atomic_load_explicit(&h->alloc_end, memory_order_relaxed);
	if (committed < root_end || committed > h->max_size ||
	    alloc_end < root_end || alloc_end > h->max_size || alloc_end % 8) {
		shm_eb_str(e, "committed ");
		shm_eb_u64(e, committed);
		shm_eb_str(e, " / allocated ");
		shm_eb_u64(e, alloc_end);
		shm_eb_str(e, " outside the file's bounds");
		return -1;
	}
	e->len = 0;
	if (e->cap)
		e->buf[0] = '\0';
	return 0;
}

static int attach(struct shmmap *m, int fd, int own, const char *path, int mode,
		  char *err, size_t errlen)
{
	struct shm_errbuf e;
	shm_eb_init(&e, err, errlen);
	memset(m, 0, sizeof *m);
	m->fd = -1;

	struct stat st;
	long r = shm_sys_fstat(fd, &st);
	if (r != 0) {
		describe(&e, path, fd);
		shm_eb_str(&e, "cannot stat");
		shm_eb_errno(&e, (int)-r);
		errno = (int)-r;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		describe(&e, path, fd);
		shm_eb_str(&e, "not a regular file");
		errno = EINVAL;
		return -1;
	}
	struct shmmap_header h;
	memset(&h, 0, sizeof h);
	if (st.st_size >= (off_t)sizeof h) {
		long n = shm_sys_pread(fd, &h, sizeof h, 0);
		if (n != (long)sizeof h) {
			int saved = n < 0 ? (int)-n : EIO;
			describe(&e, path, fd);
			shm_eb_str(&e, "cannot read header");
			shm_eb_errno(&e, saved);
			errno = saved;
			return -1;
		}
	}
	struct shm_errbuf he;
	char hmsg[160];
	shm_eb_init(&he, hmsg, sizeof hmsg);
	if (check_header(&h, (uint64_t)st.st_size, &he) != 0) {
		describe(&e, path, fd);
		shm_eb_str(&e, hmsg);
		errno = EINVAL;
		return -1;
	}

	int prot = PROT_READ | (mode == SHMMAP_RDWR ? PROT_WRITE : 0);
	long addr = shm_sys_mmap(h.max_size, prot, MAP_SHARED | MAP_NORESERVE, fd);
	void *base = shm_sys_addr(addr);
	if (!base) {
		int saved = (int)-addr;
		describe(&e, path, fd);
		shm_eb_str(&e, "cannot map ");
		shm_eb_u64(&e, h.max_size);
		shm_eb_str(&e, " bytes");
		shm_eb_errno(&e, saved);
		errno = saved;
		return -1;
	}
	m->base = base;
	m->map_len = h.max_size;
	m->safe_size = (uint64_t)st.st_size;
	m->root_off = h.root_off;
	m->seed = h.seed;
	m->tag = h.tag;
	m->root_bits = h.root_bits;
	m->subtrie_bits = h.subtrie_bits;
	m->fd = fd;
	m->writable = mode == SHMMAP_RDWR;
	m->own_fd = own;
	m->hash = NULL;
	return 0;
}

int shmmap_attach_fd(struct shmmap *m, int fd, int mode, char *err, size_t errlen)
{
	return attach(m, fd, 0, NULL, mode, err, errlen);
}

int shmmap_attach(struct shmmap *m, const char *path, int mode, char *err, size_t errlen)
{
	int fd = open(path, (mode == SHMMAP_RDWR ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0) {
		int saved = errno;
		struct shm_errbuf e;
		shm_eb_init(&e, err, errlen);
		shm_eb_str(&e, path);
		shm_eb_str(&e, ": cannot open");
		shm_eb_errno(&e, saved);
		memset(m, 0, sizeof *m);
		m->fd = -1;
		errno = saved;
		return -1;
	}
	if (attach(m, fd, 1, path, mode, err, errlen) != 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return 0;
}

void shmmap_detach(struct shmmap *m)
{
	int saved = errno;
	if (m->base)
		shm_sys_munmap(m->base, m->map_len);
	if (m->own_fd && m->fd >= 0)
		close(m->fd);
	memset(m, 0, sizeof *m);
	m->fd = -1;
	errno = saved;
}

int shmmap_prefault(struct shmmap *m)
{
	if (!m->base)
		return -1;
	shmmap_ensure_safe(m, m->map_len); /* refreshes the known-backed size */
	uint64_t len = __atomic_load_n(&m->safe_size, __ATOMIC_RELAXED) & ~(uint64_t)4095;
	return len && shm_sys_madvise(m->base, len, MADV_POPULATE_READ) != 0 ? -1 : 0;
}

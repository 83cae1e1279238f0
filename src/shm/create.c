/* Creating a map: a file (or memfd) grown to its initial size, with a header
 * and an empty root table. A path appears complete or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/errbuf.h"
#include "shm/layout.h"

static uint64_t round_up(uint64_t n, uint64_t unit)
{
	return (n + unit - 1) / unit * unit;
}

/* Fills in defaults and checks the parameters; writes the header to *h. */
static int plan(const struct shmmap_params *p, struct shmmap_header *h, struct shm_errbuf *e)
{
	struct shmmap_params d = { 0 };
	if (p)
		d = *p;
	if (!d.initial_size)
		d.initial_size = 4ull << 20;
	if (!d.max_size)
		d.max_size = 1ull << 30;
	if (!d.subtrie_bits)
		d.subtrie_bits = 4;
	d.initial_size = round_up(d.initial_size, SHMMAP_GROW_UNIT);
	d.max_size = round_up(d.max_size, SHMMAP_GROW_UNIT);
	if (d.max_size > SHMMAP_MAX_SIZE_LIMIT) {
		shm_eb_str(e, "maximum size ");
		shm_eb_u64(e, d.max_size);
		shm_eb_str(e, " exceeds the limit of ");
		shm_eb_u64(e, SHMMAP_MAX_SIZE_LIMIT);
		return -1;
	}
	if (d.initial_size > d.max_size) {
		shm_eb_str(e, "initial size ");
		shm_eb_u64(e, d.initial_size);
		shm_eb_str(e, " exceeds the maximum size ");
		shm_eb_u64(e, d.max_size);
		return -1;
	}
	if (!d.root_bits) {
		d.root_bits = 18;
		while (d.root_bits > SHMMAP_ROOT_BITS_MIN &&
		       SHMMAP_HEADER_SIZE + (8ull << d.root_bits) > d.initial_size)
			d.root_bits--;
	}
	if (d.root_bits < SHMMAP_ROOT_BITS_MIN || d.root_bits > SHMMAP_ROOT_BITS_MAX ||
	    d.subtrie_bits < SHMMAP_SUBTRIE_BITS_MIN || d.subtrie_bits > SHMMAP_SUBTRIE_BITS_MAX) {
		shm_eb_str(e, "table bits out of range (root 4..20, subtrie 2..12)");
		return -1;
	}
	if (SHMMAP_HEADER_SIZE + (8ull << d.root_bits) > d.initial_size) {
		shm_eb_str(e, "initial size ");
		shm_eb_u64(e, d.initial_size);
		shm_eb_str(e, " cannot hold a root table of 2^");
		shm_eb_u64(e, d.root_bits);
		shm_eb_str(e, " slots");
		return -1;
	}
	if (!d.seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		d.seed = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
			 ((uint64_t)getpid() << 40);
	}

	memset(h, 0, sizeof *h);
	memcpy(h->magic, SHMMAP_MAGIC, 8);
	h->version = SHMMAP_VERSION;
	h->header_size = SHMMAP_HEADER_SIZE;
	h->max_size = d.max_size;
	h->root_off = SHMMAP_HEADER_SIZE;
	h->root_bits = d.root_bits;
	h->subtrie_bits = d.subtrie_bits;
	h->seed = d.seed;
	h->max_key = SHMMAP_MAX_KEY;
	h->tag = d.tag;
	atomic_init(&h->committed, d.initial_size);
	atomic_init(&h->alloc_end, SHMMAP_HEADER_SIZE + (8ull << d.root_bits));
	atomic_init(&h->entries, 0);
	atomic_init(&h->subtries, 0);
	return 0;
}

static int init_fd(int fd, const char *name, const struct shmmap_params *p, struct shm_errbuf *e)
{
	struct shmmap_header h;
	if (plan(p, &h, e) != 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0) {
		shm_eb_str(e, name);
		shm_eb_str(e, ": not an empty regular file");
		return -1;
	}
	uint64_t initial = atomic_load_explicit(&h.committed, memory_order_relaxed);
	if (fallocate(fd, 0, 0, (off_t)initial) != 0) {
		int saved = errno;
		shm_eb_str(e, name);
		shm_eb_str(e, ": cannot grow to ");
		shm_eb_u64(e, initial);
		shm_eb_str(e, " bytes");
		shm_eb_errno(e, saved);
		return -1;
	}
	if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
		int saved = errno;
		shm_eb_str(e, name);
		shm_eb_str(e, ": cannot write header");
		shm_eb_errno(e, saved);
		return -1;
	}
	/* A memfd can be sealed so that nobody can ever shrink it (the one way a
	 * reader could still be hit by SIGBUS); a plain file just says EINVAL. */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
	return 0;
}

int shmmap_create_fd(struct shmmap *m, int fd, const struct shmmap_params *p,
		     char *err, size_t errlen)
{
	struct shm_errbuf e;
	shm_eb_init(&e, err, errlen);
	memset(m, 0, sizeof *m);
	m->fd = -1;
	if (init_fd(fd, "shm map fd", p, &e) != 0)
		return -1;
	return shmmap_attach_fd(m, fd, SHMMAP_RDWR, err, errlen);
}

int shmmap_create(struct shmmap *m, const char *path, const struct shmmap_params *p,
		  char *err, size_t errlen)
{
	struct shm_errbuf e;
	shm_eb_init(&e, err, errlen);
	memset(m, 0, sizeof *m);
	m->fd = -1;

	char tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
		shm_eb_str(&e, path);
		shm_eb_str(&e, ": path too long");
		return -1;
	}
	unsigned mode = p && p->mode ? p->mode : 0600;
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		int saved = errno;
		shm_eb_str(&e, tmp);
		shm_eb_str(&e, ": cannot create");
		shm_eb_errno(&e, saved);
		return -1;
	}
	if (init_fd(fd, path, p, &e) != 0)
		goto fail;
	/* link() rather than rename(): never replaces an existing map. */
	if (link(tmp, path) != 0) {
		int saved = errno;
		shm_eb_str(&e, path);
		shm_eb_str(&e, saved == EEXIST ? ": already exists" : ": cannot create");
		if (saved != EEXIST)
			shm_eb_errno(&e, saved);
		goto fail;
	}
	unlink(tmp);
	if (shmmap_attach_fd(m, fd, SHMMAP_RDWR, err, errlen) != 0) {
		unlink(path);
		close(fd);
		return -1;
	}
	m->own_fd = 1;
	return 0;
fail:
	unlink(tmp);
	close(fd);
	return -1;
}

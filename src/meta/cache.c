/* The model cache: a list of entries under one lock (a build touches tens
 * to hundreds of binaries, so a scan is cheap next to one stat). An entry is
 * LOADING while one thread parses it (others asking for the same file wait on
 * the condition variable), then READY. A stale entry is unlinked at once and
 * freed by its last user. */
#include "meta/cache.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ident {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	unsigned char build_id[64];
	size_t build_id_len;
};

struct entry {
	struct entry *next;
	char *path;
	char *debug_root;   /* NULL: the default */
	struct ident id;
	bool has_debug;     /* the model uses a separate debug file: */
	struct ident debug; /* its identity (no build id) when parsed */
	struct meta_model *m; /* NULL while loading */
	bool loading;
	bool linked;        /* false once stale or evicted */
	unsigned users;
	uint64_t last_use;
	uint64_t bytes;
};

struct meta_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded;
	struct entry *head;
	struct entry *orphans; /* unlinked while in use: freed by their last put */
	uint64_t tick;
	struct meta_cache_stats st;
};

struct meta_cache *meta_cache_new(uint64_t max_bytes)
{
	struct meta_cache *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	c->st.max_bytes = max_bytes;
	return c;
}

static void entry_free(struct entry *e)
{
	meta_model_free(e->m);
	free(e->path);
	free(e->debug_root);
	free(e);
}

void meta_cache_free(struct meta_cache *c)
{
	if (!c)
		return;
	for (struct entry *e = c->head, *n; e; e = n) {
		n = e->next;
		entry_free(e);
	}
	for (struct entry *e = c->orphans, *n; e; e = n) {
		n = e->next;
		entry_free(e);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->loaded);
	free(c);
}

uint64_t meta_cache_model_bytes(const struct meta_model *m)
{
	return meta_model_bytes(m) + m->size + m->debug_file_size;
}

static void stat_ident(const struct stat *st, struct ident *id)
{
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* The identity of the file PATH names now. -1 if it cannot be opened. */
static int read_ident(int dirfd, const char *path, struct ident *id)
{
	memset(id, 0, sizeof *id);
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	int rc = fstat(fd, &st);
	if (rc == 0) {
		stat_ident(&st, id);
		elf_version(EV_CURRENT);
		Elf *elf = S_ISREG(st.st_mode) ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
		const void *bid;
		ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &bid) : -1;
		if (n > 0 && (size_t)n <= sizeof id->build_id) {
			memcpy(id->build_id, bid, (size_t)n);
			id->build_id_len = (size_t)n;
		}
		if (elf)
			elf_end(elf);
	}
	close(fd);
	return rc;
}

static bool same_file(const struct ident *a, const struct ident *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

static bool same_ident(const struct ident *a, const struct ident *b)
{
	return same_file(a, b) && a->build_id_len == b->build_id_len &&
	       !memcmp(a->build_id, b->build_id, a->build_id_len);
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Whether a READY entry's separate debug file is still the one it read. */
static bool debug_unchanged(const struct entry *e, int dirfd)
{
	if (!e->has_debug)
		return true;
	struct stat st;
	struct ident now;
	if (fstatat(dirfd, e->m->debug_path, &st, 0) < 0)
		return false;
	stat_ident(&st, &now);
	return same_file(&now, &e->debug);
}

static void unlink_entry(struct meta_cache *c, struct entry *e)
{
	for (struct entry **p = &c->head; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	e->linked = false;
	if (e->m)
		c->st.bytes -= e->bytes;
	c->st.models--;
}

/* Evicts least recently used idle models while over the bound; the caller
 * frees the returned list after unlocking. */
static struct entry *evict(struct meta_cache *c)
{
	struct entry *out = NULL;
	while (c->st.max_bytes && c->st.bytes > c->st.max_bytes) {
		struct entry *lru = NULL;
		for (struct entry *e = c->head; e; e = e->next)
			if (!e->loading && !e->users && (!lru || e->last_use < lru->last_use))
				lru = e;
		if (!lru)
			break;
		unlink_entry(c, lru);
		c->st.evictions++;
		lru->next = out;
		out = lru;
	}
	return out;
}

static void free_list(struct entry *e)
{
	if (!e)
		return;
	while (e) {
		struct entry *n = e->next;
		entry_free(e);
		e = n;
	}
	malloc_trim(0); /* give the freed model's memory back to the system */
}

/* Under the lock: the live entry for (path, root, id), and every other idle
 * entry of that path and root (an older version of the file) put on *stale. */
static struct entry *find(struct meta_cache *c, const char *path, const char *root,
			  const struct ident *id, int dirfd, struct entry **stale)
{
	struct entry *hit = NULL;
	for (struct entry *e = c->head, *n; e; e = n) {
		n = e->next;
		if (strcmp(e->path, path) || !same_str(e->debug_root, root))
			continue;
		if (same_ident(&e->id, id) && (e->loading || debug_unchanged(e, dirfd))) {
			hit = e;
			continue;
		}
		if (e->loading)
			continue;
		unlink_entry(c, e);
		c->st.stale++;
		struct entry **to = e->users ? &c->orphans : stale;
		e->next = *to;
		*to = e;
	}
	return hit;
}

int meta_cache_get(struct meta_cache *c, const char *path, const struct meta_options *opts,
		   struct meta_model **out, struct meta_err *err, int *parsed)
{
	int dirfd = opts && opts->has_dirfd ? opts->dirfd : AT_FDCWD;
	const char *root = opts ? opts->debug_root : NULL;
	*parsed = 0;
	struct ident id;
	if (read_ident(dirfd, path, &id) < 0) /* let the parser say why, in its words */
		goto uncached;

	struct entry *stale = NULL, *e;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		e = find(c, path, root, &id, dirfd, &stale);
		if (!e || !e->loading)
			break;
		pthread_cond_wait(&c->loaded, &c->lock);
	}
	if (e) {
		e->users++;
		e->last_use = ++c->tick;
		c->st.hits++;
		pthread_mutex_unlock(&c->lock);
		free_list(stale);
		*out = e->m;
		return 0;
	}
	e = calloc(1, sizeof *e);
	if (!e || !(e->path = strdup(path)) || (root && !(e->debug_root = strdup(root)))) {
		pthread_mutex_unlock(&c->lock);
		free_list(stale);
		if (e)
			entry_free(e);
		goto uncached;
	}
	e->id = id;
	e->loading = e->linked = true;
	e->users = 1;
	e->next = c->head;
	c->head = e;
	c->st.models++;
	c->st.misses++;
	pthread_mutex_unlock(&c->lock);
	free_list(stale);

	struct meta_model *m;
	int rc = meta_model_open_with(path, opts, &m, err);
	pthread_mutex_lock(&c->lock);
	e->loading = false;
	if (rc) {
		unlink_entry(c, e);
		pthread_cond_broadcast(&c->loaded);
		pthread_mutex_unlock(&c->lock);
		entry_free(e);
		return -1;
	}
	/* Key it by what the parser really read (the file may have changed
	 * since read_ident). */
	e->m = m;
	e->id.dev = m->dev;
	e->id.ino = m->ino;
	e->id.size = m->size;
	e->id.mtime_ns = m->mtime_ns;
	e->id.build_id_len = m->build_id_len;
	memcpy(e->id.build_id, m->build_id, m->build_id_len);
	struct stat st;
	if (m->debug_fd >= 0 && fstat(m->debug_fd, &st) == 0) {
		e->has_debug = true;
		stat_ident(&st, &e->debug);
	}
	e->bytes = meta_cache_model_bytes(m);
	e->last_use = ++c->tick;
	c->st.parses++;
	c->st.bytes += e->bytes;
	if (c->st.bytes > c->st.peak_bytes)
		c->st.peak_bytes = c->st.bytes;
	pthread_cond_broadcast(&c->loaded);
	struct entry *gone = evict(c);
	pthread_mutex_unlock(&c->lock);
	free_list(gone);
	*parsed = 1;
	*out = m;
	return 0;

uncached:
	if (meta_model_open_with(path, opts, out, err))
		return -1;
	*parsed = 1;
	pthread_mutex_lock(&c->lock);
	c->st.misses++;
	c->st.parses++;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void meta_cache_put(struct meta_cache *c, struct meta_model *m)
{
	struct entry *e = NULL, *gone = NULL;
	pthread_mutex_lock(&c->lock);
	for (struct entry *x = c->head; x && !e; x = x->next)
		if (x->m == m)
			e = x;
	for (struct entry **p = &c->orphans; *p && !e; p = &(*p)->next)
		if ((*p)->m == m && !--(*p)->users) { /* a stale model's last user */
			gone = *p;
			*p = gone->next;
			gone->next = NULL;
			pthread_mutex_unlock(&c->lock);
			free_list(gone);
			return;
		} else if ((*p)->m == m) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	if (!e) { /* a model that was never cached */
		pthread_mutex_unlock(&c->lock);
		meta_model_free(m);
		return;
	}
	e->users--;
	e->last_use = ++c->tick;
	gone = evict(c);
	pthread_mutex_unlock(&c->lock);
	free_list(gone);
}

void meta_cache_get_stats(struct meta_cache *c, struct meta_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	pthread_mutex_unlock(&c->lock);
}

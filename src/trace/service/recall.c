/* Recalled keys: see recall.h and docs/verdict-cache.md. The file:
 *
 *   kiln-recall 1
 *   ACCESS QFLAGS PATH        (decimal, one key a line, in the order asked)
 */
#include "trace/service/recall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mkdirs.h"
#include "common/outfile.h"
#include "trace/service/pathtab.h"
#include "trace/verdict.h"

#define HEADER "kiln-recall 1\n"
#define QFLAGS_KNOWN (KILN_Q_NOFOLLOW | KILN_Q_PROBE)

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

/* A key the server could have answered: a read class, known flags, an
 * absolute path as clients key it. */
static bool key_ok(unsigned long access, unsigned long qflags, const char *path)
{
	return access && !(access & ~(unsigned long)KILN_A_READ_CLASSES) &&
	       !(qflags & ~(unsigned long)QFLAGS_KNOWN) && path[0] == '/' &&
	       strlen(path) + 4 <= SHMMAP_MAX_KEY;
}

/* 1: a line that is not a key (err says which); -1: out of memory. */
static int parse(struct recall *r, char *text, size_t len, char *err, size_t errlen)
{
	if (len < sizeof HEADER - 1 || memcmp(text, HEADER, sizeof HEADER - 1)) {
		snprintf(err, errlen, "%s: not a kiln recall file (format 1); ignored", r->file);
		return 1;
	}
	size_t cap = 0, line = 1;
	for (char *p = text + sizeof HEADER - 1, *end = text + len; p < end && r->n < RECALL_KEEP;) {
		line++;
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			goto bad;
		*nl = '\0';
		char *e;
		errno = 0;
		unsigned long access = strtoul(p, &e, 10);
		if (e == p || *e != ' ')
			goto bad;
		char *q = e + 1;
		unsigned long qflags = strtoul(q, &e, 10);
		if (e == q || *e != ' ' || errno || !key_ok(access, qflags, e + 1))
			goto bad;
		if (r->n == cap) {
			cap = cap ? cap * 2 : 256;
			struct recall_key *k = realloc(r->keys, cap * sizeof *k);
			if (!k)
				return -1;
			r->keys = k;
		}
		if (!(r->keys[r->n].path = strdup(e + 1)))
			return -1;
		r->keys[r->n].access = (uint8_t)access;
		r->keys[r->n].qflags = (uint8_t)qflags;
		r->n++;
		p = nl + 1;
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: line %zu is not a key; the file is ignored", r->file, line);
	return 1;
}

static void drop_keys(struct recall *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->keys[i].path);
	free(r->keys);
	r->keys = NULL;
	r->n = 0;
}

int recall_open(struct recall *r, const char *dir, const char *identity, size_t identity_len,
		char *err, size_t errlen)
{
	*r = (struct recall){ 0 };
	if (snprintf(r->file, sizeof r->file, "%s/%016llx", dir,
		     (unsigned long long)fnv1a(identity, identity_len)) >= (int)sizeof r->file) {
		r->file[0] = '\0';
		snprintf(err, errlen, "%s: path too long; nothing recalled", dir);
		return 1;
	}
	/* O_NONBLOCK: a FIFO there is not waited on */
	int fd = open(r->file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0; /* the first build of this sandbox */
	struct stat st;
	int rc = 1;
	char *text = NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
		snprintf(err, errlen, "%s: not a regular file of kiln's; ignored", r->file);
		goto out;
	}
	size_t len = (size_t)st.st_size, got = 0;
	if (!(text = malloc(len + 1))) {
		rc = -1;
		goto out;
	}
	while (got < len) {
		ssize_t n = read(fd, text + got, len - got);
		if (n <= 0) {
			snprintf(err, errlen, "%s: cannot read it; ignored", r->file);
			goto out;
		}
		got += (size_t)n;
	}
	rc = parse(r, text, len, err, errlen);
	if (rc == 0 && r->n && (!(r->seen = calloc((r->n + 63) / 64, sizeof *r->seen)) ||
				!(r->logged = calloc((r->n + 63) / 64, sizeof *r->logged))))
		rc = -1;
out:
	if (rc != 0)
		drop_keys(r);
	free(text);
	close(fd);
	return rc;
}

size_t recall_left(const struct recall *r)
{
	return r->n - r->next;
}

size_t recall_ahead(struct recall *r, struct sandbox *sbx, struct verdict_cache *vc, size_t max)
{
	/* static: a decision holds two path buffers */
	static struct sbx_decision d;
	for (size_t done = 0; r->next < r->n && done < max; done++, r->next++) {
		const struct recall_key *k = &r->keys[r->next];
		if (verdict_cache_has(vc, k->path, k->access, k->qflags))
			continue; /* asked already: in r->asked */
		sandbox_decide(sbx, getpid(), k->path, k->access, k->qflags, &d);
		if (verdict_cache_recall(vc, k->path, k->access, k->qflags, &d, (uint32_t)r->next))
			r->put++;
	}
	return recall_left(r);
}

size_t recall_read(struct recall *r, struct verdict_cache *vc,
		   void (*used)(void *ctx, const char *path, unsigned access), void *ctx)
{
	uint32_t bits;
	const uint64_t *w = verdict_cache_recall_bitmap(vc, &bits);
	if (!r->seen)
		return 0;
	size_t n = 0, nw = ((size_t)(bits < r->n ? bits : r->n) + 63) / 64;
	for (size_t i = 0; w && i < nw; i++) {
		uint64_t fresh = __atomic_load_n(&w[i], __ATOMIC_RELAXED) & ~r->seen[i];
		r->seen[i] |= fresh;
		for (; fresh; fresh &= fresh - 1) {
			size_t j = i * 64 + (size_t)__builtin_ctzll(fresh);
			if (j >= r->n)
				break; /* a client's scribble past the keys */
			const struct recall_key *k = &r->keys[j];
			uint32_t num = (uint32_t)j;
			if (!verdict_cache_recall_done(vc, k->path, k->access, k->qflags, num))
				continue;
			used(ctx, k->path, k->access);
			r->logged[i] |= 1ull << (j % 64);
			n++;
		}
	}
	r->used += n;
	return n;
}

bool recall_claim(struct recall *r, struct verdict_cache *vc, const char *path,
		  unsigned access, unsigned qflags)
{
	uint32_t bits;
	uint64_t *w = verdict_cache_recall_bitmap(vc, &bits);
	long i = verdict_cache_recalled(vc, path, access, qflags);
	if (!w || !r->seen || i < 0 || (size_t)i >= r->n || (size_t)i >= bits)
		return false;
	uint64_t bit = 1ull << (i % 64);
	if (r->seen[i / 64] & bit)
		return false;
	r->seen[i / 64] |= bit;
	r->logged[i / 64] |= bit;
	__atomic_fetch_or(&w[i / 64], bit, __ATOMIC_RELAXED);
	verdict_cache_recall_done(vc, path, access, qflags, (uint32_t)i);
	return true;
}

void recall_remember(struct recall *r, const char *path, unsigned access, unsigned qflags)
{
	if (r->lost || r->nasked >= RECALL_KEEP || !key_ok(access, qflags, path) ||
	    strchr(path, '\n'))
		return;
	if (r->nasked == r->capasked) {
		size_t cap = r->capasked ? r->capasked * 2 : 256;
		struct recall_key *k = realloc(r->asked, cap * sizeof *k);
		if (!k) {
			r->lost = true;
			return;
		}
		r->asked = k;
		r->capasked = cap;
	}
	struct recall_key *k = &r->asked[r->nasked];
	if (!(k->path = strdup(path))) {
		r->lost = true;
		return;
	}
	k->access = (uint8_t)access;
	k->qflags = (uint8_t)qflags;
	r->nasked++;
}

/* Writes k unless the same key was written already. */
static int write_key(FILE *f, struct pathtab *done, const struct recall_key *k, size_t *n)
{
	char key[SHMMAP_MAX_KEY];
	size_t klen = vc_key_verdict(key, k->path, strlen(k->path), k->access, k->qflags);
	if (!klen)
		return 0;
	bool added;
	void **slot = pathtab_put(done, key, klen, &added);
	if (!slot)
		return -1;
	if (!added || *n >= RECALL_KEEP)
		return 0;
	*slot = (void *)1;
	(*n)++;
	return fprintf(f, "%u %u %s\n", k->access, k->qflags, k->path) < 0 ? -1 : 0;
}

int recall_save(struct recall *r, char *err, size_t errlen)
{
	if (!r->file[0] || r->lost)
		return 0;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", r->file);
	*strrchr(dir, '/') = '\0';
	if (mkdirs(dir, 0700) < 0) {
		snprintf(err, errlen, "%s: cannot create directory: %s", dir, strerror(errno));
		return -1;
	}
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, r->file, -1, OUTFILE_REGULAR_ONLY, err, errlen);
	if (!f)
		return -1;
	struct pathtab done = { 0 };
	size_t n = 0;
	int rc = fputs(HEADER, f) < 0 ? -1 : 0;
	for (size_t i = 0; rc == 0 && i < r->n; i++)
		if (r->logged[i / 64] & (1ull << (i % 64)))
			rc = write_key(f, &done, &r->keys[i], &n);
	for (size_t i = 0; rc == 0 && i < r->nasked; i++)
		rc = write_key(f, &done, &r->asked[i], &n);
	pathtab_free(&done, NULL);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot write it: %s", r->file, strerror(errno));
		outfile_abort(&o);
		return -1;
	}
	return outfile_commit(&o, err, errlen);
}

void recall_free(struct recall *r)
{
	drop_keys(r);
	free(r->seen);
	free(r->logged);
	for (size_t i = 0; i < r->nasked; i++)
		free(r->asked[i].path);
	free(r->asked);
	*r = (struct recall){ 0 };
}

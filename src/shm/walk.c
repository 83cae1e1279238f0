/* Whole-map traversals: iterate, stats, validate. Not for hook paths. */
#include <string.h>

#include "shm/errbuf.h"
#include "shm/layout.h"

#define MAX_DEPTH 72

struct walker {
	struct shmmap *m;
	uint64_t limit;   /* nothing reachable may extend past this */
	int validating;
	struct shm_errbuf *e;
	long long count;
	uint64_t idx[MAX_DEPTH]; /* bucket (depth 0) or slot index at each level on the way down */
	/* Hashes of the current bucket's probe-slot chains: no other chain of the
	 * bucket (probe or overflow) may have one of them. */
	struct shmmap_hash probe_hash[SHMMAP_PROBE_SLOTS];
	unsigned nprobe;
	int (*fn)(const void *key, size_t len, uint64_t value, void *ctx);
	void *ctx;
	int stop;
};

/* Depth 0 is the root, indexed by bucket; a bucket's overflow slot leads to
 * subtries at depth 1, 2, ... */
static unsigned level_bits(const struct shmmap *m, int depth)
{
	return depth == 0 ? shmmap_bucket_bits(m->root_bits)
			  : shmmap_subtrie_bits_at(m->subtrie_bits, (unsigned)depth);
}

static unsigned level_start(const struct shmmap *m, int depth)
{
	unsigned start = 0;
	for (int d = 0; d < depth; d++)
		start += level_bits(m, d);
	return start;
}

static int fail(struct walker *w, const char *what, uint64_t off)
{
	if (w->e) {
		shm_eb_str(w->e, what);
		shm_eb_str(w->e, " (offset ");
		shm_eb_u64(w->e, off);
		shm_eb_str(w->e, ")");
	}
	return -1;
}

/* Bounds the walk by what is allocated and known backed. */
static void refresh_limit(struct walker *w)
{
	struct shmmap *m = w->m;
	uint64_t alloc_end = atomic_load_explicit(&shmmap_hdr(m)->alloc_end, memory_order_acquire);
	shmmap_ensure_safe(m, alloc_end <= m->map_len ? alloc_end : m->map_len);
	uint64_t safe = __atomic_load_n(&m->safe_size, __ATOMIC_RELAXED);
	w->limit = alloc_end < safe ? alloc_end : safe;
}

static int in_bounds(struct walker *w, uint64_t off, uint64_t size)
{
	if (off < w->m->root_off + (8ull << w->m->root_bits) || off % 8)
		return 0;
	if (off <= w->limit && size <= w->limit - off)
		return 1;
	/* Maybe published after the walk began, by an inserter running
	 * meanwhile: it was allocated before it was published, so a fresh look
	 * at alloc_end (and at the file's size) covers it. */
	refresh_limit(w);
	return off <= w->limit && size <= w->limit - off;
}

static int walk_chain(struct walker *w, uint64_t word, int depth)
{
	struct shmmap *m = w->m;
	struct shmmap_hash hh = { 0, 0 };
	uint64_t head = word & SHMMAP_OFF_MASK;
	for (uint64_t off = head, n = 0; off; n++) {
		if (!in_bounds(w, off, sizeof(struct shmmap_record)))
			return fail(w, "record offset out of bounds or misaligned", off);
		struct shmmap_record *r = (struct shmmap_record *)(m->base + off);
		uint32_t klen = __atomic_load_n(&r->key_len, __ATOMIC_RELAXED);
		if (r->tag != SHMMAP_RECORD_TAG)
			return fail(w, "slot points to something that is not a record", off);
		if (klen > SHMMAP_MAX_KEY || !in_bounds(w, off, shmmap_record_size(klen)))
			return fail(w, "record key length out of bounds", off);
		struct shmmap_hash rh = { r->hash_lo, r->hash_hi };
		if (n == 0) {
			hh = rh;
			if (word >> SHMMAP_OFF_BITS != shmmap_tag(rh))
				return fail(w, "slot's hash tag does not match its record", off);
			for (unsigned p = 0; w->validating && p < w->nprobe; p++)
				if (w->probe_hash[p].lo == rh.lo && w->probe_hash[p].hi == rh.hi)
					return fail(w, "two chains of one bucket have the same hash", off);
		}
		if (w->validating) {
			struct shmmap_hash kh = shmmap_hash_key(m, r->key, klen);
			if (kh.lo != rh.lo || kh.hi != rh.hi)
				return fail(w, "record hash does not match its key", off);
			if (rh.lo != hh.lo || rh.hi != hh.hi)
				return fail(w, "collision chain mixes different hashes", off);
			for (int d = 0; d <= depth; d++)
				if (shmmap_hash_bits(rh, level_start(m, d), level_bits(m, d)) != w->idx[d])
					return fail(w, "record is in a slot its hash does not select", off);
			for (uint64_t o = head; o != off;) {
				struct shmmap_record *p = (struct shmmap_record *)(m->base + o);
				if (p->key_len == klen && !memcmp(p->key, r->key, klen))
					return fail(w, "key appears twice", off);
				o = atomic_load_explicit(&p->next, memory_order_acquire);
			}
		}
		w->count++;
		if (w->fn && (w->stop = w->fn(r->key, klen, r->value, w->ctx)) != 0)
			return 0;
		uint64_t next = atomic_load_explicit(&r->next, memory_order_acquire);
		if (next && next <= off)
			return fail(w, "collision chain points backwards", off);
		off = next;
	}
	return 0;
}

static int walk_table(struct walker *w, uint64_t table, _Atomic uint64_t *slots, int depth);

/* The subtrie `word` found in the table at `table`, at depth `depth`. */
static int walk_subtrie(struct walker *w, uint64_t word, uint64_t table, int depth)
{
	struct shmmap *m = w->m;
	uint64_t off = word & ~(uint64_t)1;
	if (off > SHMMAP_OFF_MASK)
		return fail(w, "subtrie word has tag bits set", off);
	if (depth + 1 >= MAX_DEPTH || level_start(m, depth + 1) >= 128 + level_bits(m, depth))
		return fail(w, "subtries nest deeper than the hash has bits", off);
	if (off <= table || !in_bounds(w, off, shmmap_subtrie_size(level_bits(m, depth + 1))))
		return fail(w, "subtrie offset out of bounds or not after its parent", off);
	struct shmmap_subtrie *s = (struct shmmap_subtrie *)(m->base + off);
	if (s->tag != SHMMAP_SUBTRIE_TAG)
		return fail(w, "slot points to something that is not a subtrie", off);
	if (s->start_bit != level_start(m, depth + 1) || (w->validating && s->parent != table))
		return fail(w, "subtrie header does not match its position", off);
	return walk_table(w, off, s->slots, depth + 1);
}

static int walk_table(struct walker *w, uint64_t table, _Atomic uint64_t *slots, int depth)
{
	struct shmmap *m = w->m;
	unsigned bits = level_bits(m, depth);
	for (uint64_t i = 0; i < (1ull << bits) && !w->stop; i++) {
		uint64_t word = atomic_load_explicit(&slots[i], memory_order_acquire);
		w->idx[depth] = i;
		if (word == 0)
			continue;
		if (!(word & 1)) {
			if (walk_chain(w, word, depth) != 0)
				return -1;
			continue;
		}
		if (walk_subtrie(w, word, table, depth) != 0)
			return -1;
	}
	return 0;
}

/* The root: buckets of 7 probe slots filled in order, then the overflow
 * slot, which holds something only once all 7 are filled. */
static int walk_root(struct walker *w)
{
	struct shmmap *m = w->m;
	_Atomic uint64_t *root = (_Atomic uint64_t *)(m->base + m->root_off);
	uint64_t nbuckets = 1ull << shmmap_bucket_bits(m->root_bits);
	for (uint64_t b = 0; b < nbuckets && !w->stop; b++) {
		_Atomic uint64_t *bucket = root + b * SHMMAP_BUCKET_SLOTS;
		w->idx[0] = b;
		w->nprobe = 0;
		/* Read the last slot first: slots fill in order, so a slot seen
		 * filled means every slot before it was filled earlier still, and
		 * inserters running meanwhile cannot make a bucket look out of
		 * order. */
		uint64_t words[SHMMAP_BUCKET_SLOTS];
		for (unsigned i = SHMMAP_BUCKET_SLOTS; i-- > 0;)
			words[i] = atomic_load_explicit(&bucket[i], memory_order_acquire);
		int seen_empty = 0;
		for (unsigned i = 0; i < SHMMAP_BUCKET_SLOTS && !w->stop; i++) {
			uint64_t word = words[i];
			uint64_t at = m->root_off + (b * SHMMAP_BUCKET_SLOTS + i) * 8;
			if (word == 0) {
				seen_empty = 1;
				continue;
			}
			if (seen_empty && w->validating)
				return fail(w, "bucket has a filled slot after an empty one", at);
			if (i == SHMMAP_PROBE_SLOTS) { /* the overflow slot */
				if (((word & 1) ? walk_subtrie(w, word, m->root_off, 0)
						: walk_chain(w, word, 0)) != 0)
					return -1;
				continue;
			}
			if (word & 1) {
				if (word & ~SHMMAP_OFF_MASK)
					return fail(w, "subtrie word has tag bits set", at);
				return fail(w, "probe slot holds a subtrie", at);
			}
			if (walk_chain(w, word, 0) != 0)
				return -1;
			struct shmmap_record *r = (struct shmmap_record *)(m->base + (word & SHMMAP_OFF_MASK));
			w->probe_hash[w->nprobe++] = (struct shmmap_hash){ r->hash_lo, r->hash_hi };
		}
	}
	w->nprobe = 0;
	return 0;
}

static int walk(struct walker *w)
{
	refresh_limit(w);
	return walk_root(w);
}

int shmmap_iterate(struct shmmap *m,
		   int (*fn)(const void *key, size_t len, uint64_t value, void *ctx),
		   void *ctx)
{
	if (!m->base)
		return -1;
	struct walker w;
	memset(&w, 0, sizeof w);
	w.m = m;
	w.fn = fn;
	w.ctx = ctx;
	if (walk(&w) != 0)
		return -1;
	return w.stop;
}

long long shmmap_validate(struct shmmap *m, char *err, size_t errlen)
{
	struct shm_errbuf e;
	shm_eb_init(&e, err, errlen);
	if (!m->base) {
		shm_eb_str(&e, "map not attached");
		return -1;
	}
	struct shmmap_header *h = shmmap_hdr(m);
	uint64_t committed = atomic_load_explicit(&h->committed, memory_order_acquire);
	uint64_t alloc_end = atomic_load_explicit(&h->alloc_end, memory_order_acquire);
	if (committed > m->map_len || alloc_end > m->map_len ||
	    alloc_end < m->root_off + (8ull << m->root_bits)) {
		shm_eb_str(&e, "header bounds out of range: committed ");
		shm_eb_u64(&e, committed);
		shm_eb_str(&e, ", allocated ");
		shm_eb_u64(&e, alloc_end);
		shm_eb_str(&e, ", maximum ");
		shm_eb_u64(&e, m->map_len);
		return -1;
	}
	if (shmmap_ensure_safe(m, alloc_end) != 0) {
		shm_eb_str(&e, "allocated bytes (");
		shm_eb_u64(&e, alloc_end);
		shm_eb_str(&e, ") exceed the file's size");
		return -1;
	}
	struct walker w;
	memset(&w, 0, sizeof w);
	w.m = m;
	w.validating = 1;
	w.e = &e;
	if (walk(&w) != 0)
		return -1;
	return w.count;
}

void shmmap_stats(struct shmmap *m, struct shmmap_stats *st)
{
	memset(st, 0, sizeof *st);
	if (!m->base)
		return;
	struct shmmap_header *h = shmmap_hdr(m);
	st->entries = atomic_load_explicit(&h->entries, memory_order_relaxed);
	st->subtries = atomic_load_explicit(&h->subtries, memory_order_relaxed);
	st->bytes_used = atomic_load_explicit(&h->alloc_end, memory_order_relaxed);
	st->bytes_committed = atomic_load_explicit(&h->committed, memory_order_relaxed);
	st->max_size = m->map_len;
	st->root_bits = m->root_bits;
	st->subtrie_bits = m->subtrie_bits;
	st->version = SHMMAP_VERSION;
}

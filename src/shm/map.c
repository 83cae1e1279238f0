/* Lookup and insert-if-absent: the hot path. No locks, no malloc, no stdio.
 *
 * A slot word is 0 (empty), an even record offset or an odd subtrie offset,
 * and only ever changes empty -> record or record -> subtrie; a record's
 * `next` only changes empty -> record; a record's value changes only by
 * shmmap_replace's CAS (readers load it once, atomically). Everything is
 * fully written before one release-CAS publishes it, so a process stopped
 * or killed at any instruction leaves at worst unreachable (leaked) bytes.
 * Every offset read from the file is bounds-checked against the bytes this
 * process knows to be backed. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "shm/layout.h"

/* Subtries nest at most this deep (128 hash bits / 2 bits per level, plus
 * slack); deeper means garbage. */
#define MAX_LEVELS 72

static inline _Atomic uint64_t *root_slots(const struct shmmap *m)
{
	return (_Atomic uint64_t *)(m->base + m->root_off);
}

/* Nothing but the root table lives below this. */
static inline uint64_t root_end(const struct shmmap *m)
{
	return m->root_off + (8ull << m->root_bits);
}

/* The subtrie `word` (odd) published in the table at `parent`, expected to
 * index from bit `start`; NULL when it is not a well-formed subtrie. */
static struct shmmap_subtrie *subtrie_at(struct shmmap *m, uint64_t word, uint64_t parent,
					 unsigned start, unsigned bits)
{
	uint64_t off = word & ~(uint64_t)1;
	if (off > SHMMAP_OFF_MASK || off <= parent || off < root_end(m) || off % 8 ||
	    off > m->map_len - shmmap_subtrie_size(bits) ||
	    shmmap_ensure_safe(m, off + shmmap_subtrie_size(bits)) != 0)
		return NULL;
	struct shmmap_subtrie *s = (struct shmmap_subtrie *)(m->base + off);
	if (__atomic_load_n(&s->tag, __ATOMIC_RELAXED) != SHMMAP_SUBTRIE_TAG ||
	    __atomic_load_n(&s->start_bit, __ATOMIC_RELAXED) != start)
		return NULL;
	return s;
}

/* The record at `off`, with its key length read exactly once into *klen;
 * NULL when it is not a well-formed record inside the backed range. */
static struct shmmap_record *record_at(struct shmmap *m, uint64_t off, uint32_t *klen)
{
	if (off < root_end(m) || off % 8 || off > m->map_len - sizeof(struct shmmap_record) ||
	    shmmap_ensure_safe(m, off + sizeof(struct shmmap_record)) != 0)
		return NULL;
	struct shmmap_record *r = (struct shmmap_record *)(m->base + off);
	uint32_t len = __atomic_load_n(&r->key_len, __ATOMIC_RELAXED);
	if (__atomic_load_n(&r->tag, __ATOMIC_RELAXED) != SHMMAP_RECORD_TAG ||
	    len > SHMMAP_MAX_KEY || shmmap_ensure_safe(m, off + shmmap_record_size(len)) != 0)
		return NULL;
	*klen = len;
	return r;
}

static inline int same_hash(const struct shmmap_record *r, struct shmmap_hash h)
{
	return __atomic_load_n(&r->hash_lo, __ATOMIC_RELAXED) == h.lo &&
	       __atomic_load_n(&r->hash_hi, __ATOMIC_RELAXED) == h.hi;
}

static inline int same_key(const struct shmmap_record *r, uint32_t klen, const void *key,
			   size_t len)
{
	return klen == len && (len == 0 || memcmp(r->key, key, len) == 0);
}

/* W_OTHER: the chain holds another hash (so not this key). */
enum walk { W_HIT, W_MISS, W_OTHER, W_CORRUPT };

/* Searches the collision chain that starts at record `off` (all records in it
 * share one 128-bit hash). On a miss, *last is the chain's last record. On a
 * hit, *rec (when rec is not NULL) is the record. */
static enum walk chain_find(struct shmmap *m, uint64_t off, struct shmmap_hash h,
			    const void *key, size_t len, uint64_t *value, uint64_t *last,
			    struct shmmap_record **rec)
{
	for (int first = 1;; first = 0) {
		uint32_t klen;
		struct shmmap_record *r = record_at(m, off, &klen);
		if (!r)
			return W_CORRUPT;
		if (!same_hash(r, h))
			return first ? W_OTHER : W_CORRUPT;
		if (same_key(r, klen, key, len)) {
			*value = __atomic_load_n(&r->value, __ATOMIC_RELAXED);
			if (rec)
				*rec = r;
			return W_HIT;
		}
		*last = off;
		uint64_t next = atomic_load_explicit(&r->next, memory_order_acquire);
		if (next == 0)
			return W_MISS;
		if (next <= off) /* chains only grow towards later allocations */
			return W_CORRUPT;
		off = next;
	}
}

/* The root bucket (8 slots, one cache line) that hash `h` selects. */
static inline _Atomic uint64_t *bucket_of(const struct shmmap *m, struct shmmap_hash h)
{
	return root_slots(m) +
	       shmmap_hash_bits(h, 0, shmmap_bucket_bits(m->root_bits)) * SHMMAP_BUCKET_SLOTS;
}

/* Lookup below a bucket's overflow slot: a plain trie walk (inlined into the
 * lookup, as when it had that one caller). */
static inline __attribute__((always_inline)) int
trie_lookup(struct shmmap *m, _Atomic uint64_t *bucket, struct shmmap_hash h, const void *key,
	    size_t len, uint64_t *value, struct shmmap_record **rec)
{
	_Atomic uint64_t *slots = bucket + SHMMAP_PROBE_SLOTS;
	uint64_t table = m->root_off;
	unsigned start = shmmap_bucket_bits(m->root_bits), bits = 0; /* slots[0]: the overflow slot */

	for (unsigned level = 0; level < MAX_LEVELS; level++) {
		uint64_t w = atomic_load_explicit(&slots[shmmap_hash_bits(h, start, bits)],
						  memory_order_acquire);
		if (w == 0)
			return 0;
		if (w & 1) {
			unsigned sub_bits = shmmap_subtrie_bits_at(m->subtrie_bits, level + 1);
			struct shmmap_subtrie *s = subtrie_at(m, w, table, start + bits, sub_bits);
			if (!s)
				return 0;
			table = w & ~(uint64_t)1;
			slots = s->slots;
			start += bits;
			bits = sub_bits;
			continue;
		}
		if (w >> SHMMAP_OFF_BITS != shmmap_tag(h))
			return 0; /* another hash's chain: miss without touching it */
		uint64_t last = 0;
		return chain_find(m, w & SHMMAP_OFF_MASK, h, key, len, value, &last, rec) == W_HIT;
	}
	return 0;
}

/* shmmap_lookup, and the record of the key when rec is not NULL (inlined
 * into both: the lookup's copy, in the preload library's hot text, has rec
 * NULL). */
static inline __attribute__((always_inline)) int
find(struct shmmap *m, const void *key, size_t len, uint64_t *value, struct shmmap_record **rec)
{
	if (len > SHMMAP_MAX_KEY || !m->base)
		return 0;
	struct shmmap_hash h = shmmap_hash_key(m, key, len);
	_Atomic uint64_t *bucket = bucket_of(m, h);
	uint64_t tag = shmmap_tag(h);

	/* Probe slots fill in order: the first empty one ends the search. (A
	 * branch-free scan of all 7 slots measured slower: 12 ns per lookup more
	 * when the bucket is in L1.) */
	for (unsigned i = 0; i < SHMMAP_PROBE_SLOTS; i++) {
		uint64_t w = atomic_load_explicit(&bucket[i], memory_order_acquire);
		if (w == 0 || (w & 1)) /* odd: garbage, probe slots hold records only */
			return 0;
		if (w >> SHMMAP_OFF_BITS != tag)
			continue; /* another hash: skip it without touching its record */
		uint64_t last = 0;
		switch (chain_find(m, w & SHMMAP_OFF_MASK, h, key, len, value, &last, rec)) {
		case W_HIT:
			return 1;
		case W_OTHER:
			continue; /* same tag, another hash */
		default:
			return 0; /* every key of this hash is in this chain */
		}
	}
	return trie_lookup(m, bucket, h, key, len, value, rec);
}

int shmmap_lookup(struct shmmap *m, const void *key, size_t len, uint64_t *value)
{
	return find(m, key, len, value, NULL);
}

int shmmap_replace(struct shmmap *m, const void *key, size_t len, uint64_t expected,
		   uint64_t value)
{
	uint64_t v;
	struct shmmap_record *r = NULL;
	if (!m->writable || !find(m, key, len, &v, &r))
		return 0;
	return __atomic_compare_exchange_n(&r->value, &expected, value, 0, __ATOMIC_RELEASE,
					   __ATOMIC_RELAXED);
}

/* Makes the file back [0, end): grows it monotonically with fallocate (never
 * ftruncate, which could shrink it under a racing grower) and publishes the
 * new size with a CAS-max. */
static int grow_to(struct shmmap *m, uint64_t end)
{
	if (end <= __atomic_load_n(&m->safe_size, __ATOMIC_RELAXED))
		return 0;
	struct shmmap_header *hdr = shmmap_hdr(m);
	uint64_t committed = atomic_load_explicit(&hdr->committed, memory_order_acquire);
	if (end > committed || shmmap_ensure_safe(m, end) != 0) {
		uint64_t target = (end + SHMMAP_GROW_UNIT - 1) / SHMMAP_GROW_UNIT * SHMMAP_GROW_UNIT;
		uint64_t base = committed <= m->map_len ? committed : m->map_len;
		uint64_t step = base < SHMMAP_GROW_UNIT ? SHMMAP_GROW_UNIT : base;
		if (step > SHMMAP_GROW_MAX_STEP)
			step = SHMMAP_GROW_MAX_STEP;
		uint64_t want = base + step;
		want = (want + SHMMAP_GROW_UNIT - 1) / SHMMAP_GROW_UNIT * SHMMAP_GROW_UNIT;
		if (want < target)
			want = target;
		if (want > m->map_len)
			want = m->map_len;
		if (target > m->map_len)
			return -1;
		int saved = errno;
		/* From offset 0: a hole anywhere below would be written through the
		 * mapping later and could SIGBUS on a full disk. */
		int rc = fallocate(m->fd, 0, 0, (off_t)want);
		if (rc != 0 && want > target) {
			want = target;
			rc = fallocate(m->fd, 0, 0, (off_t)want);
		}
		errno = saved;
		if (rc != 0)
			return -1;
		uint64_t cur = atomic_load_explicit(&hdr->committed, memory_order_relaxed);
		while (cur < want &&
		       !atomic_compare_exchange_weak_explicit(&hdr->committed, &cur, want,
							      memory_order_release,
							      memory_order_relaxed))
			;
	}
	return shmmap_ensure_safe(m, end);
}

/* Bump-allocates `size` bytes (a multiple of 8) in backed space; 0 = full. */
static uint64_t alloc(struct shmmap *m, uint64_t size)
{
	struct shmmap_header *hdr = shmmap_hdr(m);
	uint64_t old = atomic_load_explicit(&hdr->alloc_end, memory_order_relaxed);
	for (;;) {
		if (old < root_end(m) || old % 8 || old > m->map_len || size > m->map_len - old)
			return 0;
		if (grow_to(m, old + size) != 0)
			return 0;
		if (atomic_compare_exchange_weak_explicit(&hdr->alloc_end, &old, old + size,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return old;
	}
}

static uint64_t new_record(struct shmmap *m, struct shmmap_hash h, const void *key,
			   size_t len, uint64_t value)
{
	uint64_t off = alloc(m, shmmap_record_size(len));
	if (!off)
		return 0;
	struct shmmap_record *r = (struct shmmap_record *)(m->base + off);
	r->hash_lo = h.lo;
	r->hash_hi = h.hi;
	r->value = value;
	atomic_store_explicit(&r->next, 0, memory_order_relaxed);
	r->key_len = (uint32_t)len;
	r->tag = SHMMAP_RECORD_TAG;
	if (len) /* key may be NULL when empty */
		memcpy(r->key, key, len);
	return off;
}

/* A subtrie indexing from bit `start`, holding the existing chain `head`
 * (whose hash is `hh`) in its slot; 0 = full. */
static uint64_t new_subtrie(struct shmmap *m, uint64_t parent, unsigned start, unsigned bits,
			    uint64_t head, struct shmmap_hash hh)
{
	uint64_t off = alloc(m, shmmap_subtrie_size(bits));
	if (!off)
		return 0;
	struct shmmap_subtrie *s = (struct shmmap_subtrie *)(m->base + off);
	s->tag = SHMMAP_SUBTRIE_TAG;
	s->start_bit = start;
	s->parent = parent;
	for (uint64_t i = 0; i < (1ull << bits); i++)
		atomic_store_explicit(&s->slots[i], 0, memory_order_relaxed);
	atomic_store_explicit(&s->slots[shmmap_hash_bits(hh, start, bits)], head,
			      memory_order_relaxed);
	return off;
}

static void counted(struct shmmap *m, _Atomic uint64_t *counter)
{
	(void)m;
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* Insert into the chain of records of hash `h` headed by `head_off`: EXISTS
 * with the stored value, or INSERTED by a release-CAS of the last record's
 * `next`; -1 when that CAS lost (the chain grew: search it again). */
static int chain_insert(struct shmmap *m, uint64_t head_off, struct shmmap_hash h,
			const void *key, size_t len, uint64_t value, uint64_t *mine,
			uint64_t *winner)
{
	uint64_t found, last = 0;
	enum walk r = chain_find(m, head_off, h, key, len, &found, &last, NULL);
	if (r == W_CORRUPT || r == W_OTHER)
		return SHMMAP_CORRUPT;
	if (r == W_HIT) {
		if (winner)
			*winner = found;
		return SHMMAP_EXISTS;
	}
	if (!*mine && !(*mine = new_record(m, h, key, len, value)))
		return SHMMAP_FULL;
	struct shmmap_record *tail = (struct shmmap_record *)(m->base + last);
	uint64_t expect = 0;
	if (*mine <= last)
		return SHMMAP_CORRUPT; /* cannot happen: allocation is monotonic */
	if (atomic_compare_exchange_strong_explicit(&tail->next, &expect, *mine,
						    memory_order_release, memory_order_acquire)) {
		counted(m, &shmmap_hdr(m)->entries);
		if (winner)
			*winner = value;
		return SHMMAP_INSERTED;
	}
	return -1;
}

/* Publishes our record (allocated on first need) into the empty `slot` with
 * one release-CAS: INSERTED, FULL, or -1 when another writer filled it first
 * (*w then holds what they put there). */
static int publish_record(struct shmmap *m, _Atomic uint64_t *slot, uint64_t *w,
			  struct shmmap_hash h, const void *key, size_t len, uint64_t value,
			  uint64_t *mine, uint64_t *winner)
{
	if (!*mine && !(*mine = new_record(m, h, key, len, value)))
		return SHMMAP_FULL;
	if (atomic_compare_exchange_strong_explicit(slot, w, shmmap_record_word(*mine, h),
						    memory_order_release, memory_order_acquire)) {
		counted(m, &shmmap_hdr(m)->entries);
		if (winner)
			*winner = value;
		return SHMMAP_INSERTED;
	}
	return -1;
}

/* Insert below a bucket's overflow slot: a plain trie. */
static enum shmmap_status trie_insert(struct shmmap *m, _Atomic uint64_t *bucket,
				      struct shmmap_hash h, const void *key, size_t len,
				      uint64_t value, uint64_t *mine, uint64_t *winner)
{
	struct shmmap_header *hdr = shmmap_hdr(m);
	_Atomic uint64_t *slots = bucket + SHMMAP_PROBE_SLOTS;
	uint64_t table = m->root_off;
	unsigned start = shmmap_bucket_bits(m->root_bits), bits = 0; /* slots[0]: the overflow slot */
	unsigned level = 0; /* 0: the overflow slot; n: a subtrie n levels below it */

	for (;;) {
		if (level >= MAX_LEVELS)
			return SHMMAP_CORRUPT;
		_Atomic uint64_t *slot = &slots[shmmap_hash_bits(h, start, bits)];
		uint64_t w = atomic_load_explicit(slot, memory_order_acquire);

		if (w == 0) {
			int r = publish_record(m, slot, &w, h, key, len, value, mine, winner);
			if (r >= 0)
				return (enum shmmap_status)r;
			continue; /* someone filled the slot: look at what they put */
		}

		if (w & 1) {
			unsigned sub_bits = shmmap_subtrie_bits_at(m->subtrie_bits, level + 1);
			struct shmmap_subtrie *s = subtrie_at(m, w, table, start + bits, sub_bits);
			if (!s)
				return SHMMAP_CORRUPT;
			table = w & ~(uint64_t)1;
			slots = s->slots;
			start += bits;
			bits = sub_bits;
			level++;
			continue;
		}

		uint32_t klen;
		uint64_t head_off = w & SHMMAP_OFF_MASK;
		struct shmmap_record *head = record_at(m, head_off, &klen);
		if (!head)
			return SHMMAP_CORRUPT;
		struct shmmap_hash hh = { head->hash_lo, head->hash_hi };
		if (w >> SHMMAP_OFF_BITS != shmmap_tag(hh))
			return SHMMAP_CORRUPT;
		if (same_hash(head, h)) {
			/* Same 128-bit hash: the key is in this chain or goes at its end. */
			int r = chain_insert(m, head_off, h, key, len, value, mine, winner);
			if (r >= 0)
				return (enum shmmap_status)r;
			continue;
		}

		/* A different key's chain holds our slot: push it one level down into
		 * a new subtrie, publish that, and retry there. */
		uint64_t sub = new_subtrie(m, table, start + bits,
					   shmmap_subtrie_bits_at(m->subtrie_bits, level + 1), w, hh);
		if (!sub)
			return SHMMAP_FULL;
		if (atomic_compare_exchange_strong_explicit(slot, &w, sub | 1,
							    memory_order_release,
							    memory_order_acquire))
			counted(m, &hdr->subtries);
		/* On failure the unpublished subtrie is leaked; the loop re-reads. */
	}
}

enum shmmap_status shmmap_insert(struct shmmap *m, const void *key, size_t len,
				 uint64_t value, uint64_t *winner)
{
	if (len > SHMMAP_MAX_KEY || !m->base || !m->writable)
		return SHMMAP_INVALID;
	struct shmmap_hash h = shmmap_hash_key(m, key, len);
	_Atomic uint64_t *bucket = bucket_of(m, h);
	uint64_t tag = shmmap_tag(h);
	uint64_t mine = 0; /* our record, allocated once, when first needed */

	/* Probe slots fill in order, each only empty -> record: the key is in the
	 * first chain of its hash, or goes into the first empty slot when no
	 * probe slot holds its hash. */
	for (unsigned i = 0; i < SHMMAP_PROBE_SLOTS;) {
		uint64_t w = atomic_load_explicit(&bucket[i], memory_order_acquire);
		if (w == 0) {
			int r = publish_record(m, &bucket[i], &w, h, key, len, value, &mine, winner);
			if (r >= 0)
				return (enum shmmap_status)r;
			continue; /* someone filled this slot: look at what they put */
		}
		if (w & 1)
			return SHMMAP_CORRUPT;
		if (w >> SHMMAP_OFF_BITS != tag) {
			i++; /* another hash */
			continue;
		}
		uint32_t klen;
		uint64_t head_off = w & SHMMAP_OFF_MASK;
		struct shmmap_record *head = record_at(m, head_off, &klen);
		if (!head)
			return SHMMAP_CORRUPT;
		if (!same_hash(head, h)) {
			i++; /* same tag, another hash */
			continue;
		}
		int r = chain_insert(m, head_off, h, key, len, value, &mine, winner);
		if (r >= 0)
			return (enum shmmap_status)r;
	}
	return trie_insert(m, bucket, h, key, len, value, &mine, winner);
}

const char *shmmap_status_name(enum shmmap_status s)
{
	switch (s) {
	case SHMMAP_INSERTED: return "inserted";
	case SHMMAP_EXISTS: return "exists";
	case SHMMAP_FULL: return "full";
	case SHMMAP_INVALID: return "invalid";
	case SHMMAP_CORRUPT: return "corrupt";
	}
	return "unknown";
}

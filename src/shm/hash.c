/* MurmurHash3 x64-128 (Austin Appleby's public-domain design, written out
 * here): fast on short path-like keys and well mixed in every output bit,
 * which the trie relies on since it indexes by raw hash bits. */
#include <string.h>

#include "shm/layout.h"

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

struct shmmap_hash shmmap_hash_default(const void *key, size_t len, uint64_t seed)
{
	const uint64_t c1 = 0x87c37b91114253d5ull, c2 = 0x4cf5ad432745937full;
	const unsigned char *p = key;
	uint64_t h1 = seed, h2 = seed;
	size_t nblocks = len / 16;

	for (size_t i = 0; i < nblocks; i++, p += 16) {
		uint64_t k1 = load64(p), k2 = load64(p + 8);
		k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
		h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
		k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
		h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
	}

	size_t rest = len & 15;
	if (rest) {
		unsigned char tail[16] = { 0 };
		memcpy(tail, p, rest);
		uint64_t k1 = load64(tail), k2 = load64(tail + 8);
		if (rest > 8) {
			k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
		}
		k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
	}

	h1 ^= len;
	h2 ^= len;
	h1 += h2;
	h2 += h1;
	h1 = fmix64(h1);
	h2 = fmix64(h2);
	h1 += h2;
	h2 += h1;
	return (struct shmmap_hash){ .lo = h1, .hi = h2 };
}

struct shmmap_hash shmmap_hash_key(const struct shmmap *m, const void *key, size_t len)
{
	if (__builtin_expect(m->hash != NULL, 0))
		return m->hash(key, len, m->seed);
	return shmmap_hash_default(key, len, m->seed);
}

void shmmap_test_set_hash(struct shmmap *m, shmmap_hash_fn *fn)
{
	m->hash = fn;
}

/* On-file layout of the shared-memory map (internal; documented in docs/shm.md).
 * Every reference inside the file is a 64-bit offset from the file's start. */
#ifndef KILN_SHM_LAYOUT_H
#define KILN_SHM_LAYOUT_H

#include <stdatomic.h>
#include <stdint.h>

#include "shm/shmmap.h"

#define SHMMAP_MAGIC "KILNSHM\0"
#define SHMMAP_VERSION 2u
#define SHMMAP_HEADER_SIZE 4096u
/* The file grows in multiples of this (a multiple of every page size). */
#define SHMMAP_GROW_UNIT (64u * 1024u)
/* One growth step never adds more than this. */
#define SHMMAP_GROW_MAX_STEP (64ull * 1024 * 1024)

#define SHMMAP_ROOT_BITS_MIN 4u
#define SHMMAP_ROOT_BITS_MAX 20u
#define SHMMAP_SUBTRIE_BITS_MIN 2u
#define SHMMAP_SUBTRIE_BITS_MAX 12u

#define SHMMAP_RECORD_TAG 0x4b524543u  /* "CERK" little-endian: a record */
#define SHMMAP_SUBTRIE_TAG 0x4b425553u /* "SUBK" little-endian: a subtrie */

/* Offset 0. Read-mostly fields first; each counter writers hammer gets its own
 * cache line. */
struct shmmap_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint64_t max_size;
	uint64_t root_off;
	uint32_t root_bits;
	uint32_t subtrie_bits;
	uint64_t seed;
	uint64_t max_key;
	uint64_t tag;               /* the creator's (shmmap_params.tag); 0: none */
	_Atomic uint64_t committed; /* @64: file size published with CAS-max */
	uint64_t pad1[7];
	_Atomic uint64_t alloc_end; /* @128: bump allocator */
	uint64_t pad2[7];
	_Atomic uint64_t entries;   /* @192 */
	_Atomic uint64_t subtries;
};

/* A subtrie: header, then 2^subtrie_bits slots. */
struct shmmap_subtrie {
	uint32_t tag;
	uint32_t start_bit; /* first hash bit this subtrie's index uses */
	uint64_t parent;    /* offset of the table it was published into (for checks) */
	_Atomic uint64_t slots[];
};

/* A record: written in full before its offset is published, never changed
 * after, except `next` (empty -> record) when another key has the same
 * 128-bit hash. */
struct shmmap_record {
	uint64_t hash_lo, hash_hi;
	uint64_t value;
	_Atomic uint64_t next;
	uint32_t key_len;
	uint32_t tag;
	unsigned char key[];
};

_Static_assert(sizeof(struct shmmap_header) <= SHMMAP_HEADER_SIZE, "header fits");
_Static_assert(__builtin_offsetof(struct shmmap_header, committed) == 64, "layout");
_Static_assert(__builtin_offsetof(struct shmmap_header, alloc_end) == 128, "layout");
_Static_assert(__builtin_offsetof(struct shmmap_header, entries) == 192, "layout");
_Static_assert(sizeof(struct shmmap_record) == 40, "layout");
_Static_assert(sizeof(struct shmmap_subtrie) == 16, "layout");

static inline uint64_t shmmap_align8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static inline uint64_t shmmap_record_size(uint64_t key_len)
{
	return shmmap_align8(sizeof(struct shmmap_record) + key_len);
}

static inline uint64_t shmmap_subtrie_size(unsigned bits)
{
	return sizeof(struct shmmap_subtrie) + (8ull << bits);
}

/* `n` bits of the 128-bit hash (lo is bits 0-63, hi bits 64-127) starting at
 * bit `start`; bits past 128 read as zero, so two different hashes always
 * part ways at some level before the index runs out of bits. */
static inline uint64_t shmmap_hash_bits(struct shmmap_hash h, unsigned start, unsigned n)
{
	if (start >= 128)
		return 0;
	unsigned __int128 v = ((unsigned __int128)h.hi << 64) | h.lo;
	return (uint64_t)(v >> start) & ((1ull << n) - 1);
}

/* The root table is cut into buckets of one 64-byte cache line (8 slots),
 * chosen by the low root_bits - 3 bits of the hash. Slots 0..6 of a bucket
 * ("probe slots") hold records only and fill in order; slot 7 (the
 * "overflow slot") is a trie slot: empty, a record, or a subtrie indexing
 * from bit root_bits - 3. A key goes there only when all 7 probe slots hold
 * other hashes, so most hits read one root line and then their record. */
#define SHMMAP_BUCKET_SLOTS 8u
#define SHMMAP_PROBE_SLOTS 7u

static inline unsigned shmmap_bucket_bits(unsigned root_bits)
{
	return root_bits - 3;
}

/* Index bits of a subtrie at `depth` (1 = right below an overflow slot).
 * Depth-1 subtries get 2 more (at most SHMMAP_SUBTRIE_BITS_MAX): an overflow
 * slot stands for a whole bucket's excess keys, not one slot's. */
static inline unsigned shmmap_subtrie_bits_at(unsigned subtrie_bits, unsigned depth)
{
	if (depth == 1)
		return subtrie_bits + 2 > SHMMAP_SUBTRIE_BITS_MAX ? SHMMAP_SUBTRIE_BITS_MAX
								  : subtrie_bits + 2;
	return subtrie_bits;
}

/* Slot words. Offsets are below SHMMAP_MAX_SIZE_LIMIT (2^40), so a record's
 * slot word also carries 24 bits of its hash (the tag): a lookup whose hash
 * has another tag misses without touching the record. A subtrie word is its
 * offset | 1 with the tag bits zero. Chain `next` words are plain offsets. */
#define SHMMAP_OFF_BITS 40
#define SHMMAP_OFF_MASK ((1ull << SHMMAP_OFF_BITS) - 1)

static inline uint64_t shmmap_tag(struct shmmap_hash h)
{
	return h.hi >> SHMMAP_OFF_BITS;
}

static inline uint64_t shmmap_record_word(uint64_t off, struct shmmap_hash h)
{
	return off | shmmap_tag(h) << SHMMAP_OFF_BITS;
}

/* Internal helpers shared by the shm sources. */
struct shmmap_header *shmmap_hdr(const struct shmmap *m);
/* Makes sure [0, end) is backed and mapped for this process; returns 0 or -1. */
int shmmap_ensure_safe(struct shmmap *m, uint64_t end);
struct shmmap_hash shmmap_hash_key(const struct shmmap *m, const void *key, size_t len);

#endif

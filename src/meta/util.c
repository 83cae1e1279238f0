/* Containers, messages and lookups shared by the model's builder and tools. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "meta/build.h"

int meta_grow(void **arr, size_t *cap, size_t n, size_t es)
{
	if (n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 64;
	while (nc < n)
		nc *= 2;
	void *p = realloc(*arr, nc * es);
	if (!p)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}

static size_t slot_of(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return key & (cap - 1);
}

static int map_rehash(struct meta_u64map *map, size_t ncap)
{
	uint64_t *keys = calloc(ncap, sizeof *keys);
	uint32_t *vals = malloc(ncap * sizeof *vals);
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t i = 0; i < map->cap; i++) {
		if (!map->keys[i])
			continue;
		size_t s = slot_of(map->keys[i], ncap);
		while (keys[s])
			s = (s + 1) & (ncap - 1);
		keys[s] = map->keys[i];
		vals[s] = map->vals[i];
	}
	free(map->keys);
	free(map->vals);
	map->keys = keys;
	map->vals = vals;
	map->cap = ncap;
	return 0;
}

int meta_u64map_put(struct meta_u64map *map, uint64_t key, uint32_t val)
{
	if ((map->len + 1) * 2 > map->cap && map_rehash(map, map->cap ? map->cap * 2 : 1024))
		return -1;
	uint64_t k = key + 1;
	size_t s = slot_of(k, map->cap);
	while (map->keys[s] && map->keys[s] != k)
		s = (s + 1) & (map->cap - 1);
	if (!map->keys[s])
		map->len++;
	map->keys[s] = k;
	map->vals[s] = val;
	return 0;
}

uint32_t meta_u64map_get(const struct meta_u64map *map, uint64_t key)
{
	if (!map->cap)
		return META_NONE;
	uint64_t k = key + 1;
	size_t s = slot_of(k, map->cap);
	while (map->keys[s]) {
		if (map->keys[s] == k)
			return map->vals[s];
		s = (s + 1) & (map->cap - 1);
	}
	return META_NONE;
}

void meta_u64map_free(struct meta_u64map *map)
{
	free(map->keys);
	free(map->vals);
	memset(map, 0, sizeof *map);
}

void meta_set_err(struct meta_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
}

void meta_warn(struct meta_model *m, const char *fmt, ...)
{
	pthread_mutex_lock(&m->warn_lock); /* tools may run concurrently */
	if (m->nwarnings++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m->first_warning, sizeof m->first_warning, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&m->warn_lock);
}

void meta_err_warn(struct meta_err *err, const char *fmt, ...)
{
	if (err->nwarnings++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->first_warning, sizeof err->first_warning, fmt, ap);
		va_end(ap);
	}
}

const char *meta_kind_name(enum meta_kind k)
{
	static const char *const names[META_KIND_COUNT] = {
		[META_BASE] = "base", [META_POINTER] = "pointer",
		[META_STRUCT] = "struct", [META_UNION] = "union",
		[META_CLASS] = "class", [META_ENUM] = "enum",
		[META_ARRAY] = "array", [META_TYPEDEF] = "typedef",
		[META_FUNCTION] = "function", [META_CONST] = "const",
		[META_VOLATILE] = "volatile", [META_RESTRICT] = "restrict",
		[META_ATOMIC] = "atomic", [META_REFERENCE] = "reference",
		[META_RVALUE_REFERENCE] = "rvalue_reference",
		[META_PTR_TO_MEMBER] = "ptr_to_member",
		[META_UNSPECIFIED] = "unspecified",
	};
	return (unsigned)k < META_KIND_COUNT ? names[k] : "?";
}

long meta_symbol_at_or_below(const struct meta_model *m, uint64_t addr)
{
	long lo = 0, hi = (long)m->nsymbols - 1, best = -1;
	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		if (m->symbols[mid].addr <= addr) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

long meta_symbol_at(const struct meta_model *m, uint64_t addr)
{
	/* Look back a little: aliases and zero-sized labels sit at the same or
	 * nearby addresses as the function that covers ADDR. */
	long i = meta_symbol_at_or_below(m, addr);
	for (int steps = 0; i >= 0 && steps < 64; i--, steps++) {
		const struct meta_symbol *s = &m->symbols[i];
		if ((s->type == STT_FUNC || s->type == STT_GNU_IFUNC) && addr < s->addr + s->size)
			return i;
	}
	return -1;
}

int meta_symbol_has_addr(const struct meta_model *m, uint64_t addr)
{
	for (long i = meta_symbol_at_or_below(m, addr); i >= 0 && m->symbols[i].addr == addr; i--) {
		uint8_t t = m->symbols[i].type;
		if (t == STT_FUNC || t == STT_OBJECT || t == STT_NOTYPE || t == STT_GNU_IFUNC)
			return 1;
	}
	return 0;
}

static int live(const struct meta_model *m, uint64_t lo, uint64_t hi, int exec)
{
	if (!m->nsegments)
		return 1;
	if (lo == 0 || lo >= UINT64_MAX - 1 || hi <= lo)
		return 0;
	for (size_t i = 0; i < m->nsegments; i++) {
		const struct meta_segment *g = &m->segments[i];
		if (lo >= g->lo && hi <= g->hi && (g->exec || !exec))
			return 1;
	}
	return 0;
}

int meta_code_is_live(const struct meta_model *m, uint64_t lo, uint64_t hi)
{
	return live(m, lo, hi, 1);
}

int meta_data_is_live(const struct meta_model *m, uint64_t addr)
{
	return addr < UINT64_MAX && live(m, addr, addr + 1, 0);
}

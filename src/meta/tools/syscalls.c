/* `syscalls`: addresses of `syscall` instructions in executable sections,
 * (and int $0x80, sysenter) with the enclosing function.
 *
 * Candidates are found by searching for the opcode bytes (0f 05), then
 * confirmed by disassembling (capstone) from the nearest preceding symbol, the
 * same synchronisation points a linear-sweep disassembler like objdump uses,
 * so bytes 0f 05 inside another instruction are not reported. */
#include <capstone/capstone.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "meta/tools/tool.h"

/* Capstone, loaded on the first use of this tool: its relocations cost every
 * kiln process (a forwarded `kiln meta` client above all) some 0.9 ms and
 * 370 page faults at startup, and only this tool disassembles. The name is
 * the soname of the ABI the header describes. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define CAPSTONE_SONAME "libcapstone.so." STR(CS_API_MAJOR)

static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_insn *(*malloc)(csh);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	void (*free)(cs_insn *, size_t);
	cs_err (*close)(csh *);
} cs;
static char cs_error[256]; /* why it could not be loaded; "" when it was */
static pthread_once_t cs_once = PTHREAD_ONCE_INIT;

static void load_capstone(void)
{
	void *h = dlopen(CAPSTONE_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		*(void **)&cs.open = dlsym(h, "cs_open");
		*(void **)&cs.malloc = dlsym(h, "cs_malloc");
		*(void **)&cs.disasm_iter = dlsym(h, "cs_disasm_iter");
		*(void **)&cs.free = dlsym(h, "cs_free");
		*(void **)&cs.close = dlsym(h, "cs_close");
	}
	if (!h || !cs.open || !cs.malloc || !cs.disasm_iter || !cs.free || !cs.close)
		snprintf(cs_error, sizeof cs_error, "%s", h ? "a function is missing" : dlerror());
}

/* The instructions that enter the kernel, by their encoding. */
static const struct entry {
	const char *bytes, *name;
	unsigned int id;
} entries[] = {
	{ "\x0f\x05", "syscall", X86_INS_SYSCALL },
	{ "\xcd\x80", "int80", X86_INS_INT },   /* int $0x80: the 32-bit ABI */
	{ "\x0f\x34", "sysenter", X86_INS_SYSENTER },
};

struct site {
	uint64_t addr;
	const char *function;
	uint64_t offset;
	const char *insn;
};

static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Index of the last symbol at or below ADDR inside section S, or -1. */
static long preceding_symbol(const struct meta_model *m, const struct meta_section *s, uint64_t addr)
{
	long best = meta_symbol_at_or_below(m, addr);
	return best >= 0 && m->symbols[best].addr >= s->addr ? best : -1;
}

/* Start of the disassembly run that covers ADDR in section S. */
static uint64_t sync_point(const struct meta_model *m, const struct meta_section *s, uint64_t addr)
{
	long i = preceding_symbol(m, s, addr);
	return i >= 0 ? m->symbols[i].addr : s->addr;
}

/* Data in a code section (e.g. precomputed tables in hand-written assembly):
 * the nearest preceding symbol is an object and no function starts there. */
static int in_data(const struct meta_model *m, const struct meta_section *s, uint64_t addr)
{
	long i = preceding_symbol(m, s, addr);
	if (i < 0)
		return 0;
	int object = 0;
	for (uint64_t at = m->symbols[i].addr; i >= 0 && m->symbols[i].addr == at; i--) {
		if (m->symbols[i].type == STT_FUNC || m->symbols[i].type == STT_GNU_IFUNC)
			return 0;
		object |= m->symbols[i].type == STT_OBJECT;
	}
	return object;
}

/* The function covering ADDR: a sized FUNC symbol, else a DWARF function,
 * else (hand-written code such as __restore_rt) the nearest preceding label. */
static const char *function_at(const struct meta_model *m, const struct meta_section *s,
			       uint64_t addr, uint64_t *start)
{
	long si = meta_symbol_at(m, addr);
	if (si >= 0) {
		*start = m->symbols[si].addr;
		return m->symbols[si].name;
	}
	for (size_t i = 0; i < m->nfunctions; i++) {
		const struct meta_function *f = &m->functions[i];
		for (uint32_t r = 0; r < f->range_count; r++) {
			const struct meta_range *rg = &m->ranges[f->range_first + r];
			if (addr >= rg->lo && addr < rg->hi) {
				*start = f->low;
				return f->name;
			}
		}
	}
	long i = preceding_symbol(m, s, addr);
	if (i >= 0) {
		*start = m->symbols[i].addr;
		return m->symbols[i].name;
	}
	*start = addr;
	return NULL;
}

struct candidate {
	uint64_t addr;
	const struct entry *e;
};

/* The entry whose encoding starts at P (P[1] readable), or NULL. */
static const struct entry *entry_at(const unsigned char *p)
{
	for (size_t k = 0; k < sizeof entries / sizeof entries[0]; k++)
		if (p[0] == (unsigned char)entries[k].bytes[0] && p[1] == (unsigned char)entries[k].bytes[1])
			return &entries[k];
	return NULL;
}

/* Candidates of every entry in [DATA, DATA + SIZE), in address order: one
 * pass, 16 bytes at a time where SSE2 is there (every x86-64), looking for
 * a first byte 0f or cd followed by 05, 34 or 80. */
static int find_candidates(const unsigned char *data, size_t size, uint64_t addr, struct candidate **v,
			   size_t *n, size_t *cap)
{
	size_t i = 0;
#ifdef __SSE2__
	const __m128i b0f = _mm_set1_epi8(0x0f), bcd = _mm_set1_epi8((char)0xcd);
	const __m128i b05 = _mm_set1_epi8(0x05), b34 = _mm_set1_epi8(0x34), b80 = _mm_set1_epi8((char)0x80);
	for (; i + 17 <= size; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(data + i));
		__m128i y = _mm_loadu_si128((const __m128i *)(data + i + 1));
		__m128i first = _mm_or_si128(_mm_cmpeq_epi8(x, b0f), _mm_cmpeq_epi8(x, bcd));
		__m128i second = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(y, b05), _mm_cmpeq_epi8(y, b34)),
					      _mm_cmpeq_epi8(y, b80));
		unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(first, second));
		while (mask) {
			size_t at = i + (size_t)__builtin_ctz(mask);
			mask &= mask - 1;
			const struct entry *e = entry_at(data + at);
			struct candidate c = { addr + at, e };
			if (e && META_PUSH(*v, *n, *cap, c))
				return -1;
		}
	}
#endif
	for (; i + 1 < size; i++) {
		const struct entry *e = entry_at(data + i);
		struct candidate c = { addr + i, e };
		if (e && META_PUSH(*v, *n, *cap, c))
			return -1;
	}
	return 0;
}

/* Scans section S: candidates of every entry, in address order, then one
 * disassembly sweep that confirms them. Appends confirmed sites to *v. */
static int scan_section(const struct meta_model *m, const struct meta_section *s, csh handle, cs_insn *insn,
			struct site **v, size_t *n, size_t *cap)
{
	const unsigned char *end = s->data + s->size;
	struct candidate *cands = NULL;
	size_t ncands = 0, capc = 0;
	if (find_candidates(s->data, s->size, s->addr, &cands, &ncands, &capc)) {
		free(cands);
		return -1;
	}
	uint64_t decoded_to = 0, run_start = UINT64_MAX; /* decoding state for the current run */
	int rc = 0;
	for (size_t i = 0; i < ncands && !rc; i++) {
		uint64_t addr = cands[i].addr;
		const struct entry *e = cands[i].e;
		if (in_data(m, s, addr))
			continue;
		uint64_t from = sync_point(m, s, addr);
		if (from != run_start) {
			run_start = from;
			decoded_to = from;
		}
		/* Decode forward from where this run stopped until ADDR. */
		const uint8_t *code = s->data + (decoded_to - s->addr);
		size_t size = (size_t)(end - code);
		uint64_t pc = decoded_to;
		while (pc < addr) {
			if (!cs.disasm_iter(handle, &code, &size, &pc, insn)) {
				code++; /* undecodable byte: step over it, as objdump does */
				size--;
				pc++;
			}
		}
		decoded_to = pc;
		if (pc != addr)
			continue; /* inside another instruction */
		const uint8_t *c2 = code;
		size_t s2 = size;
		uint64_t pc2 = pc;
		if (!cs.disasm_iter(handle, &c2, &s2, &pc2, insn) || insn->id != e->id || insn->size != 2)
			continue;
		uint64_t fstart;
		struct site site = { addr, function_at(m, s, addr, &fstart), 0, e->name };
		site.offset = addr - fstart;
		rc = META_PUSH(*v, *n, *cap, site);
	}
	free(cands);
	return rc;
}

int meta_tool_syscalls(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err)
{
	if (m->machine != EM_X86_64) {
		meta_set_err(err, "%s: syscalls: only x86-64 binaries are supported (e_machine %u)", m->path,
			     m->machine);
		return -1;
	}
	pthread_once(&cs_once, load_capstone);
	if (cs_error[0]) {
		meta_set_err(err, "%s: syscalls: cannot load the disassembler %s: %s", m->path, CAPSTONE_SONAME,
			     cs_error);
		return -1;
	}
	csh handle;
	if (cs.open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) {
		meta_set_err(err, "%s: syscalls: cannot start the disassembler", m->path);
		return -1;
	}
	cs_insn *insn = cs.malloc(handle);
	struct site *v = NULL;
	size_t n = 0, cap = 0;
	int rc = insn ? 0 : -1;
	for (size_t i = 0; i < m->nsections && !rc; i++)
		if (m->sections[i].exec && m->sections[i].data)
			rc = scan_section(m, &m->sections[i], handle, insn, &v, &n, &cap);
	if (n)
		qsort(v, n, sizeof *v, cmp_site); /* sections need not be in address order */
	if (insn)
		cs.free(insn, 1);
	cs.close(&handle);
	if (rc) {
		free(v);
		meta_set_err(err, "%s: out of memory", m->path);
		return -1;
	}
	switch (fmt) {
	case META_FMT_TEXT:
		fprintf(out, "# kiln meta syscalls %s: %zu system call instructions\n", m->path, n);
		for (size_t i = 0; i < n; i++)
			fprintf(out, "0x%016" PRIx64 " %s+0x%" PRIx64 " %s\n", v[i].addr,
				v[i].function ? v[i].function : "?", v[i].offset, v[i].insn);
		break;
	case META_FMT_JSON:
		fputs("{\"tool\":\"syscalls\",\"binary\":", out);
		meta_put_json_str(out, m->path);
		fputs(",\"syscalls\":[\n", out);
		for (size_t i = 0; i < n; i++) {
			fprintf(out, "{\"addr\":%" PRIu64 ",\"function\":", v[i].addr);
			meta_put_json_str(out, v[i].function);
			fprintf(out, ",\"offset\":%" PRIu64 ",\"insn\":\"%s\"}%s\n", v[i].offset, v[i].insn,
				i + 1 < n ? "," : "");
		}
		fputs("]}\n", out);
		break;
	case META_FMT_C:
		fputs("/* kiln meta syscalls: generated; layout in docs/meta-formats.md */\n"
		      "#include <stdint.h>\n\n"
		      "struct kiln_meta_syscall {\n\tuint64_t addr;\n\tconst char *function;\n\tuint64_t offset;\n"
		      "\tconst char *insn; /* \"syscall\", \"int80\" or \"sysenter\" */\n};\n\n"
		      "const struct kiln_meta_syscall kiln_meta_syscalls[] = {\n", out);
		for (size_t i = 0; i < n; i++) {
			fprintf(out, "\t{ 0x%" PRIx64 "u, ", v[i].addr);
			meta_put_c_str(out, v[i].function);
			fprintf(out, ", %" PRIu64 "u, \"%s\" },\n", v[i].offset, v[i].insn);
		}
		fprintf(out, "\t{ 0, 0, 0, 0 }\n};\n\nconst uint32_t kiln_meta_nsyscalls = %zuu;\n", n);
		break;
	}
	free(v);
	return 0;
}

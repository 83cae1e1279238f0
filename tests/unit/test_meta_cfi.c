/* The frames tool's .eh_frame index (src/meta/tools/frames_cfi.c) against
 * libdw itself: for every function of real binaries (a static one, with no
 * .eh_frame_hdr; this test, with one; glibc, whose hand-written assembly
 * uses remember/restore_state, expressions and signal frames; libstdc++),
 * every CFI row the frames tool walks must be what libdw gives, row end,
 * register and offset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta/model.h"
#include "meta/tools/frames.h"

struct counts { size_t functions, rows, covered; };

/* Walks the rows of [lo, hi) as the frames tool does, from libdw and from
 * the index, and checks they agree; also one PC inside each row. */
static void compare_range(const struct meta_cfi *c, struct meta_cfi_rows *rows, struct meta_model *m, uint64_t lo,
			  uint64_t hi, struct counts *n)
{
	for (uint64_t pc = lo; pc < hi;) {
		struct cfi_row want, got;
		int rw = meta_cfa_at(NULL, rows, m, pc, &want), rg = meta_cfa_at(c, rows, m, pc, &got);
		if (rw != rg)
			fail_msg("%s: pc 0x%llx: libdw %d, index %d", m->path, (unsigned long long)pc, rw, rg);
		n->rows++;
		if (rw)
			return;
		n->covered++;
		if (want.hi != got.hi || want.reg != got.reg || (want.reg >= 0 && want.off != got.off))
			fail_msg("%s: pc 0x%llx: libdw [..,0x%llx) reg %d%+lld, index [..,0x%llx) reg %d%+lld", m->path,
				 (unsigned long long)pc, (unsigned long long)want.hi, want.reg, (long long)want.off,
				 (unsigned long long)got.hi, got.reg, (long long)got.off);
		uint64_t mid = pc + (want.hi - pc) / 2;
		if (mid != pc) {
			rw = meta_cfa_at(NULL, rows, m, mid, &want);
			rg = meta_cfa_at(c, rows, m, mid, &got);
			assert_int_equal(rw, rg);
			if (!rw && (want.hi != got.hi || want.reg != got.reg || (want.reg >= 0 && want.off != got.off)))
				fail_msg("%s: pc 0x%llx (inside a row) differs", m->path, (unsigned long long)mid);
		}
		pc = want.hi;
	}
}

static void compare_binary(const char *path, int need_index, size_t min_rows)
{
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	if (meta_model_open(path, &m, &err))
		fail_msg("%s", err.msg);
	struct meta_cfi *c = meta_cfi_new(m);
	if (need_index)
		assert_non_null(c); /* the fast path is really taken */
	struct counts n = { 0 };
	struct meta_cfi_rows rows = { 0 };
	for (size_t i = 0; i < m->nsymbols; i++) {
		const struct meta_symbol *s = &m->symbols[i];
		if (s->type != STT_FUNC || !s->size || (i && s->addr == m->symbols[i - 1].addr))
			continue;
		n.functions++;
		compare_range(c, &rows, m, s->addr, s->addr + s->size, &n);
	}
	print_message("%s: %zu functions, %zu rows (%zu with CFI)%s\n", path, n.functions, n.rows, n.covered,
		      c ? "" : ", index not usable");
	assert_true(n.covered >= min_rows);
	meta_cfi_rows_free(&rows);
	meta_cfi_free(c);
	meta_model_free(m);
}

static void own_binary_with_eh_frame_hdr(void **state)
{
	(void)state;
	compare_binary("/proc/self/exe", 1, 100);
}

static void glibc_hand_written_cfi(void **state)
{
	(void)state;
	compare_binary("/lib/x86_64-linux-gnu/libc.so.6", 1, 5000);
}

static void libstdcxx(void **state)
{
	(void)state;
	if (access("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", R_OK))
		skip();
	compare_binary("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 1, 5000);
}

/* A static binary has no .eh_frame_hdr: libdw reads .eh_frame in order. */
static void static_binary_without_eh_frame_hdr(void **state)
{
	(void)state;
	char dir[] = "/tmp/kiln-test-cfi.XXXXXX", src[64], exe[64], cmd[256];
	assert_non_null(mkdtemp(dir));
	snprintf(src, sizeof src, "%s/s.c", dir);
	snprintf(exe, sizeof exe, "%s/s", dir);
	FILE *f = fopen(src, "w");
	assert_non_null(f);
	fputs("#include <stdio.h>\nint main(void) { return printf(\"x\") < 0; }\n", f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "cc -static -O2 -o %s %s", exe, src);
	assert_int_equal(system(cmd), 0);
	compare_binary(exe, 1, 1000);
	unlink(exe);
	unlink(src);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(own_binary_with_eh_frame_hdr),
		cmocka_unit_test(static_binary_without_eh_frame_hdr),
		cmocka_unit_test(glibc_hand_written_cfi),
		cmocka_unit_test(libstdcxx),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

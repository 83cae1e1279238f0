/* Unit tests of the meta model: open errors, the model of this very test
 * binary (built with -g) against the compiler's sizeof/offsetof, the DIE-offset
 * map, and a tool run into a memory stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dwarf.h>

#include "meta/build.h"
#include "meta/model.h"
#include "meta/tools/obuf.h"
#include "meta/tools/tool.h"

struct unit_probe {
	char c;
	unsigned int bits : 5;
	union {
		int i;
		double d;
	};
	struct unit_probe *next;
	long arr[3];
};

struct unit_probe unit_probe_instance; /* keeps the type in the DWARF */

static const struct meta_type *find_struct(const struct meta_model *m, const char *name)
{
	for (size_t c = 0; c < m->nclasses; c++) {
		const struct meta_type *t = &m->types[m->classes[c].rep];
		if (t->kind == META_STRUCT && t->name && !strcmp(t->name, name))
			return t;
	}
	return NULL;
}

static const struct meta_member *member(const struct meta_model *m, const struct meta_type *t,
					const char *name)
{
	for (uint32_t k = 0; k < t->nmembers; k++) {
		const struct meta_member *mm = &m->members[t->first + k];
		if (mm->name && !strcmp(mm->name, name))
			return mm;
	}
	return NULL;
}

static void open_missing_file_fails_with_message(void **state)
{
	(void)state;
	struct meta_err err = { .msg = "" };
	struct meta_model *m = (void *)1;
	assert_int_equal(meta_model_open("/nonexistent/kiln-meta-test", &m, &err), -1);
	assert_null(m);
	assert_non_null(strstr(err.msg, "/nonexistent/kiln-meta-test: cannot open"));
}

static void open_non_elf_fails_with_message(void **state)
{
	(void)state;
	char path[] = "/tmp/kiln-meta-unit-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello, not elf\n", 15), 15);
	close(fd);
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	assert_int_equal(meta_model_open(path, &m, &err), -1);
	unlink(path);
	assert_non_null(strstr(err.msg, "not an ELF file"));
	assert_non_null(strstr(err.msg, path));
}

static void own_binary_matches_compiler(void **state)
{
	(void)state;
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	assert_int_equal(meta_model_open("/proc/self/exe", &m, &err), 0);
	const struct meta_type *t = find_struct(m, "unit_probe");
	assert_non_null(t);
	assert_int_equal(t->size, sizeof(struct unit_probe));
	assert_int_equal(member(m, t, "c")->value, offsetof(struct unit_probe, c) * 8);
	assert_int_equal(member(m, t, "next")->value, offsetof(struct unit_probe, next) * 8);
	assert_int_equal(member(m, t, "arr")->value, offsetof(struct unit_probe, arr) * 8);
	const struct meta_member *bits = member(m, t, "bits");
	assert_int_equal(bits->bit_size, 5);
	struct unit_probe p;
	memset(&p, 0, sizeof p);
	p.bits = 31;
	const unsigned char *raw = (const unsigned char *)&p;
	size_t first = 0;
	while (!(raw[first / 8] >> (first % 8) & 1))
		first++;
	assert_int_equal(bits->value, first);
	/* next points back at the struct itself: same class */
	const struct meta_type *ptr = &m->types[member(m, t, "next")->type];
	assert_int_equal(ptr->kind, META_POINTER);
	assert_int_equal(m->types[ptr->ref].cls, t->cls);
	meta_model_free(m);
}

static void compile_units_are_listed(void **state)
{
	(void)state;
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	assert_int_equal(meta_model_open("/proc/self/exe", &m, &err), 0);
	int found = 0;
	for (size_t i = 0; i < m->ncus; i++) {
		const struct meta_cu *cu = &m->cus[i];
		if (cu->name && strstr(cu->name, "tests/unit/test_meta.c")) {
			found = 1;
			assert_true(cu->language == DW_LANG_C11 || cu->language == DW_LANG_C99 ||
				    cu->language == DW_LANG_C89);
			assert_true(cu->version >= 4);
			assert_non_null(strstr(cu->producer, "GNU C"));
			/* its types start at first_type: unit_probe is among them */
			uint32_t end = i + 1 < m->ncus ? m->cus[i + 1].first_type : (uint32_t)m->ntypes;
			int has_probe = 0;
			for (uint32_t t = cu->first_type; t < end; t++)
				has_probe |= m->types[t].name && !strcmp(m->types[t].name, "unit_probe");
			assert_true(has_probe);
		}
	}
	assert_true(found);
	meta_model_free(m);
}

static void identity_of_the_file(void **state)
{
	(void)state;
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	assert_int_equal(meta_model_open("/proc/self/exe", &m, &err), 0);
	struct stat st;
	assert_int_equal(stat("/proc/self/exe", &st), 0);
	assert_int_equal(m->ino, st.st_ino);
	assert_int_equal(m->size, (uint64_t)st.st_size);
	assert_int_equal(m->mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
	assert_true(m->build_id_len >= 8); /* Debian's gcc links with --build-id */
	assert_true(meta_model_bytes(m) > m->ntypes * sizeof *m->types);
	meta_model_free(m);
}

static void json_strings_are_always_valid(void **state)
{
	(void)state;
	const char *in[] = { "plain", "caf\xc3\xa9", "a\xff" "b", "cut\xe2\x82", "sur\xed\xa0\x80",
			     "q\"b\\s\n", "\xf0\x9f\x98\x80" };
	const char *want[] = { "\"plain\"", "\"caf\xc3\xa9\"", "\"a\\u00ffb\"", "\"cut\\u00e2\\u0082\"",
			       "\"sur\\u00ed\\u00a0\\u0080\"", "\"q\\\"b\\\\s\\u000a\"",
			       "\"\xf0\x9f\x98\x80\"" };
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&buf, &len);
		meta_put_json_str(out, in[i]);
		fclose(out);
		assert_string_equal(buf, want[i]);
		free(buf);
	}
}

static void c_strings_are_valid_literals(void **state)
{
	(void)state;
	const char *in[] = { "plain", "q\"b\\s", "t?r?" "?=", "nl\n\x01" "7", "hi\xff" "0", "", NULL };
	const char *want[] = { "\"plain\"", "\"q\\\"b\\\\s\"", "\"t\\?r\\?\\?=\"",
			       "\"nl\\012\\0017\"", "\"hi\\3770\"", "\"\"", "0" };
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&buf, &len);
		meta_put_c_str(out, in[i]);
		struct meta_obuf *o = meta_obuf_new(out);
		assert_non_null(o);
		meta_obuf_c_str(o, in[i]); /* the same through the tools' buffer */
		meta_obuf_flush(o);
		free(o);
		fclose(out);
		assert_int_equal(len, 2 * strlen(want[i]));
		assert_memory_equal(buf, want[i], strlen(want[i]));
		assert_memory_equal(buf + strlen(want[i]), want[i], strlen(want[i]));
		free(buf);
	}
}

static void u64map_put_get(void **state)
{
	(void)state;
	struct meta_u64map map = { 0 };
	for (uint64_t k = 0; k < 5000; k++)
		assert_int_equal(meta_u64map_put(&map, k * 7919, (uint32_t)k), 0);
	for (uint64_t k = 0; k < 5000; k++)
		assert_int_equal(meta_u64map_get(&map, k * 7919), (uint32_t)k);
	assert_int_equal(meta_u64map_get(&map, 3), META_NONE);
	assert_int_equal(map.len, 5000);
	meta_u64map_free(&map);
}

static void tool_writes_to_stream(void **state)
{
	(void)state;
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	assert_int_equal(meta_model_open("/proc/self/exe", &m, &err), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_int_equal(meta_tool_find("types")->run(m, out, META_FMT_JSON, &err), 0);
	fclose(out);
	assert_non_null(strstr(buf, "\"name\":\"unit_probe\""));
	free(buf);
	meta_model_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(open_missing_file_fails_with_message),
		cmocka_unit_test(open_non_elf_fails_with_message),
		cmocka_unit_test(own_binary_matches_compiler),
		cmocka_unit_test(compile_units_are_listed),
		cmocka_unit_test(identity_of_the_file),
		cmocka_unit_test(json_strings_are_always_valid),
		cmocka_unit_test(c_strings_are_valid_literals),
		cmocka_unit_test(u64map_put_get),
		cmocka_unit_test(tool_writes_to_stream),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

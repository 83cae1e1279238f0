/* What an exec of a file does besides running it (src/trace/execfile.h):
 * set-id, static, #! script, read from buffers laid out as real files are,
 * including program header tables past the first read and longer than one
 * batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "trace/execfile.h"

struct file {
	unsigned char data[8192];
	size_t len;
	int reads;
};

static long rd(void *ctx, void *buf, size_t n, long off)
{
	struct file *f = ctx;
	f->reads++;
	if (off < 0 || (size_t)off >= f->len)
		return 0;
	if (n > f->len - (size_t)off)
		n = f->len - (size_t)off;
	memcpy(buf, f->data + off, n);
	return (long)n;
}

/* A 64-bit ELF with phnum program headers at phoff, PT_LOAD except one
 * PT_INTERP at interp_at (-1: none). */
static void elf(struct file *f, size_t phoff, unsigned phnum, int interp_at)
{
	memset(f, 0, sizeof *f);
	Elf64_Ehdr eh = { .e_phoff = phoff, .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = phnum };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	memcpy(f->data, &eh, sizeof eh);
	for (unsigned i = 0; i < phnum; i++) {
		Elf64_Phdr ph = { .p_type = (int)i == interp_at ? PT_INTERP : PT_LOAD };
		memcpy(f->data + phoff + i * sizeof ph, &ph, sizeof ph);
	}
	f->len = phoff + phnum * sizeof(Elf64_Phdr) + 16;
}

static unsigned facts(struct file *f, unsigned mode, char *interp)
{
	f->reads = 0;
	return kt_execfile_inspect(mode, rd, f, interp, 256);
}

static void test_dynamic_and_static(void **state)
{
	(void)state;
	static struct file f;
	char interp[256];
	/* a usual program: 13 headers right after the ELF header, one read */
	elf(&f, sizeof(Elf64_Ehdr), 13, 1);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	assert_int_equal(f.reads, 1);
	assert_string_equal(interp, "");
	elf(&f, sizeof(Elf64_Ehdr), 13, -1);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_STATIC);
	/* 40 headers, PT_INTERP among the last: found past the first batch */
	elf(&f, sizeof(Elf64_Ehdr), 40, 38);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	assert_true(f.reads > 1);
	elf(&f, sizeof(Elf64_Ehdr), 40, -1);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_STATIC);
	/* the table far into the file */
	elf(&f, 5000, 3, 2);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	elf(&f, 5000, 3, -1);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_STATIC);
	/* a table cut short by the end of the file: nothing known, no claim */
	elf(&f, 5000, 3, -1);
	f.len = 5000 + 60;
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	/* set-id, with either */
	elf(&f, sizeof(Elf64_Ehdr), 13, 1);
	assert_int_equal(facts(&f, S_IFREG | 04755, interp), KT_EXEC_SETID);
	assert_int_equal(facts(&f, S_IFREG | 02755, interp), KT_EXEC_SETID);
	elf(&f, sizeof(Elf64_Ehdr), 13, -1);
	assert_int_equal(facts(&f, S_IFREG | 04755, interp), KT_EXEC_SETID | KT_EXEC_STATIC);
	/* not a regular file: the mode says nothing of set-id */
	assert_int_equal(facts(&f, S_IFDIR | 04755, interp), KT_EXEC_STATIC);
	/* a 32-bit ELF, or something else: nothing to say */
	elf(&f, sizeof(Elf64_Ehdr), 13, -1);
	f.data[EI_CLASS] = ELFCLASS32;
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	memcpy(f.data, "\0asm", 4);
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
	f.len = 3;
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), 0);
}

static void script(struct file *f, const char *text)
{
	memset(f, 0, sizeof *f);
	f->len = strlen(text);
	memcpy(f->data, text, f->len);
}

/* A #! line: start, then n bytes of fill, then tail (may be ""). */
static void line(struct file *f, const char *start, char fill, size_t n, const char *tail)
{
	memset(f, 0, sizeof *f);
	size_t sl = strlen(start), tl = strlen(tail);
	memcpy(f->data, start, sl);
	memset(f->data + sl, fill, n);
	memcpy(f->data + sl + n, tail, tl);
	f->len = sl + n + tl;
}

static void test_scripts(void **state)
{
	(void)state;
	static struct file f;
	char interp[256];
	script(&f, "#!/bin/sh\necho hi\n");
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "/bin/sh");
	script(&f, "#! \t/usr/bin/env python3\n");
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "/usr/bin/env");
	script(&f, "#!/bin/sh");
	assert_int_equal(facts(&f, S_IFREG | 04755, interp), KT_EXEC_SCRIPT | KT_EXEC_SETID);
	assert_string_equal(interp, "/bin/sh");
	/* an interpreter longer than the kernel reads (256 bytes, without a
	 * newline): taken as truncated, the exec fails with ENOEXEC, so none
	 * is named (the kernel answers) */
	line(&f, "#!/", 'x', 600, "");
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "");
	/* the name must end by byte 255 (the NUL padding of a shorter file
	 * ends it): a file of 256 bytes without a newline is refused, one of
	 * 255 runs its interpreter */
	f.len = 256;
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "");
	f.len = 255;
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_int_equal(strlen(interp), 253); /* "/" and 252 more */
	/* a long line whose name ends early: the arguments may be cut */
	line(&f, "#!/bin/sh ", 'a', 600, "");
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "/bin/sh");
	/* one that does not fit the caller's buffer: none named, still a
	 * script (so never taken for a plain program) */
	line(&f, "#!/", 'y', 150, "\n");
	assert_int_equal(kt_execfile_inspect(S_IFREG | 0755, rd, &f, interp, 100), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "");
	/* what lies past the first 255 bytes is not part of the line */
	line(&f, "#!", ' ', 253, "/bin/sh\n");
	assert_int_equal(facts(&f, S_IFREG | 0755, interp), KT_EXEC_SCRIPT);
	assert_string_equal(interp, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dynamic_and_static),
		cmocka_unit_test(test_scripts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

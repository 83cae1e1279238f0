/* What an exec of a file does besides running it: the facts the exec check
 * reports (a set-id or static program) or checks further (a #! script's
 * interpreter). One definition for the preload library, which reads them
 * from the file it is about to run, and the trace server, which reads them
 * once for a program whose verdict cannot change during the run and puts
 * "nothing to report or check" into its cache value (docs/verdict-cache.md,
 * "Exec targets"). Nothing here allocates or makes a system call: the
 * caller passes the file's mode and a pread. */
#ifndef KILN_TRACE_EXECFILE_H
#define KILN_TRACE_EXECFILE_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

enum {
	KT_EXEC_SETID  = 1, /* a regular file with the set-uid or set-gid bit */
	KT_EXEC_STATIC = 2, /* a 64-bit ELF without an interpreter: the hooks do not load */
	KT_EXEC_SCRIPT = 4, /* a #! script: interp holds its interpreter */
};

/* Reads n bytes at off into buf: the count read, or < 0. */
typedef long kt_pread_fn(void *ctx, void *buf, size_t n, long off);

/* Returns the KT_EXEC_* facts of a file of the given mode (st_mode; 0 when
 * not known), read through rd. interp (cap bytes) gets a script's
 * interpreter, or "" (also when it does not fit). */
static inline unsigned kt_execfile_inspect(unsigned mode, kt_pread_fn *rd, void *ctx, char *interp,
					   size_t cap)
{
	unsigned facts = 0;
	interp[0] = '\0';
	if (S_ISREG(mode) && (mode & (S_ISUID | S_ISGID)))
		facts |= KT_EXEC_SETID;
	/* As many bytes as ld.so reads first: the ELF header and the program
	 * headers of most programs (13 or 14), or a #! line, in one read. */
	union {
		unsigned char b[832];
		Elf64_Phdr ph[832 / sizeof(Elf64_Phdr)];
	} buf;
	unsigned char *head = buf.b;
	long n = rd(ctx, head, sizeof buf - 1, 0);
	if (n < 4)
		return facts;
	if (head[0] == '#' && head[1] == '!') {
		/* The kernel's reading (binfmt_script, since Linux 5.1): the first
		 * 256 bytes, NUL-padded. Without a newline in them, a name that
		 * does not end (space, tab or NUL) by byte 255 is taken to be
		 * truncated and the exec fails with ENOEXEC: no interpreter is
		 * named then, and the kernel's own answer stands. */
		if (n > 256)
			n = 256;
		head[n] = '\0';
		const char *p = (const char *)head + 2;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t len = 0;
		while (p[len] && p[len] != ' ' && p[len] != '\t' && p[len] != '\n')
			len++;
		int whole = memchr(head, '\n', (size_t)n) || p + len <= (const char *)head + 255;
		if (len && len < cap && whole) {
			memcpy(interp, p, len);
			interp[len] = '\0';
		}
		return facts | KT_EXEC_SCRIPT;
	}
	if (n < (long)sizeof(Elf64_Ehdr) || memcmp(head, ELFMAG, SELFMAG) != 0 ||
	    head[EI_CLASS] != ELFCLASS64)
		return facts;
	Elf64_Ehdr eh;
	memcpy(&eh, head, sizeof eh);
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64)
		return facts;
	/* The program headers: from what was read when they are in it, else
	 * read into the same buffer, a few at a time (a small stack: a new
	 * process pays a page fault for each page of it first touched). */
	const size_t per = sizeof buf.ph / sizeof buf.ph[0];
	for (unsigned at = 0; at < eh.e_phnum; at += per) {
		unsigned k = eh.e_phnum - at < per ? eh.e_phnum - at : (unsigned)per;
		size_t want = k * sizeof(Elf64_Phdr);
		uint64_t off = eh.e_phoff + at * sizeof(Elf64_Phdr);
		const unsigned char *from;
		if (at == 0 && off + want <= (uint64_t)n && off <= sizeof buf) {
			from = head + off;
		} else {
			if (rd(ctx, buf.ph, want, (long)off) != (long)want)
				return facts;
			from = buf.b;
		}
		for (unsigned i = 0; i < k; i++) {
			Elf64_Phdr ph;
			memcpy(&ph, from + i * sizeof ph, sizeof ph);
			if (ph.p_type == PT_INTERP)
				return facts;
		}
	}
	return facts | KT_EXEC_STATIC;
}

#endif

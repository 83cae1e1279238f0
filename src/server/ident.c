/* The identity of this kiln build, from the executable's GNU build-id note
 * as the loader mapped it (no file access). */
#include "server/ident.h"

#include "common/cliopt.h" /* kiln_version */

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

static unsigned char ident[64];
static size_t ident_len;
static pthread_once_t ident_once = PTHREAD_ONCE_INIT;

/* The first object dl_iterate_phdr reports is the executable itself. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof *n;
			const char *desc = name + ((n->n_namesz + 3) & ~3u);
			if (desc + n->n_descsz > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
			    n->n_descsz && n->n_descsz <= sizeof ident) {
				memcpy(ident, desc, n->n_descsz);
				ident_len = n->n_descsz;
				return 1;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

static void init_ident(void)
{
	dl_iterate_phdr(find_build_id, NULL);
	if (!ident_len) {
		/* Linked without --build-id (never by Debian's toolchain): the
		 * version, which is weaker (two builds of one dirty checkout
		 * look alike) but reproducible, unlike __DATE__ and __TIME__,
		 * which Debian's -Wdate-time refuses. */
		ident_len = strlen(kiln_version) < sizeof ident ? strlen(kiln_version) : sizeof ident;
		memcpy(ident, kiln_version, ident_len);
	}
}

const unsigned char *kiln_build_ident(size_t *len)
{
	pthread_once(&ident_once, init_ident);
	*len = ident_len;
	return ident;
}

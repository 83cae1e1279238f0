/* meta_model_open: the one pass that turns a binary into a model. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "meta/build.h"
#include "meta/debugfile.h"
#include "meta/dwp.h"

/* Whether [OFF, OFF + COUNT * ENTSIZE) reaches past SIZE (overflow included). */
static int beyond(uint64_t off, uint64_t count, uint64_t entsize, uint64_t size)
{
	if (entsize && count > UINT64_MAX / entsize)
		return 1;
	uint64_t len = count * entsize;
	return off > size || len > size - off;
}

/* A file cut short (a copy interrupted, a download stopped) still parses as
 * ELF, but its tables or sections end past the end of the file: reading it
 * would give silently wrong answers (no sections: no syscalls, no DWARF), so
 * it is an error naming what is missing. */
static int check_truncation(Elf *elf, const GElf_Ehdr *eh, const char *path, uint64_t size,
			    struct meta_err *err)
{
	if (eh->e_phoff && beyond(eh->e_phoff, eh->e_phnum, eh->e_phentsize, size)) {
		meta_set_err(err, "%s: truncated: the program header table (offset %llu, %u entries) "
			     "ends beyond the end of the file (%llu bytes)", path,
			     (unsigned long long)eh->e_phoff, (unsigned)eh->e_phnum, (unsigned long long)size);
		return -1;
	}
	/* e_shnum 0 with a table means more than 0xff00 sections, counted in
	 * entry 0: that entry must be there at least. */
	uint64_t shnum = eh->e_shnum ? eh->e_shnum : 1;
	if (eh->e_shoff && beyond(eh->e_shoff, shnum, eh->e_shentsize, size)) {
		meta_set_err(err, "%s: truncated: the section header table (offset %llu, %llu entries) "
			     "ends beyond the end of the file (%llu bytes)", path,
			     (unsigned long long)eh->e_shoff, (unsigned long long)shnum, (unsigned long long)size);
		return -1;
	}
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		shstrndx = 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !sh.sh_size ||
		    !beyond(sh.sh_offset, 1, sh.sh_size, size))
			continue;
		/* the name may itself lie in a truncated string table */
		const char *name = shstrndx ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		meta_set_err(err, "%s: truncated: section %s (offset %llu, %llu bytes) ends beyond "
			     "the end of the file (%llu bytes)", path, name ? name : "?",
			     (unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size,
			     (unsigned long long)size);
		return -1;
	}
	return 0;
}

static int open_elf(int dirfd, const char *path, int *fd, Elf **elf, struct stat *stp, struct meta_err *err)
{
	*fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		meta_set_err(err, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(*fd, &st) != 0) {
		meta_set_err(err, "%s: cannot stat: %s", path, strerror(errno));
		return -1;
	}
	if (stp)
		*stp = st;
	if (!S_ISREG(st.st_mode)) {
		meta_set_err(err, "%s: not a regular file", path);
		return -1;
	}
	*elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (!*elf) {
		meta_set_err(err, "%s: cannot read as ELF: %s", path, elf_errmsg(-1));
		return -1;
	}
	if (elf_kind(*elf) != ELF_K_ELF) {
		meta_set_err(err, "%s: not an ELF file", path);
		return -1;
	}
	GElf_Ehdr eh;
	if (!gelf_getehdr(*elf, &eh)) {
		meta_set_err(err, "%s: corrupt ELF header: %s", path, elf_errmsg(-1));
		return -1;
	}
	if (check_truncation(*elf, &eh, path, (uint64_t)st.st_size, err))
		return -1;
	size_t shnum;
	if (elf_getshdrnum(*elf, &shnum) != 0) {
		meta_set_err(err, "%s: corrupt section header table: %s", path, elf_errmsg(-1));
		return -1;
	}
	return 0;
}

/* Size of ELF's own .debug_info (0: no DWARF of its own). */
static uint64_t debug_info_size(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")))
			return sh.sh_size ? sh.sh_size : 1;
	}
	return 0;
}

/* Raw bytes of the location-list sections, for the fast reader in expr.c,
 * and of the sections split units in a .dwp package index into. */
static void find_loclists(struct meta_model *m, Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED))
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		const unsigned char **data = !strcmp(name, ".debug_loc") ? &m->raw_loc :
					     !strcmp(name, ".debug_loclists") ? &m->raw_loclists :
					     !strcmp(name, ".debug_addr") ? &m->raw_addr :
					     !strcmp(name, ".debug_ranges") ? &m->raw_ranges : NULL;
		size_t *size = data == &m->raw_loc ? &m->raw_loc_size : data == &m->raw_loclists ?
			       &m->raw_loclists_size : data == &m->raw_addr ? &m->raw_addr_size : &m->raw_ranges_size;
		Elf_Data *d = data ? elf_rawdata(scn, NULL) : NULL;
		if (!d || !d->d_buf)
			continue;
		*data = d->d_buf;
		*size = d->d_size;
	}
}

static int open_dwarf(struct meta_model *m, int dirfd, const char *debug_root, struct meta_err *err)
{
	Elf *src = m->elf;
	const char *src_path = m->path;
	char dpath[4096];
	if (!debug_info_size(m->elf) && meta_find_debugfile(m->elf, dirfd, m->path, debug_root, dpath, sizeof dpath) == 0) {
		struct stat dst;
		struct meta_err derr;
		if (open_elf(dirfd, dpath, &m->debug_fd, &m->debug_elf, &dst, &derr)) {
			/* only the tools that need DWARF fail */
			memcpy(m->dwarf_error, derr.msg, sizeof m->dwarf_error); /* names the debug file */
			m->eh_cfi = dwarf_getcfi_elf(m->elf);
			return 0;
		}
		m->debug_file_size = (uint64_t)dst.st_size;
		if (!(m->debug_path = strdup(dpath))) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
		src = m->debug_elf;
		src_path = m->debug_path;
	}
	if ((m->debug_info_size = debug_info_size(src))) {
		m->dwarf = dwarf_begin_elf(src, DWARF_C_READ, NULL);
		if (!m->dwarf)
			snprintf(m->dwarf_error, sizeof m->dwarf_error, "%s: cannot read DWARF: %s", src_path,
				 dwarf_errmsg(-1));
		else
			find_loclists(m, src);
	}
	m->eh_cfi = dwarf_getcfi_elf(m->elf);
	if (m->dwarf)
		m->debug_cfi = dwarf_getcfi(m->dwarf);
	return 0;
}

/* The DWARF is unreadable: the model keeps its ELF side (enough for
 * `syscalls`), and the tools that need DWARF report ERR's cause. */
static void drop_dwarf(struct meta_model *m, const struct meta_err *err)
{
	snprintf(m->dwarf_error, sizeof m->dwarf_error, "%s", err->msg);
	m->ntypes = m->nmembers = m->nclasses = m->nfunctions = m->nvars = 0;
	m->nranges = m->nglobals = m->ncus = 0;
	m->debug_cfi = NULL; /* owned by the Dwarf */
	m->raw_loc = m->raw_loclists = m->raw_addr = m->raw_ranges = NULL;
	dwarf_end(m->dwarf);
	m->dwarf = NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int meta_model_open_with(const char *path, const struct meta_options *opts, struct meta_model **out,
			 struct meta_err *err)
{
	*out = NULL;
	elf_version(EV_CURRENT);
	struct meta_model *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path))) {
		free(m);
		meta_set_err(err, "%s: out of memory", path);
		return -1;
	}
	m->debug_fd = -1;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->warn_lock, NULL);
	double t0 = now();
	struct stat st;
	int dirfd = opts && opts->has_dirfd ? opts->dirfd : AT_FDCWD;
	m->dirfd = dirfd;
	if (open_elf(dirfd, path, &m->fd, &m->elf, &st, err) || meta_read_elf(m, err) || open_dwarf(m, dirfd, opts ? opts->debug_root : NULL, err))
		goto fail;
	double t1 = now();
	m->timing.open_s = t1 - t0;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->size = (uint64_t)st.st_size;
	m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	const void *id;
	ssize_t idlen = dwelf_elf_gnu_build_id(m->elf, &id);
	if (idlen > 0 && (size_t)idlen <= sizeof m->build_id) {
		memcpy(m->build_id, id, (size_t)idlen);
		m->build_id_len = (size_t)idlen;
	}
	if (m->dwarf) {
		struct meta_builder b = { .m = m, .err = err };
		int rc = meta_walk_dwarf(&b);
		double t2 = now();
		m->timing.walk_s = t2 - t1;
		if (!rc)
			rc = meta_resolve_types(&b);
		double t3 = now();
		m->timing.resolve_s = t3 - t2;
		free(b.type_ref_off);
		free(b.member_ref_off);
		free(b.var_ref_off);
		free(b.global_ref_off);
		free(b.bitfix);
		free(b.type_die);
		free(b.alias_target);
		meta_u64map_free(&b.aliases);
		meta_walk_free(&b);
		free(b.type_order);
		if (!rc)
			rc = meta_dedup_types(m, err);
		if (rc && b.oom)
			goto fail;
		if (rc)
			drop_dwarf(m, err);
		m->timing.dedup_s = now() - t3;
	}
	*out = m;
	return 0;
fail:
	meta_model_free(m);
	return -1;
}

void meta_model_free(struct meta_model *m)
{
	if (!m)
		return;
	if (m->eh_cfi)
		dwarf_cfi_end(m->eh_cfi);
	if (m->dwarf)
		dwarf_end(m->dwarf);
	meta_dwp_free(m->dwp);
	if (m->debug_elf)
		elf_end(m->debug_elf);
	if (m->elf)
		elf_end(m->elf);
	if (m->debug_fd >= 0)
		close(m->debug_fd);
	if (m->fd >= 0)
		close(m->fd);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->warn_lock);
	free(m->cus);
	free(m->types);
	free(m->members);
	free(m->classes);
	free(m->functions);
	free(m->vars);
	free(m->ranges);
	free(m->globals);
	free(m->symbols);
	free(m->sections);
	free(m->segments);
	free(m->path);
	free(m->debug_path);
	free(m);
}

size_t meta_model_bytes(const struct meta_model *m)
{
	return sizeof *m + m->ncus * sizeof *m->cus + m->ntypes * sizeof *m->types +
	       m->nmembers * sizeof *m->members + m->nclasses * sizeof *m->classes +
	       m->nfunctions * sizeof *m->functions + m->nvars * sizeof *m->vars +
	       m->nranges * sizeof *m->ranges + m->nglobals * sizeof *m->globals +
	       m->nsymbols * sizeof *m->symbols + m->nsections * sizeof *m->sections +
	       m->nsegments * sizeof *m->segments;
}

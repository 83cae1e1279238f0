/* The ELF side of the model: allocated sections (with their bytes) and the
 * symbol table (.symtab, else .dynsym), sorted by address. */
#include <stdlib.h>
#include <string.h>

#include "meta/build.h"

static int cmp_sym(const void *a, const void *b)
{
	const struct meta_symbol *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* FUNC before others at one address, then by name for determinism. */
	if ((x->type == STT_FUNC) != (y->type == STT_FUNC))
		return x->type == STT_FUNC ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int read_symtab(struct meta_model *m, Elf_Scn *scn, GElf_Shdr *sh, struct meta_err *err)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !sh->sh_entsize) {
		meta_set_err(err, "%s: unreadable symbol table: %s", m->path, elf_errmsg(-1));
		return -1;
	}
	size_t n = sh->sh_size / sh->sh_entsize, cap = 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		int type = GELF_ST_TYPE(sym.st_info);
		/* Absolute symbols are values, not addresses. */
		if (type == STT_SECTION || type == STT_FILE || sym.st_shndx == SHN_UNDEF ||
		    sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON)
			continue;
		const char *name = elf_strptr(m->elf, sh->sh_link, sym.st_name);
		if (!name)
			continue; /* corrupt name: skip the entry, keep the rest */
		struct meta_symbol s = {
			.name = name, .addr = sym.st_value, .size = sym.st_size,
			.type = (uint8_t)type, .bind = (uint8_t)GELF_ST_BIND(sym.st_info),
			.shndx = sym.st_shndx,
		};
		if (META_PUSH(m->symbols, m->nsymbols, cap, s)) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
	}
	if (m->nsymbols)
		qsort(m->symbols, m->nsymbols, sizeof *m->symbols, cmp_sym);
	return 0;
}

static int read_segments(struct meta_model *m, struct meta_err *err)
{
	size_t phnum, cap = 0;
	if (elf_getphdrnum(m->elf, &phnum) != 0)
		return 0; /* no program headers: an object file */
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_memsz ||
		    ph.p_vaddr > UINT64_MAX - ph.p_memsz)
			continue;
		struct meta_segment g = { ph.p_vaddr, ph.p_vaddr + ph.p_memsz, (ph.p_flags & PF_X) != 0 };
		if (META_PUSH(m->segments, m->nsegments, cap, g)) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
	}
	return 0;
}

int meta_read_elf(struct meta_model *m, struct meta_err *err)
{
	GElf_Ehdr eh;
	gelf_getehdr(m->elf, &eh);
	m->elf_class = gelf_getclass(m->elf);
	m->machine = eh.e_machine;
	m->addr_size = eh.e_ident[EI_DATA] != ELFDATA2LSB ? 0 : m->elf_class == ELFCLASS32 ? 4 : 8;
	if (read_segments(m, err))
		return -1;
	size_t shstrndx;
	if (elf_getshdrstrndx(m->elf, &shstrndx) != 0) {
		meta_set_err(err, "%s: corrupt section name table index: %s", m->path, elf_errmsg(-1));
		return -1;
	}
	Elf_Scn *symtab = NULL, *dynsym = NULL;
	GElf_Shdr symsh, dynsh;
	size_t cap = 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(m->elf, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) {
			meta_set_err(err, "%s: corrupt section header: %s", m->path, elf_errmsg(-1));
			return -1;
		}
		if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			symsh = sh;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dynsh = sh;
		}
		if (!(sh.sh_flags & SHF_ALLOC))
			continue;
		struct meta_section s = {
			.name = elf_strptr(m->elf, shstrndx, sh.sh_name),
			.addr = sh.sh_addr, .size = sh.sh_size,
			.exec = (sh.sh_flags & SHF_EXECINSTR) != 0,
		};
		if (!s.name)
			s.name = "?";
		if (s.exec && sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_getdata(scn, NULL);
			if (!d || (d->d_size && !d->d_buf)) {
				meta_set_err(err, "%s: section %s: unreadable: %s", m->path, s.name,
					     elf_errmsg(-1));
				return -1;
			}
			s.data = d->d_buf;
			s.size = d->d_size;
		}
		if (META_PUSH(m->sections, m->nsections, cap, s)) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
	}
	if (symtab)
		return read_symtab(m, symtab, &symsh, err);
	if (dynsym)
		return read_symtab(m, dynsym, &dynsh, err);
	return 0;
}

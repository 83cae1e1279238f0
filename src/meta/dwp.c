/* Split DWARF packages (.dwp). libdw (0.188) finds .dwo files but not
 * packages, so a split unit is cut out of the package here: its
 * contributions to each section, as the package's .debug_cu_index says
 * (DWARF 5 section 7.3.5; the GNU version 2 index for DWARF 4), go into a
 * small ELF image in memory that libdw reads as if it were that unit's .dwo
 * file, together with the skeleton's shares of the binary's .debug_addr
 * (and .debug_ranges for DWARF 4), which split units index into: named
 * .debug_addr.dwo and .debug_ranges.dwo, since libdw reads only the .dwo
 * sections of a file that has any. */
#include <dwarf.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "meta/dwp.h"
#include "meta/expr.h"
#include "meta/vec.h"

struct section {
	const unsigned char *data;
	size_t size;
};

/* What the package's index columns are (DW_SECT_*), by index version. */
static const char *column_name(uint32_t version, uint32_t id)
{
	static const char *const v5[9] = { [1] = ".debug_info.dwo", [3] = ".debug_abbrev.dwo",
		[4] = ".debug_line.dwo", [5] = ".debug_loclists.dwo", [6] = ".debug_str_offsets.dwo",
		[8] = ".debug_rnglists.dwo" };
	static const char *const v2[9] = { [1] = ".debug_info.dwo", [3] = ".debug_abbrev.dwo",
		[4] = ".debug_line.dwo", [5] = ".debug_loc.dwo", [6] = ".debug_str_offsets.dwo" };
	if (id >= 9)
		return NULL;
	return version == 5 ? v5[id] : version == 2 ? v2[id] : NULL;
}

struct unit {
	Elf *elf;
	Dwarf *dwarf;
	unsigned char *image;
	uint32_t version;
	struct section rnglists, addr, ranges; /* within image */
};

struct meta_dwp {
	int fd;
	Elf *elf;
	struct section index, str;
	struct section by_name[9]; /* the package's sections, by column id */
	uint32_t version, ncols, nunits, nslots;
	struct unit *units;
	size_t nunits_open, cap_units;
};

static uint32_t u32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t u64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

int meta_dwp_open(int dirfd, const char *path, struct meta_dwp **out)
{
	*out = NULL;
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct meta_dwp *p = calloc(1, sizeof *p);
	if (!p) {
		close(fd);
		return -1;
	}
	p->fd = fd;
	p->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t shstrndx;
	if (!p->elf || elf_kind(p->elf) != ELF_K_ELF || elf_getshdrstrndx(p->elf, &shstrndx) != 0)
		goto bad;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(p->elf, scn));) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED) ||
		    !(name = elf_strptr(p->elf, shstrndx, sh.sh_name)) || !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
			continue;
		struct section s = { d->d_buf, d->d_size };
		if (!strcmp(name, ".debug_cu_index"))
			p->index = s;
		else if (!strcmp(name, ".debug_str.dwo"))
			p->str = s;
		for (uint32_t id = 1; id < 9; id++) {
			const char *want5 = column_name(5, id), *want2 = column_name(2, id);
			if ((want5 && !strcmp(name, want5)) || (want2 && !strcmp(name, want2)))
				p->by_name[id] = s;
		}
	}
	if (p->index.size < 16)
		goto bad;
	const unsigned char *h = p->index.data;
	p->version = u32(h) & 0xffff;
	p->ncols = u32(h + 4);
	p->nunits = u32(h + 8);
	p->nslots = u32(h + 12);
	uint64_t need = 16 + (uint64_t)p->nslots * 12 + (uint64_t)p->ncols * 4 + (uint64_t)p->nunits * p->ncols * 8;
	if ((p->version != 2 && p->version != 5) || !p->nslots || (p->nslots & (p->nslots - 1)) ||
	    p->ncols > 16 || need > p->index.size)
		goto bad;
	*out = p;
	return 0;
bad:
	meta_dwp_free(p);
	return -1;
}

/* Row (1-based) of DWO_ID in the index's hash table, or 0. */
static uint32_t find_row(const struct meta_dwp *p, uint64_t dwo_id)
{
	const unsigned char *sigs = p->index.data + 16, *rows = sigs + (size_t)p->nslots * 8;
	uint32_t mask = p->nslots - 1, slot = (uint32_t)dwo_id & mask;
	uint32_t step = ((uint32_t)(dwo_id >> 32) & mask) | 1;
	for (uint32_t tries = 0; tries < p->nslots; tries++, slot = (slot + step) & mask) {
		uint32_t row = u32(rows + (size_t)slot * 4);
		if (!row)
			return 0;
		if (u64(sigs + (size_t)slot * 8) == dwo_id)
			return row <= p->nunits ? row : 0;
	}
	return 0;
}

struct piece { const char *name; const unsigned char *data; size_t size; };

/* An ELF64 relocatable image holding PIECES as sections (little-endian,
 * x86-64 like the binaries kiln reads). */
static unsigned char *build_image(const struct piece *pieces, size_t n, size_t *len)
{
	size_t names = 1, data = 0;
	for (size_t i = 0; i < n; i++) {
		names += strlen(pieces[i].name) + 1;
		data += pieces[i].size;
	}
	names += sizeof ".shstrtab";
	size_t shoff = (sizeof(Elf64_Ehdr) + data + names + 7) & ~(size_t)7;
	size_t nsec = n + 2;
	*len = shoff + nsec * sizeof(Elf64_Shdr);
	unsigned char *img = calloc(1, *len);
	if (!img)
		return NULL;
	Elf64_Ehdr eh = { .e_type = ET_REL, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
			  .e_shoff = shoff, .e_ehsize = sizeof eh, .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = (Elf64_Half)nsec, .e_shstrndx = (Elf64_Half)(nsec - 1) };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	memcpy(img, &eh, sizeof eh);
	Elf64_Shdr *sh = (Elf64_Shdr *)(img + shoff);
	size_t at = sizeof eh, name_at = sizeof eh + data, name_off = 1;
	for (size_t i = 0; i < n; i++) {
		memcpy(img + at, pieces[i].data, pieces[i].size);
		size_t nl = strlen(pieces[i].name) + 1;
		memcpy(img + name_at + name_off, pieces[i].name, nl);
		sh[i + 1] = (Elf64_Shdr){ .sh_name = (Elf64_Word)name_off, .sh_type = SHT_PROGBITS,
					  .sh_offset = at, .sh_size = pieces[i].size, .sh_addralign = 1 };
		at += pieces[i].size;
		name_off += nl;
	}
	memcpy(img + name_at + name_off, ".shstrtab", sizeof ".shstrtab");
	sh[nsec - 1] = (Elf64_Shdr){ .sh_name = (Elf64_Word)name_off, .sh_type = SHT_STRTAB,
				     .sh_offset = name_at, .sh_size = names, .sh_addralign = 1 };
	return img;
}

Dwarf *meta_dwp_unit(struct meta_dwp *p, uint64_t dwo_id, const unsigned char *addr, size_t addr_len,
		     const unsigned char *ranges, size_t ranges_len)
{
	uint32_t row = find_row(p, dwo_id);
	if (!row)
		return NULL;
	const unsigned char *cols = p->index.data + 16 + (size_t)p->nslots * 12;
	const unsigned char *offs = cols + (size_t)p->ncols * 4 + (size_t)(row - 1) * p->ncols * 4;
	const unsigned char *sizes = cols + (size_t)p->ncols * 4 + (size_t)p->nunits * p->ncols * 4 +
				     (size_t)(row - 1) * p->ncols * 4;
	struct piece pieces[20];
	size_t n = 0;
	for (uint32_t c = 0; c < p->ncols; c++) {
		uint32_t id = u32(cols + c * 4), off = u32(offs + c * 4), size = u32(sizes + c * 4);
		const char *name = column_name(p->version, id);
		if (!name || id >= 9)
			continue;
		const struct section *s = &p->by_name[id];
		if ((uint64_t)off + size > s->size)
			return NULL; /* corrupt index */
		pieces[n++] = (struct piece){ name, s->data + off, size };
	}
	if (p->str.data)
		pieces[n++] = (struct piece){ ".debug_str.dwo", p->str.data, p->str.size };
	if (addr)
		pieces[n++] = (struct piece){ ".debug_addr.dwo", addr, addr_len };
	if (ranges)
		pieces[n++] = (struct piece){ ".debug_ranges.dwo", ranges, ranges_len };
	size_t len;
	struct unit u = { .version = p->version };
	if (!(u.image = build_image(pieces, n, &len)))
		return NULL;
	size_t at = sizeof(Elf64_Ehdr); /* build_image lays the pieces out in order */
	for (size_t i = 0; i < n; i++) {
		struct section in_image = { u.image + at, pieces[i].size };
		if (!strcmp(pieces[i].name, ".debug_rnglists.dwo"))
			u.rnglists = in_image;
		else if (!strcmp(pieces[i].name, ".debug_addr.dwo"))
			u.addr = in_image;
		else if (!strcmp(pieces[i].name, ".debug_ranges.dwo"))
			u.ranges = in_image;
		at += pieces[i].size;
	}
	u.elf = elf_memory((char *)u.image, len);
	if (u.elf)
		u.dwarf = dwarf_begin_elf(u.elf, DWARF_C_READ, NULL);
	if (!u.dwarf || META_PUSH(p->units, p->nunits_open, p->cap_units, u)) {
		if (u.dwarf)
			dwarf_end(u.dwarf);
		if (u.elf)
			elf_end(u.elf);
		free(u.image);
		return NULL;
	}
	return u.dwarf;
}

static int fetch(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
	if (end - *p < 8)
		return 0;
	*out = u64(*p);
	*p += 8;
	return 1;
}

static int addrx(const struct unit *u, uint64_t idx, uint64_t *out)
{
	if (idx >= u->addr.size / 8)
		return 0;
	*out = u64(u->addr.data + idx * 8);
	return 1;
}

int meta_dwp_ranges(struct meta_dwp *p, Dwarf *unit, int is_index, uint64_t offset, uint64_t base,
		    int (*add)(void *arg, uint64_t lo, uint64_t hi), void *arg)
{
	const struct unit *u = NULL;
	for (size_t i = 0; i < p->nunits_open && !u; i++)
		if (p->units[i].dwarf == unit)
			u = &p->units[i];
	if (!u)
		return -1;
	const struct section *sec = u->version == 5 ? &u->rnglists : &u->ranges;
	if (is_index) { /* DW_FORM_rnglistx: the offsets table follows the 12-byte header */
		if (!sec->data || offset > (sec->size - 12) / 4 - 1 || sec->size < 16)
			return -1;
		offset = 12 + (uint64_t)u32(sec->data + 12 + offset * 4);
	}
	if (!sec->data || offset >= sec->size)
		return -1;
	const unsigned char *q = sec->data + offset, *end = sec->data + sec->size;
	for (int guard = 0; guard < 1 << 20; guard++) {
		uint64_t a, b;
		if (u->version != 5) { /* DWARF 4 .debug_ranges: pairs, base selection, (0, 0) */
			if (!fetch(&q, end, &a) || !fetch(&q, end, &b))
				return -1;
			if (!a && !b)
				return 0;
			if (a == UINT64_MAX)
				base = b;
			else if (add(arg, base + a, base + b))
				return -1;
			continue;
		}
		if (q >= end)
			return -1;
		int ok = 1;
		uint64_t lo = 0, hi = 0;
		switch (*q++) {
		case DW_RLE_end_of_list:
			return 0;
		case DW_RLE_base_addressx:
			if (!meta_uleb(&q, end, &a) || !addrx(u, a, &base))
				return -1;
			continue;
		case DW_RLE_startx_endx:
			ok = meta_uleb(&q, end, &a) && meta_uleb(&q, end, &b) && addrx(u, a, &lo) && addrx(u, b, &hi);
			break;
		case DW_RLE_startx_length:
			ok = meta_uleb(&q, end, &a) && meta_uleb(&q, end, &b) && addrx(u, a, &lo);
			hi = lo + b;
			break;
		case DW_RLE_offset_pair:
			ok = meta_uleb(&q, end, &a) && meta_uleb(&q, end, &b);
			lo = base + a;
			hi = base + b;
			break;
		case DW_RLE_base_address:
			if (!fetch(&q, end, &base))
				return -1;
			continue;
		case DW_RLE_start_end:
			ok = fetch(&q, end, &lo) && fetch(&q, end, &hi);
			break;
		case DW_RLE_start_length:
			ok = fetch(&q, end, &lo) && meta_uleb(&q, end, &b);
			hi = lo + b;
			break;
		default:
			return -1;
		}
		if (!ok || add(arg, lo, hi))
			return -1;
	}
	return -1;
}

void meta_dwp_free(struct meta_dwp *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nunits_open; i++) {
		dwarf_end(p->units[i].dwarf);
		elf_end(p->units[i].elf);
		free(p->units[i].image);
	}
	free(p->units);
	if (p->elf)
		elf_end(p->elf);
	close(p->fd);
	free(p);
}

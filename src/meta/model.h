/* The model of one ELF binary: everything the metadata tools need, read in
 * one pass over its DWARF (libdw) and symbol tables (libelf).
 *
 * A model is an object: meta_model_open() builds it, the tools read it, and
 * meta_model_free() releases it. There is no global state, library code never
 * exits, and every error comes back as a message naming the file and cause.
 * After meta_model_open() returns, the model is read-only except for the
 * libdw handles it keeps open (frame resolution goes through libdw's CFI
 * cache), which are guarded by the model's lock. */
#ifndef KILN_META_MODEL_H
#define KILN_META_MODEL_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define META_NONE UINT32_MAX

struct meta_dwp; /* "no type" (void) or "no index" */

enum meta_kind {
	META_BASE, META_POINTER, META_STRUCT, META_UNION, META_CLASS, META_ENUM,
	META_ARRAY, META_TYPEDEF, META_FUNCTION, META_CONST, META_VOLATILE,
	META_RESTRICT, META_ATOMIC, META_REFERENCE, META_RVALUE_REFERENCE,
	META_PTR_TO_MEMBER, META_UNSPECIFIED, META_KIND_COUNT
};

enum {
	META_T_DECLARATION = 1, /* incomplete: `struct foo;` */
	META_T_VARARGS = 2,     /* function type with `...` */
	META_T_HAS_SIZE = 4,    /* size known */
	META_T_UNSIGNED = 8,    /* enum whose underlying type is unsigned: its
	                           enumerators' values are unsigned */
};

/* A member of a struct/union/class, an enumerator, a function parameter or an
 * array dimension, depending on the owning type's kind. */
struct meta_member {
	const char *name;     /* NULL when anonymous */
	uint32_t type;        /* member/param type, META_NONE otherwise */
	uint32_t bit_size : 24; /* bitfield width, 0 when not a bitfield */
	uint32_t is_base : 1; /* a C++ base class subobject (DW_TAG_inheritance) */
	uint32_t is_virtual : 1; /* a virtual base: no fixed offset */
	uint64_t value;       /* struct: offset in bits from the start (a virtual
	                         base: the byte offset, from the vtable's address
	                         point, of the vtable entry that holds its offset:
	                         an int64_t, e.g. -24; 0 when unknown);
	                         enum: value (signedness per enum); array: count */
};

struct meta_type {
	const char *name;     /* NULL when anonymous */
	uint64_t size;        /* bytes, when META_T_HAS_SIZE */
	uint32_t ref;         /* target/element/return type; META_NONE = void */
	uint32_t first;       /* first of nmembers entries in model->members */
	uint32_t nmembers;
	uint32_t cls;         /* index into model->classes (deduplicated type) */
	uint8_t kind;         /* enum meta_kind */
	uint8_t flags;
	uint16_t encoding;    /* DW_ATE_* for base types */
};

/* One deduplicated type: every meta_type with the same structure maps here. */
struct meta_class {
	uint64_t id;          /* stable structural id */
	uint32_t rep;         /* index of a representative meta_type */
	uint32_t count;       /* how many DIEs it stands for */
	uint32_t target;      /* class references should name: for a declaration
	                         (`struct foo;`) the one definition of that name
	                         when there is exactly one, else itself */
};

struct meta_range { uint64_t lo, hi; };

struct meta_cu {
	const char *name;     /* DW_AT_name: the primary source file */
	const char *producer; /* compiler and flags */
	uint16_t version;     /* DWARF version */
	uint16_t language;    /* DW_LANG_* (0 unknown) */
	uint32_t first_type;  /* types[first_type, next CU's first_type) came from it, */
	uint32_t first_var;   /* and so did these vars and globals */
	uint32_t first_global;
};

enum meta_var_kind { META_VAR_LOCAL, META_VAR_FORMAL };

struct meta_var {
	const char *name;
	uint32_t type;        /* meta_type index or META_NONE */
	uint32_t scope_first; /* ranges (model->ranges) of the enclosing scope */
	uint32_t scope_count;
	uint8_t kind;         /* enum meta_var_kind */
	uint8_t has_location;
	uint8_t is_static;    /* a DW_OP_addr location: lives outside the frame */
	Dwarf_Attribute location; /* copy; valid while the model is open */
	uint64_t static_addr;
};

struct meta_function {
	const char *name;
	uint32_t range_first; /* PC ranges in model->ranges */
	uint32_t range_count;
	uint32_t var_first;   /* locals and formals in model->vars */
	uint32_t var_count;
	uint64_t low, high;   /* hull of the ranges */
	uint8_t external;
	uint8_t has_frame_base;
	Dwarf_Attribute frame_base;
};

/* A static (non-stack) variable with a fixed address, for extrasyms. */
struct meta_global {
	const char *name;
	uint64_t addr;
	uint32_t type;
	uint8_t external;
};

struct meta_symbol {
	const char *name;
	uint64_t addr, size;
	uint8_t type;         /* STT_* */
	uint8_t bind;         /* STB_* */
	uint16_t shndx;
};

struct meta_section {
	const char *name;
	uint64_t addr, size;
	const unsigned char *data; /* NULL for NOBITS */
	int exec;
};

/* A PT_LOAD segment: [lo, hi) in memory. */
struct meta_segment {
	uint64_t lo, hi;
	int exec;
};

struct meta_model {
	char *path;
	/* Identity of the file the model was built from, for caches that keep
	 * models warm: (dev, ino, size, mtime) when opened, and the ELF build id. */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	unsigned char build_id[64];
	size_t build_id_len;      /* 0: no build id */
	char *debug_path;     /* separate debug file, or NULL */
	int fd, debug_fd;
	Elf *elf, *debug_elf;
	int dirfd;            /* what relative paths resolve against */
	Dwarf *dwarf;         /* NULL when the binary has no (readable) DWARF */
	char dwarf_error[512]; /* why the DWARF could not be read; "" when it was,
	                          or when there is none */
	uint64_t debug_info_size;
	uint64_t debug_file_size; /* of the separate debug file, when there is one */
	Dwarf_CFI *eh_cfi, *debug_cfi;
	/* raw .debug_loc / .debug_loclists bytes (NULL if absent or compressed) */
	const unsigned char *raw_loc, *raw_loclists;
	size_t raw_loc_size, raw_loclists_size;
	/* raw .debug_addr and .debug_ranges, which split units of a .dwp
	 * package index into */
	const unsigned char *raw_addr, *raw_ranges;
	size_t raw_addr_size, raw_ranges_size;
	struct meta_dwp *dwp; /* BINARY.dwp, once a split unit was looked up there */
	int dwp_tried;
	int elf_class;
	int addr_size;        /* 8 or 4; 0 for big-endian (raw decoding off) */
	uint16_t machine;
	pthread_mutex_t lock; /* serializes libdw calls made by tools */
	pthread_mutex_t warn_lock;

	struct meta_type *types;     size_t ntypes;
	struct meta_member *members; size_t nmembers;
	struct meta_class *classes;  size_t nclasses;
	struct meta_function *functions; size_t nfunctions;
	struct meta_var *vars;       size_t nvars;
	struct meta_range *ranges;   size_t nranges;
	struct meta_global *globals; size_t nglobals;
	struct meta_symbol *symbols; size_t nsymbols; /* sorted by address */
	struct meta_section *sections; size_t nsections;
	struct meta_segment *segments; size_t nsegments; /* none in a relocatable object */
	struct meta_cu *cus;         size_t ncus;
	struct { double open_s, walk_s, resolve_s, dedup_s; } timing; /* phases of the build */
	size_t nwarnings;
	char first_warning[256];
};

/* Error and warning sink. Messages name the file and the cause. A tool run
 * counts the warnings it meets itself here (those of the model's build are
 * in the model, which every command on it reports). */
struct meta_err {
	char msg[512];
	size_t nwarnings;
	char first_warning[256];
};

/* Options of a model build; a zeroed struct means the defaults. */
struct meta_options {
	const char *debug_root; /* where separate debug files live; NULL: /usr/lib/debug */
	int has_dirfd;          /* relative paths resolve against dirfd, not the cwd */
	int dirfd;              /* (a forwarded client's working directory) */
};

/* Builds the model of PATH with OPTS (NULL: defaults). Returns 0, or -1 with err->msg set (and *out
 * NULL). A missing debug info is not an error here: the model is then empty
 * of types/functions, and tools that need DWARF report it. */
int meta_model_open_with(const char *path, const struct meta_options *opts, struct meta_model **out,
			 struct meta_err *err);
static inline int meta_model_open(const char *path, struct meta_model **out, struct meta_err *err)
{
	return meta_model_open_with(path, NULL, out, err);
}
void meta_model_free(struct meta_model *m);
/* Approximate heap bytes held by M's own arrays (not libdw's or the mapping). */
size_t meta_model_bytes(const struct meta_model *m);

/* Stable id under which references to type T are written (0 for void). */
static inline uint64_t meta_type_id(const struct meta_model *m, uint32_t t)
{
	return t == META_NONE ? 0 : m->classes[m->classes[m->types[t].cls].target].id;
}

const char *meta_kind_name(enum meta_kind k);

/* Index of the last symbol whose address is <= ADDR, or -1. */
long meta_symbol_at_or_below(const struct meta_model *m, uint64_t addr);
/* Index of the symbol covering ADDR (FUNC symbols preferred), or -1. */
long meta_symbol_at(const struct meta_model *m, uint64_t addr);
/* Whether code at [LO, HI) or data at [LO, LO + 1) can be real: not a
 * tombstone the linker left for a discarded copy (0, -1, -2: DWARF keeps
 * describing COMDAT copies and dead sections it dropped) and inside one
 * loaded segment (an executable one for code). Always true in an object
 * file, which has no segments. */
int meta_code_is_live(const struct meta_model *m, uint64_t lo, uint64_t hi);
int meta_data_is_live(const struct meta_model *m, uint64_t addr);
/* Whether some FUNC/OBJECT/NOTYPE symbol has exactly this address. */
int meta_symbol_has_addr(const struct meta_model *m, uint64_t addr);

void meta_warn(struct meta_model *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void meta_set_err(struct meta_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A warning of a tool run into ERR (one thread's). */
void meta_err_warn(struct meta_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif

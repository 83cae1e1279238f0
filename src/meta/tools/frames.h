/* Internal to the frames tool: where a variable lives, by PC range
 * (frames_loc.c computes, frames.c prints). */
#ifndef KILN_META_TOOLS_FRAMES_H
#define KILN_META_TOOLS_FRAMES_H

#include "meta/expr.h"
#include "meta/model.h"

enum loc_kind { LOC_CFA, LOC_REG, LOC_STATIC, LOC_BREG, LOC_COMPUTED, LOC_COMPLEX, LOC_NONE };

struct loc {
	uint64_t lo, hi;
	int kind;
	int reg;         /* LOC_REG, LOC_BREG */
	int64_t offset;  /* LOC_CFA, LOC_BREG; address for LOC_STATIC */
};

struct cfi_row {
	uint64_t lo, hi;
	int reg;         /* CFA = reg + off; -1 when the rule is an expression */
	int64_t off;
};

/* The CFA rules of a model's .eh_frame, indexed for the frames tool
 * (frames_cfi.c): NULL when it cannot be used, and every lookup asks libdw.
 * Read-only once built; each thread decodes rows into its own
 * meta_cfi_rows (zeroed to start). */
struct meta_cfi;
struct meta_cfi_row;
struct meta_cfi_rows {
	size_t fde;            /* 1 + the FDE decoded, 0 none */
	struct meta_cfi_row *v;
	size_t n, cap;
};
struct meta_cfi *meta_cfi_new(const struct meta_model *m);
void meta_cfi_free(struct meta_cfi *c);
void meta_cfi_rows_free(struct meta_cfi_rows *r);
/* The CFA rule at PC exactly as dwarf_cfi_addrframe() and dwarf_frame_cfa()
 * on the model's .eh_frame, else its .debug_frame, give it (reg -1: not a
 * register plus offset): 0, or -1 when neither covers PC. C may be NULL.
 * Takes the model's lock around libdw calls. */
int meta_cfa_at(const struct meta_cfi *c, struct meta_cfi_rows *rows, struct meta_model *m, uint64_t pc,
		struct cfi_row *row);

struct frame_state {
	struct meta_model *m;
	const struct meta_cfi *cfi; /* shared by the threads of one run, or NULL */
	struct meta_cfi_rows cfi_rows;
	struct meta_err *warn;      /* where this thread's warnings go */
	struct cfi_row *rows;
	size_t nrows, caprows;
	int rows_done;
	struct loc *locs;
	size_t nlocs, caplocs;
	struct meta_loc_entry *entries;
	size_t capentries;
	Dwarf_CU *cu;          /* CU of the last location list read, and its */
	uint64_t cu_base;      /* base address and DWARF version */
	int cu_version;
	int cu_offset_size;    /* 4 or 8 (32- or 64-bit DWARF) */
	int cu_split;          /* it is a split unit (its lists are in a .dwo) */
	int fb_known;          /* frame base of the current function, once read: */
	int fb_kind, fb_reg;   /* 0 the CFA, 1 register fb_reg + fb_off, -1 other */
	int64_t fb_off;
};

extern const char *const meta_loc_names[]; /* by enum loc_kind */

/* Computes the locations of V (a variable of F) into s->locs / s->nlocs.
 * Call meta_frame_reset() when moving to another function. Threads may run
 * this at once on one model, each with its own state: libdw is called under
 * the model's lock. Returns 0, or -1 on ENOMEM. */
int meta_var_locations(struct frame_state *s, const struct meta_function *f, const struct meta_var *v);
void meta_frame_reset(struct frame_state *s);
void meta_frame_state_free(struct frame_state *s);

#endif

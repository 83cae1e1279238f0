/* Split DWARF packages (.dwp, made by dwp or llvm-dwp from the .dwo files of
 * a -gsplit-dwarf build): the split unit of a skeleton, by its DWO id. */
#ifndef KILN_META_DWP_H
#define KILN_META_DWP_H

#include <elfutils/libdw.h>
#include <stddef.h>
#include <stdint.h>

struct meta_dwp;

/* Opens PATH (relative to DIRFD) as a package: 0, or -1 when it is not
 * there or not a package. */
int meta_dwp_open(int dirfd, const char *path, struct meta_dwp **out);

/* The split unit with DWO_ID as a Dwarf of its own, its contributions cut
 * out of the package, with the skeleton's share of the binary's .debug_addr
 * (ADDR, from the skeleton's addr_base on) and, for DWARF 4, of .debug_ranges
 * (RANGES, from its ranges_base on), which split units index into. NULL
 * when the package has no such unit or it cannot be read. The Dwarf lives
 * as long as the package. */
Dwarf *meta_dwp_unit(struct meta_dwp *p, uint64_t dwo_id, const unsigned char *addr, size_t addr_len,
		     const unsigned char *ranges, size_t ranges_len);

/* The PC ranges of the range list at OFFSET (or, IS_INDEX, number OFFSET in
 * the unit's table: DW_FORM_rnglistx) of split unit UNIT from this package, whose base address is BASE (the
 * skeleton's low_pc, which libdw cannot see from a package): ADD is called
 * for each. 0, or -1 when the list cannot be read. */
int meta_dwp_ranges(struct meta_dwp *p, Dwarf *unit, int is_index, uint64_t offset, uint64_t base,
		    int (*add)(void *arg, uint64_t lo, uint64_t hi), void *arg);

void meta_dwp_free(struct meta_dwp *p);

#endif

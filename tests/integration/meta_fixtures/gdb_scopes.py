# Run inside gdb: gdb -batch -ex "python LOWS, OUT = 'lows.txt', 'out.json'" -x gdb_scopes.py BINARY
# For each function [lo, hi) in LOWS, the variables and parameters gdb knows
# in the blocks of that PC range (its own, nested and inlined blocks, with
# those gdb inherits from abstract origins), and whether gdb has them as
# optimized out: {lo: {name: [optimized_out, ...]}} in OUT.
import json

import gdb

out = {}
for line in open(LOWS):  # noqa: F821 (set by the caller)
    lo, hi = map(int, line.split())
    names, seen = {}, set()
    for pc in range(lo, hi):
        try:
            b = gdb.block_for_pc(pc)
        except RuntimeError:
            continue
        while b is not None and not b.is_global and not b.is_static:
            key = (b.start, b.end, tuple(s.name for s in b))
            if key not in seen:
                seen.add(key)
                for s in b:
                    if (s.is_variable or s.is_argument or s.is_constant) and \
                            str(s.type) != "__CORE_ADDR":  # labels
                        names.setdefault(s.name, []).append(
                            s.addr_class == gdb.SYMBOL_LOC_OPTIMIZED_OUT)
            if b.function is not None and b.start <= lo:
                break
            b = b.superblock
    out[lo] = names
json.dump(out, open(OUT, "w"))  # noqa: F821

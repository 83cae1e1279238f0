"""Code the linker discarded (the second copy of a COMDAT function) keeps its
DWARF, at the linker's tombstone address: 0 (ld.bfd for .debug_ranges, gold,
lld), -1 or -2 (lld -z dead-reloc-in-nonalloc). No tool reports it.

Oracles: llvm-dwarfdump (every subprogram's PC ranges, tombstones included),
readelf (the loaded segments) and nm (the functions that exist)."""
import re

import pytest

from conftest import run
from meta_util import FIXTURES, cc, meta_json

SRC = FIXTURES / "comdat"
TOMBSTONE = {0, 2**64 - 1, 2**64 - 2}


def exec_segments(exe):
    segs = []
    for line in run(["readelf", "-lW", exe]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            lo = int(f[2], 16)
            segs.append((lo, lo + int(f[5], 16)))
    assert segs
    return segs


def dwarfdump_subprograms(exe):
    """[(DIE offset, [(lo, hi), ...])] of every subprogram with code, as
    llvm-dwarfdump prints them (it prints -1 as 'dead code')."""
    out, cur, in_ranges = [], None, False
    for line in run(["llvm-dwarfdump", "--debug-info", exe]).stdout.splitlines():
        m = re.match(r"^(0x[0-9a-f]+):\s+(DW_TAG_\w+)", line)
        if m:
            cur = {"off": m.group(1), "tag": m.group(2)}
            out.append(cur)
            in_ranges = False
            continue
        if cur is None:
            continue
        m = re.match(r"^\s+(DW_AT_\w+)\s+\((.*)$", line)
        if m:
            attr, val = m.group(1), m.group(2).rstrip(")")
            in_ranges = attr == "DW_AT_ranges"
            if attr in ("DW_AT_low_pc", "DW_AT_high_pc"):
                cur[attr] = 2**64 - 1 if val == "dead code" else int(val, 16)
            continue
        m = re.match(r"^\s+\[0x([0-9a-f]+), 0x([0-9a-f]+)\)", line)
        if m and in_ranges:
            cur.setdefault("ranges", []).append((int(m.group(1), 16), int(m.group(2), 16)))
    subs = []
    for d in out:
        if d["tag"] != "DW_TAG_subprogram":
            continue
        if "ranges" in d:
            subs.append((d["off"], d["ranges"]))
        elif "DW_AT_low_pc" in d and "DW_AT_high_pc" in d:
            subs.append((d["off"], [(d["DW_AT_low_pc"], d["DW_AT_high_pc"])]))
    return subs


def live(lo, hi, segs):
    return lo not in TOMBSTONE and lo < hi and any(a <= lo and hi <= b for a, b in segs)


BUILDS = [("g++", "bfd", 4, None), ("g++", "gold", 5, None), ("g++", "lld", 5, None),
          ("clang++", "lld", 4, None), ("g++", "lld", 5, "0xffffffffffffffff"),
          ("clang++", "lld", 5, "0xfffffffffffffffe")]


@pytest.mark.parametrize("compiler,linker,dwarf,tomb", BUILDS,
                         ids=[f"{c}-{ld}-dwarf{d}-{t or 'default'}" for c, ld, d, t in BUILDS])
def test_discarded_copies_are_in_no_tool(kiln_bin, tmp_path, compiler, linker, dwarf, tomb):
    flags = [f"-gdwarf-{dwarf}", "-O1", f"-fuse-ld={linker}", f"-I{SRC}"]
    if tomb:
        flags.append(f"-Wl,-z,dead-reloc-in-nonalloc=.debug_*={tomb}")
    exe = cc(tmp_path / "prog", [SRC / "comdat_a.cc", SRC / "comdat_b.cc"], flags, compiler=compiler)
    segs = exec_segments(exe)
    subs = dwarfdump_subprograms(exe)
    dead = [off for off, rs in subs if not any(live(lo, hi, segs) for lo, hi in rs)]
    if linker != "bfd":  # bfd points discarded copies at the kept one
        assert dead, "the DWARF has no discarded copy: the test proves nothing"
    want = {min(lo for lo, hi in rs if live(lo, hi, segs))
            for _, rs in subs if any(live(lo, hi, segs) for lo, hi in rs)}
    frames = meta_json(kiln_bin, "frames", exe)["functions"]
    assert {f["low"] for f in frames} == want
    # every function kiln reports exists: nm names it at that address
    funcs = {int(f[0], 16) for f in (line.split() for line in run(["nm", exe]).stdout.splitlines())
             if len(f) == 3 and f[1] in "tTwW"}
    assert {f["low"] for f in frames} <= funcs
    extras = meta_json(kiln_bin, "extrasyms", exe)["extrasyms"]
    assert [e for e in extras if e["addr"] in TOMBSTONE or e["addr"] < 0x1000] == []
    sysc = run([kiln_bin, "meta", "syscalls", exe])
    assert sysc.returncode == 0, sysc.stderr

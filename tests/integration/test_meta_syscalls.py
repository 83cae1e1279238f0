"""`kiln meta syscalls` agrees with `objdump -d` on a static binary."""
import re

from conftest import run
from meta_util import FIXTURES, cc, meta_json


def objdump_syscalls(binary):
    r = run(["objdump", "-d", "--no-show-raw-insn", binary])
    assert r.returncode == 0, r.stderr
    sites, func = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            func = m.group(1)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(syscall|sysenter|int\s+\$0x80)\s*$", line)
        if m:
            sites[int(m.group(1), 16)] = (func, "int80" if m.group(2).startswith("int") else m.group(2))
    return sites


def test_matches_objdump_on_static_binary(kiln_bin, tmp_path):
    exe = cc(tmp_path / "rawsys", [FIXTURES / "rawsys.c"], ["-static", "-O2", "-g"])
    ref = objdump_syscalls(exe)
    assert len(ref) > 20, "a static glibc binary has many syscall sites"
    doc = meta_json(kiln_bin, "syscalls", exe)
    got = {s["addr"]: s for s in doc["syscalls"]}
    assert set(got) == set(ref), (
        f"missing {sorted(hex(a) for a in set(ref) - set(got))}, "
        f"extra {sorted(hex(a) for a in set(got) - set(ref))}")
    # Function names: objdump picks one of several aliases (clock_gettime /
    # __clock_gettime); any alias, i.e. a symbol at the same address, agrees.
    addr_of = {}
    for line in run(["nm", "--defined-only", exe]).stdout.splitlines():
        f = line.split()
        if len(f) == 3:
            addr_of.setdefault(f[2], int(f[0], 16))
    for a, (fn, insn) in ref.items():
        assert addr_of.get(got[a]["function"]) == addr_of[fn], (hex(a), got[a], fn)
        assert got[a]["offset"] == a - addr_of[fn]
        assert got[a]["insn"] == insn
    raw = [s for s in doc["syscalls"] if s["function"] == "raw_getpid"]
    assert len(raw) == 1
    assert sorted(s["insn"] for s in doc["syscalls"] if s["function"] == "other_entries") == \
        ["int80", "sysenter"]

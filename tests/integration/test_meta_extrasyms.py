"""`kiln meta extrasyms` on a binary whose local symbols were discarded
recovers what `nm` lists in the original."""
import pytest

from conftest import run
from meta_util import FIXTURES, cc, meta_json


def nm_symbols(binary):
    r = run(["nm", "-S", "--defined-only", binary])
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 4:
            out[f[3]] = (int(f[0], 16), int(f[1], 16), f[2])
    return out


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("compiler,dwarf", [("gcc", 4), ("gcc", 5), ("clang", 5)])
def test_recovers_discarded_locals(kiln_bin, tmp_path, opt, compiler, dwarf):
    # clang's DWARF 5 gives static addresses as DW_OP_addrx (.debug_addr)
    orig = cc(tmp_path / "orig", [FIXTURES / "statics.c"], [f"-gdwarf-{dwarf}", opt], compiler=compiler)
    stripped = tmp_path / "stripped"
    # --discard-all alone also drops the debug sections of an executable:
    # keep them, as a build that strips locals but ships debug info would.
    r = run(["objcopy", "--discard-all", "--keep-section=.debug_*", orig, stripped])
    assert r.returncode == 0, r.stderr
    before, after = nm_symbols(orig), nm_symbols(stripped)
    # The oracle: fixture locals nm sees in the original and not after objcopy
    # (names like fx_calls.0 for function-scope statics).
    lost = {n: v for n, v in before.items() if n.startswith("fx_") and n not in after}
    if opt == "-O2" and compiler == "gcc":
        assert "fx_split.cold" in lost, "the fixture should have a split-off cold part at -O2"
    assert len(lost) >= (6 if opt == "-O0" else 4), f"fixture did not produce discarded locals: {sorted(before)}"
    doc = meta_json(kiln_bin, "extrasyms", stripped)
    got = {e["addr"]: e for e in doc["extrasyms"]}
    for name, (addr, size, kind) in lost.items():
        assert addr in got, f"{name} at {addr:#x} ({kind}) not recovered"
        e = got[addr]
        # gcc: fx_calls.0, fx_fill.constprop.0; clang: fx_fill.fx_calls
        assert e["name"] in (name.split(".")[0], name.split(".")[-1]), (name, e)
        assert e["size"] == size, (name, e)
        want = "object" if kind not in "tT" else "function_part" if name.endswith(".cold") else "function"
        assert e["kind"] == want, (name, e)
    # Whatever remains in the symbol table is not reported.
    kept = {v[0] for n, v in after.items() if n.startswith("fx_")}
    assert not kept & set(got), "symbols still in the table were reported"
    # On the original, nothing of the fixture is missing.
    orig_doc = meta_json(kiln_bin, "extrasyms", orig)
    assert not [e for e in orig_doc["extrasyms"] if e["name"].startswith("fx_")]

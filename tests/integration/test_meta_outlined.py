"""`frames` reports the variables that exist only in an abstract origin: those
of a part GCC split off a function (foo.part.0) and of inlined copies whose
blocks were dropped, as optimized out where they have no location. The
oracle is gdb, which inherits the same DIEs (its Python API lists every
block's symbols)."""
import json

import pytest

from conftest import run
from meta_util import FIXTURES, cc, meta_json


def gdb_scopes(exe, functions, tmp_path):
    lows = tmp_path / "lows.txt"
    lows.write_text("".join(f"{f['low']} {f['high']}\n" for f in functions))
    out = tmp_path / "gdb.json"
    r = run(["gdb", "-nx", "-batch", "-ex", f"python LOWS, OUT = {str(lows)!r}, {str(out)!r}",
             "-x", FIXTURES / "gdb_scopes.py", exe])
    assert r.returncode == 0 and out.exists(), r.stderr
    return {int(k): v for k, v in json.loads(out.read_text()).items()}


@pytest.mark.parametrize("dwarf", [4, 5])
def test_variables_of_abstract_origins_match_gdb(kiln_bin, tmp_path, dwarf):
    exe = cc(tmp_path / "outlined", [FIXTURES / "outlined.c"], ["-O2", f"-gdwarf-{dwarf}"])
    assert "split_me.part.0" in run(["nm", exe]).stdout, "gcc did not split split_me"
    functions = meta_json(kiln_bin, "frames", exe)["functions"]
    gdb = gdb_scopes(exe, functions, tmp_path)
    for f in functions:
        kiln = {v["name"] for v in f["vars"] if v["name"]}
        assert kiln == set(gdb[f["low"]]), (f["name"], hex(f["low"]), kiln, gdb[f["low"]])
    by_low = {f["low"]: f for f in functions}
    part = int(next(line.split()[0] for line in run(["nm", exe]).stdout.splitlines()
                    if line.endswith(" split_me.part.0")), 16)
    assert {"a", "b", "header_only", "local", "other"} <= {v["name"] for v in by_low[part]["vars"]}
    (walker,) = [f for f in functions if f["name"] == "resolve_all"]
    for name in ("hops", "a"):
        # only in resolve's abstract instance: optimized out for gdb, and for kiln
        assert all(gdb[walker["low"]][name]), (name, gdb[walker["low"]][name])
        got = [v for v in walker["vars"] if v["name"] == name]
        assert got and all(loc["where"] == "none" for v in got for loc in v["locations"]), got
        assert all(v["locations"] for v in got), "optimized out over the inlined copy's range"

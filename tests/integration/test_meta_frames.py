"""`kiln meta frames` agrees at run time with a program that records the
addresses of its locals and its CFA (__builtin_dwarf_cfa()) at known PCs."""
import pytest

from conftest import run
from meta_util import FIXTURES, cc, meta_json


@pytest.mark.parametrize("opt", ["-O0", "-O1", "-O2"])
@pytest.mark.parametrize("dwarf", [4, 5])
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_cfa_offsets_match_run_time_addresses(kiln_bin, tmp_path, opt, dwarf, compiler):
    # -no-pie: the recorded PCs are link-time addresses, comparable as is.
    # clang's frame base is a register (rbp), translated through the CFI.
    exe = cc(tmp_path / "frames", [FIXTURES / "frames.c"], ["-g", f"-gdwarf-{dwarf}", opt, "-no-pie"],
             compiler=compiler)
    r = run([exe])
    assert r.returncode == 0, r.stderr
    doc = meta_json(kiln_bin, "frames", exe)
    funcs = {}
    for f in doc["functions"]:
        funcs.setdefault(f["name"], []).append(f)
    checked = 0
    for line in r.stdout.splitlines():
        fn, var, ra, addr, cfa = line.split()
        pc = int(ra) - 1  # inside the call instruction
        want = int(addr) - int(cfa)
        (f,) = [f for f in funcs[fn] if f["low"] <= pc < f["high"]]
        vs = [v for v in f["vars"] if v["name"] == var]
        assert vs, f"{fn}: no variable {var}"
        locs = [loc for v in vs for loc in v["locations"] if loc["lo"] <= pc < loc["hi"]]
        if opt != "-O0" and vs[0]["kind"] == "formal" and not locs:
            # GCC's own location lists for an optimized formal whose address
            # is taken end before the probe: nothing to compare there.
            continue
        assert locs, f"{fn}.{var}: no location at {pc:#x}: {vs}"
        assert any(loc["where"] == "cfa" and loc["offset"] == want for loc in locs), \
            f"{fn}.{var} at {pc:#x}: expected cfa{want:+d}, got {locs}"
        checked += 1
    assert checked >= (10 if opt == "-O0" else 8)


def test_formal_and_local_kinds_and_types(kiln_bin, tmp_path):
    exe = cc(tmp_path / "frames", [FIXTURES / "frames.c"], ["-g", "-O0"])
    doc = meta_json(kiln_bin, "frames", exe)
    types = {t["id"]: t for t in meta_json(kiln_bin, "types", exe)["types"]}
    (f,) = [f for f in doc["functions"] if f["name"] == "fr_plain"]
    kinds = {v["name"]: v["kind"] for v in f["vars"]}
    assert kinds == {"a": "formal", "b": "formal", "x": "local", "buf": "local"}
    buf = next(v for v in f["vars"] if v["name"] == "buf")
    t = types[buf["type"]]
    assert t["kind"] == "array" and t["dims"] == [40] and t["size"] == 40


@pytest.mark.parametrize("compiler,opt,dwarf", [("gcc", "-O0", 4), ("gcc", "-O2", 5),
                                                ("clang", "-O0", 5), ("clang", "-O2", 4)])
def test_generated_functions_match_run_time_addresses(kiln_bin, tmp_path, compiler, opt, dwarf):
    """A generated program: 40 functions with many parameters (structs by
    value, more than fit in registers), locals in nested blocks, arrays,
    variable-length arrays. Every CFA offset kiln gives at a probe PC is the
    run-time one; where it gives none, DWARF has no frame slot there (the
    variable is optimized out, split into pieces, or a VLA at a dynamic
    address)."""
    import sys
    sys.path.insert(0, str(FIXTURES))
    import gen_frames
    (tmp_path / "p.c").write_text(gen_frames.program(seed=5))
    exe = cc(tmp_path / "p", [tmp_path / "p.c"], ["-g", f"-gdwarf-{dwarf}", opt, "-no-pie"],
             compiler=compiler)
    r = run([exe])
    assert r.returncode == 0, r.stderr
    funcs = {}
    for f in meta_json(kiln_bin, "frames", exe)["functions"]:
        funcs.setdefault(f["name"], []).append(f)
    probes = matched = 0
    for line in r.stdout.splitlines():
        fn, var, ra, addr, cfa = line.split()
        pc, want = int(ra) - 1, int(addr) - int(cfa)
        (f,) = [f for f in funcs[fn] if f["low"] <= pc < f["high"]]
        locs = [loc for v in f["vars"] if v["name"] == var for loc in v["locations"]
                if loc["lo"] <= pc < loc["hi"]]
        probes += 1
        wrong = [loc for loc in locs if loc["where"] == "cfa" and loc["offset"] != want]
        assert not wrong, f"{fn}.{var} at {pc:#x}: run time says cfa{want:+d}, kiln {locs}"
        if any(loc["where"] == "cfa" for loc in locs):
            matched += 1
        elif var != "vla":
            assert all(loc["where"] in ("none", "complex", "computed", "reg") for loc in locs), \
                f"{fn}.{var} at {pc:#x}: {locs}"
    assert probes > 100
    # Most probes must find their slot: GCC -O2 leaves about a fifth of these
    # variables without a frame location at the probe PC.
    assert matched >= 0.75 * probes, f"only {matched} of {probes} probes at a CFA offset"

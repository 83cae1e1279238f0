"""`--format c` output compiles with `cc -shared` into BINARY-meta.so, and the
tables read back through dlopen() (ctypes) match the JSON output."""
import ctypes as C

import pytest

from conftest import run
from meta_util import FIXTURES, cc, meta_json

U64, I64, U32, I32, STR = C.c_uint64, C.c_int64, C.c_uint32, C.c_int32, C.c_char_p


class Type(C.Structure):
    _fields_ = [("id", U64), ("kind", STR), ("name", STR), ("size", U64), ("ref", U64),
                ("first_member", U32), ("nmembers", U32), ("flags", U32)]


class Member(C.Structure):
    _fields_ = [("name", STR), ("type", U64), ("bit_offset", U64), ("bit_size", U32), ("is_base", U32),
                ("value", I64)]


class Extra(C.Structure):
    _fields_ = [("name", STR), ("addr", U64), ("size", U64), ("kind", I32)]


class Sys(C.Structure):
    _fields_ = [("addr", U64), ("function", STR), ("offset", U64), ("insn", STR)]


class Frame(C.Structure):
    _fields_ = [("name", STR), ("low", U64), ("high", U64), ("first_var", U32), ("nvars", U32)]


class FVar(C.Structure):
    _fields_ = [("name", STR), ("type", U64), ("is_formal", I32), ("first_loc", U32), ("nlocs", U32)]


class FLoc(C.Structure):
    _fields_ = [("lo", U64), ("hi", U64), ("kind", I32), ("reg", I32), ("offset", I64)]


def table(lib, name, struct, count):
    return (struct * count).in_dll(lib, name)


def s(b):
    return b.decode() if b is not None else None


@pytest.mark.parametrize("prog", ["frames.c", "enums.cc", "layouts.cc"])
def test_meta_so_matches_json(kiln_bin, tmp_path, prog):
    exe = cc(tmp_path / "prog", [FIXTURES / prog], ["-g", "-O1"] + (["-std=c++20"] if prog == "layouts.cc" else []),
             compiler="g++" if prog.endswith(".cc") else "gcc")
    out = tmp_path / "c"
    out.mkdir()
    r = run([kiln_bin, "meta", "all", exe, "--format", "c", "--out-dir", out])
    assert r.returncode == 0, r.stderr
    so = tmp_path / "prog-meta.so"
    r = run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", "-o", so] + sorted(out.glob("*.c")))
    assert r.returncode == 0, r.stderr
    lib = C.CDLL(str(so))

    types = meta_json(kiln_bin, "types", exe)["types"]
    ntypes = U32.in_dll(lib, "kiln_meta_ntypes").value
    assert ntypes == len(types)
    ct = table(lib, "kiln_meta_types", Type, ntypes)
    cm = table(lib, "kiln_meta_members", Member, U32.in_dll(lib, "kiln_meta_nmembers").value)
    for j, c in zip(types, ct):
        assert f"{c.id:016x}" == j["id"] and s(c.kind) == j["kind"] and s(c.name) == j.get("name")
        assert c.size == j.get("size", 2**64 - 1)
        assert (f"{c.ref:016x}" if c.ref else None) == j.get("type")
        assert bool(c.flags & 1) == j.get("unsigned", False)
        mems = cm[c.first_member:c.first_member + c.nmembers]
        if j["kind"] in ("struct", "union", "class"):
            # a virtual base: is_base 2, no offset, its vtable entry in value;
            # then its offsets in a complete object: is_base 3
            assert [(s(m.name), m.bit_offset, m.bit_size, m.is_base, m.value) for m in mems] == \
                [(m["name"], 2**64 - 1 if m.get("virtual") else m.get("bit_offset", m["offset"] * 8),
                  m.get("bit_size", 0), 2 if m.get("virtual") else int(m.get("base", False)),
                  m.get("vtable_offset", 0)) for m in j["members"]] + \
                [(None, v["offset"] * 8, 0, 3, 0) for v in j.get("virtual_bases", [])]
            assert [f"{m.type:016x}" for m in mems if m.is_base == 3] == \
                [v["type"] for v in j.get("virtual_bases", [])]
        elif j["kind"] == "enum":
            # an unsigned enum's values are the int64_t's bits
            assert [(s(m.name), m.value % 2**64 if c.flags & 1 else m.value) for m in mems] == \
                [(e["name"], e["value"]) for e in j["enumerators"]]

    extras = meta_json(kiln_bin, "extrasyms", exe)["extrasyms"]
    ce = table(lib, "kiln_meta_extrasyms", Extra, U32.in_dll(lib, "kiln_meta_nextrasyms").value)
    kinds = ["object", "function", "function_part"]
    assert [(s(e.name), e.addr, e.size, kinds[e.kind]) for e in ce] == \
        [(e["name"], e["addr"], e["size"], e["kind"]) for e in extras]

    sysc = meta_json(kiln_bin, "syscalls", exe)["syscalls"]
    cs = table(lib, "kiln_meta_syscalls", Sys, U32.in_dll(lib, "kiln_meta_nsyscalls").value)
    assert [(c.addr, s(c.function), s(c.insn)) for c in cs] == \
        [(x["addr"], x["function"], x["insn"]) for x in sysc]

    frames = meta_json(kiln_bin, "frames", exe)["functions"]
    nf = U32.in_dll(lib, "kiln_meta_nframes").value
    assert nf == len(frames) and nf > (5 if prog == "frames.c" else 0)
    cf = table(lib, "kiln_meta_frames", Frame, nf)
    nvars = sum(f.nvars for f in cf)
    cv = table(lib, "kiln_meta_frame_vars", FVar, nvars)
    cl = table(lib, "kiln_meta_frame_locs", FLoc, sum(v.nlocs for v in cv))
    kinds = ["cfa", "reg", "static", "breg", "computed", "complex", "none"]
    for f, j in zip(cf, frames):
        assert (s(f.name), f.low, f.high) == (j["name"], j["low"], j["high"])
        for v, jv in zip(cv[f.first_var:f.first_var + f.nvars], j["vars"]):
            assert s(v.name) == jv["name"] and bool(v.is_formal) == (jv["kind"] == "formal")
            locs = cl[v.first_loc:v.first_loc + v.nlocs]
            assert [(x.lo, x.hi, kinds[x.kind]) for x in locs] == \
                [(x["lo"], x["hi"], x["where"]) for x in jv["locations"]]


def test_makefile_meta_pipeline(kiln_bin, tmp_path):
    """examples/Makefile.meta: one rule per tool, then cc -shared."""
    root = FIXTURES.parents[2]
    exe = cc(tmp_path / "prog", [FIXTURES / "statics.c"], ["-g", "-O0"])
    r = run(["make", "-s", "-f", root / "examples" / "Makefile.meta", f"KILN={kiln_bin}",
             "prog-meta.so"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lib = C.CDLL(str(tmp_path / "prog-meta.so"))
    names = {s(t.name) for t in table(lib, "kiln_meta_types", Type,
                                       U32.in_dll(lib, "kiln_meta_ntypes").value)}
    assert "int" in names and "double" in names
    frames = table(lib, "kiln_meta_frames", Frame, U32.in_dll(lib, "kiln_meta_nframes").value)
    assert {"fx_add", "fx_fill", "main"} <= {s(f.name) for f in frames}

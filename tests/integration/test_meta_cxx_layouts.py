"""`kiln meta types` on C++ layouts (meta_fixtures/layouts.cc: virtual and
multiple inheritance, empty bases, [[no_unique_address]], templates,
anonymous unions) against the compiled program's own run-time view: sizeof,
member offsets, base offsets, and where each virtual base sits in a complete
object (static_cast on a complete object), with g++ and clang++."""
import pytest

from conftest import run
from meta_util import FIXTURES, Types, meta_json


@pytest.fixture(scope="module", params=[("g++", 4), ("g++", 5), ("clang++", 4), ("clang++", 5)],
                ids=lambda p: f"{p[0]}-dwarf{p[1]}")
def layout(request, tmp_path_factory, kiln_bin):
    compiler, dwarf = request.param
    exe = tmp_path_factory.mktemp("layouts") / "layouts"
    r = run([compiler, f"-gdwarf-{dwarf}", "-O0", "-std=c++20", "-o", exe, FIXTURES / "layouts.cc"])
    assert r.returncode == 0, r.stderr
    facts = [line.split() for line in run([exe]).stdout.splitlines()]
    assert len(facts) > 60
    return exe, facts, Types(meta_json(kiln_bin, "types", exe))


def struct(types, name):
    found = [t for t in types.by_name.get(("struct", name), []) if not t.get("declaration")]
    assert len(found) == 1, (name, found)
    return found[0]


def test_sizes_members_and_bases(layout):
    _, facts, types = layout
    checked = 0
    for f in facts:
        if f[0] == "size":
            assert struct(types, f[1])["size"] == int(f[2]), f
        elif f[0] == "off":
            assert types.path(struct(types, f[1]), f[2]) == (int(f[3]) * 8, 0), f
        elif f[0] == "base":
            t = struct(types, f[1])
            bases = {types.by_id[m["type"]]["name"]: m["offset"] for m in t["members"]
                     if m.get("base") and not m.get("virtual")}
            assert bases[f[2]] == int(f[3]), (f, bases)
        else:
            continue
        checked += 1
    assert checked > 50


def test_virtual_bases_are_marked_virtual_with_a_vtable_entry(layout):
    _, facts, types = layout
    for name, vb in (("B", "A"), ("C", "A"), ("F", "E"), ("G", "V1"), ("G", "V2"), ("J", "Empty"),
                     ("TV<int>", "A")):
        t = struct(types, name)
        (m,) = [m for m in t["members"] if m.get("base") and types.by_id[m["type"]]["name"] == vb]
        assert m["virtual"] is True and "offset" not in m, m
        # the vbase offset sits before the vtable's address point, 8-byte entries
        assert m["vtable_offset"] < 0 and m["vtable_offset"] % 8 == 0, m
    # a class without virtual bases has none
    assert "virtual_bases" not in struct(types, "N")
    assert all(not m.get("virtual") for m in struct(types, "N")["members"])


def test_virtual_base_offsets_in_complete_objects(layout):
    _, facts, types = layout
    want = {}
    for f in facts:
        if f[0] == "vbase":
            want.setdefault(f[1], {})[f[2]] = int(f[3])
    assert len(want) >= 12
    for name, offs in want.items():
        t = struct(types, name)
        got = {types.by_id[v["type"]]["name"]: v["offset"] for v in t.get("virtual_bases", [])}
        assert got == offs, (name, got, offs)


def test_text_format_says_virtual(kiln_bin, layout):
    exe, _, _ = layout
    out = run([kiln_bin, "meta", "types", exe]).stdout
    block = out.split(" struct D size=56 ")[1].split("\n0")[0]
    assert "virtual_base offset=40 type=" in block and "(struct A)" in block
    assert "  base virtual vtable_offset=-24 type=" in out

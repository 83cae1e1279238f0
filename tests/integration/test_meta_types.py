"""`kiln meta types` against oracles nobody here wrote: the compiler (sizeof,
offsetof, bitfield positions observed at run time) and pahole."""
import re
import sys

import pytest

from conftest import run
from meta_util import FIXTURES, Types, cc, meta_json

sys.path.insert(0, str(FIXTURES))
import gen_structs  # noqa: E402

NSTRUCTS = 150


def build(tmp_path, dwarf, seed=7, compiler="gcc"):
    gen = gen_structs.Gen(seed, NSTRUCTS).run()
    (tmp_path / "structs.h").write_text(gen_structs.header(gen))
    (tmp_path / "checker.c").write_text(gen_structs.checker(gen))
    for tag in ("a", "b", "c"):
        (tmp_path / f"cu_{tag}.c").write_text(gen_structs.user_cu(gen, tag))
    exe = cc(tmp_path / "checker", ["checker.c", "cu_a.c", "cu_b.c", "cu_c.c"],
             [f"-gdwarf-{dwarf}", "-O0"], cwd=tmp_path, compiler=compiler)
    return gen, exe


def compiler_facts(exe):
    sizes, offs, bits = {}, {}, {}
    out = run([exe])
    assert out.returncode == 0
    for line in out.stdout.splitlines():
        f = line.split()
        if f[0] == "size":
            sizes[f[1]] = int(f[2])
        elif f[0] == "off":
            offs[(f[1], f[2])] = int(f[3])
        else:
            bits[(f[1], f[2])] = (int(f[3]), int(f[4]))
    return sizes, offs, bits


@pytest.mark.parametrize("dwarf", [4, 5])
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_sizes_offsets_bitfields_match_the_compiler(kiln_bin, tmp_path, dwarf, compiler):
    gen, exe = build(tmp_path, dwarf, compiler=compiler)
    sizes, offs, bits = compiler_facts(exe)
    types = Types(meta_json(kiln_bin, "types", exe))
    checked = 0
    for name, fields in gen.structs:
        found = types.by_name.get(("struct", name), [])
        # Three CUs each describe every struct: deduplicated to one type.
        assert len(found) == 1, f"struct {name}: {len(found)} entries"
        t = found[0]
        assert t["size"] == sizes[name], f"sizeof(struct {name})"
        for path, is_bitfield in fields:
            bit, width = types.path(t, path)
            if is_bitfield and width == 0:
                # a bitfield as wide as its type is laid out, and described,
                # as a plain member
                want_bit, want_width = bits[(name, path)]
                assert bit == want_bit and types.member_size(t, path) * 8 == want_width, \
                    f"{name}.{path} full-width bitfield"
            elif is_bitfield:
                assert (bit, width) == bits[(name, path)], f"{name}.{path} bits"
            else:
                assert bit % 8 == 0 and bit // 8 == offs[(name, path)], f"offsetof({name}, {path})"
            checked += 1
    assert checked > 500


def parse_pahole(text):
    """{struct: (size, {member: (byte offset, bit or None)})} for top-level members."""
    out, cur, depth = {}, None, 0
    member = re.compile(r"^\t(?:.*?[\s*])?\(?\*?(\w+)\)?(?:\([^)]*\))?(?:\[\d+\])*(?::\d+)?;"
                        r"\s*/\*\s*(\d+)(?::\s*(\d+))?\s+\d+\s*\*/")
    for line in text.splitlines():
        m = re.match(r"^struct (\w+) \{$", line)
        if m:
            cur, depth, out[m.group(1)] = m.group(1), 1, [None, {}]
            continue
        if cur is None:
            continue
        if depth == 1:
            mm = member.match(line)
            if mm:
                out[cur][1][mm.group(1)] = (int(mm.group(2)),
                                            int(mm.group(3)) if mm.group(3) else None)
            sz = re.search(r"/\* size: (\d+),", line)
            if sz:
                out[cur][0] = int(sz.group(1))
        depth += line.count("{") - line.count("}")
        if depth == 0:
            cur = None
    return out


def test_agrees_with_pahole(kiln_bin, tmp_path):
    gen, exe = build(tmp_path, 4, seed=11)
    ph = run(["pahole", "-F", "dwarf", exe])
    assert ph.returncode == 0, ph.stderr
    ref = parse_pahole(ph.stdout)
    types = Types(meta_json(kiln_bin, "types", exe))
    compared = 0
    for name, _ in gen.structs:
        assert name in ref, f"pahole did not print struct {name}"
        size, members = ref[name]
        (t,) = types.by_name[("struct", name)]
        assert t["size"] == size, f"struct {name} size vs pahole"
        for mname, (off, bit) in members.items():
            got_bit, width = types.path(t, mname)
            if bit is None:
                assert got_bit == off * 8, f"{name}.{mname} offset vs pahole"
            else:  # pahole: storage unit offset + bit from its LSB
                assert got_bit == off * 8 + bit, f"{name}.{mname} bit vs pahole"
            compared += 1
    assert compared > 300


def test_same_name_different_layout_stays_two_types(kiln_bin, tmp_path):
    (tmp_path / "a.c").write_text("struct dup { int a; }; struct same { int x; char y; };\n"
                                  "struct dup da; struct same sa;\nint main(void) { return 0; }\n")
    (tmp_path / "b.c").write_text("struct dup { long b; int c; }; struct same { int x; char y; };\n"
                                  "struct dup db; struct same sb;\n")
    exe = cc(tmp_path / "p", [tmp_path / "a.c", tmp_path / "b.c"], ["-g"])
    types = Types(meta_json(kiln_bin, "types", exe))
    dups = sorted(t["size"] for t in types.by_name[("struct", "dup")])
    assert dups == [4, 16]
    assert len(types.by_name[("struct", "same")]) == 1
    # Stable ids: the same struct in another binary has the same id.
    exe2 = cc(tmp_path / "p2", [tmp_path / "b.c", tmp_path / "a.c"], ["-g"])
    types2 = Types(meta_json(kiln_bin, "types", exe2))
    assert types.by_name[("struct", "same")][0]["id"] == types2.by_name[("struct", "same")][0]["id"]


def test_self_referential_and_mutually_recursive_types(kiln_bin, tmp_path):
    src = ("struct node { struct node *next; struct other *o; int v; };\n"
           "struct other { struct node *back; double d; };\n"
           "static struct node n1 __attribute__((used)); static struct other o1 __attribute__((used));\n")
    (tmp_path / "x.c").write_text(src + "int main(void) { return 0; }\n")
    (tmp_path / "y.c").write_text(src)
    exe = cc(tmp_path / "p", [tmp_path / "x.c", tmp_path / "y.c"], ["-g"])
    types = Types(meta_json(kiln_bin, "types", exe))
    (node,) = types.by_name[("struct", "node")]
    (other,) = types.by_name[("struct", "other")]
    nxt = types.by_id[node["members"][0]["type"]]
    assert nxt["kind"] == "pointer" and nxt["type"] == node["id"]
    back = types.by_id[other["members"][0]["type"]]
    assert back["type"] == node["id"]


def test_cxx_base_classes_match_the_compiler(kiln_bin, tmp_path):
    exe = tmp_path / "classes"
    r = run(["g++", "-g", "-O0", "-Wno-invalid-offsetof", "-o", exe, FIXTURES / "classes.cc"])
    assert r.returncode == 0, r.stderr
    facts = [line.split() for line in run([exe]).stdout.splitlines()]
    types = Types(meta_json(kiln_bin, "types", exe))
    for f in facts:
        (t,) = types.by_name[("struct", f[1])]
        if f[0] == "size":
            assert t["size"] == int(f[2]), f
        elif f[0] == "off":  # members of bases are reached through the bases
            assert types.path(t, f[2]) == (int(f[3]) * 8, 0), f
        else:
            bases = {types.by_id[m["type"]]["name"]: m["offset"] for m in t["members"] if m.get("base")}
            assert bases[f[2]] == int(f[3]), (f, bases)
    (derived,) = types.by_name[("struct", "Derived")]
    assert "counter" not in [m["name"] for m in derived["members"]]


def test_declared_vs_defined_pointee_is_one_type(kiln_bin, tmp_path):
    """struct foo from a CU where struct bar is only declared and from one
    where it is defined: one struct foo, whose member points at bar's
    definition."""
    (tmp_path / "a.c").write_text("struct bar; typedef struct bar bar_t;\n"
                                  "struct foo { bar_t *b; int x; };\n"
                                  "struct foo fa; int main(void) { return 0; }\n")
    (tmp_path / "b.c").write_text("struct bar { long y; }; typedef struct bar bar_t;\n"
                                  "struct foo { bar_t *b; int x; };\n"
                                  "struct foo fb; struct bar bb;\n")
    exe = cc(tmp_path / "p", [tmp_path / "a.c", tmp_path / "b.c"], ["-g"])
    types = Types(meta_json(kiln_bin, "types", exe))
    (foo,) = types.by_name[("struct", "foo")]
    bars = types.by_name[("struct", "bar")]
    (bar_def,) = [t for t in bars if not t.get("declaration")]
    assert bar_def["size"] == 8
    ptr = types.by_id[foo["members"][0]["type"]]
    assert ptr["kind"] == "pointer"
    assert types.strip(ptr["type"])["id"] == bar_def["id"]


def test_debug_types_section_gives_the_same_types(kiln_bin, tmp_path):
    """DWARF 4 type units (.debug_types, whose DIE offsets overlap those of
    .debug_info) describe the same types as plain DWARF 4."""
    gen = gen_structs.Gen(3, 40).run()
    (tmp_path / "structs.h").write_text(gen_structs.header(gen))
    (tmp_path / "checker.c").write_text(gen_structs.checker(gen))
    (tmp_path / "cu_a.c").write_text(gen_structs.user_cu(gen, "a"))
    srcs = ["checker.c", "cu_a.c"]
    plain = cc(tmp_path / "plain", srcs, ["-gdwarf-4"], cwd=tmp_path)
    units = cc(tmp_path / "units", srcs, ["-gdwarf-4", "-fdebug-types-section"], cwd=tmp_path)
    assert ".debug_types" in run(["readelf", "-S", units]).stdout
    ids = [{t["id"] for t in meta_json(kiln_bin, "types", b)["types"]} for b in (plain, units)]
    assert ids[0] == ids[1]
    # and every variable's type resolves to one of them
    frames = meta_json(kiln_bin, "frames", units)
    vtypes = {v["type"] for f in frames["functions"] for v in f["vars"] if v["type"]}
    assert vtypes and vtypes <= ids[1]


@pytest.mark.parametrize("compiler", ["g++", "clang++"])
@pytest.mark.parametrize("dwarf", [4, 5])
def test_enumerators_by_the_enums_signedness(kiln_bin, tmp_path, compiler, dwarf):
    """Unsigned enumerators at or above 2^63 are positive, signed ones down to
    INT64_MIN negative: as the compiled program prints them."""
    exe = tmp_path / "enums"
    r = run([compiler, f"-gdwarf-{dwarf}", "-O0", "-std=c++17", "-o", exe, FIXTURES / "enums.cc"])
    assert r.returncode == 0, r.stderr
    want = {}
    for line in run([exe]).stdout.splitlines():
        enum, name, value = line.split()
        want[(enum, name)] = int(value)
    assert want[("Big", "Top")] == 2**63 and want[("Neg", "Min")] == -2**63
    types = Types(meta_json(kiln_bin, "types", exe))
    got = {}
    for enum in {e for e, _ in want}:
        (t,) = types.by_name[("enum", enum)]
        assert t.get("unsigned", False) == (enum in ("Big", "Small") or
                                            (enum == "Plain" and "unsigned" in
                                             types.strip(t["type"])["name"])), t
        for e in t["enumerators"]:
            got[(enum, e["name"])] = e["value"]
    assert got == want
    text = run([kiln_bin, "meta", "types", exe]).stdout
    assert "enumerator Max value=18446744073709551615" in text
    assert "enumerator Min value=-9223372036854775808" in text


@pytest.mark.parametrize("flags", [["gcc", "-gdwarf-2", "-gstrict-dwarf"], ["clang", "-gdwarf-2"],
                                   ["gcc", "-gdwarf-4"], ["clang", "-gdwarf-5"]],
                         ids=["gcc-strict-dwarf2", "clang-dwarf2", "gcc-dwarf4", "clang-dwarf5"])
def test_c_enumerators_by_the_enums_signedness(kiln_bin, tmp_path, flags):
    """C enums, also where the DWARF gives an enum no underlying type (DWARF
    2): its enumerators' forms tell the signedness. Values as the compiled
    program prints them, converted to their enum type."""
    exe = tmp_path / "enums"
    r = run([*flags, "-O0", "-o", exe, FIXTURES / "enums.c"])
    assert r.returncode == 0, r.stderr
    want = {}
    for line in run([exe]).stdout.splitlines():
        var, name, value = line.split()
        want[(var, name)] = int(value)
    assert want[("b", "TOP")] == 2**63 and want[("b", "MAX")] == 2**64 - 1 and want[("n", "MIN")] == -2**63
    types = Types(meta_json(kiln_bin, "types", exe))
    got = {}
    for var, enum in (("b", "big"), ("n", "neg"), ("s", "small")):
        (t,) = types.by_name[("enum", enum)]
        if enum != "small":  # (small's values read the same either way)
            assert t.get("unsigned", False) == (enum == "big"), t
        for e in t["enumerators"]:
            got[(var, e["name"])] = e["value"]
    assert got == want
    text = run([kiln_bin, "meta", "types", exe]).stdout
    assert "enumerator MAX value=18446744073709551615" in text
    assert "enumerator MIN value=-9223372036854775808" in text


def test_one_type_by_name_as_pahole_C(kiln_bin, tmp_path):
    """--type NAME: the types of that name only, with the same entries as the
    full listing, sizes and offsets as pahole -C NAME prints them."""
    gen, exe = build(tmp_path, 4, seed=5)
    full = Types(meta_json(kiln_bin, "types", exe))
    name = gen.structs[3][0]
    r = run([kiln_bin, "meta", "types", exe, "--type", f"struct {name}", "--json"])
    assert r.returncode == 0, r.stderr
    doc = __import__("json").loads(r.stdout)
    assert [t["id"] for t in doc["types"]] == [t["id"] for t in full.by_name[("struct", name)]]
    assert doc["types"] == full.by_name[("struct", name)]
    ph = run(["pahole", "-F", "dwarf", "-C", name, exe])
    assert ph.returncode == 0, ph.stderr
    size, members = parse_pahole(ph.stdout)[name]
    (t,) = doc["types"]
    assert t["size"] == size
    for m in t["members"]:
        if m["name"] in members and "bit_size" not in m:
            assert m["offset"] == members[m["name"]][0]
    # text: a header naming the selection, then the type's own lines
    r = run([kiln_bin, "meta", "types", exe, "-t", name])
    assert r.returncode == 0, r.stderr
    head, first = r.stdout.splitlines()[:2]
    assert head.endswith(f"--type '{name}': 1 of {len(full.by_id)} types")
    assert f" struct {name} size={size} " in first


def test_type_by_name_typedef_kind_and_absence(kiln_bin, tmp_path):
    src = tmp_path / "t.c"
    src.write_text("struct pt { int x, y; };\ntypedef struct pt point;\n"
                   "union pt2 { int a; char b; };\nenum pt3 { A, B };\n"
                   "point p; union pt2 u; enum pt3 e;\nint main(void) { return 0; }\n")
    exe = cc(tmp_path / "t", [src], ["-g"])

    def names(spec):
        r = run([kiln_bin, "meta", "types", exe, "--type", spec, "--format", "json"])
        assert r.returncode == 0, r.stderr
        return [(t["kind"], t["name"]) for t in __import__("json").loads(r.stdout)["types"]]
    # a typedef brings the type it names
    assert names("point") == [("struct", "pt"), ("typedef", "point")] or \
        names("point") == [("typedef", "point"), ("struct", "pt")]
    assert names("struct pt") == [("struct", "pt")]
    assert names("union pt2") == [("union", "pt2")]
    assert names("enum pt3") == [("enum", "pt3")]
    r = run([kiln_bin, "meta", "types", exe, "--type", "struct pt2"])
    assert r.returncode == 1 and f"{exe}: no type named 'struct pt2'" in r.stderr
    r = run([kiln_bin, "meta", "frames", exe, "--type", "pt"])
    assert r.returncode == 2 and "--type applies to the types tool alone" in r.stderr
    # the C table of the selection is consistent on its own
    r = run([kiln_bin, "meta", "types", exe, "--type", "point", "-f", "c"])
    assert r.returncode == 0 and "kiln_meta_ntypes = 2u" in r.stdout

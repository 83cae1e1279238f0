"""Split DWARF (-gsplit-dwarf): the units live in .dwo files next to the
objects, or in a .dwp package next to the binary (dwp, llvm-dwp). The
oracle is the same program built without split DWARF: `types` and `frames`
print the same (GCC's DWARF 4 split location lists cover a few bytes less
than its plain ones, so there frames are compared by functions and
variables)."""
import shutil

import pytest

from conftest import run
from meta_util import FIXTURES, cc

SECOND = """struct pair { int a; long b; };
struct pair mkpair(int a) { struct pair p = { a, a * 2L }; return p; }
"""


def body(kiln_bin, tool, exe, cwd):
    r = run([kiln_bin, "meta", tool, exe.name], cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert "not found" not in r.stderr, r.stderr
    return r.stdout.split("\n", 1)[1]  # the first line names the binary


def build(d, compiler, dwarf, split):
    d.mkdir()
    shutil.copy(FIXTURES / "frames.c", d / "frames.c")
    (d / "second.c").write_text(SECOND)
    flags = ["-O1", f"-gdwarf-{dwarf}"] + (["-gsplit-dwarf"] if split else [])
    for src in ("frames.c", "second.c"):
        cc(d / (src[:-2] + ".o"), [src], flags + ["-c"], cwd=d, compiler=compiler)
    return cc(d / "prog", ["frames.o", "second.o"], [], cwd=d, compiler=compiler)


def names(frames_text):
    return [line.split(" type=")[0] if line.startswith("  ") else line.split(" 0x")[0]
            for line in frames_text.splitlines()]


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
@pytest.mark.parametrize("dwarf", [4, 5])
def test_split_dwarf_reads_like_plain_dwarf(kiln_bin, tmp_path, compiler, dwarf):
    plain = build(tmp_path / "plain", compiler, dwarf, False)
    split = build(tmp_path / "split", compiler, dwarf, True)
    dwos = sorted(p.name for p in split.parent.glob("*.dwo"))
    assert dwos == ["frames.dwo", "second.dwo"]
    assert ".debug_info.dwo" not in run(["readelf", "-S", split]).stdout
    want = {t: body(kiln_bin, t, plain, plain.parent) for t in ("types", "frames")}
    assert "struct pair" in want["types"] and "function mkpair" in want["frames"]

    def check(got_types, got_frames):
        assert got_types == want["types"]
        if compiler == "gcc" and dwarf == 4:
            assert names(got_frames) == names(want["frames"])
        else:
            assert got_frames == want["frames"]

    # .dwo files next to the objects
    dwo = {t: body(kiln_bin, t, split, split.parent) for t in ("types", "frames")}
    check(dwo["types"], dwo["frames"])

    # a .dwp package next to the binary, the .dwo files gone
    packers = [["llvm-dwp"]] + ([["dwp"]] if dwarf == 4 else [])  # binutils dwp: DWARF 4 only
    for packer in packers:
        pkg = tmp_path / f"pkg-{packer[0]}"
        pkg.mkdir()
        shutil.copy(split, pkg / "prog")
        r = run(packer + ["-e", split, "-o", pkg / "prog.dwp"])
        assert r.returncode == 0, r.stderr
        for p in split.parent.glob("*.dwo"):
            p.rename(p.with_suffix(".dwo.away"))
        try:
            got = {t: body(kiln_bin, t, pkg / "prog", pkg) for t in ("types", "frames")}
        finally:
            for p in split.parent.glob("*.dwo.away"):
                p.rename(p.with_suffix("").with_suffix(".dwo"))
        assert got == dwo, packer


def test_missing_split_dwarf_is_a_warning_naming_the_file(kiln_bin, tmp_path):
    split = build(tmp_path / "split", "gcc", 5, True)
    (split.parent / "second.dwo").unlink()
    r = run([kiln_bin, "meta", "types", split])
    assert r.returncode == 0
    assert "split DWARF file " in r.stderr and "second.dwo not found" in r.stderr
    assert "struct pair" not in r.stdout

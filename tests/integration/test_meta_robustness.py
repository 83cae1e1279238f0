"""Bad input: clear messages naming the file, non-zero exit when the file
cannot be processed, and never a crash, over a corpus of truncated and
bit-flipped binaries."""
import json
import random

import pytest

from conftest import run
from meta_util import FIXTURES, cc

SANITIZER_MARKS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "ThreadSanitizer")


@pytest.fixture(scope="module", params=[4, 5], ids=["dwarf4", "dwarf5"])
def sample(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("robust")
    return cc(d / "sample", [FIXTURES / "frames.c"], ["-O2", f"-gdwarf-{request.param}"]).read_bytes()


def sections(data):
    """{name: (offset, size)} from the ELF64 section header table."""
    shoff = int.from_bytes(data[0x28:0x30], "little")
    entsize, num, strndx = (int.from_bytes(data[o:o + 2], "little") for o in (0x3a, 0x3c, 0x3e))

    def hdr(i):
        h = data[shoff + i * entsize:shoff + (i + 1) * entsize]
        return (int.from_bytes(h[0:4], "little"), int.from_bytes(h[0x18:0x20], "little"),
                int.from_bytes(h[0x20:0x28], "little"))
    stroff = hdr(strndx)[1]
    out = {}
    for i in range(num):
        name, off, size = hdr(i)
        end = data.index(b"\0", stroff + name)
        out[data[stroff + name:end].decode()] = (off, size)
    return out


def corpus(data, seed=1234):
    r = random.Random(seed)
    n = len(data)
    for cut in [0, 1, 4, 16, 52, 63, 64, 65, 200, 1000, 4096] + \
               [r.randrange(n) for _ in range(40)] + [n - 1, n - 64]:
        yield f"trunc{cut}", data[:cut]
    for i in range(160):
        b = bytearray(data)
        # half the flips in the ELF/program headers area, half anywhere
        for _ in range(r.randint(1, 8)):
            pos = r.randrange(256) if i % 2 else r.randrange(n)
            b[pos] ^= 1 << r.randrange(8)
        yield f"flip{i}", bytes(b)
    # bit flips inside the DWARF and CFI that libdw parses
    secs = sections(data)
    targets = [secs[n] for n in (".debug_info", ".debug_abbrev", ".debug_loclists", ".debug_loc",
                                 ".debug_rnglists", ".debug_ranges", ".debug_str", ".eh_frame",
                                 ".debug_line")
               if n in secs and secs[n][1]]
    assert len(targets) >= 5
    for i in range(200):
        b = bytearray(data)
        off, size = targets[i % len(targets)]
        for _ in range(r.randint(1, 4)):
            pos = off + r.randrange(size)
            b[pos] ^= 1 << r.randrange(8)
        yield f"dwarf{i}", bytes(b)
    # section header table damaged: offsets and sizes
    for i in range(40):
        b = bytearray(data)
        shoff = int.from_bytes(b[0x28:0x30], "little")
        pos = shoff + r.randrange(max(1, n - shoff))
        b[pos:pos + 4] = r.randbytes(4)
        yield f"shdr{i}", bytes(b)


def test_corrupt_corpus_never_crashes(kiln_bin, tmp_path, sample):
    failures, processed = [], 0
    for name, data in corpus(sample):
        path = tmp_path / name
        path.write_bytes(data)
        out = tmp_path / f"{name}.out"
        out.mkdir()
        r = run([kiln_bin, "meta", "all", path, "--format", "json", "--out-dir", out], timeout=60)
        if r.returncode < 0 or r.returncode > 2 or any(m in r.stderr for m in SANITIZER_MARKS):
            failures.append((name, r.returncode, r.stderr[-2000:]))
            continue
        leftovers = [p.name for p in out.iterdir() if ".tmp." in p.name]
        assert not leftovers, f"{name}: half-written files left: {leftovers}"
        if r.returncode == 0:
            processed += 1
            for doc in out.glob("*.json"):  # still strict UTF-8 JSON
                json.loads(doc.read_bytes().decode("utf-8"))
        else:
            assert str(path) in r.stderr, f"{name}: message does not name the file: {r.stderr}"
        path.unlink()
    assert not failures, failures[:3]
    assert processed > 10  # many flips hit bytes nothing reads


def test_not_an_elf_file(kiln_bin, tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("just text\n")
    r = run([kiln_bin, "meta", "types", p])
    assert r.returncode == 1
    assert f"{p}: not an ELF file" in r.stderr


def test_missing_file(kiln_bin, tmp_path):
    r = run([kiln_bin, "meta", "types", tmp_path / "nope"])
    assert r.returncode == 1 and "nope: cannot open: No such file" in r.stderr


def test_no_debug_info(kiln_bin, tmp_path):
    exe = cc(tmp_path / "nodebug", [FIXTURES / "rawsys.c"], ["-O2"])
    r = run([kiln_bin, "meta", "types", exe])
    assert r.returncode == 1 and "no DWARF debug info" in r.stderr and str(exe) in r.stderr
    # syscalls needs no DWARF
    r = run([kiln_bin, "meta", "syscalls", exe])
    assert r.returncode == 0 and "raw_getpid" in r.stdout


def test_usage_errors(kiln_bin, tmp_path):
    assert run([kiln_bin, "meta", "nosuchtool", "/bin/true"]).returncode == 2
    assert run([kiln_bin, "meta", "types"]).returncode == 2
    assert run([kiln_bin, "meta", "types", "/bin/true", "--format", "xml"]).returncode == 2
    assert run([kiln_bin, "meta", "types,frames", "/bin/true", "-o", tmp_path / "x"]).returncode == 2
    r = run([kiln_bin, "meta", "--help"])
    assert r.returncode == 0 and "extrasyms" in r.stdout


def test_failed_tool_leaves_no_output_file(kiln_bin, tmp_path):
    exe = cc(tmp_path / "nodebug", [FIXTURES / "rawsys.c"], ["-O2"])
    out = tmp_path / "types.txt"
    r = run([kiln_bin, "meta", "types", exe, "-o", out])
    assert r.returncode == 1 and not out.exists() and list(tmp_path.glob("types.txt*")) == []


def test_separate_debug_file_by_debuglink(kiln_bin, tmp_path):
    exe = cc(tmp_path / "prog", [FIXTURES / "statics.c"], ["-g", "-O0"])
    dbg = tmp_path / "prog.debug"
    assert run(["objcopy", "--only-keep-debug", exe, dbg]).returncode == 0
    assert run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={dbg}", exe]).returncode == 0
    r = run([kiln_bin, "meta", "extrasyms", exe])
    assert r.returncode == 0, r.stderr
    r = run([kiln_bin, "meta", "types", exe])
    assert r.returncode == 0, r.stderr
    assert "struct <anon> size=16" in r.stdout


def test_separate_debug_file_by_build_id(kiln_bin, tmp_path):
    exe = cc(tmp_path / "prog", [FIXTURES / "statics.c"], ["-g", "-O0", "-Wl,--build-id=sha1"])
    note = run(["readelf", "-n", exe]).stdout
    build_id = next(line.split()[-1] for line in note.splitlines() if "Build ID" in line)
    root = tmp_path / "debugroot"
    dest = root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    dest.parent.mkdir(parents=True)
    assert run(["objcopy", "--only-keep-debug", exe, dest]).returncode == 0
    assert run(["objcopy", "--strip-debug", exe]).returncode == 0
    r = run([kiln_bin, "meta", "types", exe])
    assert r.returncode == 1 and "no DWARF" in r.stderr
    r = run([kiln_bin, "meta", "frames", exe, "--debug-root", root])
    assert r.returncode == 0, r.stderr
    assert "function fx_fill" in r.stdout
    # the CFI comes from the stripped binary's .eh_frame, the DWARF from the debug file
    assert "cfa-" in r.stdout


def test_deeply_nested_types_are_cut_with_a_warning(kiln_bin, tmp_path):
    """g++ nests the DIEs of nested struct types: 700 levels of them must not
    exhaust the stack; the part deeper than the limit is skipped with a warning."""
    n = 700
    src = tmp_path / "deep.cc"
    src.write_text("struct deep { " + "struct { " * n + "int x; " + "} m; " * n + "};\n"
                   "deep d;\nint main() { return 0; }\n")
    exe = tmp_path / "deep"
    r = run(["g++", "-g", "-o", exe, src])
    assert r.returncode == 0, r.stderr
    r = run([kiln_bin, "meta", "types", exe])
    assert r.returncode == 0, r.stderr
    assert "nested deeper than" in r.stderr and str(exe) in r.stderr
    assert "struct deep size=4" in r.stdout


def section_header_offset(data, name):
    """File offset of the section header of NAME (ELF64)."""
    shoff = int.from_bytes(data[0x28:0x30], "little")
    entsize, num = (int.from_bytes(data[o:o + 2], "little") for o in (0x3a, 0x3c))
    offsets = sections(data)
    for i in range(num):
        h = shoff + i * entsize
        if int.from_bytes(data[h + 0x18:h + 0x20], "little") == offsets[name][0]:
            return h
    raise AssertionError(name)


@pytest.fixture(scope="module")
def static_exe(tmp_path_factory):
    d = tmp_path_factory.mktemp("static")
    return cc(d / "rawsys", [FIXTURES / "rawsys.c"], ["-static", "-O2", "-g"])


def test_truncated_binary_is_an_error_in_every_tool(kiln_bin, tmp_path, static_exe):
    """A binary cut short is 'truncated' (exit 1) in every tool, never '0
    system call instructions' or 'no DWARF'."""
    data = static_exe.read_bytes()
    shoff = int.from_bytes(data[0x28:0x30], "little")
    info_off, info_size = sections(data)[".debug_info"]
    text_off, _ = sections(data)[".text"]
    grown = bytearray(data)  # .text's size reaches past the end of the file
    h = section_header_offset(data, ".text")
    grown[h + 0x20:h + 0x28] = (len(data) - text_off + 1).to_bytes(8, "little")
    cases = {
        "before_section_headers": (data[:shoff - 16], "the section header table"),
        "inside_section_headers": (data[:shoff + 100], "the section header table"),
        "inside_debug_info": (data[:info_off + info_size // 2], "the section header table"),
        "section_past_the_end": (bytes(grown), "section .text"),
    }
    for name, (blob, what) in cases.items():
        path = tmp_path / name
        path.write_bytes(blob)
        for tool in ("types", "frames", "extrasyms", "syscalls", "all"):
            r = run([kiln_bin, "meta", tool, path])
            assert r.returncode == 1, (name, tool, r.stdout[:200])
            assert f"{path}: truncated: {what}" in r.stderr, (name, tool, r.stderr)
            assert "system call instructions" not in r.stdout


def test_syscalls_work_when_the_dwarf_is_corrupt(kiln_bin, tmp_path, static_exe):
    """syscalls needs no DWARF: a corrupt .debug_info unit header fails the
    DWARF tools (exit 1, naming the cause) but not syscalls, whose answer is
    the same as on the intact binary and as objdump's."""
    from test_meta_syscalls import objdump_syscalls
    data = static_exe.read_bytes()
    info_off, _ = sections(data)[".debug_info"]
    intact = run([kiln_bin, "meta", "syscalls", static_exe, "--format", "json"])
    assert intact.returncode == 0, intact.stderr
    want = [(s["addr"], s["function"], s["insn"]) for s in json.loads(intact.stdout)["syscalls"]]
    assert {a for a, _, _ in want} == set(objdump_syscalls(static_exe))
    for name, patch in (("bad_length", (0, b"\xf0\xff\xff\xff")), ("bad_version", (4, b"\x09\x00"))):
        b = bytearray(data)
        at, raw = patch
        b[info_off + at:info_off + at + len(raw)] = raw
        path = tmp_path / name
        path.write_bytes(bytes(b))
        r = run([kiln_bin, "meta", "syscalls", path, "--format", "json"])
        assert r.returncode == 0, (name, r.stderr)
        assert [(s["addr"], s["function"], s["insn"]) for s in json.loads(r.stdout)["syscalls"]] == want
        for tool in ("types", "frames", "extrasyms"):
            r = run([kiln_bin, "meta", tool, path])
            assert r.returncode == 1 and f"{path}: corrupt DWARF" in r.stderr, (name, tool, r.stderr)
            assert f"'{tool}' needs it" in r.stderr

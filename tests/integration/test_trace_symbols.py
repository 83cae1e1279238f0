"""Symbol hygiene (issue 9, class 10): the preload library is loaded into
every build process, so it exports its hooks and nothing else. Its internals
(kiln_ask, shmmap_*, the ipc helpers, test hooks) must never be visible to,
or collide with, a program's own symbols."""
import os
import pathlib
import re
import subprocess

from conftest import ROOT, run
from tracefix import PRELOAD

HOOKS = ROOT / "src" / "trace" / "hooks"


def exported(lib):
    out = run(["nm", "-D", "--defined-only", lib], check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def hook_names():
    """Independently of the generator: names in hooks.def and every
    KT_EXPORT definition of the hand-written hook files."""
    text = (HOOKS / "hooks.def").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    names = set(re.findall(r"^KT_HOOK\([^,]+,\s*(\w+)\s*,", text, flags=re.M))
    names |= set(re.findall(r"^KT_HOOK_(?:OPEN2?|CREAT|STAT|ACCESS)\(\s*(\w+)\s*,", text, flags=re.M))
    names |= set(re.findall(r"^KT_HOOK_GLIBC\([^,]+,\s*(\w+)\s*,", text, flags=re.M))
    names |= set(re.findall(r"^KT_HOOK_GLIBC_VOID\(\s*(\w+)\s*,", text, flags=re.M))
    for c in HOOKS.glob("*.c"):
        names |= set(re.findall(r"^KT_EXPORT\b[^(]*?(\w+)\(", c.read_text(), flags=re.M))
    return names


def default_visibility_symbols(obj):
    """Global defined symbols of an object file with default visibility."""
    out = run(["readelf", "-Ws", obj], check=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 8 and f[4] == "GLOBAL" and f[5] == "DEFAULT" and f[6] != "UND":
            names.add(f[7])
    return names


def test_only_hooks_are_exported():
    got = exported(PRELOAD)
    want = hook_names()
    assert len(want) > 140
    assert got == want, (f"exported but not a hook: {sorted(got - want)}; "
                         f"hook not exported: {sorted(want - got)}")


def test_no_internal_name_is_exported():
    got = exported(PRELOAD)
    leaked = {s for s in got if s.startswith(("kiln_", "kt_", "shm", "shm_eb_"))}
    assert not leaked, sorted(leaked)


def test_every_default_visibility_hook_object_symbol_is_exported(build_dir):
    """A hook written by hand with a form the generator misses would be
    silently local (never called): every default-visibility function of the
    hook objects must be in the dynamic table."""
    objs = sorted((build_dir / "obj-nosan" / "src" / "trace" / "hooks").glob("*.o"))
    assert objs, "preload objects not built"
    want = set()
    for o in objs:
        want |= default_visibility_symbols(o)
    missing = want - exported(PRELOAD)
    assert not missing, sorted(missing)


def test_string_functions_are_the_librarys_own():
    """The library's string and memory functions are its own
    (src/trace/hooks/string.c), bound locally: not imported from libc, whose
    lazy binding and IFUNC variants would cost every traced process page
    faults, and not exported to the programs it is loaded into."""
    own = {"memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strchr",
           "strrchr", "strcmp", "strncmp", "strcspn", "strstr"}
    out = run(["nm", "-D", "--undefined-only", PRELOAD], check=True).stdout
    imported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    assert not own & imported, sorted(own & imported)
    assert not own & exported(PRELOAD)
    local = run(["nm", PRELOAD], check=True).stdout
    defined = {f[2] for f in (line.split() for line in local.splitlines()) if len(f) == 3 and f[1] == "t"}
    assert own <= defined, sorted(own - defined)


def test_program_symbols_named_like_kiln_internals_are_its_own(tmp_path):
    """A program defining kiln_ask, shmmap_lookup and kiln_msg_send gets its
    own functions, and the library still checks its opens."""
    src = tmp_path / "clash.c"
    src.write_text(r'''
#include <fcntl.h>
#include <stdio.h>
int kiln_ask(void) { return 41; }
int shmmap_lookup(void) { return 42; }
int kiln_msg_send(void) { return 43; }
int shmmap_test_set_hash(void) { return 44; }
int main(int argc, char **argv) {
    printf("%d %d %d %d\n", kiln_ask(), shmmap_lookup(), kiln_msg_send(), shmmap_test_set_hash());
    return open(argv[1], O_RDONLY) < 0 ? 3 : 0;
}
''')
    exe = tmp_path / "clash"
    # -rdynamic: the program's symbols are in its own dynamic table, where a
    # library exporting the same names would have interposed on it.
    run(["cc", "-rdynamic", "-o", exe, src], check=True)
    env = dict(os.environ, LD_PRELOAD=str(PRELOAD), KILN_SOCKET=str(tmp_path / "none.sock"))
    r = subprocess.run([str(exe), "/etc/passwd"], env=env, capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["41", "42", "43", "44"]
    # No server: the hook ran and failed closed (EIO), proving it is active.
    assert r.returncode == 3
    assert "kiln" in r.stderr


def sections(lib):
    """{name: (address, size)} of the library's sections."""
    out = run(["readelf", "-SW", lib], check=True).stdout
    got = {}
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]{16})\s+[0-9a-f]+\s+([0-9a-f]+)", out):
        got[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return got


def test_the_code_every_process_runs_is_packed_in_one_window():
    # src/trace/hot-text.ld: what a traced process runs (its constructors,
    # the checks, the cache lookup, the common hooks, the fork hook) and the
    # read-only data right after the PLT, so that a process faults its
    # code in by one or two 64 KiB windows, not by one per source file.
    sec = sections(PRELOAD)
    assert ".text.kiln_hot" in sec and ".rodata.kiln_hot" in sec, sorted(sec)
    start, size = sec[".text.kiln_hot"]
    rstart, rsize = sec[".rodata.kiln_hot"]
    assert rstart >= start + size and rstart + rsize - sec[".plt"][0] < 64 * 1024
    out = run(["nm", PRELOAD], check=True).stdout
    addr = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            addr.setdefault(f[2], int(f[0], 16))
    core = ["kt_constructor", "kt_check_loaded", "kt_init", "kt_check", "kt_ask_question",
            "kt_path_at_tail", "append_components", "kt_cache_ask", "shmmap_lookup",
            "shmmap_hash_default", "attach", "attach_counters", "kt_open_bound", "open",
            "open64", "stat", "access", "fopen", "fork", "kt_client_after_fork", "strlen",
            "memcmp",
            # each was the one function of a later 64 KiB window that a
            # process of GNU hello's configure ran (0.75 page faults a
            # process): every stat checks plain(), every process that asks
            # marks its pid, an AREA answer checks for symlinks
            "plain", "set_pid_bit", "kt_no_symlinks", "recall_told"]
    outside = [n for n in core if not start <= addr.get(n, -1) < start + size]
    assert not outside, f"not in .text.kiln_hot: {outside}"

"""access(W_OK) and its relatives are probes, not writes (issue 12, item 5):
outside the writable areas an existing file answers EACCES, as it does in a
chroot for a build user who is not root, a missing one ENOENT as the kernel
says, a hidden one ENOENT as a missing one; they are reported as write
probes, not refused writes, and --strict does not count them. As root and
as nobody; the answers for missing paths are compared with the kernel's own
(the same probe without kiln)."""
import json
import os
import subprocess
import sys

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
libc.faccessat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
for label, p in zip(sys.argv[1::2], sys.argv[2::2]):
    call(f"{label}:access", libc.access(b(p), os.W_OK))
    call(f"{label}:faccessat", libc.faccessat(-100, b(p), os.W_OK, 0))
    call(f"{label}:faccessat-eaccess", libc.faccessat(-100, b(p), os.W_OK, 0x200))
    call(f"{label}:eaccess", libc.eaccess(b(p), os.W_OK))
    call(f"{label}:euidaccess", libc.euidaccess(b(p), os.W_OK))
    call(f"{label}:syscall-faccessat2", libc.syscall(439, -100, b(p), os.W_OK, 0))
    print(f"{label}:test-w", "OK" if os.system(f"test -w '{p}'") == 0 else "FALSE", flush=True)
'''


def probe(w, pairs, *trace_args, traced=True):
    script = os.path.join(w.build, "wprobe.py")
    with open(script, "w") as f:
        f.write(PROBE)
    args = [x for pair in pairs for x in pair]
    if traced:
        r = w.run(*trace_args, "--json", "-o", os.path.join(w.build, "r.json"), command=["python3", script, *args])
    else:
        r = subprocess.run([*w.runas, sys.executable, script, *args], cwd=w.build, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    return r, got


def test_write_probes_answer_as_for_a_build_user(uworld):
    inc = uworld.inc
    pairs = [("ro", os.path.join(inc, "dep.h")), ("missing", os.path.join(inc, "nothere.h")),
             ("hidden", os.path.join(inc, "foo.h")), ("rw", uworld.build)]
    r, got = probe(uworld, pairs)
    assert r.returncode == 0, r.stderr[-2000:]
    calls = sorted({k.split(":", 1)[1] for k in got})
    assert len(calls) == 7, calls
    for c in calls:
        shell = c == "test-w"
        assert got[f"ro:{c}"] == ("FALSE" if shell else "EACCES"), (c, got)
        assert got[f"missing:{c}"] == ("FALSE" if shell else "ENOENT"), (c, got)
        assert got[f"hidden:{c}"] == ("FALSE" if shell else "ENOENT"), (c, got)
        assert got[f"rw:{c}"] == "OK", (c, got)
    # The kernel's own answer for the missing file, without kiln.
    _, plain = probe(uworld, pairs[1:2], traced=False)
    for c in calls:
        assert plain[f"missing:{c}"] == got[f"missing:{c}"], c
    with open(os.path.join(uworld.build, "r.json")) as f:
        rep = json.load(f)
    assert rep["refused_writes"] == []
    assert [p["path"] for p in rep["write_probes"]] == [os.path.join(inc, "dep.h")]
    assert rep["totals"]["write_probes"] == 1 and rep["totals"]["violations"] == 1  # foo.h hidden
    assert "write probes (access W_OK" in r.stderr
    assert "refused writes: 0" in r.stderr
    # --strict counts hidden files and refused writes, not probes.
    r, _ = probe(uworld, [pairs[0], pairs[1]], "--strict")
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_real_write_is_still_refused(uworld):
    script = os.path.join(uworld.build, "w.py")
    with open(script, "w") as f:
        f.write(PROBE_PRELUDE + "show('open-w', lambda: os.open(sys.argv[1], os.O_WRONLY))\n")
    r = uworld.run("--strict", "--json", "-o", os.path.join(uworld.build, "r.json"),
                   command=["python3", script, os.path.join(uworld.inc, "dep.h")])
    assert r.stdout.split() == ["open-w", "EACCES"]
    assert r.returncode == 1
    with open(os.path.join(uworld.build, "r.json")) as f:
        rep = json.load(f)
    assert [p["path"] for p in rep["refused_writes"]] == [os.path.join(uworld.inc, "dep.h")]
    assert rep["write_probes"] == []

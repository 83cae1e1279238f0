"""The dynamic loader (issue 9, class 6): a hidden library is not loaded
when the loader searches for it, whichever way: named in DT_NEEDED and found
through RPATH or LD_LIBRARY_PATH, named in LD_PRELOAD after kiln's, or
dlopen'ed by bare name. Each is compared with the same call on a library
that really does not exist in the same place: the loader's own message and
status 127 (for LD_PRELOAD: "ignored", and the program runs). A search goes
on past a hidden copy to a visible one, as past a missing file. As root and
as nobody.

The library, libhid.so.1, is built here twice: one copy in a directory of
libfoo-dev (not declared: hidden), one in the build directory (visible);
`which()` says which copy was loaded."""
import os
import subprocess

import pytest

from runas import uworld  # noqa: F401 (fixture)
from tracefix import BUILD

LIB = r'''
const char *which(void) { return WHICH; }
'''
PROG = r'''
#include <stdio.h>
const char *which(void);
int main(void)
{
	printf("which: %s\n", which());
	return 0;
}
'''
DLPROG = r'''
#include <dlfcn.h>
#include <stdio.h>
int main(void)
{
	void *h = dlopen("libhid.so.1", RTLD_NOW);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	printf("dlopen: %s\n", ((const char *(*)(void))dlsym(h, "which"))());
	return 0;
}
'''
NOOP = "int main(void) { return 0; }\n"


def cc(*args):
    subprocess.run(["cc", *map(str, args)], check=True, capture_output=True)


@pytest.fixture
def libs(uworld):
    w = uworld
    src = os.path.join(w.top, "src")
    os.mkdir(src)
    for name, text in (("lib.c", LIB), ("prog.c", PROG), ("dlprog.c", DLPROG), ("noop.c", NOOP)):
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    w.hid = os.path.join(w.lib, "foo")                  # libfoo-dev's: hidden
    w.vis = os.path.join(w.build, "vislib")
    w.none = os.path.join(w.lib, "nothere")             # does not exist
    os.mkdir(w.vis)
    for d, which in ((w.hid, "hidden"), (w.vis, "visible")):
        cc("-shared", "-fPIC", f'-DWHICH="{which}"', "-Wl,-soname,libhid.so.1",
           "-o", os.path.join(d, "libhid.so.1"), os.path.join(src, "lib.c"))
    b = w.build
    # linked against the visible copy; where it is found at run time decides
    cc("-o", os.path.join(b, "prog"), os.path.join(src, "prog.c"), f"-L{w.vis}", "-l:libhid.so.1",
       "-ldl")
    for tag, d in (("hid", w.hid), ("none", w.none)):
        cc("-o", os.path.join(b, f"rpath-{tag}"), os.path.join(src, "prog.c"), f"-L{w.vis}",
           "-l:libhid.so.1", f"-Wl,-rpath,{d}", "-Wl,--disable-new-dtags", "-ldl")
        cc("-o", os.path.join(b, f"runpath-{tag}"), os.path.join(src, "prog.c"), f"-L{w.vis}",
           "-l:libhid.so.1", f"-Wl,-rpath,{d}", "-Wl,--enable-new-dtags", "-ldl")
    cc("-o", os.path.join(b, "noop"), os.path.join(src, "noop.c"))
    cc("-o", os.path.join(b, "dlprog"), os.path.join(src, "dlprog.c"), "-ldl")
    return w


def traced(w, script):
    r = w.run(command=["sh", "-c", script])
    return r.stdout, r.stderr


def lines(w, script):
    """Each line of the script's output, with the hidden and the absent
    directory written the same way (the comparison is about answers)."""
    out, err = traced(w, script)
    norm = lambda s: s.replace(w.hid, "DIR").replace(w.none, "DIR")
    return [norm(x) for x in out.splitlines()], norm(err)


def pair(script_for):
    """The same script for the hidden directory and for the absent one."""
    return script_for("HID") + "\n" + script_for("NONE")


def run_pair(w, script_for):
    s = pair(script_for).replace("HID", w.hid).replace("NONE", w.none)
    out, err = lines(w, s)
    assert len(out) % 2 == 0, (out, err)
    half = len(out) // 2
    return out[:half], out[half:], err


def test_ld_library_path_search_skips_a_hidden_library(libs):
    hid, none, err = run_pair(libs, lambda d: (
        f'LD_LIBRARY_PATH={d} ./prog 2>&1; echo "rc=$?"\n'
        f'LD_LIBRARY_PATH={d}:{libs.vis} ./prog 2>&1; echo "rc=$?"'))
    assert hid == none, (hid, none)
    assert hid[:2] == ["./prog: error while loading shared libraries: libhid.so.1: cannot open "
                       "shared object file: No such file or directory", "rc=127"], hid
    assert hid[2:] == ["which: visible", "rc=0"], hid     # the search went on
    assert "libfoo-dev" in err and "libhid.so.1" in err   # and the report says so


def test_rpath_and_runpath_skip_a_hidden_library(libs):
    hid, none, _ = run_pair(libs, lambda d: "\n".join(
        f'./{kind}-{"hid" if d == "HID" else "none"} 2>&1 | sed "s/-hid:/:/; s/-none:/:/"; '
        f'echo "rc=$?"' for kind in ("rpath", "runpath")))
    assert hid == none, (hid, none)
    assert hid[0] == ("./rpath: error while loading shared libraries: libhid.so.1: cannot open "
                      "shared object file: No such file or directory"), hid


def test_ld_preload_of_a_hidden_library_is_ignored(libs):
    hid, none, _ = run_pair(libs, lambda d: (
        f'LD_PRELOAD={d}/libhid.so.1 ./noop 2>&1; echo "rc=$?"'))
    assert hid == none, (hid, none)
    assert hid == ["ERROR: ld.so: object 'DIR/libhid.so.1' from LD_PRELOAD cannot be preloaded "
                   "(cannot open shared object file): ignored.", "rc=0"], hid


def test_dlopen_by_bare_name_of_a_hidden_library(libs):
    hid, none, _ = run_pair(libs, lambda d: (
        f'LD_LIBRARY_PATH={d} ./dlprog; echo "rc=$?"'))
    assert hid == none, (hid, none)
    assert hid == ["dlopen: libhid.so.1: cannot open shared object file: No such file or directory",
                   "rc=1"], hid


def test_kiln_libraries_are_never_hidden(libs):
    """A policy that hides the directory kiln's own libraries live in hides
    neither the preload library nor the audit library."""
    pol = os.path.join(libs.top, "deny-kiln.policy")
    with open(pol, "w") as f:
        f.write(f"deny {BUILD}\n")
    r = libs.run("--policy", pol, command=["sh", "-c", f'LD_LIBRARY_PATH={libs.hid} ./prog 2>&1; '
                                                      f'echo "rc=$?"; cat {libs.inc}/foo.h; echo "cat=$?"'])
    out = r.stdout.splitlines()
    assert out[:2] == [f"./prog: error while loading shared libraries: libhid.so.1: cannot open "
                       f"shared object file: No such file or directory", "rc=127"], (out, r.stderr)
    assert "cat=1" in out, out   # the preload library still works: foo.h hidden


def test_trusted_libraries_are_kilns_visible_ones_and_cannot_be_forged(libs):
    """The server lists the libraries kiln runs with that the build may read
    for the whole run (no process needs to ask about them); a build setting
    the variable itself changes nothing."""
    hidlib = os.path.join(libs.hid, "libhid.so.1")
    out, err = traced(libs, f'echo "$KILN_TRUSTED_LIBS"; '
                            f'KILN_TRUSTED_LIBS={hidlib} LD_LIBRARY_PATH={libs.hid} ./prog 2>&1; '
                            f'echo "rc=$?"')
    lines = out.splitlines()
    listed = lines[0].split(":")
    assert any(p.endswith("/libc.so.6") for p in listed), listed
    assert hidlib not in listed
    assert lines[1:] == ["./prog: error while loading shared libraries: libhid.so.1: cannot open "
                         "shared object file: No such file or directory", "rc=127"], (lines, err)

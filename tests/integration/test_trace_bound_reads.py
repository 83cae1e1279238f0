"""The stat and access families in the build directory, bound to what was
checked (src/trace/statbind.c, accessbind.c): every form of stat (stat,
lstat, fstatat, __xstat..., statx, with their flags) and of access
(access, faccessat with its flags, eaccess, euidaccess, every mode; and
syscall(SYS_statx), syscall(SYS_faccessat2)) gives
under kiln what it gives without it, for files, directories, symlinks, absent names, names with a
trailing slash and arguments the kernel or glibc refuse; a symlink to a
hidden file reads as a dangling one, a path through a symlink to a hidden
directory as a path through a dangling one. Each path is read many times
in one process: the first asking goes to the server, the rest to the map."""
import os
import re
import shutil
import subprocess

import pytest

from runas import uworld  # noqa: F401 (fixture)
from tracefix import BUILD

HOOKCALL = BUILD / "tests" / "helpers" / "hookcall"

VISIBLE = ["f", "f/", "f/.", "./f", "d", "d/", "d/.", "d/x", "d/../f", "lf", "lf/", "ld", "ld/",
           "ld/x", "ld/../f", "dang", "dang/", "absent", "absent/x", "f/x", "{b}/f", "{b}/d/x",
           "{b}/ld/x", "{b}/absent"]
# (hidden path, the absent path it must read as)
HIDDEN = [("lh", "dang"), ("lh/", "dang/"), ("lhd/x", "dang/x"), ("lhd", "dang"), ("lhd/", "dang/")]


@pytest.fixture
def tree(uworld):
    w = uworld
    b = w.build
    shutil.copy(HOOKCALL, os.path.join(b, "hookcall"))
    with open(os.path.join(b, "f"), "w") as f:
        f.write("f\n")
    os.mkdir(os.path.join(b, "d"))
    with open(os.path.join(b, "d", "x"), "w") as f:
        f.write("x\n")
    for name, target in {"lf": "f", "ld": "d", "dang": "nothing-here",
                         "lh": os.path.join(w.inc, "foo.h"),
                         "lhd": os.path.join(w.lib, "foo")}.items():
        os.symlink(target, os.path.join(b, name))
    return w


def stats(w, paths, traced):
    """{path: its `hookcall stats` and `accesses` lines} read in one
    process, with or without kiln."""
    cmd = ["./hookcall"]
    for p in paths:
        cmd += ["stats", p, "--", "accesses", p, "--"]
    if traced:
        r = w.run(command=cmd)
    else:
        r = subprocess.run([*w.runas, *cmd], cwd=w.build, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    lines = r.stdout.splitlines()
    per = len(lines) // len(paths)
    assert per * len(paths) == len(lines) and per == 24 + 37, r.stdout
    return {p: lines[i * per:(i + 1) * per] for i, p in enumerate(paths)}


def test_every_stat_and_access_form_reads_the_build_directory_as_without_kiln(tree):
    paths = [p.format(b=tree.build) for p in VISIBLE]
    native = stats(tree, paths, traced=False)
    traced = stats(tree, paths, traced=True)
    for p in paths:
        assert traced[p] == native[p], p
    # the cases are what they say: found, refused, absent, not a directory
    assert native["f"][0].startswith("stat 0 OK")
    assert native["f/"][0] == "stat -1 ENOTDIR"
    assert native["dang"][0] == "stat -1 ENOENT" and native["dang"][2].startswith("lstat 0 OK")
    assert native["d"][7] == "fstatat-badflag -1 EINVAL"
    assert "access-1 -1 EACCES" in native["f"]  # X_OK of a file that is not executable


def test_a_symlink_to_a_hidden_file_reads_as_a_dangling_one(tree):
    hidden = [h for h, _ in HIDDEN]
    absent = [a for _, a in HIDDEN]
    traced = stats(tree, hidden, traced=True)
    native = stats(tree, absent, traced=False)
    ino = re.compile(r"ino=\d+")
    for h, a in HIDDEN:
        # lstat of the link itself reads the link (another inode than dang's)
        assert [ino.sub("ino=N", x) for x in traced[h]] == [ino.sub("ino=N", x) for x in native[a]], h

"""A rename's target is written over, not only named: rename() replaces an
empty directory at the target. The server lets a create of a name that
exists as a directory pass (the kernel answers EEXIST: mkdir -p walks
every ancestor that way), so a rename target classed as a create alone
let a traced build, as root, replace an empty directory of a managed tree
with one of its own, and write into that tree. Every way to rename onto
it must be refused as a rename onto an absent name there is (EACCES),
leave the directory as it was, and RENAME_NOREPLACE, which never replaces,
get the kernel's EEXIST. As root and as nobody."""
import os

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
AT_FDCWD, NOREPLACE, SYS_renameat2 = -100, 1, 316
src, nothere = sys.argv[1], sys.argv[2]
for label, dst in (("empty", sys.argv[3]), ("absent", nothere)):
    show(f"{label}:rename", lambda: os.rename(src, dst))
    show(f"{label}:replace", lambda: os.replace(src, dst))
    call(f"{label}:renameat", libc.renameat(AT_FDCWD, b(src), AT_FDCWD, b(dst)))
    call(f"{label}:renameat2", libc.renameat2(AT_FDCWD, b(src), AT_FDCWD, b(dst), 0))
    call(f"{label}:syscall-renameat2",
         libc.syscall(SYS_renameat2, AT_FDCWD, b(src), AT_FDCWD, b(dst), 0))
    call(f"{label}:noreplace", libc.renameat2(AT_FDCWD, b(src), AT_FDCWD, b(dst), NOREPLACE))
'''


def test_renaming_onto_an_empty_managed_directory_is_refused(uworld):
    empty = os.path.join(uworld.sys, "usr", "share")   # in the managed tree, not in the registry
    os.mkdir(empty)
    before = os.stat(empty)
    src = os.path.join(uworld.build, "mine")
    os.mkdir(src)
    with open(os.path.join(src, "evil"), "w") as f:
        f.write("replaced\n")
    uworld.give(src)
    got, _ = uworld.probe(PROBE, [src, os.path.join(uworld.sys, "usr", "nothere"), empty], name="rename.py")
    assert len(got) == 12, got
    assert os.listdir(empty) == [] and os.stat(empty).st_ino == before.st_ino, os.listdir(empty)
    assert os.path.exists(os.path.join(src, "evil"))
    for how in ("rename", "replace", "renameat", "renameat2", "syscall-renameat2"):
        assert got[f"empty:{how}"] == got[f"absent:{how}"] == "EACCES", (how, got)
    assert got["empty:noreplace"] == "EEXIST", got   # the kernel's own answer: nothing replaced
    assert got["absent:noreplace"] == "EACCES", got

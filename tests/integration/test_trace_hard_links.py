"""A hard link's source is written: a new name for a file, made in the build
directory, would let the build append to or truncate a file outside every
writable area through it (a root build's `cp -al /usr/share/x .` followed
by an in-place edit changed the host's file). Each way of making such a
link is refused with EACCES, with and without the verdict cache, and the
file keeps its content and its single name; a link of the build's own
file is made as before."""
import json
import os
import pathlib

import pytest

from conftest import run
from scratch_area import scratch  # noqa: F401 (fixture)
from test_trace_server import world  # noqa: F401 (fixture)


@pytest.mark.parametrize("mode", [[], ["--no-cache"]])
def test_hard_links_to_files_outside_the_writable_areas_are_refused(world, kiln_bin, helper,
                                                                     scratch, mode):
    parent = pathlib.Path(scratch)
    victim = parent / "victim.txt"
    victim.write_text("original\n")
    pkg = parent / "pkg"
    pkg.mkdir()
    st0 = os.stat(victim)
    hookcall = helper("hookcall")
    script = (
        f"ln {victim} v1; echo ln $?; "
        f"ln -s {victim} sl; ln -L sl v2; echo ln-L $?; "
        f"mkdir tree; cp -l {victim} tree/v3; echo cp-l $?; "
        f"{hookcall} link {victim} v4 -- linkat {victim} v5 -- linkat-follow sl v6 "
        f"-- linkat-empty {victim} v7; "
        "for f in v1 v2 tree/v3 v4 v5 v6 v7; do echo pwned >> $f; done 2>/dev/null; "
        "echo mine > own.o; ln own.o own2.o; echo own $?; true")
    r = run([kiln_bin, "trace", *world.args, *mode, "--json", "-o", world.tmp / "r.json",
             "--", "sh", "-c", script], cwd=pkg)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["ln 1", "ln-L 1", "cp-l 1"], r.stdout
    assert [ln.split()[0] + " " + ln.split()[-1] for ln in lines[3:7]] == [
        "link EACCES", "linkat EACCES", "linkat-follow EACCES", "linkat-empty EACCES"], r.stdout
    assert lines[7:] == ["own 0"], r.stdout
    assert r.stderr.count("Permission denied") == 3, r.stderr
    assert victim.read_text() == "original\n"
    st1 = os.stat(victim)
    assert (st1.st_nlink, st1.st_mtime_ns, st1.st_ino) == (1, st0.st_mtime_ns, st0.st_ino)
    assert (pkg / "own2.o").read_text() == "mine\n"
    # the refusals are in the report, as refused writes of the file
    refused = json.loads((world.tmp / "r.json").read_text())["refused_writes"]
    assert [w["path"] for w in refused] == [str(victim)], refused

"""The preload library under the real `kiln trace` (trace server, policy and
a registry imported from a manifest): the symlink cases and hidden directory
entries, as a build would see them."""
import json

import pytest

from conftest import run
from tracefix import HOOKCALL, make_tree


@pytest.fixture
def traced(kiln_bin, tmp_path):
    """A tree whose files belong to package `dep` (declared) or `nondep`
    (not declared); returns a function running hookcall under kiln trace."""
    root = tmp_path / "t"
    make_tree(root)
    r = str(root)
    dep = ["vis", "vis/a", "vis/x", "vis/lnk_hid", "vis/lnk_ok", "vis/dirlink",
           "vis/chain1", "vis/chain2", "vis/chain3", "vis/sub"]
    nondep = ["hid", "hid/b", "hid/dir", "badlink", "vis/c"]
    manifest = tmp_path / "manifest"
    manifest.write_text(
        "Package: dep\nVersion: 1\nFiles:\n" + "".join(f" {r}/{p}\n" for p in dep) +
        "\nPackage: nondep\nVersion: 1\nFiles:\n" + "".join(f" {r}/{p}\n" for p in nondep))
    db = tmp_path / "registry.db"
    res = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert res.returncode == 0, res.stderr

    def trace(*args):
        res = run([kiln_bin, "trace", "--db", db, "--deps", "dep", "--ask", root,
                   "--json", "-o", tmp_path / "report.json", "--", HOOKCALL, *args], cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        return res.stdout.splitlines(), report
    return root, trace


def test_symlinks_under_kiln_trace(traced):
    root, trace = traced
    cases = [("vis/a", "OK"), ("vis/lnk_ok", "OK"), ("hid/b", "ENOENT"),
             ("vis/lnk_hid", "ENOENT"), ("badlink", "ENOENT"),
             ("vis/dirlink/b", "ENOENT"), ("vis/chain1", "ENOENT"),
             ("vis/loop1", "ELOOP")]
    args = []
    for p, _ in cases:
        args += ["stat", f"{root}/{p}"]
    args += ["lstat", f"{root}/vis/lnk_hid", "lstat", f"{root}/badlink",
             "readlink", f"{root}/vis/lnk_hid", "readlink", f"{root}/badlink"]
    lines, report = trace(*args)
    got = [l.split()[2] for l in lines]
    assert got == [w for _, w in cases] + ["OK", "ENOENT", "OK", "ENOENT"]
    hidden = {h["path"]: h for h in report["hidden"]}
    assert {h["package"] for h in hidden.values()} == {"nondep"}
    assert f"{root}/badlink" in hidden


def test_listings_under_kiln_trace(traced):
    root, trace = traced
    lines, report = trace("readdir", root, "readdir", f"{root}/vis", "getdents64", f"{root}/vis",
                          "scandir", f"{root}/vis", "nftw", f"{root}/vis", "readdir", f"{root}/hid",
                          "open", f"{root}/hid/b", "wc", "mkdir", f"{root}/hid")
    assert lines[0].split()[3:] == ["deep", "ro", "vis"]          # hid, badlink gone
    for l in lines[1:4]:
        names = l.split()[3:]
        assert "a" in names and "lnk_hid" in names and "c" not in names
    walked = lines[4].split()[3:]
    assert f"{root}/vis/a" in walked and f"{root}/vis/c" not in walked
    assert lines[5].split()[1:3] == ["-1", "ENOENT"]
    assert lines[6] == "open -1 EACCES"    # O_CREAT on a hidden path
    assert lines[7] == "mkdir -1 EACCES"   # an existing hidden directory


def test_env_clearing_under_kiln_trace(traced):
    root, trace = traced
    lines, _ = trace("exec-env", "clear", HOOKCALL, "stat", f"{root}/hid/b", ";",
                     "spawn", "unset", HOOKCALL, "stat", f"{root}/vis/c", ";",
                     "exec-env", "badsock", HOOKCALL, "stat", f"{root}/hid/b", ";")
    assert lines == ["stat -1 ENOENT", "exec-env 0 OK", "stat -1 ENOENT", "spawn 0 OK",
                     "stat -1 ENOENT", "exec-env 0 OK"]


def test_exec_events_reach_the_report(traced, tmp_path):
    """A set-gid target and a static binary, exec'd by a traced process, are
    named in kiln trace's report with the process that ran them."""
    import os
    import shutil
    root, trace = traced
    prog = root / "vis" / "setgid-true"
    shutil.copy("/bin/true", prog)
    os.chmod(prog, 0o2755)
    lines, report = trace("exec-env", "keep", prog, ";",
                          "exec-env", "keep", "/sbin/ldconfig", "--version", ";")
    assert lines[0] == "exec-env 0 OK" and lines[-1] == "exec-env 0 OK"
    events = {(e["kind"], e["path"]) for e in report["exec_events"]}
    assert ("setuid", str(prog)) in events
    assert ("static", "/sbin/ldconfig") in events

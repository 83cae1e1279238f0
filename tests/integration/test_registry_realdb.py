"""End-to-end on this machine's real dpkg database: owners agree with
`dpkg -S`, and the build-essential closure agrees with apt-cache (the
documented differences aside: docs/registry.md)."""
import json
import os
import random
import shutil
import sqlite3
import subprocess

import pytest

from conftest import run

pytestmark = pytest.mark.skipif(
    not os.path.exists("/var/lib/dpkg/status") or not shutil.which("dpkg"),
    reason="no dpkg database on this machine")


@pytest.fixture(scope="module")
def realdb(tmp_path_factory, kiln_bin):
    db = tmp_path_factory.mktemp("realdb") / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "dpkg"])
    assert r.returncode == 0, r.stderr
    return db


def dpkg_S(paths):
    """{path: set of owners} from `dpkg -S`, arch qualifiers dropped and the
    "diversion by" lines skipped."""
    r = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion by "):
            continue
        pkgs, path = line.split(": ", 1)
        out[path] = {p.strip().split(":")[0] for p in pkgs.split(",")}
    return out


def kiln_owners(kiln_bin, db, paths):
    r = run([kiln_bin, "registry", "--db", db, "--json", "owner", *paths])
    return {o["path"]: set(o["owners"]) for o in json.loads(r.stdout)}


def test_issue_paths_match_dpkg_S(kiln_bin, realdb):
    paths = [p for p in ("/bin/sh", "/usr/bin/gcc-12", "/usr/include/stdio.h")
             if os.path.lexists(p)]
    want = dpkg_S(paths)
    assert want, "dpkg -S knows none of the issue's paths"
    got = kiln_owners(kiln_bin, realdb, list(want))
    assert got == want


def test_merged_usr_aliases_have_one_owner(kiln_bin, realdb):
    if not os.path.islink("/bin"):
        pytest.skip("/bin is not a symlink here")
    got = kiln_owners(kiln_bin, realdb, ["/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/bash"])
    assert got["/bin/sh"] == got["/usr/bin/sh"] == {"dash"}
    assert got["/bin/bash"] == got["/usr/bin/bash"] == {"bash"}


def test_sample_of_files_matches_dpkg_S(kiln_bin, realdb):
    """300 regular files picked at random (fixed seed) from the real lists:
    same owners as dpkg -S. Diverted paths and wildcard characters (which
    dpkg -S reads as patterns) are left out: docs/registry.md says why."""
    with sqlite3.connect(realdb) as c:
        rows = c.execute("SELECT DISTINCT coalesce(listed, canonical) FROM files "
                         "WHERE kind=0 AND diverted=0 ORDER BY 1").fetchall()
    diverted = set()
    if os.path.exists("/var/lib/dpkg/diversions"):
        lines = open("/var/lib/dpkg/diversions").read().splitlines()
        diverted = set(lines[0::3]) | set(lines[1::3])
    paths = [r[0] for r in rows
             if r[0] not in diverted and not any(ch in r[0] for ch in "*?[]\\")]
    sample = random.Random(42).sample(paths, min(300, len(paths)))
    want = dpkg_S(sample)
    got = kiln_owners(kiln_bin, realdb, sample)
    diff = {p: (got.get(p), want.get(p)) for p in sample if got.get(p) != want.get(p)}
    assert not diff


def test_build_essential_closure_vs_apt_cache(kiln_bin, realdb):
    if not shutil.which("apt-cache"):
        pytest.skip("no apt-cache")
    r = run([kiln_bin, "registry", "--db", realdb, "--json", "deps", "--closure",
             "build-essential"])
    if r.returncode != 0 and "unknown package 'build-essential'" in r.stderr:
        pytest.skip("build-essential is not installed")
    ours = set(json.loads(r.stdout)["closure"])
    apt = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
         "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
         "build-essential"], capture_output=True, text=True).stdout
    named = {l.split(":")[0] for l in apt.splitlines() if l and not l.startswith(" ")}
    installed = set(subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package}\\n"],
        capture_output=True, text=True).stdout.split("\n"))
    installed = {l.split()[1] for l in installed if l.startswith("installed ")}
    apt_installed = named & installed
    # apt-cache names uninstalled providers of virtual packages (make-guile
    # for make); the registry only knows installed packages.
    assert apt_installed <= ours, apt_installed - ours
    # apt-cache --installed drops dependencies qualified ":any" (perl:any of
    # dpkg-dev); everything extra in ours is reached through one of those.
    with sqlite3.connect(realdb) as c:
        any_targets = {row[0] for row in c.execute(
            "SELECT DISTINCT d.name FROM deps d JOIN packages p ON p.id=d.pkg "
            "WHERE d.archq='any' AND p.name IN (%s)" % ",".join("?" * len(ours)), sorted(ours))}
    through_any = set()
    for name in any_targets:
        r = run([kiln_bin, "registry", "--db", realdb, "--json", "deps", "--closure", name])
        if r.returncode == 0:
            through_any |= set(json.loads(r.stdout)["closure"])
    assert ours - apt_installed <= through_any, (ours - apt_installed) - through_any

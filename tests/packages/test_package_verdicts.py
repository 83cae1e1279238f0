"""The report's verdict on real package builds (`make check-packages`).

Three packages, each built with `dpkg-buildpackage -b -uc -us` under
`kiln trace --deps-from-control debian/control` from a directory outside
every area a build may write, with the real dpkg registry of this machine:
GNU hello and zlib (Debian's source packages, `apt-get source`) and
kilnconf (tests/packages/kilnconf.py, whose configure step uses zlib when it
finds it). Each is built

  (a) with its real Build-Depends: the build succeeds, the verdict is
      "Build-Depends look complete" and --strict exits 0;
  (b) with one needed Build-Depends removed: the verdict names exactly that
      package first. For hello (texinfo) and zlib (debhelper) the build then
      fails, and the access most likely behind it is that package's; for
      kilnconf (zlib1g-dev) only a configure result changes and the build
      succeeds;
  (c) with an unneeded package declared (libsqlite3-dev): it is listed as
      unused.
"""
import json
import pathlib
import shutil

import pytest

import kilnconf
from conftest import build_env, fetch, run, set_build_depends

EXTRA = "libsqlite3-dev"

CASES = {
    # source package, needed package to remove, whether the build then fails,
    # the declared packages this build does not use with its real
    # Build-Depends (hello's man page ships in the tarball: help2man is
    # not run)
    "hello": ("hello", "texinfo", True, ["help2man"]),
    "zlib": ("zlib", "debhelper", True, []),
    "kilnconf": (None, "zlib1g-dev", False, []),
}


@pytest.fixture(scope="session")
def sources():
    trees = {name: fetch(source) for name, (source, *_rest) in CASES.items() if source}
    fetch("-", EXTRA, "zlib1g-dev", "debhelper")
    return trees


@pytest.fixture(scope="session")
def registry(kiln_bin, sources, tmp_path_factory):
    """This machine's dpkg database, imported after any installation."""
    db = tmp_path_factory.mktemp("registry") / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "dpkg"])
    assert r.returncode == 0, r.stderr
    return db


def tree(name, sources, scratch):
    if name == "kilnconf":
        return pathlib.Path(kilnconf.write_tree(scratch))
    src = sources[name]
    dest = scratch / src.name
    shutil.copytree(src, dest, symlinks=True)
    return dest


def build(kiln_bin, registry, src, *opts):
    r = run([kiln_bin, "trace", "--db", registry, "--deps-from-control", "debian/control",
             "--json", "-o", "../report.json", *opts, "--", "dpkg-buildpackage", "-b", "-uc", "-us"],
            cwd=src, env=build_env())
    report = json.loads((src.parent / "report.json").read_text())
    verdict_line = r.stderr.rstrip("\n").split("\n")[-1]
    assert verdict_line == "=== kiln trace verdict: " + report["verdict"]["text"], r.stderr[-3000:]
    return r, report


def debs(scratch):
    return sorted(p.name for p in scratch.iterdir() if p.name.endswith(".deb"))


@pytest.mark.parametrize("name", CASES)
def test_real_build_depends_look_complete(kiln_bin, registry, sources, scratch, name):
    src = tree(name, sources, scratch)
    r, rep = build(kiln_bin, registry, src, "--strict")
    assert r.returncode == 0, r.stderr[-5000:]
    assert debs(scratch), r.stderr[-3000:]
    v = rep["verdict"]
    assert v["complete"] and v["text"].startswith("Build-Depends look complete"), v
    assert v["missing"] == [] and v["cause"] is None and not v["failed"]
    assert rep["totals"]["violations"] == 0
    # what was hidden is all known harmless probes, each named
    assert all(p["rank"] is None and p["harmless"] for p in rep["packages"]), rep["packages"]
    assert rep["unused"] == CASES[name][3]


@pytest.mark.parametrize("name", CASES)
def test_needed_build_depends_removed_is_named_first(kiln_bin, registry, sources, scratch, name):
    _source, needed, breaks, _unused = CASES[name]
    src = tree(name, sources, scratch)
    set_build_depends(src / "debian" / "control", remove=needed)
    r, rep = build(kiln_bin, registry, src, "--strict")
    v = rep["verdict"]
    assert v["missing"][:1] == [needed], (v, rep["packages"][:3])
    assert rep["packages"][0]["name"] == needed and rep["packages"][0]["rank"] == 1
    assert v["text"].startswith(f"probably missing: {needed} ("), v["text"]
    assert not v["complete"]
    if breaks:
        assert r.returncode not in (0, 1) and v["failed"], r.stderr[-3000:]
        assert v["cause"]["package"] == needed and v["cause"]["kind"] == "hidden", v["cause"]
        assert f"the build failed (exit status {rep['exit_status']})" in v["text"]
    else:
        # The build succeeds without it, configured differently; --strict
        # fails it on the ranked finding.
        assert rep["exit_status"] == 0 and r.returncode == 1, r.stderr[-3000:]
        assert "checking for zlib... no" in r.stdout
        assert "#undef HAVE_ZLIB" in (src / "config.h").read_text()


@pytest.mark.parametrize("name", CASES)
def test_unneeded_build_depends_is_listed_unused(kiln_bin, registry, sources, scratch, name):
    src = tree(name, sources, scratch)
    set_build_depends(src / "debian" / "control", add=EXTRA)
    r, rep = build(kiln_bin, registry, src, "--strict")
    assert r.returncode == 0, r.stderr[-5000:]
    assert EXTRA in rep["declared"]
    assert rep["unused"] == CASES[name][3] + [EXTRA]   # in the order declared
    assert rep["verdict"]["complete"]
    assert rep["verdict"]["text"].endswith("unused Build-Depends: " + ", ".join(rep["unused"]))

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
import pytest

from conftest import CASES, EXTRA, build, debs, set_build_depends, tree


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

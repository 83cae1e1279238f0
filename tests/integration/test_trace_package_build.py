"""A real Debian package build under kiln trace, as the README says to run
it, from a directory outside /tmp and /var/tmp (both writable by default) and
without --allow: dpkg-buildpackage writes its .deb, .buildinfo and .changes
to the parent of the source tree, and only those names may be written there
(docs/policy.md, "Package artifacts")."""
import json
import os

import pytest

from conftest import run
from scratch_area import scratch  # noqa: F401 (fixture)

CONTROL = """Source: kilnprobe
Section: misc
Priority: optional
Maintainer: kiln tests <kiln@example.invalid>
Build-Depends: debhelper-compat (= 13)
Standards-Version: 4.6.2
Rules-Requires-Root: no

Package: kilnprobe
Architecture: all
Description: kiln test package
 Built by kiln's integration tests.

Package: kilnprobe-extra
Architecture: all
Description: kiln test package, a second binary
 Built by kiln's integration tests.
"""

CHANGELOG = """kilnprobe (1.0-1) unstable; urgency=medium

  * Test build.

 -- kiln tests <kiln@example.invalid>  Tue, 01 Dec 2026 06:00:00 +0000
"""

RULES = "#!/usr/bin/make -f\n%:\n\tdh $@\n"


@pytest.fixture(scope="module")
def dpkg_db(kiln_bin, tmp_path_factory):
    for pkg in ("debhelper", "dpkg-dev"):
        r = run(["dpkg-query", "-W", "-f=${db:Status-Status}", pkg])
        assert r.stdout == "installed", f"{pkg} must be installed (see .ci/deps)"
    db = tmp_path_factory.mktemp("dpkg") / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "dpkg"])
    assert r.returncode == 0, r.stderr
    return db


def make_package(parent):
    src = os.path.join(parent, "kilnprobe-1.0")
    os.makedirs(os.path.join(src, "debian", "source"))
    files = {"control": CONTROL, "changelog": CHANGELOG, "rules": RULES,
             "source/format": "3.0 (native)\n", "copyright": "Public domain.\n"}
    for name, text in files.items():
        with open(os.path.join(src, "debian", name), "w") as f:
            f.write(text)
    os.chmod(os.path.join(src, "debian", "rules"), 0o755)
    with open(os.path.join(src, "README"), "w") as f:
        f.write("probe\n")
    return src


def build_env():
    env = dict(os.environ)
    for var in ("TMPDIR", "XDG_CACHE_HOME", "CCACHE_DIR"):
        env.pop(var, None)   # no extra writable area may hide a refusal
    env["HOME"] = "/nonexistent"
    return env


@pytest.mark.parametrize("how", ["deps-from-control", "command"])
def test_dpkg_buildpackage_writes_its_artifacts_beside_the_tree(kiln_bin, dpkg_db, scratch, how):
    src = make_package(scratch)
    deps = (["--deps-from-control", "debian/control"] if how == "deps-from-control"
            else ["--deps", "debhelper"])
    # --strict: what dpkg-buildpackage reaches for whatever the package
    # (gpg, optional Perl modules...) is a known harmless probe
    r = run([kiln_bin, "trace", "--db", dpkg_db, *deps, "--strict", "--json", "-o", "../report.json",
             "--", "dpkg-buildpackage", "-b", "-uc", "-us"], cwd=src, env=build_env(), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    made = sorted(os.listdir(scratch))
    for name in ("kilnprobe_1.0-1_all.deb", "kilnprobe-extra_1.0-1_all.deb",
                 "kilnprobe_1.0-1_amd64.buildinfo", "kilnprobe_1.0-1_amd64.changes"):
        assert name in made, made
    assert not [n for n in made if n.endswith(".new")]
    assert "refused writes: 0" in r.stderr
    rep = json.loads(open(os.path.join(scratch, "report.json")).read())
    assert rep["refused_writes"] == [] and rep["exit_status"] == 0
    assert rep["verdict"]["complete"], rep["packages"]


def test_other_names_beside_the_tree_stay_refused(kiln_bin, dpkg_db, scratch):
    """Only the package's artifacts: another file, another package's .deb,
    or a file in a subdirectory of the parent are refused."""
    src = make_package(scratch)
    os.mkdir(os.path.join(scratch, "sub"))
    script = ("for f in ../notes.txt ../otherpkg_1.0_all.deb ../sub/kilnprobe_1.0_all.deb "
              "../kilnprobe_1.0_all.deb; do if echo x > $f; then echo ok $f; "
              "else echo refused $f; fi; done 2>/dev/null")
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps-from-control", "debian/control",
             "--", "sh", "-c", script], cwd=src, env=build_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["refused ../notes.txt", "refused ../otherpkg_1.0_all.deb",
                                        "refused ../sub/kilnprobe_1.0_all.deb",
                                        "ok ../kilnprobe_1.0_all.deb"]
    assert sorted(os.listdir(scratch)) == ["kilnprobe-1.0", "kilnprobe_1.0_all.deb", "sub"]


def test_no_artifact_rule_for_a_plain_command(kiln_bin, dpkg_db, scratch):
    src = make_package(scratch)
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "debhelper", "--", "sh", "-c",
             "echo x > ../kilnprobe_1.0_all.deb"], cwd=src, env=build_env())
    assert r.returncode != 0
    assert not os.path.exists(os.path.join(scratch, "kilnprobe_1.0_all.deb"))

"""The one list of kiln's dependencies (debian/control's Build-Depends) as
.ci/deps reads it, and the Makefile's promise: `make` and `make install`
only check it, `make check`/`make demo` may install from it."""
import os
import subprocess

from conftest import ROOT, run

CONTROL = """Source: probe
# a comment line
Build-Depends: debhelper-compat (= 13),
               kiln-surely-absent-a | dpkg (>= 1.0),
               kiln-surely-absent-b:any [amd64 i386],
               bash <!nocheck>,
               kiln-surely-absent-c <!nocheck>
Build-Depends-Indep: kiln-surely-absent-d
Standards-Version: 4.6.2

Package: probe
Build-Depends: not-a-source-field
"""


def deps(tmp_path, *args):
    control = tmp_path / "control"
    control.write_text(CONTROL)
    return run(["bash", ROOT / ".ci" / "deps", *args], env=dict(os.environ, KILN_CONTROL=str(control)))


def test_list_parses_relations(tmp_path):
    r = deps(tmp_path, "--list")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "debhelper-compat", "kiln-surely-absent-a | dpkg", "kiln-surely-absent-b", "bash",
        "kiln-surely-absent-c", "kiln-surely-absent-d", "build-essential"]
    assert deps(tmp_path, "--list", "--build").stdout.splitlines() == [
        "debhelper-compat", "kiln-surely-absent-a | dpkg", "kiln-surely-absent-b",
        "kiln-surely-absent-d", "build-essential"]


def test_check_names_what_is_missing(tmp_path):
    # debhelper-compat is provided by debhelper; dpkg satisfies the alternative
    r = deps(tmp_path, "--check")
    assert r.returncode == 1
    assert ("missing build dependencies (debian/control's Build-Depends): "
            "kiln-surely-absent-b kiln-surely-absent-c kiln-surely-absent-d") in r.stderr
    r = deps(tmp_path, "--check", "--build")
    assert "kiln-surely-absent-b kiln-surely-absent-d\n" in r.stderr


def make_dry_run(*goals):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    r = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), "BUILD=build/dry-run", *goals],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if ".ci/deps" in line]


def test_make_and_make_install_never_install():
    for goals in (["all"], ["install", "DESTDIR=/nonexistent"]):
        calls = make_dry_run(*goals)
        assert calls and all("--check" in c for c in calls), (goals, calls)
    assert any("--check" not in c for c in make_dry_run("check"))

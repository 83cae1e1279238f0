"""A real build under the real sandbox: kiln trace with this machine's dpkg
registry, the preload library and the trace server together. A configure
step probes for sqlite3 (installed here: libsqlite3-dev is a build
dependency of kiln itself) the way autoconf does."""
import json
import os
import re
import shutil

import pytest

from conftest import run

CONFIGURE = r"""#!/bin/sh
# Probes for sqlite3 as autoconf does: compile and link a test program.
cat > conftest.c <<'C'
#include <sqlite3.h>
int main(void) { return sqlite3_libversion_number() == 0; }
C
if gcc -o conftest conftest.c -lsqlite3 2>conftest.err; then
  echo "checking for sqlite3... yes"; echo "HAVE_SQLITE3=1" > config.mk
else
  echo "checking for sqlite3... no"; echo "HAVE_SQLITE3=0" > config.mk
fi
rm -f conftest conftest.c
"""


def hidden_group(report, package):
    """The report's ranked group of files hidden for `package`, e.g.
    "  1. pkg (2)  evidence: read"."""
    return re.search(rf"^  \d+\. {re.escape(package)} \(\d+\)  evidence: ", report, re.M) is not None


@pytest.fixture(scope="module")
def dpkg_db(kiln_bin, tmp_path_factory):
    for pkg in ("gcc", "libc6-dev", "libsqlite3-dev"):
        r = run(["dpkg-query", "-W", "-f=${db:Status-Status}", pkg])
        assert r.stdout == "installed", f"{pkg} must be installed (see .ci/deps)"
    db = tmp_path_factory.mktemp("dpkg") / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "dpkg"])
    assert r.returncode == 0, r.stderr
    return db


@pytest.fixture
def project(tmp_path):
    (tmp_path / "configure").write_text(CONFIGURE)
    (tmp_path / "configure").chmod(0o755)
    return tmp_path


def test_undeclared_library_is_absent_and_reported(kiln_bin, dpkg_db, project):
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "gcc,libc6-dev",
             "--json", "-o", "report.json", "--", "./configure"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert "checking for sqlite3... no" in r.stdout
    assert (project / "config.mk").read_text() == "HAVE_SQLITE3=0\n"
    assert "sqlite3.h: No such file or directory" in (project / "conftest.err").read_text()
    # The report names the package and the process that reached for it.
    assert hidden_group(r.stderr, "libsqlite3-dev")
    assert "/usr/include/sqlite3.h" in r.stderr
    rep = json.loads((project / "report.json").read_text())
    hidden = {h["path"]: h for h in rep["hidden"]}
    h = hidden["/usr/include/sqlite3.h"]
    assert h["package"] == "libsqlite3-dev"
    assert h["argv"][0].endswith("cc1")  # the compiler proper, not the driver
    assert "conftest.c" in h["argv"]


def test_declared_library_is_found(kiln_bin, dpkg_db, project):
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "gcc,libc6-dev,libsqlite3-dev",
             "--", "./configure"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert "checking for sqlite3... yes" in r.stdout
    assert not hidden_group(r.stderr, "libsqlite3-dev")
    assert "declared: gcc, libc6-dev, libsqlite3-dev (" in r.stderr


def test_build_depends_from_control(kiln_bin, dpkg_db, project):
    control = project / "control"
    control.write_text("Source: probe\n"
                       "Build-Depends: gcc (>= 4), libc6-dev [linux-any],\n"
                       " libsqlite3-dev:native | libsqlite0-dev, nonexistent-pkg <stage1>\n")
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps-from-control", control,
             "--", "./configure"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert "checking for sqlite3... yes" in r.stdout


PROBE_BASE = ("for f in /usr/share/zoneinfo/UTC /etc/selinux/semanage.conf; do "
              "test -e $f && echo \"$f yes\" || echo \"$f no\"; done")


@pytest.mark.parametrize("args,visible", [
    # --deps-from-control: the clean-chroot profile by default, whose base
    # set has the Priority: required packages (tzdata) and their closure
    # (passwd -> libsemanage2 -> libsemanage-common: the /etc/selinux every
    # host-profile report showed)
    (["--deps-from-control", "CONTROL"], True),
    (["--deps-from-control", "CONTROL", "--profile", "host"], False),
    (["--deps", "gcc"], False),  # --deps alone: the host profile
    (["--deps", "gcc", "--profile=chroot"], True),
])
def test_profile_base_set(kiln_bin, dpkg_db, project, args, visible):
    for pkg in ("tzdata", "passwd"):
        r = run(["dpkg-query", "-W", "-f=${db:Status-Status} ${Priority}", pkg])
        if r.stdout != "installed required":
            pytest.skip(f"{pkg} is not an installed Priority: required package here")
    control = project / "control"
    control.write_text("Source: probe\nBuild-Depends: gcc\n")
    args = [str(control) if a == "CONTROL" else a for a in args]
    r = run([kiln_bin, "trace", "--db", dpkg_db, *args, "--", "sh", "-c", PROBE_BASE],
            cwd=project)
    assert r.returncode == 0, r.stderr
    word = "yes" if visible else "no"
    assert r.stdout.splitlines() == [f"/usr/share/zoneinfo/UTC {word}",
                                     f"/etc/selinux/semanage.conf {word}"]


def test_profile_usage_error(kiln_bin, dpkg_db, project):
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--profile", "sbuild", "--", "true"],
            cwd=project)
    assert r.returncode == 2
    assert "--profile takes chroot or host, not 'sbuild'" in r.stderr


def test_report_only_lets_the_probe_succeed(kiln_bin, dpkg_db, project):
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "gcc,libc6-dev", "--report-only",
             "--strict", "--", "./configure"], cwd=project)
    assert "checking for sqlite3... yes" in r.stdout
    assert hidden_group(r.stderr, "libsqlite3-dev")
    assert r.returncode == 1  # --strict: it would have been hidden


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_build_writes_outside_are_refused(kiln_bin, dpkg_db, project):
    (project / "Makefile").write_text("all:\n\techo built > out.txt\n\techo x > /var/tmp/../kiln-escape.txt || echo refused\n")
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "make", "--", "make"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "out.txt").read_text() == "built\n"
    assert "refused" in r.stdout
    assert "Permission denied" in r.stderr
    assert "refused writes: 1" in r.stderr


def build_env(kiln_bin, dpkg_db, project, args, extra_env):
    control = project / "control"
    control.write_text("Source: probe\nBuild-Depends: gcc\n")
    env = dict(os.environ, **extra_env)
    args = [str(control) if a == "CONTROL" else a for a in args]
    r = run([kiln_bin, "trace", "--db", dpkg_db, *args, "--", "env"], cwd=project, env=env)
    assert r.returncode == 0, r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


POLLUTED = {"LIBRARY_PATH": "/usr/local/toolkit/lib", "PYENV_VERSION": "3.11",
            "CFLAGS": "-O1", "DEB_BUILD_OPTIONS": "nocheck", "HOME": "/root",
            "PATH": "/nonexistent/shims:/usr/bin:/bin", "LANG": "fr_FR.UTF-8"}


def test_chroot_profile_cleans_the_environment_as_sbuild(kiln_bin, dpkg_db, project):
    env = build_env(kiln_bin, dpkg_db, project, ["--deps-from-control", "CONTROL"], POLLUTED)
    assert "LIBRARY_PATH" not in env and "PYENV_VERSION" not in env
    assert env["CFLAGS"] == "-O1" and env["DEB_BUILD_OPTIONS"] == "nocheck"
    assert env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games"
    assert env["HOME"] == "/sbuild-nonexistent"
    assert (env["SHELL"], env["LC_ALL"], env["LANG"]) == ("/bin/sh", "C.UTF-8", "fr_FR.UTF-8")
    # kiln's own variables are still there, after the cleaning
    assert "libkiln-trace.so" in env["LD_PRELOAD"] and env["KILN_SOCKET"]


def test_keep_env_and_host_profile(kiln_bin, dpkg_db, project):
    env = build_env(kiln_bin, dpkg_db, project,
                    ["--deps-from-control", "CONTROL", "--keep-env", "LIBRARY_PATH",
                     "--keep-env=HOME"], POLLUTED)
    assert env["LIBRARY_PATH"] == "/usr/local/toolkit/lib" and env["HOME"] == "/root"
    assert "PYENV_VERSION" not in env
    env = build_env(kiln_bin, dpkg_db, project,
                    ["--deps-from-control", "CONTROL", "--profile", "host"], POLLUTED)
    assert env["LIBRARY_PATH"] == "/usr/local/toolkit/lib" and env["PYENV_VERSION"] == "3.11"
    assert env["PATH"] == POLLUTED["PATH"]
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--deps", "gcc", "--keep-env", "X", "--",
             "true"], cwd=project)
    assert r.returncode == 2
    assert "--keep-env applies to --profile chroot only" in r.stderr
    r = run([kiln_bin, "trace", "--db", dpkg_db, "--profile", "chroot", "--keep-env", "X=1",
             "--", "true"], cwd=project)
    assert r.returncode == 2
    assert "--keep-env takes a variable name, not 'X=1'" in r.stderr

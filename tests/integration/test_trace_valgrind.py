"""A build's tests under valgrind (jq's test suite runs jq under valgrind
when it is installed and compares what jq wrote to stderr): kiln's library
in valgrind's client must not make valgrind say anything, and must still
hide what it hides. valgrind (3.19) does not emulate openat2, the library's
symlink check, and warns on every call: under valgrind the library does
without it (src/trace/state.c)."""
import os
import shutil

import pytest

from conftest import run

pytestmark = pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind is not installed")


def test_valgrind_client_gets_no_warning_and_the_same_answers(kiln_bin, tmp_path):
    sys_ = tmp_path / "sys"
    (sys_ / "dep").mkdir(parents=True)
    (sys_ / "nondep").mkdir()
    (sys_ / "dep" / "a.h").write_text("dep\n")
    (sys_ / "nondep" / "b.h").write_text("nondep\n")
    manifest = tmp_path / "manifest"
    manifest.write_text(f"Package: dep\nVersion: 1\nFiles:\n {sys_}/dep/\n {sys_}/dep/a.h\n\n"
                        f"Package: nondep\nVersion: 1\nFiles:\n {sys_}/nondep/\n {sys_}/nondep/b.h\n")
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    build = tmp_path / "build"
    build.mkdir()
    (build / "in.txt").write_text("in the build tree\n")
    (build / "sub").mkdir()
    script = (f"cat in.txt sub/../in.txt {sys_}/dep/a.h; echo new > out.txt; cat out.txt; "
              f"cat {sys_}/nondep/b.h 2>/dev/null || echo hidden; ls {sys_}")
    r = run([kiln_bin, "trace", "--quiet", "--db", db, "--ask", sys_, "--deps", "dep", "--",
             "valgrind", "-q", "--trace-children=yes", "--error-exitcode=9", "sh", "-c", script],
            cwd=build)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n") == ["in the build tree", "in the build tree", "dep", "new", "hidden",
                                    "dep", ""]
    assert "unhandled" not in r.stderr and "WARNING" not in r.stderr, r.stderr
    assert "probably missing: nondep" in r.stderr


def test_valgrind_client_survives_a_checked_window(kiln_bin):
    # A hidden locale makes bash's setlocale run in the checked window
    # (syscall user dispatch, src/trace/sud.c). Under valgrind the client's
    # system calls are made by valgrind's core, outside the library's text:
    # a window there trapped every one of them and valgrind died of SIGSYS.
    # Under valgrind the library opens no window (docs/glibc-data.md).
    from test_trace_glibc_data import LocaleWorld, C_UTF8
    if not os.path.isdir(C_UTF8) or not shutil.which("bash"):
        pytest.skip(f"needs {C_UTF8} and bash")
    w = LocaleWorld(kiln_bin)
    try:
        cmd = ["valgrind", "-q", "--error-exitcode=9", "bash", "-c", "echo ok"]
        env = dict(os.environ, LOCPATH=w.loc, LC_ALL="xx_XX.UTF-8")
        r = run([kiln_bin, "trace", "--quiet", "--db", w.db, "--deps", "locales-yy", "--ask", w.sys,
                 "--", *cmd], env=env, cwd=w.build)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout == "ok\n"
        # The hidden locale is still absent (an ABSENT plan answered as
        # glibc answers a missing locale, docs/glibc-data.md): bash warns
        # as in the tree where it is really missing. Without the window
        # errno is ENOENT where glibc, failing on a name it failed before,
        # leaves it as it was (the fallback's documented difference).
        oracle = run(cmd, env=dict(env, LOCPATH=w.oracle), cwd=w.build)
        assert oracle.returncode == 0 and "xx_XX.UTF-8" in oracle.stderr, oracle.stderr
        said = [line for line in r.stderr.splitlines() if not line.startswith("=== kiln")]
        want = oracle.stderr.splitlines()
        assert len(said) == len(want), (said, want)
        for got, line in zip(said, want):
            assert got in (line, line + ": No such file or directory"), (said, want)
    finally:
        w.cleanup()

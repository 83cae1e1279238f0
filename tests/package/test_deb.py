"""The Debian package, as a user gets it: build it with dpkg-buildpackage
from a copy of the source tree, check it with lintian, unpack it with
dpkg -x into a private root and run what it installed from there: kiln
--version, kiln trace (which must find its preload library in the unpacked
root), kiln meta (with the dbgsym package's debug file), every man page
through man -l, the shell completion. `make check-deb` runs this; .ci/run
does after `make check`."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([str(c) for c in cmd], **kw)


def changelog_version():
    first = (ROOT / "debian" / "changelog").read_text().splitlines()[0]
    return re.match(r"kiln \(([^)]+)\)", first).group(1)


def copy_source(dest):
    """The tracked and new (not ignored) files of the checkout; the tree
    without build/ when it is not a git checkout."""
    r = run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    if r.returncode == 0:
        for name in filter(None, r.stdout.split("\0")):
            src = ROOT / name
            if src.is_file() or src.is_symlink():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name, follow_symlinks=False)
    else:
        shutil.copytree(ROOT, dest, symlinks=True, ignore=shutil.ignore_patterns("build", "bench/out"))


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    for tool in ("dpkg-buildpackage", "dh"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing (debian/control's Build-Depends; run .ci/deps)")
    top = tmp_path_factory.mktemp("deb")
    src = top / "kiln"
    src.mkdir()
    copy_source(src)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "KILN_"))}
    env.update(DEB_BUILD_OPTIONS="nocheck parallel=2", DEB_BUILD_PROFILES="nocheck")
    r = run(["dpkg-buildpackage", "-b", "-uc", "-us"], cwd=src, env=env, timeout=1800)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    version = changelog_version()
    deb = top / f"kiln_{version}_amd64.deb"
    dbgsym = top / f"kiln-dbgsym_{version}_amd64.deb"
    assert deb.exists() and dbgsym.exists(), sorted(os.listdir(top))
    root = top / "root"
    for d in (deb, dbgsym):
        r = run(["dpkg-deb", "-x", d, root])
        assert r.returncode == 0, r.stderr
    return {"top": top, "src": src, "deb": deb, "dbgsym": dbgsym, "root": root,
            "changes": top / f"kiln_{version}_amd64.changes", "log": log}


def kiln(debs, *args, **kw):
    env = kw.pop("env", dict(os.environ))
    env["KILN_CONFIG"] = ""
    env["KILN_TRACE_NO_RECALL"] = "1"  # nothing kept in this user's cache directory
    env.pop("KILN_META_SOCKET", None)
    return run([debs["root"] / "usr/bin/kiln", *args], env=env, **kw)


def test_lintian_clean(debs):
    """No error, warning or info tag; an override in debian/ would carry its
    reason beside it."""
    if not shutil.which("lintian"):
        pytest.fail("lintian is missing (debian/control's Build-Depends <!nocheck>; run .ci/deps)")
    r = run(["lintian", "--display-info", "--fail-on", "error,warning,info", debs["changes"]],
            timeout=600)
    tags = [line for line in r.stdout.splitlines() if re.match(r"^[EWI]: ", line)]
    assert r.returncode == 0 and tags == [], r.stdout + r.stderr


def test_make_install_installs_the_same_files(debs, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    dest = tmp_path / "dest"
    r = run(["make", "-C", debs["src"], "install", f"DESTDIR={dest}", "PREFIX=/usr"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    def files(top, packaged):
        out = set()
        for p in top.rglob("*"):
            if p.is_dir():
                continue
            rel = "/" + str(p.relative_to(top))
            if packaged:
                if rel in ("/usr/share/doc/kiln/copyright", "/usr/share/doc/kiln/changelog.gz",
                           "/usr/share/lintian/overrides/kiln"):
                    continue   # dh_installdocs, dh_installchangelogs, dh_lintian add these
                rel = rel[:-3] if rel.endswith(".gz") else rel   # dh_compress
            out.add(rel)
        return out
    packaged = files(debs["root"], True) - {f for f in files(debs["root"], True)
                                             if f.startswith("/usr/lib/debug/")
                                             or f.startswith("/usr/share/doc/kiln-dbgsym")}
    assert packaged == files(dest, False)
    assert "/usr/lib/x86_64-linux-gnu/kiln/libkiln-trace.so" in packaged


def test_installed_version(debs):
    r = kiln(debs, "--version")
    assert (r.returncode, r.stdout) == (0, f"kiln {changelog_version()}\n")


MANIFEST = """Package: base
Version: 1
Essential: yes
Files:
 {s}/
 {s}/inc/
 {s}/inc/base.h

Package: undeclared
Version: 1
Files:
 {s}/inc/secret.h
"""


def test_installed_trace_finds_its_preload_library(debs, tmp_path):
    s = tmp_path / "sys"
    (s / "inc").mkdir(parents=True)
    (s / "inc" / "base.h").write_text("base\n")
    (s / "inc" / "secret.h").write_text("secret\n")
    (tmp_path / "manifest").write_text(MANIFEST.format(s=s))
    db = tmp_path / "r.db"
    r = kiln(debs, "registry", "--db", db, "import", "manifest", tmp_path / "manifest")
    assert r.returncode == 0, r.stderr
    (tmp_path / "build").mkdir()
    script = (f'echo "$LD_PRELOAD"; cat {s}/inc/base.h; '
              f'cat {s}/inc/secret.h 2>/dev/null || echo secret hidden')
    r = kiln(debs, "trace", "--db", db, "--ask", s, "--json", "-o", tmp_path / "r.json", "--",
             "sh", "-c", script, cwd=tmp_path / "build")
    assert r.returncode == 0, r.stderr
    lib = debs["root"] / "usr/lib/x86_64-linux-gnu/kiln/libkiln-trace.so"
    assert r.stdout.splitlines() == [str(lib.resolve()), "base", "secret hidden"]
    assert "undeclared (1)" in r.stderr and f"{s}/inc/secret.h" in r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [h["package"] for h in report["hidden"]] == ["undeclared"]


def test_installed_meta_with_the_dbgsym_package(debs, tmp_path):
    root = debs["root"]
    binary = root / "usr/bin/kiln"
    r = kiln(debs, "meta", "types", binary)
    assert r.returncode == 1 and "no DWARF debug info" in r.stderr   # stripped
    r = kiln(debs, "meta", "types", binary, "--debug-root", root / "usr/lib/debug",
             "--type", "struct cliopt")
    assert r.returncode == 0, r.stderr
    members = re.findall(r"^  member (\w+) offset=(\d+)", r.stdout, re.M)
    assert [m[0] for m in members] == ["name", "shortname", "arg", "id", "help"]
    # the meta server of the installed kiln, one parse for two commands
    script = (f'kiln="{binary}"; "$kiln" meta types "$0" --debug-root "$1" >/dev/null && '
              f'"$kiln" meta frames "$0" --debug-root "$1" >/dev/null && "$kiln" meta stats')
    r = kiln(debs, "meta", "run", "--", "sh", "-c", script, binary, root / "usr/lib/debug")
    assert r.returncode == 0, r.stderr
    stats = dict(line.split() for line in r.stdout.splitlines())
    assert stats["jobs"] == "2" and stats["parses"] == "1" and stats["hits"] == "1", r.stdout


MAN_PAGES = ["man1/kiln.1", "man1/kiln-trace.1", "man1/kiln-registry.1", "man1/kiln-meta.1",
             "man5/kiln.5"]


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_pages_render(debs, page):
    path = debs["root"] / "usr/share/man" / f"{page}.gz"
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", LC_ALL="C.UTF-8")
    r = run(["man", "--warnings", "-l", path], env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    name = pathlib.Path(page).stem
    assert re.search(rf"^NAME\n\s+{re.escape(name)} - ", r.stdout, re.M), r.stdout[:400]
    assert "SEE ALSO" in r.stdout


def test_completion_installed(debs):
    comp = debs["root"] / "usr/share/bash-completion/completions/kiln"
    script = (f'source "{comp}"; COMP_WORDS=("{debs["root"]}/usr/bin/kiln" tr); COMP_CWORD=1; '
              '_kiln; printf "%s\\n" "${COMPREPLY[@]}"')
    r = run(["bash", "-c", script])
    assert (r.returncode, r.stdout) == (0, "trace\n"), r.stderr

"""The report's answer (docs/trace-report.md): hidden packages ranked by
their evidence, the known harmless probes apart, the verdict line, what to
write for an alternative or a virtual package, the access behind a failed
build, unused Build-Depends, --strict, --quiet, colours and where the rest
of a shortened list is. A synthetic system tree under a manifest registry,
real commands under the preload library (the fast counterpart of
`make check-packages`)."""
import json
import os
import pty
import re
import select
import shutil
import subprocess
import time

import pytest

from conftest import run
from runas import manifest_text

SCRIPT_ALL = """
$SYS/usr/bin/runme 2>/dev/null          # exec of a hidden file
cat $SYS/usr/include/read.h 2>/dev/null  # read
lookme 2>/dev/null                      # a command looked up in PATH
ls $SYS/usr/share/dirpkg >/dev/null 2>&1 # a directory listed
test -e $SYS/usr/share/statpkg/file     # a stat of a file, not in PATH
test -e $SYS/usr/lib/absentpkg/Foo.pmc   # a name that does not exist
./dpkg-buildpackage                     # a known harmless probe
cat $SYS/usr/include/dep.h $SYS/usr/include/impl.h >/dev/null
true
"""


def package(name, files, essential=False, depends=None, provides=None):
    return (name, essential, files, depends, provides)


@pytest.fixture
def world(tmp_path, kiln_bin):
    sys_ = tmp_path / "sys"
    S = str(sys_)
    for d in ("usr/bin", "usr/include", "usr/share/dirpkg", "usr/share/statpkg", "usr/lib/absentpkg",
              "usr/share/many", "usr/share/shared"):
        (sys_ / d).mkdir(parents=True, exist_ok=True)
    for exe in ("runme", "lookme", "gpg"):
        p = sys_ / "usr" / "bin" / exe
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    for h in ("read.h", "dep.h", "impl.h", "unused.h", "alt-a.h", "alt-b.h", "prov1.h", "prov2.h",
              "top.h", "low.h"):
        (sys_ / "usr" / "include" / h).write_text("x\n")
    (sys_ / "usr" / "share" / "statpkg" / "file").write_text("x\n")
    (sys_ / "usr" / "share" / "dirpkg" / "f").write_text("x\n")
    for i in range(13):
        (sys_ / "usr" / "share" / "many" / f"f{i:02d}").write_text("x\n")
    for f in ("a.pm", "b.pm"):
        (sys_ / "usr" / "share" / "shared" / f).write_text("x\n")
    core = sys_ / "usr/lib/x86_64-linux-gnu/perl/5.36.0/CORE"
    core.mkdir(parents=True)
    (core / "perl.h").write_text("x\n")
    (sys_ / "usr/lib/x86_64-linux-gnu/libperl.a").write_text("x\n")
    # merged /usr: lib -> usr/lib, listed as a directory by the packages
    # whose files were under /lib before the merge
    os.symlink("usr/lib", sys_ / "lib")
    for f in ("libbase.so.1", "libold.so.1"):
        (sys_ / "usr/lib" / f).write_text("x\n")
    (sys_ / "usr/include/old.h").write_text("x\n")
    # a symlink to a directory shipped as a symlink (default-java's kind)
    (sys_ / "usr/lib/jvm/java-17").mkdir(parents=True)
    (sys_ / "usr/lib/jvm/java-17/javac").write_text("x\n")
    os.symlink("java-17", sys_ / "usr/lib/jvm/default")
    pkgs = [
        package("base", [f"{S}/", f"{S}/usr/", f"{S}/usr/bin/", f"{S}/usr/include/", f"{S}/usr/share/",
                         f"{S}/usr/lib/", f"{S}/usr/share/many/", f"{S}/lib/", f"{S}/lib/libbase.so.1"],
                essential=True),
        package("libold1", [f"{S}/lib/", f"{S}/lib/libold.so.1"]),
        package("libold-dev", [f"{S}/usr/include/old.h"], depends="libold1"),
        package("jdk17", [f"{S}/usr/lib/jvm/", f"{S}/usr/lib/jvm/java-17/", f"{S}/usr/lib/jvm/java-17/javac"]),
        package("jdk-default", [f"{S}/usr/lib/jvm/", f"{S}/usr/lib/jvm/default -> java-17"], depends="jdk17"),
        package("pkg-exec", [f"{S}/usr/bin/runme"]),
        package("pkg-read", [f"{S}/usr/include/read.h"]),
        package("pkg-cmd", [f"{S}/usr/bin/lookme"]),
        package("pkg-dir", [f"{S}/usr/share/dirpkg/", f"{S}/usr/share/dirpkg/f"]),
        package("pkg-stat", [f"{S}/usr/share/statpkg/", f"{S}/usr/share/statpkg/file"]),
        package("pkg-absent", [f"{S}/usr/lib/absentpkg/"]),
        package("gnupg-fake", [f"{S}/usr/bin/gpg"]),
        package("pkg-many", [f"{S}/usr/share/many/f{i:02d}" for i in range(13)]),
        package("libdep-dev", [f"{S}/usr/include/dep.h"]),
        package("libunused-dev", [f"{S}/usr/include/unused.h"]),
        package("meta", [], depends="impl"),
        package("impl", [f"{S}/usr/include/impl.h"]),
        package("liba-dev", [f"{S}/usr/include/alt-a.h"]),
        package("libb-dev", [f"{S}/usr/include/alt-b.h"]),
        package("prov1", [f"{S}/usr/include/prov1.h"], provides="virt"),
        package("prov2", [f"{S}/usr/include/prov2.h"], provides="virt"),
        package("top", [f"{S}/usr/include/top.h"], depends="low"),
        package("low", [f"{S}/usr/include/low.h"]),
        package("pkg-sha", [f"{S}/usr/share/shared/", f"{S}/usr/share/shared/a.pm"]),
        package("pkg-shb", [f"{S}/usr/share/shared/", f"{S}/usr/share/shared/b.pm"]),
        # in the base set, as Debian's is (dpkg-dev -> perl -> libperl5.36)
        package("libperl5.36", [f"{S}/usr/lib/x86_64-linux-gnu/perl/5.36.0/CORE/perl.h"], essential=True),
        package("libperl-dev", [f"{S}/usr/lib/x86_64-linux-gnu/libperl.a"], depends="libperl5.36",
                provides="perl-xs-dev"),
    ]
    text = []
    for name, essential, files, depends, provides in pkgs:
        stanza = manifest_text([(name, essential, files)])
        extra = (f"Depends: {depends}\n" if depends else "") + (f"Provides: {provides}\n" if provides else "")
        text.append(stanza.replace("Files:\n", extra + "Files:\n", 1))
    manifest = tmp_path / "manifest"
    manifest.write_text("\n".join(text))
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    build = tmp_path / "build"
    build.mkdir()
    probe = build / "dpkg-buildpackage"   # looks for a signing tool, as dpkg does
    probe.write_text(f"#!/bin/sh\ntest -x {S}/usr/bin/gpg\nexit 0\n")
    probe.chmod(0o755)

    class W:
        pass
    w = W()
    w.tmp, w.sys, w.db, w.build = tmp_path, sys_, db, build
    w.kiln = kiln_bin
    w.env = dict(os.environ, SYS=S, PATH=f"{S}/usr/bin:" + os.environ["PATH"])
    w.env.pop("NO_COLOR", None)
    return w


def trace(w, script, *opts, deps="libdep-dev,libunused-dev,meta", env=None, stderr=None):
    args = [w.kiln, "trace", "--db", w.db, "--ask", w.sys]
    if deps:
        args += ["--deps", deps]
    return run([*args, *opts, "--", "sh", "-c", script], cwd=w.build, env=env or w.env,
               **({"stderr": stderr} if stderr is not None else {}))


def report(w, name="r.json"):
    return json.loads((w.build / name).read_text())


def test_ranking_by_evidence(world):
    r = trace(world, SCRIPT_ALL, "--json", "-o", "r.json")
    assert r.returncode == 0, r.stderr
    rep = report(world)
    assert rep["schema_version"] == 2
    ranked = [(p["name"], p["evidence"]) for p in rep["packages"] if p["rank"]]
    assert ranked == [("pkg-exec", "exec"), ("pkg-read", "read"), ("pkg-cmd", "command"),
                      ("pkg-dir", "directory"), ("pkg-stat", "stat")]
    assert [p["rank"] for p in rep["packages"] if p["rank"]] == [1, 2, 3, 4, 5]
    harmless = {p["name"]: p["harmless"] for p in rep["packages"] if not p["rank"]}
    assert harmless == {"gnupg-fake": "dpkg-signing-tools", "pkg-absent": "absent-name"}
    # each hidden path carries its evidence
    hidden = {h["path"]: h for h in rep["hidden"]}
    cmd = hidden[f"{world.sys}/usr/bin/lookme"]
    assert cmd["evidence"]["kind"] == "command" and cmd["harmless"] is None
    assert cmd["evidence"]["text"] == "lookme looked up in PATH by sh"
    gpg = hidden[f"{world.sys}/usr/bin/gpg"]
    assert gpg["harmless"] == "dpkg-signing-tools"
    assert gpg["evidence"]["text"].endswith("by dpkg-buildpackage")
    # the text report: ranked in order, the harmless apart, the verdict last
    err = r.stderr
    order = [err.index(f"  {i}. {n} (") for i, (n, _e) in enumerate(ranked, 1)]
    assert order == sorted(order)
    assert re.search(r"known harmless probes .*\n(    .*\n)*    gnupg-fake \(1\): dpkg-signing-tools: ", err)
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith("=== kiln trace verdict: probably missing: pkg-exec (runme run by sh), "
                           "pkg-read (")
    assert last == "=== kiln trace verdict: " + rep["verdict"]["text"]
    assert rep["verdict"]["missing"][:3] == ["pkg-exec", "pkg-read", "pkg-cmd"]
    assert "possibly missing: pkg-dir (directory " in last
    assert rep["totals"]["harmless"] == 2
    assert rep["totals"]["violations"] == 5


def test_unused_declared_packages(world):
    r = trace(world, SCRIPT_ALL, "--json", "-o", "r.json")
    rep = report(world)
    # libdep-dev: its file read; meta: only what it brings (impl) was read
    assert rep["unused"] == ["libunused-dev"], r.stderr
    assert "unused declared dependencies (none of their files reached): libunused-dev" in r.stderr
    assert rep["verdict"]["text"].endswith("; unused declared dependencies: libunused-dev")


def test_what_the_build_used_is_worked_out_as_it_runs(world):
    # The server resolves each allowed path while it waits for the next
    # message, not after the build: a file the build read and something
    # else removed before the build ended still counts as used. (Worked
    # out at the end only, libdep-dev came out unused here.)
    script = ("cat $SYS/usr/include/dep.h $SYS/usr/include/impl.h >/dev/null; touch read.done; "
              "while [ ! -e go ]; do sleep 0.05; done")
    args = [world.kiln, "trace", "--db", world.db, "--ask", world.sys,
            "--deps", "libdep-dev,libunused-dev,meta", "--json", "-o", "r.json", "--", "sh", "-c", script]
    p = subprocess.Popen(args, cwd=world.build, env=world.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(400):
            if (world.build / "read.done").exists() or p.poll() is not None:
                break
            time.sleep(0.025)
        assert (world.build / "read.done").exists(), p.communicate(timeout=60)
        time.sleep(0.3)
        (world.sys / "usr/include/dep.h").unlink()
        (world.build / "go").touch()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert report(world)["unused"] == ["libunused-dev"], err


def test_an_unused_virtual_package_names_its_providers(world):
    # a virtual package has no files: listed unused, it says what provides it
    r = trace(world, "cat $SYS/usr/include/dep.h", "--json", "-o", "r.json",
              deps="virt,libunused-dev,libdep-dev")
    assert r.returncode == 0, r.stderr
    rep = report(world)
    assert rep["unused"] == ["virt", "libunused-dev"], r.stderr
    assert rep["unused_virtual"] == {"virt": "prov1, prov2"}
    assert ("unused declared dependencies (none of their files reached): "
            "virt (virtual, provided by prov1, prov2), libunused-dev\n") in r.stderr
    # the verdict line names packages only, as before
    assert rep["verdict"]["text"].endswith("; unused declared dependencies: virt, libunused-dev")
    # a failed build works none of it out
    r = trace(world, "exit 3", "--json", "-o", "r.json", deps="virt")
    rep = report(world)
    assert rep["unused"] is None and rep["unused_virtual"] is None


def test_a_directory_alias_is_no_package_used(world):
    # $SYS/lib -> usr/lib is listed as a directory by base and by libold1
    # (merged /usr's /lib, by some fifty packages on Debian 12): a path
    # through it uses the package of the file it reaches, not every package
    # that lists the alias
    script = "cat $SYS/lib/libbase.so.1 $SYS/usr/include/dep.h >/dev/null"
    r = trace(world, script, "--json", "-o", "r.json", deps="libold-dev,libdep-dev")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == ["libold-dev"], r.stderr
    # libold1's own file, reached through the alias, uses it
    script = "cat $SYS/lib/libold.so.1 $SYS/usr/include/dep.h >/dev/null"
    r = trace(world, script, "--json", "-o", "r.json", deps="libold-dev,libdep-dev")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == [], r.stderr
    # a symlink to a directory that a package ships as a symlink is that
    # package's: the path through it uses it even when the directory's
    # package is declared too
    script = "cat $SYS/usr/lib/jvm/default/javac"
    r = trace(world, script, "--json", "-o", "r.json", deps="jdk-default,jdk17")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == [], r.stderr
    r = trace(world, "cat $SYS/usr/lib/jvm/java-17/javac", "--json", "-o", "r.json",
              deps="jdk-default,jdk17")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == ["jdk-default"], r.stderr


def test_perl_xs_dev_is_used_by_compiling_against_perls_headers(world):
    # Debian's perl asks XS modules to declare perl-xs-dev (libperl-dev's
    # README.cross), for the host's Config.pm in cross builds; a native
    # build reaches only libperl5.x's CORE headers.
    xs = "cat $SYS/usr/lib/x86_64-linux-gnu/perl/5.36/CORE/perl.h $SYS/usr/include/dep.h >/dev/null"
    os.symlink("5.36.0", world.sys / "usr/lib/x86_64-linux-gnu/perl/5.36")
    r = trace(world, xs, "--json", "-o", "r.json", deps="perl-xs-dev,libdep-dev")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == [], r.stderr
    # a build that compiles no XS does not use it
    r = trace(world, "cat $SYS/usr/include/dep.h", "--json", "-o", "r.json", deps="perl-xs-dev,libdep-dev")
    assert r.returncode == 0, r.stderr
    assert report(world)["unused"] == ["perl-xs-dev"], r.stderr


def test_glob_results_are_listing_entries_not_findings(world, helper):
    # glibc's glob lists the directory itself; the hidden names it found
    # vanish as from readdir, and the program never looked them up (ld
    # globs /etc/ld.so.conf.d for the .conf files of packages not declared)
    hc = helper("hookcall")
    r = trace(world, f"{hc} glob \"$SYS/usr/share/many/*\"; cat $SYS/usr/include/dep.h",
              "--json", "-o", "r.json", "--log", "paths.log", deps="libdep-dev")
    assert r.returncode == 0, r.stderr
    assert "glob 3\n" in r.stdout  # GLOB_NOMATCH: every name is pkg-many's
    rep = report(world)
    assert [p["name"] for p in rep["packages"]] == [], r.stderr
    assert rep["totals"]["entries_hidden"] == 13
    assert rep["verdict"]["complete"], r.stderr
    # glob listed the directory: --log says so, as for ls
    log = (world.build / "paths.log").read_text().splitlines()
    assert [l for l in log if l.endswith(f" {world.sys}/usr/share/many")][0].startswith("----l--")
    # a hidden directory glob listed is evidence, as ls's listing of it is
    r = trace(world, f"{hc} glob \"$SYS/usr/share/dirpkg/*\"", "--json", "-o", "r.json",
              deps="libdep-dev")
    assert "glob 3\n" in r.stdout
    pk = {p["name"]: p for p in report(world)["packages"]}
    assert pk["pkg-dir"]["evidence"] == "directory", r.stderr


def test_unused_not_claimed_for_a_failed_build(world):
    r = trace(world, "cat $SYS/usr/include/dep.h >/dev/null; exit 4", "--json", "-o", "r.json")
    assert r.returncode == 4
    assert report(world)["unused"] is None
    assert "unused declared dependencies: not worked out (the build did not succeed)" in r.stderr


def test_complete_and_strict_with_harmless_probes_only(world):
    script = "./dpkg-buildpackage; test -e $SYS/usr/lib/absentpkg/Foo.pmc; cat $SYS/usr/include/dep.h"
    r = trace(world, script, "--strict", "--json", "-o", "r.json", deps="libdep-dev")
    assert r.returncode == 0, r.stderr
    rep = report(world)
    assert rep["verdict"]["complete"] and rep["verdict"]["text"] == "Build-Depends look complete"
    assert rep["totals"]["hidden"] == 2 and rep["totals"]["violations"] == 0
    assert r.stderr.rstrip("\n").endswith("=== kiln trace verdict: Build-Depends look complete")
    # one ranked finding fails --strict, and the report says so before the verdict
    r = trace(world, script + "; cat $SYS/usr/include/read.h 2>/dev/null; true", "--strict",
              deps="libdep-dev")
    assert r.returncode == 1
    lines = r.stderr.rstrip("\n").split("\n")
    assert lines[-2] == "  --strict: exit status 1: 1 finding that count (ranked hidden paths, refused writes)"
    assert lines[-1].startswith("=== kiln trace verdict: probably missing: pkg-read (")


def test_quiet_prints_only_the_verdict(world):
    r = trace(world, "cat $SYS/usr/include/read.h $SYS/usr/include/dep.h >/dev/null 2>&1; true",
              "--quiet", deps="libdep-dev")
    assert r.returncode == 0
    assert r.stderr == ("=== kiln trace verdict: probably missing: pkg-read "
                        f"({world.sys}/usr/include/read.h read by cat)\n")


def test_failed_build_names_the_access_behind_it(world):
    r = trace(world, "cat $SYS/usr/include/read.h 2>/dev/null; exit 2", "--json", "-o", "r.json",
              deps="libdep-dev")
    assert r.returncode == 2
    v = report(world)["verdict"]
    assert v["failed"] and v["cause"]["package"] == "pkg-read" and v["cause"]["kind"] == "hidden"
    assert v["cause"]["path"] == f"{world.sys}/usr/include/read.h"
    assert v["text"] == (f"probably missing: pkg-read ({world.sys}/usr/include/read.h read by cat); "
                         f"the build failed (exit status 2), most likely because "
                         f"{world.sys}/usr/include/read.h was hidden (pkg-read)")
    assert "  build: failed (exit status 2)\n" in r.stderr


def test_refused_write_outranks_a_read_as_the_cause(world):
    script = ("cat $SYS/usr/include/read.h 2>/dev/null; echo x > $SYS/usr/include/new.h 2>/dev/null; "
              "cat $SYS/usr/include/read.h 2>/dev/null; exit 1")
    r = trace(world, script, "--json", "-o", "r.json", deps="libdep-dev")
    v = report(world)["verdict"]
    assert v["cause"]["kind"] == "refused write" and v["cause"]["path"] == f"{world.sys}/usr/include/new.h"
    assert "most likely because a write to " + f"{world.sys}/usr/include/new.h was refused (by sh)" in v["text"]


def test_no_cause_when_nothing_counts(world):
    r = trace(world, "./dpkg-buildpackage; exit 3", "--json", "-o", "r.json", deps="libdep-dev")
    assert r.returncode == 3
    v = report(world)["verdict"]
    assert v["cause"] is None
    assert v["text"] == ("Build-Depends look complete; the build failed (exit status 3), and kiln hid "
                         "or refused nothing that counts")


def test_a_dependency_of_another_hidden_package_is_shown_under_it(world):
    script = "cat $SYS/usr/include/low.h $SYS/usr/include/top.h 2>/dev/null; true"
    r = trace(world, script, "--json", "-o", "r.json", deps="libdep-dev")
    rep = report(world)
    pk = {p["name"]: p for p in rep["packages"]}
    assert pk["low"]["brought_by"] == "top" and pk["top"]["brought_by"] is None
    assert [p["name"] for p in rep["packages"]][:2] == ["top", "low"]
    assert rep["verdict"]["missing"] == ["top"]   # writing top is enough
    assert "  2. low (1)  evidence: read; a dependency of top, also hidden" in r.stderr


def test_each_package_below_a_shared_hidden_directory_is_named(world):
    # /usr/share/shared is both packages' (as /usr/share/perl5/Module is
    # several Perl packages'): the walk hides it whole, yet each file read
    # below it names its own package, whichever was asked first.
    script = ("cat $SYS/usr/share/shared/b.pm 2>/dev/null; test -e $SYS/usr/share/shared/a.pm;"
              "cat $SYS/usr/share/shared/a.pm 2>/dev/null; test -e $SYS/usr/share/shared/c.pm;"
              "ls $SYS/usr/share/shared >/dev/null 2>&1; true")
    r = trace(world, script, "--json", "-o", "r.json", deps="libdep-dev")
    assert r.returncode == 0, r.stderr
    rep = report(world)
    pk = {p["name"]: p for p in rep["packages"]}
    assert pk["pkg-sha"]["evidence"] == "read" and pk["pkg-shb"]["evidence"] == "read"
    assert sorted(rep["verdict"]["missing"]) == ["pkg-sha", "pkg-shb"]
    hidden = {h["path"]: h for h in rep["hidden"]}
    shared = f"{world.sys}/usr/share/shared"
    assert hidden[f"{shared}/a.pm"]["package"] == "pkg-sha"
    assert hidden[f"{shared}/b.pm"]["package"] == "pkg-shb"
    # the directory itself (listed) and the absent name stay the directory's
    assert hidden[shared]["package"] in ("pkg-sha", "pkg-shb")
    assert f"{shared}/c.pm" not in hidden
    assert "pkg-sha (" in r.stderr.split("verdict:")[-1] and "pkg-shb (" in r.stderr.split("verdict:")[-1]


def test_alternative_and_virtual_package_advice(world):
    control = world.build / "control"
    control.write_text("Source: x\nBuild-Depends: liba-dev | libb-dev, virt\n")
    script = "cat $SYS/usr/include/alt-b.h $SYS/usr/include/prov2.h 2>/dev/null; true"
    r = trace(world, script, "--json", "-o", "r.json", "--deps-from-control", control, "--keep-env", "SYS",
              deps=None)
    rep = report(world)
    assert rep["declared"][:2] == ["liba-dev", "virt"], rep["declared"]
    pk = {p["name"]: p for p in rep["packages"]}
    assert pk["libb-dev"]["write"] == "libb-dev"
    assert pk["libb-dev"]["advice"] == ("debian/control has 'liba-dev | libb-dev': a clean chroot gets "
                                        "liba-dev (apt takes the first alternative it can install), this "
                                        "build needs libb-dev: write 'libb-dev' (first, or alone)")
    assert pk["prov2"]["write"] == "prov2 | virt"
    assert pk["prov2"]["advice"].startswith("'virt' in debian/control is a virtual package: a clean "
                                            "chroot gets prov1 for it, this build needs prov2")
    assert "prov2 (write 'prov2 | virt'; " in rep["verdict"]["text"]
    assert pk["libb-dev"]["advice"] in r.stderr


def build_type_run(w, *args):
    """A fake dpkg-buildpackage that reads a file of an Indep dependency,
    looks for a program of another in PATH, and stats an Arch dependency's
    file, traced with debian/control's Build-Depends."""
    control = w.build / "control"
    control.write_text("Source: x\nBuild-Depends: libdep-dev\nBuild-Depends-Arch: pkg-stat\n"
                       "Build-Depends-Indep: pkg-read, pkg-cmd\n")
    fake = w.tmp / "fake" / "dpkg-buildpackage"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!/bin/sh\ncat {w.sys}/usr/include/read.h >/dev/null 2>&1\n"
                    f"command -v lookme >/dev/null\n"
                    f"test -e {w.sys}/usr/share/statpkg/file\nexit 0\n")
    fake.chmod(0o755)
    cmd_args, opts = list(args), []
    if "--build-type" in args:
        i = args.index("--build-type")
        opts, cmd_args = list(args[i:i + 2]), list(args[:i] + args[i + 2:])
    return run([w.kiln, "trace", "--db", w.db, "--ask", w.sys, "--deps-from-control", control,
                "--profile", "host", "--json", "-o", "r.json", *opts, "--", fake, *cmd_args],
               cwd=w.build, env=w.env)


INDEP_OUT = ("Build-Depends-Indep left out, as dpkg-checkbuilddeps and sbuild leave it\n")


@pytest.mark.parametrize("args,build_type,ranked,harmless,line", [
    (("-B", "-uc"), "any", ["pkg-read"], ["pkg-cmd"], "  build type: any ({fake}'s options): " + INDEP_OUT),
    (("-A",), "all", [], ["pkg-stat"], "  build type: all ({fake}'s options): Build-Depends-Arch left "
                                       "out, as dpkg-checkbuilddeps and sbuild leave it\n"),
    (("--build=source",), "source", ["pkg-read"], ["pkg-cmd", "pkg-stat"],
     "  build type: source ({fake}'s options): Build-Depends-Arch and Build-Depends-Indep left out, "
     "as dpkg-checkbuilddeps and sbuild leave them\n"),
    (("-b",), "binary", [], [], None),
    ((), "full", [], [], None),
    (("-B", "--build-type", "binary"), "binary", [], [], None),
    (("-b", "--build-type", "any"), "any", ["pkg-read"], ["pkg-cmd"], "  build type: any (--build-type): "
                                                                      + INDEP_OUT),
])
def test_build_type_decides_which_fields_count(world, args, build_type, ranked, harmless, line):
    r = build_type_run(world, *args)
    assert r.returncode == 0, r.stderr
    rep = report(world)
    assert rep["build_type"] == build_type
    pk = {p["name"]: p for p in rep["packages"]}
    assert sorted(n for n, p in pk.items() if p["rank"]) == ranked, r.stderr
    assert sorted(n for n, p in pk.items() if not p["rank"]) == harmless, r.stderr
    for n in harmless:  # looked for and not needed: as in sbuild's chroot for this build
        assert pk[n]["harmless"] == "build-type"
    if "pkg-read" in ranked:  # needed: it belongs in Build-Depends
        field = "Build-Depends-Arch or -Indep" if build_type == "source" else "Build-Depends-Indep"
        assert pk["pkg-read"]["advice"] == (
            f"pkg-read comes with {field} only, which a build of type "
            f"{build_type} leaves out (sbuild does not install it): this build needs it, so it "
            "belongs in Build-Depends")
    fake = world.tmp / "fake" / "dpkg-buildpackage"
    if line:
        assert line.format(fake=fake) in r.stderr, r.stderr
    else:
        assert "build type:" not in r.stderr


def test_build_type_line_only_when_a_field_was_left_out(world):
    control = world.build / "control"
    control.write_text("Source: x\nBuild-Depends: libdep-dev\n")
    r = run([world.kiln, "trace", "--db", world.db, "--ask", world.sys, "--deps-from-control", control,
             "--profile", "host", "--json", "-o", "r.json", "--build-type", "any", "--", "true"],
            cwd=world.build)
    assert r.returncode == 0, r.stderr
    assert report(world)["build_type"] == "any"
    assert "build type:" not in r.stderr


def test_build_type_option_errors(world):
    r = run([world.kiln, "trace", "--db", world.db, "--build-type", "arch", "--deps-from-control",
             world.build / "control", "--", "true"], cwd=world.build)
    assert r.returncode == 2 and "--build-type takes source, any, all, binary, full" in r.stderr
    r = run([world.kiln, "trace", "--db", world.db, "--build-type", "any", "--", "true"],
            cwd=world.build)
    assert r.returncode == 2 and "--build-type applies to --deps-from-control only" in r.stderr
    # without a control file the JSON says nothing of a build type
    r = trace(world, "true", "--json", "-o", "r.json", deps="libdep-dev")
    assert report(world)["build_type"] is None


def test_shortened_sections_say_where_the_rest_is(world):
    many = sorted(os.listdir(world.sys / "usr" / "share" / "many"))
    script = " ".join(f"test -e $SYS/usr/share/many/{f};" for f in many) + " true"
    r = trace(world, script, "--json", "-o", "out.json", deps="libdep-dev")
    assert "    ... and 3 more (all in out.json)\n" in r.stderr
    r = trace(world, script, "--log", "paths.log", deps="libdep-dev")
    assert "    ... and 3 more (every path in paths.log)\n" in r.stderr
    r = trace(world, script, deps="libdep-dev")
    assert "    ... and 3 more (--json -o FILE lists them all)\n" in r.stderr
    r = trace(world, script, "--json", deps="libdep-dev")
    assert "    ... and 3 more (all in the JSON report on standard output)\n" in r.stderr


def run_on_a_terminal(w, script, env):
    """kiln trace with its stderr on a pseudo-terminal; returns what it wrote."""
    master, slave = pty.openpty()
    p = subprocess.Popen([w.kiln, "trace", "--db", w.db, "--ask", w.sys, "--deps", "libdep-dev",
                          "--", "sh", "-c", script], cwd=w.build, env=env, stdout=subprocess.DEVNULL,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:   # EIO: the other side is closed
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=60)
    os.close(master)
    return out.decode()


def test_colour_on_a_terminal_unless_no_color(world):
    script = "cat $SYS/usr/include/read.h 2>/dev/null; true"
    env = dict(world.env, TERM="xterm")
    out = run_on_a_terminal(world, script, env)
    assert "\x1b[1;31mpkg-read\x1b[0m" in out and "=== kiln trace verdict" in out
    out = run_on_a_terminal(world, script, dict(env, NO_COLOR="1"))
    assert "\x1b[" not in out and "=== kiln trace verdict: probably missing: pkg-read" in out
    out = run_on_a_terminal(world, script, dict(env, TERM="dumb"))
    assert "\x1b[" not in out
    # not a terminal: no colours either
    r = trace(world, script, deps="libdep-dev", env=env)
    assert "\x1b[" not in r.stderr


def test_report_file_holds_the_verdict_and_stderr_only_the_build(world):
    r = trace(world, "echo build-says-hi >&2; cat $SYS/usr/include/read.h 2>/dev/null; true",
              "-o", "report.txt", "--strict", deps="libdep-dev")
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == "build-says-hi"
    assert "kiln trace report" not in r.stderr and "--strict" in r.stderr
    text = (world.build / "report.txt").read_text()
    assert text.splitlines()[1] == "=== kiln trace report ==="
    assert text.splitlines()[-1].startswith("=== kiln trace verdict: probably missing: pkg-read")


@pytest.mark.skipif(not shutil.which("strace"), reason="strace not installed")
def test_the_text_report_reaches_stderr_in_one_write(world):
    """stderr is unbuffered: the report, written to it a piece at a time,
    cost a write(2) per character of some fields (181 for the report of
    `-- true`, 378 for zlib's 18 lines), all after the build. It is
    rendered in memory and written at once."""
    out = world.tmp / "strace.out"
    args = [world.kiln, "trace", "--db", world.db, "--ask", world.sys,
            "--deps", "libdep-dev,libunused-dev,meta", "--", "sh", "-c", SCRIPT_ALL]
    r = run(["strace", "-f", "-qq", "-e", "trace=write", "-e", "signal=none", "-o", out, *args],
            cwd=world.build, env=world.env)
    assert "=== kiln trace verdict: probably missing: pkg-exec" in r.stderr, r.stderr
    report = r.stderr[r.stderr.index("=== kiln trace report ==="):]
    assert report.count("\n") >= 20, report
    lines = out.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if "=== kiln trace report" in ln)
    server = lines[start].split()[0]
    writes = [ln for ln in lines[start:] if re.match(server + r"\s+write\(2, ", ln)]
    assert 1 <= len(writes) <= 3, "\n".join(writes[:40])

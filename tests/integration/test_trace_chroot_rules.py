"""What a clean chroot does not have, hidden (docs/profiles.md): "owned"
trees show only files a package of the closure owns (a toolkit unpacked in
/usr/local or /opt is not in the chroot), and the chroot profile hides the
invoking user's home directory but for the build tree, its parent (the
artifacts' directory) and kiln's own needs. Each hidden path answers as a
missing one."""
import json
import os
import sys

import pytest

from runas import PROBE_PRELUDE, World, manifest_text  # noqa: F401
from conftest import run

PROBE = PROBE_PRELUDE + r'''
for p in sys.argv[1:]:
    if p.startswith("ls:"):
        try:
            print(p, ",".join(sorted(os.listdir(p[3:]))) or "-", flush=True)
        except OSError as e:
            print(p, errno.errorcode[e.errno], flush=True)
    else:
        show(p, lambda: os.stat(p))
'''


def probe(w, args, cwd, env=None, *trace_args):
    script = os.path.join(w.top, "probe.py")
    with open(script, "w") as f:
        f.write(PROBE)
    r = run([w.kiln, "trace", "--db", w.db, *trace_args, "--", "/usr/bin/python3", script, *args],
            cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return dict(line.split(" ", 1) for line in r.stdout.splitlines()), r.stderr


def owned_world(kiln_bin):
    w = World(kiln_bin, [])
    S = w.sys
    for d in ("opt/toolkit/bin", "opt/pkg", "opt/foo"):
        os.makedirs(os.path.join(S, d))
    for f in ("opt/toolkit/bin/cc", "opt/pkg/dep.conf", "opt/foo/foo.conf"):
        with open(os.path.join(S, f), "w") as fh:
            fh.write("x\n")
    manifest = os.path.join(w.top, "manifest2")
    with open(manifest, "w") as f:
        f.write(manifest_text([
            ("base", True, [f"{S}/", f"{S}/usr/", f"{S}/usr/include/", f"{S}/usr/lib/",
                            f"{S}/usr/include/base.h", f"{S}/opt/"]),
            ("libdep-dev", False, [f"{S}/usr/include/dep.h", f"{S}/opt/pkg/", f"{S}/opt/pkg/dep.conf"]),
            ("libfoo-dev", False, [f"{S}/usr/include/foo.h", f"{S}/opt/foo/", f"{S}/opt/foo/foo.conf"]),
        ]))
    os.unlink(w.db)
    r = run([w.kiln, "registry", "--db", w.db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    return w


def test_owned_tree_shows_only_what_the_closure_owns(kiln_bin):
    w = owned_world(kiln_bin)
    try:
        o = os.path.join(w.sys, "opt")
        args = [f"{o}/toolkit", f"{o}/toolkit/bin/cc", f"{o}/pkg/dep.conf", f"{o}/foo/foo.conf",
                f"{o}/nothere", f"ls:{o}", f"ls:{o}/toolkit/bin"]
        got, err = probe(w, args, w.build, None, "--deps", "libdep-dev", "--ask", w.sys, "--owned", o)
        assert got[f"{o}/toolkit"] == "ENOENT"
        assert got[f"{o}/toolkit/bin/cc"] == "ENOENT"
        assert got[f"{o}/pkg/dep.conf"] == "OK"
        assert got[f"{o}/foo/foo.conf"] == "ENOENT"
        assert got[f"ls:{o}"] == "pkg"
        assert got[f"ls:{o}/toolkit/bin"] == "ENOENT"
        assert got[f"{o}/nothere"] == "ENOENT"
        assert "no package of the closure owns them" in err and f"{o}/toolkit" in err
        # An ask rule only names the toolkit as an unknown file.
        got, err = probe(w, args, w.build, None, "--deps", "libdep-dev", "--ask", w.sys)
        assert got[f"{o}/toolkit/bin/cc"] == "OK" and got[f"ls:{o}"] == "pkg,toolkit"
        assert "unknown files" in err and f"{o}/toolkit/bin/cc" in err
    finally:
        w.cleanup()


def test_chroot_profile_hides_the_home_directory_but_the_build_tree(kiln_bin):
    w = World(kiln_bin, [])
    try:
        home = os.path.join(w.top, "home")
        shims = os.path.join(home, ".pyenv", "shims")
        pkg = os.path.join(home, "src", "pkg")
        os.makedirs(shims)
        os.makedirs(os.path.join(pkg, "debian"))
        with open(os.path.join(shims, "python3"), "w") as f:
            f.write("#!/bin/sh\n")
        with open(os.path.join(home, "src", "pkg_1.0.orig.tar.gz"), "w") as f:
            f.write("x")
        with open(os.path.join(pkg, "debian", "control"), "w") as f:
            f.write("Source: pkg\nBuild-Depends: libdep-dev\n\nPackage: pkg\nArchitecture: any\n")
        env = dict(os.environ, HOME=home, PATH=f"{shims}:/usr/bin:/bin")
        args = [f"{shims}/python3", f"{home}/.pyenv", f"{pkg}/debian/control",
                f"{home}/src/pkg_1.0.orig.tar.gz", f"ls:{home}", f"ls:{home}/src", f"{home}/nothere"]
        ctl = os.path.join(pkg, "debian", "control")
        got, err = probe(w, args, pkg, env, "--deps-from-control", ctl, "--ask", w.sys)
        assert got[f"{shims}/python3"] == "ENOENT"
        assert got[f"{home}/.pyenv"] == "ENOENT"
        assert got[f"{pkg}/debian/control"] == "OK"
        assert got[f"{home}/src/pkg_1.0.orig.tar.gz"] == "OK"
        assert got[f"ls:{home}"] == "src"
        assert got[f"ls:{home}/src"] == "pkg,pkg_1.0.orig.tar.gz"
        assert got[f"{home}/nothere"] == "ENOENT"
        assert "(deny rules)" in err
        # --keep-env HOME: the home and its contents, as they are.
        got, _ = probe(w, args, pkg, env, "--deps-from-control", ctl, "--ask", w.sys, "--keep-env", "HOME")
        assert got[f"{shims}/python3"] == "OK" and got[f"ls:{home}"] == ".pyenv,src"
        # The host profile does not hide it.
        got, _ = probe(w, args, pkg, env, "--deps-from-control", ctl, "--ask", w.sys, "--profile", "host")
        assert got[f"{shims}/python3"] == "OK"
    finally:
        w.cleanup()


def test_build_tree_inside_the_hidden_home_is_answered_from_the_map(kiln_bin, trace_cached):
    """The build tree's paths are area paths though the home around them is
    hidden: repeated reads of its files are cache hits, while the home's
    own entries stay hidden, from the map or not."""
    w = World(kiln_bin, [])
    try:
        home = os.path.join(w.top, "home")
        pkg = os.path.join(home, "src", "pkg")
        os.makedirs(os.path.join(pkg, "debian"))
        os.makedirs(os.path.join(home, ".ssh"))
        with open(os.path.join(home, ".ssh", "id"), "w") as f:
            f.write("secret\n")
        ctl = os.path.join(pkg, "debian", "control")
        with open(ctl, "w") as f:
            f.write("Source: pkg\nBuild-Depends: libdep-dev\n\nPackage: pkg\nArchitecture: any\n")
        env = dict(os.environ, HOME=home)
        # (the build's own HOME is sbuild's /sbuild-nonexistent)
        def trace(n, *extra):
            script = (f"for i in $(seq {n}); do cat debian/control >/dev/null; "
                      f"cat {home}/.ssh/id 2>/dev/null; ls -a {home}; done")
            out = os.path.join(w.top, "r.json")
            r = run([w.kiln, "trace", "--db", w.db, "--deps-from-control", ctl, "--ask", w.sys,
                     *extra, "--json", "-o", out, "--", "sh", "-c", script], cwd=pkg, env=env)
            assert r.returncode == 0, r.stderr[-2000:]
            assert r.stdout.split() == [".", "..", "src"] * n, r.stdout
            with open(out) as f:
                return json.load(f)["cache"]["round_trips"]
        for extra in ([], ["--no-cache"]):
            once, tenfold = trace(1, *extra), trace(10, *extra)
            if trace_cached and not extra:
                # nine turns more: the build tree's reads are hits; the
                # hidden file's read and the listing of the home (hidden,
                # but on the way to the build tree: not an area) are asked
                # each time (five round trips a turn when the home's deny rule
                # kept every path below it out of the map)
                assert tenfold - once <= 2 * 9, (once, tenfold)
    finally:
        w.cleanup()


def test_directories_a_closure_package_postinst_makes_stay(kiln_bin):
    # python3.N-minimal's postinst makes /usr/local/lib/python3.N/dist-packages
    # (docs/profiles.md): a chroot with python3 has it, and python's site
    # module puts it on sys.path. Only the host's real directory can show it.
    ver = "%d.%d" % sys.version_info[:2]
    local = f"/usr/local/lib/python{ver}"
    if not os.path.isdir(f"{local}/dist-packages"):
        pytest.skip(f"{local}/dist-packages is not on this machine")
    w = World(kiln_bin, [])
    try:
        S = w.sys
        manifest = os.path.join(w.top, "manifest3")
        with open(manifest, "w") as f:
            f.write(manifest_text([
                ("base", True, [f"{S}/", f"{S}/usr/", f"{S}/usr/include/", f"{S}/usr/include/base.h"]),
                (f"python{ver}-minimal", False, [f"{S}/usr/include/py.h"]),
                ("libdep-dev", False, [f"{S}/usr/include/dep.h"]),
            ]))
        os.unlink(w.db)
        r = run([w.kiln, "registry", "--db", w.db, "import", "manifest", manifest])
        assert r.returncode == 0, r.stderr
        args = [local, f"{local}/dist-packages", "ls:/usr/local/lib"]
        got, err = probe(w, args, w.build, None, "--profile", "chroot", "--deps", f"python{ver}-minimal")
        assert got[local] == "OK" and got[f"{local}/dist-packages"] == "OK"
        assert f"python{ver}" in got["ls:/usr/local/lib"].split(",")
        assert local not in err
        # Without the package, the chroot has neither.
        got, err = probe(w, args, w.build, None, "--profile", "chroot", "--deps", "libdep-dev")
        assert got[local] == "ENOENT" and got[f"{local}/dist-packages"] == "ENOENT"
        assert f"python{ver}" not in got["ls:/usr/local/lib"].split(",")
        assert f"    {local}  [" in err    # reported under the 'owned' rules
    finally:
        w.cleanup()

"""Running `kiln trace` as root and as an unprivileged user (nobody), for
the sandbox-integrity tests whose answers can differ between the two: a
small world (manifest registry, build directory) both can use."""
import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

# The start of every probe script run under `kiln trace`: call(name, r)
# prints a libc call's result (OK or the errno name), show(name, f) a Python
# call's, one "name RESULT" line each.
PROBE_PRELUDE = r'''
import ctypes, errno, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def call(name, r):
    e = ctypes.get_errno()
    print(name, "OK" if r >= 0 else errno.errorcode.get(e, e), flush=True)
    ctypes.set_errno(0)
def show(name, f):
    try:
        f()
        print(name, "OK", flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
b = lambda s: s.encode()
'''

def manifest_text(packages):
    """A registry manifest (docs/registry.md): packages is a list of
    (name, essential, [file lines])."""
    out = []
    for name, essential, files in packages:
        out.append(f"Package: {name}\nVersion: 1\n" + ("Essential: yes\n" if essential else "") +
                   "Files:\n" + "".join(f" {f}\n" for f in files))
    return "\n".join(out)


NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
USERS = [pytest.param([], id="root"), pytest.param(NOBODY, id="nobody")]


class World:
    """sys/usr/include with dep.h (declared), foo.h (libfoo-dev, not
    declared), base.h (Essential); sys/usr/lib/foo/ a directory of
    libfoo-dev (hidden, with a file x in it); a registry; build/ owned by
    the user."""

    def __init__(self, kiln_bin, runas):
        self.runas = runas
        self.kiln = str(kiln_bin)
        self.top = tempfile.mkdtemp(prefix="kiln-int-", dir="/tmp")
        os.chmod(self.top, 0o755)
        self.sys = os.path.join(self.top, "sys")
        self.inc = os.path.join(self.sys, "usr", "include")
        self.build = os.path.join(self.top, "build")
        self.lib = os.path.join(self.sys, "usr", "lib")
        os.makedirs(self.inc)
        os.makedirs(os.path.join(self.lib, "foo"))
        os.makedirs(self.build)
        with open(os.path.join(self.lib, "foo", "x"), "w") as f:
            f.write("x\n")
        for name in ("dep.h", "foo.h", "base.h"):
            with open(os.path.join(self.inc, name), "w") as f:
                f.write(name + "\n")
        S = self.sys
        self.packages = [
            ("base", True, [f"{S}/", f"{S}/usr/", f"{S}/usr/include/", f"{S}/usr/lib/",
                            f"{S}/usr/include/base.h"]),
            ("libdep-dev", False, [f"{S}/usr/include/dep.h"]),
            ("libfoo-dev", False, [f"{S}/usr/include/foo.h", f"{S}/usr/lib/foo/",
                                   f"{S}/usr/lib/foo/x"]),
        ]
        manifest = os.path.join(self.top, "manifest")
        with open(manifest, "w") as f:
            f.write(manifest_text(self.packages))

        self.db = os.path.join(self.top, "registry.db")
        r = subprocess.run([self.kiln, "registry", "--db", self.db, "import", "manifest", manifest],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        os.chmod(self.db, 0o644)
        self.give(self.build)
        self.args = ["--db", self.db, "--deps", "libdep-dev", "--ask", self.sys]

    def cmd(self, *trace_args, command):
        return [*self.runas, self.kiln, "trace", *self.args, *map(str, trace_args), "--", *command]

    def popen(self, *trace_args, command, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(self.cmd(*trace_args, command=command), cwd=self.build, **kw)

    def run(self, *trace_args, command, timeout=60, **kw):
        return subprocess.run(self.cmd(*trace_args, command=command), cwd=self.build,
                              capture_output=True, text=True, timeout=timeout, **kw)

    def give(self, path):
        """Makes path the build user's (nobody's when the world runs as
        nobody), as a file the build itself made would be."""
        if self.runas:
            pw = pwd.getpwnam("nobody")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def probe(self, script, args, name="probe.py"):
        """Runs the Python script (one "name RESULT" line per call) under
        kiln trace with args; its answers as a dict, and kiln's stderr."""
        path = os.path.join(self.build, name)
        with open(path, "w") as f:
            f.write(script)
        r = self.run(command=["python3", path, *map(str, args)])
        assert r.returncode == 0, r.stderr[-2000:]
        return dict(line.split(" ", 1) for line in r.stdout.splitlines()), r.stderr

    def cleanup(self):
        shutil.rmtree(self.top, ignore_errors=True)


@pytest.fixture(params=USERS)
def uworld(request, kiln_bin):
    w = World(kiln_bin, request.param)
    yield w
    w.cleanup()

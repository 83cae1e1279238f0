"""Resolution failures fail closed (issue 9, class 4): a path whose
canonical form reaches PATH_MAX (a symlink into a deep tree, a cwd of about
4,094 bytes) makes the server's lstat fail with ENAMETOOLONG; only a real
ENOENT/ENOTDIR may be taken as "does not exist" (ALLOW, the kernel fails the
call). Anything else is refused, so a hidden file is never readable that way:
here a symlink at the bottom of a deep build tree points at a hidden file,
reached by open (from a deep cwd and through a short link), stat, access and
exec.
As root and as nobody."""
import os
import subprocess

import pytest

from runas import uworld  # noqa: F401 (fixture)

COMP = "d" * 200


def deep_tree(top, total, target):
    """Directories under `top` until the path is about `total` bytes, the
    last holding a symlink `s` to `target` (a hidden file), made with dir
    fds (the path itself may be longer than PATH_MAX allows). A short path
    reaches it too: top/L -> first half of the tree (relative), and there
    M -> the second half. Returns the components."""
    comps, length = [], len(top)
    while length + 1 + len(COMP) < total:
        comps.append(COMP)
        length += 1 + len(COMP)
    comps.append("e" * max(1, total - length - 1))
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    half = len(comps) // 2
    for i, c in enumerate(comps):
        os.mkdir(c, dir_fd=fd)
        nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
        if i == half - 1:
            mid = os.dup(fd)
    os.symlink(target, "s", dir_fd=fd)
    os.close(fd)
    os.symlink("/".join(comps[half:]), "M", dir_fd=mid)
    os.close(mid)
    os.symlink("/".join(comps[:half]), os.path.join(top, "L"))
    return comps


PROBE = r'''
import errno, os, sys
top, comps = sys.argv[1], sys.argv[2].split("/")
os.chdir(top)
deep = True
for c in comps:
    try:
        os.chdir(c)
    except OSError as e:   # a cwd past PATH_MAX: kiln refuses (fail closed)
        print("chdir", errno.errorcode[e.errno], flush=True)
        deep = False
        break
def show(name, f):
    try:
        fd = f()
        print(name, "OK", os.read(fd, 100).decode().strip(), flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
if deep:
    show("cwd-hidden", lambda: os.open("s", os.O_RDONLY))
    show("cwd-absent", lambda: os.open("nothere", os.O_RDONLY))
show("link-hidden", lambda: os.open(sys.argv[3] + "/M/s", os.O_RDONLY))
show("link-absent", lambda: os.open(sys.argv[3] + "/M/nothere", os.O_RDONLY))
# other calls through the same links: never an answer about the hidden file
def meta(name, f):
    try:
        f()
        print(name, "OK", flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
for how, p in (("hidden", sys.argv[3] + "/M/s"), ("absent", sys.argv[3] + "/M/nothere")):
    meta(f"stat-{how}", lambda: os.stat(p))
    meta(f"access-{how}", lambda: os.access(p, os.R_OK) or (_ for _ in ()).throw(OSError(errno.ENOENT, "")))
    print(f"exec-{how}", "status", os.spawnv(os.P_WAIT, p, [p]), flush=True)
'''


@pytest.mark.parametrize("total", [4000, 4090, 4094, 4100, 6000])
def test_long_canonical_paths_never_reach_a_hidden_file(uworld, total):
    comps = deep_tree(uworld.build, total, os.path.join(uworld.inc, "foo.h"))
    link = os.path.join(uworld.build, "L")
    script = os.path.join(uworld.build, "probe.py")
    with open(script, "w") as f:
        f.write(PROBE)
    r = uworld.run(command=["python3", script, uworld.build, "/".join(comps), link])
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert {"link-hidden", "link-absent"} <= set(got), (r.stdout, r.stderr[-1500:])
    assert ("cwd-hidden" in got) == (total < 4096), got
    assert "foo.h" not in r.stdout, got   # the hidden file's content
    # Never readable: answered as absent (ENOENT, or the absent name's own
    # error) or refused (fail closed).
    for how in ("cwd", "link", "stat", "access", "exec"):
        if f"{how}-hidden" in got:
            hid, absent = got[f"{how}-hidden"], got[f"{how}-absent"]
            assert hid in (absent, "ENOENT", "EACCES", "ENAMETOOLONG"), (how, hid, absent)
    assert got["stat-hidden"] != "OK" and got["access-hidden"] != "OK", got


# A name longer than NAME_MAX (255 bytes) cannot exist: the kernel fails
# every call that reaches it with ENAMETOOLONG, and so must a traced call
# (the server's own lstat fails the same way; that is no reason to refuse).
NAME = "n" * 256
LONG_PROBE = r'''
import errno, os, sys
def show(name, f):
    try:
        r = f()
        if isinstance(r, int) and not isinstance(r, bool):
            os.close(r)
        print(name, "OK", flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
for label, p in zip(sys.argv[1::2], sys.argv[2::2]):
    show(f"{label}:stat", lambda: os.stat(p))
    show(f"{label}:lstat", lambda: os.lstat(p))
    show(f"{label}:open-r", lambda: os.open(p, os.O_RDONLY))
    show(f"{label}:access", lambda: os.access(p, os.R_OK) or (_ for _ in ()).throw(OSError(errno.ENOENT, "")))
    show(f"{label}:readlink", lambda: os.readlink(p))
    show(f"{label}:listdir", lambda: os.listdir(p))
    show(f"{label}:open-creat", lambda: os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
    show(f"{label}:mkdir", lambda: os.mkdir(p))
    show(f"{label}:chmod", lambda: os.chmod(p, 0o644))
    show(f"{label}:unlink", lambda: os.unlink(p))
    show(f"{label}:exec", lambda: os.execv(p, [p]))
'''


def test_a_name_too_long_fails_as_it_does_natively(uworld):
    b, inc, lib = uworld.build, uworld.inc, uworld.lib
    link = os.path.join(b, "to-long")

    def relink():   # the probe's unlink takes the link itself away
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.join(inc, NAME), link)
    pairs = [("build", os.path.join(b, NAME)), ("relative", NAME),
             ("tree", os.path.join(inc, NAME)),               # writes refused here
             ("below", os.path.join(inc, NAME, "x")), ("link", link)]
    script = os.path.join(b, "long.py")
    with open(script, "w") as f:
        f.write(LONG_PROBE)
    args = [x for pair in pairs for x in pair]
    relink()
    r = subprocess.run([*uworld.runas, "/usr/bin/python3", script, *args], cwd=b,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    native = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert len(native) == 11 * len(pairs) and native["build:stat"] == "ENAMETOOLONG", native
    assert native["link:unlink"] == "OK", native
    relink()
    traced, _ = uworld.probe(LONG_PROBE, args, name="long.py")
    assert traced == native, {k: (traced.get(k), v) for k, v in native.items() if traced.get(k) != v}
    # Under a hidden directory it is as under an absent one.
    hidden, _ = uworld.probe(LONG_PROBE, ["h", os.path.join(lib, "foo", NAME),
                                          "a", os.path.join(lib, "nothere", NAME)], name="long.py")
    assert {k[2:]: v for k, v in hidden.items() if k.startswith("h:")} == \
        {k[2:]: v for k, v in hidden.items() if k.startswith("a:")}, hidden

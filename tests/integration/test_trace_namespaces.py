"""Paths resolved somewhere the server does not look (issue 9, class 1):
chroot, unshare, clone with CLONE_NEW*, mount and the new mount API,
pivot_root and setns are refused with EPERM by default (by every route:
libc wrappers and syscall()), "namespaces allow" in a policy file lifts
that; openat2 with RESOLVE_IN_ROOT is refused (ENOSYS, callers fall back
to openat); /proc/PID/root of a process in another mount namespace is
never answered ALLOW. As root and as nobody."""
import os
import subprocess
import time

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
NR = dict(chroot=161, mount=165, umount2=166, pivot_root=155, unshare=272, setns=308,
          open_tree=428, move_mount=429, fsopen=430, fsmount=432, fspick=433, clone3=435,
          openat2=437, mount_setattr=442)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x20000, 0x10000000, 0x20000000
tmp = sys.argv[1]
call("chroot", libc.chroot(b(tmp)))
call("unshare-ns", libc.unshare(CLONE_NEWNS))
call("unshare-user", libc.unshare(CLONE_NEWUSER))
call("unshare-user-ns", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
call("mount", libc.mount(b"none", b(tmp), b"tmpfs", 0, None))
call("umount2", libc.umount2(b(tmp), 0))
fd = os.open("/proc/1/ns/mnt", os.O_RDONLY) if os.access("/proc/1/ns/mnt", os.R_OK) else os.open("/proc/self/ns/mnt", os.O_RDONLY)
call("setns", libc.setns(fd, 0))
call("fsopen", libc.fsopen(b"tmpfs", 0))
call("open_tree-clone", libc.open_tree(-100, b(tmp), 1))      # OPEN_TREE_CLONE
call("sys-chroot", libc.syscall(NR["chroot"], b(tmp)))
call("sys-unshare", libc.syscall(NR["unshare"], CLONE_NEWUSER | CLONE_NEWNS))
call("sys-mount", libc.syscall(NR["mount"], b"none", b(tmp), b"tmpfs", 0, None))
call("sys-pivot_root", libc.syscall(NR["pivot_root"], b(tmp), b(tmp)))
call("sys-setns", libc.syscall(NR["setns"], fd, 0))
call("sys-fsopen", libc.syscall(NR["fsopen"], b"tmpfs", 0))
call("sys-open_tree-clone", libc.syscall(NR["open_tree"], -100, b(tmp), 1))
class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "pidfd", "child_tid", "parent_tid",
                "exit_signal", "stack", "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]
ca = CloneArgs(flags=CLONE_NEWUSER, exit_signal=17)
call("sys-clone3", libc.syscall(NR["clone3"], ctypes.byref(ca), ctypes.sizeof(ca)))
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
child = CB(lambda _: 0)
stack = ctypes.create_string_buffer(65536)
top = ctypes.c_void_p(ctypes.addressof(stack) + 65536 - 64)
r = libc.clone(child, top, CLONE_NEWUSER | 17, None)
call("clone", r)
if r > 0:
    os.waitpid(r, 0)
'''
REFUSED = ["chroot", "unshare-ns", "unshare-user", "unshare-user-ns", "mount", "umount2",
           "setns", "fsopen", "open_tree-clone", "sys-chroot", "sys-unshare", "sys-mount",
           "sys-pivot_root", "sys-setns", "sys-fsopen", "sys-open_tree-clone", "sys-clone3",
           "clone"]


def probe(w, *trace_args):
    script = os.path.join(w.build, "probe.py")
    with open(script, "w") as f:
        f.write(PROBE)
    r = w.run(*trace_args, command=["python3", script, w.build])
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines())


def test_namespace_and_mount_calls_are_refused_with_eperm(uworld):
    got = probe(uworld)
    assert [k for k in REFUSED if got.get(k) != "EPERM"] == [], got


ALLOWED_PROBE = r'''
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for name, flags in [("user", 0x10000000), ("ns", 0x20000)]:
    pid = os.fork()
    if pid == 0:
        r = libc.unshare(flags)
        print(name, "OK" if r == 0 else errno.errorcode[ctypes.get_errno()], flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
'''


def test_policy_switch_allows_them(uworld):
    """With "namespaces allow" the kernel answers: a new user namespace
    works for root and (unprivileged user namespaces are Debian's default)
    for nobody; a mount namespace for root, EPERM from the kernel for
    nobody."""
    pol = os.path.join(uworld.top, "ns.policy")
    with open(pol, "w") as f:
        f.write("namespaces allow\n")
    script = os.path.join(uworld.build, "allowed.py")
    with open(script, "w") as f:
        f.write(ALLOWED_PROBE)
    r = uworld.run("--policy", pol, command=["python3", script])
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got == {"user": "OK", "ns": "EPERM" if uworld.runas else "OK"}, (got, r.stderr)
    r = uworld.run(command=["python3", script])
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got == {"user": "EPERM", "ns": "EPERM"}, (got, r.stderr)


def test_bad_namespaces_directive_is_an_error(uworld):
    pol = os.path.join(uworld.top, "bad.policy")
    with open(pol, "w") as f:
        f.write("namespaces maybe\n")
    r = uworld.run("--policy", pol, command=["true"])
    assert r.returncode == 125 and "'namespaces' takes allow or refuse" in r.stderr


OPENAT2 = r'''
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class How(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]
RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x08, 0x10
top, rel = sys.argv[1], sys.argv[2]
d = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for name, res, path in [("in_root-abs", RESOLVE_IN_ROOT, "/" + rel), ("in_root-rel", RESOLVE_IN_ROOT, rel),
                        ("beneath-rel", RESOLVE_BENEATH, rel), ("beneath-abs", RESOLVE_BENEATH, "/" + rel),
                        ("plain", 0, rel)]:
    how = How(flags=os.O_RDONLY, resolve=res)
    r = libc.syscall(437, d, path.encode(), ctypes.byref(how), ctypes.sizeof(how))
    print(name, "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()], flush=True)
'''


def test_openat2_resolve_flags(uworld):
    """RESOLVE_IN_ROOT is refused (the path would resolve inside dirfd,
    where "/x" is not the server's /x); RESOLVE_BENEATH is checked as a
    normal relative open, and the kernel adds its own refusal (EXDEV)."""
    script = os.path.join(uworld.build, "o2.py")
    with open(script, "w") as f:
        f.write(OPENAT2)
    rel = os.path.relpath(os.path.join(uworld.inc, "foo.h"), uworld.top)
    r = uworld.run(command=["python3", script, uworld.top, rel])
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got == {"in_root-abs": "ENOSYS", "in_root-rel": "ENOSYS", "beneath-rel": "ENOENT",
                   "beneath-abs": "EXDEV", "plain": "ENOENT"}, (got, r.stderr)
    rel_dep = os.path.relpath(os.path.join(uworld.inc, "dep.h"), uworld.top)
    r = uworld.run(command=["python3", script, uworld.top, rel_dep])
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got["beneath-rel"] == "OK" and got["plain"] == "OK" and got["beneath-abs"] == "EXDEV", got


def test_proc_pid_root_of_another_mount_namespace_is_never_allowed(uworld):
    """A process outside the build lives in a mount namespace with a tmpfs
    over a directory; its /proc/PID/root leads to files the server cannot
    see. Reading through it must fail, like a path that does not exist."""
    nsdir = os.path.join(uworld.top, "nsdir")
    os.mkdir(nsdir)
    os.chmod(nsdir, 0o777)
    ready = os.path.join(uworld.build, "ns-ready")
    unshare = ["unshare", "-Urm"] if uworld.runas else ["unshare", "-m", "--propagation", "private"]
    holder = subprocess.Popen([*uworld.runas, *unshare, "sh", "-c",
                               f"mount -t tmpfs none {nsdir} && echo secret > {nsdir}/secret && "
                               f"touch {ready} && exec sleep 60"])
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            assert holder.poll() is None and time.monotonic() < deadline, "namespace holder failed"
            time.sleep(0.02)
        # the holder's pid is the sleep it exec'd into
        via_ns = f"/proc/{holder.pid}/root{nsdir}/secret"
        absent = f"/proc/self/root{nsdir}/secret"
        r = uworld.run(command=["sh", "-c", f'cat {via_ns}; echo "ns=$?"; cat {absent}; echo "abs=$?"'])
        assert "secret" not in r.stdout.replace("secret:", "").replace("/secret", ""), r.stdout
        assert "ns=1" in r.stdout and "abs=1" in r.stdout
        assert "undecidable" in r.stderr
    finally:
        holder.kill()
        holder.wait()

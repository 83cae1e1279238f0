"""Calls that reach a file other than through a hooked path argument
(issue 9, class 2): file handles, inotify/fanotify watches, AF_UNIX socket
addresses (bind creates a file anywhere; connect and sendto reach one),
mknod, statfs, the xattr family, and metadata writes through an fd opened
for reading (or O_PATH), including AT_EMPTY_PATH and NULL-path forms. A
hidden file answers as an absent one; a metadata write outside the writable
areas is refused. As root and as nobody."""
import os
import socket
import subprocess
import time

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
# argv: label path ...
for label, path in zip(sys.argv[1::2], sys.argv[2::2]):
    h = ctypes.create_string_buffer(8 + 128)
    struct.pack_into("I", h, 0, 128)
    mnt = ctypes.c_int()
    call(f"{label}:name_to_handle_at", libc.name_to_handle_at(-100, b(path), h, ctypes.byref(mnt), 0x400))
    ino = libc.inotify_init1(0)
    call(f"{label}:inotify_add_watch", libc.inotify_add_watch(ino, b(path), 0xfff))
    call(f"{label}:inotify_add_watch-nofollow", libc.inotify_add_watch(ino, b(path), 0xfff | 0x02000000))
    buf = ctypes.create_string_buffer(256)
    call(f"{label}:statfs", libc.statfs(b(path), buf))
    call(f"{label}:getxattr", libc.getxattr(b(path), b"user.x", buf, 256))
    call(f"{label}:listxattr", libc.listxattr(b(path), buf, 256))
    call(f"{label}:lgetxattr", libc.lgetxattr(b(path), b"user.x", buf, 256))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    show(f"{label}:connect", lambda: s.connect(path))
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    show(f"{label}:sendto", lambda: d.sendto(b"x", path))
    s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    show(f"{label}:bind-inside", lambda: s2.bind(path + "/new.sock"))
    show(f"{label}:mkfifo-inside", lambda: os.mkfifo(path + "/new.fifo"))
'''

FD_PROBE = PROBE_PRELUDE + r'''
for label, path in zip(sys.argv[1::2], sys.argv[2::2]):
    fd = os.open(path, os.O_RDONLY)
    pfd = os.open(path, os.O_PATH)
    mode = os.stat(path).st_mode & 0o7777
    st = os.stat(path)
    call(f"{label}:fchmod", libc.fchmod(fd, mode))
    call(f"{label}:fchown", libc.fchown(fd, st.st_uid, st.st_gid))
    call(f"{label}:futimens", libc.futimens(fd, None))
    call(f"{label}:futimes", libc.futimes(fd, None))
    call(f"{label}:utimensat-null", libc.utimensat(fd, None, None, 0))
    call(f"{label}:fchownat-empty-opath", libc.fchownat(pfd, b"", st.st_uid, st.st_gid, 0x1000))
    call(f"{label}:fsetxattr", libc.fsetxattr(fd, b"user.kiln", b"1", 1, 0))
    call(f"{label}:fremovexattr", libc.fremovexattr(fd, b"user.kiln"))
    call(f"{label}:open_by_handle_at", libc.open_by_handle_at(fd, None, 0))
'''


def test_hidden_paths_answer_as_absent_ones(uworld):
    hidden_file = os.path.join(uworld.inc, "foo.h")
    hidden_dir = os.path.join(uworld.lib, "foo")
    absent_file = os.path.join(uworld.inc, "nothere.h")
    absent_dir = os.path.join(uworld.lib, "nothere")
    got, err = uworld.probe(PROBE, ["hf", hidden_file, "af", absent_file,
                                     "hd", hidden_dir, "ad", absent_dir])
    calls = sorted({k.split(":", 1)[1] for k in got})
    assert len(calls) == 11, calls
    for call in calls:
        assert got[f"hf:{call}"] == got[f"af:{call}"], (call, got[f"hf:{call}"], got[f"af:{call}"])
        assert got[f"hd:{call}"] == got[f"ad:{call}"], (call, got[f"hd:{call}"], got[f"ad:{call}"])
    assert got["hd:connect"] == "ENOENT"
    assert "libfoo-dev" in err


def test_connect_and_sendto_reach_no_hidden_socket(uworld):
    """A live socket inside a hidden directory: connect and sendto must
    fail as for a socket that does not exist, not ECONNREFUSED nor reach
    it; a socket in the build directory still works."""
    hidden = os.path.join(uworld.lib, "foo", "live.sock")
    dgram = os.path.join(uworld.lib, "foo", "live.dgram")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(hidden)
    srv.listen(5)
    ds = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ds.bind(dgram)
    os.chmod(hidden, 0o777)
    os.chmod(dgram, 0o777)
    script = r'''
import socket, sys, errno
for path in sys.argv[1:]:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_UNIX, kind)
        try:
            s.connect(path) if kind == socket.SOCK_STREAM else s.sendto(b"hello", path)
            print(path.rsplit("/", 1)[1], kind, "OK")
        except OSError as e:
            print(path.rsplit("/", 1)[1], kind, errno.errorcode[e.errno])
'''
    path = os.path.join(uworld.build, "sock.py")
    with open(path, "w") as f:
        f.write(script)
    absent = os.path.join(uworld.lib, "none.sock")
    r = uworld.run(command=["python3", path, hidden, dgram, absent])
    lines = r.stdout.splitlines()
    assert lines == [f"live.sock 1 ENOENT", f"live.sock 2 ENOENT", f"live.dgram 1 ENOENT",
                     f"live.dgram 2 ENOENT", f"none.sock 1 ENOENT", f"none.sock 2 ENOENT"], r.stdout
    ds.settimeout(0.2)
    try:
        assert ds.recv(10) != b"hello", "a datagram reached the hidden socket"
    except socket.timeout:
        pass
    srv.close()
    ds.close()


def test_bind_outside_writable_areas_is_refused(uworld):
    script = r'''
import socket, sys, errno
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        print("OK")
    except OSError as e:
        print(errno.errorcode[e.errno])
'''
    path = os.path.join(uworld.build, "bind.py")
    with open(path, "w") as f:
        f.write(script)
    r = uworld.run(command=["python3", path, os.path.join(uworld.inc, "new.sock"),
                            os.path.join(uworld.build, "ok.sock")])
    assert r.stdout.split() == ["EACCES", "OK"], (r.stdout, r.stderr[-1000:])
    assert os.path.exists(os.path.join(uworld.build, "ok.sock"))
    assert not os.path.exists(os.path.join(uworld.inc, "new.sock"))


def test_metadata_writes_through_read_fds(uworld):
    """dep.h is visible but read-only (an ask tree): opened for reading (or
    O_PATH), its fd must not change its mode, owner, times or xattrs. A
    file in the build directory opened the same way may."""
    mine = os.path.join(uworld.build, "mine.txt")
    with open(mine, "w") as f:
        f.write("x\n")
    uworld.give(mine)
    before = os.stat(os.path.join(uworld.inc, "dep.h"))
    got, err = uworld.probe(FD_PROBE, ["ro", os.path.join(uworld.inc, "dep.h"), "bd", mine])
    for call in ("fchmod", "fchown", "futimens", "futimes", "fchownat-empty-opath",
                 "fsetxattr", "fremovexattr"):
        assert got[f"ro:{call}"] == "EACCES", (call, got)
    for call in ("fchmod", "fchown", "futimens", "futimes", "fchownat-empty-opath"):
        assert got[f"bd:{call}"] == "OK", (call, got)
    # glibc's utimensat refuses a NULL path itself (futimens is the way)
    assert got["ro:utimensat-null"] == got["bd:utimensat-null"] == "EINVAL"
    assert got["ro:open_by_handle_at"] == "EPERM" and got["bd:open_by_handle_at"] == "EPERM"
    after = os.stat(os.path.join(uworld.inc, "dep.h"))
    assert (after.st_mtime_ns, after.st_mode) == (before.st_mtime_ns, before.st_mode)
    assert "refused writes: 1" in err

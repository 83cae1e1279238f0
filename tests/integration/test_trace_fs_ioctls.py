"""ioctl requests that change a file rather than talk to a device: an fd
opened for reading is enough for the owner (and root) to set a file's
inode flags (chattr: immutable, append-only, no-dump) or its extended
attributes of the file system (FS_IOC_FSSETXATTR). A traced build, as
root, could make files of a managed tree immutable, and dpkg could then
no longer upgrade them. These are checked as fchmod is (a refused write:
EACCES, the flags unchanged), in the build directory they work as
without kiln, and the requests on a whole file system (freeze, thaw,
label) are refused (EPERM, as for a build that is not root). As root and
as nobody."""
import os

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
import array, fcntl
GETFLAGS, SETFLAGS, FSGETXATTR, FSSETXATTR, FITHAW = 0x80086601, 0x40086602, 0x801c581f, 0x401c5820, 0xc0045878
NODUMP = 0x40
for label, p in zip(sys.argv[1::2], sys.argv[2::2]):
    fd = os.open(p, os.O_RDONLY)
    a = array.array("l", [0])
    try:
        fcntl.ioctl(fd, GETFLAGS, a, True)
        print(f"{label}:flags", a[0], flush=True)
    except OSError as e:   # a file system without inode flags (tmpfs): nothing to change
        print(f"{label}:flags", errno.errorcode[e.errno], flush=True)
    else:
        old = a[0]
        a[0] |= NODUMP
        show(f"{label}:setflags", lambda: fcntl.ioctl(fd, SETFLAGS, a, True))
        a[0] = old
        try:
            fcntl.ioctl(fd, SETFLAGS, a, True)
        except OSError:
            pass
    x = bytearray(28)
    try:
        fcntl.ioctl(fd, FSGETXATTR, x, True)
        show(f"{label}:fssetxattr", lambda: fcntl.ioctl(fd, FSSETXATTR, bytes(x)))
    except OSError as e:
        print(f"{label}:fssetxattr", "unsupported", flush=True)
    # FITHAW of a file system that is not frozen is EINVAL without kiln:
    # harmless where FIFREEZE is not.
    show(f"{label}:thaw", lambda: fcntl.ioctl(fd, FITHAW, 0))
'''


def test_inode_changing_ioctls_are_writes(uworld):
    managed = os.path.join(uworld.inc, "dep.h")
    mine = os.path.join(uworld.build, "mine.txt")
    with open(mine, "w") as f:
        f.write("mine\n")
    uworld.give(mine)
    got, _ = uworld.probe(PROBE, ["managed", managed, "mine", mine], name="ioctls.py")
    assert got["managed:thaw"] == got["mine:thaw"] == "EPERM", got
    if got["managed:flags"].lstrip("-").isdigit():   # a file system with inode flags
        assert got["managed:setflags"] == "EACCES", got
        assert got["mine:setflags"] == "OK", got
    if got["managed:fssetxattr"] != "unsupported":
        assert got["managed:fssetxattr"] == "EACCES", got
        assert got["mine:fssetxattr"] == "OK", got

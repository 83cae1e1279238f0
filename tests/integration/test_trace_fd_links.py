"""A file held open for reading is not thereby writable: the magic links of
its descriptor (/proc/self/fd/N, /dev/fd/N, /proc/PID/fd/N,
/proc/thread-self/fd/N) name the file itself, and the kernel reopens it
for writing, truncates it or changes its mode through them. The server
took a write through such a link for a write to /proc: a traced build, as
root, could rewrite any file of a managed tree it could read. Every such
write must be refused as a write to the file's own path is (EACCES) and
leave the file as it was; writes through the links of files in the build
directory, of a pipe, of a deleted temporary file there, keep working. As
root and as nobody."""
import os

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
managed, mine = sys.argv[1], sys.argv[2]
def links(fd):
    return {"proc-self": f"/proc/self/fd/{fd}", "dev-fd": f"/dev/fd/{fd}",
            "proc-pid": f"/proc/{os.getpid()}/fd/{fd}", "thread-self": f"/proc/thread-self/fd/{fd}"}
def writes(label, p):
    show(f"{label}:open-w", lambda: os.close(os.open(p, os.O_WRONLY)))
    show(f"{label}:open-rw", lambda: os.close(os.open(p, os.O_RDWR)))
    show(f"{label}:open-append", lambda: os.close(os.open(p, os.O_WRONLY | os.O_APPEND)))
    show(f"{label}:open-trunc", lambda: os.close(os.open(p, os.O_RDONLY | os.O_TRUNC)))
    show(f"{label}:truncate", lambda: os.truncate(p, 1 << 20))
    show(f"{label}:chmod", lambda: os.chmod(p, 0o777))
    show(f"{label}:utime", lambda: os.utime(p, (0, 0)))
    show(f"{label}:setxattr", lambda: os.setxattr(p, "user.k", b"1"))
writes("path", managed)
fd = os.open(managed, os.O_RDONLY)
for how, p in links(fd).items():
    writes(how, p)
    show(f"{how}:read", lambda: os.close(os.open(p, os.O_RDONLY)))
mfd = os.open(mine, os.O_RDONLY)
writes("mine", links(mfd)["proc-self"])
r, w = os.pipe()
show("pipe:open-w", lambda: os.close(os.open(links(w)["dev-fd"], os.O_WRONLY)))
tmp = mine + ".tmp"
tfd = os.open(tmp, os.O_RDWR | os.O_CREAT, 0o600)
os.unlink(tmp)
show("deleted:open-w", lambda: os.close(os.open(links(tfd)["proc-self"], os.O_WRONLY)))
'''


def test_writes_through_a_descriptors_links_are_writes_to_its_file(uworld):
    managed = os.path.join(uworld.inc, "dep.h")   # a declared package's: visible, writes refused
    before = os.stat(managed)
    content = open(managed).read()
    mine = os.path.join(uworld.build, "mine.txt")
    with open(mine, "w") as f:
        f.write("mine\n")
    uworld.give(mine)
    got, _ = uworld.probe(PROBE, [managed, mine], name="fdlinks.py")
    after = os.stat(managed)
    assert open(managed).read() == content and after.st_size == before.st_size
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
    calls = [k.split(":", 1)[1] for k in got if k.startswith("path:")]
    assert len(calls) == 8, got
    for how in ("proc-self", "dev-fd", "proc-pid", "thread-self"):
        for c in calls:
            assert got[f"{how}:{c}"] == got[f"path:{c}"] == "EACCES", (how, c, got)
        assert got[f"{how}:read"] == "OK", got
    for c in calls:
        if c != "setxattr":   # tmpfs without user xattrs: EOPNOTSUPP, as without kiln
            assert got[f"mine:{c}"] == "OK", (c, got)
    assert got["pipe:open-w"] == "OK" and got["deleted:open-w"] == "OK", got

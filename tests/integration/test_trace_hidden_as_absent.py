"""Every hidden path answers exactly as an absent one would (issue 9,
class 3): write-class calls in a tree where writes are refused (EACCES for
both), a trailing slash or "/." after a symlink to a hidden file or
directory (the kernel follows it, so must the check), and connect(). Each
call is made on a hidden path and on a path that does not exist in the same
place, and the two answers compared. As root and as nobody."""
import os

from runas import PROBE_PRELUDE, uworld  # noqa: F401 (fixture)

PROBE = PROBE_PRELUDE + r'''
for label, p in zip(sys.argv[1::2], sys.argv[2::2]):
    show(f"{label}:chmod", lambda: os.chmod(p, 0o644))
    show(f"{label}:chown", lambda: os.chown(p, -1, -1))
    show(f"{label}:lchown", lambda: os.lchown(p, -1, -1))
    show(f"{label}:truncate", lambda: os.truncate(p, 0))
    show(f"{label}:utime", lambda: os.utime(p))
    show(f"{label}:utime-nofollow", lambda: os.utime(p, follow_symlinks=False))
    show(f"{label}:setxattr", lambda: os.setxattr(p, "user.k", b"1"))
    show(f"{label}:removexattr", lambda: os.removexattr(p, "user.k"))
    show(f"{label}:open-w", lambda: os.open(p, os.O_WRONLY))
    show(f"{label}:open-rw", lambda: os.open(p, os.O_RDWR))
    show(f"{label}:open-creat", lambda: os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
    show(f"{label}:open-trunc", lambda: os.open(p, os.O_RDONLY | os.O_TRUNC))
    show(f"{label}:unlink", lambda: os.unlink(p))
    show(f"{label}:rmdir", lambda: os.rmdir(p))
    show(f"{label}:rename-from", lambda: os.rename(p, p + ".moved"))
    show(f"{label}:rename-to", lambda: os.rename(sys.argv[0], p))
    show(f"{label}:link-to", lambda: os.link(sys.argv[0], p))
    show(f"{label}:symlink", lambda: os.symlink("x", p))
    show(f"{label}:mkdir", lambda: os.mkdir(p))
    show(f"{label}:mkfifo", lambda: os.mkfifo(p))
    show(f"{label}:access-w", lambda: os.access(p, os.W_OK) or (_ for _ in ()).throw(OSError(errno.EACCES, "")))
    show(f"{label}:stat", lambda: os.stat(p))
    show(f"{label}:lstat", lambda: os.lstat(p))
    show(f"{label}:open-r", lambda: os.open(p, os.O_RDONLY))
    show(f"{label}:open-dir-nofollow", lambda: os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
    show(f"{label}:listdir", lambda: os.listdir(p))
    show(f"{label}:readlink", lambda: os.readlink(p))
    show(f"{label}:connect", lambda: socket.socket(socket.AF_UNIX).connect(p))
'''


def probe(w, pairs):
    return w.probe(PROBE, [x for pair in pairs for x in pair], name="absent.py")


def compare(got, hidden_label, absent_label):
    calls = sorted({k.split(":", 1)[1] for k in got if k.startswith(hidden_label + ":")})
    assert len(calls) >= 25, calls
    diff = {c: (got[f"{hidden_label}:{c}"], got[f"{absent_label}:{c}"]) for c in calls
            if got[f"{hidden_label}:{c}"] != got[f"{absent_label}:{c}"]}
    assert not diff, (hidden_label, diff)


def test_hidden_file_and_directory_answer_as_absent_ones(uworld):
    got, err = probe(uworld, [
        ("hf", os.path.join(uworld.inc, "foo.h")), ("af", os.path.join(uworld.inc, "nothere.h")),
        ("hd", os.path.join(uworld.lib, "foo")), ("ad", os.path.join(uworld.lib, "nothere")),
        ("hin", os.path.join(uworld.lib, "foo", "x")), ("ain", os.path.join(uworld.lib, "nothere", "x")),
    ])
    compare(got, "hf", "af")
    compare(got, "hd", "ad")
    compare(got, "hin", "ain")
    assert got["hf:chmod"] == "EACCES" and got["hf:stat"] == "ENOENT"
    # still reported as hidden, with the write access seen
    assert "libfoo-dev" in err and "foo.h  [s" in err


def test_trailing_slash_and_dot_after_symlinks(uworld):
    b = uworld.build
    os.symlink(os.path.join(uworld.inc, "foo.h"), os.path.join(b, "lf"))
    os.symlink(os.path.join(uworld.lib, "foo"), os.path.join(b, "ld"))
    os.symlink(os.path.join(uworld.lib, "nothere"), os.path.join(b, "la"))
    got, _ = probe(uworld, [
        ("lf/", os.path.join(b, "lf") + "/"), ("la/", os.path.join(b, "la") + "/"),
        ("ld/", os.path.join(b, "ld") + "/"), ("la2/", os.path.join(b, "la") + "/"),
        ("ld/.", os.path.join(b, "ld") + "/."), ("la/.", os.path.join(b, "la") + "/."),
    ])
    compare(got, "lf/", "la/")
    compare(got, "ld/", "la2/")
    compare(got, "ld/.", "la/.")
    assert got["ld/:listdir"] == "ENOENT" and got["ld/:open-dir-nofollow"] == "ENOENT"

"""Per-function tests of the preload library against the fake trace server:
for each hooked function, the allowed / hidden / refused cases with their
exact return value and errno."""
import pytest

from fake_trace_server import FakeServer
from tracefix import env_for, hookcall, make_tree, result

# (command words, expected errno name or OK). On failure the return value
# must be exactly -1 (or NULL, printed as -1); on success it is >= 0.
# {r} is the test tree; vis/ visible, hid/ + vis/c hidden, ro/ read-only.
CASES = {
    "open": [
        (["open", "{r}/vis/a", "r"], "OK"),
        (["open", "{r}/hid/b", "r"], "ENOENT"),
        (["open", "{r}/vis/c", "r"], "ENOENT"),
        (["open", "{r}/ro/f", "r"], "OK"),
        (["open", "{r}/ro/f", "w"], "EACCES"),
        (["open", "{r}/ro/new", "wc"], "EACCES"),
        (["open", "{r}/hid/b", "wc"], "EACCES"),       # O_CREAT on a hidden path
        (["open", "{r}/hid/new", "wce"], "EACCES"),
        (["open", "{r}/vis/new", "wce"], "OK"),
        (["open", "{r}/hid", "rd"], "ENOENT"),
        (["open", "{r}/hid/b", "p"], "ENOENT"),          # O_PATH
        (["open", "{r}/vis/nothere", "r"], "ENOENT"),    # the real ENOENT
    ],
    "open64": [(["open64", "{r}/vis/a", "r"], "OK"), (["open64", "{r}/hid/b", "r"], "ENOENT"),
               (["open64", "{r}/ro/f", "rw"], "EACCES")],
    "openat": [(["openat", "{r}/vis", "a", "r"], "OK"), (["openat", "{r}", "hid/b", "r"], "ENOENT"),
               (["openat", "{r}/ro", "f", "w"], "EACCES"), (["openat", "{r}/vis", "../hid/b", "r"], "ENOENT")],
    "creat": [(["creat", "{r}/vis/n1"], "OK"), (["creat", "{r}/hid/b"], "EACCES"),
              (["creat", "{r}/ro/n1"], "EACCES")],
    "fopen": [(["fopen", "{r}/vis/a", "r"], "OK"), (["fopen", "{r}/hid/b", "r"], "ENOENT"),
              (["fopen", "{r}/ro/f", "r"], "OK"), (["fopen", "{r}/ro/f", "a"], "EACCES"),
              (["fopen", "{r}/hid/b", "w"], "EACCES")],
    "freopen": [(["freopen", "{r}/vis/a", "r"], "OK"), (["freopen", "{r}/hid/b", "r"], "ENOENT"),
                (["freopen", "{r}/ro/f", "w"], "EACCES")],
    "stat": [(["stat", "{r}/vis/a"], "OK"), (["stat", "{r}/hid/b"], "ENOENT"),
             (["stat", "{r}/hid"], "ENOENT"), (["stat", "{r}/ro/f"], "OK")],
    "lstat": [(["lstat", "{r}/vis/lnk_hid"], "OK"), (["lstat", "{r}/hid/b"], "ENOENT"),
              (["lstat", "{r}/badlink"], "ENOENT")],
    "fstatat": [(["fstatat", "{r}/vis", "a", "follow"], "OK"),
                (["fstatat", "{r}/vis", "../hid/b", "follow"], "ENOENT"),
                (["fstatat", "{r}/vis", "lnk_hid", "follow"], "ENOENT"),
                (["fstatat", "{r}/vis", "lnk_hid", "nofollow"], "OK")],   # AT_SYMLINK_NOFOLLOW
    "fstatat-empty": [(["fstatat-empty", "{r}/vis/a"], "OK")],           # AT_EMPTY_PATH
    "statx": [(["statx", "{r}/vis/a"], "OK"), (["statx", "{r}/hid/b"], "ENOENT")],
    "access": [(["access", "{r}/vis/a", "r"], "OK"), (["access", "{r}/hid/b", "f"], "ENOENT"),
               (["access", "{r}/ro/f", "r"], "OK"), (["access", "{r}/ro/f", "w"], "EACCES")],
    "faccessat": [(["faccessat", "{r}/vis/a", "f"], "OK"), (["faccessat", "{r}/hid/b", "f"], "ENOENT"),
                  (["faccessat", "{r}/ro/f", "w"], "EACCES")],
    "euidaccess": [(["euidaccess", "{r}/vis/a", "r"], "OK"), (["euidaccess", "{r}/hid/b", "r"], "ENOENT")],
    "readlink": [(["readlink", "{r}/vis/lnk_hid"], "OK"), (["readlink", "{r}/badlink"], "ENOENT"),
                 (["readlink", "{r}/vis/dirlink/b"], "ENOENT")],
    "readlinkat": [(["readlinkat", "{r}/vis/lnk_ok"], "OK"), (["readlinkat", "{r}/badlink"], "ENOENT")],
    "realpath": [(["realpath", "{r}/vis/lnk_ok"], "OK"), (["realpath", "{r}/vis/lnk_hid"], "ENOENT")],
    "__realpath_chk": [(["__realpath_chk", "{r}/vis/lnk_ok"], "OK"),
                       (["__realpath_chk", "{r}/vis/lnk_hid"], "ENOENT")],
    "chdir": [(["chdir", "{r}/vis"], "OK"), (["chdir", "{r}/hid"], "ENOENT"),
              (["chdir", "{r}/vis/dirlink"], "ENOENT")],
    "mkdir": [(["mkdir", "{r}/vis/nd"], "OK"), (["mkdir", "{r}/hid"], "EACCES"),  # existing hidden dir
              (["mkdir", "{r}/ro/nd"], "EACCES"), (["mkdir", "{r}/vis"], "EEXIST")],
    "mkdirat": [(["mkdirat", "{r}/vis/nd2"], "OK"), (["mkdirat", "{r}/hid/dir"], "EACCES")],
    "mkfifo": [(["mkfifo", "{r}/vis/ff"], "OK"), (["mkfifo", "{r}/ro/ff"], "EACCES"),
               (["mkfifo", "{r}/hid/ff"], "EACCES")],
    "mknod": [(["mknod", "{r}/vis/nf"], "OK"), (["mknod", "{r}/ro/nf"], "EACCES")],
    "rmdir": [(["rmdir", "{r}/vis/empty"], "OK"), (["rmdir", "{r}/hid/dir"], "ENOENT"),
              (["rmdir", "{r}/ro/dir"], "EACCES")],
    "unlink": [(["unlink", "{r}/vis/x"], "OK"), (["unlink", "{r}/hid/b"], "ENOENT"),
               (["unlink", "{r}/ro/f"], "EACCES")],
    "unlinkat": [(["unlinkat", "{r}/vis/x"], "OK"), (["unlinkat", "{r}/hid/b"], "ENOENT")],
    "remove": [(["remove", "{r}/vis/x"], "OK"), (["remove", "{r}/hid/b"], "ENOENT"),
               (["remove", "{r}/ro/f"], "EACCES")],
    "rename": [(["rename", "{r}/vis/x", "{r}/vis/y"], "OK"), (["rename", "{r}/hid/b", "{r}/vis/z"], "ENOENT"),
               (["rename", "{r}/vis/y", "{r}/ro/y"], "EACCES"), (["rename", "{r}/vis/y", "{r}/hid/b"], "EACCES")],
    "renameat": [(["renameat", "{r}/vis/x", "{r}/vis/y"], "OK"), (["renameat", "{r}/hid/b", "{r}/vis/z"], "ENOENT")],
    "renameat2": [(["renameat2", "{r}/vis/x", "{r}/vis/y"], "OK"),
                  (["renameat2", "{r}/vis/y", "{r}/ro/z"], "EACCES")],
    "link": [(["link", "{r}/vis/x", "{r}/vis/x2"], "OK"), (["link", "{r}/hid/b", "{r}/vis/b2"], "ENOENT"),
             (["link", "{r}/vis/x", "{r}/ro/x3"], "EACCES"),
             # a writable name for a read-only file: its source is written
             (["link", "{r}/ro/f", "{r}/vis/f2"], "EACCES")],
    "linkat": [(["linkat", "{r}/vis/x", "{r}/vis/x2"], "OK"), (["linkat", "{r}/hid/b", "{r}/vis/b2"], "ENOENT"),
               (["linkat", "{r}/ro/f", "{r}/vis/f2"], "EACCES")],
    "linkat-follow": [(["linkat-follow", "{r}/vis/x", "{r}/vis/x4"], "OK"),
                      (["linkat-follow", "{r}/hid/b", "{r}/vis/b4"], "ENOENT"),
                      (["linkat-follow", "{r}/ro/f", "{r}/vis/f4"], "EACCES")],
    "linkat-empty": [(["linkat-empty", "{r}/ro/f", "{r}/vis/f5"], "EACCES")],   # AT_EMPTY_PATH
    "symlink": [(["symlink", "x", "{r}/vis/s1"], "OK"), (["symlink", "x", "{r}/ro/s1"], "EACCES"),
                (["symlink", "x", "{r}/hid/s1"], "EACCES")],
    "symlinkat": [(["symlinkat", "x", "{r}/vis/s2"], "OK"), (["symlinkat", "x", "{r}/ro/s2"], "EACCES")],
    "chmod": [(["chmod", "{r}/vis/a"], "OK"), (["chmod", "{r}/hid/b"], "ENOENT"), (["chmod", "{r}/ro/f"], "EACCES")],
    "fchmodat": [(["fchmodat", "{r}/vis/a"], "OK"), (["fchmodat", "{r}/ro/f"], "EACCES")],
    "chown": [(["chown", "{r}/vis/a"], "OK"), (["chown", "{r}/hid/b"], "ENOENT"), (["chown", "{r}/ro/f"], "EACCES")],
    "lchown": [(["lchown", "{r}/vis/lnk_hid"], "OK"), (["lchown", "{r}/badlink"], "ENOENT")],
    "fchownat": [(["fchownat", "{r}/vis/a"], "OK"), (["fchownat", "{r}/ro/f"], "EACCES")],
    "truncate": [(["truncate", "{r}/vis/x"], "OK"), (["truncate", "{r}/hid/b"], "ENOENT"),
                 (["truncate", "{r}/ro/f"], "EACCES")],
    "utime": [(["utime", "{r}/vis/a"], "OK"), (["utime", "{r}/hid/b"], "ENOENT"), (["utime", "{r}/ro/f"], "EACCES")],
    "utimes": [(["utimes", "{r}/vis/a"], "OK"), (["utimes", "{r}/ro/f"], "EACCES")],
    "lutimes": [(["lutimes", "{r}/vis/lnk_hid"], "OK"), (["lutimes", "{r}/badlink"], "ENOENT")],
    "utimensat": [(["utimensat", "{r}/vis/a"], "OK"), (["utimensat", "{r}/ro/f"], "EACCES")],
    "mkstemp": [(["mkstemp", "{r}/vis/tXXXXXX"], "OK"), (["mkstemp", "{r}/ro/tXXXXXX"], "EACCES"),
                (["mkstemp", "{r}/hid/tXXXXXX"], "EACCES")],
    "mkdtemp": [(["mkdtemp", "{r}/vis/dXXXXXX"], "OK"), (["mkdtemp", "{r}/ro/dXXXXXX"], "EACCES")],
    "tmpfile": [(["tmpfile"], "OK")],
    "tmpfile64": [(["tmpfile64"], "OK")],
    "__open_2": [(["__open_2", "{r}/vis/a"], "OK"), (["__open_2", "{r}/hid/b"], "ENOENT")],
    "__open64_2": [(["__open64_2", "{r}/vis/a"], "OK"), (["__open64_2", "{r}/vis/c"], "ENOENT")],
    "__openat_2": [(["__openat_2", "{r}/vis/a"], "OK"), (["__openat_2", "{r}/hid/b"], "ENOENT")],
    "__openat64_2": [(["__openat64_2", "{r}/vis/a"], "OK"), (["__openat64_2", "{r}/hid/b"], "ENOENT")],
    "openat64": [(["openat64", "{r}/vis/a", "r"], "OK"), (["openat64", "{r}/hid/b", "r"], "ENOENT"),
                 (["openat64", "{r}/ro/f", "w"], "EACCES")],
    "creat64": [(["creat64", "{r}/vis/n2"], "OK"), (["creat64", "{r}/hid/b"], "EACCES"),
                (["creat64", "{r}/ro/n2"], "EACCES")],
    "fopen64": [(["fopen64", "{r}/vis/a", "r"], "OK"), (["fopen64", "{r}/hid/b", "r"], "ENOENT"),
                (["fopen64", "{r}/ro/f", "w"], "EACCES")],
    "freopen64": [(["freopen64", "{r}/vis/a", "r"], "OK"), (["freopen64", "{r}/hid/b", "r"], "ENOENT"),
                  (["freopen64", "{r}/ro/f", "r+"], "EACCES")],
    "stat64": [(["stat64", "{r}/vis/a"], "OK"), (["stat64", "{r}/hid/b"], "ENOENT")],
    "lstat64": [(["lstat64", "{r}/vis/lnk_hid"], "OK"), (["lstat64", "{r}/badlink"], "ENOENT")],
    "fstatat64": [(["fstatat64", "{r}/vis/a"], "OK"), (["fstatat64", "{r}/vis/lnk_hid"], "ENOENT")],
    "__xstat": [(["__xstat", "{r}/vis/a"], "OK"), (["__xstat", "{r}/hid/b"], "ENOENT")],
    "__xstat64": [(["__xstat64", "{r}/vis/a"], "OK"), (["__xstat64", "{r}/vis/lnk_hid"], "ENOENT")],
    "__lxstat": [(["__lxstat", "{r}/vis/lnk_hid"], "OK"), (["__lxstat", "{r}/badlink"], "ENOENT")],
    "__lxstat64": [(["__lxstat64", "{r}/vis/lnk_hid"], "OK"), (["__lxstat64", "{r}/badlink"], "ENOENT")],
    "__fxstatat": [(["__fxstatat", "{r}/vis/a"], "OK"), (["__fxstatat", "{r}/hid/b"], "ENOENT")],
    "__fxstatat64": [(["__fxstatat64", "{r}/vis/a"], "OK"), (["__fxstatat64", "{r}/hid/b"], "ENOENT")],
    "statfs": [(["statfs", "{r}/vis/a"], "OK"), (["statfs", "{r}/hid/b"], "ENOENT")],
    "statfs64": [(["statfs64", "{r}/vis/a"], "OK"), (["statfs64", "{r}/hid/b"], "ENOENT")],
    "statvfs": [(["statvfs", "{r}/vis"], "OK"), (["statvfs", "{r}/hid"], "ENOENT")],
    "statvfs64": [(["statvfs64", "{r}/vis"], "OK"), (["statvfs64", "{r}/hid"], "ENOENT")],
    "pathconf": [(["pathconf", "{r}/vis"], "OK"), (["pathconf", "{r}/hid"], "ENOENT")],
    "eaccess": [(["eaccess", "{r}/vis/a", "r"], "OK"), (["eaccess", "{r}/hid/b", "f"], "ENOENT"),
                (["eaccess", "{r}/ro/f", "w"], "EACCES")],
    "__readlink_chk": [(["__readlink_chk", "{r}/vis/lnk_ok"], "OK"), (["__readlink_chk", "{r}/badlink"], "ENOENT")],
    "__readlinkat_chk": [(["__readlinkat_chk", "{r}/vis/lnk_ok"], "OK"),
                         (["__readlinkat_chk", "{r}/badlink"], "ENOENT")],
    "canonicalize_file_name": [(["canonicalize_file_name", "{r}/vis/lnk_ok"], "OK"),
                               (["canonicalize_file_name", "{r}/vis/chain1"], "ENOENT")],
    # xattr support depends on the file system: allowed = what the kernel says
    "setxattr": [(["setxattr", "{r}/vis/a"], "REAL"), (["setxattr", "{r}/hid/b"], "ENOENT"),
                 (["setxattr", "{r}/ro/f"], "EACCES")],
    "lsetxattr": [(["lsetxattr", "{r}/vis/a"], "REAL"), (["lsetxattr", "{r}/badlink"], "ENOENT"),
                  (["lsetxattr", "{r}/ro/f"], "EACCES")],
    "getxattr": [(["getxattr", "{r}/vis/a"], "REAL"), (["getxattr", "{r}/hid/b"], "ENOENT")],
    "lgetxattr": [(["lgetxattr", "{r}/vis/a"], "REAL"), (["lgetxattr", "{r}/badlink"], "ENOENT")],
    "listxattr": [(["listxattr", "{r}/vis/a"], "REAL"), (["listxattr", "{r}/hid/b"], "ENOENT")],
    "llistxattr": [(["llistxattr", "{r}/vis/a"], "REAL"), (["llistxattr", "{r}/badlink"], "ENOENT")],
    "removexattr": [(["removexattr", "{r}/vis/a"], "REAL"), (["removexattr", "{r}/hid/b"], "ENOENT"),
                    (["removexattr", "{r}/ro/f"], "EACCES")],
    "lremovexattr": [(["lremovexattr", "{r}/vis/a"], "REAL"), (["lremovexattr", "{r}/ro/f"], "EACCES")],
    # refused unless kiln trace says "namespaces allow" (test below)
    "chroot": [(["chroot", "{r}/vis"], "EPERM"), (["chroot", "{r}/hid"], "EPERM")],
    "mknodat": [(["mknodat", "{r}/vis/nn"], "OK"), (["mknodat", "{r}/ro/nn"], "EACCES"),
                (["mknodat", "{r}/hid/nn"], "EACCES")],
    "__xmknod": [(["__xmknod", "{r}/vis/nn"], "OK"), (["__xmknod", "{r}/ro/nn"], "EACCES")],
    "__xmknodat": [(["__xmknodat", "{r}/vis/nn"], "OK"), (["__xmknodat", "{r}/ro/nn"], "EACCES")],
    "mkfifoat": [(["mkfifoat", "{r}/vis/nn"], "OK"), (["mkfifoat", "{r}/ro/nn"], "EACCES")],
    "lchmod": [(["lchmod", "{r}/vis/a"], "REAL"), (["lchmod", "{r}/hid/b"], "ENOENT"),
               (["lchmod", "{r}/ro/f"], "EACCES")],
    "truncate64": [(["truncate64", "{r}/vis/x"], "OK"), (["truncate64", "{r}/hid/b"], "ENOENT"),
                   (["truncate64", "{r}/ro/f"], "EACCES")],
    "futimesat": [(["futimesat", "{r}/vis/a"], "OK"), (["futimesat", "{r}/hid/b"], "ENOENT"),
                  (["futimesat", "{r}/ro/f"], "EACCES")],
    "opendir": [(["opendir", "{r}/vis"], "OK"), (["opendir", "{r}/hid"], "ENOENT"),
                (["opendir", "{r}/vis/dirlink"], "ENOENT")],
    "mkstemp64": [(["mkstemp64", "{r}/vis/tXXXXXX"], "OK"), (["mkstemp64", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkostemp": [(["mkostemp", "{r}/vis/tXXXXXX"], "OK"), (["mkostemp", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkostemp64": [(["mkostemp64", "{r}/vis/tXXXXXX"], "OK"), (["mkostemp64", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkstemps": [(["mkstemps", "{r}/vis/tXXXXXX"], "OK"), (["mkstemps", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkstemps64": [(["mkstemps64", "{r}/vis/tXXXXXX"], "OK"), (["mkstemps64", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkostemps": [(["mkostemps", "{r}/vis/tXXXXXX"], "OK"), (["mkostemps", "{r}/ro/tXXXXXX"], "EACCES")],
    "mkostemps64": [(["mkostemps64", "{r}/vis/tXXXXXX"], "OK"),
                    (["mkostemps64", "{r}/ro/tXXXXXX"], "EACCES")],
    "sys_openat2": [(["sys_openat2", "{r}/vis/a"], "OK"), (["sys_openat2", "{r}/hid/b"], "ENOENT")],
    "sys_openat": [(["sys_openat", "{r}/vis/a"], "OK"), (["sys_openat", "{r}/vis/lnk_hid"], "ENOENT")],
    "sys_statx": [(["sys_statx", "{r}/vis/a"], "OK"), (["sys_statx", "{r}/hid/b"], "ENOENT")],
    "sys_faccessat2": [(["sys_faccessat2", "{r}/vis/a"], "OK"), (["sys_faccessat2", "{r}/hid/b"], "ENOENT")],
    "sys_renameat2": [(["sys_renameat2", "{r}/vis/x", "{r}/vis/y"], "OK"),
                      (["sys_renameat2", "{r}/vis/y", "{r}/ro/y"], "EACCES")],
}


@pytest.fixture
def tree(tmp_path):
    rules, deep = make_tree(tmp_path)
    with FakeServer(rules) as srv:
        yield tmp_path, srv, deep


def kernel_says(tmp_path, words):
    """Status of one command run without kiln, in a tree of its own."""
    plain = tmp_path.parent / (tmp_path.name + "-plain")
    if not plain.exists():
        make_tree(plain)
    env = env_for("/unused")
    del env["LD_PRELOAD"]
    lines, _ = hookcall(None, *[w.format(r=plain) for w in words], env=env)
    return result(lines[0])[2]


@pytest.mark.parametrize("func", sorted(CASES))
def test_function(tree, func):
    root, srv, _ = tree
    args = []
    for words, _ in CASES[func]:
        args += [w.format(r=root) for w in words] + ["--"]
    lines, err = hookcall(srv.path, *args)
    assert len(lines) == len(CASES[func]), lines
    for (words, want), line in zip(CASES[func], lines):
        name, ret, status = result(line)
        if want == "REAL":
            want = kernel_says(root, words)
        assert status == want, f"{words}: {line}"
        if status == "OK":
            assert ret >= 0, line
        else:
            assert ret == -1, line
    assert "kiln:" not in err


def test_chroot_allowed_by_policy_still_checks_its_path(tree):
    root, srv, _ = tree
    env = env_for(srv.path, {"KILN_NAMESPACES": "allow"})
    for path, want in [("vis", "OK"), ("hid", "ENOENT"), ("vis/dirlink", "ENOENT")]:
        lines, _ = hookcall(srv.path, "chroot", f"{root}/{path}", env=env)
        assert result(lines[0])[2] == want, (path, lines)


def test_null_and_empty_paths_are_the_kernels(tree):
    root, srv, _ = tree
    lines, err = hookcall(srv.path, "oddpaths")
    assert [result(l) for l in lines] == [
        ("stat-null", -1, "EFAULT"), ("open-null", -1, "EFAULT"),
        ("stat-empty", -1, "ENOENT"), ("open-empty", -1, "ENOENT"),
        ("mkdir-empty", -1, "ENOENT"), ("fstatat-empty-noflag", -1, "ENOENT"),
        ("readlink-null", -1, "EFAULT")]
    # nothing to ask about (but the libraries the loader loaded: hooks/loader.c)
    assert [q for q in srv.queries() if ".so" not in q[2]] == []


def test_uninitialised_fails_closed(tmp_path):
    """Preloaded without a server (KILN_SOCKET unset, or nobody listening):
    every checked call fails with EIO, one message per process, nothing hangs."""
    (tmp_path / "f").write_text("x")
    env = env_for("/unused")
    del env["KILN_SOCKET"]
    lines, err = hookcall(None, "stat", tmp_path / "f", "open", tmp_path / "f", "r", env=env)
    assert [result(l) for l in lines] == [("stat", -1, "EIO"), ("open", -1, "EIO")]
    assert err.count("kiln:") == 1 and "KILN_SOCKET is not set" in err
    env = env_for(tmp_path / "nosocket")
    lines, err = hookcall(None, "stat", tmp_path / "f", "readdir", tmp_path, env=env)
    assert [result(l)[2] for l in lines] == ["EIO", "EIO"]
    assert err.count("kiln:") == 1 and "nosocket" in err


def test_server_death_fails_closed(tree):
    """The server dies mid-run: the next call fails with EIO and a message."""
    root, srv, _ = tree
    import subprocess
    from tracefix import HOOKCALL
    p = subprocess.Popen([str(HOOKCALL), "stat", f"{root}/vis/a", "wait-stdin",
                          "stat", f"{root}/vis/a", "open", f"{root}/vis/a", "r"],
                         env=env_for(srv.path), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().split()[2] == "OK"
    assert p.stdout.readline().strip() == "waiting"
    srv.stop()
    out, err = p.communicate("go\n", timeout=30)
    assert [l.split()[2] for l in out.splitlines()] == ["EIO", "EIO"]
    assert err.count("kiln: trace server") == 1 and "unreachable" in err


def test_relative_paths_and_cwd(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "stat", "vis/a", "stat", "hid/b", "stat", "vis/../hid/b",
                        "chdir", "vis", "stat", "a", "stat", "../hid/b", "stat", "./c",
                        cwd=root)
    assert [result(l)[2] for l in lines] == ["OK", "ENOENT", "ENOENT", "OK", "OK", "ENOENT", "ENOENT"]
    # every path the server saw is absolute and clean
    for q in srv.queries():
        assert q[2].startswith("/") and "//" not in q[2] and "/./" not in q[2]


def test_tmpfile_refused():
    from fake_trace_server import CREATE, WRITE
    with FakeServer([("deny", "/tmp", WRITE | CREATE)]) as srv:
        lines, _ = hookcall(srv.path, "tmpfile")
    assert lines == ["tmpfile -1 EACCES"]


def test_refused_handshake_fails_closed(tmp_path):
    (tmp_path / "f").write_text("x")
    with FakeServer(refuse=True) as srv:
        lines, err = hookcall(srv.path, "stat", tmp_path / "f", "stat", tmp_path / "f")
    assert [result(l) for l in lines] == [("stat", -1, "EIO")] * 2
    assert err.count("kiln:") == 1 and "refused" in err

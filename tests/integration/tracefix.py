"""Shared pieces of the preload library's tests: the test tree, the rules
the fake server gets for it, and running a helper under the library."""
import os
import pathlib
import subprocess

from fake_trace_server import CREATE, DELETE, WRITE

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))
PRELOAD = BUILD / "libkiln-trace.so"
HOOKCALL = BUILD / "tests" / "helpers" / "hookcall"


def make_tree(root):
    """vis/ is visible, hid/ and vis/c are hidden, ro/ refuses writes;
    symlinks of every kind DESIGN.md names. Returns the server rules."""
    r = pathlib.Path(root)
    for d in ["vis/sub", "vis/empty", "hid/dir", "ro/dir", "deep"]:
        (r / d).mkdir(parents=True)
    for f in ["vis/a", "vis/c", "vis/x", "hid/b", "ro/f"]:
        (r / f).write_text(f + "\n")
    os.symlink("../hid/b", r / "vis/lnk_hid")        # hidden target, allowed link
    os.symlink("a", r / "vis/lnk_ok")                 # allowed target
    os.symlink(str(r / "vis/a"), r / "badlink")       # the link itself is hidden
    os.symlink("../hid", r / "vis/dirlink")           # symlinked intermediate dir
    os.symlink("chain2", r / "vis/chain1")            # relative chain to hidden
    os.symlink("../vis/chain3", r / "vis/chain2")
    os.symlink("lnk_hid", r / "vis/chain3")
    os.symlink("loop2", r / "vis/loop1")              # loop
    os.symlink("loop1", r / "vis/loop2")
    # a path of more than 1000 characters
    deep = r / "deep"
    comp = "d" * 60
    for _ in range(18):
        deep = deep / comp
    deep.mkdir(parents=True)
    (deep / "seen").write_text("x")
    (deep / "hidden").write_text("x")
    rules = [
        ("hide", str(r / "hid")),
        ("hide", str(r / "vis/c")),
        ("hide", str(r / "badlink")),
        ("hide", str(deep / "hidden")),
        ("deny", str(r / "ro"), WRITE | CREATE | DELETE),
    ]
    return rules, deep


def env_for(server_path, extra=None):
    env = dict(os.environ)
    env.update(LD_PRELOAD=str(PRELOAD), KILN_SOCKET=str(server_path),
               KILN_PRELOAD=str(PRELOAD))
    env["PATH"] = f"{HOOKCALL.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    if extra:
        env.update(extra)
    return env


def hookcall(server_path, *args, env=None, cwd=None, input=None, timeout=60):
    """Runs hookcall under the preload library; returns (lines, stderr)."""
    e = env if env is not None else env_for(server_path)
    r = subprocess.run([str(HOOKCALL)] + [str(a) for a in args], env=e, cwd=cwd,
                       capture_output=True, text=True, timeout=timeout, input=input)
    assert r.returncode == 0, f"hookcall failed ({r.returncode}): {r.stderr}"
    return r.stdout.splitlines(), r.stderr


def result(line):
    """("name", ret, "OK"/"ENOENT"/...) of one output line."""
    parts = line.split()
    return parts[0], int(parts[1]), parts[2]

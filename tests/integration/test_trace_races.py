"""Check-then-use races (issue 9, class 5): inside the traced build, one
process keeps swapping what a path names between a visible file and a hidden
one (renameat2 RENAME_EXCHANGE of two symlinks, through kiln's hooks, as a
build would do it) while another uses the path in a loop. Whatever the
timing, the hidden file's content is never read and the hidden program never
runs; a file outside the writable areas is never written through a swapped
path. Before the fix, each technique leaked within a few hundred tries.

Techniques: open() and fopen() of a swapped final symlink, open() through a
swapped directory symlink, exec (posix_spawn and fork+execve) of a swapped
program and of a name swapped between a script and a hidden program, and as root (for whom the kernel would allow it) writes through a
swapped name and creations through a blinking symlink. As root and as
nobody."""
import os
import shutil
import subprocess

import pytest

from runas import uworld  # noqa: F401 (fixture)
from tracefix import BUILD

RACER = BUILD / "tests" / "helpers" / "racer"
SECS = float(os.environ.get("KILN_RACE_SECS", "0.5"))


def counts(line):
    """{"visible": N, "hidden": N, "ENOENT": N, ...} of a racer line."""
    return {k: int(v) for k, v in (f.split("=") for f in line.split())}


@pytest.fixture
def arena(uworld):
    """The build directory of uworld with everything the racers swap; names
    owned by the build's user."""
    w = uworld
    b = w.build
    racer = os.path.join(b, "racer")
    shutil.copy(RACER, racer)
    shutil.copy(RACER, os.path.join(b, "vis-prog"))
    shutil.copy(RACER, os.path.join(w.lib, "foo", "hid-prog"))   # in a hidden directory
    os.chmod(os.path.join(w.lib, "foo", "hid-prog"), 0o755)
    with open(os.path.join(b, "vis.txt"), "w") as f:
        f.write("visible\n")
    os.mkdir(os.path.join(b, "visdir"))
    with open(os.path.join(b, "visdir", "x"), "w") as f:
        f.write("visible\n")
    with open(os.path.join(b, "own.txt"), "w") as f:
        f.write("own\n")
    with open(os.path.join(b, "plain.txt"), "w") as f:  # a file, no symlink on its way
        f.write("visible\n")
    links = {
        "t": "vis.txt", "u": os.path.join(w.inc, "foo.h"),           # a hidden file
        "d": "visdir", "e": os.path.join(w.lib, "foo"),               # a hidden directory
        "p": "vis-prog", "q": os.path.join(w.lib, "foo", "hid-prog"),  # a hidden program
        "v": os.path.join(w.inc, "dep.h"),                            # visible, not writable
        "s": "vis.sh", "r": os.path.join(w.lib, "foo", "hid-prog"),   # a script, a hidden program
        "h": os.path.join(w.inc, "foo.h"),                            # swapped with plain.txt
    }
    with open(os.path.join(b, "vis.sh"), "w") as f:
        f.write("#!/bin/sh\necho vis-prog\n")
    os.chmod(os.path.join(b, "vis.sh"), 0o755)
    for name, target in links.items():
        os.symlink(target, os.path.join(b, name))
    os.rename(os.path.join(b, "own.txt"), os.path.join(b, "w"))
    if w.runas:
        import pwd
        pw = pwd.getpwnam("nobody")
        for name in os.listdir(b):
            os.lchown(os.path.join(b, name), pw.pw_uid, pw.pw_gid)
        os.lchown(os.path.join(b, "visdir", "x"), pw.pw_uid, pw.pw_gid)
    return w


# Each race: the swapper, then the user of the path, at once, for SECS and
# until the swapper has changed the path more than 50 times (RACER_STOP).
RACES = {
    "open": ("swap {s} t u", "read {s} t visible foo.h"),
    "fopen": ("swap {s} t u", "fread {s} t visible foo.h"),
    "open-dir": ("swap {s} d e", "read {s} d/x visible x"),
    "exec": ("swap {s} p q", "run {s} p vis-prog hid-prog"),
    "exec-script": ("swap {s} s r", "run {s} s vis-prog hid-prog"),
    # metadata: the name's inode is counted (the hidden file's would reveal it)
    "stat": ("swap {s} t u", "stat {s} t {vis} {hid}"),
    "stat-area": ("swap {s} plain.txt h", "stat {s} plain.txt {plain} {hid}"),
    # access(X_OK): only the hidden file is executable (the test makes it so)
    "access": ("swap {s} t u", "access {s} t"),
    "access-area": ("swap {s} plain.txt h", "access {s} plain.txt"),
    "write": ("swap {s} w v", "write {s} w 0"),
    "create": ("blink {s} {dep} c", "write {s} c 1"),
}


def run_races(w, names):
    script = ["set -e"]
    for name in names:
        swapper, user = RACES[name]
        fmt = dict(s=SECS, dep=os.path.join(w.inc, "dep.h"), hid=os.stat(os.path.join(w.inc, "foo.h")).st_ino,
                   vis=os.stat(os.path.join(w.build, "vis.txt")).st_ino,
                   plain=os.stat(os.path.join(w.build, "plain.txt")).st_ino)
        script.append(f'echo "{name}"; rm -f race-over; export RACER_STOP=race-over '
                      f'RACER_MIN_SWAPS=51; ./racer {swapper.format(**fmt)} & '
                      f'./racer {user.format(**fmt)}; wait')
    r = w.run(command=["sh", "-c", "\n".join(script)], timeout=60 + len(names) * (10 + 2 * SECS))
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    out, lines = {}, r.stdout.splitlines()
    for i, line in enumerate(lines):
        if line in RACES:
            a, b = lines[i + 1], lines[i + 2]
            swaps, used = (a, b) if a.startswith("swaps=") else (b, a)
            out[line] = (int(swaps.split("=")[1]), counts(used))
    assert set(out) == set(names), r.stdout
    return out, r.stderr


def test_swapped_paths_never_reach_a_hidden_file(arena):
    got, err = run_races(arena, ["open", "fopen", "open-dir", "exec", "exec-script"])
    for name, (swaps, c) in got.items():
        assert swaps > 50, (name, swaps, c)
        # the race ran: the visible file was reached, the hidden one refused
        assert c["visible"] > 0, (name, c)
        assert c.get("ENOENT", 0) + c.get("exit127", 0) > 0, (name, c)
        assert c["hidden"] == 0, (name, "reached the hidden file", c)
        # "other": the shell found its script gone (the name now led to the
        # hidden program, which its own open is refused): nothing ran
        assert c["other"] == 0 or name == "exec-script", (name, c)
    assert "libfoo-dev" in err


def never_hidden(got, what):
    """Each race ran (swaps, visible and hidden-as-absent answers) and never
    answered for the hidden file."""
    for name, (swaps, c) in got.items():
        assert swaps > 50, (name, swaps, c)
        assert c["visible"] > 0, (name, c)
        assert c.get("ENOENT", 0) > 0, (name, c)
        assert c["hidden"] == 0, (name, what, c)


def test_swapped_paths_never_reveal_a_hidden_files_metadata(arena):
    """stat, fstatat and statx of a name that is by turns a visible file (or
    a symlink to one) and a symlink to a hidden file: the hidden file's inode
    is never seen. plain.txt has no symlink on its way when it is the file
    (an AREA answer, from the map); t is always a symlink (the server's
    answer, bound by identity)."""
    got, err = run_races(arena, ["stat", "stat-area"])
    never_hidden(got, "revealed the hidden file's metadata")
    for name, (swaps, c) in got.items():
        assert c["other"] == 0, (name, c)  # a failed call left its buffer as it was


def test_swapped_paths_never_answer_access_for_a_hidden_file(arena):
    """access, faccessat and eaccess (X_OK) of the same swapped names: the
    hidden file, made executable, never answers 0 (a visible file's answer
    is EACCES, a hidden one's ENOENT)."""
    os.chmod(os.path.join(arena.inc, "foo.h"), 0o755)
    got, err = run_races(arena, ["access", "access-area"])
    never_hidden(got, "answered for the hidden file")


def test_swapped_paths_never_write_outside_the_writable_areas(arena):
    dep = os.path.join(arena.inc, "dep.h")
    before = os.stat(dep)
    got, err = run_races(arena, ["write", "create"])
    for name, (swaps, c) in got.items():
        assert swaps > 50, (name, swaps, c)
        assert c["visible"] > 0, (name, c)      # writes to the build's own file went through
    with open(dep) as f:
        assert f.read() == "dep.h\n"
    after = os.stat(dep)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


SPAWN = r'''
import os, subprocess, sys
prog = sys.argv[1]
r, w = os.pipe()
pid = os.posix_spawn(prog, [prog, "whoami"], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
os.close(w)
print("spawn", os.read(r, 4096).decode().strip(), flush=True)
os.waitpid(pid, 0)
print("exec", subprocess.run([prog, "whoami"], capture_output=True, text=True).stdout.strip(), flush=True)
sh = os.path.join(os.path.dirname(prog), "mysh")
out = subprocess.run([sh, "-c", 'cat /proc/$$/comm; env | grep -c "^KILN_EXEC_NAME=" || true'],
                     capture_output=True, text=True).stdout.split()
print("shell", *out)
'''


def test_bound_exec_runs_the_checked_file_under_its_own_name(arena):
    """A program in the build directory is run by fd (the file checked, not
    whatever its path names by then), by posix_spawn and by execve alike; it
    still has its own name (comm) and knows where it lives, and the name
    kiln passes it goes no further."""
    script = os.path.join(arena.build, "spawn.py")
    with open(script, "w") as f:
        f.write(SPAWN)
    prog = os.path.join(arena.build, "vis-prog")
    shutil.copy("/bin/dash", os.path.join(arena.build, "mysh"))
    r = arena.run(command=["python3", script, prog])
    assert r.returncode == 0, r.stderr[-2000:]
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got["spawn"] == got["exec"] == f"comm=vis-prog exe={prog}", got
    assert got["shell"] == "mysh 0", got


INTERPOSER = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	int mode = va_arg(ap, int);
	va_end(ap);
	if (strstr(path, "vis.txt"))
		write(2, "interposer saw vis.txt\n", 23);
	int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	return real(path, flags, mode);
}
'''


def test_a_preload_library_stacked_after_kiln_still_sees_opens(arena, tmp_path):
    """kiln's bound open uses a raw openat2 only when the real open is
    libc's; a library preloaded after kiln's that wraps open keeps seeing
    every open, in the build directory too."""
    src = tmp_path / "interposer.c"
    src.write_text(INTERPOSER)
    lib = os.path.join(arena.top, "libinterposer.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, str(src), "-ldl"], check=True)
    os.chmod(lib, 0o755)
    r = arena.run(command=["sh", "-c", f"LD_PRELOAD={lib} ./racer read 0.2 vis.txt visible foo.h"])
    assert r.returncode == 0, r.stderr[-2000:]
    c = counts(r.stdout.strip())
    assert c["visible"] > 10 and c["hidden"] == 0, c
    assert r.stderr.count("interposer saw vis.txt") == c["visible"], (c, r.stderr[-500:])

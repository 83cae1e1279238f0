"""The shared verdict cache (docs/verdict-cache.md) through the real preload
library: repeated questions are answered without the server, never with a
stale or wrong verdict; a map that is corrupt, truncated or of another
format makes a process fall back to round trips with one message; many
processes and threads, some SIGKILLed, leave a map that validates and holds
only what a fresh server answers. Every test here also runs with
--no-cache (make check runs the trace tests in both modes)."""
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import time

import pytest

import trace_proto as tp
from conftest import run
from tracesrv import TracedWait
from test_trace_server import world  # noqa: F401 (fixture)
from test_trace_server_memo import managed
from scratch_area import scratch  # noqa: F401 (fixture)


def plain_exec(path, nofollow):
    """Whether an exec of path runs a program with nothing for kiln's exec
    check to report or check further (src/trace/execfile.h): a regular file,
    not set-id, not a #! script, not a 64-bit ELF without PT_INTERP."""
    try:
        st = os.stat(path, follow_symlinks=not nofollow)
        with open(path, "rb") as f:
            head = f.read(64)
            if not (st.st_mode & 0o170000 == 0o100000) or st.st_mode & 0o6000 or head[:2] == b"#!":
                return False
            if head[:4] != b"\x7fELF" or head[4] != 2 or len(head) < 64:
                return True
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            if phentsize != 56 or not 0 < phnum <= 64:
                return True
            f.seek(phoff)
            table = f.read(56 * phnum)
            return any(struct.unpack_from("<I", table, 56 * i)[0] == 3 for i in range(phnum))
    except OSError:
        return False


def hammer_lines(out):
    res = {}
    for line in out.splitlines():
        path, rest = line.split(" ", 1)
        res[path] = rest
    return res


def no_pids(findings):
    """Findings without their pids (which differ between two runs)."""
    return [{k: (no_pids([v])[0] if isinstance(v, dict) else v) for k, v in f.items() if k != "pid"}
            for f in findings]


def traced_sh(kiln_bin, world, script, *extra, env=None, **kw):
    return run([kiln_bin, "trace", *world.args, *extra, "--", "sh", "-c", script], cwd=world.build,
               env=env, **kw)


def wait_for(path, proc, timeout=30):
    """Waits until the traced command `proc` has written `path`."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} not written in {timeout} s"
        time.sleep(0.01)


def run_paused(cmd, cwd, marker, release, timeout=30, env=None):
    """Runs `cmd` (a kiln trace); once the traced command has written
    `marker`, calls release(); returns (returncode, stdout, stderr)."""
    p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(marker, p, timeout)
        release()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


def cache_json(path):
    return json.loads(pathlib.Path(path).read_text())


# ---- figures, modes -----------------------------------------------------------

def test_repeated_questions_hit_the_cache(world, kiln_bin, helper, trace_cached):
    b = world.build
    (b / "x.h").write_text("mine\n")
    script = "for i in 1 2 3 4 5 6 7 8 9 10; do cat x.h /usr/include/stdio.h >/dev/null; done"
    r = traced_sh(kiln_bin, world, script, "--stats", "--json", "-o", b / "r.json")
    assert r.returncode == 0, r.stderr
    c = cache_json(b / "r.json")["cache"]
    assert set(c) == {"enabled", "hits", "misses", "round_trips", "notes", "ahead", "logged",
                      "recalled", "recall_used", "listings", "map_bytes", "entries"}
    assert re.search(r"verdict cache (on|off)", r.stderr)
    assert f"recalled     {c['recalled']} " in r.stderr and c["recalled"] == 0
    assert f"round trips  {c['round_trips']} " in r.stderr
    assert f"notes        {c['notes']} " in r.stderr
    r2 = traced_sh(kiln_bin, world, script, "--no-cache", "--json", "-o", b / "n.json")
    assert r2.returncode == 0, r2.stderr
    n = cache_json(b / "n.json")
    assert n["cache"]["enabled"] is False and n["cache"]["hits"] == 0
    assert n["cache"]["entries"] == 0 and n["cache"]["notes"] == 0
    if not trace_cached:
        assert c == n["cache"] | {"round_trips": c["round_trips"]}
        return
    assert c["enabled"] is True
    # The same questions in both modes; with the cache only a miss is a
    # round trip, and the 10 cats ask the same two questions: at least 18
    # of theirs are hits.
    assert c["hits"] + c["misses"] == n["cache"]["round_trips"], (c, n["cache"])
    assert c["misses"] == c["round_trips"] + c["notes"], c
    assert c["hits"] >= 18 and c["round_trips"] * 2 < n["cache"]["round_trips"], (c, n["cache"])
    assert c["entries"] > 0 and c["map_bytes"] >= 1 << 20
    # The processes that never talked to the server count as processes too.
    assert cache_json(b / "r.json")["totals"]["processes"] == n["totals"]["processes"]


def test_threads_questions_are_each_counted_once(world, kiln_bin, helper, trace_cached):
    """Threads count in shards of their own: every question of every thread
    is still counted, once."""
    b, inc = world.build, world.inc
    (b / "mine.c").write_text("x\n")
    paths = [inc / "dep.h", inc / "foo.h", b / "mine.c", b / "absent.h"]
    cmd = [helper("hammer"), 6, 25, *paths]
    r = run([kiln_bin, "trace", *world.args, "--json", "-o", b / "r.json", "--", *cmd], cwd=b)
    n = run([kiln_bin, "trace", *world.args, "--no-cache", "--json", "-o", b / "n.json", "--",
             *cmd], cwd=b)
    assert r.returncode == 0 and n.returncode == 0, (r.stderr, n.stderr)
    assert hammer_lines(r.stdout) == hammer_lines(n.stdout)
    c, nc = cache_json(b / "r.json")["cache"], cache_json(b / "n.json")["cache"]
    if not trace_cached:
        assert c["hits"] == 0 and c["round_trips"] == nc["round_trips"]
        return
    assert c["hits"] + c["misses"] == nc["round_trips"], (c, nc)
    assert c["misses"] == c["round_trips"] + c["notes"], c
    # Of the 1,200 questions about the build tree's two names, all but each
    # thread's first few (and the absent name's notes until the server has
    # read one) are hits.
    assert c["hits"] >= 600, c


def test_global_proc_files_hit_per_process_ones_ask(world, kiln_bin, trace_cached):
    """/proc/filesystems (read by every libselinux-linked program) is the
    same for every process: after its first reader, a hit. /proc/self/...
    names the asker's own process: always a round trip."""
    b = world.build
    rts = {}
    for name in ("filesystems", "self/status"):
        script = f"for i in 1 2 3 4 5 6 7 8 9 10; do cat /proc/{name} >/dev/null; done"
        r = traced_sh(kiln_bin, world, script, "--json", "-o", b / "r.json")
        assert r.returncode == 0, r.stderr
        rts[name] = cache_json(b / "r.json")["cache"]["round_trips"]
    if trace_cached:
        assert rts["self/status"] - rts["filesystems"] >= 9, rts
    else:
        assert rts["self/status"] == rts["filesystems"], rts


def test_same_report_and_log_in_both_modes(world, kiln_bin):
    b, inc = world.build, world.inc
    (b / "x.h").write_text("mine\n")
    (b / "obj").mkdir()
    # obj/ has no rule below it: the fresh names made there after the first
    # are answered from its 'S' values and written to the access log
    script = (f"for i in 1 2 3; do cat {inc}/dep.h {inc}/foo.h {inc}/stray.h x.h; ls {inc} {b}; "
              f"touch {inc}/new.h out.o; for j in 1 2 3; do echo $i > obj/t$i$j.o; "
              f"cat obj/t$i$j.o >/dev/null; rm obj/t$i$j.o; done; done; true")
    reports = []
    for mode in ([], ["--no-cache"]):
        r = traced_sh(kiln_bin, world, script, *mode, "--json", "-o", b / "r.json", "--log", b / "r.log")
        assert r.returncode == 0, r.stderr
        j = cache_json(b / "r.json")
        log = sorted((b / "r.log").read_text().splitlines())
        reports.append((j["hidden"], j["refused_writes"], j["unknown"], log,
                        j["totals"]["processes"], j["totals"]["paths"]))
    # The first process to reach each finding is the same command in both
    # modes (its argv), and so is the one whose access is the evidence; only
    # their pids differ between runs.
    a, n = reports
    assert no_pids(a[0]) == no_pids(n[0]) and a[0]
    assert no_pids(a[1]) == no_pids(n[1]) and a[1]
    assert no_pids(a[2]) == no_pids(n[2]) and a[2]
    assert a[3:] == n[3:]


def test_dot_dot_in_a_fresh_directory_reaches_the_log(world, kiln_bin):
    """'..' is no name of the directory it follows: a directory's 'S' value
    (every fresh name there allowed) says nothing of it, and the server
    believes no access-log slot with a '..' in it. So such a path is asked,
    and the log lists it with every class it was used for, as with
    --no-cache (the client answered obj/.. itself, the server dropped the
    slot, and the log lost its stat)."""
    b = world.build
    script = ("mkdir obj; touch obj/a obj/b; sleep 0.1; stat obj/a >/dev/null; "
              "stat obj/.. >/dev/null; stat obj/../obj/b >/dev/null; "
              "stat -L obj/zz 2>/dev/null; stat obj/.. >/dev/null; ls obj/.. >/dev/null; true")
    logs = []
    for mode in ([], ["--no-cache"]):
        shutil.rmtree(b / "obj", ignore_errors=True)
        r = traced_sh(kiln_bin, world, script, *mode, "--log", b / "r.log")
        assert r.returncode == 0, r.stderr
        logs.append(sorted(line for line in (b / "r.log").read_text().splitlines()
                           if "/obj" in line))
    assert logs[0] == logs[1], logs
    assert any(line.split()[0].startswith("s") and line.endswith("/obj/..") for line in logs[0]), logs


def test_writes_to_the_build_directorys_parent_by_dot_dot_stay_refused(world, kiln_bin, scratch):
    """An attacker's view of the 'S' values: once the build has written and
    chmodded files in its directory, every name there is writable, and
    `..` is the one component that leaves it. The build directory's parent
    lies outside every writable area: each way of changing its metadata
    through a path ending in `..` fails with EACCES, exactly as with
    --no-cache and as the parent's own path does, and changes nothing."""
    parent = pathlib.Path(scratch)
    pkg = parent / "pkg"
    (pkg / "sub").mkdir(parents=True)
    st0 = os.stat(parent)
    mode = oct(st0.st_mode & 0o7777)[2:]
    targets = ["..", f"{pkg}/..", "sub/../..", f"{pkg}/sub/../..", "./..", str(parent)]
    attempts = "".join(
        f"chmod {mode} {t} 2>/dev/null; echo chmod {t} $?; "
        f"chown {st0.st_uid}:{st0.st_gid} {t} 2>/dev/null; echo chown {t} $?; "
        f"touch -c {t} 2>/dev/null; echo touch {t} $?; "
        for t in targets)
    script = ("for f in a b c; do echo x > $f.o; chmod 644 $f.o; chown 0:0 $f.o; touch -c $f.o; "
              f"echo x > sub/$f.o; chmod 644 sub/$f.o; done; sleep 0.3; {attempts}true")
    outs = []
    for mode_args in ([], ["--no-cache"]):
        r = run([kiln_bin, "trace", *world.args, *mode_args, "--quiet", "-o", world.tmp / "r.txt",
                 "--", "sh", "-c", script], cwd=pkg)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.splitlines())
    cached, nocache = outs
    assert cached == nocache, (cached, nocache)
    assert len(cached) == 3 * len(targets), cached
    assert all(line.endswith(" 1") for line in cached), cached
    st1 = os.stat(parent)
    assert (st1.st_mode, st1.st_uid, st1.st_gid, st1.st_mtime_ns) == \
        (st0.st_mode, st0.st_uid, st0.st_gid, st0.st_mtime_ns)


def test_fresh_temporary_files_cost_no_round_trip(world, kiln_bin, trace_cached):
    """Compilers make randomly named temporary files: each is a name never
    asked before. After the first in a directory with no rule below it,
    they are answered without the server and still reach the access log."""
    b = world.build
    (b / "tmp").mkdir()
    rts = {}
    for n in (5, 30):
        script = (f"for i in $(seq {n}); do sh -c 'f=tmp/cc$$.s; echo x > $f; cat $f >/dev/null; "
                  "rm $f'; done")
        r = traced_sh(kiln_bin, world, script, "--json", "-o", b / "r.json", "--log", b / "r.log")
        assert r.returncode == 0, r.stderr
        made = [line for line in (b / "r.log").read_text().splitlines() if "/tmp/cc" in line]
        assert len(made) == n, made   # one line per file, its classes merged
        assert all(line.split()[1] == "allow" for line in made), made
        assert len({line.split()[0] for line in made}) == 1, made
        rts[n] = cache_json(b / "r.json")["cache"]["round_trips"]
    if trace_cached:
        # only the first file of each access class asks (the rest of the
        # round trips are the programs' PATH searches: the same in both runs)
        assert rts[30] - rts[5] <= 2, rts
    else:
        assert rts[30] - rts[5] >= 25 * 4, rts


def test_logged_names_become_hits(world, kiln_bin, trace_cached):
    """The server reads the access log while the build runs and gives each
    believed slot's own key the AREA value: a file the build made, read by
    one process (a fresh name, logged), is a hit for every later reader,
    which takes no slot of the log. The log lists it as with --no-cache."""
    b = world.build
    (b / "tmp").mkdir()
    logged, logs = {}, {}
    for n in (5, 30):
        for mode in ([], ["--no-cache"]):
            script = ("echo > tmp/a; cat tmp/a; echo x > tmp/shared.h; cat tmp/shared.h; sleep 0.5; "
                      f"for i in $(seq {n}); do cat tmp/shared.h >/dev/null; done")
            r = traced_sh(kiln_bin, world, script, *mode, "--json", "-o", b / "r.json", "--log",
                          b / "r.log")
            assert r.returncode == 0, r.stderr
            logged[(n, bool(mode))] = cache_json(b / "r.json")["cache"]["logged"]
            logs[(n, bool(mode))] = sorted(line for line in (b / "r.log").read_text().splitlines()
                                           if "/tmp/" in line)
            (b / "tmp" / "a").unlink()
            (b / "tmp" / "shared.h").unlink()
        assert logs[(n, False)] == logs[(n, True)], logs
    assert logged[(5, True)] == logged[(30, True)] == 0, logged
    if trace_cached:
        assert 1 <= logged[(5, False)] == logged[(30, False)], logged


def test_fresh_names_beside_the_build_directory(world, kiln_bin, trace_cached):
    """The build directory is a rule for a name in its parent (a build in
    /tmp/pkg is one for /tmp): a rule with the parent's own action (allow)
    changes no other name there, so fresh names beside the build directory
    are answered from the parent's 'S' values too. A symlink made there to
    a hidden file is still hidden."""
    inc, area = world.inc, world.tmp / "area"
    pkg = area / "pkg"
    pkg.mkdir(parents=True)
    rts = {}
    for n in (5, 30):
        script = (f"for i in $(seq {n}); do sh -c 'f={area}/cc$$.s; echo x > $f; "
                  f"cat $f >/dev/null; rm $f'; done; ln -sf {inc}/foo.h {area}/evil.h; "
                  f"cat {area}/evil.h; echo $?")
        r = run([kiln_bin, "trace", *world.args, "--json", "-o", pkg / "r.json", "--log",
                 pkg / "r.log", "--", "sh", "-c", script], cwd=pkg)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "1\n" and "No such file" in r.stderr, (r.stdout, r.stderr)
        assert f"{inc}/foo.h" in [h["path"] for h in cache_json(pkg / "r.json")["hidden"]]
        made = [line for line in (pkg / "r.log").read_text().splitlines() if "/cc" in line]
        assert len(made) == n, made
        rts[n] = cache_json(pkg / "r.json")["cache"]["round_trips"]
        (area / "evil.h").unlink()
    if trace_cached:
        assert rts[30] - rts[5] <= 2, rts
    else:
        assert rts[30] - rts[5] >= 25 * 4, rts


def test_absent_paths_are_told_not_asked(world, kiln_bin, helper, trace_cached):
    """A read-class question about a path that does not exist, with no
    symlink before its missing name, ends in ENOENT whatever the verdict: a
    process that has a connection already answers it itself and tells the
    server without waiting (a NOTE). The server still decides and logs it:
    the report and the log are those of --no-cache, also for a file the
    registry gives to a package outside the closure but the disk lacks (not
    a finding: there is nothing to hide). Through a symlink too, when the
    walk that follows it ends in ENOENT (the real call's walk), unless the
    open is bound (it opens without following symlinks: the server opens
    it). An existing name behind a symlink, or a write, a process asks as
    before."""
    b, inc, S = world.build, world.inc, world.sys
    manifest = (world.tmp / "manifest").read_text().replace(
        f" {S}/usr/include/foo.h\n", f" {S}/usr/include/foo.h\n {S}/usr/include/gone.h\n")
    (world.tmp / "manifest2").write_text(manifest)
    db = world.tmp / "registry2.db"
    assert run([kiln_bin, "registry", "--db", db, "import", "manifest",
                world.tmp / "manifest2"]).returncode == 0
    (b / "inc-link").symlink_to(inc)
    hc = helper("hookcall")
    calls = [["stat", f"{inc}/dep.h"]]           # the first question: a round trip, a connection
    for i in range(8):
        calls += [["stat", f"{inc}/none{i}.h"], ["open", f"{inc}/nodir{i}/x.h", "r"]]
    calls += [["lstat", f"{inc}/gone.h"], ["access", f"{inc}/gone.h", "r"],
              ["open", f"{inc}/gone.h", "r"],
              ["stat", f"{b}/inc-link/foo.h"], ["stat", f"{b}/inc-link/none.h"],
              ["access", f"{b}/inc-link/none9.h", "r"], ["lstat", f"{b}/inc-link/nodir/x.h"],
              ["open", f"{b}/inc-link/none8.h", "r"],
              ["open", f"{inc}/none0.h", "w"], ["stat", f"{b}/nothing-here"],
              ["stat", f"{inc}/none0.h"]]
    argv = [hc]
    for c in calls:
        argv += [*c, "--"]
    runs = []
    for mode in ([], ["--no-cache"]):
        r = run([kiln_bin, "trace", "--db", db, "--deps", "libdep-dev", "--ask", S, *mode,
                 "--json", "-o", b / "r.json", "--log", b / "r.log", "--", *argv[:-1]], cwd=b)
        assert r.returncode == 0, r.stderr
        j = cache_json(b / "r.json")
        runs.append((r.stdout, j, sorted((b / "r.log").read_text().splitlines())))
    (out, j, log), (nout, nj, nlog) = runs
    assert out == nout
    lines = out.splitlines()
    # everything ENOENT, but the write refused in the managed tree
    assert lines[0] == "stat 0 OK" and lines[-3] == "open -1 EACCES", lines
    assert all(x.endswith(" -1 ENOENT") for x in lines[1:-3] + lines[-2:]), lines
    assert [h["path"] for h in j["hidden"]] == [f"{inc}/foo.h"], j["hidden"]
    assert no_pids(j["hidden"]) == no_pids(nj["hidden"])
    assert no_pids(j["refused_writes"]) == no_pids(nj["refused_writes"]) and j["refused_writes"]
    assert log == nlog
    assert j["totals"]["queries"] == nj["totals"]["queries"] or not trace_cached
    if trace_cached:
        c = j["cache"]
        # 8 absent stats and 8 absent opens, gone.h three ways, the three
        # absent names behind inc-link, nothing-here: told; foo.h behind
        # inc-link (there, hidden), the open behind it and the write: asked
        assert c["notes"] >= 22, c
        assert c["misses"] == c["round_trips"] + c["notes"], c
    else:
        assert j["cache"]["notes"] == 0


def test_a_stat_then_an_open_costs_one_round_trip(world, kiln_bin, helper, trace_cached):
    """The open that follows a stat of the same managed file (a compiler's
    header search) is answered with the stat's round trip (the VERDICT
    says the READ's ALLOW too) and told with a NOTE; the report and the
    log stay those of --no-cache. Not for a hidden file, a file unknown to
    the registry (a finding), another qflags (lstat, then open), a
    fork's child (its parent's connection is not its own), nor for a file
    another process asked first (the map answers)."""
    b, inc, S = world.build, world.inc, world.sys
    names = [f"ahead{i}.h" for i in range(6)]
    for n in names:
        (inc / n).write_text(n + "\n")
    manifest = (world.tmp / "manifest").read_text().replace(
        f" {S}/usr/include/dep.h\n",
        f" {S}/usr/include/dep.h\n" + "".join(f" {S}/usr/include/{n}\n" for n in names))
    (world.tmp / "manifest2").write_text(manifest)
    db = world.tmp / "registry2.db"
    assert run([kiln_bin, "registry", "--db", db, "import", "manifest",
                world.tmp / "manifest2"]).returncode == 0
    hc = helper("hookcall")
    calls = []
    for n in names[:4]:                                  # answered ahead: 4
        calls += [["stat", f"{inc}/{n}"], ["open", f"{inc}/{n}", "r"]]
    calls += [["stat", f"{inc}/foo.h"], ["open", f"{inc}/foo.h", "r"],          # hidden
              ["stat", f"{inc}/stray.h"], ["open", f"{inc}/stray.h", "r"],      # unknown
              ["lstat", f"{inc}/{names[4]}"], ["open", f"{inc}/{names[4]}", "r"],  # NOFOLLOW
              ["stat", f"{inc}/{names[5]}"], ["fork", "open", f"{inc}/{names[5]}", "r", ";"],
              ["open", f"{inc}/{names[0]}", "r"]]        # a hit by now
    argv = [hc]
    for c in calls:
        argv += [*c, "--"]
    runs = []
    for mode in ([], ["--no-cache"]):
        r = run([kiln_bin, "trace", "--db", db, "--deps", "libdep-dev", "--ask", S,
                 *managed(world), *mode, "--json", "-o", b / "r.json", "--log", b / "r.log",
                 "--stats", "--", *argv[:-1]], cwd=b)
        assert r.returncode == 0, r.stderr
        runs.append((r.stdout, cache_json(b / "r.json"), (b / "r.log").read_text(), r.stderr))
    (out, j, log, err), (nout, nj, nlog, _) = runs
    assert out == nout
    assert out.count(" OK") == 15 and out.count("ENOENT") == 2, out   # foo.h: stat, open
    for k in ("hidden", "refused_writes", "unknown"):
        assert no_pids(j[k]) == no_pids(nj[k]), k
    assert [u["path"] for u in j["unknown"]] == [f"{inc}/stray.h"], j["unknown"]
    assert sorted(log.splitlines()) == sorted(nlog.splitlines())
    for n in names:   # both classes of each reached the log
        line = next(x for x in log.splitlines() if x.endswith(f"/{n}") or f"/{n} " in x)
        assert "s" in line.split()[0] and "r" in line.split()[0], line
    c = j["cache"]
    if trace_cached:
        # every question reached the server but the hits: told ones too
        assert j["totals"]["queries"] == nj["totals"]["queries"] - c["hits"], (j, nj)
        assert c["ahead"] == 4, c
        assert c["misses"] == c["round_trips"] + c["notes"], c
        assert f"and {c['ahead']} questions an earlier round trip answered ahead" in err
        # 17 questions, the last one a hit: 16 misses, 4 of them told
        assert c["round_trips"] == 12 and c["misses"] == 16, c
    else:
        assert c["ahead"] == 0 and c["notes"] == 0, c


def test_first_reached_by_names_the_first_asker(world, kiln_bin, trace_cached):
    inc, b = world.inc, world.build
    script = f"cat {inc}/foo.h 2>/dev/null; head -c1 {inc}/foo.h 2>/dev/null; true"
    r = traced_sh(kiln_bin, world, script, "--json", "-o", b / "r.json")
    hidden = cache_json(b / "r.json")["hidden"]
    who = [h for h in hidden if h["path"] == f"{inc}/foo.h"][0]
    assert "cat" in json.dumps(who), who


def test_no_cache_clients_never_attach(world, kiln_bin, trace_cached):
    r = traced_sh(kiln_bin, world, 'echo "cache=${KILN_CACHE-unset}"', "--no-cache")
    assert "cache=unset" in r.stdout
    r = traced_sh(kiln_bin, world, 'echo "cache=${KILN_CACHE-unset}"', "--report-only", "--stats")
    assert "cache=unset" in r.stdout and "verdict cache off" in r.stderr
    r = traced_sh(kiln_bin, world, 'echo "cache=${KILN_CACHE-unset}"')
    if trace_cached:
        assert re.search(r"cache=/.*/verdicts$", r.stdout.strip()), r.stdout
    else:
        assert "cache=unset" in r.stdout


# ---- never stale -------------------------------------------------------------

def test_build_dir_path_that_becomes_a_symlink_stays_hidden(world, kiln_bin, helper):
    b, inc, lib = world.build, world.inc, world.lib
    (b / "x.h").write_text("mine\n")
    (b / "sub").mkdir()
    (b / "sub" / "cache.bin").write_text("mine\n")
    script = (f"cat x.h sub/cache.bin; cat x.h sub/cache.bin; "
              f"rm x.h; ln -s {inc}/foo.h x.h; rm -r sub; ln -s {lib}/foo-plugins sub; "
              f"cat x.h || echo HIDDEN-1; cat sub/cache.bin || echo HIDDEN-2; "
              f"cat {b}/./x.h || echo HIDDEN-3; ls sub/ || echo HIDDEN-4; "
              f"rm x.h; echo again > x.h; cat x.h; "
              # obj/ gets 'S' values from one.o; fresh names there that are
              # symlinks, or lie below one, are still hidden
              f"mkdir obj; echo one > obj/one.o; cat obj/one.o; ln -s {inc}/foo.h obj/fresh.h; "
              f"cat obj/fresh.h || echo HIDDEN-5; ln -s {lib}/foo-plugins obj/d; "
              f"cat obj/d/cache.bin || echo HIDDEN-6; ls obj/d/ || echo HIDDEN-7")
    r = traced_sh(kiln_bin, world, script)
    assert r.stdout.splitlines() == ["mine", "mine", "mine", "mine", "HIDDEN-1", "HIDDEN-2",
                                     "HIDDEN-3", "HIDDEN-4", "again", "one", "HIDDEN-5",
                                     "HIDDEN-6", "HIDDEN-7"], r.stdout + r.stderr


def test_managed_tree_answers_and_listings_from_the_cache(world, kiln_bin, helper, trace_cached):
    inc, lib = world.inc, world.lib
    paths = [inc / "dep.h", inc / "foo.h", inc / "foo-link.h", inc / "dep-link.h",
             inc / "stray.h", inc, lib / "foo-plugins", lib / "foo-plugins" / "cache.bin",
             inc / "missing.h"]
    ref = run([kiln_bin, "trace", *world.args, *managed(world), "--no-cache", "--",
               helper("hammer"), 1, 1, *paths], cwd=world.build)
    assert ref.returncode == 0, ref.stderr
    script = " ; ".join([f"{helper('hammer')} 2 3 " + " ".join(map(str, paths))] * 4)
    r = run([kiln_bin, "trace", *world.args, *managed(world), "--json", "-o", world.build / "r.json",
             "--", "sh", "-c", script], cwd=world.build)
    assert r.returncode == 0, r.stderr
    want = hammer_lines(ref.stdout)
    got = r.stdout.splitlines()
    assert len(got) == 4 * len(paths)
    for line in got:
        path, rest = line.split(" ", 1)
        assert rest == want[path], line
    assert want[str(inc / "foo.h")].startswith("stat=2 ")
    assert want[str(inc / "dep.h")].startswith("stat=0 ")
    c = cache_json(world.build / "r.json")["cache"]
    if trace_cached:
        assert c["listings"] > 0 and c["hits"] > c["misses"], c


def test_vfork_children_ask_through_the_parents_map(world, kiln_bin, helper, trace_cached):
    """A vfork child shares its parent's memory, map included: its questions
    are hits there, it counts as a process of its own, and when it takes one
    of kiln's fd numbers (dup2) it asks by round trip and leaves the parent's
    map and connection alone. A hidden file and an absent one look alike."""
    b, inc = world.build, world.inc
    hc = helper("hookcall")
    (b / "x.h").write_text("mine\n")
    args = ["stat", inc / "dep.h", "stat", inc / "foo.h"]
    for _ in range(5):
        args += ["vfork-stat", inc / "dep.h", "vfork-stat", inc / "foo.h", "vfork-stat",
                 inc / "missing.h", "vfork-stat", b / "x.h"]
    for fd in (100, 101, 102, 103):
        args += ["vfork-dup2-exec", fd, hc, "stat", inc / "foo.h", "stat", inc / "dep.h", ";"]
    args += ["vfork-closefrom-exec", hc, "stat", inc / "foo-link.h", ";",
             "vforkstorm", 20, inc / "foo.h", hc, "stat", inc / "dep.h", ";",
             "stat", inc / "foo.h", "stat", inc / "dep.h", "dupfd-close", 100]
    want = ["stat 0 OK", "stat -1 ENOENT"] + \
        ["vfork-stat 0 OK", "vfork-stat -1 ENOENT", "vfork-stat -1 ENOENT", "vfork-stat 0 OK"] * 5 + \
        ["stat -1 ENOENT", "stat 0 OK", "vfork-dup2-exec 0"] * 4 + \
        ["stat -1 ENOENT", "vfork-closefrom-exec 0"] + ["stat 0 OK"] * 20 + \
        ["vforkstorm 0 OK", "stat -1 ENOENT", "stat 0 OK", "dupfd-close 0 OK"]
    reports = {}
    for mode in ("cached", "no-cache"):
        extra = ["--no-cache"] if mode == "no-cache" else []
        r = run([kiln_bin, "trace", *world.args, *managed(world), *extra, "--json", "-o",
                 b / f"{mode}.json", "--", hc, *args], cwd=b)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == want, (mode, r.stdout, r.stderr)
        assert "kiln:" not in r.stderr, r.stderr
        reports[mode] = cache_json(b / f"{mode}.json")
    c, n = reports["cached"], reports["no-cache"]
    # the parent and its 20 + 4 + 1 + 20 vfork children (25 exec hookcall)
    assert c["totals"]["processes"] == n["totals"]["processes"] == 46, (c["totals"], n["totals"])
    hidden = lambda rep: sorted(h["path"] for h in rep["hidden"])  # noqa: E731
    assert hidden(c) == hidden(n)
    if trace_cached:
        # the 20 vfork-stat children and the storm's 20 ask through the map:
        # none of them connects (no-cache: every process does)
        assert c["cache"]["hits"] >= 40, c["cache"]
        assert c["totals"]["connections"] < 20 and n["totals"]["connections"] > 60, \
            (c["totals"], n["totals"])


# ---- a map that cannot be trusted ----------------------------------------------

def _bad_magic(src, dst, kiln_bin):
    data = bytearray(src.read_bytes())
    data[0:8] = b"NOTKILN\0"
    dst.write_bytes(bytes(data))


def _truncated(src, dst, kiln_bin):
    dst.write_bytes(src.read_bytes()[:3000])


def _other_map(src, dst, kiln_bin):
    r = run([kiln_bin, "shm", "create", dst])
    assert r.returncode == 0, r.stderr


def _empty(src, dst, kiln_bin):
    dst.write_bytes(b"")


@pytest.mark.parametrize("spoil", [_bad_magic, _truncated, _other_map, _empty])
def test_untrustworthy_map_falls_back_with_one_message(world, kiln_bin, helper, trace_cached,
                                                       spoil):
    if not trace_cached:
        pytest.skip("about the cache's map")
    b, inc = world.build, world.inc
    paths = [inc / "dep.h", inc / "foo.h", inc, b / "here.txt"]
    (b / "here.txt").write_text("x\n")
    ref = run([kiln_bin, "trace", *world.args, "--no-cache", "--", helper("hammer"), 1, 1, *paths],
              cwd=b)
    fifo = b / "go.fifo"
    os.mkfifo(fifo)
    where = b / "where"
    script = (f'cat here.txt >/dev/null; echo "$KILN_CACHE" > where.tmp && mv where.tmp where; '
              f'read x < go.fifo; exec {helper("hammer")} 2 2 ' + " ".join(map(str, paths)))
    def release():
        mapfile = pathlib.Path(where.read_text().strip())
        spoilt = mapfile.with_name("spoilt")
        spoil(mapfile, spoilt, kiln_bin)
        os.chmod(spoilt, 0o400)
        os.rename(spoilt, mapfile)   # running processes keep the old file
        with open(fifo, "w") as f:
            f.write("go\n")
    rc, out, err = run_paused([kiln_bin, "trace", *world.args, "--", "sh", "-c", script], b, where,
                              release)
    assert rc == 0, err
    mapfile = pathlib.Path(where.read_text().strip())
    assert hammer_lines(out) == hammer_lines(ref.stdout)
    msgs = [ln for ln in err.splitlines() if ln.startswith("kiln: verdict cache")]
    assert len(msgs) == 1, err
    assert str(mapfile) in msgs[0] and "asks the trace server for every check" in msgs[0]


# ---- chaos -------------------------------------------------------------------------

CHAOS = r'''
import os, random, signal, subprocess, sys, time
hammer, outdir, keep = sys.argv[1:4]
paths = sys.argv[4:]
rng = random.Random(7)
procs = []
for i in range(10):
    ps = paths[:]
    rng.shuffle(ps)
    with open(os.path.join(outdir, f"out{i}"), "w") as out:
        procs.append(subprocess.Popen([hammer, "3", "40", *ps], stdout=out))
for i in (1, 3, 5, 7, 9):
    time.sleep(rng.uniform(0.0, 0.05))
    procs[i].send_signal(signal.SIGKILL)
for p in procs:
    p.wait()
with open(keep + ".tmp", "w") as f:
    f.write(os.environ.get("KILN_CACHE", ""))
os.rename(keep + ".tmp", keep)
while not os.path.exists(keep + ".done"):
    time.sleep(0.02)
'''


def unescape(s):
    return re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), s.encode())


@pytest.mark.parametrize("layout", ["build-dir", "managed", "managed-recalled"])
def test_chaos_killed_clients_leave_a_valid_map_of_fresh_answers(world, kiln_bin, helper,
                                                                trace_cached, layout):
    """managed-recalled: a rebuild (test_trace_recall.py), whose STABLE
    answers a run before put in before anyone asks, each with its number
    (VC_F_RECALLED) for its first user to set a bit, then replaced by the
    plain answer once the server has logged that use."""
    b, inc, lib = world.build, world.inc, world.lib
    extra = managed(world) if layout.startswith("managed") else []
    env = None
    if layout == "managed-recalled":
        env = dict(os.environ, KILN_TRACE_NO_RECALL="0", XDG_CACHE_HOME=str(world.tmp / "xdg"))
    (b / "src").mkdir()
    for i in range(12):
        (b / "src" / f"f{i}.c").write_text("x\n")
    paths = [inc / "dep.h", inc / "foo.h", inc / "foo-link.h", inc / "dep-link.h", inc / "stray.h",
             inc, lib / "foo-plugins", lib / "foo-plugins" / "cache.bin", inc / "nope.h", b / "src",
             "/dev/null", "/usr/include/stdio.h", "/usr/include",
             *[b / "src" / f"f{i}.c" for i in range(12)], b / "missing" / "x.c"]
    outdir = b / "out"
    outdir.mkdir()
    (b / "chaos.py").write_text(CHAOS)
    keep = b / "keep"
    saved = b / "saved-map"

    def release():
        if keep.read_text():
            shutil.copyfile(keep.read_text(), saved)
        (b / "keep.done").write_text("")
    if env:
        warm = run([kiln_bin, "trace", *world.args, *extra, "--", helper("hammer"), 1, 1, *paths],
                   cwd=b, env=env)
        assert warm.returncode == 0, warm.stderr
    rc, out, err = run_paused([kiln_bin, "trace", *world.args, *extra, "--stats", "--", "python3",
                               "chaos.py", helper("hammer"), outdir, keep, *paths], b, keep, release,
                              120, env)
    assert rc == 0, err
    mapfile = keep.read_text()
    # Every survivor saw one answer per path, the same as every other.
    ref = run([kiln_bin, "trace", *world.args, *extra, "--no-cache", "--", helper("hammer"), 1, 1,
               *paths], cwd=b)
    want = hammer_lines(ref.stdout)
    outs = [hammer_lines((outdir / f"out{i}").read_text()) for i in (0, 2, 4, 6, 8)]
    for o in outs:
        assert o == want
    if not trace_cached:
        assert not mapfile
        return
    assert "verdict cache on" in err
    v = run([kiln_bin, "shm", "validate", saved])
    assert v.returncode == 0, v.stdout + v.stderr
    dump = run([kiln_bin, "shm", "dump", saved])
    assert dump.returncode == 0, dump.stderr
    entries = []
    for line in dump.stdout.splitlines():
        value, key = line.split("\t", 1)
        entries.append((int(value, 16), unescape(key)))
    assert len(entries) > 20
    # Ask a fresh server (no cache, no walk memo) every question the map holds.
    t = TracedWait(kiln_bin, b, [*world.args, *extra, "--no-cache"],
                   env=dict(os.environ, KILN_TRACE_NO_MEMO="1"))
    try:
        c = tp.Client(t.socket).handshake()
        checked = names_checked = plain_execs = recalled = 0
        for value, key in entries:
            assert value >> 48 == 0x564B, hex(value)
            kind, answer = (value >> 8) & 0xFF, value & 0xFF
            if key.startswith(b"\0G"):  # a plan of glibc's own loads (vcache.h)
                dkind, arg = key[2], struct.unpack("=I", key[3:7])[0]
                a, b = key[7:].split(b"\0", 1)
                assert c.ask_data(dkind, arg, a, b) == answer, key
                checked += 1
                continue
            path, rest = key.split(b"\0", 1)
            path = path.decode()
            if rest[:1] == b"V":
                access, qflags = rest[1], rest[2]
                assert c.ask(path, access, qflags) == answer, (path, access, qflags, kind)
                # the exec facts (vcache.h: VC_F_PLAIN_EXEC) are the file's;
                # a recalled key's number only on a STABLE ALLOW with
                # VC_F_RECALLED, only in a rebuild
                flags = (value >> 16) & 0xFF
                if flags & 2:
                    assert env and kind == 1 and answer == tp.ALLOW, (path, access, kind)
                    recalled += 1
                    flags &= ~2
                else:
                    assert value >> 24 & 0xFFFFFF == 0, hex(value)
                if kind == 1 and access == tp.EXEC and answer == tp.ALLOW:
                    assert flags == plain_exec(path, qflags & 1), (path, flags)
                    plain_execs += flags
                else:
                    assert flags == 0, (path, access, kind, flags)
            elif rest[:1] == b"E":
                assert c.ask_dir(path, [rest[1:].decode()]) == [answer], (path, rest)
            elif rest[:1] == b"S":
                # every name in the directory, and one that never existed:
                # the fresh server gives each (no symlink on its way) the answer
                access, qflags = rest[1], rest[2]
                assert kind == 2 and answer == tp.ALLOW, (path, kind, answer)
                names = [n for n in (os.listdir(path) if os.path.isdir(path) else [])
                         if not os.path.islink(os.path.join(path, n))]
                for n in names + ["never-made.o"]:
                    assert c.ask(f"{path}/{n}", access, qflags) == answer, (path, n, access)
                names_checked += 1
            else:
                assert rest == b"D", key
                names = sorted(os.listdir(path))
                fresh = c.ask_dir(path, names)
                if answer == 1:
                    assert set(fresh) == {1}, (path, kind)
                elif answer == 2:
                    assert set(fresh) <= {0}, (path, kind)
            checked += 1
        assert checked == len(entries)
        assert names_checked > 0   # src/ and missing/ get 'S' values
        assert plain_execs > 0     # python3 and the hammer, at least
        assert recalled == 0 or env, recalled
        if env:
            # values put in before anyone asked (most made plain once used)
            assert int(re.search(r"recalled +(\d+) ", err).group(1)) > 0, err
    finally:
        t.finish()

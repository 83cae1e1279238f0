"""Lifetime (issue 9, class 9): when `kiln trace` is killed outright, the
build's processes end — a double-forked daemon that left the process group
too — and nothing is left in /tmp. As root and as an unprivileged user."""
import os
import shutil
import signal
import time

import pytest

from runas import uworld  # noqa: F401 (fixture)

# The build: a background sleeper in the group, a daemon that double-forks
# into its own session (out of the group), one that also clears its
# environment (kiln puts its variables back into every exec), then it says
# where it runs and waits.
BUILD = r'''
echo $$ > top
sleep 1000 & echo $! > pids
( setsid sh -c 'sleep 1001 & echo $! >> pids; wait' & )
( setsid env -i /bin/sh -c 'sleep 1002 & echo $! >> pids; wait' & )
while [ "$(wc -l < pids)" -lt 3 ]; do sleep 0.05; done
echo "$KILN_RUN_DIR" > rundir.tmp && mv rundir.tmp rundir
wait
'''


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(cond, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {what}")


def start(w, *args, **kw):
    p = w.popen(*args, command=["sh", "-c", BUILD], **kw)
    flag = os.path.join(w.build, "rundir")
    try:
        wait_for(lambda: os.path.exists(flag), "the build to start")
    except AssertionError:
        p.kill()
        raise AssertionError(p.communicate(timeout=10)[1].decode())
    pids = [int(x) for x in open(os.path.join(w.build, "pids")).read().split()]
    rundir = open(flag).read().strip()
    assert len(pids) == 3 and all(alive(pid) for pid in pids)
    assert os.path.isdir(rundir)
    return p, pids, rundir


def server_of(kiln_pid):
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == kiln_pid and "(kiln)" in stat:
                return int(entry)
    raise AssertionError("no server process")


def test_sigkill_of_kiln_ends_the_build_and_removes_the_run_dir(uworld):
    p, pids, rundir = start(uworld, "--json", "-o", "r.json")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    ended = lambda: not any(alive(pid) for pid in pids) and not os.path.exists(rundir)
    wait_for(lambda: ended() or p.stderr.closed, "the build to end")
    err = p.stderr.read().decode()   # EOF: the server has exited
    assert ended(), err
    assert "died before the build ended" in err
    # the group's kill told apart from the scans': the two setsid shells and
    # their sleeps, each counted once
    assert "killed its process group and 4 processes outside it" in err, err
    # The server still wrote the report it was asked for.
    wait_for(lambda: os.path.exists(os.path.join(uworld.build, "r.json")), "the JSON report")


def test_kill_of_kiln_and_its_process_group(uworld):
    """A CI timeout kills kiln's whole process group: the server is in a
    group of its own and survives to end the build and clean up."""
    p, pids, rundir = start(uworld, start_new_session=True)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    ended = lambda: not any(alive(pid) for pid in pids) and not os.path.exists(rundir)
    wait_for(ended, "the build to end")


def test_kill_of_kiln_and_its_server_still_ends_the_first_process(uworld):
    """Both killed at once: nobody is left to clean up, but the build's
    first process dies with kiln (parent-death signal), so the command does
    not go on; what it started fails closed (a documented limit)."""
    p, pids, rundir = start(uworld)
    top = int(open(os.path.join(uworld.build, "top")).read())
    srv = server_of(p.pid)
    os.kill(srv, signal.SIGSTOP)
    os.kill(p.pid, signal.SIGKILL)
    os.kill(srv, signal.SIGKILL)
    p.wait(timeout=10)
    try:
        wait_for(lambda: not alive(top), "the build's first process to end")
    finally:
        for pid in pids:          # leave nothing behind for the next test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(rundir, ignore_errors=True)


def test_normal_end_leaves_nothing_in_tmp(uworld):
    r = uworld.run(command=["sh", "-c", 'cat "$0"; echo "$KILN_RUN_DIR" > rundir',
                            os.path.join(uworld.inc, "dep.h")])
    assert r.returncode == 0, r.stderr
    rundir = open(os.path.join(uworld.build, "rundir")).read().strip()
    assert os.path.basename(rundir).startswith("kiln-trace.")
    assert not os.path.exists(rundir)


def wakeups(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches for {pid}")


def test_idle_server_sleeps(uworld):
    """A server with nothing to answer wakes about four times a second (to
    read the access log), not fifty: each wake-up interrupts a CPU the
    build is using (docs/verdict-cache.md)."""
    p = uworld.popen(command=["sh", "-c", "echo go > started; sleep 3"])
    try:
        wait_for(lambda: os.path.exists(os.path.join(uworld.build, "started")), "the build to start")
        srv = server_of(p.pid)
        time.sleep(0.3)
        before = wakeups(srv)
        time.sleep(2.0)
        woke = wakeups(srv) - before
    finally:
        p.wait(timeout=20)
    assert p.returncode == 0, p.stderr.read().decode()
    assert woke <= 20, f"the idle server woke {woke} times in 2 s"

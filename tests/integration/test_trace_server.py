"""The trace server, driven through its protocol by a Python client while
`kiln trace` runs a command that waits (no preload library involved)."""
import json
import os
import pathlib
import shutil
import signal
import socket
import struct
import threading
import time

import pytest

import trace_proto as tp
from conftest import as_other_user, run
from runas import manifest_text
from tracesrv import TracedWait


@pytest.fixture
def world(tmp_path, kiln_bin):
    """A fake system tree under tmp/sys managed by a manifest registry:
    base (Essential) owns the directories, libdep-dev is the declared
    dependency, libfoo-dev and evil-links are not."""
    sys_ = tmp_path / "sys"
    inc = sys_ / "usr" / "include"
    lib = sys_ / "usr" / "lib"
    for d in (inc, lib / "foo-plugins", tmp_path / "build"):
        d.mkdir(parents=True)
    (inc / "foo.h").write_text("foo\n")
    (inc / "dep.h").write_text("dep\n")
    (inc / "base.h").write_text("base\n")
    (inc / "stray.h").write_text("nobody's\n")
    (lib / "foo-plugins" / "cache.bin").write_text("generated\n")
    (inc / "foo-link.h").symlink_to("dep.h")          # owned by evil-links
    (inc / "dep-link.h").symlink_to("foo.h")          # owned by libdep-dev
    S = str(sys_)
    manifest = tmp_path / "manifest"
    manifest.write_text(manifest_text([
        ("base", True, [f"{S}/", f"{S}/usr/", f"{S}/usr/include/", f"{S}/usr/lib/",
                        f"{S}/usr/include/base.h"]),
        ("libdep-dev", False, [f"{S}/usr/include/dep.h", f"{S}/usr/include/dep-link.h -> foo.h"]),
        ("libfoo-dev", False, [f"{S}/usr/include/foo.h", f"{S}/usr/lib/foo-plugins/"]),
        ("evil-links", False, [f"{S}/usr/include/foo-link.h -> dep.h"]),
    ]))
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr

    class W:
        pass
    w = W()
    w.tmp, w.sys, w.inc, w.lib, w.db = tmp_path, sys_, inc, lib, db
    w.build = tmp_path / "build"
    w.args = ["--db", db, "--deps", "libdep-dev", "--ask", sys_]
    return w


@pytest.fixture
def traced(world, kiln_bin):
    started = []

    def start(*extra):
        t = TracedWait(kiln_bin, world.build, [*world.args, *extra])
        started.append(t)
        return t
    yield start
    for t in started:
        t.kill()


def connect(t):
    return tp.Client(t.socket).handshake()


# ---- handshake and verdicts ---------------------------------------------

def test_handshake_and_basic_verdicts(world, traced):
    t = traced()
    c = connect(t)
    assert c.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW       # declared dependency
    assert c.ask(f"{world.inc}/base.h", tp.READ) == tp.ALLOW      # Essential
    assert c.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE        # outside the closure
    assert c.ask(f"{world.inc}/foo.h", tp.STAT) == tp.HIDE
    assert c.ask(f"{world.inc}/missing.h", tp.STAT) == tp.ALLOW   # the kernel says ENOENT
    assert c.ask(f"{world.inc}/stray.h", tp.READ) == tp.ALLOW     # unknown: allowed + reported
    assert c.ask_data(tp.DATA_LOCALE, 1, "", "C") == tp.CLEAN     # built into glibc
    assert c.ask_data(tp.DATA_LOCALE, 0x1fbf, "", "xx_NOWHERE.UTF-8") == tp.CLEAN  # fails by itself
    rc, err = t.finish()
    assert rc == 0, err
    assert "libfoo-dev (1)" in err
    assert f"{world.inc}/foo.h" in err
    assert f"{world.inc}/stray.h" in err
    assert f"pid {os.getpid()}:" in err   # the process that reached it, by pid...
    assert "pytest" in err                # ...and its command line


def test_writes(world, traced):
    t = traced()
    c = connect(t)
    assert c.ask(f"{world.build}/out.o", tp.WRITE | tp.CREATE) == tp.ALLOW
    assert c.ask("/tmp/kiln-test-scratch", tp.WRITE | tp.CREATE) == tp.ALLOW
    assert c.ask("/dev/null", tp.WRITE) == tp.ALLOW
    assert c.ask(f"{world.inc}/new.h", tp.WRITE | tp.CREATE) == tp.DENY   # ask-tree
    assert c.ask(f"{world.inc}/dep.h", tp.WRITE) == tp.DENY
    assert c.ask(f"{world.inc}/dep.h", tp.DELETE, tp.NOFOLLOW) == tp.DENY
    assert c.ask("/var/kiln-test-nope", tp.CREATE) == tp.DENY             # outside any allowed area
    assert c.ask(f"{world.inc}/foo.h", tp.CREATE | tp.WRITE) == tp.DENY   # O_CREAT on hidden: EACCES
    # plain write: EACCES, as for an absent name here (writes are refused
    # in this tree whether the name exists or not); still reported hidden
    assert c.ask(f"{world.inc}/foo.h", tp.WRITE) == tp.DENY
    assert c.ask(f"{world.inc}/foo.h", tp.DELETE, tp.NOFOLLOW) == tp.DENY
    assert c.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
    rc, err = t.finish()
    assert "refused writes: 3" in err   # dep.h twice counts once
    assert f"{world.inc}/new.h  [--w--c-]" in err


def test_symlinks(world, traced, tmp_path):
    b, inc = world.build, world.inc
    (b / "to-foo").symlink_to(inc / "foo.h")               # allowed link, hidden target
    (b / "to-dep").symlink_to(inc / "dep.h")
    (b / "incdir").symlink_to(inc)                          # symlinked intermediate directory
    (b / "l1").symlink_to("l2")                             # relative chain
    (b / "l2").symlink_to("../build/l3")
    (b / "l3").symlink_to("../sys/usr/include/foo.h")
    (b / "loop-a").symlink_to("loop-b")
    (b / "loop-b").symlink_to("loop-a")
    deep = b
    for i in range(12):
        deep = deep / ("d%02d" % i + "x" * 90)
    deep.mkdir(parents=True)
    (deep / "far").symlink_to(inc / "foo.h")
    longpath = f"{deep}/far"
    assert len(longpath) > 1000
    t = traced()
    c = connect(t)
    assert c.ask(f"{b}/to-foo", tp.READ) == tp.HIDE
    assert c.ask(f"{b}/to-foo", tp.STAT, tp.NOFOLLOW) == tp.ALLOW   # lstat of the link itself
    assert c.ask(f"{b}/to-dep", tp.READ) == tp.ALLOW
    assert c.ask(f"{b}/incdir/foo.h", tp.READ) == tp.HIDE
    assert c.ask(f"{b}/incdir/dep.h", tp.READ) == tp.ALLOW
    assert c.ask(f"{b}/incdir/../include/foo.h", tp.READ) == tp.HIDE  # ".." after a symlink is physical
    assert c.ask(f"{b}/l1", tp.READ) == tp.HIDE
    assert c.ask(f"{b}/loop-a", tp.READ) == tp.ALLOW                  # ELOOP is the kernel's answer
    assert c.ask(longpath, tp.READ) == tp.HIDE
    # A symlink owned by a package outside the closure is hidden itself,
    # even though it points at a visible file...
    assert c.ask(f"{inc}/foo-link.h", tp.READ) == tp.HIDE
    assert c.ask(f"{inc}/foo-link.h", tp.STAT, tp.NOFOLLOW) == tp.HIDE
    # ...and a dependency's symlink to a hidden file reaches nothing.
    assert c.ask(f"{inc}/dep-link.h", tp.STAT, tp.NOFOLLOW) == tp.ALLOW
    assert c.ask(f"{inc}/dep-link.h", tp.READ) == tp.HIDE
    # The client's /proc/self, not the server's: its root leads back in.
    assert c.ask(f"/proc/self/root{inc}/foo.h", tp.READ) == tp.HIDE
    assert c.ask(f"/proc/{os.getpid()}/cwd", tp.STAT) == tp.ALLOW
    rc, err = t.finish()
    assert "evil-links (1)" in err
    assert f"via {b}/to-foo" in err or f"via {b}/l1" in err or f"via {b}/incdir/foo.h" in err


def test_hidden_directory_hides_its_contents(world, traced):
    t = traced()
    c = connect(t)
    # foo-plugins/ is listed only by libfoo-dev; cache.bin is unknown to the
    # registry, yet reached through a hidden directory.
    assert c.ask(f"{world.lib}/foo-plugins/cache.bin", tp.READ) == tp.HIDE
    assert c.ask(f"{world.lib}/foo-plugins/new", tp.CREATE) == tp.DENY
    t.finish()


def test_directory_listing(world, traced):
    t = traced()
    c = connect(t)
    names = [".", "..", "foo.h", "dep.h", "base.h", "stray.h", "foo-link.h", "dep-link.h", "gone"]
    hidden = c.ask_dir(str(world.inc), names)
    assert dict(zip(names, hidden)) == {
        ".": 0, "..": 0, "foo.h": 1, "dep.h": 0, "base.h": 0, "stray.h": 0,
        "foo-link.h": 1, "dep-link.h": 0, "gone": 0}
    # Listing a hidden directory hides all of it.
    assert c.ask_dir(f"{world.lib}/foo-plugins", ["cache.bin"]) == [1]
    rc, err = t.finish()
    assert "directory listings" in err


def test_unknown_policy_hide(world, traced):
    t = traced("--unknown", "hide")
    c = connect(t)
    assert c.ask(f"{world.inc}/stray.h", tp.READ) == tp.HIDE
    assert c.ask_dir(str(world.inc), ["stray.h", "dep.h"]) == [1, 0]
    rc, err = t.finish()
    assert "unknown to the registry" in err


def test_report_only_hides_nothing_but_reports(world, traced):
    t = traced("--report-only")
    c = connect(t)
    assert c.ask(f"{world.inc}/foo.h", tp.READ) == tp.ALLOW
    assert c.ask(f"{world.inc}/new.h", tp.CREATE) == tp.ALLOW
    assert c.ask_dir(str(world.inc), ["foo.h"]) == [0]
    rc, err = t.finish()
    assert rc == 0
    assert "report only" in err
    assert "would be hidden: 1 path, from 1 package" in err
    assert "libfoo-dev" in err


# ---- robustness ----------------------------------------------------------

def test_handshake_refusals(world, traced):
    t = traced()
    c = tp.Client(t.socket)
    c.send(tp.hello(version=99))
    typ, payload = c.recv()
    assert typ == tp.REFUSED
    assert struct.unpack_from("=I", payload)[0] == tp.REFUSE_VERSION
    assert b"version" in payload[4:]
    assert c.closed()
    c = tp.Client(t.socket)
    c.send(tp.hello(magic=0x12345678))
    assert c.closed()
    c = tp.Client(t.socket)
    c.send(tp.query("/usr", tp.STAT))          # a query before the handshake
    assert c.closed()
    assert connect(t).ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
    assert t.finish()[0] == 0


@pytest.mark.parametrize("bad", [
    tp.msg(tp.QUERY, b"\0" * (tp.MSG_MAX + 100)),                       # oversized
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 0, 5) + b"/usr", length=99),  # header lies
    tp.msg(99, b"x"),                                                    # unknown type
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 0, 3) + b"usr"),       # relative path
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 0, 5) + b"/us"),       # pathlen disagrees
    tp.msg(tp.QUERY, struct.pack("=III", 1 << 12, 0, 4) + b"/usr"),      # unknown access bit
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 0, 5000) + b"/" * 5000),  # path too long
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 0, 5) + b"/u\0sr"),    # NUL in path
    tp.msg(tp.QUERY_DIR, struct.pack("=II", 1, 4) + b"/usr" + struct.pack("=H", 3) + b"a/b"),
    tp.msg(tp.QUERY_DIR, struct.pack("=II", 100, 4) + b"/usr" + struct.pack("=H", 1) + b"a"),
    tp.msg(tp.EVENT, struct.pack("=II", 77, 4) + b"/bin"),               # unknown event
    tp.msg(tp.QUERY_DATA, struct.pack("=III", 9, 1, 0) + b"C.UTF-8"),      # unknown data kind
    tp.msg(tp.QUERY_DATA, struct.pack("=III", tp.DATA_LOCALE, 0, 0) + b"fr"),  # no category
    tp.msg(tp.QUERY_DATA, struct.pack("=III", tp.DATA_LOCALE, 1 << 6, 0) + b"fr"),  # LC_ALL's bit
    tp.msg(tp.QUERY_DATA, struct.pack("=III", tp.DATA_LOCALE, 1, 9) + b"fr"),  # alen too long
    tp.msg(tp.QUERY_DATA, struct.pack("=III", tp.DATA_LOCALE, 1, 0) + b"f\0r"),  # NUL
    tp.msg(tp.QUERY_DATA, struct.pack("=III", tp.DATA_LOCALE, 1, 0) + b"x" * 4097),  # too long
    tp.msg(tp.QUERY, struct.pack("=III", tp.READ, 4, 4) + b"/usr"),      # unknown query flag
    tp.msg(tp.HELLO, b"\0" * 12),                                        # second HELLO
    b"\x04\x00",                                                         # short header
], ids=["oversized", "header-lies", "unknown-type", "relative", "pathlen", "access-bit",
        "path-too-long", "nul", "slash-in-name", "dir-count", "unknown-event", "data-kind",
        "data-no-category", "data-lc-all-bit", "data-alen", "data-nul", "data-too-long",
        "qflag-bit", "second-hello",
        "short-header"])
def test_malformed_message_closes_only_that_connection(world, traced, bad):
    t = traced()
    bystander = connect(t)
    c = connect(t)
    c.send(bad)
    assert c.closed()
    assert bystander.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
    assert connect(t).ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
    rc, err = t.finish()
    assert rc == 0
    assert "closing the connection" in err


def test_many_concurrent_clients(world, traced):
    t = traced()
    clients = [connect(t) for _ in range(200)]
    expect = {f"{world.inc}/foo.h": tp.HIDE, f"{world.inc}/dep.h": tp.ALLOW}
    # Interleave: every client sends before any reads.
    for i, c in enumerate(clients):
        c.send(tp.query(list(expect)[i % 2], tp.READ))
    for i, c in enumerate(clients):
        typ, p = c.recv()
        assert typ == tp.VERDICT
        assert tp.VERDICT_MSG.unpack(p)[0] == expect[list(expect)[i % 2]]
    errors = []

    def worker(k):
        try:
            c = connect(t)
            for j in range(100):
                path = list(expect)[(j + k) % 2]
                if c.ask(path, tp.READ) != expect[path]:
                    errors.append(path)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    rc, err = t.finish()
    assert rc == 0
    # The waiting shell is traced too (once the preload library exists), so
    # its own queries add to ours.
    queries = int(err.split("totals: ")[1].split(" queries")[0])
    assert queries >= 1800


def test_client_that_never_reads_does_not_block_others(world, traced):
    t = traced()
    hog = tp.Client(t.socket).handshake()
    hog.s.setblocking(False)
    q = tp.query(f"{world.inc}/dep.h", tp.READ)
    other = connect(t)
    closed = False
    for i in range(200000):
        try:
            hog.s.send(q)
        except BlockingIOError:
            # The server stopped reading us or is busy: the others still get answers.
            assert other.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
            time.sleep(0.001)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
    assert closed, "the server never dropped a client that does not read its answers"
    assert other.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
    rc, err = t.finish()
    assert "does not read its answers" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_foreign_uid_is_refused(world, traced):
    t = traced()
    # Let the other user reach the socket at all; SO_PEERCRED must still refuse.
    os.chmod(os.path.dirname(t.socket), 0o755)
    os.chmod(t.socket, 0o777)
    def ask():
        c = tp.Client(t.socket)
        try:
            c.send(tp.hello())
        except BrokenPipeError:
            pass  # refused at connect: the answer is waiting
        typ, payload = c.recv()
        return struct.pack("=II", typ, struct.unpack_from("=I", payload)[0])
    data = as_other_user(ask)
    assert len(data) == 8, data
    assert struct.unpack("=II", data) == (tp.REFUSED, tp.REFUSE_PEER)
    assert connect(t).ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
    assert t.finish()[0] == 0


# ---- lifecycle and exit status ---------------------------------------------

def server_pid(kiln_pid):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == kiln_pid and "(kiln)" in stat:
            return int(entry)
    raise AssertionError("no server process")


def test_server_death_ends_the_build(world, traced):
    t = traced()
    c = connect(t)
    os.kill(server_pid(t.proc.pid), signal.SIGKILL)
    _, err = t.proc.communicate(timeout=30)   # no release needed: nothing may hang
    assert t.proc.returncode == 125
    assert "the trace server" in err and "died during the build" in err
    assert c.closed()
    assert not os.path.exists(os.path.dirname(t.socket))


def test_termination_signal_is_forwarded_to_the_build(world, traced):
    t = traced()
    connect(t).ask(f"{world.inc}/foo.h", tp.READ)
    t.proc.send_signal(signal.SIGTERM)
    _, err = t.proc.communicate(timeout=30)
    assert t.proc.returncode == 128 + signal.SIGTERM   # the build died of it...
    assert "libfoo-dev (1)" in err                     # ...and the report still came


def test_command_not_found(world, kiln_bin):
    r = run([kiln_bin, "trace", *world.args, "--", "no-such-command-kiln"], cwd=world.build)
    assert r.returncode == 127
    assert "cannot run no-such-command-kiln" in r.stderr


def test_exit_status_is_the_commands(world, traced):
    t = traced()
    assert t.finish(7)[0] == 7


def test_killed_command_is_128_plus_signal(world, kiln_bin):
    r = run([kiln_bin, "trace", *world.args, "--", "sh", "-c", "kill -TERM $$"], cwd=world.build)
    assert r.returncode == 128 + signal.SIGTERM
    assert "kiln trace report" in r.stderr


def test_strict_fails_on_violation(world, traced):
    t = traced("--strict")
    connect(t).ask(f"{world.inc}/foo.h", tp.READ)
    rc, err = t.finish(0)
    assert rc == 1
    assert "--strict" in err
    t = traced("--strict")
    connect(t).ask(f"{world.inc}/dep.h", tp.READ)
    assert t.finish(0)[0] == 0


def test_notes_are_decided_and_logged_without_an_answer(world, traced):
    """NOTE (a read-class question about an absent path the client answered
    itself): decided, logged and reported as a QUERY, nothing sent back;
    one with a write class is malformed."""
    t = traced("--json", "-o", "report.json", "--log", "access.log")
    c = connect(t)
    c.send(tp.note(f"{world.inc}/none.h", tp.STAT))
    c.send(tp.note(f"{world.inc}/foo.h", tp.READ))   # a client never sends that: it exists
    assert c.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW   # the first answer is this one's
    c2 = connect(t)
    c2.send(tp.note(f"{world.inc}/none.h", tp.WRITE))
    assert c2.closed()
    rc, err = t.finish(0)
    assert rc == 0, err
    assert "closing the connection" in err
    rep = json.loads((world.build / "report.json").read_text())
    assert [h["path"] for h in rep["hidden"]] == [f"{world.inc}/foo.h"]
    # (and those of the waiting traced command; a note told again before
    # the first was read is counted, not decided twice)
    assert rep["cache"]["notes"] >= 2
    assert 2 <= rep["totals"]["queries"] - rep["cache"]["round_trips"] <= rep["cache"]["notes"]
    log = (world.build / "access.log").read_text().splitlines()
    assert f"s------ allow {world.inc}/none.h" in log and f"-r----- hide {world.inc}/foo.h" in log


def test_json_report_and_log(world, traced):
    t = traced("--json", "-o", "report.json", "--log", "access.log")
    c = connect(t)
    c.ask(f"{world.inc}/foo.h", tp.READ)
    c.ask(f"{world.inc}/foo.h", tp.STAT)
    c.ask(f"{world.inc}/dep.h", tp.READ)
    c.ask(f"{world.inc}/x.h", tp.CREATE | tp.WRITE)
    c.ask(f"{world.inc}/stray.h", tp.READ)
    c.send(tp.event(tp.SETUID_EXEC, "/usr/bin/passwd"))
    c.ask(f"{world.inc}/dep.h", tp.STAT)   # the event has been read before this answer
    rc, err = t.finish(4)
    assert rc == 4
    rep = json.loads((world.build / "report.json").read_text())
    assert rep["exit_status"] == 4 and rep["mode"] == "enforce"
    assert rep["declared"] == ["libdep-dev"]
    assert rep["closure_packages"] == 2   # libdep-dev and the Essential base
    [h] = rep["hidden"]
    assert h["package"] == "libfoo-dev" and h["path"] == f"{world.inc}/foo.h"
    assert h["pid"] == os.getpid() and any("pytest" in a for a in h["argv"])
    assert sorted(h["access"]) == ["read", "stat"]
    assert [r["path"] for r in rep["refused_writes"]] == [f"{world.inc}/x.h"]
    assert [u["path"] for u in rep["unknown"]] == [f"{world.inc}/stray.h"]
    assert rep["exec_events"][0]["kind"] == "setuid"
    assert rep["totals"]["violations"] == 2
    assert rep["totals"]["queries"] >= 6
    assert any(p["pid"] == os.getpid() for p in rep["processes"])
    log = (world.build / "access.log").read_text().splitlines()
    assert f"sr----- hide {world.inc}/foo.h" in log
    assert f"sr----- allow {world.inc}/dep.h" in log
    assert f"--w--c- deny {world.inc}/x.h" in log
    assert "set-uid" in err and "/usr/bin/passwd" in err


def test_totals_count_processes_not_connections(world, traced):
    t = traced("--json", "-o", "report.json")
    first, second = connect(t), connect(t)   # one process, two connections
    first.ask(f"{world.inc}/dep.h", tp.READ)
    second.ask(f"{world.inc}/dep.h", tp.STAT)
    rc, err = t.finish()
    assert rc == 0, err
    rep = json.loads((world.build / "report.json").read_text())
    conns = rep["processes"]
    assert sum(p["pid"] == os.getpid() for p in conns) == 2
    totals = rep["totals"]
    assert totals["connections"] == len(conns)
    assert totals["processes"] == len({p["pid"] for p in conns})
    assert totals["processes"] < totals["connections"]
    assert f"{totals['processes']} processes ({totals['connections']} connections)" in err


def test_deps_from_control(world, kiln_bin, tmp_path):
    control = tmp_path / "control"
    control.write_text("""Source: demo
Build-Depends: debhelper-compat (= 13),
 libdep-dev:any (>= 1) [amd64 arm64] | libfoo-dev,
 libfoo-dev [!amd64 !arm64], libfoo-dev <cross>
Build-Depends-Indep: not-installed-anywhere

Package: demo
Architecture: any
""")
    script = f'test -r "{world.inc}/dep.h"'
    t = TracedWait(kiln_bin, world.build, ["--db", world.db, "--deps-from-control", control,
                                           "--ask", world.sys])
    try:
        c = connect(t)
        assert c.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
        assert c.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
        rc, err = t.finish()
    finally:
        t.kill()
    assert rc == 0
    assert "declared: libdep-dev (closure" in err   # the alternative installed
    assert "build-essential (implied by Debian policy" in err
    assert "debhelper-compat is not installed" in err
    assert "not-installed-anywhere is not installed" in err
    del script


def test_unknown_dependency_is_an_error(world, kiln_bin):
    r = run([kiln_bin, "trace", "--db", world.db, "--deps", "no-such-package", "--", "true"],
            cwd=world.build)
    assert r.returncode == 125
    assert "no-such-package" in r.stderr


def test_missing_registry_is_an_error(world, kiln_bin, tmp_path):
    r = run([kiln_bin, "trace", "--db", tmp_path / "nope.db", "--", "true"], cwd=world.build)
    assert r.returncode == 125
    assert "nope.db" in r.stderr


def test_usage_errors(kiln_bin):
    r = run([kiln_bin, "trace"])
    assert r.returncode == 2 and "no command" in r.stderr
    r = run([kiln_bin, "trace", "--frob", "--", "true"])
    assert r.returncode == 2 and "unknown option '--frob'" in r.stderr
    r = run([kiln_bin, "trace", "--help"])
    assert r.returncode == 0 and "--no-cache" in r.stdout and "--stats" in r.stdout


def test_run_dir_is_private_and_removed(world, traced):
    t = traced()
    rundir = os.path.dirname(t.socket)
    st = os.stat(rundir)
    assert st.st_mode & 0o777 == 0o700
    assert st.st_uid == os.getuid()
    t.finish()
    assert not os.path.exists(rundir)


def test_policy_file_and_command_line_rules(world, traced, tmp_path):
    policy = tmp_path / "kiln.policy"
    policy.write_text(f"# test policy\ndeny {world.inc}\nallow {world.lib}\n")
    # The command line comes after the policy file: --ask wins for inc/.
    t = traced("--policy", policy, "--ask", world.inc, "--read", f"{world.lib}/foo-plugins",
               "--deny", f"{world.build}/secret")
    (world.build / "secret").mkdir()
    c = connect(t)
    assert c.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW          # ask again, a dependency
    assert c.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
    assert c.ask(f"{world.lib}/new.so", tp.CREATE | tp.WRITE) == tp.ALLOW  # allow from the file
    assert c.ask(f"{world.lib}/foo-plugins/cache.bin", tp.READ) == tp.ALLOW  # read beats ask
    assert c.ask(f"{world.lib}/foo-plugins/x", tp.CREATE) == tp.DENY
    assert c.ask(f"{world.build}/secret", tp.STAT) == tp.HIDE           # deny hides
    assert c.ask(f"{world.build}/secretive", tp.CREATE) == tp.ALLOW     # per component
    rc, err = t.finish()
    assert "(deny rules) (1)" in err


def test_bad_policy_file_is_an_error(world, kiln_bin, tmp_path):
    policy = tmp_path / "bad.policy"
    policy.write_text("alow /usr\n")
    r = run([kiln_bin, "trace", *world.args, "--policy", policy, "--", "true"], cwd=world.build)
    assert r.returncode == 125
    assert f"{policy}:1: unknown directive 'alow'" in r.stderr


def test_preload_library_found_in_the_installed_layout(world, build_dir, tmp_path):
    """PREFIX/bin/kiln finds PREFIX/lib/MULTIARCH/kiln/libkiln-trace.so, as
    `make install` and the Debian package lay them out, wherever PREFIX is
    (an unpacked package too); its path goes into LD_PRELOAD without '..'."""
    multiarch = run(["cc", "-print-multiarch"]).stdout.strip() or "x86_64-linux-gnu"
    prefix = tmp_path / "prefix"
    libdir = prefix / "lib" / multiarch / "kiln"
    (prefix / "bin").mkdir(parents=True)
    libdir.mkdir(parents=True)
    shutil.copy(build_dir / "kiln", prefix / "bin" / "kiln")
    shutil.copy(build_dir / "libkiln-trace.so", libdir / "libkiln-trace.so")
    r = run([prefix / "bin" / "kiln", "trace", *world.args, "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
            cwd=world.build)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(":")[0].strip() == os.path.realpath(libdir / "libkiln-trace.so")
    (libdir / "libkiln-trace.so").unlink()
    r = run([prefix / "bin" / "kiln", "trace", *world.args, "--", "true"], cwd=world.build)
    assert r.returncode == 125
    assert "cannot find the preload library" in r.stderr
    assert str(prefix / "bin" / "libkiln-trace.so") in r.stderr

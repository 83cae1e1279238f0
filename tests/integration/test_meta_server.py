"""The meta server (docs/meta-server.md): `kiln meta` forwarded to a server
that keeps parsed binaries warm must behave exactly as it does standalone,
parse each binary once, never serve a stale model, and never leave a client
hanging or a server and socket behind."""
import glob
import os
import shutil
import tempfile
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, as_other_user, run
from meta_util import FIXTURES, cc
from metasrv import (HELLO_OK, REFUSE_BUILD, REFUSE_PEER, REFUSE_VERSION, REFUSED, Server, build_id,
                     VERSION, handshake, stall_pipe)

TOOLS = ["types", "frames", "extrasyms", "syscalls"]
EXT = {"text": "txt", "json": "json", "c": "c"}


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    d = tmp_path_factory.mktemp("metasrv-progs")
    return [cc(d / "statics", [FIXTURES / "statics.c"], ["-g", "-O1"]),
            cc(d / "frames", [FIXTURES / "frames.c"], ["-g", "-O0"])]


@pytest.fixture
def server(kiln_bin, tmp_path):
    started = []

    def start(*args, sub="srv"):
        d = tmp_path / sub
        d.mkdir(exist_ok=True)
        s = Server(kiln_bin, d, *args)
        started.append(s)
        return s
    yield start
    for s in started:
        s.close()


def standalone_env():
    env = dict(os.environ)
    env.pop("KILN_META_SOCKET", None)
    return env


def both(kiln_bin, srv, args, cwd_sa, cwd_sv, umask=0o022):
    """The same command line standalone (in cwd_sa) and forwarded (in cwd_sv)."""
    kw = dict(capture_output=True, timeout=120, preexec_fn=lambda: os.umask(umask))
    a = subprocess.run([str(kiln_bin), "meta", *args], cwd=cwd_sa, env=standalone_env(), **kw)
    b = subprocess.run([str(kiln_bin), "meta", *args], cwd=cwd_sv, env=srv.env, **kw)
    return a, b


# ---- byte-identical results ------------------------------------------------

def test_every_tool_and_format_is_byte_identical(kiln_bin, tmp_path, progs, server):
    srv = server()
    sa, sv = tmp_path / "sa", tmp_path / "sv"
    sa.mkdir()
    sv.mkdir()
    for binary in progs:
        for tool in TOOLS + ["all"]:
            for fmt in EXT:
                # stdout, the binary named by an absolute path
                a, b = both(kiln_bin, srv, [tool, str(binary), "--format", fmt], sa, sv)
                assert a.returncode == b.returncode == 0, b.stderr
                assert a.stdout and a.stdout == b.stdout, (tool, fmt)
                assert a.stderr == b.stderr
        for tool in TOOLS:
            for fmt in EXT:
                # -o relative to the client's cwd, the binary relative too
                rel = os.path.relpath(binary, sa)
                out = f"{binary.name}-{tool}.{EXT[fmt]}"
                a, b = both(kiln_bin, srv, [tool, rel, "--format", fmt, "-o", out], sa, sv, umask=0o027)
                assert a.returncode == b.returncode == 0, b.stderr
                assert a.stdout == b.stdout == b"" and a.stderr == b.stderr
                assert (sa / out).read_bytes() == (sv / out).read_bytes()
                assert (sa / out).stat().st_mode == (sv / out).stat().st_mode == 0o100640
        for fmt in EXT:
            od = f"od-{binary.name}-{fmt}"
            (sa / od).mkdir()
            (sv / od).mkdir()
            a, b = both(kiln_bin, srv, ["all", os.path.relpath(binary, sa), "--format", fmt, "--out-dir", od],
                        sa, sv)
            assert a.returncode == b.returncode == 0, b.stderr
            names = sorted(p.name for p in (sa / od).iterdir())
            assert names == sorted(f"{t}.{EXT[fmt]}" for t in TOOLS)
            assert names == sorted(p.name for p in (sv / od).iterdir())
            for n in names:
                assert (sa / od / n).read_bytes() == (sv / od / n).read_bytes(), n
    assert list(sa.glob("**/*.tmp.*")) == list(sv.glob("**/*.tmp.*")) == []
    st = srv.stats()
    # one parse per binary and per name it was given by (absolute, relative):
    # the name is part of the key, as warnings and --stats print it
    assert st["parses"] == 2 * len(progs) and st["running"] == 0
    assert st["jobs"] == st["hits"] + st["misses"]


def test_errors_read_the_same(kiln_bin, tmp_path, server):
    srv = server()
    (tmp_path / "notelf").write_text("just text\n")
    elf = (FIXTURES.parent / "meta_fixtures" / "statics.c")
    binary = cc(tmp_path / "b", [elf], ["-g"])
    (tmp_path / "truncated").write_bytes(binary.read_bytes()[:3000])
    cases = [["types", "missing-file"], ["types", "notelf"], ["all", "truncated"],
             ["nosuchtool", "b"], ["types"], ["types", "b", "--format", "yaml"],
             ["types", "b", "-o", "nodir/out.txt"], ["--help"]]
    for args in cases:
        a, b = both(kiln_bin, srv, args, tmp_path, tmp_path)
        assert a.returncode == b.returncode, args
        assert a.stdout == b.stdout and a.stderr == b.stderr, (args, a.stderr, b.stderr)
    assert list(tmp_path.glob("*.tmp.*")) == []


def test_warnings_of_a_tool_run_stay_with_that_run(kiln_bin, tmp_path, server):
    """frames warns about corrupt location lists as it meets them: in the
    server those warnings belong to the job, not to the cached model, so a
    later job on it (types, or frames again) warns as a standalone run would."""
    from test_meta_robustness import sections
    binary = cc(tmp_path / "src", [FIXTURES / "frames.c"], ["-O2", "-gdwarf-4"])
    data = bytearray(binary.read_bytes())
    off, size = sections(data)[".debug_loc"]
    for i in range(off + 8, off + size, 23):
        data[i] = 0xff
    (tmp_path / "corrupt").write_bytes(bytes(data))
    srv = server()
    seen = set()
    for args in (["frames", "corrupt"], ["types", "corrupt"], ["frames", "corrupt"],
                 ["frames", "corrupt", "--format", "c"], ["all", "corrupt"], ["extrasyms", "corrupt"]):
        a, b = both(kiln_bin, srv, args, tmp_path, tmp_path)
        assert a.returncode == b.returncode == 0, b.stderr
        assert a.stdout == b.stdout and a.stderr == b.stderr, (args, a.stderr, b.stderr)
        seen.add(a.stderr)
    assert any(b"corrupt location list" in e for e in seen) and b"" in seen  # frames warns, types does not
    assert srv.stats()["parses"] == 1


def test_make_j4_over_the_example_makefile(kiln_bin, tmp_path, progs, server):
    srv = server()
    makefile = ROOT / "examples" / "Makefile.meta"
    outs = {}
    for mode in ("standalone", "server"):
        d = tmp_path / mode
        d.mkdir()
        names = []
        for i, p in enumerate(progs * 2):  # four binaries, each a file of its own
            name = f"p{i}"
            (d / name).write_bytes(p.read_bytes())
            names.append(f"{name}-meta.so")
        env = srv.env if mode == "server" else standalone_env()
        r = run(["make", "-j4", "-f", makefile, f"KILN={kiln_bin}", *names], cwd=d, env=env)
        assert r.returncode == 0, r.stderr
        outs[mode] = {f.name: f.read_bytes() for f in d.glob("*.c")}
    assert len(outs["server"]) == 16 and outs["server"] == outs["standalone"]
    st = srv.stats()
    assert st["parses"] == 4 and st["misses"] == 4 and st["hits"] == 12, st


def test_four_tools_share_one_parse(tmp_path, progs, server):
    srv = server()
    for t in TOOLS:
        assert srv.meta(t, progs[0], "-o", tmp_path / f"{t}.txt").returncode == 0
    st = srv.stats()
    assert (st["jobs"], st["parses"], st["hits"], st["models"]) == (4, 1, 3, 1)


# ---- never stale -------------------------------------------------------------

def two_versions(tmp_path):
    """Two binaries of the same size that differ in one member name."""
    out = []
    for name in ("alpha", "alphb"):
        src = tmp_path / f"{name}.c"
        src.write_text(f"struct rw {{ int {name}; long pad; }} v;\nint main(void) {{ return v.{name}; }}\n")
        out.append(cc(tmp_path / name, [src], ["-g", "-O0"]).read_bytes())
    assert len(out[0]) == len(out[1]) and out[0] != out[1]
    return out


def types_of(srv, path):
    r = srv.meta("types", path, "--format", "json")
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def test_a_binary_rewritten_between_jobs_is_parsed_again(tmp_path, server):
    srv = server()
    v1, v2 = two_versions(tmp_path)
    prog = tmp_path / "prog"
    prog.write_bytes(v1)
    ino = prog.stat().st_ino
    assert '"alpha"' in types_of(srv, prog)
    assert srv.stats()["parses"] == 1
    assert '"alpha"' in types_of(srv, prog)
    assert srv.stats()["parses"] == 1

    # same path, same inode, same size, new mtime
    with open(prog, "r+b") as f:
        f.write(v2)
    t2 = prog.stat().st_mtime_ns + 1_000_000_000
    os.utime(prog, ns=(t2, t2))
    assert prog.stat().st_ino == ino
    assert '"alphb"' in types_of(srv, prog)
    assert srv.stats()["parses"] == 2

    # same inode, size and mtime: only the build id tells
    with open(prog, "r+b") as f:
        f.write(v1)
    os.utime(prog, ns=(t2, t2))
    assert build_id(prog) != build_id(tmp_path / "alphb")
    assert '"alpha"' in types_of(srv, prog)
    assert srv.stats()["parses"] == 3

    # same mtime, new content, by rename
    new = tmp_path / "prog.new"
    new.write_bytes(v2)
    os.utime(new, ns=(t2, t2))
    os.rename(new, prog)
    assert '"alphb"' in types_of(srv, prog)
    st = srv.stats()
    assert st["parses"] == 4 and st["stale"] == 3 and st["models"] == 1, st


# ---- cancellation and failures -------------------------------------------------

def wait_pipe_filled(r, timeout=20):
    """Waits until the job has written into the stalled pipe: mid-output."""
    import fcntl
    import termios
    end = time.monotonic() + timeout
    while True:
        n = struct.unpack("i", fcntl.ioctl(r, termios.FIONREAD, b"\0\0\0\0"))[0]
        if n > 0:
            return
        assert time.monotonic() < end, "the job never wrote"
        time.sleep(0.02)


def stalled_client(srv, binary):
    r, w = stall_pipe()
    p = subprocess.Popen([srv.kiln, "meta", "all", str(binary)], stdout=w, stderr=subprocess.PIPE,
                         env=srv.env)
    os.close(w)
    wait_pipe_filled(r)
    assert srv.stats()["running"] == 1
    return p, r


def test_client_killed_mid_job_frees_the_job(progs, server):
    srv = server()
    p, r = stalled_client(srv, progs[0])
    p.kill()
    p.wait(timeout=10)
    p.stderr.close()
    st = srv.wait_stats(lambda s: s["running"] == 0)  # the pipe is still open: the cancel ended it
    assert st["cancelled"] == 1
    os.close(r)
    assert srv.meta("types", progs[0]).returncode == 0


def test_sigint_cancels_the_job_and_the_client_dies_of_it(progs, server):
    srv = server()
    for sig in (signal.SIGINT, signal.SIGTERM):
        p, r = stalled_client(srv, progs[0])
        p.send_signal(sig)
        assert p.wait(timeout=10) == -sig
        p.stderr.close()
        os.close(r)
    st = srv.wait_stats(lambda s: s["running"] == 0)
    assert st["cancelled"] == 2


def test_server_killed_mid_job_fails_the_client(progs, server):
    srv = server()
    p, r = stalled_client(srv, progs[0])
    srv.proc.kill()
    assert p.wait(timeout=10) == 125
    err = p.stderr.read().decode()
    p.stderr.close()
    os.close(r)
    assert "ended during the job" in err and srv.socket in err


def test_no_server_runs_standalone_with_one_warning(kiln_bin, tmp_path, progs):
    env = dict(standalone_env(), KILN_META_SOCKET=str(tmp_path / "nothing.sock"))
    a = run([kiln_bin, "meta", "types", progs[0]], env=standalone_env())
    b = run([kiln_bin, "meta", "types", progs[0]], env=env)
    assert b.returncode == 0 and a.stdout == b.stdout
    lines = b.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln meta: warning: no meta server at")
    assert "running standalone" in lines[0]


def fake_server(path, answer):
    """A one-connection server: reads HELLO (and whatever follows), then
    ANSWER(conn)."""
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ls.bind(str(path))
    ls.listen(1)

    def serve():
        c, _ = ls.accept()
        c.recv(65536)
        answer(c)
        time.sleep(0.2)
        c.close()
        ls.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_refused_or_failing_server_runs_standalone(kiln_bin, tmp_path, progs):
    expected = run([kiln_bin, "meta", "types", progs[0]], env=standalone_env()).stdout
    refused = lambda c: c.send(struct.pack("=HHII", REFUSED, 0, 4 + 6, REFUSE_BUILD) + b"other!")
    started_nothing = lambda c: c.send(struct.pack("=HHIIHH", HELLO_OK, 0, 8, 0x4E4C494B, VERSION, 0))
    for i, (answer, says) in enumerate([(refused, "refused this client: other!"),
                                        (started_nothing, "closed the connection before starting")]):
        sock = tmp_path / f"fake{i}.sock"
        t = fake_server(sock, answer)
        r = run([kiln_bin, "meta", "types", progs[0]], env=dict(standalone_env(), KILN_META_SOCKET=str(sock)))
        t.join(10)
        assert r.returncode == 0 and r.stdout == expected
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and says in lines[0] and lines[0].endswith("running standalone"), lines


def test_server_refuses_other_builds_and_versions(kiln_bin, server):
    srv = server()
    ident = build_id(kiln_bin)
    assert handshake(srv.socket, ident) == (HELLO_OK, None)
    assert handshake(srv.socket, bytes(len(ident))) == (REFUSED, REFUSE_BUILD)
    assert handshake(srv.socket, ident[:-1]) == (REFUSED, REFUSE_BUILD)
    assert handshake(srv.socket, ident, version=VERSION + 1) == (REFUSED, REFUSE_VERSION)
    assert handshake(srv.socket, ident, version=VERSION - 1) == (REFUSED, REFUSE_VERSION)
    assert srv.stats()["jobs"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_peer_of_another_uid_is_refused(kiln_bin, tmp_path):
    # Let the other user reach the socket at all (pytest's own directories
    # are private); SO_PEERCRED must still refuse.
    d = Path(tempfile.mkdtemp(prefix="kiln-metasrv-uid-"))
    srv = Server(kiln_bin, d)
    os.chmod(d, 0o755)
    os.chmod(srv.socket, 0o777)
    try:
        check_foreign_uid_refused(kiln_bin, srv)
    finally:
        srv.close()
        shutil.rmtree(d)


def check_foreign_uid_refused(kiln_bin, srv):
    ident = build_id(kiln_bin)
    data = as_other_user(lambda: struct.pack("=II", *handshake(srv.socket, ident)))
    assert struct.unpack("=II", data) == (REFUSED, REFUSE_PEER), data
    assert handshake(srv.socket, ident) == (HELLO_OK, None)


# ---- memory bound --------------------------------------------------------------

def test_memory_bound_holds_under_a_stream_of_binaries(tmp_path, progs, server):
    one = server("--max-memory", "1G", sub="probe")
    assert one.meta("types", progs[0]).returncode == 0
    size = one.stats()["bytes"]
    bound = size * 5 // 2  # room for two models
    srv = server("--max-memory", str(bound))
    paths = []
    for i in range(8):
        p = tmp_path / f"copy{i}"
        p.write_bytes(progs[0].read_bytes())
        paths.append(p)
        assert srv.meta("types", p).returncode == 0
        st = srv.stats()
        assert st["bytes"] <= bound and st["models"] <= 2, st
        assert st["peak_bytes"] <= bound + size
    st = srv.stats()
    assert (st["parses"], st["evictions"], st["max_bytes"]) == (8, 6, bound)
    assert srv.meta("types", paths[7]).returncode == 0  # still warm
    assert srv.stats()["parses"] == 8
    assert srv.meta("types", paths[0]).returncode == 0  # evicted: parsed again
    assert srv.stats()["parses"] == 9


# ---- lifecycle -----------------------------------------------------------------

def test_run_exports_a_private_socket_and_returns_the_command_status(kiln_bin, tmp_path, progs):
    env = dict(standalone_env(), TMPDIR=str(tmp_path))
    script = ('d=$(dirname "$KILN_META_SOCKET"); test -S "$KILN_META_SOCKET" && stat -c %a "$d" && '
              f'{kiln_bin} meta types {progs[0]} >/dev/null && {kiln_bin} meta stats; exit 7')
    r = run([kiln_bin, "meta", "run", "--max-memory", "64M", "--", "sh", "-c", script], env=env)
    assert r.returncode == 7, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "700"
    stats = dict(l.split() for l in lines[1:])
    assert stats["jobs"] == "1" and stats["max_bytes"] == str(64 << 20)
    assert r.stderr == ""
    assert list(tmp_path.glob("kiln-meta.*")) == []
    assert run([kiln_bin, "meta", "run", "--", "sh", "-c", "kill -TERM $$"], env=env).returncode == 128 + 15
    assert run([kiln_bin, "meta", "run", "--", tmp_path / "nonexistent"], env=env).returncode == 127


def children(pid):
    out = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        out += [int(x) for x in Path(task).read_text().split()]
    return out


def gone(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_killed_run_leaves_no_server_and_no_socket(kiln_bin, tmp_path):
    env = dict(standalone_env(), TMPDIR=str(tmp_path))
    p = subprocess.Popen([str(kiln_bin), "meta", "run", "--", "sleep", "60"], env=env)
    end = time.monotonic() + 20
    kiln_exe = str(Path(kiln_bin).resolve())
    while True:  # the server listening, the command exec'd
        kids = children(p.pid)
        server = [k for k in kids if os.readlink(f"/proc/{k}/exe") == kiln_exe]
        sleeper = [k for k in kids if k not in server]
        if glob.glob(str(tmp_path / "kiln-meta.*" / "socket")) and len(server) == len(sleeper) == 1:
            break
        assert time.monotonic() < end
        time.sleep(0.02)
    p.kill()
    p.wait(timeout=10)
    end = time.monotonic() + 20
    while not gone(server[0]):
        assert time.monotonic() < end, "the server outlived a SIGKILLed kiln meta run"
        time.sleep(0.02)
    assert list(tmp_path.glob("kiln-meta.*")) == []
    for k in sleeper:
        os.kill(k, signal.SIGKILL)


def test_stale_socket_is_replaced_and_a_live_one_is_not(kiln_bin, tmp_path, progs, server):
    srv = server()
    srv.proc.kill()
    srv.proc.wait(timeout=10)
    assert os.path.exists(srv.socket)  # left behind by the SIGKILL
    again = server()
    assert again.socket == srv.socket
    assert again.meta("types", progs[0]).returncode == 0
    r = run([kiln_bin, "meta", "serve", "--foreground", "--socket", again.socket])
    assert r.returncode == 125 and "already listening" in r.stderr
    assert again.meta("types", progs[0]).returncode == 0


def test_stop_and_idle_timeout_end_the_server(kiln_bin, tmp_path, progs, server):
    srv = server()
    assert srv.meta("types", progs[0]).returncode == 0
    r = run([kiln_bin, "meta", "stop"], env=srv.env)
    assert r.returncode == 0, r.stderr
    assert srv.proc.wait(timeout=20) == 0
    assert not os.path.exists(srv.socket)
    r = run([kiln_bin, "meta", "stats"], env=srv.env)
    assert r.returncode == 1 and "no meta server at" in r.stderr

    idle = server("--idle-timeout", "1", sub="idle")
    t0 = time.monotonic()
    assert idle.proc.wait(timeout=20) == 0
    assert time.monotonic() - t0 >= 0.9
    assert not os.path.exists(idle.socket)


def test_serve_daemon_prints_its_socket(kiln_bin, tmp_path, progs):
    sock = tmp_path / "d.sock"
    r = run([kiln_bin, "meta", "serve", "--socket", sock, "--idle-timeout", "30"], env=standalone_env())
    assert r.returncode == 0 and r.stdout == f"KILN_META_SOCKET={sock}; export KILN_META_SOCKET\n"
    env = dict(standalone_env(), KILN_META_SOCKET=str(sock))
    assert run([kiln_bin, "meta", "types", progs[0]], env=env).stderr == ""
    assert run([kiln_bin, "meta", "stop"], env=env).returncode == 0
    assert not sock.exists()


def test_a_stuck_server_never_makes_the_client_deaf_to_sigint(progs, server):
    srv = server()
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        p = subprocess.Popen([srv.kiln, "meta", "types", str(progs[0])], env=srv.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        assert p.poll() is None  # waiting for the handshake
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == -signal.SIGINT
        p.stderr.close()
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    assert srv.meta("types", progs[0]).returncode == 0


def test_fork_per_job_mode_gives_the_same_results(kiln_bin, tmp_path, progs, server):
    """--job-mode fork is kept to measure the choice (docs/meta-server.md):
    it must still be right."""
    srv = server("--job-mode", "fork")
    for fmt in EXT:
        a, b = both(kiln_bin, srv, ["all", str(progs[0]), "--format", fmt], tmp_path, tmp_path)
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and a.stderr == b.stderr
    a, b = both(kiln_bin, srv, ["types", "missing"], tmp_path, tmp_path)
    assert a.returncode == b.returncode == 1 and a.stderr == b.stderr
    st = srv.stats()
    assert st["parses"] == 1 and st["jobs"] == 4 and st["cancelled"] == 0, st


def test_outputs_naming_the_clients_own_descriptors_stay_in_the_client(kiln_bin, tmp_path, progs, server):
    """-o /dev/stdout in the server would be the server's stdout: such a
    command runs in the client, silently, with the same result."""
    srv = server()
    (tmp_path / "link").symlink_to("/dev/stdout")
    for out in ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "link"]:
        a, b = both(kiln_bin, srv, ["types", str(progs[0]), "-o", out], tmp_path, tmp_path)
        assert a.returncode == b.returncode == 0 and a.stderr == b.stderr == b""
        assert a.stdout and a.stdout == b.stdout, out
    assert srv.stats()["jobs"] == 1  # only "-" went to the server

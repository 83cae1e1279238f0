"""Output files by the rules of docs/output-files.md, through the commands a
user runs: `-` is stdout; a symlink is followed and kept; a FIFO or a device
is written through, never replaced; a regular file is replaced atomically,
keeping its mode; a bad path is refused before anything runs.

These tests never name the machine's own /dev/null or /dev/stdout as an
output (a kiln with the bug they test for would replace them): they use a
private device node, a stand-in symlink to /proc/self/fd/1, or a /dev of
their own in a private mount namespace."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import threading

import pytest

from conftest import run


@pytest.fixture
def world(tmp_path, kiln_bin):
    """A registry of one Essential package and a build directory."""
    (tmp_path / "sys").mkdir()
    manifest = tmp_path / "manifest"
    manifest.write_text(f"Package: base\nVersion: 1\nEssential: yes\nFiles:\n {tmp_path}/sys/\n")
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    build = tmp_path / "build"
    build.mkdir()

    def trace(*args, **kw):
        return run([kiln_bin, "trace", "--db", db, *args], cwd=build, **kw)
    trace.build = build
    trace.db = db
    return trace


@pytest.fixture
def null_device(tmp_path):
    """A private character device node like /dev/null: a test of these rules
    never writes to the machine's own /dev (a broken build would replace it)."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return node


@pytest.fixture
def dev_stdout(tmp_path):
    """A stand-in for /dev/stdout: a symlink to /proc/self/fd/1."""
    link = tmp_path / "dev-stdout"
    link.symlink_to("/proc/self/fd/1")
    return link


def leftovers(d):
    """Temporary files kiln may have left in directory d."""
    return [n for n in os.listdir(d) if ".kiln-" in n or ".tmp" in n]


def test_json_dash_is_stdout_to_a_pipe(world):
    r = world("--json", "-o", "-", "--", "true")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["exit_status"] == 0
    assert not (world.build / "-").exists()
    assert "kiln trace report" in r.stderr   # the text report stays on stderr


def test_json_alone_goes_to_stdout_and_text_to_a_file(world):
    r = world("--json", "--", "true")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["exit_status"] == 0
    r = world("-o", "report.txt", "--", "true")
    assert r.returncode == 0, r.stderr
    assert "kiln trace report" in (world.build / "report.txt").read_text()
    assert "kiln trace report" not in r.stderr


def test_spellings_before_the_options_were_unified(world):
    """--json FILE and --report FILE still work, with a deprecation line."""
    r = world("--json", "old.json", "--report", "old.txt", "--", "true")
    assert r.returncode == 0, r.stderr
    assert json.loads((world.build / "old.json").read_text())["exit_status"] == 0
    assert "kiln trace report" in (world.build / "old.txt").read_text()
    assert "'--json FILE' is deprecated; use '--json -o FILE'" in r.stderr
    assert "--report FILE is deprecated; use -o FILE" in r.stderr


def test_symlink_is_followed_and_kept(world, tmp_path):
    target = tmp_path / "elsewhere" / "report.json"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    (world.build / "link.json").symlink_to(target)
    r = world("--json", "-o", "link.json", "--log", "link.log", "--", "true")
    assert r.returncode == 0, r.stderr
    assert os.path.islink(world.build / "link.json")
    assert os.readlink(world.build / "link.json") == str(target)
    assert json.loads(target.read_text())["mode"] == "enforce"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640   # mode kept
    assert leftovers(target.parent) == [] and leftovers(world.build) == []


def test_dangling_symlink_creates_its_target(world, tmp_path):
    target = tmp_path / "new.log"
    (world.build / "out.log").symlink_to(target)
    r = world("--log", "out.log", "--", "true")
    assert r.returncode == 0, r.stderr
    assert os.path.islink(world.build / "out.log") and target.is_file()


def test_fifo_is_written_through(world):
    fifo = world.build / "report.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = world("--json", "-o", fifo, "--", "true", timeout=60)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])["exit_status"] == 0


def test_character_device_is_written_through(world, null_device):
    before = os.stat(null_device)
    r = world("-o", null_device, "--log", null_device, "--", "true")
    assert r.returncode == 0, r.stderr
    assert "kiln trace report" not in r.stderr   # it went to -o
    r = world("--json", "-o", null_device, "--", "true")
    assert r.returncode == 0, r.stderr
    after = os.lstat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino


def test_stand_in_symlink_to_dev_stdout(world, dev_stdout):
    """stdout -> dev-stdout -> /proc/self/fd/1: the shape of a link to the
    machine's /dev/stdout, without touching it."""
    (world.build / "stdout").symlink_to(dev_stdout)
    r = world("--json", "-o", "stdout", "--", "true")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mode"] == "enforce"
    assert os.readlink(world.build / "stdout") == str(dev_stdout)
    assert os.readlink(dev_stdout) == "/proc/self/fd/1"


def test_dev_stdout_redirected_to_a_file_is_written_through(world, kiln_bin, tmp_path, dev_stdout):
    """`--json -o /dev/stdout > FILE`: the shell's file gets the report, and
    the file is the same file (written through, not replaced)."""
    out = tmp_path / "captured.json"
    with open(out, "w") as f:
        ino = os.fstat(f.fileno()).st_ino
        p = subprocess.run([str(kiln_bin), "trace", "--db", str(world.db), "--json", "-o", str(dev_stdout),
                            "--", "true"], cwd=world.build, stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["exit_status"] == 0
    assert os.stat(out).st_ino == ino and os.path.islink(dev_stdout)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_dev_stdout_in_a_private_mount_namespace(world, kiln_bin, tmp_path):
    """As root, with a /dev of its own: /dev/stdout stays a symlink."""
    script = f"""
set -e
mount -t tmpfs kiln-test /dev
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/1 /dev/stdout
mknod -m 666 /dev/null c 1 3
"{kiln_bin}" trace --db "{world.db}" --json -o /dev/stdout -- true > "{tmp_path}/out.json"
if [ -L /dev/stdout ]; then echo STILL-A-LINK; else ls -l /dev/stdout; fi
"""
    r = run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], cwd=world.build)
    if "Operation not permitted" in r.stderr:
        pytest.skip("no mount namespace here: " + r.stderr)
    assert r.returncode == 0, r.stderr
    assert "STILL-A-LINK" in r.stdout
    assert json.loads((tmp_path / "out.json").read_text())["mode"] == "enforce"


def test_regular_file_replaced_keeping_its_mode(world):
    f = world.build / "report.json"
    f.write_text("x" * 100000)
    f.chmod(0o604)
    ino = f.stat().st_ino
    r = world("--json", "-o", f, "--", "true")
    assert r.returncode == 0, r.stderr
    assert json.loads(f.read_text())["exit_status"] == 0
    assert stat.S_IMODE(f.stat().st_mode) == 0o604
    assert f.stat().st_ino != ino          # a new file renamed over: atomic
    assert leftovers(world.build) == []


@pytest.mark.parametrize("opts", [["-o"], ["--json", "-o"], ["--log"]])
@pytest.mark.parametrize("bad,why", [
    ("nodir/out", "directory nodir does not exist"),
    (".", "a file name is needed"),
    ("sub", "it is a directory"),
    ("file/out", "not a directory"),
])
def test_bad_output_refused_before_anything_runs(world, opts, bad, why):
    (world.build / "sub").mkdir()
    (world.build / "file").write_text("")
    r = world(*opts, bad, "--", "touch", "RAN")
    assert r.returncode == 2
    assert why in r.stderr and bad in r.stderr and f"{opts[-1]}: " in r.stderr
    assert "nothing was run" in r.stderr
    assert not (world.build / "RAN").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_directory_refused(world, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    r = world("--json", "-o", ro / "x.json", "--", "touch", "RAN")
    assert r.returncode == 2 and str(ro) in r.stderr
    assert not (world.build / "RAN").exists()


def test_read_only_file_system_refused(world, tmp_path):
    """/proc/sys is read-only to everyone, root included."""
    r = world("--json", "-o", "/proc/sys/kiln-test.json", "--", "touch", "RAN")
    assert r.returncode == 2, r.stderr
    assert "/proc/sys/kiln-test.json" in r.stderr
    assert not (world.build / "RAN").exists()


# ---- kiln meta -o / --out-dir --------------------------------------------

@pytest.fixture
def dwarf_binary(tmp_path):
    src = tmp_path / "prog.c"
    src.write_text("static int counter;\nint main(void) { return counter; }\n")
    r = run(["gcc", "-g", "-o", tmp_path / "prog", src])
    assert r.returncode == 0, r.stderr
    return tmp_path / "prog"


def test_meta_output_rules(kiln_bin, tmp_path, dwarf_binary):
    binary = dwarf_binary
    r = run([kiln_bin, "meta", "extrasyms", binary, "-o", "-"])
    assert r.returncode == 0, r.stderr
    fifo = tmp_path / "meta.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = run([kiln_bin, "meta", "extrasyms", binary, "-o", fifo])
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got
    real = tmp_path / "real.txt"
    real.write_text("")
    real.chmod(0o600)
    (tmp_path / "link.txt").symlink_to(real)
    r = run([kiln_bin, "meta", "extrasyms", binary, "-o", tmp_path / "link.txt"])
    assert r.returncode == 0, r.stderr
    assert os.path.islink(tmp_path / "link.txt")
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_meta_bad_output_refused_before_reading(kiln_bin, tmp_path):
    # A binary that does not exist: had the tool run, it would say so.
    for args in (["-o", tmp_path / "nodir" / "x.txt"], ["--out-dir", tmp_path / "nodir"]):
        r = run([kiln_bin, "meta", "extrasyms", tmp_path / "no-such-binary", *args])
        assert r.returncode == 2, r.stderr
        assert "nodir" in r.stderr and "does not exist" in r.stderr
        assert "no-such-binary" not in r.stderr


# ---- registry --db and shm create ------------------------------------------

def test_registry_db_symlink_is_followed(kiln_bin, tmp_path, null_device):
    manifest = tmp_path / "manifest"
    manifest.write_text("Package: p\nVersion: 1\nFiles:\n /x\n")
    real = tmp_path / "store" / "registry.db"
    real.parent.mkdir()
    (tmp_path / "reg.db").symlink_to(real)
    for _ in range(2):   # create, then replace
        r = run([kiln_bin, "registry", "--db", tmp_path / "reg.db", "import", "manifest", manifest])
        assert r.returncode == 0, r.stderr
        assert os.path.islink(tmp_path / "reg.db") and real.is_file()
        real.chmod(0o640)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    r = run([kiln_bin, "registry", "--db", tmp_path / "reg.db", "owner", "/x"])
    assert r.returncode == 0 and "p" in r.stdout
    r = run([kiln_bin, "registry", "--db", null_device, "import", "manifest", manifest])
    assert r.returncode != 0 and "regular file" in r.stderr
    assert stat.S_ISCHR(os.lstat(null_device).st_mode)


def test_shm_create_refuses_dash_and_existing(kiln_bin, tmp_path):
    r = run([kiln_bin, "shm", "create", "-"], cwd=tmp_path)
    assert r.returncode == 1 and not (tmp_path / "-").exists()
    (tmp_path / "taken").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("")
    r = run([kiln_bin, "shm", "create", tmp_path / "taken"])
    assert r.returncode == 1 and "exists" in r.stderr
    assert os.path.islink(tmp_path / "taken")
    r = run([kiln_bin, "shm", "create", tmp_path / "nodir" / "map"])
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_killed_registry_import_leaves_nothing_behind(kiln_bin, tmp_path):
    """The database is built in memory and written to an unnamed file at the
    end: a kill at any point leaves the directory as it was (or, after the
    rename, the complete database)."""
    import signal
    import time
    d = tmp_path / "store"
    d.mkdir()
    for delay in (0.05, 0.3, 1.0):
        p = subprocess.Popen([str(kiln_bin), "registry", "--db", str(d / "r.db"), "import", "dpkg"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert os.listdir(d) in ([], ["r.db"]), os.listdir(d)
        if os.listdir(d):
            with sqlite3.connect(d / "r.db") as c:
                assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            break

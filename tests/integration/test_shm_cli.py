"""End-to-end tests of `kiln shm`: the map file as the CLI sees it, refusal of
broken files, corruption found by validate, and FULL (never SIGBUS) when the
disk refuses to grow the file."""
import os
import resource
import signal
import struct
import subprocess

import pytest

from conftest import run

HEADER = 4096


def shm(kiln_bin, *args, **kw):
    return run([kiln_bin, "shm", *args], **kw)


@pytest.fixture
def mapfile(tmp_path, kiln_bin):
    path = tmp_path / "map"
    r = shm(kiln_bin, "create", path, "--initial", "64K", "--max", "64M")
    assert r.returncode == 0, r.stderr
    return path


def test_put_get_first_writer_wins(kiln_bin, mapfile):
    r = shm(kiln_bin, "put", mapfile, "/usr/include/stdio.h", "7")
    assert (r.returncode, r.stdout) == (0, "inserted 7\n")
    r = shm(kiln_bin, "put", mapfile, "/usr/include/stdio.h", "8")
    assert (r.returncode, r.stdout) == (0, "exists 7\n")
    r = shm(kiln_bin, "get", mapfile, "/usr/include/stdio.h")
    assert (r.returncode, r.stdout) == (0, "7\n")
    r = shm(kiln_bin, "get", mapfile, "/usr/include/stdlib.h")
    assert r.returncode == 1
    assert "no entry for '/usr/include/stdlib.h'" in r.stderr


def test_stats_validate_dump(kiln_bin, mapfile):
    for i in range(50):
        assert shm(kiln_bin, "put", mapfile, f"/k/{i}\x01", str(i)).returncode == 0
    st = dict(line.split(None, 1) for line in shm(kiln_bin, "stats", mapfile).stdout.splitlines())
    assert st["entries"] == "50"
    assert st["version"] == "2"
    assert int(st["bytes_used"]) <= int(st["bytes_committed"]) <= int(st["max_size"])
    r = shm(kiln_bin, "validate", mapfile)
    assert (r.returncode, r.stdout) == (0, f"{mapfile}: ok, 50 entries\n")
    lines = shm(kiln_bin, "dump", mapfile).stdout.splitlines()
    assert len(lines) == 50
    assert sorted(lines) == sorted(f"0x{i:016x}\t/k/{i}\\x01" for i in range(50))


def test_create_refuses_existing_and_bad_sizes(kiln_bin, mapfile, tmp_path):
    r = shm(kiln_bin, "create", mapfile)
    assert r.returncode == 1
    assert f"{mapfile}: already exists" in r.stderr
    r = shm(kiln_bin, "create", tmp_path / "x", "--initial", "2M", "--max", "1M")
    assert r.returncode == 1
    assert "exceeds the maximum size" in r.stderr
    assert not (tmp_path / "x").exists()
    r = shm(kiln_bin, "create", tmp_path / "y", "--max", "lots")
    assert r.returncode == 2
    assert "bad number 'lots'" in r.stderr


@pytest.mark.parametrize("offset,data,message", [
    (0, b"GARBAGE!", "bad magic: not a kiln shm map"),
    (8, struct.pack("<I", 1), "unsupported shm map version 1"),  # the format before buckets
    (16, struct.pack("<Q", 12345), "inconsistent header: maximum size 12345"),
    (128, struct.pack("<Q", 1 << 45), "inconsistent header: committed 65536 / allocated 35184372088832 outside the file's bounds"),
])
def test_broken_header_is_refused(kiln_bin, mapfile, offset, data, message):
    with open(mapfile, "r+b") as f:
        f.seek(offset)
        f.write(data)
    for cmd in ("stats", "validate", "dump"):
        r = shm(kiln_bin, cmd, mapfile)
        assert r.returncode == 1, cmd
        assert f"kiln shm: {mapfile}: {message}" in r.stderr, r.stderr


def test_not_a_map_is_refused(kiln_bin, tmp_path):
    small = tmp_path / "small"
    small.write_bytes(b"hello")
    r = shm(kiln_bin, "validate", small)
    assert r.returncode == 1
    assert f"{small}: file is 5 bytes, too small to be a kiln shm map" in r.stderr
    r = shm(kiln_bin, "validate", tmp_path / "absent")
    assert r.returncode == 1
    assert "cannot open: No such file or directory" in r.stderr


def test_validate_finds_a_corrupt_slot(kiln_bin, mapfile):
    for i in range(20):
        shm(kiln_bin, "put", mapfile, f"/corrupt/{i}", str(i))
    st = dict(line.split(None, 1) for line in shm(kiln_bin, "stats", mapfile).stdout.splitlines())
    with open(mapfile, "r+b") as f:
        f.seek(HEADER)
        root = f.read(8 << int(st["root_bits"]))
        slot = next(i for i in range(0, len(root), 8)
                    if struct.unpack_from("<Q", root, i)[0] not in (0,))
        good = struct.unpack_from("<Q", root, slot)[0]
        f.seek(HEADER + slot)
        f.write(struct.pack("<Q", good + 16))
    r = shm(kiln_bin, "validate", mapfile)
    assert r.returncode == 1
    assert f"kiln shm validate: {mapfile}: corrupt: slot points to something that is not a record" in r.stderr
    # Lookups never crash on it either: every key answers or misses.
    for i in range(20):
        assert shm(kiln_bin, "get", mapfile, f"/corrupt/{i}").returncode in (0, 1)


def test_demo_many_processes(kiln_bin):
    r = shm(kiln_bin, "demo", "--procs", "3", "--threads", "2", "--keys", "30000")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "30000 inserted (first writer wins), 150000 already there, 0 full" in r.stdout
    assert "180000 hits, 0 wrong values or lost keys" in r.stdout
    assert "validate  ok: 30000 entries" in r.stdout


def _expect_full_not_sigbus(kiln_bin, path, **kw):
    r = shm(kiln_bin, "demo", "--map", path, "--procs", "2", "--threads", "2",
            "--keys", "300000", **kw)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)  # < 0 would be a signal
    assert "inserts said FULL, lookups kept working" in r.stdout
    assert "0 wrong values or lost keys" in r.stdout
    assert "validate  ok" in r.stdout
    v = shm(kiln_bin, "validate", path)
    assert v.returncode == 0, v.stderr
    return r


def test_file_size_limit_gives_full(kiln_bin, mapfile):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
    _expect_full_not_sigbus(kiln_bin, mapfile, preexec_fn=limit)
    assert os.path.getsize(mapfile) <= 2 << 20


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_full_disk_gives_full(kiln_bin, tiny_tmpfs):
    path = tiny_tmpfs / "map"
    r = shm(kiln_bin, "create", path, "--initial", "64K", "--max", "64M")
    assert r.returncode == 0, r.stderr
    _expect_full_not_sigbus(kiln_bin, path)


def test_demo_walkthrough(kiln_bin, tmp_path):
    """What examples/shm-demo.sh showed in `make demo` before the demo was
    given to the user's job: processes x threads racing on a map that grows
    from 64 KiB, then the same map looked at with every kiln shm command."""
    r = shm(kiln_bin, "demo", "--procs", "4", "--threads", "4", "--keys", "50000")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "50000 inserted (first writer wins), 750000 already there, 0 full" in r.stdout
    assert "800000 hits, 0 wrong values or lost keys" in r.stdout
    assert "file      64 KiB -> " in r.stdout and "validate  ok: 50000 entries" in r.stdout
    path = tmp_path / "cache"
    assert shm(kiln_bin, "create", path, "--initial", "64K", "--max", "64M").returncode == 0
    assert shm(kiln_bin, "put", path, "/usr/include/stdio.h", "1").stdout == "inserted 1\n"
    assert shm(kiln_bin, "put", path, "/usr/include/stdio.h", "2").stdout == "exists 1\n"
    assert shm(kiln_bin, "put", path, "/usr/lib/libfoo.so.1", "2").stdout == "inserted 2\n"
    r = shm(kiln_bin, "demo", "--map", path, "--procs", "2", "--threads", "2", "--keys", "20000")
    assert r.returncode == 0 and "validate  ok: 20002 entries" in r.stdout, r.stdout
    assert shm(kiln_bin, "get", path, "/usr/include/stdio.h").stdout == "1\n"
    stats = dict(line.split(None, 1) for line in shm(kiln_bin, "stats", path).stdout.splitlines())
    assert stats["entries"].strip() == "20002"
    assert shm(kiln_bin, "validate", path).stdout == f"{path}: ok, 20002 entries\n"
    dump = shm(kiln_bin, "dump", path).stdout.splitlines()
    assert "0x0000000000000001\t/usr/include/stdio.h" in dump and len(dump) == 20002

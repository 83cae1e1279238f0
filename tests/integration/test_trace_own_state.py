"""kiln's own state is out of the build's reach (issue 9, class 7): the run
directory (socket, cache) cannot be renamed, replaced, written or listed by
the build, so no process can put its own server in kiln's place; and the
registry is held under a read lease, so rewriting its file mid-run waits
until the server has taken a sealed in-memory copy of it (where no lease can
be had, the copy is taken before the build starts), and changes nothing.
As root and as nobody."""
import json
import os
import pwd
import subprocess

from runas import manifest_text, uworld  # noqa: F401 (fixture)

# Each line: a technique, then the same call on a path that does not exist
# in the same place; both outputs are compared.
ATTACKS = r'''
R="$KILN_RUN_DIR"; N=/tmp/kiln-no-such-dir-$$
try() { { "$@" 2>&1; echo "rc=$?"; } | sed "s|$R|X|g; s|$N|X|g"; }
for p in "$R" "$N"; do
  echo "== $p" | sed "s|$R|X|; s|$N|X|"
  try mv "$p/socket" /tmp/stolen-$$
  try mv "$p" /tmp/stolen-dir-$$
  try rm -f "$p/socket"
  try ls "$p"
  try cat "$p/socket"
  try ln -s /tmp/evil "$p/socket2"
  try touch "$p/new"
  try stat -c %F "$p/socket"
done
ls /tmp | grep -c "^$(basename "$R")\$"; true
'''


def test_run_dir_cannot_be_touched_and_answers_as_absent(uworld):
    r = uworld.run("--json", "-o", "r.json", command=["sh", "-c", ATTACKS])
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("== X\n")
    assert len(out) == 3, r.stdout
    hidden, absent = out[1], out[2].rsplit("\n", 2)[0] + "\n"
    # mv of the directory and touch/ln inside it are refused (EACCES) or not
    # found; every read-class answer is exactly an absent path's.
    h_lines, a_lines = hidden.splitlines(), absent.splitlines()
    assert len(h_lines) == len(a_lines) == 15   # rm -f prints nothing
    for i, (h, a) in enumerate(zip(h_lines, a_lines)):
        if "Permission denied" in h:
            assert h_lines[i + 1] == a_lines[i + 1] == "rc=1"
            continue   # creating a name in kiln's directory: refused
        assert h == a, (h, a)
    assert r.stdout.rstrip().endswith("0")     # /tmp listing does not show it
    assert "No such file" in hidden


def test_rogue_server_cannot_take_the_socket(uworld, tmp_path):
    """A process tries to move the socket away and bind its own in its
    place; later processes still get kiln's verdicts."""
    rogue = r'''
import os, socket, sys
run = os.environ["KILN_RUN_DIR"]
for f in (lambda: os.rename(run + "/socket", "/tmp/x-stolen"),
          lambda: os.unlink(run + "/socket"),
          lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind(run + "/socket"),
          lambda: os.rename(run, run + ".old")):
    try:
        f()
        print("ESCAPED")
    except OSError as e:
        print(e.errno)
'''
    script = os.path.join(uworld.build, "rogue.py")
    with open(script, "w") as f:
        f.write(rogue)
    r = uworld.run(command=["sh", "-c", f'python3 {script}; cat {uworld.inc}/foo.h; echo "cat=$?"'])
    assert "ESCAPED" not in r.stdout, r.stdout
    assert "cat=1" in r.stdout and "foo.h" not in r.stdout.replace(f"{uworld.inc}/foo.h", "")
    assert "libfoo-dev (1)" in r.stderr


def other_registry(uworld):
    """A registry in which foo.h is nobody's, and the registry file made
    writable by the build's user."""
    other = os.path.join(uworld.top, "other.db")
    manifest = os.path.join(uworld.top, "other.manifest")
    with open(manifest, "w") as f:
        f.write(f"Package: base\nVersion: 1\nEssential: yes\nFiles:\n {uworld.sys}/\n")
    r = subprocess.run([uworld.kiln, "registry", "--db", other, "import", "manifest", manifest],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    os.chmod(other, 0o644)
    if uworld.runas:   # the user must be able to write it, or there is nothing to prove
        pw = pwd.getpwnam("nobody")
        os.chown(uworld.db, pw.pw_uid, pw.pw_gid)
    os.chmod(os.path.dirname(uworld.db), 0o777)
    return other


def test_registry_rewritten_mid_run_changes_nothing(uworld):
    """The build rewrites the registry file in place (cp over it, and
    through a hard link) with one in which foo.h is nobody's: foo.h must
    stay hidden."""
    other = other_registry(uworld)
    build = f'''
cat {uworld.inc}/foo.h; echo "before=$?"
ln {uworld.db} {uworld.top}/hard-$$ && cat {other} > {uworld.top}/hard-$$; echo "link=$?"
cp {other} {uworld.db}; echo "cp=$?"
cmp -s {other} {uworld.db}; echo "same=$?"
cat {uworld.inc}/foo.h; echo "after=$?"
'''
    r = uworld.run(command=["sh", "-c", build])
    assert "before=1" in r.stdout and "after=1" in r.stdout, (r.stdout, r.stderr)
    assert "cp=0" in r.stdout and "same=0" in r.stdout   # the file really changed
    assert "libfoo-dev (1)" in r.stderr


def test_registry_rewritten_before_any_question_changes_nothing(uworld):
    """The build's first act is to rewrite the registry, so every answer
    the server gives is read after it: from the copy the server took when
    the writer opened the file (the writer waits for it). The registry is
    made large enough (8,000 more files, sorted between the directories
    and foo.h and x) that the server has not read the pages that answer for
    them before the build starts; a handle reading the rewritten file
    fails, and kiln then refuses (EACCES) where hidden files are absent."""
    S = uworld.sys
    filler = [(f"filler{i}", False, [f"{S}/usr/include/e{i:03d}{j:02d}.h" for j in range(40)] +
               [f"{S}/usr/lib/foo/w{i:03d}{j:02d}" for j in range(40)]) for i in range(100)]
    manifest = os.path.join(uworld.top, "big.manifest")
    with open(manifest, "w") as f:
        f.write(manifest_text(uworld.packages + filler))
    r = subprocess.run([uworld.kiln, "registry", "--db", uworld.db, "import", "manifest", manifest],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    os.chmod(uworld.db, 0o644)
    other = other_registry(uworld)
    build = f'''
cp {other} {uworld.db}; echo "cp=$?"
cmp -s {other} {uworld.db}; echo "same=$?"
cat {uworld.lib}/foo/x; echo "x=$?"
cat {uworld.inc}/foo.h; echo "foo=$?"
cat {uworld.inc}/dep.h >/dev/null; echo "dep=$?"
'''
    r = uworld.run("--json", "-o", "r.json", command=["sh", "-c", build])
    assert "cp=0" in r.stdout and "same=0" in r.stdout, (r.stdout, r.stderr)
    assert "x=1" in r.stdout and "foo=1" in r.stdout and "dep=0" in r.stdout, (r.stdout, r.stderr)
    assert f"{uworld.lib}/foo/x: No such file or directory" in r.stderr, r.stderr
    assert f"{uworld.inc}/foo.h: No such file or directory" in r.stderr, r.stderr
    assert "libfoo-dev (2)" in r.stderr, r.stderr
    with open(os.path.join(uworld.build, "r.json")) as f:
        totals = json.load(f)["totals"]
    assert totals["registry_snapshot"] == "lease-then-copy"
    # a plain look at the rewritten file: foo.h is nobody's there
    r = subprocess.run([uworld.kiln, "registry", "--db", uworld.db, "owner", f"{uworld.inc}/foo.h"],
                       capture_output=True, text=True, timeout=60)
    assert "libfoo-dev" not in r.stdout


def test_registry_is_leased_where_it_can_be(uworld):
    """A build that leaves the registry alone costs no copy of it; where
    the lease is the kernel's to refuse (the registry is root's, the build
    nobody's), the copy is taken at the start and the answers are the same."""
    r = uworld.run("--json", "-o", "r.json",
                   command=["sh", "-c", f"cat {uworld.inc}/foo.h; echo foo=$?"])
    assert "foo=1" in r.stdout, (r.stdout, r.stderr)
    with open(os.path.join(uworld.build, "r.json")) as f:
        totals = json.load(f)["totals"]
    assert totals["registry_snapshot"] == ("copy" if uworld.runas else "lease")


def test_wal_registry_answers_with_its_wal_file(uworld):
    """A registry in WAL mode (kiln's imports never write one) whose newest
    change is still in its -wal file: kiln trace answers from a copy that
    holds it (foo.h moved to the declared libdep-dev: visible), where it
    failed before ("cannot open database (Bad file descriptor)")."""
    import sqlite3
    w = sqlite3.connect(uworld.db)   # stays open: the last to close would checkpoint
    try:
        w.execute("PRAGMA journal_mode=WAL")
        w.execute("PRAGMA wal_autocheckpoint=0")
        w.execute("UPDATE files SET pkg=(SELECT id FROM packages WHERE name='libdep-dev') "
                  "WHERE canonical=?", (f"{uworld.inc}/foo.h",))
        w.commit()
        for side in ("-wal", "-shm"):
            os.chmod(uworld.db + side, 0o644)
        assert os.path.getsize(uworld.db + "-wal") > 0
        r = uworld.run("--json", "-o", "r.json",
                       command=["sh", "-c", f"cat {uworld.inc}/foo.h; echo foo=$?; "
                                            f"cat {uworld.lib}/foo/x; echo x=$?"])
        assert r.returncode == 0, r.stderr
        assert "foo.h\nfoo=0" in r.stdout and "x=1" in r.stdout, (r.stdout, r.stderr)
        with open(os.path.join(uworld.build, "r.json")) as f:
            totals = json.load(f)["totals"]
        assert totals["registry_snapshot"] == "copy"
    finally:
        w.close()

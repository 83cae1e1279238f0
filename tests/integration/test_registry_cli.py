"""End-to-end: `kiln registry` with manifests, bad databases and bad usage."""
import json
import os
import sqlite3
import subprocess
import textwrap
import time

import pytest

from conftest import run

MANIFEST_A = """\
# two packages from another package manager
Package: tool
Version: 1.2
Architecture: amd64
Depends: libtool-rt (>= 1), awk
Files:
 /opt/kt/
 /opt/kt/bin/
 /opt/kt/bin/tool
 /opt/kt/bin/t -> tool

Package: libtool-rt
Version: 1.2
Architecture: amd64
Provides: tool-runtime
Files:
 /opt/kt/
 /opt/kt/lib/librt.so
"""

MANIFEST_B = """\
Package: awk-impl
Provides: awk
Essential: yes
Files:
 /opt/kt/bin/awk
"""


def kiln(kiln_bin, db, *args, **kw):
    return run([kiln_bin, "registry", "--db", db, *args], **kw)


def kjson(kiln_bin, db, *args):
    r = kiln(kiln_bin, db, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def manifests(tmp_path):
    a, b = tmp_path / "a.manifest", tmp_path / "b.manifest"
    a.write_text(MANIFEST_A)
    b.write_text(MANIFEST_B)
    return a, b


@pytest.fixture
def db(tmp_path, kiln_bin, manifests):
    path = tmp_path / "reg.db"
    r = kiln(kiln_bin, path, "import", "manifest", *manifests)
    assert r.returncode == 0, r.stderr
    assert "imported 3 packages, 7 files" in r.stdout
    return path


def test_manifest_files_kinds_and_owners(kiln_bin, db):
    files = {f["listed"]: f["kind"] for f in kjson(kiln_bin, db, "files", "tool")}
    assert files == {"/opt/kt": "dir", "/opt/kt/bin": "dir", "/opt/kt/bin/tool": "file",
                     "/opt/kt/bin/t": "symlink"}
    got = {o["path"]: o["owners"] for o in
           kjson(kiln_bin, db, "owner", "/opt/kt", "/opt/kt/lib/librt.so", "/opt/kt/bin/awk")}
    assert got == {"/opt/kt": ["tool", "libtool-rt"], "/opt/kt/lib/librt.so": ["libtool-rt"],
                   "/opt/kt/bin/awk": ["awk-impl"]}


def test_manifest_closure_across_files(kiln_bin, db):
    assert kjson(kiln_bin, db, "deps", "--closure", "tool")["closure"] == \
        ["awk-impl", "libtool-rt", "tool"]
    assert kjson(kiln_bin, db, "deps", "--closure", "--essential", "libtool-rt")["closure"] == \
        ["awk-impl", "libtool-rt"]


def test_reimport_of_a_manifest_replaces_its_packages(kiln_bin, db, manifests):
    a, b = manifests
    a.write_text(MANIFEST_A.split("\nPackage: libtool-rt")[0] + "\n")
    r = kiln(kiln_bin, db, "--json", "import", "manifest", a)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kept"] == 1          # awk-impl, from b.manifest
    assert kiln(kiln_bin, db, "files", "libtool-rt").returncode == 1
    assert kjson(kiln_bin, db, "owner", "/opt/kt/bin/awk")[0]["owners"] == ["awk-impl"]
    r = kiln(kiln_bin, db, "deps", "tool")
    assert "Depends: libtool-rt (>= 1) [not installed]" in r.stdout


def test_dpkg_import_keeps_manifest_packages(tmp_path, kiln_bin, db):
    root = tmp_path / "root"
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(
        "Package: hello\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.10\n")
    (root / "var/lib/dpkg/info/hello.list").write_text("/usr/bin/hello\n")
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", root)
    assert r.returncode == 0, r.stderr
    assert "kept 3 packages of other origins" in r.stdout
    assert kjson(kiln_bin, db, "stats")["packages"] == 4
    assert kjson(kiln_bin, db, "owner", "/usr/bin/hello")[0]["owners"] == ["hello"]


def test_import_over_a_schema_1_database(tmp_path, kiln_bin, db):
    """A database written before the priority column: read-only commands ask
    for a re-import, and the import keeps its other-origin packages."""
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE packages DROP COLUMN priority")
        c.execute("PRAGMA user_version=1")
    r = kiln(kiln_bin, db, "stats")
    assert r.returncode == 1
    assert f"{db}: registry schema version 1 is older than this kiln's (2)" in r.stderr
    root = tmp_path / "root"
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(
        "Package: hello\nStatus: install ok installed\nPriority: required\n"
        "Architecture: amd64\nVersion: 2.10\n")
    (root / "var/lib/dpkg/info/hello.list").write_text("/usr/bin/hello\n")
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", root)
    assert r.returncode == 0, r.stderr
    assert "kept 3 packages of other origins" in r.stdout
    s = kjson(kiln_bin, db, "stats")
    assert (s["schema_version"], s["packages"], s["required"]) == (2, 4, 1)


def test_manifest_priority(tmp_path, kiln_bin):
    m = tmp_path / "p.manifest"
    m.write_text("Package: a\nPriority: required\n\nPackage: b\nPriority: optional\n")
    path = tmp_path / "p.db"
    r = kiln(kiln_bin, path, "import", "manifest", m)
    assert r.returncode == 0, r.stderr
    assert kjson(kiln_bin, path, "stats")["required"] == 1


@pytest.mark.parametrize("text,where", [
    ("Package: x\nFiles:\n /a\nColour: blue\n", "m.manifest:4: unknown field 'Colour'"),
    ("Version: 1\n", "m.manifest:1: stanza has no Package field"),
    ("Package: x\nFiles:\n /a\n relative/b\n", "m.manifest:4: package 'x': not an absolute path"),
    ("Package: x\nEssential: maybe\n", "m.manifest:2: Essential must be 'yes' or 'no'"),
    ("Package: x\n\nPackage: x\n", "m.manifest:3: package 'x' (arch '') is imported twice"),
    ("Package: x\nDepends: a | | b\n", "m.manifest:2: package 'x': bad Depends field"),
    ("# nothing\n", "no package stanza"),
])
def test_bad_manifest(tmp_path, kiln_bin, db, text, where):
    before = db.read_bytes()
    m = tmp_path / "m.manifest"
    m.write_text(text)
    r = kiln(kiln_bin, db, "import", "manifest", m)
    assert r.returncode == 1
    assert where in r.stderr, r.stderr
    assert db.read_bytes() == before


def test_missing_manifest(tmp_path, kiln_bin, db):
    r = kiln(kiln_bin, db, "import", "manifest", tmp_path / "absent")
    assert r.returncode == 1
    assert f"{tmp_path}/absent: No such file or directory" in r.stderr


def test_missing_database(tmp_path, kiln_bin):
    r = kiln(kiln_bin, tmp_path / "none.db", "owner", "/usr")
    assert r.returncode == 1
    assert f"{tmp_path}/none.db: no registry database here" in r.stderr


def test_newer_schema_is_refused(kiln_bin, db, manifests):
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA user_version=7")
    for args in (["owner", "/opt/kt"], ["stats"], ["import", "manifest", manifests[0]]):
        r = kiln(kiln_bin, db, *args)
        assert r.returncode == 1
        assert f"{db}: registry schema version 7 is newer than this kiln supports (2)" in r.stderr


def test_locked_database(kiln_bin, db):
    holder = subprocess.Popen(
        ["/usr/bin/python3", "-c", textwrap.dedent(f"""
            import sqlite3, sys
            c = sqlite3.connect({str(db)!r}, isolation_level=None)
            c.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = kiln(kiln_bin, db, "owner", "/opt/kt", env=dict(os.environ, KILN_REGISTRY_BUSY_MS="50"))
        assert r.returncode == 1
        assert f"{db}: database is locked by another process" in r.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert kiln(kiln_bin, db, "owner", "/opt/kt").returncode == 0


def test_garbage_and_foreign_files(tmp_path, kiln_bin, manifests):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 500)
    r = kiln(kiln_bin, garbage, "stats")
    assert r.returncode == 1
    assert f"{garbage}: not a kiln registry database" in r.stderr
    # An import never overwrites a file that is not a kiln registry.
    r = kiln(kiln_bin, garbage, "import", "manifest", manifests[0])
    assert r.returncode == 1
    assert "not replacing it" in r.stderr
    assert garbage.read_bytes() == b"not a database at all\n" * 500

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE notes(x)")
    r = kiln(kiln_bin, foreign, "stats")
    assert r.returncode == 1
    assert f"{foreign}: not a kiln registry database (an SQLite database of another program)" \
        in r.stderr


def test_corrupt_pages(tmp_path, kiln_bin, db):
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    for off in range(page, len(data)):  # keep the header page, wreck the rest
        data[off] = 0xA5
    bad = tmp_path / "corrupt.db"
    bad.write_bytes(bytes(data))
    r = kiln(kiln_bin, bad, "owner", "/opt/kt")
    assert r.returncode == 1
    assert str(bad) in r.stderr
    assert "corrupt" in r.stderr or "not a kiln registry" in r.stderr


def test_default_database_path(tmp_path, kiln_bin, manifests):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("KILN_DB", None)
    r = run([kiln_bin, "registry", "import", "manifest", manifests[1]], env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cache/kiln/registry.db").exists()
    env["KILN_DB"] = str(tmp_path / "other.db")
    r = run([kiln_bin, "registry", "stats"], env=env)
    assert r.returncode == 1
    assert f"{tmp_path}/other.db: no registry database here" in r.stderr


def test_owner_of_unknown_path(kiln_bin, db):
    r = kiln(kiln_bin, db, "owner", "/opt/kt/bin/tool", "/opt/nothing")
    assert r.returncode == 1
    assert r.stdout == "tool: /opt/kt/bin/tool\n"
    assert "no package owns /opt/nothing" in r.stderr


@pytest.mark.parametrize("args,msg", [
    ([], "no command given"),
    (["frob"], "unknown command 'frob'"),
    (["--frob", "stats"], "unknown option '--frob'"),
    (["owner"], "owner: name at least one PATH"),
    (["import"], "import: say what to import: 'dpkg' or 'manifest FILE...'"),
    (["import", "rpm"], "import: unknown source 'rpm' (dpkg or manifest)"),
    (["import", "manifest"], "import manifest: name at least one FILE"),
    (["deps"], "deps: name one PKG"),
    (["rdeps", "a", "b"], "rdeps: name one PKG"),
    (["packages", "a", "b"], "packages: unexpected argument 'b'"),
    (["--db"], "option '--db' needs a value (FILE)"),
    (["--json=yes", "stats"], "option '--json' takes no value"),
    (["owner", "--root", "/", "/x"], "--root does not apply to 'owner'"),
    (["files", "--closure", "x"], "--closure does not apply to 'files'"),
    (["deps", "--essential", "x"], "--essential does not apply to 'deps' without --closure"),
])
def test_usage_errors(kiln_bin, args, msg):
    """One line, in the one form every kiln command uses, and status 2."""
    r = run([kiln_bin, "registry", *args])
    assert r.returncode == 2
    assert r.stderr == f"kiln registry: {msg}; see 'kiln registry --help'\n"
    assert r.stdout == ""


def test_help(kiln_bin):
    r = run([kiln_bin, "registry", "--help"])
    assert r.returncode == 0
    for word in ("import dpkg", "import manifest", "owner PATH", "files PKG", "--closure",
                 "rdeps PKG", "stats", "--db FILE", "--json"):
        assert word in r.stdout


def test_empty_results_say_so_on_stderr(kiln_bin, db):
    # tool depends on libtool-rt and awk; nothing depends on tool
    r = kiln(kiln_bin, db, "rdeps", "tool")
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr == "kiln registry: no installed package depends on tool\n"
    r = kiln(kiln_bin, db, "--json", "rdeps", "tool")
    assert json.loads(r.stdout) == {"package": "tool", "rdeps": []}
    assert "no installed package depends on tool" in r.stderr
    r = kiln(kiln_bin, db, "deps", "awk-impl")
    assert r.returncode == 0 and r.stdout == ""
    assert "package awk-impl has no Depends or Pre-Depends" in r.stderr
    r = kiln(kiln_bin, db, "packages", "zzz")
    assert r.returncode == 0 and r.stdout == ""
    assert "no installed package name starts with 'zzz'" in r.stderr
    # a result is not announced
    r = kiln(kiln_bin, db, "rdeps", "libtool-rt")
    assert r.stdout == "tool\n" and r.stderr == ""


def test_packages_lists_names(kiln_bin, db):
    r = kiln(kiln_bin, db, "packages")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["awk-impl", "libtool-rt", "tool"]
    assert kiln(kiln_bin, db, "packages", "libt").stdout == "libtool-rt\n"
    assert kjson(kiln_bin, db, "packages", "t") == ["tool"]


def test_output_file(kiln_bin, db, tmp_path):
    out = tmp_path / "owners.json"
    r = kiln(kiln_bin, db, "owner", "--json", "-o", out, "/opt/kt/bin/tool")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert json.loads(out.read_text())[0]["owners"] == ["tool"]
    # a failed command leaves an existing file as it was
    out.write_text("kept\n")
    r = kiln(kiln_bin, db, "files", "nope", "--output", out)
    assert r.returncode == 1 and out.read_text() == "kept\n"
    r = kiln(kiln_bin, db, "stats", "-o", tmp_path / "nodir" / "x")
    assert r.returncode == 2 and "nodir" in r.stderr and "does not exist" in r.stderr

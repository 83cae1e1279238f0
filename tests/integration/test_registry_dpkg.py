"""End-to-end: `kiln registry import dpkg --root` on a synthetic dpkg tree
built here, checked against expectations written by hand."""
import hashlib
import json
import os
import textwrap

import pytest

from conftest import run

STATUS = """\
Package: base-files
Status: install ok installed
Priority: required
Essential: yes
Architecture: amd64
Version: 12.4
Description: base system
 several lines
 .
 of description

Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 2.36-9
Depends: libgcc-s1
Description: GNU C Library

Package: libgcc-s1
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 12.2.0-14
Depends: libc6 (>= 2.35)

Package: bash
Status: install ok installed
Priority: required
Essential: yes
Architecture: amd64
Version: 5.2.15-2
Pre-Depends: libc6 (>= 2.36)

Package: dash
Status: install ok installed
Priority: required
Essential: yes
Architecture: amd64
Version: 0.5.12-2
Pre-Depends: libc6 (>= 2.34)

Package: mawk
Status: install ok installed
Priority: required
Architecture: amd64
Version: 1.3.4
Pre-Depends: libc6 (>= 2.34)
Provides: awk

Package: gawk
Status: deinstall ok config-files
Architecture: amd64
Version: 1:5.2.1-2
Provides: awk

Package: half
Status: install reinstreq half-installed
Architecture: amd64
Version: 1

Package: libfoo
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 1.0
Depends: libc6

Package: libbar
Status: hold ok installed
Architecture: amd64
Version: 2.0
Depends: libbaz

Package: libbaz
Status: install ok installed
Architecture: all
Version: 2.0
Depends: libbar

Package: python3
Status: install ok installed
Architecture: amd64
Multi-Arch: allowed
Version: 3.11.2-1

Package: app
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 1.0
Pre-Depends: dpkg (>= 1.15)
Depends: awk, libfoo:amd64 (>= 1.0) | libbar, python3:any,
 missing-pkg | libc6 (>= 2.36)

Package: mytools
Status: install ok installed
Architecture: amd64
Version: 1

Package: wrapper
Status: install ok installed
Architecture: all
Version: 1

Package: jdk
Status: install ok installed
Architecture: amd64
Version: 17

Package: nolist
Status: install ok installed
Architecture: all
Version: 1
"""

LISTS = {
    "base-files": ["/.", "/bin", "/etc", "/usr", "/usr/bin", "/usr/lib",
                   "/usr/share", "/usr/share/doc", "/etc/debian_version"],
    "libc6:amd64": ["/.", "/lib", "/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu/libc.so.6",
                    "/lib64", "/lib64/ld-linux-x86-64.so.2", "/usr/share/doc",
                    "/usr/share/doc/libc6"],
    "libgcc-s1:amd64": ["/lib/x86_64-linux-gnu/libgcc_s.so.1"],
    "bash": ["/.", "/bin", "/bin/bash", "/usr/share/doc", "/usr/share/doc/bash"],
    "dash": ["/bin/dash", "/bin/sh", "/usr/share/man/man1/sh.1.gz"],
    "mawk": ["/usr/bin/mawk", "/usr/bin/awk"],
    "gawk": ["/usr/bin/gawk"],  # config-files only: must not count
    "half": ["/usr/bin/half"],
    "libfoo:amd64": ["/usr/lib/x86_64-linux-gnu/libfoo.so.1"],
    "libbar": ["/usr/lib/libbar.so"],
    "libbaz": ["/usr/share/libbaz/data"],
    "python3": ["/usr/bin/python3"],
    "app": ["/usr/bin/app", "/usr/share/doc/app"],
    "mytools": ["/usr/bin/foo", "/usr/bin/bar", "/sbin/mytool"],
    "wrapper": ["/usr/bin/foo"],
    "jdk": ["/usr/lib/jvm/default/bin/java"],
    # nolist: no .list file at all (dpkg itself tolerates this)
}

DIVERSIONS = [
    ("/usr/bin/foo", "/usr/bin/foo.real", "wrapper"),  # wrapper replaces mytools' foo
    ("/bin/sh", "/bin/sh.distrib", "dash"),            # as on Debian 12 itself
    ("/usr/bin/bar", "/usr/bin/bar.local", ":"),       # local diversion (dpkg-divert --local)
]


def make_tree(root, status=STATUS, lists=LISTS, diversions=DIVERSIONS):
    """A system tree with merged /usr and a dpkg database."""
    for d in ("usr/bin", "usr/sbin", "usr/lib/x86_64-linux-gnu", "usr/lib64",
              "usr/share/doc/libc6", "usr/share/doc/bash", "usr/share/doc/app",
              "usr/share/man/man1", "usr/lib/jvm/java-17/bin", "etc",
              "var/lib/dpkg/info"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                         ("lib64", "usr/lib64")):
        (root / link).symlink_to(target)
    (root / "usr/bin/sh").symlink_to("dash")
    (root / "usr/bin/awk").symlink_to("mawk")
    (root / "usr/lib64/ld-linux-x86-64.so.2").symlink_to(
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    # An absolute link: resolved inside the root, not on the host.
    (root / "usr/lib/jvm/default").symlink_to("/usr/lib/jvm/java-17")
    for f in ("usr/bin/bash", "usr/bin/dash", "usr/bin/mawk", "usr/bin/foo",
              "usr/bin/foo.real", "usr/lib/x86_64-linux-gnu/libc.so.6"):
        (root / f).write_text("x")
    admin = root / "var/lib/dpkg"
    (admin / "status").write_text(status)
    for name, paths in lists.items():
        (admin / "info" / f"{name}.list").write_text("".join(p + "\n" for p in paths))
    (admin / "diversions").write_text("".join(f"{a}\n{b}\n{c}\n" for a, b, c in diversions))
    return root


@pytest.fixture
def tree(tmp_path):
    return make_tree(tmp_path / "root")


@pytest.fixture
def db(tmp_path, kiln_bin, tree):
    path = tmp_path / "reg.db"
    r = run([kiln_bin, "registry", "--db", path, "import", "dpkg", "--root", tree])
    assert r.returncode == 0, r.stderr
    return path


def kiln(kiln_bin, db, *args):
    return run([kiln_bin, "registry", "--db", db, *args])


def kjson(kiln_bin, db, *args):
    r = kiln(kiln_bin, db, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def files_of(kiln_bin, db, pkg):
    return {f["listed"]: f for f in kjson(kiln_bin, db, "files", pkg)}


def test_import_counts_only_installed_and_warns_about_missing_list(tmp_path, kiln_bin, tree):
    r = run([kiln_bin, "registry", "--db", tmp_path / "x.db", "--json",
             "import", "dpkg", "--root", tree])
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    # 17 stanzas: gawk (config-files) and half (half-installed) do not count;
    # libbar is "hold ok installed", which is installed.
    assert res["packages"] == 15
    assert res["skipped"] == 2
    assert res["missing_lists"] == 1
    assert res["diverted"] == 2  # mytools' /usr/bin/foo and /usr/bin/bar
    assert f"{tree}/var/lib/dpkg/info/nolist.list: missing" in r.stderr
    assert "package 'nolist' is installed" in r.stderr


def test_merged_usr_canonical_paths(kiln_bin, db):
    bash = files_of(kiln_bin, db, "bash")
    assert bash["/bin/bash"]["canonical"] == "/usr/bin/bash"
    assert bash["/bin/bash"]["kind"] == "file"
    assert bash["/bin"]["canonical"] == "/bin"          # last component not followed
    assert bash["/bin"]["kind"] == "symlink"
    assert bash["/"]["kind"] == "dir"                   # "/." is normalised to "/"
    libc = files_of(kiln_bin, db, "libc6")
    assert libc["/lib/x86_64-linux-gnu/libc.so.6"]["canonical"] == \
        "/usr/lib/x86_64-linux-gnu/libc.so.6"
    ld = libc["/lib64/ld-linux-x86-64.so.2"]
    assert ld["canonical"] == "/usr/lib64/ld-linux-x86-64.so.2"
    assert ld["kind"] == "symlink"
    dash = files_of(kiln_bin, db, "dash")
    assert dash["/bin/sh"]["canonical"] == "/usr/bin/sh"
    assert dash["/bin/sh"]["kind"] == "symlink"
    assert not dash["/bin/sh"]["diverted"]              # dash diverts others' /bin/sh
    assert files_of(kiln_bin, db, "mytools")["/sbin/mytool"]["canonical"] == "/usr/sbin/mytool"
    # /usr/lib/jvm/default -> /usr/lib/jvm/java-17 is absolute: taken inside the root.
    assert files_of(kiln_bin, db, "jdk")["/usr/lib/jvm/default/bin/java"]["canonical"] == \
        "/usr/lib/jvm/java-17/bin/java"


def owners(kiln_bin, db, *paths):
    """Owners by canonical path (the CLI canonicalises on the host, so pass
    paths whose directories are not symlinks on any merged-/usr host)."""
    r = kiln(kiln_bin, db, "--json", "owner", *paths)
    return {o["canonical"]: sorted(o["owners"]) for o in json.loads(r.stdout)}


def test_owners_listed_and_canonical_agree(kiln_bin, db):
    got = owners(kiln_bin, db, "/usr/bin/bash", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                 "/usr/sbin/mytool", "/usr/bin/awk", "/usr/bin/gawk", "/usr/bin/half")
    assert got == {
        "/usr/bin/bash": ["bash"],
        "/usr/lib/x86_64-linux-gnu/libc.so.6": ["libc6"],
        "/usr/sbin/mytool": ["mytools"],
        "/usr/bin/awk": ["mawk"],
        "/usr/bin/gawk": [],     # gawk only has config files left
        "/usr/bin/half": [],     # half-installed does not count
    }


def test_host_merged_usr_lookup(kiln_bin, db):
    """`owner /bin/bash` resolves /bin on this (merged-/usr) host."""
    if not os.path.islink("/bin") or os.readlink("/bin").rstrip("/") not in ("usr/bin", "/usr/bin"):
        pytest.skip("host /bin is not merged into /usr/bin")
    r = kiln(kiln_bin, db, "owner", "/bin/bash", "/usr/bin/bash")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["bash: /bin/bash -> /usr/bin/bash", "bash: /usr/bin/bash"]


def test_directories_have_all_their_owners(kiln_bin, db):
    got = owners(kiln_bin, db, "/usr/share/doc", "/")
    assert got["/usr/share/doc"] == ["base-files", "bash", "libc6"]
    assert got["/"] == ["base-files", "bash", "libc6"]


def test_directory_behind_a_listed_symlink(kiln_bin, db):
    """libc6 lists /lib64, a symlink to usr/lib64 here, and a file in it:
    /usr/lib64, which no package lists, is libc6's too (a build stats it).
    /usr/bin, behind bash's /bin, is base-files' and gains no owner."""
    got = owners(kiln_bin, db, "/usr/lib64", "/usr/bin", "/usr/sbin")
    assert got == {"/usr/lib64": ["libc6"], "/usr/bin": ["base-files"], "/usr/sbin": []}
    rows = [f for f in kjson(kiln_bin, db, "files", "libc6") if f["listed"] == "/lib64"]
    assert sorted((f["canonical"], f["kind"]) for f in rows) == [("/lib64", "symlink"),
                                                                 ("/usr/lib64", "dir")]


def test_diversions(kiln_bin, db):
    got = owners(kiln_bin, db, "/usr/bin/foo", "/usr/bin/foo.real", "/usr/bin/bar",
                 "/usr/bin/bar.local", "/usr/bin/sh", "/usr/bin/sh.distrib")
    assert got == {
        "/usr/bin/foo": ["wrapper"],          # the diverting package's own file
        "/usr/bin/foo.real": ["mytools"],     # the diverted file, where it now lives
        "/usr/bin/bar": [],                   # local diversion: nobody's file is here
        "/usr/bin/bar.local": ["mytools"],
        "/usr/bin/sh": ["dash"],              # dash's own /bin/sh is not diverted
        "/usr/bin/sh.distrib": [],
    }
    mytools = files_of(kiln_bin, db, "mytools")
    assert mytools["/usr/bin/foo"]["diverted"] and \
        mytools["/usr/bin/foo"]["canonical"] == "/usr/bin/foo.real"


def test_deps_alternatives_virtual_multiarch(kiln_bin, db):
    deps = kjson(kiln_bin, db, "deps", "app")["depends"]
    by_name = {(d["field"], d["name"]): d for d in deps}
    assert by_name[("Pre-Depends", "dpkg")]["satisfied_by"] == []
    assert by_name[("Depends", "awk")]["satisfied_by"] == ["mawk"]   # virtual, via Provides
    foo = by_name[("Depends", "libfoo")]
    assert (foo["arch"], foo["version"], foo["satisfied_by"]) == ("amd64", ">= 1.0", ["libfoo"])
    bar = by_name[("Depends", "libbar")]
    assert (bar["clause"], bar["alt"]) == (foo["clause"], 1)
    assert by_name[("Depends", "python3")]["arch"] == "any"
    assert by_name[("Depends", "python3")]["satisfied_by"] == ["python3"]
    r = kiln(kiln_bin, db, "deps", "app")
    assert r.stdout.splitlines() == [
        "Pre-Depends: dpkg (>= 1.15) [not installed]",
        "Depends: awk [mawk]",
        "Depends: libfoo:amd64 (>= 1.0) | libbar",
        "Depends: python3:any",
        "Depends: missing-pkg [not installed] | libc6 (>= 2.36)",
    ]


def test_closure(kiln_bin, db):
    closure = kjson(kiln_bin, db, "deps", "--closure", "app")["closure"]
    # every installed alternative counts; the libbar <-> libbaz cycle is fine
    assert closure == ["app", "libbar", "libbaz", "libc6", "libfoo", "libgcc-s1", "mawk",
                       "python3"]
    with_ess = kjson(kiln_bin, db, "deps", "--closure", "--essential", "app")["closure"]
    assert with_ess == sorted(closure + ["base-files", "bash", "dash"])
    assert kjson(kiln_bin, db, "deps", "--closure", "libbaz")["closure"] == ["libbar", "libbaz"]


def test_closure_chroot_profile(kiln_bin, db):
    # one package per clause: libfoo (first alternative), not libbar/libbaz
    chroot = kjson(kiln_bin, db, "deps", "--closure", "--profile", "chroot", "app")["closure"]
    assert chroot == ["app", "libc6", "libfoo", "libgcc-s1", "mawk", "python3"]
    # base set: Essential + Priority: required (mawk is required, not Essential)
    base = kjson(kiln_bin, db, "deps", "--closure", "--essential", "--profile=chroot",
                 "libbaz")["closure"]
    assert base == ["base-files", "bash", "dash", "libbar", "libbaz", "libc6", "libgcc-s1",
                    "mawk"]
    host = kjson(kiln_bin, db, "deps", "--closure", "--essential", "--profile", "host",
                 "libbaz")["closure"]
    assert "mawk" not in host
    r = kiln(kiln_bin, db, "deps", "--closure", "--profile", "sbuild", "app")
    assert r.returncode == 2
    assert "--profile takes host or chroot, not 'sbuild'" in r.stderr
    r = kiln(kiln_bin, db, "deps", "--profile", "chroot", "app")
    assert r.returncode == 2
    assert "--profile does not apply to 'deps' without --closure" in r.stderr


def test_closure_of_a_virtual_package(kiln_bin, db):
    # as `kiln trace --deps awk` accepts it: the closure of its providers
    assert kjson(kiln_bin, db, "deps", "--closure", "awk")["closure"] == \
        ["libc6", "libgcc-s1", "mawk"]
    r = kiln(kiln_bin, db, "deps", "awk")  # the plain listing still wants a real package
    assert r.returncode == 1
    assert "a virtual package, provided by mawk" in r.stderr


def test_rdeps(kiln_bin, db):
    assert kjson(kiln_bin, db, "rdeps", "libc6")["rdeps"] == \
        ["app", "bash", "dash", "libfoo", "libgcc-s1", "mawk"]
    assert kjson(kiln_bin, db, "rdeps", "mawk")["rdeps"] == ["app"]  # via Provides: awk


def test_unknown_package(kiln_bin, db):
    for cmd in (["files", "nope"], ["deps", "nope"], ["deps", "--closure", "nope"],
                ["rdeps", "nope"]):
        r = kiln(kiln_bin, db, *cmd)
        assert r.returncode == 1
        assert f"unknown package 'nope' in {db}" in r.stderr
    r = kiln(kiln_bin, db, "files", "awk")
    assert r.returncode == 1
    assert "a virtual package, provided by mawk" in r.stderr


def test_stats(kiln_bin, db, tree):
    s = kjson(kiln_bin, db, "stats")
    assert s["packages"] == 15
    assert s["essential"] == 3
    assert s["schema_version"] == 2
    assert s["required"] == 4  # Priority: required, as dpkg's status says
    assert s["dpkg_root"] == str(tree.resolve())
    assert s["diverted"] == 2


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(db):
    return [p for p in db.parent.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("bad,where,cause", [
    ("Package: app\nStatus: install ok installed\nthis line has no colon\n",
     3, "malformed line"),
    (" continuation first\n", 1, "continuation line outside a field"),
    ("Status: install ok installed\nVersion: 1\n", 1, "stanza has no Package field"),
    ("Package: x\nStatus: installed\n", 2, "malformed Status"),
    ("Package: x\nStatus: install ok installed\nDepends: a (>= 1\n", 1,
     "bad Depends field"),
])
def test_corrupt_status_names_file_and_line_and_keeps_db(tmp_path, kiln_bin, db, bad, where,
                                                         cause):
    before = digest(db)
    good_lines = STATUS.count("\n")
    tree = make_tree(tmp_path / "bad", status=STATUS + "\n" + bad)
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", tree)
    assert r.returncode == 1
    status = tree.resolve() / "var/lib/dpkg/status"
    assert f"{status}:{good_lines + 1 + where}: " in r.stderr
    assert cause in r.stderr
    assert f"{db} left unchanged" in r.stderr
    assert digest(db) == before
    assert leftovers(db) == []


def test_bad_list_and_diversions(tmp_path, kiln_bin, db):
    before = digest(db)
    lists = dict(LISTS, python3=["/usr/bin/python3", "relative/path"])
    tree = make_tree(tmp_path / "t1", lists=lists)
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", tree)
    assert r.returncode == 1
    assert f"{tree.resolve()}/var/lib/dpkg/info/python3.list:2: not an absolute path" in r.stderr

    tree = make_tree(tmp_path / "t2")
    (tree / "var/lib/dpkg/diversions").write_text("/a\n/b\n")
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", tree)
    assert r.returncode == 1
    assert "var/lib/dpkg/diversions:2: incomplete diversion record" in r.stderr

    tree = make_tree(tmp_path / "t3")
    unreadable = tree / "var/lib/dpkg/info/python3.list"
    unreadable.chmod(0)
    if not os.access(unreadable, os.R_OK):  # as root every file is readable
        r = kiln(kiln_bin, db, "import", "dpkg", "--root", tree)
        assert r.returncode == 1
        assert "python3.list: Permission denied" in r.stderr

    r = kiln(kiln_bin, db, "import", "dpkg", "--root", tmp_path / "nonexistent")
    assert r.returncode == 1
    assert "nonexistent" in r.stderr
    assert digest(db) == before
    assert leftovers(db) == []


def test_reimport_replaces_atomically(tmp_path, kiln_bin, db, tree):
    """A second import replaces the file by rename: a reader holding the old
    database open keeps a consistent old view."""
    ino = db.stat().st_ino
    status = STATUS.replace("Package: app\n", "Package: app2\n")
    lists = dict(LISTS)
    lists["app2"] = lists.pop("app")
    tree2 = make_tree(tmp_path / "root2", status=status, lists=lists)
    r = kiln(kiln_bin, db, "import", "dpkg", "--root", tree2)
    assert r.returncode == 0, r.stderr
    assert db.stat().st_ino != ino
    assert owners(kiln_bin, db, "/usr/bin/app") == {"/usr/bin/app": ["app2"]}
    assert leftovers(db) == []

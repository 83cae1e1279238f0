"""A registry older than the dpkg database: kiln trace notices (the dpkg
state recorded at import against the status file and info/ directory now)
and re-imports, or with --no-refresh warns. Driven on a synthetic dpkg root
where packages are installed and removed between runs."""
import json
import os
import sqlite3

import pytest

from conftest import run


def stanza(name, essential=False):
    return (f"Package: {name}\nStatus: install ok installed\nVersion: 1.0\n"
            f"Architecture: amd64\n" + ("Essential: yes\n" if essential else "") + "\n")


class DpkgRoot:
    """ROOT/var/lib/dpkg with packages that can be installed and removed the
    way dpkg does it: a new status file and a .list in info/."""

    def __init__(self, root):
        self.root = root
        self.admin = root / "var" / "lib" / "dpkg"
        (self.admin / "info").mkdir(parents=True)
        self.pkgs = {}

    def _write_status(self):
        tmp = self.admin / "status-new"
        tmp.write_text("".join(stanza(n, e) for n, e in self.pkgs.items()))
        os.replace(tmp, self.admin / "status")

    def install(self, name, essential=False):
        d = self.root / "usr" / "share" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "file").write_text(name)
        (self.admin / "info" / f"{name}.list").write_text(
            f"/.\n/usr\n/usr/share\n/usr/share/{name}\n/usr/share/{name}/file\n")
        self.pkgs[name] = essential
        self._write_status()

    def remove(self, name):
        del self.pkgs[name]
        (self.admin / "info" / f"{name}.list").unlink()
        self._write_status()


@pytest.fixture
def dpkg(tmp_path, kiln_bin):
    d = DpkgRoot(tmp_path / "root")
    d.install("base", essential=True)
    d.install("alpha")
    d.db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", d.db, "import", "dpkg", "--root", d.root])
    assert r.returncode == 0, r.stderr
    (tmp_path / "build").mkdir()
    d.build = tmp_path / "build"
    return d


def packages(db):
    with sqlite3.connect(db) as c:
        return sorted(r[0] for r in c.execute("SELECT name FROM packages"))


def trace(kiln_bin, d, *opts):
    return run([kiln_bin, "trace", "--db", d.db, *opts, "--deps", "base", "--", "touch", "RAN"],
               cwd=d.build)


def test_import_records_the_dpkg_state(dpkg):
    with sqlite3.connect(dpkg.db) as c:
        meta = dict(c.execute("SELECT key, value FROM meta"))
    st = os.stat(dpkg.admin / "status")
    assert meta["dpkg_state"] == (f"status {st.st_mtime_ns} {st.st_size} "
                                  f"info {os.stat(dpkg.admin / 'info').st_mtime_ns}")
    assert meta["dpkg_root"] == str(dpkg.root.resolve())


def test_unchanged_dpkg_is_not_reimported(kiln_bin, dpkg):
    ino = os.stat(dpkg.db).st_ino
    r = trace(kiln_bin, dpkg)
    assert r.returncode == 0, r.stderr
    assert "re-import" not in r.stderr and "out of date" not in r.stderr
    assert os.stat(dpkg.db).st_ino == ino


def test_install_between_runs_is_reimported(kiln_bin, dpkg):
    dpkg.install("beta")
    r = trace(kiln_bin, dpkg)
    assert r.returncode == 0, r.stderr
    notes = [l for l in r.stderr.splitlines() if "re-imported" in l]
    assert len(notes) == 1, r.stderr
    assert "changed since the import" in notes[0] and "3 packages" in notes[0]
    assert packages(dpkg.db) == ["alpha", "base", "beta"]
    assert (dpkg.build / "RAN").exists()
    # and now it is fresh: no second re-import
    r = trace(kiln_bin, dpkg)
    assert "re-imported" not in r.stderr


def test_removal_between_runs_is_reimported(kiln_bin, dpkg):
    dpkg.remove("alpha")
    r = trace(kiln_bin, dpkg)
    assert r.returncode == 0, r.stderr
    assert "re-imported the registry (1 packages)" in r.stderr
    assert packages(dpkg.db) == ["base"]


def test_no_refresh_warns_and_keeps_the_old_registry(kiln_bin, dpkg):
    dpkg.install("beta")
    r = trace(kiln_bin, dpkg, "--no-refresh")
    assert r.returncode == 0, r.stderr
    assert "warning: the registry" in r.stderr and "out of date" in r.stderr
    assert f"kiln registry --db {dpkg.db} import dpkg --root {dpkg.root.resolve()}'" in r.stderr
    assert packages(dpkg.db) == ["alpha", "base"]


def test_an_older_registry_without_a_recorded_state_is_reimported(kiln_bin, dpkg):
    with sqlite3.connect(dpkg.db) as c:
        c.execute("DELETE FROM meta WHERE key='dpkg_state'")
    r = trace(kiln_bin, dpkg)
    assert "did not record the dpkg state" in r.stderr and "re-imported" in r.stderr


def test_a_registry_imported_by_older_rules_is_reimported(kiln_bin, dpkg):
    with sqlite3.connect(dpkg.db) as c:
        assert dict(c.execute("SELECT key, value FROM meta"))["dpkg_import_rules"] == "2"
        c.execute("DELETE FROM meta WHERE key='dpkg_import_rules'")
    r = trace(kiln_bin, dpkg)
    assert "imported by an older kiln (import rules 1, now 2)" in r.stderr, r.stderr
    assert "re-imported" in r.stderr
    r = trace(kiln_bin, dpkg)
    assert "re-imported" not in r.stderr


def test_a_manifest_registry_is_left_alone(kiln_bin, tmp_path):
    manifest = tmp_path / "manifest"
    manifest.write_text("Package: base\nVersion: 1\nEssential: yes\nFiles:\n /x\n")
    db = tmp_path / "m.db"
    assert run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest]).returncode == 0
    r = run([kiln_bin, "trace", "--db", db, "--", "true"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "re-import" not in r.stderr and "out of date" not in r.stderr


def test_a_package_installed_between_runs_can_be_declared(kiln_bin, dpkg):
    """What a stale registry got wrong: a package installed since the import
    was unknown to it ("not installed"). Re-imported, it is declared and
    its files are the closure's."""
    dpkg.install("gamma")
    r = run([kiln_bin, "trace", "--db", dpkg.db, "--no-refresh", "--deps", "base,gamma", "--",
             "touch", "RAN"], cwd=dpkg.build)
    assert r.returncode != 0 and "gamma" in r.stderr and not (dpkg.build / "RAN").exists()
    r = run([kiln_bin, "trace", "--db", dpkg.db, "--deps", "base,gamma", "--json", "-o", "r.json", "--",
             "touch", "RAN"], cwd=dpkg.build)
    assert r.returncode == 0, r.stderr
    assert "re-imported" in r.stderr and (dpkg.build / "RAN").exists()
    rep = json.loads((dpkg.build / "r.json").read_text())
    assert rep["declared"] == ["base", "gamma"] and rep["closure_packages"] == 2

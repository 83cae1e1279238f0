"""The configuration files (man 5 kiln): defaults for the registry, the
policy file and extra areas, which the command line overrides; errors name
the file and the line. The test session sets KILN_CONFIG="" (conftest.py) so
that no configuration of the machine's applies; these tests set it, or unset
it and use XDG_CONFIG_HOME."""
import os
import pathlib

import pytest

from conftest import run
from runas import manifest_text


@pytest.fixture
def world(tmp_path, kiln_bin):
    """A manifest registry managing tmp/sys: base (Essential) owns the
    directories and base.h, extra owns extra.h (never declared)."""
    inc = tmp_path / "sys" / "include"
    inc.mkdir(parents=True)
    for name in ("base.h", "extra.h", "local.h"):
        (inc / name).write_text(name + "\n")
    S = tmp_path / "sys"
    manifest = tmp_path / "manifest"
    manifest.write_text(manifest_text([
        ("base", True, [f"{S}/", f"{S}/include/", f"{S}/include/base.h", f"{S}/include/local.h"]),
        ("extra", False, [f"{S}/include/extra.h"]),
    ]))
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    (tmp_path / "build").mkdir()
    (tmp_path / "outside").mkdir()

    class W:
        pass
    w = W()
    w.tmp, w.sys, w.inc, w.db, w.build = tmp_path, S, inc, db, tmp_path / "build"
    w.config = tmp_path / "kiln.config"
    w.env = dict(os.environ, KILN_CONFIG=str(w.config))
    w.env.pop("KILN_DB", None)

    def trace(*args, script):
        return run([kiln_bin, "trace", *args, "--", "sh", "-c", script], cwd=w.build, env=w.env)
    w.trace = trace
    return w


PROBE = ("for f in base.h extra.h local.h; do test -e {inc}/$f && echo $f yes || echo $f no; done; "
         "echo x > {out}/w.txt 2>/dev/null && echo write yes || echo write no")


def probe(w, *args):
    r = w.trace(*args, script=PROBE.format(inc=w.inc, out=w.tmp / "outside"))
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_registry_and_areas_from_the_config(world, kiln_bin):
    w = world
    # (tmp/outside lies in /tmp, writable by default: the config makes it read-only)
    w.config.write_text(f"# kiln\nregistry = {w.db}\n\nask = {w.sys}   # the registry decides\n"
                        f"deny = {w.inc}/local.h\nread = {w.tmp}/outside\n")
    assert probe(w) == ["base.h yes", "extra.h no", "local.h no", "write no"]
    r = run([kiln_bin, "registry", "stats"], env=w.env)
    assert r.returncode == 0 and str(w.db) in r.stdout
    # The command line wins: its rules come after the configuration's.
    assert probe(w, "--allow", f"{w.inc}/local.h", "--allow", f"{w.tmp}/outside", "--deps", "extra") == \
        ["base.h yes", "extra.h yes", "local.h yes", "write yes"]


def test_command_line_and_environment_override_the_registry(world, kiln_bin, tmp_path):
    w = world
    w.config.write_text(f"registry = {tmp_path}/no-such.db\n")
    r = run([kiln_bin, "registry", "stats"], env=w.env)
    assert r.returncode == 1 and f"{tmp_path}/no-such.db" in r.stderr
    assert run([kiln_bin, "registry", "--db", w.db, "stats"], env=w.env).returncode == 0
    env = dict(w.env, KILN_DB=str(w.db))
    assert run([kiln_bin, "registry", "stats"], env=env).returncode == 0


def test_policy_from_the_config_and_its_replacement(world, tmp_path):
    w = world
    p1, p2 = tmp_path / "one.policy", tmp_path / "two.policy"
    p1.write_text(f"ask {w.sys}\ndeny {w.inc}/base.h\n")
    p2.write_text(f"ask {w.sys}\n")
    w.config.write_text(f"registry = {w.db}\npolicy = {p1}\n")
    assert probe(w)[:3] == ["base.h no", "extra.h no", "local.h yes"]
    assert probe(w, "--policy", p2)[:3] == ["base.h yes", "extra.h no", "local.h yes"]


def test_home_and_xdg_config_home(world, kiln_bin, tmp_path):
    if pathlib.Path("/etc/kiln/config").exists():
        pytest.skip("this machine has an /etc/kiln/config")
    w = world
    home = tmp_path / "home"
    (home / ".config" / "kiln").mkdir(parents=True)
    (home / "reg").mkdir()
    os.link(w.db, home / "reg" / "r.db")
    (home / ".config" / "kiln" / "config").write_text("registry = ~/reg/r.db\n")
    env = dict(w.env, HOME=str(home))
    env.pop("KILN_CONFIG")
    env.pop("XDG_CONFIG_HOME", None)
    r = run([kiln_bin, "registry", "stats"], env=env)
    assert r.returncode == 0, r.stderr
    assert f"{home}/reg/r.db" in r.stdout
    # XDG_CONFIG_HOME takes the place of ~/.config
    xdg = tmp_path / "xdg"
    (xdg / "kiln").mkdir(parents=True)
    (xdg / "kiln" / "config").write_text(f"registry = {tmp_path}/elsewhere.db\n")
    r = run([kiln_bin, "registry", "stats"], env=dict(env, XDG_CONFIG_HOME=str(xdg)))
    assert r.returncode == 1 and f"{tmp_path}/elsewhere.db" in r.stderr


@pytest.mark.parametrize("text,msg", [
    ("alow = /srv\n", ":1: unknown key 'alow'"),
    ("# fine\nregistry /x\n", ":2: expected 'key = value'"),
    ("allow = srv/relative\n", ":1: allow takes an absolute path (or ~/...), not 'srv/relative'"),
])
def test_errors_name_the_file_and_line(world, kiln_bin, text, msg):
    w = world
    w.config.write_text(text)
    for cmd in (["registry", "stats"], ["trace", "--db", w.db, "--", "true"]):
        r = run([kiln_bin, *cmd], env=w.env, cwd=w.build)
        assert r.returncode == 2, r.stderr
        assert f"{w.config}{msg}" in r.stderr
        assert r.stderr.count("\n") == 1


def test_empty_kiln_config_reads_nothing(world, kiln_bin):
    env = dict(world.env, KILN_CONFIG="", KILN_DB=str(world.db))
    world.config.write_text("nonsense\n")
    assert run([kiln_bin, "registry", "stats"], env=env).returncode == 0

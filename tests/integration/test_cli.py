"""One command-line discipline for every kiln command (src/common/cliopt.h):
--help and --version everywhere, `kiln help CMD` = `kiln CMD --help`, and one
form of usage error: a single line on stderr, "kiln CMD: MESSAGE; see 'kiln
CMD --help'", nothing on stdout, exit status 2."""
import re

import pytest

from conftest import ROOT, run

# Every command a user can type, as the words before its options.
COMMANDS = [["trace"], ["registry"], ["meta"], ["meta", "run"], ["meta", "serve"],
            ["meta", "stats"], ["meta", "stop"], ["shm"], ["shm", "create"], ["shm", "demo"]]

# A missing argument of each command, and what the one line says.
MISSING = [
    (["trace"], "kiln trace", "no command given"),
    (["trace", "--deps", "x", "--"], "kiln trace", "no command given"),
    (["trace", "--db"], "kiln trace", "option '--db' needs a value (FILE)"),
    (["trace", "-o"], "kiln trace", "option '-o' needs a value (FILE)"),
    (["registry"], "kiln registry", "no command given"),
    (["registry", "owner"], "kiln registry", "owner: name at least one PATH"),
    (["registry", "files"], "kiln registry", "files: name one PKG"),
    (["meta"], "kiln meta", "name the TOOL(s) and the BINARY"),
    (["meta", "types"], "kiln meta", "name the BINARY after the tools"),
    (["meta", "types", "/bin/true", "--type"], "kiln meta", "option '--type' needs a value (NAME)"),
    (["meta", "run"], "kiln meta", "run: no command given"),
    (["meta", "serve", "--socket"], "kiln meta", "option '--socket' needs a value (PATH)"),
    (["shm"], "kiln shm", "no command given"),
    (["shm", "create"], "kiln shm", "create: name the map's PATH"),
    (["shm", "get", "map"], "kiln shm", "get: name its KEY"),
    (["shm", "put", "map", "k"], "kiln shm", "put: name its VALUE"),
]


def changelog_version():
    first = (ROOT / "debian" / "changelog").read_text().splitlines()[0]
    return re.match(r"kiln \(([^)]+)\)", first).group(1)


def usage_error(r, cmd, msg):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert r.stderr == f"{cmd}: {msg}; see '{cmd} --help'\n"


def test_help_lists_every_command(kiln_bin):
    r = run([kiln_bin, "--help"])
    assert r.returncode == 0
    for name in ("trace", "registry", "meta", "shm", "help"):
        assert f"  {name} " in r.stdout
    assert run([kiln_bin, "help"]).stdout == r.stdout


def test_version(kiln_bin):
    r = run([kiln_bin, "--version"])
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(f"kiln {changelog_version()}")
    assert r.stdout.count("\n") == 1


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_every_command_has_help_and_version(kiln_bin, words):
    r = run([kiln_bin, *words, "--help"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: kiln " + words[0]) and r.stderr == ""
    assert "--help" in r.stdout and "--version" in r.stdout
    assert run([kiln_bin, *words, "-h"]).stdout == r.stdout
    v = run([kiln_bin, *words, "--version"])
    assert v.returncode == 0 and v.stdout == run([kiln_bin, "--version"]).stdout


@pytest.mark.parametrize("words", [["trace"], ["registry"], ["meta"], ["shm"]], ids=" ".join)
def test_help_command_is_the_commands_help(kiln_bin, words):
    assert run([kiln_bin, "help", *words]).stdout == run([kiln_bin, *words, "--help"]).stdout


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("bad", ["--frobnicate", "--frobnicate=1", "-Z"])
def test_unknown_option(kiln_bin, words, bad):
    cmd = "kiln " + words[0]
    tail = ["--", "true"] if words in (["trace"], ["meta", "run"]) else []
    r = run([kiln_bin, *words, bad, *tail])
    usage_error(r, cmd, f"unknown option '{bad.split('=')[0]}'")


@pytest.mark.parametrize("args,cmd,msg", MISSING, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_missing_argument(kiln_bin, args, cmd, msg):
    usage_error(run([kiln_bin, *args]), cmd, msg)


def test_flag_given_a_value(kiln_bin):
    usage_error(run([kiln_bin, "trace", "--strict=yes", "--", "true"]), "kiln trace",
                "option '--strict' takes no value")


def test_unknown_command(kiln_bin):
    usage_error(run([kiln_bin, "frobnicate"]), "kiln", "unknown command 'frobnicate'")
    usage_error(run([kiln_bin, "help", "frobnicate"]), "kiln", "unknown command 'frobnicate'")
    usage_error(run([kiln_bin, "registry", "frob"]), "kiln registry", "unknown command 'frob'")
    usage_error(run([kiln_bin, "shm", "frob"]), "kiln shm", "unknown command 'frob'")
    usage_error(run([kiln_bin, "meta", "nosuchtool", "/bin/true"]), "kiln meta",
                "unknown tool 'nosuchtool'")


def test_no_command_is_usage_error(kiln_bin):
    usage_error(run([kiln_bin]), "kiln", "no command given")
    usage_error(run([kiln_bin, "--frob"]), "kiln", "unknown option '--frob'")


def test_option_syntaxes_agree(kiln_bin, tmp_path):
    """--name VALUE, --name=VALUE, -xVALUE, -x VALUE mean the same everywhere."""
    outs = []
    for i, form in enumerate([["-o", "{}"], ["-o{}"], ["--output", "{}"], ["--output={}"]]):
        path = tmp_path / f"t{i}.txt"
        args = [a.format(path) for a in form]
        r = run([kiln_bin, "meta", "types", kiln_bin, "--type", "struct cliopt", *args])
        assert r.returncode == 0, r.stderr
        outs.append(path.read_text().replace(str(path), ""))
    assert len(set(outs)) == 1 and "member name" in outs[0]

"""The bash completion (completions/kiln), driven as bash drives it: commands,
options (read from each command's --help), option values, package names
(from `kiln registry packages`), meta tools, and the command a build runs."""
import os
import shutil

import pytest

from conftest import ROOT, run

MANIFEST = """Package: libtool-rt
Version: 1
Files:
 /opt/kt/lib.so

Package: libthing
Version: 1
Files:
 /opt/kt/thing.so

Package: tool
Version: 1
Files:
 /opt/kt/tool
"""


@pytest.fixture(scope="module")
def complete(kiln_bin, tmp_path_factory):
    if not shutil.which("bash"):
        pytest.skip("no bash")
    tmp = tmp_path_factory.mktemp("completion")
    (tmp / "m").write_text(MANIFEST)
    db = tmp / "r.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", tmp / "m"])
    assert r.returncode == 0, r.stderr

    def complete(*words, env_db=True):
        """COMPREPLY for the command line WORDS, the last one being completed."""
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in (str(kiln_bin),) + words)
        script = (f'source "{ROOT}/completions/kiln"; COMP_WORDS=({quoted}); '
                  f'COMP_CWORD={len(words)}; _kiln; printf "%s\\n" "${{COMPREPLY[@]}}"')
        env = dict(os.environ)
        env.pop("KILN_DB", None)
        if env_db:
            env["KILN_DB"] = str(db)
        r = run(["bash", "-c", script], env=env)
        assert r.returncode == 0, r.stderr
        return sorted(filter(None, r.stdout.split("\n")))
    complete.db = db
    return complete


def test_commands_and_help(complete):
    assert complete("tr") == ["trace"]
    assert complete("") == sorted(["trace", "registry", "meta", "help", "shm", "--help", "--version"])
    assert complete("help", "re") == ["registry"]


def test_options_come_from_the_commands_help(complete):
    assert complete("trace", "--no-") == ["--no-cache", "--no-recall", "--no-refresh"]
    assert complete("trace", "--js") == ["--json"]
    assert complete("registry", "--ou") == ["--output"]
    assert complete("meta", "types", "x", "--for") == ["--format"]
    assert complete("meta", "run", "--max") == ["--max-memory"]
    assert complete("meta", "serve", "--idle") == ["--idle-timeout"]


def test_option_values(complete):
    assert complete("trace", "--profile", "") == ["chroot", "host"]
    assert complete("trace", "--unknown", "h") == ["hide"]
    assert complete("meta", "types", "x", "--format", "") == ["c", "json", "text"]
    assert complete("meta", "types", "x", "-f", "j") == ["json"]


def test_package_names_from_the_registry(complete):
    assert complete("trace", "--deps", "lib") == ["libthing", "libtool-rt"]
    assert complete("trace", "--deps", "tool,libto") == ["tool,libtool-rt"]
    assert complete("registry", "files", "t") == ["tool"]
    assert complete("registry", "rdeps", "libth") == ["libthing"]
    # --db on the line is the registry asked
    assert complete("registry", "--db", str(complete.db), "deps", "lib", env_db=False) == \
        ["libthing", "libtool-rt"]


def test_subcommands_tools_and_the_build_command(complete):
    assert complete("registry", "im") == ["import"]
    assert complete("registry", "import", "") == ["dpkg", "manifest"]
    assert complete("meta", "fr") == ["frames"]
    assert complete("meta", "types,sy") == ["types,syscalls"]
    assert complete("shm", "va") == ["validate"]
    assert "make" in complete("trace", "--deps", "tool", "--", "mak")
    assert "make" in complete("meta", "run", "mak")
    # after the command's name, its arguments are files: not kiln's options
    assert complete("trace", "--", "make", "--no-") == []

"""The man pages (man/*.scd, built into build/man by scdoc): each renders
through man -l without a warning, each documents every option its command's
--help lists (the option tables of src/cli and src/meta/cli.c), and kiln(5)
documents exactly the configuration keys kiln accepts."""
import os
import re
import shutil

import pytest

from conftest import BUILD, ROOT, run

PAGES = {"kiln.1": None, "kiln-trace.1": [["trace"]], "kiln-registry.1": [["registry"]],
         "kiln-meta.1": [["meta"], ["meta", "run"], ["meta", "serve"], ["meta", "stats"]],
         "kiln.5": None}


def help_options(kiln_bin, words):
    r = run([kiln_bin, *words, "--help"])
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"^  (?:-\w, |    )--([a-z0-9-]+)", r.stdout, re.M)) - {"help", "version"}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders_without_warnings(page):
    if not shutil.which("man"):
        pytest.fail("man is missing (man-db: debian/control's Build-Depends <!nocheck>)")
    path = BUILD / "man" / page
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", LC_ALL="C.UTF-8")
    r = run(["man", "--warnings", "-l", path], env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    name = page.rsplit(".", 1)[0]
    assert re.search(rf"^NAME\n\s+{re.escape(name)} - ", r.stdout, re.M)
    for section in ("SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
        assert f"\n{section}\n" in r.stdout, section


@pytest.mark.parametrize("page", [p for p, cmds in sorted(PAGES.items()) if cmds])
def test_page_documents_every_option(kiln_bin, page):
    text = (ROOT / "man" / (page + ".scd")).read_text()
    documented = set(re.findall(r"\*--([a-z0-9-]+)\*", text))
    for words in PAGES[page]:
        missing = help_options(kiln_bin, words) - documented
        assert not missing, f"{page} lacks {sorted(missing)} of kiln {' '.join(words)} --help"


def test_kiln_5_documents_the_configuration_keys(kiln_bin, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("nosuchkey = /x\n")
    r = run([kiln_bin, "registry", "stats"], env=dict(os.environ, KILN_CONFIG=str(cfg)))
    known = re.search(r"\(known: ([a-z, ]+);", r.stderr).group(1).split(", ")
    text = (ROOT / "man" / "kiln.5.scd").read_text()
    keys = text[text.index("# KEYS"):text.index("# EXAMPLE")]
    assert set(re.findall(r"\*(\w+)\* =", keys)) == set(known)
    # and each key given in the page's example is accepted
    example = text[text.index("# EXAMPLE"):].split("```")[1]
    cfg.write_text(example)
    r = run([kiln_bin, "registry", "--db", tmp_path / "none.db", "stats"],
            env=dict(os.environ, KILN_CONFIG=str(cfg)))
    assert str(cfg) not in r.stderr, r.stderr

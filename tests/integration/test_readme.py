"""The README's commands run as it shows them: every fenced block marked
`<!-- runnable -->` on the line before is run, in order, in one shell, in a
scratch directory that holds a copy of examples/ (as a checkout would), with
build/ first on PATH, a home directory of its own and no configuration file.
The blocks must succeed, and do what the README says they do."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT

MARK = "<!-- runnable -->"


def runnable_blocks(text):
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        assert lines[i + 1].startswith("```"), f"README line {i + 2}: {MARK} must precede a fence"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        blocks.append("\n".join(lines[i + 2:end]))
    return blocks


def test_the_readme_has_runnable_blocks():
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 4
    assert any("kiln trace" in b for b in blocks) and any("kiln meta" in b for b in blocks)


@pytest.fixture
def scratch(tmp_path):
    for tool in ("dpkg-buildpackage", "dh"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing (debian/control's Build-Depends; run .ci/deps)")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples", symlinks=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KILN_", "XDG_", "MAKE", "MFLAGS", "DEB_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_CONFIG_HOME=str(home / ".config"), KILN_CONFIG="",
               PATH=f"{BUILD}:{env.get('PATH', '/usr/bin:/bin')}")
    env["KILN_TRACE_NO_CACHE"] = os.environ.get("KILN_TRACE_NO_CACHE", "0")
    return work, env


def test_every_runnable_command_runs(scratch):
    work, env = scratch
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    script = ["set -euo pipefail"]
    for i, block in enumerate(blocks):
        script += [f"echo '@@ block {i}'; echo '@@ block {i}' >&2", block]
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True,
                       text=True, timeout=600)
    out = dict(enumerate(re.split(r"^@@ block \d+\n", r.stdout, flags=re.M)[1:]))
    err = dict(enumerate(re.split(r"^@@ block \d+\n", r.stderr, flags=re.M)[1:]))
    failed = len(out) - 1
    assert r.returncode == 0, (f"README block {failed} failed (status {r.returncode}):\n"
                               f"{blocks[failed]}\n--- stdout\n{out.get(failed, '')[-3000:]}\n"
                               f"--- stderr\n{err.get(failed, '')[-3000:]}")
    assert len(out) == len(blocks)
    # What the README says each step does.
    by = {name: next(i for i, b in enumerate(blocks) if pred(b)) for name, pred in [
        ("registry", lambda b: "registry import dpkg" in b),
        ("first build", lambda b: "cp -r examples/kiln-example" in b),
        ("fixed build", lambda b: "zlib1g-dev/" in b),
        ("meta", lambda b: "kiln meta types --type" in b)]}
    assert "zlib1g-dev: /usr/include/zlib.h" in out[by["registry"]]
    assert "checking for zlib.h... no" in out[by["first build"]]
    report = err[by["first build"]][err[by["first build"]].index("kiln trace report"):]
    assert re.search(r"^  1\. zlib1g-dev \(1\)  evidence: read\n    /usr/include/zlib\.h ", report,
                     re.M), report
    assert re.search(r"^=== kiln trace verdict: probably missing: zlib1g-dev ", report, re.M), report
    assert "checking for zlib.h... yes" in out[by["fixed build"]]
    assert "compressed)" in out[by["fixed build"]]
    fixed = err[by["fixed build"]]
    assert not re.search(r"zlib1g-dev \(", fixed[fixed.index("kiln trace report"):], re.M)
    assert re.search(r"^=== kiln trace verdict: Build-Depends look complete", fixed, re.M), fixed
    meta = out[by["meta"]]
    assert "struct greeting size=24" in meta and "member compressed" in meta
    assert re.search(r"^parses\s+1$", meta, re.M), meta
    assert (work.parent / "home" / "src" / "kiln-example" / "meta" / "types.c").is_file()

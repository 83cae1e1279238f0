"""Fixtures of `make check-packages`: real Debian source packages built with
dpkg-buildpackage under kiln trace (slow: minutes, so not in `make check`).
`make check-packages` sets KILN_BUILD to the build directory."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from scratch_area import writable_by_default  # noqa: E402
import kilnconf  # noqa: E402
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))
# Source packages are fetched once and kept, with bench-trace's.
CACHE = pathlib.Path(os.environ.get("KILN_BENCH_CACHE", pathlib.Path.home() / ".cache" / "kiln-bench"))


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 1800)
    return subprocess.run([str(c) for c in cmd], **kw)


@pytest.fixture(scope="session")
def kiln_bin():
    path = BUILD / "kiln"
    if not path.exists():
        pytest.fail(f"{path} not built: run 'make' first")
    return path


def fetch(source, *packages):
    """The unpacked tree of a Debian source package (cached), its build
    dependencies and `packages` installed (tests/packages/fetch-source.sh)."""
    r = run([ROOT / "tests" / "packages" / "fetch-source.sh", CACHE, source, *packages])
    if r.returncode != 0:
        pytest.fail(f"cannot fetch {source} or install its build dependencies:\n{r.stderr[-3000:]}")
    return pathlib.Path(r.stdout.strip()) if source != "-" else None


@pytest.fixture
def scratch():
    """A directory outside every area kiln trace lets a build write (/tmp,
    /var/tmp, ~/.cache): under the build directory."""
    if writable_by_default(BUILD):
        pytest.skip(f"{BUILD} is in an area kiln trace lets builds write: the artifacts "
                    "beside the source tree would pass unchecked")
    base = BUILD / "check-packages"
    base.mkdir(exist_ok=True)
    d = pathlib.Path(tempfile.mkdtemp(prefix="pkg-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def build_env():
    env = dict(os.environ)
    for var in ("TMPDIR", "XDG_CACHE_HOME", "CCACHE_DIR", "NO_COLOR"):
        env.pop(var, None)   # no extra writable area may hide a refusal
    env["HOME"] = "/nonexistent"
    env["DEB_BUILD_OPTIONS"] = "parallel=2"
    return env


def set_build_depends(control, remove=None, add=None):
    """Rewrites the Build-Depends field of a debian/control file: the
    relation naming package `remove` dropped, `add` appended."""
    text = control.read_text()
    m = re.search(r"^Build-Depends:(.*(?:\n[ \t].*)*)", text, re.M)
    assert m, f"no Build-Depends in {control}"
    rels = [r.strip() for r in m.group(1).replace("\n", " ").split(",") if r.strip()]
    if remove:
        kept = [r for r in rels if re.split(r"[\s(\[<:]", r, maxsplit=1)[0] != remove]
        assert len(kept) == len(rels) - 1, f"{remove} is not in Build-Depends: {rels}"
        rels = kept
    if add:
        rels.append(add)
    control.write_text(text[:m.start()] + "Build-Depends: " + ", ".join(rels) + text[m.end():])


# The packages built, and how (test_package_verdicts.py, test_package_modes.py).
EXTRA = "libsqlite3-dev"

CASES = {
    # source package, needed package to remove, whether the build then fails,
    # the declared packages this build does not use with its real
    # Build-Depends (hello's man page ships in the tarball: help2man is
    # not run)
    "hello": ("hello", "texinfo", True, ["help2man"]),
    "zlib": ("zlib", "debhelper", True, []),
    "kilnconf": (None, "zlib1g-dev", False, []),
}


@pytest.fixture(scope="session")
def sources():
    trees = {name: fetch(source) for name, (source, *_rest) in CASES.items() if source}
    fetch("-", EXTRA, "zlib1g-dev", "debhelper")
    return trees


@pytest.fixture(scope="session")
def registry(kiln_bin, sources, tmp_path_factory):
    """This machine's dpkg database, imported after any installation."""
    db = tmp_path_factory.mktemp("registry") / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "dpkg"])
    assert r.returncode == 0, r.stderr
    return db


def tree(name, sources, scratch):
    if name == "kilnconf":
        return pathlib.Path(kilnconf.write_tree(scratch))
    src = sources[name]
    dest = scratch / src.name
    shutil.copytree(src, dest, symlinks=True)
    return dest


def build(kiln_bin, registry, src, *opts):
    r = run([kiln_bin, "trace", "--db", registry, "--deps-from-control", "debian/control",
             "--json", "-o", "../report.json", *opts, "--", "dpkg-buildpackage", "-b", "-uc", "-us"],
            cwd=src, env=build_env())
    report = json.loads((src.parent / "report.json").read_text())
    verdict_line = r.stderr.rstrip("\n").split("\n")[-1]
    assert verdict_line == "=== kiln trace verdict: " + report["verdict"]["text"], r.stderr[-3000:]
    return r, report


def debs(scratch):
    return sorted(p.name for p in scratch.iterdir() if p.name.endswith(".deb"))

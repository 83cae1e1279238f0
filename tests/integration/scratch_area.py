"""Where a test may build a package so that kiln trace's refusals are
real: outside every area its default policy lets a build write."""
import os
import pathlib
import shutil
import tempfile

import pytest

# As conftest.py has them; not imported from it: tests/packages imports this
# module from a conftest of its own.
ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))


def writable_by_default(path):
    """Whether kiln trace's default policy lets a build write under path."""
    areas = ["/tmp", "/var/tmp", "/dev", "/proc", "/sys"]
    areas += [os.environ[v] for v in ("TMPDIR", "XDG_CACHE_HOME", "CCACHE_DIR") if v in os.environ]
    if "HOME" in os.environ:
        areas += [os.path.join(os.environ["HOME"], d) for d in (".cache", ".ccache")]
    real = os.path.realpath(path)
    return any(real == a or real.startswith(a.rstrip("/") + "/") for a in map(os.path.realpath, areas))


@pytest.fixture
def scratch():
    """A directory outside every default writable area (/tmp, /var/tmp,
    ~/.cache): under the build directory, else the checkout."""
    base = next((d / "test-scratch" for d in (BUILD, ROOT) if not writable_by_default(d)), None)
    if base is None:
        pytest.skip(f"{BUILD} and {ROOT} are both in an area kiln trace lets builds write")
    base.mkdir(exist_ok=True)
    d = tempfile.mkdtemp(prefix="pkgbuild-", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)
    try:
        base.rmdir()   # when no other run uses it
    except OSError:
        pass

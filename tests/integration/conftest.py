"""Shared fixtures for kiln's end-to-end tests: they drive the built binaries
exactly as a user would. `make integration` sets KILN_BUILD to the build
directory (build/ or build/san-NAME)."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))


def pytest_addoption(parser):
    parser.addoption("--kiln-no-cache", action="store_true",
                     help="run `kiln trace` without its shared verdict cache (make check "
                          "runs the trace tests in both modes)")


def pytest_configure(config):
    # Every `kiln trace` a test starts inherits this (KILN_TRACE_NO_CACHE=1
    # is --no-cache); set it either way so the caller's environment cannot
    # choose the mode.
    os.environ["KILN_TRACE_NO_CACHE"] = "1" if config.getoption("--kiln-no-cache") else "0"
    # Nothing a test's build asked is recalled by another test's (or run's)
    # next build, and nothing is kept in this user's cache directory:
    # test_trace_recall.py turns recalling on, with a directory of its own.
    os.environ["KILN_TRACE_NO_RECALL"] = "1"
    # No configuration file of this machine's or this user's applies to the
    # tests (man 5 kiln); test_config.py sets its own.
    os.environ["KILN_CONFIG"] = ""


@pytest.fixture(scope="session")
def trace_cached():
    """True when `kiln trace` runs with its verdict cache in this session."""
    return os.environ.get("KILN_TRACE_NO_CACHE") == "0"


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def kiln_bin():
    path = BUILD / "kiln"
    if not path.exists():
        pytest.fail(f"{path} not built: run 'make' first")
    return path


@pytest.fixture(scope="session")
def helper():
    """Path of a helper program built from tests/integration/helpers/NAME.c."""
    def find(name):
        path = BUILD / "tests" / "helpers" / name
        if not path.exists():
            pytest.fail(f"{path} not built")
        return path
    return find


def run(cmd, **kw):
    """Run a command, capture text output, never hang a test run."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([str(c) for c in cmd], **kw)


def as_other_user(fn, uid=65534):
    """Runs fn() in a forked child as another user (root only) and returns
    the bytes it returns; an exception in the child is raised here as an
    AssertionError with its repr."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            os.write(w, b"+" + fn())
            code = 0
        except BaseException as e:  # noqa: BLE001 - tell the parent
            os.write(w, b"!" + repr(e).encode())
        finally:
            os._exit(code)
    os.close(w)
    data = os.read(r, 65536)
    os.close(r)
    os.waitpid(pid, 0)
    assert data[:1] == b"+", data
    return data[1:]

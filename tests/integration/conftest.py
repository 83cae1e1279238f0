"""Shared fixtures for kiln's end-to-end tests: they drive the built binaries
exactly as a user would. `make integration` sets KILN_BUILD to the build
directory (build/ or build/san-NAME)."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))


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

from conftest import run


def test_help_lists_every_command(kiln_bin):
    r = run([kiln_bin, "--help"])
    assert r.returncode == 0
    for name in ("trace", "registry", "meta", "shm"):
        assert f"  {name} " in r.stdout


def test_unknown_command_fails_with_usage(kiln_bin):
    r = run([kiln_bin, "frobnicate"])
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
    assert "usage: kiln" in r.stderr


def test_no_command_is_usage_error(kiln_bin):
    r = run([kiln_bin])
    assert r.returncode == 2
    assert "usage: kiln" in r.stderr

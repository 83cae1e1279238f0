"""Recalled keys (docs/verdict-cache.md, "Recalled keys"): a rebuild of the
same sandbox has the questions the last build asked answered before they
are asked, decided afresh, and its report and --log are what they would be
without: a key recalled but not used is not logged, a key whose answer is
no longer an allowed one (or a tampered file's) is asked and reported as
ever, a bad file is said and replaced, and --no-recall keeps nothing.
conftest.py turns recalling off for every other test; these turn it on with
a cache directory of their own."""
import json
import os
import stat

import pytest

from conftest import run
from test_trace_server import world  # noqa: F401 (fixture)
from test_trace_server_memo import managed


def recall_env(world):
    return dict(os.environ, KILN_TRACE_NO_RECALL="0", XDG_CACHE_HOME=str(world.tmp / "xdg"))


def recall_files(world):
    d = world.tmp / "xdg" / "kiln" / "recall"
    return sorted(d.iterdir()) if d.exists() else []


def traced(kiln_bin, world, script, *extra, env=None, name="r"):
    """kiln trace over the fake system tree (every ancestor an ask-tree, so
    its answers are STABLE); returns (result, JSON report, sorted --log)."""
    b = world.build
    r = run([kiln_bin, "trace", *world.args, *managed(world), *extra, "--json", "-o",
             b / f"{name}.json", "--log", b / f"{name}.log", "--", "sh", "-c", script],
            cwd=b, env=env if env is not None else recall_env(world))
    assert r.returncode == 0, r.stderr
    j = json.loads((b / f"{name}.json").read_text())
    return r, j, sorted((b / f"{name}.log").read_text().splitlines())


def no_pids(findings):
    return [{k: v for k, v in f.items() if k not in ("pid", "first_reached_by", "evidence")}
            for f in findings]


def findings(j):
    return [no_pids(j[k]) for k in ("hidden", "refused_writes", "unknown")]


def script_for(world, *names):
    inc = world.inc
    reads = " ".join(f"{inc}/{n}" for n in names)
    # cat: reads (hidden foo.h, unknown stray.h too); test -e: a stat of
    # an absent path
    return f"cat {reads} >/dev/null 2>&1; test -e {inc}/none.h; ls {inc} >/dev/null; true"


def test_a_rebuild_recalls_what_the_last_build_asked(world, kiln_bin, trace_cached):
    script = script_for(world, "dep.h", "base.h", "dep-link.h", "foo.h", "stray.h")
    r1, j1, log1 = traced(kiln_bin, world, script, name="first")
    r2, j2, log2 = traced(kiln_bin, world, script, name="second")
    _, j3, log3 = traced(kiln_bin, world, script, "--no-recall", name="cold")
    c1, c2 = j1["cache"], j2["cache"]
    if not trace_cached:
        # no map, nothing to recall into; nothing kept either
        assert c2["recalled"] == 0 and c2["recall_used"] == 0 and recall_files(world) == []
        return
    assert c1["recalled"] == 0
    # dep.h, base.h (reads, stats), none.h: STABLE ALLOWs the first build
    # asked; foo.h (hidden) and stray.h (unknown to the registry) are not
    assert c2["recalled"] >= 3 and c2["recall_used"] == c2["recalled"]
    assert c2["round_trips"] <= c1["round_trips"] - 3
    # the same report and log, the same count of first askings
    assert findings(j2) == findings(j1) == findings(j3)
    assert any(h["path"] == f"{world.inc}/foo.h" for h in j2["hidden"])
    assert any(u["path"] == f"{world.inc}/stray.h" for u in j2["unknown"])
    assert log2 == log1 == log3
    assert j2["totals"]["queries"] == j1["totals"]["queries"]
    assert j2["totals"]["paths"] == j1["totals"]["paths"]
    # one file, for this sandbox
    files = recall_files(world)
    assert len(files) == 1 and files[0].read_text().startswith("kiln-recall 1\n")
    assert f"{world.inc}/foo.h" not in files[0].read_text()


def test_keys_recalled_but_not_used_are_not_logged(world, kiln_bin, trace_cached):
    if not trace_cached:
        pytest.skip("nothing is recalled without the cache")
    traced(kiln_bin, world, script_for(world, "dep.h", "base.h"), name="first")
    few = f"cat {world.inc}/base.h >/dev/null"
    _, j, log = traced(kiln_bin, world, few, name="second")
    _, jc, logc = traced(kiln_bin, world, few, "--no-recall", name="cold")
    assert j["cache"]["recalled"] > j["cache"]["recall_used"] >= 1
    assert log == logc and f"{world.inc}/dep.h" not in "\n".join(log)
    assert j["totals"]["queries"] == jc["totals"]["queries"]
    # what the next build recalls: what this one used and asked
    text = recall_files(world)[0].read_text()
    assert f"{world.inc}/base.h" in text and f"{world.inc}/dep.h" not in text


def test_a_recalled_key_is_decided_again(world, kiln_bin, trace_cached):
    if not trace_cached:
        pytest.skip("nothing is recalled without the cache")
    inc = world.inc
    traced(kiln_bin, world, script_for(world, "dep.h", "base.h"), name="first")
    # The same sandbox's file, but dep.h now hidden by a rule: recalled,
    # decided, not put in; the build's reader is told it is absent and the
    # report names it, first reached by cat.
    r, j, log = traced(kiln_bin, world, f"cat {inc}/dep.h; cat {inc}/base.h >/dev/null; true",
                       "--deny", f"{inc}/dep.h", name="second")
    assert "No such file or directory" in r.stderr
    hidden = [h for h in j["hidden"] if h["path"] == f"{inc}/dep.h"]
    assert hidden and "cat" in json.dumps(hidden[0])
    assert j["cache"]["recall_used"] >= 1  # base.h
    # A file that names a hidden one and a file of the build directory:
    # neither answered ahead.
    f = recall_files(world)[0]
    f.write_text(f"kiln-recall 1\n2 0 {inc}/foo.h\n2 0 {world.build}/mine.h\n")
    (world.build / "mine.h").write_text("mine\n")
    r, j, _ = traced(kiln_bin, world, f"cat {inc}/foo.h; cat mine.h >/dev/null", name="third")
    assert "No such file or directory" in r.stderr
    assert j["cache"]["recalled"] == 0
    assert [h["path"] for h in j["hidden"]] == [f"{inc}/foo.h"]
    assert "cat" in json.dumps(j["hidden"][0])


def test_a_bad_recall_file_is_said_and_replaced(world, kiln_bin, trace_cached):
    if not trace_cached:
        pytest.skip("nothing is recalled without the cache")
    script = script_for(world, "dep.h", "base.h")
    _, _, log1 = traced(kiln_bin, world, script, name="first")
    f = recall_files(world)[0]
    for bad in ("garbage\n", "kiln-recall 1\n4 0 /etc/passwd\n", "kiln-recall 1\n1 0 nope\n"):
        f.write_text(bad)
        r, j, log = traced(kiln_bin, world, script, name="bad")
        assert f"kiln trace: {f}: " in r.stderr and "ignored" in r.stderr
        assert j["cache"]["recalled"] == 0 and log == log1
        assert f.read_text().startswith("kiln-recall 1\n")  # this build's, for the next
    # not a regular file: not read, not waited on, not replaced
    f.unlink()
    os.mkfifo(f)
    r, j, log = traced(kiln_bin, world, script, name="fifo")
    assert "not a regular file" in r.stderr and "not keeping this build's questions" in r.stderr
    assert stat.S_ISFIFO(f.lstat().st_mode) and log == log1


def test_no_recall_keeps_nothing(world, kiln_bin):
    script = script_for(world, "dep.h")
    traced(kiln_bin, world, script, "--no-recall", name="flag")
    traced(kiln_bin, world, script, env=dict(recall_env(world), KILN_TRACE_NO_RECALL="1"),
           name="env")
    assert recall_files(world) == []
    # a home that does not exist (sbuild's HOME=/sbuild-nonexistent) is
    # not made
    home = world.tmp / "no-such-home"
    env = dict(os.environ, KILN_TRACE_NO_RECALL="0", HOME=str(home))
    env.pop("XDG_CACHE_HOME", None)
    r, _, _ = traced(kiln_bin, world, script, env=env, name="nohome")
    assert not home.exists() and "recall" not in r.stderr


def test_many_processes_use_a_recalled_key_once(world, kiln_bin, helper, trace_cached):
    if not trace_cached:
        pytest.skip("nothing is recalled without the cache")
    inc = world.inc
    paths = [inc / "dep.h", inc / "base.h", inc / "dep-link.h", inc / "none.h", inc]
    many = " & ".join([f"{helper('hammer')} 4 20 " + " ".join(map(str, paths))] * 6) + "; wait"
    _, j1, log1 = traced(kiln_bin, world, many, "--no-recall", name="cold")
    traced(kiln_bin, world, f"{helper('hammer')} 1 1 " + " ".join(map(str, paths)), name="first")
    _, j2, log2 = traced(kiln_bin, world, many, name="second")
    assert j2["cache"]["recalled"] > 0 and j2["cache"]["recall_used"] == j2["cache"]["recalled"]
    # (not the count of first askings: processes racing to ask one key
    # first each count, with or without recalling)
    assert log2 == log1

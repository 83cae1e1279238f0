"""The trace server's walk memo (src/trace/service/sandbox.c) never answers
from a stale resolution: paths outside registry-managed trees are resolved
afresh on every query, and a run with the memo (the default) gives the same
verdicts and the same report as one without it (KILN_TRACE_NO_MEMO=1)."""
import os
import re

import trace_proto as tp
from tracesrv import TracedWait
from test_trace_server import connect, traced, world  # noqa: F401 (fixtures)


def managed(world):
    """Rules making every ancestor of the fake system tree an ask-tree (by
    default they lie in /tmp, an allowed area the build may rename things
    in, so no walk through them would ever be memoised). The build
    directory stays allowed."""
    return [a for d in reversed(world.tmp.parents) if str(d) != "/" for a in ("--ask", d)]


def test_build_dir_path_that_becomes_a_symlink_is_hidden(world, traced):
    b, inc, lib = world.build, world.inc, world.lib
    (b / "x.h").write_text("mine\n")
    (b / "sub").mkdir()
    (b / "sub" / "cache.bin").write_text("mine\n")
    t = traced(*managed(world))
    c = connect(t)
    for _ in range(2):
        assert c.ask(f"{b}/x.h", tp.READ) == tp.ALLOW
        assert c.ask(f"{b}/sub/cache.bin", tp.READ) == tp.ALLOW
    # Between two queries the last component becomes a symlink to a hidden
    # file, and an intermediate directory a symlink to a hidden directory.
    (b / "x.h").unlink()
    (b / "x.h").symlink_to(inc / "foo.h")
    (b / "sub" / "cache.bin").unlink()
    (b / "sub").rmdir()
    (b / "sub").symlink_to(lib / "foo-plugins")
    assert c.ask(f"{b}/x.h", tp.READ) == tp.HIDE
    assert c.ask(f"{b}/sub/cache.bin", tp.READ) == tp.HIDE
    # And back: visible again.
    (b / "x.h").unlink()
    (b / "x.h").write_text("mine again\n")
    assert c.ask(f"{b}/x.h", tp.READ) == tp.ALLOW
    rc, err = t.finish()
    assert "libfoo-dev (2)" in err


def test_managed_tree_link_into_the_build_dir_is_rechecked(world, traced):
    # An unlisted symlink in the managed tree (transparent) that leads into
    # the build directory: its walk visits the build directory, so it is
    # never memoised.
    b, inc = world.build, world.inc
    (b / "target.h").write_text("mine\n")
    (inc / "to-build.h").symlink_to(b / "target.h")
    t = traced(*managed(world))
    c = connect(t)
    assert c.ask(f"{inc}/to-build.h", tp.READ) == tp.ALLOW
    assert c.ask(f"{inc}/to-build.h", tp.READ) == tp.ALLOW
    (b / "target.h").unlink()
    (b / "target.h").symlink_to(inc / "foo.h")
    assert c.ask(f"{inc}/to-build.h", tp.READ) == tp.HIDE
    t.finish()


def test_report_only_write_into_a_managed_tree_is_seen(world, traced):
    # --report-only lets a write into the managed tree through: what was
    # memoised as missing must be seen once it exists.
    inc = world.inc
    t = traced("--report-only", *managed(world))
    c = connect(t)
    assert c.ask(f"{inc}/new.h", tp.READ) == tp.ALLOW
    assert c.ask(f"{inc}/new.h", tp.READ) == tp.ALLOW
    assert c.ask(f"{inc}/new.h", tp.CREATE | tp.WRITE) == tp.ALLOW
    (inc / "new.h").write_text("made by the build\n")
    assert c.ask(f"{inc}/new.h", tp.READ) == tp.ALLOW
    rc, err = t.finish()
    assert rc == 0, err
    unknown = err.split("unknown files", 1)[1].split("exec events", 1)[0]
    assert f"{inc}/new.h  [-r-----]" in unknown   # seen as existing


def query_set(world):
    b, inc, lib, sys_ = world.build, world.inc, world.lib, world.sys
    (b / "to-foo").symlink_to(inc / "foo.h")
    (b / "incdir").symlink_to(inc)
    (b / "l1").symlink_to("l2")
    (b / "l2").symlink_to("../sys/usr/include/dep-link.h")
    (b / "own.c").write_text("x\n")
    (inc / "rel-up").symlink_to("../lib/foo-plugins")  # unlisted, in the managed tree
    (inc / "loop").symlink_to("loop")
    paths = [
        f"{inc}/dep.h", f"{inc}/foo.h", f"{inc}/base.h", f"{inc}/stray.h", f"{inc}/missing.h",
        f"{inc}/foo-link.h", f"{inc}/dep-link.h", f"{inc}/rel-up/cache.bin", f"{inc}/rel-up",
        f"{inc}/rel-up/", f"{inc}/loop", f"{inc}/dep.h/", f"{inc}/./dep.h", f"{inc}/../include/foo.h",
        f"{inc}/nodir/../dep.h", f"{inc}/", f"{lib}/foo-plugins/cache.bin", f"{sys_}/usr",
        f"{b}/to-foo", f"{b}/incdir/foo.h", f"{b}/incdir/dep.h", f"{b}/l1", f"{b}/own.c",
        f"{b}/new.o", f"/proc/self/root{inc}/foo.h", f"/proc/self/cwd/own.c", "/dev/null", "/",
    ]
    classes = [tp.STAT, tp.READ, tp.WRITE, tp.EXEC, tp.CREATE | tp.WRITE, tp.DELETE]
    return [(p, a, f) for p in paths for a in classes for f in (0, tp.NOFOLLOW)]


def run_queries(kiln_bin, world, queries, env):
    t = TracedWait(kiln_bin, world.build, [*world.args, *managed(world)], env=env)
    try:
        c = connect(t)
        # Each query twice: the second one from the memo when it is on.
        answers = [(c.ask(p, a, f), c.ask(p, a, f)) for p, a, f in queries]
        answers.append(tuple(c.ask_dir(str(world.inc), sorted(os.listdir(world.inc)))))
        c.close()
        rc, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, err
    return answers, re.sub(r"server CPU [0-9.]+ s", "server CPU", err)


def test_memo_and_no_memo_agree(world, kiln_bin):
    queries = query_set(world)
    env = dict(os.environ)
    env.pop("KILN_TRACE_NO_MEMO", None)
    memo, memo_report = run_queries(kiln_bin, world, queries, {**env, "KILN_TRACE_MEMO_STATS": "1"})
    plain, plain_report = run_queries(kiln_bin, world, queries,
                                      {**env, "KILN_TRACE_NO_MEMO": "1", "KILN_TRACE_MEMO_STATS": "1"})
    for q, m, p in zip(queries, memo, plain):
        assert m == p, f"query {q}: memo {m}, without memo {p}"
        assert m[0] == m[1], f"query {q}: first {m[0]}, again {m[1]}"
    assert memo[-1] == plain[-1]
    stats = re.search(r"walk memo on: (\d+) of", memo_report)
    assert stats and int(stats.group(1)) > 0, memo_report   # the memo was used
    assert "walk memo off: 0 of" in plain_report
    strip = lambda r: re.sub(r"kiln trace: server: walk memo.*\n", "", r)  # noqa: E731
    assert strip(memo_report) == strip(plain_report)

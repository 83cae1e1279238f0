"""The verdict cache changes nothing a maintainer sees (`make check-packages`).

Each package of CASES (conftest.py) is built twice from fresh copies,
with the verdict cache and with `--no-cache`, and the two runs must agree on
every finding of the JSON report (hidden, refused, unknown paths) and on
every line of `--log` (the paths the build touched, with their access
flags and verdicts). Comparing the logs of nano's build this way found two
faults the trace suite had missed: a path ending in '..' answered from the
cache and lost from the log, and a hard link's source checked as read.

Builds make names of their own that differ from run to run: mktemp's random
letters, configure's `conf$$` files, libtool's `tmpwrk$$`. So lines are
first matched exactly (the build directory's path replaced by TOP); only
what is left on either side is compared again with every digit run, then
every run of three or more word characters, replaced. A line that only one
mode logged stays unmatched either way.
"""
import collections
import re

import pytest

from conftest import CASES, build, tree

WORD = re.compile(r"\w{3,}")


def loose(line):
    flags, verdict, path = line.split(" ", 2)
    parts = (WORD.sub("X", re.sub(r"\d+", "0", p)) for p in path.split("/"))
    return f"{flags} {verdict} {'/'.join(parts)}"


def with_top(line, top):
    """A log line with the build directory's path replaced by TOP."""
    flags, verdict, path = line.split(" ", 2)
    if path == top or path.startswith(top + "/"):
        path = "TOP" + path[len(top):]
    return f"{flags} {verdict} {path}"


def unmatched(mine, theirs, top_mine, top_theirs):
    """Log lines that differ between two runs once random names are set
    aside: (only in mine, only in theirs), loosened."""
    a = collections.Counter(with_top(ln, top_mine) for ln in mine)
    b = collections.Counter(with_top(ln, top_theirs) for ln in theirs)
    ra = collections.Counter(loose(k) for k in (a - b).elements())
    rb = collections.Counter(loose(k) for k in (b - a).elements())
    return sorted((ra - rb).elements()), sorted((rb - ra).elements())


def findings(report, top):
    """The report's hidden, refused and unknown paths, as log-like lines."""
    return sorted(with_top(f"{kind} - {e['path']}", top)
                  for kind in ("hidden", "refused_writes", "unknown") for e in report.get(kind, []))


def test_random_names_are_set_aside_and_nothing_else():
    top_a, top_b = "/b/one/pkg-1.0", "/b/two/pkg-1.0"
    a = ["s------ allow /tmp/ccAb3dEf.s", "s------ allow /b/one/pkg-1.0/conf1234.c",
         "sr----- allow /b/one/pkg-1.0/src/..", "s------ hide /usr/include/zlib.h"]
    b = ["s------ allow /tmp/cc999999.s", "s------ allow /b/two/pkg-1.0/conf77.c",
         "s------ hide /usr/include/zlib.h"]
    assert unmatched(a, b, top_a, top_b) == (["sr----- allow X/X/.."], [])
    # a verdict or a flag that differs is never set aside
    b2 = b + ["sr----- allow /b/two/pkg-1.0/src/.."]
    b2[2] = "s------ allow /usr/include/zlib.h"
    only_a, only_b = unmatched(a, b2, top_a, top_b)
    assert only_a == ["s------ hide /X/X/X.h"] and only_b == ["s------ allow /X/X/X.h"]


@pytest.mark.parametrize("name", CASES)
def test_cached_and_uncached_builds_agree(kiln_bin, registry, sources, scratch, name):
    runs = {}
    for mode, opts in (("cached", []), ("nocache", ["--no-cache"])):
        (scratch / mode).mkdir()
        src = tree(name, sources, scratch / mode)
        log = scratch / mode / "access.log"
        r, rep = build(kiln_bin, registry, src, "--log", log, *opts)
        assert r.returncode == 0, r.stderr[-5000:]
        runs[mode] = (str(src), rep, log.read_text().splitlines())

    (top_c, rep_c, log_c), (top_n, rep_n, log_n) = runs["cached"], runs["nocache"]
    assert rep_c["cache"]["enabled"] and rep_c["cache"]["hits"] > 0, rep_c["cache"]
    assert not rep_n["cache"]["enabled"], rep_n["cache"]
    assert findings(rep_c, top_c) == findings(rep_n, top_n)
    assert rep_c["verdict"]["text"] == rep_n["verdict"]["text"]
    assert len(log_c) > 1000
    only_cached, only_uncached = unmatched(log_c, log_n, top_c, top_n)
    assert (only_cached, only_uncached) == ([], []), "\n".join(
        [f"{len(only_cached)} lines only with the cache:", *only_cached[:20],
         f"{len(only_uncached)} lines only without:", *only_uncached[:20]])

"""The pure half of `make bench-trace`: reading what the measured programs
print (kiln's JSON report, trace_micro's and calibrate's "key value" lines),
turning the rounds into medians and ratios, printing the table and writing
bench/out/trace.json. No timing, no processes: tests/integration/
test_bench_harness.py feeds it fake input so it cannot rot unnoticed."""
import json
import math
import os
import statistics

from paired import median_interval

# (key, label) of each variant of a real build; the key is the middle of the
# JSON names (hello_cached_ratio), "plain" is the baseline (hello_native_s).
VARIANTS = [
    ("plain", "plain"),
    ("empty", "empty LD_PRELOAD"),
    ("cached", "kiln trace"),
    ("cold", "kiln trace --no-recall"),
    ("nocache", "kiln trace --no-cache"),
    ("fakeroot", "fakeroot"),
    ("pseudo", "pseudo"),
    ("strace", "strace -f -e trace=file"),
    ("chroot", "kiln trace, default profile"),
]
# cached, cold and nocache run with --profile host, in the environment every
# variant gets; chroot is kiln trace as a maintainer runs it (the default
# profile: the invoking user's home hidden, but for the way to the build
# tree). Only make bench-trace-deb runs it by default. cached and chroot
# recall what an untimed run before the rounds asked (a rebuild of the same
# package); cold is a first build (--no-recall: nothing recalled).
KILN_VARIANTS = ("cached", "cold", "nocache")
# The other tools, for comparison: far from any target (fakeroot aside, many
# times kiln's cost), so they may run in fewer rounds (--tool-rounds) and
# leave the time to the rounds that decide the targets.
TOOL_VARIANTS = ("fakeroot", "pseudo", "strace")
REPORT_VARIANTS = KILN_VARIANTS + ("chroot",)
DEFAULT_VARIANTS = tuple(v for v, _ in VARIANTS if v != "chroot")
# The report's "cache" object as agreed with the verdict cache (issue 8).
CACHE_KEYS = ("hits", "misses", "round_trips", "listings", "map_bytes", "entries")


def key_values(text, what):
    """'key value' lines (trace_micro, calibrate) as a dict of floats."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{what}: unexpected line {line!r}")
        try:
            out[parts[0]] = float(parts[1])
        except ValueError:
            raise ValueError(f"{what}: {parts[0]} is not a number: {parts[1]!r}") from None
    if not out:
        raise ValueError(f"{what}: printed nothing")
    return out


def cache_figures(report):
    """The report's cache counters, or None if the report has none (kiln
    before the verdict cache) or they are not all numbers."""
    c = report.get("cache")
    if not isinstance(c, dict) or not isinstance(c.get("enabled"), bool):
        return None
    if not all(isinstance(c.get(k), (int, float)) and not isinstance(c.get(k), bool)
               for k in CACHE_KEYS):
        return None
    return {"enabled": c["enabled"], **{k: c[k] for k in CACHE_KEYS}}


def report_figures(report, want_mode="enforce"):
    """What a run of kiln trace reported: totals, cache counters if any, and
    the set of findings (hidden, refused, unknown paths) to compare modes.
    Raises ValueError when the report says the build did not succeed."""
    if report.get("exit_status") != 0 or report.get("mode") != want_mode:
        raise ValueError(f"report says exit_status {report.get('exit_status')!r}, "
                         f"mode {report.get('mode')!r}")
    t = report["totals"]
    res = {"processes": t["processes"], "connections": t["connections"],
           "queries": t["queries"], "server_cpu": t["server_cpu_seconds"],
           "violations": t["violations"]}
    res["findings"] = frozenset(
        (kind, e["path"]) for kind in ("hidden", "refused_writes", "unknown")
        for e in report.get(kind, []))
    cache = cache_figures(report)
    if cache is not None:
        res["cache"] = cache
    return res


def median(xs):
    return statistics.median(xs)


def tool_round_set(rounds, tool_rounds):
    """The rounds (0-based) the tools run in: tool_rounds of them, spread
    evenly over all the rounds, the first and the last included."""
    n = max(1, min(rounds, tool_rounds))
    if n == 1:
        return {0}
    return {round(i * (rounds - 1) / (n - 1)) for i in range(n)}


def build_summary(w, runs, processes=None):
    """Flat figures of workload w from runs {variant: [run, ...]}, each run
    {"wall", "cpu"} plus report_figures() for the kiln variants."""
    res = {}
    plain_s = median(r["wall"] for r in runs["plain"])
    plain_cpu = median(r["cpu"] for r in runs["plain"])
    res[f"{w}_native_s"] = plain_s
    res[f"{w}_native_cpu_s"] = plain_cpu
    for v, _ in VARIANTS[1:]:
        if not runs.get(v):
            continue
        s = median(r["wall"] for r in runs[v])
        cpu = median(r["cpu"] for r in runs[v])
        res[f"{w}_{v}_s"] = s
        res[f"{w}_{v}_cpu_s"] = cpu
        res[f"{w}_{v}_ratio"] = s / plain_s
        res[f"{w}_{v}_cpu_ratio"] = cpu / plain_cpu
    if processes:
        res[f"{w}_processes"] = processes
    # What kiln adds over the empty preload, paired by round (the same
    # round's builds ran minutes apart at most; the rounds drift): the
    # median of the per-round differences.
    # With it, the interval that holds the true median difference at 90%
    # or more (median_interval), and the added-time ratio that interval
    # still guarantees: the run's noise next to its figure.
    res.update(paired_over_empty(w, runs, "wall", ""))
    # The same of the builds' CPU time (every process's user + system, the
    # server's included): what kiln costs the machine, without the idle
    # gaps and scheduling order that move a -j2 build's wall time.
    res.update(paired_over_empty(w, runs, "cpu", "_cpu"))
    for v in REPORT_VARIANTS:
        rs = runs.get(v)
        if not rs:
            continue
        res[f"{w}_{v}_added_s"] = res[f"{w}_{v}_s"] - plain_s
        res[f"{w}_{v}_kiln_processes"] = median(r["processes"] for r in rs)
        res[f"{w}_{v}_queries_per_process"] = median(r["queries"] / r["processes"] for r in rs)
        res[f"{w}_{v}_server_cpu_s"] = median(r["server_cpu"] for r in rs)
        res[f"{w}_{v}_violations"] = median(r["violations"] for r in rs)
        # Cache counters only when every run of the variant reported them:
        # a figure for "n/a" rounds would be made up.
        if all("cache" in r for r in rs):
            cs = [r["cache"] for r in rs]
            res[f"{w}_{v}_round_trips_per_process"] = median(
                c["round_trips"] / r["processes"] for c, r in zip(cs, rs))
            for k in ("hits", "misses", "round_trips", "listings", "map_bytes", "entries"):
                res[f"{w}_{v}_{k}"] = median(c[k] for c in cs)
            looked = [c["hits"] + c["misses"] for c in cs]
            if v != "nocache" and all(looked):
                res[hit_rate_key(w, v)] = median(c["hits"] / n for c, n in zip(cs, looked))
    # The findings of every kiln run against the first --no-cache run's: the
    # cache must not change what the build is shown. The default profile's
    # runs show another sandbox: checked against each other only.
    for name, kiln_runs in compared_runs(runs):
        res[f"{w}_{name}"] = sum(r["findings"] != kiln_runs[0]["findings"] for r in kiln_runs)
    return res


def paired_over_empty(w, runs, measure, tag):
    """{w}_{v}{tag}_over_empty_s (and _lo_s, _hi_s) of each kiln variant v,
    {w}{tag}_over_empty_confidence, and the ratios of --no-cache's addition
    to a rebuild's ({w}_added{tag}_ratio) and to a first build's
    ({w}_cold_added{tag}_ratio), each with the _lo its intervals still
    guarantee: runs[v][i][measure] paired with runs["empty"][i][measure]."""
    res, over = {}, {}
    empty = runs.get("empty")
    for v in REPORT_VARIANTS:
        rs = runs.get(v)
        if empty and rs and len(rs) == len(empty):
            diffs = [r[measure] - e[measure] for r, e in zip(rs, empty)]
            over[v] = median(diffs)
            lo, hi, cover = median_interval(diffs)
            res[f"{w}_{v}{tag}_over_empty_s"] = over[v]
            res[f"{w}_{v}{tag}_over_empty_lo_s"] = lo
            res[f"{w}_{v}{tag}_over_empty_hi_s"] = hi
            res[f"{w}{tag}_over_empty_confidence"] = cover
    for v, name in (("cached", f"added{tag}_ratio"), ("cold", f"cold_added{tag}_ratio")):
        if v in over and "nocache" in over and over[v] > 0:
            res[f"{w}_{name}"] = over["nocache"] / over[v]
            hi = res[f"{w}_{v}{tag}_over_empty_hi_s"]
            if hi > 0:
                res[f"{w}_{name}_lo"] = max(0.0, res[f"{w}_nocache{tag}_over_empty_lo_s"]) / hi
    return res


def hit_rate_key(w, v):
    """hello_hit_rate (the name issue 8 gives), zlib_deb_chroot_hit_rate."""
    return f"{w}_hit_rate" if v == "cached" else f"{w}_{v}_hit_rate"


def compared_runs(runs):
    """(JSON name of the mismatch count, runs whose findings must agree)."""
    groups = [("report_mismatches",
               runs.get("nocache", []) + runs.get("cached", []) + runs.get("cold", [])),
              ("chroot_report_mismatches", runs.get("chroot", []))]
    return [(name, rs) for name, rs in groups if rs]


def finding_differences(runs, limit=10):
    """Human-readable lines naming findings that differ between kiln runs."""
    lines = []
    for name, kiln_runs in compared_runs(runs):
        ref = kiln_runs[0]["findings"]
        first = "--no-cache" if name == "report_mismatches" else "the default profile"
        for i, r in enumerate(kiln_runs):
            for kind, path in sorted(r["findings"] ^ ref):
                side = "only in" if (kind, path) in r["findings"] else "missing from"
                lines.append(f"{kind} {path}: {side} kiln run {i + 1} (run 1 is {first})")
    return lines[:limit]


def micro_summary(runs):
    """runs {mode: [trace_micro output dict, ...]} for native, cached, nocache."""
    res = {}
    for mode, rs in runs.items():
        if not rs:
            continue
        res[f"micro_{mode}_ns"] = median(r["ns_per_call"] for r in rs)
        res[f"micro_{mode}_thread_ns"] = median(r["thread_ns_per_call"] for r in rs)
        res[f"micro_{mode}_cpu_ns"] = median(r["cpu_ns_per_call"] for r in rs)
    first = next((rs[0] for rs in runs.values() if rs), None)
    if first:
        res["micro_paths"] = first["paths"]
        res["micro_workers"] = first["workers"]
    for mode in KILN_VARIANTS:
        if f"micro_{mode}_ns" in res and "micro_native_ns" in res:
            res[f"micro_{mode}_overhead_ns"] = res[f"micro_{mode}_ns"] - res["micro_native_ns"]
            res[f"micro_{mode}_cpu_overhead_ns"] = (res[f"micro_{mode}_cpu_ns"]
                                                    - res["micro_native_cpu_ns"])
    cached = [r for r in runs.get("cached", [])]
    if cached and all("cache" in r for r in cached):
        looked = [r["cache"]["hits"] + r["cache"]["misses"] for r in cached]
        if all(looked):
            res["micro_hit_rate"] = median(r["cache"]["hits"] / n for r, n in zip(cached, looked))
    return res


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def build_table(w, title, runs, res):
    """The table of one workload, as lines."""
    g = res.get
    lines = [f"{title}: median of {len(runs['plain'])} interleaved rounds"
             + (f", {g(w + '_processes'):.0f} processes" if g(w + "_processes") else ""),
             f"{'variant':27} {'wall s':>7} {'min-max':>13} {'wall x':>6} {'CPU s':>7} "
             f"{'CPU x':>6} {'hit rate':>8} {'RT/proc':>7} {'q/proc':>6}"]
    for v, label in VARIANTS:
        if not runs.get(v):
            continue
        walls = [r["wall"] for r in runs[v]]
        base = v == "plain"
        s = g(f"{w}_native_s") if base else g(f"{w}_{v}_s")
        cpu = g(f"{w}_native_cpu_s") if base else g(f"{w}_{v}_cpu_s")
        ratio = 1.0 if base else g(f"{w}_{v}_ratio")
        cratio = 1.0 if base else g(f"{w}_{v}_cpu_ratio")
        kiln = v in REPORT_VARIANTS
        hit = fmt(g(hit_rate_key(w, v)), ".1%") if kiln and v != "nocache" else ""
        rt = fmt(g(f"{w}_{v}_round_trips_per_process"), ".1f") if kiln else ""
        q = fmt(g(f"{w}_{v}_queries_per_process"), ".1f") if kiln else ""
        lines.append(f"{label:27} {s:7.2f} {min(walls):6.2f}-{max(walls):<6.2f} {ratio:6.3f} "
                     f"{cpu:7.2f} {cratio:6.3f} {hit:>8} {rt:>7} {q:>6}")
    fewer = sorted({len(runs[v]) for v in TOOL_VARIANTS if runs.get(v)} - {len(runs["plain"])})
    if fewer:
        lines.append(f"{', '.join(v for v in TOOL_VARIANTS if runs.get(v))}: median of "
                     f"{' or '.join(map(str, fewer))} of the rounds (--tool-rounds)")
    cached, nocache = g(f"{w}_cached_over_empty_s"), g(f"{w}_nocache_over_empty_s")
    if cached is not None and nocache is not None:
        ratio = g(f"{w}_added_ratio")
        lines.append(f"kiln adds over the empty preload (median of the rounds' differences): "
                     f"{cached:+.3f} s, --no-cache {nocache:+.3f} s"
                     + (f" ({ratio:.1f}x)" if ratio is not None else ""))
        span = ", ".join(f"{name} {g(f'{w}_{v}_over_empty_lo_s'):+.3f}..{g(f'{w}_{v}_over_empty_hi_s'):+.3f} s"
                        for v, name in (("cached", "kiln"), ("nocache", "--no-cache")))
        lo = g(f"{w}_added_ratio_lo")
        lines.append(f"  holding the true median at {g(f'{w}_over_empty_confidence'):.1%}: {span}"
                     + (f"; the ratio at least {lo:.1f}x" if lo is not None and lo > 0
                        else "; no ratio guaranteed" if lo is not None
                        else "; kiln's top is not above 0" if g(f"{w}_cached_over_empty_hi_s") <= 0
                        else ""))
    cold = g(f"{w}_cold_over_empty_s")
    if cold is not None and nocache is not None:
        ratio, lo = g(f"{w}_cold_added_ratio"), g(f"{w}_cold_added_ratio_lo")
        lines.append(f"  a first build (--no-recall): {cold:+.3f} s "
                     f"({g(f'{w}_cold_over_empty_lo_s'):+.3f}..{g(f'{w}_cold_over_empty_hi_s'):+.3f})"
                     + (f", {ratio:.1f}x" if ratio is not None else "")
                     + (f", at least {lo:.1f}x" if lo is not None and lo > 0 else ""))
    cached, nocache = g(f"{w}_cached_cpu_over_empty_s"), g(f"{w}_nocache_cpu_over_empty_s")
    if cached is not None and nocache is not None:
        ratio, lo = g(f"{w}_added_cpu_ratio"), g(f"{w}_added_cpu_ratio_lo")
        lines.append(f"  CPU time, paired the same way: kiln {cached:+.3f} s "
                     f"({g(f'{w}_cached_cpu_over_empty_lo_s'):+.3f}.."
                     f"{g(f'{w}_cached_cpu_over_empty_hi_s'):+.3f}), --no-cache {nocache:+.3f} s "
                     f"({g(f'{w}_nocache_cpu_over_empty_lo_s'):+.3f}.."
                     f"{g(f'{w}_nocache_cpu_over_empty_hi_s'):+.3f})"
                     + (f": {ratio:.1f}x" if ratio is not None else "")
                     + (f", at least {lo:.1f}x" if lo is not None and lo > 0 else ""))
    return lines


def micro_table(res):
    g = res.get
    lines = [f"micro: {g('micro_workers', 0):.0f} threads (4 processes x 2) stat/open/close "
             f"{g('micro_paths', 0):.0f} registry-managed paths; ns per call (core time)",
             f"{'mode':26} {'ns/call':>8} {'over native':>11} {'thread ns':>9} {'hit rate':>8} "
             f"{'CPU ns':>8} {'over native':>11}"]
    for mode, label in (("native", "native"), ("cached", "kiln trace"),
                        ("nocache", "kiln trace --no-cache")):
        over, cpu_over = g(f"micro_{mode}_overhead_ns"), g(f"micro_{mode}_cpu_overhead_ns")
        hit = fmt(g("micro_hit_rate"), ".1%") if mode == "cached" else ""
        lines.append(f"{label:26} {fmt(g(f'micro_{mode}_ns'), '8.1f'):>8} "
                     f"{fmt(over, '11.1f') if mode != 'native' else '':>11} "
                     f"{fmt(g(f'micro_{mode}_thread_ns'), '9.1f'):>9} {hit:>8} "
                     f"{fmt(g(f'micro_{mode}_cpu_ns'), '8.1f'):>8} "
                     f"{fmt(cpu_over, '11.1f') if mode != 'native' else '':>11}")
    return lines


def write_flat_json(path, res):
    """Writes res as one flat JSON object of named numbers (temporary file,
    then rename). Refuses anything else: a null or a string is a bug."""
    for k, v in res.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) \
                or not math.isfinite(v):
            raise ValueError(f"{path}: {k!r} is not a named finite number: {v!r}")
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(res, indent=1, sort_keys=True) + "\n")
    os.rename(tmp, path)


def check_out_path(path):
    """Before any work: the output must be a regular file or not exist yet
    (a symlink, FIFO or device is never replaced by a file)."""
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise ValueError(f"{path} exists and is not a regular file: not replacing it")

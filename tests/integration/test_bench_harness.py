"""make bench-trace's harness cannot rot silently: its parsing, its medians
and ratios, and its JSON writing on tiny fake input, and the micro benchmark
and calibration programs run with tiny counts. No timing is checked."""
import json
import os
import sys

import pytest

from conftest import ROOT, BUILD, run

sys.path.insert(0, str(ROOT / "bench"))
import paired  # noqa: E402
import trace_results as tr  # noqa: E402

MICRO = BUILD / "bench" / "trace_micro"
CALIBRATE = BUILD / "bench" / "calibrate"

# The figures issue 8 asks bench/out/trace.json to hold.
REQUIRED = ["micro_native_ns", "micro_cached_ns", "micro_nocache_ns", "spawn_over_empty_us"] + [
    f"{w}_{k}" for w in ("hello", "zlib")
    for k in ("native_s", "cached_ratio", "nocache_ratio", "empty_ratio", "strace_ratio",
              "fakeroot_ratio", "pseudo_ratio")]


def report(processes=10, queries=300, cache=None, hidden=(), exit_status=0):
    rep = {"mode": "enforce", "exit_status": exit_status,
           "hidden": [{"path": p, "package": "x", "access": ["stat"]} for p in hidden],
           "refused_writes": [], "unknown": [{"path": "/usr/local/include"}],
           "totals": {"processes": processes, "connections": processes + 2, "queries": queries,
                      "server_cpu_seconds": 0.5, "violations": len(hidden)}}
    if cache is not None:
        rep["cache"] = cache
    return rep


def cache(hits, misses, round_trips, enabled=True):
    return {"enabled": enabled, "hits": hits, "misses": misses, "round_trips": round_trips,
            "listings": 3, "map_bytes": 65536, "entries": misses}


def fake_runs(with_cache, walls=None):
    """Three rounds of every variant; plain 10 s wall, 8 s CPU, variant v
    takes (1 + i/10) times that, i its place in the list."""
    runs = {}
    # Each variant's factor by a fixed place (the first build, "cold", came
    # last), not by its place in tr.VARIANTS, so the figures below hold.
    place = ["plain", "empty", "cached", "nocache", "fakeroot", "pseudo", "strace", "chroot",
             "cold"]
    assert sorted(place) == sorted(v for v, _ in tr.VARIANTS)
    for v, _ in tr.VARIANTS:
        i = place.index(v)
        runs[v] = []
        for rnd in range(3):
            r = {"wall": 10.0 * (1 + i / 10) + rnd - 1, "cpu": 8.0 * (1 + i / 10)}
            if v in tr.REPORT_VARIANTS:
                c = None
                if with_cache:
                    c = {"cached": cache(90, 10, 10, True), "chroot": cache(80, 20, 20, True),
                         "cold": cache(85, 15, 15, True)}.get(v, cache(0, 0, 300, False))
                # the default profile hides the home too
                hidden = ["/usr/include/sqlite3.h"] + (["/root/.profile"] if v == "chroot" else [])
                r.update(tr.report_figures(report(cache=c, hidden=hidden)))
            runs[v].append(r)
    return runs


def test_key_values_parses_and_refuses_garbage():
    assert tr.key_values("paths 3\nns_per_call 12.5\n\n", "x") == {"paths": 3.0, "ns_per_call": 12.5}
    for bad in ("", "paths\n", "paths 3 4\n", "paths three\n"):
        with pytest.raises(ValueError):
            tr.key_values(bad, "x")


def test_report_without_cache_object_gives_no_cache_figures():
    r = tr.report_figures(report())
    assert "cache" not in r and r["processes"] == 10 and r["queries"] == 300
    assert ("unknown", "/usr/local/include") in r["findings"]
    # A half-written or differently shaped cache object counts as absent.
    assert tr.cache_figures({"cache": {"enabled": True, "hits": 1}}) is None
    assert tr.cache_figures({"cache": {**cache(1, 1, 1), "hits": None}}) is None
    assert tr.cache_figures({"cache": cache(1, 2, 3)})["misses"] == 2


def test_report_of_a_failed_build_is_refused():
    with pytest.raises(ValueError):
        tr.report_figures(report(exit_status=2))
    with pytest.raises(ValueError):
        tr.report_figures({**report(), "mode": "report-only"})


def test_summary_before_the_cache_has_ratios_and_no_made_up_cache_figures():
    runs = fake_runs(with_cache=False)
    res = tr.build_summary("hello", runs, processes=4564)
    assert res["hello_native_s"] == 10.0
    assert res["hello_cached_ratio"] == pytest.approx(1.2)
    assert res["hello_strace_cpu_ratio"] == pytest.approx(1.6)
    assert res["hello_nocache_queries_per_process"] == 30
    assert res["hello_report_mismatches"] == 0
    assert not [k for k in res if "hit_rate" in k or "round_trips" in k]
    table = "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    assert "n/a" in table and "4564 processes" in table and "pseudo" in table


def test_summary_with_the_cache_object_has_hit_rate_and_round_trips():
    runs = fake_runs(with_cache=True)
    res = tr.build_summary("zlib", runs)
    assert res["zlib_hit_rate"] == pytest.approx(0.9)
    assert res["zlib_cached_round_trips_per_process"] == 1.0
    assert res["zlib_nocache_round_trips_per_process"] == 30.0
    assert res["zlib_cached_map_bytes"] == 65536
    assert "n/a" not in "\n".join(tr.build_table("zlib", "zlib", runs, res))


def test_differing_findings_between_modes_are_counted_and_named():
    runs = fake_runs(with_cache=False)
    runs["cached"][1]["findings"] = frozenset()
    res = tr.build_summary("hello", runs)
    assert res["hello_report_mismatches"] == 1
    assert any("sqlite3.h" in line for line in tr.finding_differences(runs))


def test_json_holds_every_required_figure_flat(tmp_path):
    res = {}
    for w in ("hello", "zlib"):
        res.update(tr.build_summary(w, fake_runs(with_cache=False)))
    micro = {m: [{"ns_per_call": n, "thread_ns_per_call": 4 * n, "cpu_ns_per_call": n - 100,
                  "paths": 3, "workers": 8}]
             for m, n in (("native", 700.0), ("cached", 800.0), ("nocache", 9000.0))}
    res.update(tr.micro_summary(micro))
    assert res["micro_cached_overhead_ns"] == 100.0
    assert res["micro_cached_cpu_ns"] == 700.0 and res["micro_cached_cpu_overhead_ns"] == 100.0
    res["spawn_over_empty_us"] = 21.5
    out = tmp_path / "trace.json"
    tr.write_flat_json(str(out), res)
    got = json.loads(out.read_text())
    assert [k for k in REQUIRED if k not in got] == []
    assert all(isinstance(v, (int, float)) for v in got.values())
    assert "micro" in "\n".join(tr.micro_table(res))


def test_json_writer_refuses_non_numbers_and_odd_outputs(tmp_path):
    out = tmp_path / "trace.json"
    for bad in ({"a": None}, {"a": "1"}, {"a": True}, {"a": {"b": 1}}, {"a": float("nan")}):
        with pytest.raises(ValueError):
            tr.write_flat_json(str(out), bad)
    assert not out.exists()
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for p in (link, fifo):
        with pytest.raises(ValueError):
            tr.check_out_path(str(p))
    tr.check_out_path(str(out))


def test_micro_binary_runs_with_a_tiny_count(tmp_path):
    files = []
    for i in range(3):
        f = tmp_path / f"f{i}"
        f.write_text("x")
        files.append(str(f))
    lst = tmp_path / "list"
    lst.write_text("\n".join(files) + "\n")
    r = run([MICRO, lst, 2, 2, 1])
    assert r.returncode == 0, r.stderr
    got = tr.key_values(r.stdout, "trace_micro")
    assert got["paths"] == 3 and got["workers"] == 4 and got["calls"] == 36
    assert got["ns_per_call"] > 0 and got["thread_ns_per_call"] > 0 and got["cpu_ns_per_call"] > 0
    # A path it cannot reach fails the run and is named.
    lst.write_text("\n".join(files + [str(tmp_path / "missing")]) + "\n")
    r = run([MICRO, lst, 2, 2, 1])
    assert r.returncode == 1 and "missing: No such file or directory" in r.stderr


def test_calibrate_runs_small():
    r = run([CALIBRATE, 1])
    assert r.returncode == 0, r.stderr
    got = tr.key_values(r.stdout, "calibrate")
    assert got["cpu_loop_ms"] > 0 and got["mem_latency_ns"] > 0


def test_time_kiln_adds_is_paired_by_round_against_the_empty_preload():
    # Rounds drift (here the empty preload is slow in round 2): the
    # per-round differences do not, and their median is what kiln adds.
    runs = fake_runs(with_cache=False)
    for v, add in (("empty", [0.0, 5.0, 0.0]), ("cached", [1.0, 5.6, 0.8]),
                   ("nocache", [6.0, 10.5, 4.0])):
        for r, a in zip(runs[v], add):
            r["wall"] = 10.0 + a
    res = tr.build_summary("hello", runs)
    assert res["hello_cached_over_empty_s"] == pytest.approx(0.8)
    assert res["hello_nocache_over_empty_s"] == pytest.approx(5.5)
    assert res["hello_added_ratio"] == pytest.approx(5.5 / 0.8)
    table = "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    assert "kiln adds over the empty preload" in table and "6.9x" in table
    # Three rounds hold the median between their extremes at 75% only: the
    # table says how sure, and the ratio those extremes still guarantee.
    assert (res["hello_cached_over_empty_lo_s"], res["hello_cached_over_empty_hi_s"]) == \
        pytest.approx((0.6, 1.0))
    assert res["hello_over_empty_confidence"] == pytest.approx(0.75)
    assert res["hello_added_ratio_lo"] == pytest.approx(4.0 / 1.0)
    assert "at 75.0%: kiln +0.600..+1.000 s, --no-cache +4.000..+6.000 s; the ratio at least 4.0x" \
        in table
    # A kiln interval reaching below 0 guarantees no ratio at all.
    runs["cached"][0]["wall"] = 9.0
    res = tr.build_summary("hello", runs)
    assert res["hello_cached_over_empty_lo_s"] == pytest.approx(-1.0)
    assert res["hello_added_ratio_lo"] == pytest.approx(4.0 / 0.8)
    for r in runs["cached"]:
        r["wall"] -= 2.0
    res = tr.build_summary("hello", runs)
    assert "hello_added_ratio" not in res and "hello_added_ratio_lo" not in res
    assert "kiln's top is not above 0" in "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    # Without the empty preload there is nothing to pair with.
    del runs["empty"]
    res = tr.build_summary("hello", runs)
    assert "hello_cached_over_empty_s" not in res and "hello_added_ratio" not in res


def test_cpu_time_kiln_adds_is_paired_like_wall_time():
    # The builds' CPU time (every process's, the server's included) is
    # paired by round too: a -j2 build's wall time also moves with idle
    # gaps and scheduling order that CPU time does not hold.
    runs = fake_runs(with_cache=True)
    for v, add in (("empty", [0.0, 2.0, 0.1]), ("cached", [0.05, 2.02, 0.2]),
                   ("cold", [0.1, 2.1, 0.2]), ("nocache", [1.0, 3.1, 1.2])):
        for r, a in zip(runs[v], add):
            r["cpu"] = 8.0 + a
    res = tr.build_summary("hello", runs)
    assert res["hello_cached_cpu_over_empty_s"] == pytest.approx(0.05)
    assert (res["hello_cached_cpu_over_empty_lo_s"], res["hello_cached_cpu_over_empty_hi_s"]) == \
        pytest.approx((0.02, 0.1))
    assert res["hello_nocache_cpu_over_empty_s"] == pytest.approx(1.1)
    assert res["hello_cpu_over_empty_confidence"] == pytest.approx(0.75)
    assert res["hello_added_cpu_ratio"] == pytest.approx(1.1 / 0.05)
    assert res["hello_added_cpu_ratio_lo"] == pytest.approx(1.0 / 0.1)
    assert res["hello_cold_added_cpu_ratio"] == pytest.approx(1.1 / 0.1)
    # the wall figures are their own
    assert res["hello_cached_over_empty_s"] != pytest.approx(0.05)
    table = "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    assert ("CPU time, paired the same way: kiln +0.050 s (+0.020..+0.100), "
            "--no-cache +1.100 s (+1.000..+1.100): 22.0x, at least 10.0x") in table
    # kiln's CPU below the empty preload's: no ratio
    for r in runs["cached"]:
        r["cpu"] -= 1.0
    res = tr.build_summary("hello", runs)
    assert "hello_added_cpu_ratio" not in res and "hello_cached_cpu_over_empty_s" in res


def test_a_first_build_is_measured_beside_a_rebuild():
    # cold (--no-recall) is paired against the empty preload like cached,
    # with its own ratio to --no-cache's addition, and its findings must
    # agree with --no-cache's.
    runs = fake_runs(with_cache=True)
    for v, add in (("empty", [0.0, 5.0, 0.0]), ("cached", [1.0, 5.6, 0.8]),
                   ("cold", [1.5, 6.2, 1.0]), ("nocache", [6.0, 10.5, 4.0])):
        for r, a in zip(runs[v], add):
            r["wall"] = 10.0 + a
    res = tr.build_summary("hello", runs)
    assert res["hello_cold_over_empty_s"] == pytest.approx(1.2)
    assert res["hello_cold_added_ratio"] == pytest.approx(5.5 / 1.2)
    assert res["hello_cold_added_ratio_lo"] == pytest.approx(4.0 / 1.5)
    assert res["hello_added_ratio"] == pytest.approx(5.5 / 0.8)
    assert res["hello_cold_hit_rate"] == pytest.approx(0.85)
    table = "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    assert "kiln trace --no-recall" in table
    assert "a first build (--no-recall): +1.200 s (+1.000..+1.500), 4.6x, at least 2.7x" in table
    assert res["hello_report_mismatches"] == 0
    runs["cold"][1]["findings"] = frozenset()
    assert tr.build_summary("hello", runs)["hello_report_mismatches"] == 1


def test_the_default_profile_variant_has_its_own_figures_and_findings():
    runs = fake_runs(with_cache=True)
    res = tr.build_summary("zlib_deb", runs)
    assert res["zlib_deb_chroot_ratio"] == pytest.approx(1.7)
    assert res["zlib_deb_chroot_hit_rate"] == pytest.approx(0.8)
    assert res["zlib_deb_hit_rate"] == pytest.approx(0.9)
    assert res["zlib_deb_chroot_round_trips_per_process"] == 2.0
    assert res["zlib_deb_chroot_over_empty_s"] == pytest.approx(6.0)
    # Another sandbox, so other findings: not a mismatch of the cache's...
    assert res["zlib_deb_report_mismatches"] == 0 and res["zlib_deb_chroot_report_mismatches"] == 0
    assert tr.finding_differences(runs) == []
    table = "\n".join(tr.build_table("zlib_deb", "zlib", runs, res))
    assert "kiln trace, default profile" in table and "80.0%" in table
    # ...but its runs must agree with each other.
    runs["chroot"][2]["findings"] = frozenset()
    res = tr.build_summary("zlib_deb", runs)
    assert res["zlib_deb_chroot_report_mismatches"] == 1 and res["zlib_deb_report_mismatches"] == 0
    assert any("/root/.profile" in line and "the default profile" in line
               for line in tr.finding_differences(runs))
    # bench-trace does not run it unless asked.
    assert "chroot" not in tr.DEFAULT_VARIANTS and "chroot" in dict(tr.VARIANTS)


def test_the_median_interval_is_the_sign_tests():
    # n = 6: only [min, max] reaches 90% (1 - 2/64); n = 10: the second
    # smallest to the second largest (1 - 2 * 11/1024), not the third
    # (1 - 2 * 56/1024 = 89.1%).
    assert paired.median_interval([5, 1, 4, 2, 6, 3]) == (1, 6, pytest.approx(0.96875))
    assert paired.median_interval(range(10)) == (1, 8, pytest.approx(1 - 22 / 1024))
    assert paired.median_interval(range(20))[:2] == (5, 14)
    assert paired.median_interval([2.0]) == (2.0, 2.0, 0.0)
    # b - a, paired by index: the spread of a or b alone does not matter.
    assert paired.paired([100, 300, 200, 500, 400, 600], [103, 301, 204, 502, 406, 605]) == \
        (3.5, 1, 6, pytest.approx(0.96875))


def test_the_tools_run_in_fewer_rounds_spread_over_the_run():
    assert tr.tool_round_set(8, 3) == {0, 4, 7}
    assert tr.tool_round_set(8, 8) == set(range(8))
    assert tr.tool_round_set(3, 5) == {0, 1, 2}
    assert tr.tool_round_set(6, 1) == {0}
    # The table says which medians come from fewer rounds.
    runs = fake_runs(with_cache=True)
    for v in tr.TOOL_VARIANTS:
        runs[v] = runs[v][:1]
    res = tr.build_summary("hello", runs)
    assert res["hello_strace_ratio"] == pytest.approx(1.5)  # its one round against plain's median
    table = "\n".join(tr.build_table("hello", "GNU hello", runs, res))
    assert "fakeroot, pseudo, strace: median of 1 of the rounds" in table
    full = "\n".join(tr.build_table("hello", "GNU hello", fake_runs(with_cache=True), res))
    assert "(--tool-rounds)" not in full


def test_repeat_specs():
    """--repeat W=N: how many of W's builds a round runs; a bad spec stops the
    bench before it measures anything."""
    import trace_rounds
    assert trace_rounds.parse_repeats(["zlib=3"], ["hello", "zlib"]) == {"hello": 1, "zlib": 3}
    assert trace_rounds.parse_repeats([], ["hello"]) == {"hello": 1}
    for bad in ("zlib=0", "zlib", "zlib=x", "openssl=2", "=2"):
        with pytest.raises(SystemExit):
            trace_rounds.parse_repeats([bad], ["hello", "zlib"])

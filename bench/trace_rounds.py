#!/usr/bin/python3
"""The measuring half of `make bench-trace` (bench/run-trace prepares the
source trees, the registry, the empty preload library and the tools, then
runs this). docs/benchmarks.md says what each figure means.

Real builds: for each workload (GNU hello `./configure && make`, zlib
`./configure && make -j2`) and each variant (trace_results.VARIANTS), copy
the unpacked source afresh (cp -a, not timed), build in the copy, check the
exit status and that the result runs, remove the copy. In each round every
(workload, variant) pair runs once, the variant order rotating from round to
round, so machine noise (the machine is shared) hits all alike; with
--tool-rounds N, fakeroot, pseudo and strace run in N of the rounds only
(hello under strace is 40% of a round), so more rounds of what the targets
compare fit in the same time. With --repeat W=N, workload W runs N times in
each round (each time every variant but the tools, the rotation going on):
zlib's 3 s build has an added-time budget (a tenth of --no-cache's, about
0.05 s) smaller than the spread of its rounds, and N times the pairs narrow
its interval at a fifth of hello's cost per pair.

Wall time runs from the start of the command to its exit. CPU time is
user+sys of every process of the run: this process is a child subreaper, so
daemons a variant leaves behind (fakeroot's faked, pseudo's server) are
reparented here and reaped, and getrusage(RUSAGE_CHILDREN) before and after
the run counts them all. Figures are medians over the rounds.

Micro benchmark: trace_micro (4 processes x 2 threads stat/open/close the
same registry-managed paths) natively, under kiln trace and under kiln trace
--no-cache, interleaved in the same number of rounds.

`make bench-trace-deb` (bench/run-trace-deb) runs the same rounds over what a
maintainer runs, a whole package build (PACKAGE_WORKLOADS: zlib's
`dpkg-buildpackage -b`), with --workloads and --variants naming the subset
and --no-micro; its variants include "chroot", kiln trace with its default
profile (the other kiln variants use --profile host)."""
import argparse
import ctypes
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_paths  # noqa: E402
import trace_results as tr  # noqa: E402

# name: (label, build command, check of the result: argv, expected stdout)
WORKLOADS = {
    "hello": ("GNU hello: ./configure && make", "./configure && make",
              (["./hello"], "Hello, world!")),
    "zlib": ("zlib: ./configure && make -j2", "./configure && make -j2",
             (["./example"], None)),
}
# Whole package builds (make bench-trace-deb), in the same shape. The tree
# is unpacked one level down (dpkg-buildpackage writes the .debs beside it),
# with the demo's build profile and options (examples/demo.sh).
PACKAGE_WORKLOADS = {
    "zlib_deb": ("zlib: dpkg-buildpackage -b -uc -us (nobiarch, parallel=2)",
                 "dpkg-buildpackage -b -uc -us",
                 (["sh", "-c", "ls ../zlib1g_*_*.deb ../zlib1g-dev_*_*.deb"], None)),
}
PACKAGE_ENV = {"DEB_BUILD_PROFILES": "nobiarch", "DEB_BUILD_OPTIONS": "parallel=2"}
RUN_TIMEOUT_S = 1800
PR_SET_CHILD_SUBREAPER = 36
PSEUDO_LIB = "/usr/lib/x86_64-linux-gnu/pseudo/libpseudo.so"
MICRO_SHAPE = ("4", "2")  # processes, threads each
NAME = "bench-trace"  # in messages; bench-trace-deb when writing trace-deb.json


def fail(msg):
    print(f"{NAME}: {msg}", file=sys.stderr)
    sys.exit(1)


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        fail(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def cpu_of_children():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def reap_stragglers(what, limit_s=20.0):
    """Waits for every orphan a run left behind; kills them after limit_s."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        if time.monotonic() > deadline:
            left = [p for p in os.listdir("/proc") if p.isdigit() and parent_of(p) == os.getpid()]
            for p in left:
                os.kill(int(p), signal.SIGKILL)
            fail(f"{what}: processes still running {limit_s:.0f} s after the run "
                 f"exited (pids {', '.join(left)}); killed them")
        time.sleep(0.01)


# The environment sbuild gives a package build, for every variant: what kiln
# trace's default profile computes (docs/profiles.md), asked of kiln itself
# once (build_env). The caller's own environment would add work no package
# build does to every variant: on a development machine a PATH with
# ~/.cargo/bin, pyenv shims and /usr/local/cuda/bin before /usr/bin, a
# LIBRARY_PATH that sends every link through /usr/local/cuda/lib64/stubs.
BUILD_ENV = None


def build_env(a):
    control = os.path.join(next(iter(a.src.values())), "debian", "control")
    cmd = [a.kiln, "trace", "--db", a.db, "--no-refresh", "--no-recall", "--deps-from-control",
           control, "--", "env", "-0"]
    p = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        fail(f"{shlex.join(cmd)}: exit status {p.returncode}: "
             f"{p.stderr.decode(errors='replace')[-500:]}")
    env = dict(e.split("=", 1) for e in p.stdout.decode().split("\0") if "=" in e)
    if env.get("PATH", "").split(":")[:2] != ["/usr/local/sbin", "/usr/local/bin"]:
        fail(f"{shlex.join(cmd)} did not print sbuild's environment (PATH={env.get('PATH')!r})")
    # Where kiln keeps what a build asked, for the next build of the same
    # sandbox to recall (sbuild's HOME does not exist): every variant gets
    # the same environment.
    env["XDG_CACHE_HOME"] = os.path.join(a.work, "xdg-cache")
    shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
    os.makedirs(env["XDG_CACHE_HOME"])
    return env


def base_env():
    env = dict(BUILD_ENV)
    # Nothing of kiln's run, the caller's make (jobserver fds, flags; dpkg
    # lets MAKEFLAGS through) or preload leaks in.
    for k in list(env):
        if k in ("LD_PRELOAD", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES") \
                or k.startswith(("KILN_", "PSEUDO_", "FAKEROOT")):
            del env[k]
    return env


def kiln_cmd(a, variant, report, deps):
    # --no-refresh: bench/run-trace imports the registry just before; a
    # package installed meanwhile by something else on the machine must not
    # make a round re-import it (two seconds inside the timed build).
    cmd = [a.kiln, "trace", "--db", a.db, "--no-refresh", "--json", "-o", report] + deps
    if "--deps-from-control" in deps and variant != "chroot":
        # the host profile keeps the environment it is given (base_env's,
        # already sbuild's), so the traced build runs in the same one as
        # the plain build
        cmd += ["--profile", "host"]
    if variant == "nocache":
        cmd.append("--no-cache")
    if variant == "cold":
        cmd.append("--no-recall")
    return cmd + ["--"]


def command(w, variant, a, report):
    build = ["sh", "-c", WORKLOADS[w][1]]
    env = base_env()
    if w in PACKAGE_WORKLOADS:
        env.update(PACKAGE_ENV)
    if variant == "plain":
        return build, env
    if variant == "count":
        # Untimed warm-up: a plain build in a new pid namespace, where the last
        # pid handed out counts every process (and thread) the build created.
        count = os.path.join(a.work, "pids")
        return ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                f"{WORKLOADS[w][1]} && cat /proc/sys/kernel/ns_last_pid > {shlex.quote(count)}"], env
    if variant == "empty":
        env["LD_PRELOAD"] = a.empty_preload
        return build, env
    if variant == "fakeroot":
        return ["fakeroot", "--"] + build, env
    if variant == "pseudo":
        # pseudo standalone, as its fakeroot-pseudo wrapper runs it: the
        # launcher starts the server; `pseudo -S` stops it after the build
        # (else it idles 30 s), and that is timed like fakeroot's faked exit.
        state = os.path.join(a.work, "pseudo-state")
        shutil.rmtree(state, ignore_errors=True)
        os.makedirs(state)
        env.update(PSEUDO_PREFIX="/usr", PSEUDO_LOCALSTATEDIR=state)
        return ["sh", "-c", 'pseudo sh -c "$1"; st=$?; pseudo -S; exit $st', "sh",
                WORKLOADS[w][1]], env
    if variant == "strace":
        return ["strace", "-f", "-e", "trace=file", "-o", "/dev/null"] + build, env
    if variant == "chroot":
        # the default profile sets the build's environment itself and hides
        # the invoking user's home, found from HOME: the caller's, as when a
        # maintainer runs kiln trace
        env["HOME"] = os.path.expanduser("~")
    return kiln_cmd(a, variant, report, ["--deps-from-control", "debian/control"]) + build, env


RUNNING = []  # the process group of the run under way, killed if we are


def stop(signum, _frame):
    for pgid in RUNNING:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    fail(f"stopped by signal {signum}; the run under way was killed")


def timed(cmd, cwd, env, log_path, what):
    """Runs cmd; returns (exit code, wall s, CPU s of it and its orphans)."""
    with open(log_path, "w") as log:
        cpu0 = cpu_of_children()
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            fail(f"{what}: cannot run {cmd[0]}: {e}")
        RUNNING[:] = [p.pid]
        timer = threading.Timer(RUN_TIMEOUT_S, lambda: os.killpg(p.pid, signal.SIGKILL))
        timer.start()
        _, status, _ = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        timer.cancel()
        RUNNING.clear()
        reap_stragglers(what)
        return os.waitstatus_to_exitcode(status), wall, cpu_of_children() - cpu0


def broken(what, why, cmd, cwd, log_path):
    tail = subprocess.run(["tail", "-n", "25", log_path], capture_output=True, text=True).stdout
    fail(f"{what}: {why}\n  command: {shlex.join(cmd)}\n"
         f"  in {cwd}; full output: {log_path}\n--- last lines ---\n{tail}")


def read_report(report, what, cmd, cwd, log_path):
    try:
        with open(report) as f:
            return tr.report_figures(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
        broken(what, f"kiln's JSON report {report}: {e}", cmd, cwd, log_path)


def parse_repeats(specs, workloads):
    """{workload: N} from "W=N" specs (N >= 1); workloads not named: 1."""
    rep = {w: 1 for w in workloads}
    for spec in specs:
        w, _, n = spec.partition("=")
        if w not in rep or not n.isdigit() or int(n) < 1:
            fail(f"--repeat {spec!r}: want WORKLOAD=N with N >= 1 and WORKLOAD one of "
                 f"{' '.join(workloads)}")
        rep[w] = int(n)
    return rep


def run_build(w, variant, rnd, a):
    top = os.path.join(a.work, w)
    tree = os.path.join(top, os.path.basename(a.src[w])) if w in PACKAGE_WORKLOADS else top
    log_path = os.path.join(a.work, f"{w}-{variant}.log")
    report = os.path.join(a.work, f"{w}-{variant}.json")
    what = f"{'warm-up' if rnd < 0 else f'round {rnd + 1}'}, {w}, {variant}"
    shutil.rmtree(top, ignore_errors=True)
    if os.path.exists(report):
        os.unlink(report)
    os.makedirs(os.path.dirname(tree), exist_ok=True)
    subprocess.run(["cp", "-a", a.src[w], tree], check=True)
    cmd, env = command(w, variant, a, report)
    code, wall, cpu = timed(cmd, tree, env, log_path, what)
    if code != 0:
        broken(what, f"exit status {code}", cmd, tree, log_path)
    argv, want = WORKLOADS[w][2]
    out = subprocess.run(argv, cwd=tree, capture_output=True, text=True,
                         env={**base_env(), "LC_ALL": "C"})
    if out.returncode != 0 or (want is not None and out.stdout.strip() != want):
        broken(what, f"the built {argv[0]} fails (status {out.returncode}, output "
               f"{out.stdout[-300:]!r} {out.stderr[-300:]!r})", cmd, tree, log_path)
    res = {"wall": wall, "cpu": cpu}
    if variant == "count":
        with open(os.path.join(a.work, "pids")) as f:
            res["pids"] = int(f.read()) - 1  # not the cat that read it
    if variant in tr.REPORT_VARIANTS:
        res.update(read_report(report, what, cmd, tree, log_path))
    shutil.rmtree(top)
    return res


def run_micro(mode, rnd, a, deps):
    what = f"round {rnd + 1}, micro, {mode}"
    log_path = os.path.join(a.work, f"micro-{mode}.log")
    report = os.path.join(a.work, f"micro-{mode}.json")
    cmd = [a.micro, a.micro_list, *MICRO_SHAPE, str(a.micro_passes)]
    if mode != "native":
        cmd = kiln_cmd(a, mode, report, ["--deps", ",".join(deps)]) + cmd
    # trace_micro prints its figures on stdout, kiln its report on stderr.
    with open(log_path, "w") as log:
        p = subprocess.run(cmd, cwd=a.work, env=base_env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=log, text=True, timeout=RUN_TIMEOUT_S)
    if p.returncode != 0:
        broken(what, f"exit status {p.returncode}", cmd, a.work, log_path)
    try:
        res = tr.key_values(p.stdout, "trace_micro")
    except ValueError as e:
        broken(what, str(e), cmd, a.work, log_path)
    if mode != "native":
        res.update(read_report(report, what, cmd, a.work, log_path))
    return res


def calibrate(a):
    p = subprocess.run([a.calibrate], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{a.calibrate} failed: {p.stderr.strip()}")
    return tr.key_values(p.stdout, "calibrate")


def summary(a, head, runs, micro, warm, rounds_done, t_start):
    """The flat figures of the rounds done so far."""
    res = {**head, "rounds": rounds_done, "rounds_planned": a.rounds}
    for w in WORKLOADS:
        res.update(tr.build_summary(w, runs[w], warm[w].get("pids")))
        res[f"{w}_runs_per_round"] = a.repeats[w]
    res.update(tr.micro_summary(micro))
    if a.preload_json:
        with open(a.preload_json) as f:
            res["spawn_over_empty_us"] = json.load(f)["spawn_over_empty_us"]
    res["load_average_after"] = os.getloadavg()[0]
    res["bench_wall_s"] = time.monotonic() - t_start
    return res


def main():
    ap = argparse.ArgumentParser()
    for opt in ("kiln", "db", "empty-preload", "out", "work", "calibrate"):
        ap.add_argument("--" + opt, required=True)
    for opt in ("micro", "hello-src", "zlib-src"):
        ap.add_argument("--" + opt)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--micro-paths", type=int, default=10000)
    ap.add_argument("--micro-passes", type=int, default=2)
    ap.add_argument("--only", help="a subset of the workloads (KILN_BENCH_ONLY), for trials")
    ap.add_argument("--workloads", default="hello zlib",
                    help="the workloads to measure: " + " ".join([*WORKLOADS, *PACKAGE_WORKLOADS]))
    ap.add_argument("--variants", default=" ".join(tr.DEFAULT_VARIANTS),
                    help="the variants to measure (plain always): "
                         + " ".join(v for v, _ in tr.VARIANTS))
    ap.add_argument("--tool-rounds", type=int,
                    help="run " + ", ".join(tr.TOOL_VARIANTS) + " in only this many of the "
                         "rounds, spread over them (default: every round)")
    ap.add_argument("--repeat", action="append", default=[], metavar="W=N",
                    help="run workload W N times in each round (not the tools)")
    ap.add_argument("--no-micro", action="store_true", help="skip the micro benchmark")
    ap.add_argument("--preload-json", help="bench/out/preload.json of this run, for spawn_over_empty_us")
    a = ap.parse_args()
    global NAME
    NAME = "bench-" + os.path.splitext(os.path.basename(a.out))[0]
    for opt in ("kiln", "db", "empty_preload", "out", "work", "micro", "calibrate"):
        if getattr(a, opt):
            setattr(a, opt, os.path.abspath(getattr(a, opt)))  # runs start in the trees
    src = {"hello": a.hello_src, "zlib": a.zlib_src, "zlib_deb": a.zlib_src}
    a.src = {w: os.path.abspath(d) for w, d in src.items() if d}
    WORKLOADS.update(PACKAGE_WORKLOADS)
    unknown = set(a.workloads.split()) - set(WORKLOADS)
    if unknown or not a.workloads.split():
        fail(f"--workloads {a.workloads!r}: not workloads: {' '.join(sorted(unknown)) or 'none given'}")
    repeats = parse_repeats(a.repeat, list(WORKLOADS))
    wanted = [w for w in a.workloads.split() if not a.only or w in a.only.split()]
    if not wanted:
        fail(f"KILN_BENCH_ONLY={a.only!r} names none of: {a.workloads}")
    for w in list(WORKLOADS):
        if w not in wanted:
            del WORKLOADS[w]
    a.repeats = {w: repeats[w] for w in WORKLOADS}
    names = [v for v, _ in tr.VARIANTS]
    if set(a.variants.split()) - set(names):
        fail(f"--variants {a.variants!r}: known variants are {' '.join(names)}")
    variants = [v for v in names if v == "plain" or v in a.variants.split()]
    for w in WORKLOADS:
        if w not in a.src:
            fail(f"{w} needs --{'hello' if w == 'hello' else 'zlib'}-src")
    if not a.no_micro and not a.micro:
        fail("the micro benchmark needs --micro (or --no-micro)")
    if a.rounds < 1:
        fail("KILN_BENCH_ROUNDS must be at least 1")
    if a.tool_rounds is not None and a.tool_rounds < 1:
        fail("KILN_BENCH_TOOL_ROUNDS must be at least 1")
    tool_rounds = tr.tool_round_set(a.rounds, a.tool_rounds or a.rounds)
    try:
        tr.check_out_path(a.out)
    except ValueError as e:
        fail(str(e))
    os.makedirs(a.work, exist_ok=True)
    global BUILD_ENV
    BUILD_ENV = build_env(a)
    become_subreaper()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    t_start = time.monotonic()
    tools = ", ".join(v for v in variants if v in tr.TOOL_VARIANTS)
    res = {"rounds": a.rounds, "tool_rounds": len(tool_rounds) if tools else 0,
           "load_average_before": os.getloadavg()[0]}
    cal = calibrate(a)
    res.update({f"calib_{k}_before": v for k, v in cal.items()})
    in_fewer = f" ({tools} in {len(tool_rounds)})" if tools else ""
    say(f"{NAME}: {a.rounds} rounds{in_fewer}, load average {res['load_average_before']:.2f}, "
        f"calibration {cal['cpu_loop_ms']:.0f} ms CPU loop, {cal['mem_latency_ns']:.0f} ns memory latency")

    if not a.no_micro:
        paths, deps = trace_paths.pick(a.kiln, a.db, a.micro_paths)
        a.micro_list = os.path.join(a.work, "micro-paths")
        with open(a.micro_list, "w") as f:
            f.write("\n".join(paths) + "\n")
        say(f"  micro: {len(paths)} paths from {len(deps)} declared packages ({a.micro_list})")

    warm = {}
    for w in WORKLOADS:
        # Creating a pid namespace needs root; otherwise the warm-up counts nothing.
        warm[w] = run_build(w, "count" if os.geteuid() == 0 else "plain", -1, a)
        say(f"  warm-up {w} (plain, untimed): {warm[w]['wall']:.2f} s wall, "
            f"{warm[w].get('pids', 'uncounted')} processes and threads created")
        # A rebuild's: what this build asks, for the recalling variants.
        for v in ("cached", "chroot"):
            if v in variants:
                r = run_build(w, v, -1, a)
                say(f"  warm-up {w} ({v}, untimed): {r['wall']:.2f} s wall, "
                    f"{r['cache']['round_trips']} round trips")

    runs = {w: {v: [] for v in variants} for w in WORKLOADS}
    micro = {m: [] for m in ("native", "cached", "nocache")} if not a.no_micro else {}
    for rnd in range(a.rounds):
        modes = list(micro)
        for i in range(len(modes)):
            m = modes[(rnd + i) % len(modes)]
            r = run_micro(m, rnd, a, deps)
            micro[m].append(r)
            say(f"  round {rnd + 1} micro {m:8} {r['ns_per_call']:9.1f} ns per call")
        for w in WORKLOADS:
            for rep in range(a.repeats[w]):
                turn = rnd * a.repeats[w] + rep
                for i in range(len(variants)):
                    v = variants[(turn + i) % len(variants)]
                    if v in tr.TOOL_VARIANTS and (rnd not in tool_rounds or rep):
                        continue
                    r = run_build(w, v, rnd, a)
                    runs[w][v].append(r)
                    say(f"  round {rnd + 1} {w:5} {v:9} {r['wall']:7.2f} s wall {r['cpu']:7.2f} s CPU")
        if rnd + 1 < a.rounds:
            # A checkpoint: a run stopped later still leaves the medians of
            # the rounds it completed ("rounds" says how many).
            tr.write_flat_json(a.out, summary(a, res, runs, micro, warm, rnd + 1, t_start))
            say(f"  after round {rnd + 1}: wrote {a.out} (checkpoint)")

    res = summary(a, res, runs, micro, warm, a.rounds, t_start)
    cal = calibrate(a)
    res.update({f"calib_{k}_after": v for k, v in cal.items()})
    res["load_average_after"] = os.getloadavg()[0]
    res["bench_wall_s"] = time.monotonic() - t_start

    print()
    for w, (title, _, _) in WORKLOADS.items():
        print("\n".join(tr.build_table(w, title, runs[w], res)))
        diffs = tr.finding_differences(runs[w])
        if diffs:
            print(f"WARNING: {w}: kiln runs disagree on hidden/refused/unknown paths:")
            print("\n".join("  " + d for d in diffs))
        print()
    if micro:
        print("\n".join(tr.micro_table(res)))
    if "spawn_over_empty_us" in res:
        print(f"\nspawn + exit of a no-op program under kiln trace: "
              f"{res['spawn_over_empty_us']:.1f} us more than with an empty preload (make bench-preload)")
    print(f"\nmachine: load average {res['load_average_before']:.2f} before, "
          f"{res['load_average_after']:.2f} after; CPU loop {res['calib_cpu_loop_ms_before']:.0f} / "
          f"{res['calib_cpu_loop_ms_after']:.0f} ms, memory latency "
          f"{res['calib_mem_latency_ns_before']:.0f} / {res['calib_mem_latency_ns_after']:.0f} ns "
          f"(before / after); whole bench {res['bench_wall_s'] / 60:.1f} min")
    tr.write_flat_json(a.out, res)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

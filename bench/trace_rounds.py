#!/usr/bin/python3
"""The measuring half of `make bench-trace` (bench/run-trace prepares the
source tree, the registry and the empty preload library, then runs this).

Each run copies the unpacked GNU hello source afresh (cp -a, not timed), runs
`./configure && make -jN` in the copy under one variant, checks the exit
status and that the built ./hello greets, then removes the copy. Variants
take turns within each round, the starting variant rotating from round to
round, so machine noise (the machine is shared) hits all alike.

Wall time runs from the start of the command to its exit. CPU time is
user+sys of every process of the run: this process is a child subreaper, so
daemons a variant leaves behind (fakeroot's faked, a stray trace server) are
reparented here and reaped, and getrusage(RUSAGE_CHILDREN) before and after
the run counts them all. Figures are medians over the rounds."""
import argparse
import ctypes
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

VARIANTS = [
    ("plain", "plain"),
    ("empty_preload", "empty LD_PRELOAD"),
    ("fakeroot", "fakeroot"),
    ("kiln", "kiln trace"),
    ("kiln_report_only", "kiln trace --report-only"),
]
RUN_TIMEOUT_S = 600
PR_SET_CHILD_SUBREAPER = 36


def fail(msg):
    print(f"bench-trace: {msg}", file=sys.stderr)
    sys.exit(1)


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


def reap_stragglers(variant, limit_s=20.0):
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
            fail(f"{variant}: processes still running {limit_s:.0f} s after the build "
                 f"exited (pids {', '.join(left)}); killed them")
        time.sleep(0.01)


def base_env():
    env = dict(os.environ)
    # Nothing of the caller's make (jobserver fds, flags) or preload leaks in.
    for k in list(env):
        if k in ("LD_PRELOAD", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES") \
                or k.startswith("KILN_"):
            del env[k]
    return env


def command(variant, a, report):
    build = ["sh", "-c", f"./configure && make -j{a.jobs}"]
    env = base_env()
    if variant == "plain":
        return build, env
    if variant == "count":
        # Untimed warm-up: a plain build in a new pid namespace, where the last
        # pid handed out counts every process (and thread) the build created.
        count = os.path.join(a.work, "pids")
        return ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                f"./configure && make -j{a.jobs} && cat /proc/sys/kernel/ns_last_pid > {shlex.quote(count)}"], env
    if variant == "empty_preload":
        env["LD_PRELOAD"] = a.empty_preload
        return build, env
    if variant == "fakeroot":
        return ["fakeroot", "--"] + build, env
    kiln = [a.kiln, "trace", "--db", a.db, "--json", report, "--no-cache",
            "--deps-from-control", "debian/control",
            # the host profile keeps the caller's environment, so the traced
            # build runs in the same environment as the plain one (the chroot
            # profile would give it sbuild's: docs/profiles.md)
            "--profile", "host"]
    if variant == "kiln_report_only":
        kiln.append("--report-only")
    return kiln + ["--"] + build, env


def run_once(variant, rnd, a):
    tree = os.path.join(a.work, "hello")
    log_path = os.path.join(a.work, f"{variant}.log")
    report = os.path.join(a.work, f"{variant}.json")
    shutil.rmtree(tree, ignore_errors=True)
    if os.path.exists(report):
        os.unlink(report)
    subprocess.run(["cp", "-a", a.src, tree], check=True)
    cmd, env = command(variant, a, report)
    with open(log_path, "w") as log:
        cpu0 = cpu_of_children()
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(cmd, cwd=tree, env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            fail(f"{variant}: cannot run {cmd[0]}: {e}")
        timer = threading.Timer(RUN_TIMEOUT_S, lambda: os.killpg(p.pid, signal.SIGKILL))
        timer.start()
        _, status, _ = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        reap_stragglers(variant)
        cpu = cpu_of_children() - cpu0

    def broken(why):
        tail = subprocess.run(["tail", "-n", "25", log_path], capture_output=True, text=True).stdout
        fail(f"{'warm-up' if rnd < 0 else f'round {rnd + 1}'}, {variant}: {why}\n  command: {shlex.join(cmd)}\n"
             f"  in {tree}; full output: {log_path}\n--- last lines ---\n{tail}")

    if p.returncode != 0:
        broken(f"exit status {p.returncode}"
               + (f" (killed after {RUN_TIMEOUT_S} s)" if wall >= RUN_TIMEOUT_S else ""))
    hello = subprocess.run(["./hello"], cwd=tree, capture_output=True, text=True,
                           env={**base_env(), "LC_ALL": "C"})
    if hello.returncode != 0 or hello.stdout.strip() != "Hello, world!":
        broken(f"the built ./hello does not greet (status {hello.returncode}, "
               f"output {hello.stdout!r} {hello.stderr!r})")
    res = {"wall": wall, "cpu": cpu}
    if variant == "count":
        with open(os.path.join(a.work, "pids")) as f:
            res["pids"] = int(f.read()) - 1  # not the cat that read it
    if variant.startswith("kiln"):
        try:
            with open(report) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            broken(f"no readable JSON report {report}: {e}")
        want = "report-only" if variant == "kiln_report_only" else "enforce"
        if rep.get("exit_status") != 0 or rep.get("mode") != want:
            broken(f"report says exit_status {rep.get('exit_status')!r}, mode {rep.get('mode')!r}")
        t = rep["totals"]
        res.update(processes=t["processes"], connections=t["connections"], queries=t["queries"],
                   server_cpu=t["server_cpu_seconds"], violations=t["violations"])
    shutil.rmtree(tree)
    return res


def main():
    ap = argparse.ArgumentParser()
    for opt in ("kiln", "src", "work", "db", "empty-preload", "out"):
        ap.add_argument("--" + opt, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    for opt in ("kiln", "src", "work", "db", "empty_preload", "out"):
        setattr(a, opt, os.path.abspath(getattr(a, opt)))  # runs start in the tree
    if a.rounds < 1:
        fail("KILN_BENCH_ROUNDS must be at least 1")
    os.makedirs(a.work, exist_ok=True)
    become_subreaper()
    load_before = os.getloadavg()[0]
    runs = {v: [] for v, _ in VARIANTS}
    t_start = time.monotonic()
    print(f"bench-trace: {a.rounds} rounds of {len(VARIANTS)} builds of {a.src} "
          f"(./configure && make -j{a.jobs}), load average {load_before:.2f}", file=sys.stderr)
    # Creating a pid namespace needs root; otherwise the warm-up counts nothing.
    warm = run_once("count" if os.geteuid() == 0 else "plain", -1, a)
    print(f"  warm-up (plain, untimed): {warm['wall']:.2f} s wall, "
          f"{warm.get('pids', 'uncounted')} processes and threads created", file=sys.stderr)
    for rnd in range(a.rounds):
        for i in range(len(VARIANTS)):
            v = VARIANTS[(rnd + i) % len(VARIANTS)][0]
            r = run_once(v, rnd, a)
            runs[v].append(r)
            print(f"  round {rnd + 1} {v:17} {r['wall']:7.2f} s wall {r['cpu']:7.2f} s CPU",
                  file=sys.stderr)
    load_after = os.getloadavg()[0]

    med = lambda v, k: statistics.median(r[k] for r in runs[v])
    res = {"rounds": a.rounds, "make_jobs": a.jobs}
    for v, _ in VARIANTS:
        res[f"{v}_s"] = med(v, "wall")
        res[f"{v}_cpu_s"] = med(v, "cpu")
    for v, _ in VARIANTS[1:]:
        res[f"{v}_ratio"] = res[f"{v}_s"] / res["plain_s"]
        res[f"{v}_cpu_ratio"] = res[f"{v}_cpu_s"] / res["plain_cpu_s"]
    # Processes: the pids a plain build creates (counted in a pid namespace
    # during the warm-up; threads count too: strace -f finds 1 in this build).
    # kiln counts only the processes that talked to its server, and its
    # connections: one more for each exec after a process had talked to it.
    res["kiln_connections"] = med("kiln", "connections")
    res["kiln_processes"] = med("kiln", "processes")
    res["processes"] = warm.get("pids", res["kiln_processes"])
    res["queries"] = med("kiln", "queries")
    res["violations"] = med("kiln", "violations")
    for v in ("kiln", "kiln_report_only"):
        pre = "" if v == "kiln" else "report_only_"
        res[f"{pre}per_process_overhead_us"] = \
            (res[f"{v}_s"] - res["plain_s"]) / res["processes"] * 1e6
        res[f"{pre}per_process_cpu_overhead_us"] = \
            (res[f"{v}_cpu_s"] - res["plain_cpu_s"]) / res["processes"] * 1e6
    res["server_cpu_s"] = med("kiln", "server_cpu")
    res["report_only_server_cpu_s"] = med("kiln_report_only", "server_cpu")
    res["load_average_before"] = load_before
    res["load_average_after"] = load_after
    res["bench_wall_s"] = time.monotonic() - t_start

    print(f"\nGNU hello: ./configure && make -j{a.jobs}, median of {a.rounds} interleaved rounds "
          f"(load average {load_before:.2f} before, {load_after:.2f} after)")
    print(f"{'variant':26} {'wall s':>7} {'min-max':>13} {'ratio':>6} {'CPU s':>7} {'ratio':>6}")
    for v, label in VARIANTS:
        walls = [r["wall"] for r in runs[v]]
        ratio = res.get(f"{v}_ratio", 1.0)
        cratio = res.get(f"{v}_cpu_ratio", 1.0)
        print(f"{label:26} {res[v + '_s']:7.2f} {min(walls):6.2f}-{max(walls):<6.2f} {ratio:6.2f} "
              f"{res[v + '_cpu_s']:7.2f} {cratio:6.2f}")
    how = ("pids a plain build created, counted in a pid namespace" if "pids" in warm
           else "kiln report totals: connections, one per process and more after exec")
    print(f"processes: {res['processes']:.0f} ({how}); kiln's report: "
          f"{res['kiln_connections']:.0f} connections, {res['queries']:.0f} queries to the server")
    print(f"per-process overhead, kiln trace: {res['per_process_overhead_us']:.0f} us wall, "
          f"{res['per_process_cpu_overhead_us']:.0f} us CPU; --report-only: "
          f"{res['report_only_per_process_overhead_us']:.0f} us wall, "
          f"{res['report_only_per_process_cpu_overhead_us']:.0f} us CPU "
          f"(DESIGN.md budget: ~50 us)")
    print(f"trace server CPU: {res['server_cpu_s']:.2f} s (kiln trace), "
          f"{res['report_only_server_cpu_s']:.2f} s (--report-only)")
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(res, indent=1) + "\n")
    os.rename(tmp, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

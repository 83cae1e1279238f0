#!/usr/bin/python3
"""make check-fidelity: what ./configure finds under `kiln trace
--deps-from-control` on a polluted host against a clean sbuild-like chroot
(docs/fidelity.md).

1. A buildd chroot (debootstrap --variant=buildd --merged-usr bookworm),
   made once and cached in $KILN_FIDELITY_CACHE (~/.cache/kiln-fidelity),
   with the archive's updates and security suites as on the host; per
   package a copy with only that package's Build-Depends installed (apt-get
   build-dep --no-install-recommends, as sbuild's apt resolver installs).
2. The Debian source of each package (apt-get source through
   examples/lib/debsrc.sh, cached).
3. Under the machine-wide lock /tmp/kiln-bench.lock: the host is polluted
   (the packages of POLLUTION and each package's build dependencies are
   installed; what was not installed before is purged at the end unless
   KILN_FIDELITY_KEEP=1), kiln's registry is imported, and the configure
   step (tests/fidelity/configure-step: debian/rules build up to
   dh_auto_configure) runs three ways, as uid 65534, in the same directory
   /tmp/kiln-fidelity/build/SOURCE-VERSION:
     chroot  in the package's chroot, with the environment kiln gives;
     kiln    on the host, under kiln trace --deps-from-control;
     plain   on the host, in a developer's environment (a pyenv shim first
             in PATH, LIBRARY_PATH into /usr/local, LANG), without kiln.
4. config.h lines and config.log cache variables of kiln and plain compared
   with chroot's: the target is zero differences for kiln.

Run as root (chroots, apt). Arguments: package names to run a subset;
--prepare only makes the chroots and fetches the sources (nothing is
installed on the host but debootstrap, if missing)."""
import fcntl
import hashlib
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import compare  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD", ROOT / "build"))
KILN = BUILD / "kiln"
STEP = ROOT / "tests" / "fidelity" / "configure-step"
CACHE = pathlib.Path(os.environ.get("KILN_FIDELITY_CACHE",
                                    pathlib.Path.home() / ".cache" / "kiln-fidelity"))
WORK = pathlib.Path("/tmp/kiln-fidelity")  # the same path in the chroot and on the host
LOCK = "/tmp/kiln-bench.lock"
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
UID = 65534  # nobody: the build user on both sides (sbuild's is not root either)

# Source package -> debian/rules target that configures (None: dh's sequence).
PACKAGES = {"nano": None, "patch": None, "htop": None, "file": None, "wget": "configure-stamp"}

# What a developer's machine has and a clean chroot does not: -dev packages
# that these packages' configure scripts look for without declaring them,
# every locale, another C compiler.
POLLUTION = [
    "locales-all", "libmagic-dev", "libattr1-dev", "libacl1-dev", "libselinux1-dev",
    "libsigsegv-dev", "libcap-dev", "libunwind-dev", "libzstd-dev", "liblz-dev",
    "libgpgme-dev", "libunistring-dev", "libc-ares-dev", "libpcre3-dev", "libbsd-dev",
    "clang",
]

FAKE_HOME = WORK / "home"


def say(msg):
    print(f"\n== {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    kw.setdefault("check", True)
    return subprocess.run([str(c) for c in cmd], **kw)


class Lock:
    """The machine-wide lock of benchmarks and package installs."""

    def __enter__(self):
        self.f = open(LOCK, "a")
        say(f"waiting for {LOCK}")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def in_chroot(root, argv, user=None, env=None, cwd="/", **kw):
    """argv in chroot root, in a mount namespace of its own with /proc,
    /dev, /dev/pts and /dev/shm as schroot's sbuild profile mounts them."""
    env = env or {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"}
    inner = ["chroot"] + ([f"--userspec={user}:{user}"] if user is not None else []) + [str(root)]
    inner += ["/usr/bin/env", "-i", "--chdir", cwd] + [f"{k}={v}" for k, v in env.items()]
    inner += [str(a) for a in argv]
    r = shlex.quote(str(root))
    script = (f"mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && "
              f"mount -t sysfs sys {r}/sys && exec " + " ".join(shlex.quote(a) for a in inner))
    return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], **kw)


def installed_packages():
    out = run(["dpkg-query", "-W", "-f", "${Package}:${Architecture} ${db:Status-Status}\n"],
              capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}


def debsrc(script):
    """Runs bash with examples/lib/debsrc.sh sourced and the cache set up."""
    lib = ROOT / "examples" / "lib" / "debsrc.sh"
    return run(["bash", "-c", f"set -euo pipefail; DEBSRC_PROG=kiln-fidelity; source {shlex.quote(str(lib))}; "
                f"debsrc_init {shlex.quote(str(CACHE))}; {script}"],
               capture_output=True, text=True).stdout


# ---- the clean chroot -------------------------------------------------------

def sources_list():
    return (f"deb {MIRROR} {SUITE} main\n"
            f"deb {MIRROR} {SUITE}-updates main\n"
            f"deb http://deb.debian.org/debian-security {SUITE}-security main\n")


def base_chroot(added):
    base = CACHE / f"chroot-{SUITE}"
    if (base / ".kiln-complete").exists():
        return base
    with Lock():
        if shutil.which("debootstrap") is None:
            say("installing debootstrap (apt-get)")
            before = installed_packages()
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            added |= installed_packages() - before
        tmp = base.with_name(base.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"debootstrap --variant=buildd --merged-usr {SUITE} {tmp} {MIRROR}")
        run(["debootstrap", "--variant=buildd", "--merged-usr", SUITE, tmp, MIRROR])
    # Merged /usr, as Debian 12 installs it and as the host is.
    for d in ("bin", "sbin", "lib", "lib64"):
        p = tmp / d
        if p.exists() and not p.is_symlink():
            raise SystemExit(f"kiln-fidelity: {p} is not a symlink: the chroot is not merged-/usr")
    (tmp / "etc" / "apt" / "sources.list").write_text(sources_list())
    shutil.copy("/etc/resolv.conf", tmp / "etc" / "resolv.conf")
    in_chroot(tmp, ["apt-get", "-qq", "update"])
    in_chroot(tmp, ["apt-get", "-y", "-qq", "dist-upgrade"])
    (tmp / ".kiln-complete").write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
    tmp.rename(base)
    return base


def package_chroot(base, src):
    """A copy of the base chroot with src's Build-Depends installed."""
    control = (src / "debian" / "control").read_bytes()
    stamp = hashlib.sha256(control + sources_list().encode()).hexdigest()
    root = CACHE / "chroots" / src.name
    if (root / ".kiln-deps").exists() and (root / ".kiln-deps").read_text() == stamp:
        return root
    say(f"chroot for {src.name}: its Build-Depends (apt-get build-dep --no-install-recommends)")
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    run(["cp", "-a", "--reflink=auto", base, tmp])
    bd = tmp / "tmp" / "kiln-build-deps" / src.name
    (bd / "debian").mkdir(parents=True)
    shutil.copy(src / "debian" / "control", bd / "debian" / "control")
    in_chroot(tmp, ["apt-get", "-qq", "update"])
    in_chroot(tmp, ["apt-get", "build-dep", "-y", "-qq", "--no-install-recommends",
                    f"/tmp/kiln-build-deps/{src.name}"])
    shutil.rmtree(tmp / "tmp" / "kiln-build-deps")
    (tmp / ".kiln-deps").write_text(stamp)
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return root


def chroot_packages(root):
    out = run(["chroot", root, "dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n"],
              capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}


# ---- the runs -----------------------------------------------------------------

def fresh_tree(src, top):
    """A copy of src at top/tmp/kiln-fidelity/build/NAME, the build user's."""
    tree = top / WORK.relative_to("/") / "build" / src.name
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, tree, symlinks=True)
    shutil.copy(STEP, top / WORK.relative_to("/") / "configure-step")
    for d in (tree.parent.parent, tree.parent):
        os.chmod(d, 0o755)
    os.chown(tree.parent, UID, UID)
    run(["chown", "-R", f"{UID}:{UID}", tree])
    return tree


def step_argv(src, target):
    return ["/bin/sh", WORK / "configure-step", WORK / "build" / src.name] + ([target] if target else [])


def developer_env():
    """A developer's environment: what sbuild cleans away."""
    shims = FAKE_HOME / ".pyenv" / "shims"
    return {
        "HOME": str(FAKE_HOME), "USER": "dev", "LOGNAME": "dev", "LANG": "en_US.UTF-8",
        "PATH": f"{shims}:/usr/local/bin:/usr/bin:/bin", "PYENV_ROOT": str(FAKE_HOME / ".pyenv"),
        "LIBRARY_PATH": "/usr/local/lib:/usr/local/cuda/lib64", "CPATH": "/usr/local/include",
        "PKG_CONFIG_PATH": "/usr/local/lib/pkgconfig", "TERM": "xterm",
    }


def make_fake_home():
    shims = FAKE_HOME / ".pyenv" / "shims"
    shims.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        p = shims / name
        p.write_text("#!/bin/sh\n# a pyenv shim\nexec /usr/bin/python3 \"$@\"\n")
        p.chmod(0o755)
    run(["chown", "-R", f"{UID}:{UID}", FAKE_HOME])


def as_user(argv, env, cwd, **kw):
    return run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--",
                "env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv, cwd=cwd, **kw)


def kiln_env(db, tree):
    """The environment kiln trace gives the build, without kiln's own."""
    out = as_user([KILN, "trace", "--db", db, "--deps-from-control", tree / "debian" / "control",
                   "-o", "/dev/null", "--", "env", "-0"], developer_env(), tree,
                  capture_output=True).stdout
    env = dict(e.split("=", 1) for e in out.decode().split("\0") if "=" in e)
    return {k: v for k, v in env.items() if k != "LD_PRELOAD" and not k.startswith("KILN_")}


def run_logged(label, fn, log):
    t0 = time.monotonic()
    with open(log, "w") as f:
        r = fn(f)
    say(f"{label}: exit {r.returncode} in {time.monotonic() - t0:.0f} s (log {log})")
    return r.returncode


def one_package(name, target, base, db, results):
    src = pathlib.Path(debsrc(f"debsrc_fetch {shlex.quote(str(CACHE))} {name}").strip())
    out = CACHE / "results" / src.name
    out.mkdir(parents=True, exist_ok=True)
    root = package_chroot(base, src)
    env = kiln_env(db, fresh_tree(src, pathlib.Path("/")))
    (out / "env").write_text("".join(f"{k}={v}\n" for k, v in sorted(env.items())))

    outputs, status = {}, {}

    def keep(side, tree):
        """The configure outputs of a run, kept (the next run reuses its tree)."""
        got = compare.configure_outputs(tree)
        for rel, text in got.items():
            p = out / side / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, errors="surrogateescape")
        return got

    tree = fresh_tree(src, root)
    status["chroot"] = run_logged(f"{src.name}: chroot", lambda f: in_chroot(
        root, step_argv(src, target), user=UID, env=env, cwd=str(WORK / "build" / src.name),
        stdout=f, stderr=subprocess.STDOUT, check=False), out / "chroot.log")
    outputs["chroot"] = keep("chroot", tree)

    tree = fresh_tree(src, pathlib.Path("/"))
    argv = [KILN, "trace", "--db", db, "--deps-from-control", tree / "debian" / "control",
            "--json", "-o", WORK / "build" / "report.json", "--"] + step_argv(src, target)
    status["kiln"] = run_logged(f"{src.name}: kiln trace", lambda f: as_user(
        argv, developer_env(), tree, stdout=f, stderr=subprocess.STDOUT, check=False), out / "kiln.log")
    outputs["kiln"] = keep("kiln", tree)
    if (WORK / "build" / "report.json").exists():  # the text report is in kiln.log
        shutil.copy(WORK / "build" / "report.json", out / "report.json")

    tree = fresh_tree(src, pathlib.Path("/"))
    status["plain"] = run_logged(f"{src.name}: plain", lambda f: as_user(
        step_argv(src, target), developer_env(), tree, stdout=f, stderr=subprocess.STDOUT,
        check=False), out / "plain.log")
    outputs["plain"] = keep("plain", tree)

    res = {"source": src.name, "status": status, "files": sorted(outputs["chroot"])}
    for side in ("kiln", "plain"):
        d = compare.differences(outputs["chroot"], outputs[side])
        res[side] = {"vars": compare.counts(d)[0], "h": compare.counts(d)[1],
                     "missing": compare.counts(d)[2], "diffs": [list(map(str, x)) for x in d]}
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    res["kiln"]["declared"] = report.get("declared", [])
    res["kiln"]["hidden_packages"] = sorted({h["package"] for h in report.get("hidden", []) if "package" in h})
    res["chroot_packages"] = len(chroot_packages(root))
    res["kiln"]["closure_packages"] = report.get("closure_packages")
    results[name] = res
    (out / "result.json").write_text(json.dumps(res, indent=1))


def base_set_check(base, db):
    """The chroot profile's base set (kiln registry deps --closure --essential
    --profile chroot build-essential) against what debootstrap's buildd
    variant installed, both among the packages installed here."""
    host = {p.split(":")[0] for p in installed_packages()}
    chroot = chroot_packages(base) & host
    out = run([KILN, "registry", "--db", db, "--json", "deps", "--closure", "--essential", "--profile",
               "chroot", "build-essential"], capture_output=True, text=True).stdout
    kiln = set(json.loads(out)["closure"])
    return {"missing": sorted(chroot - kiln), "extra": sorted(kiln - chroot), "chroot": len(chroot),
            "kiln": len(kiln)}


def print_table(results):
    b = results.pop("_base_set", None)
    if b:
        print(f"\nbase set: debootstrap --variant=buildd installed {b['chroot']} packages that are "
              f"installed here; kiln's chroot profile has {b['kiln']}")
        print(f"  in the chroot, not in kiln's base set: {' '.join(b['missing']) or '-'}")
        print(f"  in kiln's base set, not in the chroot: {' '.join(b['extra']) or '-'}")
    print("\nkiln fidelity: ./configure in a clean chroot against the polluted host")
    print(f"{'package':<16}{'kiln: vars':>11}{'h lines':>9}{'files':>7}   {'plain: vars':>11}{'h lines':>9}"
          f"{'files':>7}   exit c/k/p")
    for name, r in results.items():
        k, p, s = r["kiln"], r["plain"], r["status"]
        print(f"{r['source']:<16}{k['vars']:>11}{k['h']:>9}{k['missing']:>7}   {p['vars']:>11}{p['h']:>9}"
              f"{p['missing']:>7}   {s['chroot']}/{s['kiln']}/{s['plain']}")
    for name, r in results.items():
        if r["kiln"]["diffs"]:
            print(f"\n{r['source']}: kiln differs from the chroot in")
            for d in r["kiln"]["diffs"]:
                print("  " + " | ".join(d))


def private_kiln():
    """A copy of kiln and its preload library for the run: rebuilding the
    tree meanwhile changes nothing of it."""
    global KILN
    d = WORK / "bin"  # the build user must reach it (not under root's home)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for f in ("kiln", "libkiln-trace.so"):
        shutil.copy2(BUILD / f, d / f)
    os.chmod(d, 0o755)
    KILN = d / "kiln"


def main():
    if os.geteuid() != 0:
        raise SystemExit("kiln-fidelity: run as root (it makes chroots and installs packages)")
    args = sys.argv[1:]
    prepare = "--prepare" in args
    names = [a for a in args if a != "--prepare"] or list(PACKAGES)
    for n in names:
        if n not in PACKAGES:
            raise SystemExit(f"kiln-fidelity: unknown package {n!r} (known: {', '.join(PACKAGES)})")
    if not KILN.exists():
        raise SystemExit(f"kiln-fidelity: {KILN} is not built (make)")
    CACHE.mkdir(parents=True, exist_ok=True)
    added = set()
    base = base_chroot(added)
    for n in names:  # sources and chroots first: no lock needed
        src = pathlib.Path(debsrc(f"debsrc_fetch {shlex.quote(str(CACHE))} {n}").strip())
        package_chroot(base, src)
    if prepare:
        if added:
            say("installed on the host (left installed): " + " ".join(sorted(added)))
        return
    results = {}
    WORK.mkdir(parents=True, exist_ok=True)
    os.chmod(WORK, 0o755)
    private_kiln()
    make_fake_home()
    db = WORK / "registry.db"
    with Lock():
        before = installed_packages()
        try:
            say("polluting the host: " + " ".join(POLLUTION))
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + POLLUTION, env=env)
            for n in names:
                src = pathlib.Path(debsrc(f"debsrc_fetch {shlex.quote(str(CACHE))} {n}").strip())
                debsrc(f"debsrc_build_deps {shlex.quote(str(src))}")
            added |= installed_packages() - before
            if db.exists():
                db.unlink()
            run([KILN, "registry", "--db", db, "import", "dpkg"], capture_output=True)
            os.chmod(db, 0o644)
            results["_base_set"] = base_set_check(base, db)
            for n in names:
                one_package(n, PACKAGES[n], base, db, results)
        finally:
            added |= installed_packages() - before
            (CACHE / "installed-by-fidelity").write_text("".join(sorted(p + "\n" for p in added)))
            if added and os.environ.get("KILN_FIDELITY_KEEP") != "1":
                say(f"purging what this run installed ({len(added)} packages)")
                run(["apt-get", "purge", "-y", "-qq"] + sorted(added),
                    env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    (CACHE / "results" / "summary.json").write_text(json.dumps(results, indent=1))
    print_table(results)
    bad = [n for n, r in results.items()
           if r["kiln"]["vars"] or r["kiln"]["h"] or r["kiln"]["missing"] or any(r["status"].values())]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

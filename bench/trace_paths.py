"""Picks the paths of bench-trace's micro benchmark: N regular files under
/usr/include and /usr/lib that dpkg lists (so the registry owns them), and
the packages to declare so that `kiln trace` shows all of them.

The Essential + build-essential closure comes first (what every build sees),
then other packages, -dev ones first, by how many such files they have, until
N are reached; the N paths are then spread evenly over the sorted union so
that every package taken contributes. Paths reached through a symlink
(merged /usr's /lib) and diverted paths are left out."""
import os
import subprocess

INFO = "/var/lib/dpkg/info"
TREES = ("/usr/include/", "/usr/lib/")


def diverted(info=INFO):
    try:
        with open(os.path.join(os.path.dirname(info), "diversions")) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return set()
    return set(lines[0::3]) | set(lines[1::3])


def listed_files(info=INFO):
    """{package: [qualifying paths]} from dpkg's file lists."""
    skip = diverted(info)
    out = {}
    for name in os.listdir(info):
        if not name.endswith(".list"):
            continue
        pkg = name[:-len(".list")].split(":")[0]
        with open(os.path.join(info, name), errors="surrogateescape") as f:
            paths = [p for p in f.read().splitlines()
                     if p.startswith(TREES) and p not in skip]
        good = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)
                and os.path.realpath(p) == p]
        if good:
            out.setdefault(pkg, []).extend(good)
    return out


def pick(kiln, db, n):
    """(paths, declared packages)."""
    base = subprocess.run([kiln, "registry", "--db", db, "deps", "build-essential",
                           "--closure", "--essential"], capture_output=True, text=True, check=True)
    closure = set(base.stdout.split())
    files = listed_files()
    chosen = set()
    for pkg in closure:
        chosen.update(files.get(pkg, ()))
    declared = ["build-essential"]
    rest = sorted((p for p in files if p not in closure),
                  key=lambda p: (not p.endswith("-dev"), -len(files[p]), p))
    for pkg in rest:
        if len(chosen) >= n:
            break
        chosen.update(files[pkg])
        declared.append(pkg)
    ordered = sorted(chosen)
    if len(ordered) < n:
        raise ValueError(f"only {len(ordered)} registry-managed files under "
                         f"{' and '.join(TREES)} on this machine, {n} wanted")
    step = len(ordered) / n
    return [ordered[int(i * step)] for i in range(n)], declared

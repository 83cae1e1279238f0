"""What two ./configure runs found: the cache variables of config.log and the
lines of config.h, and how two runs differ (tests/fidelity/fidelity.py;
docs/fidelity.md has the list of ignored variables and why)."""
import pathlib
import re

# Variables that may differ between two faithful runs, and why (docs/fidelity.md).
IGNORED = {
    # Where configure found the source and build trees: identical paths
    # are used on both sides, so nothing is listed here yet.
}

_VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def cache_vars(text):
    """The "## Cache variables. ##" section of a config.log as {name: value}
    (a value continued on following lines keeps its newlines)."""
    out, name, inside = {}, None, False
    for line in text.splitlines():
        if line.startswith("## Cache variables. ##"):
            inside, name = True, None
            continue
        if not inside:
            continue
        if line.startswith("## ---") or (not line and name is None):
            continue
        if line.startswith("## ") and line.endswith(" ##"):
            break
        m = _VAR.match(line)
        if m:
            name = m.group(1)
            out[name] = m.group(2)
        elif name is not None:
            out[name] += "\n" + line
    return {k: v.rstrip("\n") for k, v in out.items()}


def config_h_lines(text):
    """The lines of a config.h that say something (blank lines dropped)."""
    return [line for line in text.splitlines() if line.strip()]


def configure_outputs(tree):
    """{relative path: text} of every config.log and config.h under tree."""
    tree = pathlib.Path(tree)
    found = {}
    for name in ("config.log", "config.h"):
        for p in sorted(tree.rglob(name)):
            if p.is_file():
                found[str(p.relative_to(tree))] = p.read_text(errors="surrogateescape")
    return found


def differences(ref, got):
    """What differs between two runs' configure_outputs(): a list of
    (file, kind, detail) with kind "missing" (a file one side lacks), "var"
    (a cache variable: detail = (name, ref value, got value)) or "h" (a
    config.h line only one side has: detail = (side, line))."""
    diffs = []
    for rel in sorted(set(ref) | set(got)):
        if rel not in ref or rel not in got:
            diffs.append((rel, "missing", "reference" if rel not in ref else "traced"))
            continue
        if rel.endswith("config.log"):
            a, b = cache_vars(ref[rel]), cache_vars(got[rel])
            for name in sorted(set(a) | set(b)):
                if name in IGNORED:
                    continue
                if a.get(name) != b.get(name):
                    diffs.append((rel, "var", (name, a.get(name), b.get(name))))
        else:
            a, b = config_h_lines(ref[rel]), config_h_lines(got[rel])
            sa, sb = set(a), set(b)
            diffs += [(rel, "h", ("reference", line)) for line in a if line not in sb]
            diffs += [(rel, "h", ("traced", line)) for line in b if line not in sa]
    return diffs


def counts(diffs):
    """(cache variables, config.h lines, missing files) among diffs."""
    return (sum(1 for d in diffs if d[1] == "var"), sum(1 for d in diffs if d[1] == "h"),
            sum(1 for d in diffs if d[1] == "missing"))

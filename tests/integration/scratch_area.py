"""Where a test may build a package so that kiln trace's refusals are
real: outside every area its default policy lets a build write."""
import os


def writable_by_default(path):
    """Whether kiln trace's default policy lets a build write under path."""
    areas = ["/tmp", "/var/tmp", "/dev", "/proc", "/sys"]
    areas += [os.environ[v] for v in ("TMPDIR", "XDG_CACHE_HOME", "CCACHE_DIR") if v in os.environ]
    if "HOME" in os.environ:
        areas += [os.path.join(os.environ["HOME"], d) for d in (".cache", ".ccache")]
    real = os.path.realpath(path)
    return any(real == a or real.startswith(a.rstrip("/") + "/") for a in map(os.path.realpath, areas))

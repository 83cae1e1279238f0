"""The paired estimate the trace benchmarks use for what kiln adds: two
variants run back to back many times, the median of their differences, and
how sure that median is. On these VMs a variant's own runs move by more
than kiln costs (10-30% between builds, +-100 us between batches of 300
spawns), while two runs made seconds apart move much more together."""
import math
import statistics


def median_interval(xs, level=0.9):
    """(lo, hi, coverage): the narrowest interval between order statistics
    that holds the median of xs's distribution with at least `level`
    probability (the sign test's interval; nothing assumed of the
    distribution). Six values give [min, max] at 96.9%; fewer than five
    cannot reach 90%, and then it is (min, max, what they reach)."""
    x = sorted(xs)
    n = len(x)
    below = [math.comb(n, i) / 2 ** n for i in range(n + 1)]
    best = (x[0], x[-1], 1 - 2 * below[0]) if n else None
    for k in range(1, (n + 1) // 2):
        cover = 1 - 2 * sum(below[:k + 1])
        if cover < level:
            break
        best = (x[k], x[n - 1 - k], cover)
    return best


def paired(a, b):
    """(median, lo, hi, coverage) of b[i] - a[i]."""
    d = [y - x for x, y in zip(a, b)]
    return (statistics.median(d), *median_interval(d))

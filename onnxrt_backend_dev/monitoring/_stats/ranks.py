"""Rank statistics: Mann-Whitney's U test, the Hodges-Lehmann estimate of a ratio with its
distribution-free interval (the order statistics selected exactly, without building the
``n m`` pairwise differences), and the same from one sort for small samples."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence

from .._errors import BadValue
from .distributions import NORMAL


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mann-Whitney U test, two-sided, normal approximation with tie and continuity
    corrections (adequate from about 8 samples a side).

    :return: ``(U of a, p-value)``
    """
    n_a, n_b = len(a), len(b)
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    rank_sum_a, ties, i = 0.0, 0.0, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2.0 + 1.0  # average rank of the tied group
        rank_sum_a += rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        size = j - i + 1
        ties += size**3 - size
        i = j + 1
    u_a = rank_sum_a - n_a * (n_a + 1) / 2.0
    return u_a, _u_p_value(u_a, n_a, n_b, ties)


def _u_p_value(u_a: float, n: int, m: int, ties: float) -> float:
    """The two-sided p-value of U, with tie and continuity corrections."""
    total = n + m
    var = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u_a - n * m / 2.0) - 0.5) / math.sqrt(var)
    return min(1.0, 2.0 * NORMAL.cdf(-max(z, 0.0)))


def _interval_rank(n: int, m: int, confidence: float) -> int:
    """The rank of the lower bound of the Hodges-Lehmann interval among the ``n m``
    differences (the normal approximation of U's)."""
    q = NORMAL.inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(n * m / 2.0 - q * math.sqrt(n * m * (n + m + 1) / 12.0))
    return min(max(k, 0), (n * m - 1) // 2)


# Below this many candidate pairs, the selection sorts them: cheaper than more rounds.
_SELECT_SORT_BELOW = 4096
# Candidates drawn each round to choose the pivots.
_SELECT_SAMPLE = 1024


def _ranks_below(
    a: Sequence[float], bd: Sequence[float], pivot: float
) -> tuple[list[int], list[int]]:
    """For each row ``i`` of the matrix ``a[i] - bd[j]`` (rows and columns ascending):
    how many of its entries are ``< pivot`` and how many are ``<= pivot``.

    Both counts shrink as ``i`` grows, so one walk down the staircase costs O(n + m).
    """
    lt: list[int] = []
    le: list[int] = []
    j_lt = j_le = len(bd)
    for x in a:
        while j_lt > 0 and x - bd[j_lt - 1] >= pivot:
            j_lt -= 1
        while j_le > 0 and x - bd[j_le - 1] > pivot:
            j_le -= 1
        lt.append(j_lt)
        le.append(j_le)
    return lt, le


def _pick_pivots(
    a: Sequence[float],
    bd: Sequence[float],
    lo: list[int],
    hi: list[int],
    rank: float,
    rng: random.Random,
) -> tuple[float, float]:
    """Two candidate differences that likely bracket the one of relative rank ``rank``
    among the candidates left (between ``lo`` and ``hi``): order statistics of a random
    sample around that rank, a few standard errors apart (as Floyd and Rivest select)."""
    bounds = list(itertools.accumulate(h - low for low, h in zip(lo, hi, strict=True)))
    draws = []
    for _ in range(_SELECT_SAMPLE):
        r = rng.randrange(bounds[-1])
        i = bisect.bisect_right(bounds, r)
        draws.append(a[i] - bd[hi[i] - (bounds[i] - r)])
    draws.sort()
    spread = math.sqrt(_SELECT_SAMPLE)
    low_at = max(0, math.floor(rank * _SELECT_SAMPLE - spread))
    high_at = min(_SELECT_SAMPLE - 1, math.ceil(rank * _SELECT_SAMPLE + spread))
    return draws[low_at], draws[high_at]


def _clamped_ranks(
    a: Sequence[float], bd: Sequence[float], pivot: float, lo: list[int], hi: list[int]
) -> tuple[list[int], list[int]]:
    lt, le = _ranks_below(a, bd, pivot)
    return (
        [min(max(c, low), h) for c, low, h in zip(lt, lo, hi, strict=True)],
        [min(max(c, low), h) for c, low, h in zip(le, lo, hi, strict=True)],
    )


def kth_difference(a: Sequence[float], bd: Sequence[float], k: int) -> float:
    """The ``k``-th smallest (from 0) of the differences ``a[i] - bd[j]``, exactly as
    sorting them all would give it, without building them: ``a`` ascending and ``bd``
    descending sort the matrix of differences along rows and columns; each round of a
    randomized selection draws two pivots likely to bracket the answer, counts the
    differences below them along the staircase (O(n + m)) and keeps about a sixteenth.

    :param a: ascending values
    :param bd: descending values
    :param k: rank, ``0 <= k < len(a) * len(bd)``
    :return: the difference of rank ``k``
    """
    n, m = len(a), len(bd)
    if not 0 <= k < n * m:
        raise BadValue(f"k must be in [0, {n * m}), got {k}")
    lo, hi = [0] * n, [m] * n
    below = 0  # differences left out under the candidates, all <= the answer
    rng = random.Random(k)  # a fixed seed: same rounds, same time, for the same input
    left = n * m
    while left > _SELECT_SORT_BELOW:
        p1, p2 = _pick_pivots(a, bd, lo, hi, (k - below) / left, rng)
        lt1, le1 = _clamped_ranks(a, bd, p1, lo, hi)
        lt2, le2 = _clamped_ranks(a, bd, p2, lo, hi)
        counts = [
            below + sum(c - low for c, low in zip(x, lo, strict=True)) for x in (lt1, le1, lt2, le2)
        ]
        if k < counts[0]:  # below both pivots: a rare miss, still a cut
            hi = lt1
        elif k < counts[1]:
            return p1
        elif k < counts[2]:  # between the pivots, the usual case
            below, lo, hi = counts[1], le1, lt2
        elif k < counts[3]:
            return p2
        else:  # above both pivots
            below, lo = counts[3], le2
        left = sum(h - low for low, h in zip(lo, hi, strict=True))
    rest = sorted(a[i] - bd[j] for i in range(n) for j in range(lo[i], hi[i]))
    return rest[k - below]


def hodges_lehmann_ratio(
    a: Sequence[float], b: Sequence[float], confidence: float
) -> tuple[float, float, float]:
    """Ratio ``a / b`` of typical values and its distribution-free confidence interval.

    The Hodges-Lehmann shift between the logarithms of the samples (the median of all
    pairwise differences) with the interval of order statistics that matches the
    Mann-Whitney test (normal approximation of its rank), exponentiated back into a ratio.
    The order statistics are selected exactly (:func:`kth_difference`), with no
    approximation, in O((n + m) log(n m)) time and O(n + m) memory instead of sorting
    the ``n m`` differences.

    :return: ``(ratio, low, high)``
    """
    la = sorted(math.log(x) for x in a)
    lbd = sorted((math.log(y) for y in b), reverse=True)
    m = len(la) * len(lbd)
    k = _interval_rank(len(a), len(b), confidence)
    if m % 2:
        median = kth_difference(la, lbd, m // 2)
    else:  # as statistics.median: the mean of the two middle values
        median = (kth_difference(la, lbd, m // 2 - 1) + kth_difference(la, lbd, m // 2)) / 2
    return (
        math.exp(median),
        math.exp(kth_difference(la, lbd, k)),
        math.exp(kth_difference(la, lbd, m - 1 - k)),
    )


def small_sample_test(
    xs: Sequence[float], ys: Sequence[float], confidence: float
) -> tuple[float, float, float, float]:
    """What ``compare_samples`` computes (Mann-Whitney's p-value with its tie and
    continuity corrections, the Hodges-Lehmann ratio and its interval), from one sorted
    list of the ``n m`` log differences: for the few runs of a profile (400 differences
    at 20 a side) this is much faster than its selection, made for 10,000 batches, and
    a profile of 20,000 functions may run 20,000 tests.

    :param xs: positive figures of A
    :param ys: positive figures of B
    :param confidence: level of the interval
    :return: ``(B / A - 1, low, high, p-value)``
    """
    n, m = len(xs), len(ys)
    la = [math.log(x) for x in xs]
    lb = [math.log(y) for y in ys]
    diffs = sorted([a - b for a in la for b in lb])
    nm = n * m
    # Mann-Whitney's U of A: pairs where A is larger, ties counted half.
    below, upto = bisect.bisect_left(diffs, 0.0), bisect.bisect_right(diffs, 0.0)
    u_a = nm - upto + 0.5 * (upto - below)
    ties = sum(c**3 - c for c in Counter([*xs, *ys]).values())
    p = _u_p_value(u_a, n, m, ties)
    k = _interval_rank(n, m, confidence)
    median = diffs[nm // 2] if nm % 2 else (diffs[nm // 2 - 1] + diffs[nm // 2]) / 2
    # diffs are log(A / B): B / A - 1 is exp(-d) - 1, and the bounds swap.
    return math.exp(-median) - 1, math.exp(-diffs[nm - 1 - k]) - 1, math.exp(-diffs[k]) - 1, p

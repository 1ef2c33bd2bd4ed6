"""The statistics of timings, apart from the loop that measures them (as pyperf keeps
its comparison apart from its runner).

* :func:`summarize`: average, deviation, median, quartiles of one series;
* :func:`compare_samples` (two series of per-execution times: Mann-Whitney U and the
  Hodges-Lehmann ratio) and :func:`compare_results` (two ``measure_time`` dictionaries:
  Welch's t-test) turn two timings into a :class:`Comparison`;
* :func:`format_comparison` reads a comparison as one line.

Standard library only: nothing heavy is imported.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import BadType, BadValue


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Statistics of a non-empty series, as plain floats.

    :param values: the samples
    :return: ``average``, ``deviation`` (population standard deviation, never NaN),
        ``min_exec``, ``max_exec``, ``median``, ``iqr`` (third minus first quartile)
        and ``mad`` (median absolute deviation from the median, unscaled)
    """
    if not values:
        raise BadValue("values must not be empty")
    xs = [float(v) for v in values]
    lo, hi = min(xs), max(xs)
    # fsum then division can land one ulp outside [min, max] when all samples are equal.
    mean = min(max(math.fsum(xs) / len(xs), lo), hi)
    var = math.fsum((x - mean) ** 2 for x in xs) / len(xs)
    median = float(statistics.median(xs))
    if len(xs) >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = float(q3 - q1)
    else:
        iqr = 0.0
    return {
        "average": mean,
        "deviation": math.sqrt(var),
        "min_exec": lo,
        "max_exec": hi,
        "median": median,
        "iqr": iqr,
        "mad": float(statistics.median(abs(x - median) for x in xs)),
    }


@dataclass(frozen=True)
class Comparison:
    """How much faster ``candidate`` is than ``baseline``.

    :param baseline: typical seconds of the baseline (median, or mean with Welch)
    :param candidate: typical seconds of the candidate, same statistic
    :param speedup: ``baseline / candidate`` time ratio: above 1, the candidate is faster
    :param ci_low: lower bound of the confidence interval of ``speedup``
    :param ci_high: upper bound of the confidence interval of ``speedup``
    :param confidence: level of the interval, e.g. 0.95
    :param p_value: two-sided p-value of the test of equal timings
    :param significant: ``p_value < alpha``
    :param method: ``"mann-whitney"`` (samples) or ``"welch"`` (summaries)
    :param n_baseline: number of baseline samples
    :param n_candidate: number of candidate samples
    """

    baseline: float
    candidate: float
    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    significant: bool
    method: str
    n_baseline: int
    n_candidate: int

    def to_dict(self) -> dict[str, int | float | str | bool]:
        """The fields as a dictionary of plain values (JSON-ready)."""
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "speedup": self.speedup,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "p_value": self.p_value,
            "significant": self.significant,
            "method": self.method,
            "n_baseline": self.n_baseline,
            "n_candidate": self.n_candidate,
        }


def check_arguments(
    baseline: Any, candidate: Any, confidence: Any, alpha: Any, repeat: Any, max_time: Any
) -> None:
    """The checks of ``compare``, before anything is timed: two statements (str or
    callable) or two results (mappings), levels in (0, 1), and ``repeat >= 2`` for
    statements without a budget (the type of ``repeat`` is checked by the loop).

    :raises BadType: a side of another kind, or one statement and one result
    :raises BadValue: a level out of (0, 1), or ``repeat < 2``
    """
    check_levels(confidence, alpha)
    for name, side in (("baseline", baseline), ("candidate", candidate)):
        if not (isinstance(side, (str, Mapping)) or callable(side)):
            raise BadType(
                f"{name} must be a statement (str or callable) or a measure_time result "
                f"(dict), got {type(side).__name__}"
            )
    if isinstance(baseline, Mapping) != isinstance(candidate, Mapping):
        raise BadType(
            "baseline and candidate must be both statements or both results, got "
            f"{type(baseline).__name__} and {type(candidate).__name__}"
        )
    counted = isinstance(repeat, int) and not isinstance(repeat, bool)
    if not isinstance(baseline, Mapping) and max_time is None and counted and repeat < 2:
        raise BadValue(f"repeat must be >= 2 to compare (two batches a side), got {repeat}")


def check_levels(confidence: Any, alpha: Any) -> None:
    """Refuses a ``confidence`` or ``alpha`` that is not a number in (0, 1), before any
    statement is timed (the message names the parameter).

    :raises BadType: not a number (a str, a bool)
    :raises BadValue: NaN, or not strictly between 0 and 1
    """
    _check_level("confidence", confidence)
    _check_level("alpha", alpha)


def _check_level(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadType(f"{name} must be a number in (0, 1), got {type(value).__name__}")
    if not 0 < value < 1:  # NaN fails it too
        raise BadValue(f"{name} must be in (0, 1), got {value!r}")


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _betacf(b, a, 1.0 - x) / b


def student_t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability ``P(|T| >= |t|)`` of Student's t with ``df`` degrees."""
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def student_t_quantile(p: float, df: float) -> float:
    """``q`` such that ``P(T <= q) = p`` for ``p`` in (0.5, 1), found by bisection."""
    lo, hi = 0.0, 1.0
    while 0.5 * student_t_sf2(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 0.5 * student_t_sf2(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def welch_test(
    mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int
) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test from summaries (sample variances, ddof=1).

    :return: ``(t, degrees of freedom, two-sided p-value)``
    """
    se2_a, se2_b = var_a / n_a, var_b / n_b
    se2 = se2_a + se2_b
    if se2 == 0:  # no spread at all: either identical or certainly different
        return (0.0, math.inf, 1.0) if mean_a == mean_b else (math.inf, math.inf, 0.0)
    t = (mean_a - mean_b) / math.sqrt(se2)
    df = se2**2 / (se2_a**2 / (n_a - 1) + se2_b**2 / (n_b - 1))
    return t, df, student_t_sf2(t, df)


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
    n = n_a + n_b
    var = n_a * n_b / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return u_a, 1.0
    z = (abs(u_a - n_a * n_b / 2.0) - 0.5) / math.sqrt(var)
    return u_a, min(1.0, 2.0 * statistics.NormalDist().cdf(-max(z, 0.0)))


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
    """The ``k``-th smallest (from 0) of the ``len(a) * len(bd)`` differences
    ``a[i] - bd[j]``, exactly as sorting them all would give it, without building them.

    ``a`` must be ascending and ``bd`` descending, so that the matrix of differences is
    sorted along its rows and its columns. Randomized selection over that matrix: each
    round draws two pivots that likely bracket the answer, counts the differences below
    them along the staircase (O(n + m)) and keeps the candidates between them, about a
    sixteenth; a few rounds, O(n + m) memory.

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
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(m / 2.0 - z * math.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12.0))
    k = min(max(k, 0), (m - 1) // 2)
    if m % 2:
        median = kth_difference(la, lbd, m // 2)
    else:  # as statistics.median: the mean of the two middle values
        median = (kth_difference(la, lbd, m // 2 - 1) + kth_difference(la, lbd, m // 2)) / 2
    return (
        math.exp(median),
        math.exp(kth_difference(la, lbd, k)),
        math.exp(kth_difference(la, lbd, m - 1 - k)),
    )


def compare_samples(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float, alpha: float
) -> Comparison:
    """Compares two series of positive timings with the Mann-Whitney U test.

    :param baseline: seconds per execution of the baseline
    :param candidate: seconds per execution of the candidate
    :param confidence: level of the interval of the speedup
    :param alpha: significance threshold of the test
    :return: the comparison
    """
    _check_level("confidence", confidence)
    _check_level("alpha", alpha)
    for name, xs in (("baseline", baseline), ("candidate", candidate)):
        if len(xs) < 2:
            raise BadValue(f"{name} needs at least 2 samples, got {len(xs)}")
        bad = next((x for x in xs if not 0 < x < math.inf), None)
        if bad is not None:
            raise BadValue(f"{name} samples must be finite and > 0, got {bad!r}")
    _, p = mann_whitney_u(baseline, candidate)
    ratio, low, high = hodges_lehmann_ratio(baseline, candidate, confidence)
    return Comparison(
        baseline=float(statistics.median(baseline)),
        candidate=float(statistics.median(candidate)),
        speedup=ratio,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        p_value=p,
        significant=p < alpha,
        method="mann-whitney",
        n_baseline=len(baseline),
        n_candidate=len(candidate),
    )


def _finite(name: str, key: str, value: Any, minimum: float, strict: bool) -> float:
    """``value`` as a finite float at or above ``minimum`` (above it if ``strict``)."""
    rule = f"a finite number {'>' if strict else '>='} {minimum:g}"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    number = float(value) if ok else math.nan
    if not (math.isfinite(number) and (number > minimum if strict else number >= minimum)):
        raise BadValue(f"{name}[{key!r}] must be {rule}, got {value!r}")
    return number


def _summary(name: str, res: Any) -> tuple[float, float, int]:
    """Mean, sample variance (ddof=1) and count from a ``measure_time`` dictionary, checked:
    it may have been loaded back from a file."""
    if not isinstance(res, Mapping):
        raise BadType(f"{name} must be a measure_time result (a dict), got {type(res).__name__}")
    missing = {"average", "deviation", "repeat"} - set(res)
    if missing:
        raise BadValue(f"{name} misses keys {sorted(missing)} of a measure_time result")
    mean = _finite(name, "average", res["average"], 0.0, strict=True)
    dev = _finite(name, "deviation", res["deviation"], 0.0, strict=False)
    n = res["repeat"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise BadValue(f"{name}['repeat'] must be an int >= 2, got {n!r}")
    return mean, dev * dev * n / (n - 1), n


def compare_results(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    confidence: float,
    alpha: float,
) -> Comparison:
    """Compares two ``measure_time`` dictionaries with Welch's t-test on their averages.

    The interval of the ratio of means comes from the delta method on the log ratio.

    :param baseline: result of the baseline
    :param candidate: result of the candidate
    :param confidence: level of the interval of the speedup
    :param alpha: significance threshold of the test
    :return: the comparison
    """
    _check_level("confidence", confidence)
    _check_level("alpha", alpha)
    m_a, v_a, n_a = _summary("baseline", baseline)
    m_b, v_b, n_b = _summary("candidate", candidate)
    _, df, p = welch_test(m_a, v_a, n_a, m_b, v_b, n_b)
    ratio = m_a / m_b
    # Relative standard errors add up in the variance of log(ratio).
    se_log = math.sqrt(v_a / (n_a * m_a * m_a) + v_b / (n_b * m_b * m_b))
    q = student_t_quantile(0.5 + confidence / 2.0, df) if math.isfinite(df) else 0.0
    return Comparison(
        baseline=m_a,
        candidate=m_b,
        speedup=ratio,
        ci_low=ratio * math.exp(-q * se_log),
        ci_high=ratio * math.exp(q * se_log),
        confidence=confidence,
        p_value=p,
        significant=p < alpha,
        method="welch",
        n_baseline=n_a,
        n_candidate=n_b,
    )


def _digits(*values: float) -> int:
    """Significant digits enough for every value other than exactly 1 not to read as 1."""
    for digits in range(3, 18):
        if all(x == 1.0 or float(f"{x:.{digits}g}") != 1.0 for x in values):
            return digits
    return 17


def format_comparison(cmp: Comparison, names: Sequence[str] = ("baseline", "candidate")) -> str:
    """One line such as ``candidate is 1.52x faster than baseline (95% CI 1.48x-1.56x,
    p=0.0002, mann-whitney: significant)``, or, when the difference is not significant,
    ``no significant difference: candidate takes 0.9966x the time of baseline (95% CI
    ...)``. Ratios get the digits they need to differ from 1: never "1x faster".

    :param cmp: the comparison
    :param names: how to call the two sides, baseline first
    :return: the line
    :raises TypeError: ``cmp`` is not a :class:`Comparison` or a name is not a str
    :raises ValueError: ``names`` does not hold exactly two names
    """
    if not isinstance(cmp, Comparison):
        raise BadType(f"cmp must be a Comparison, got {type(cmp).__name__}")
    if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != 2:
        raise BadValue(f"names must be two names (baseline, candidate), got {names!r}")
    if not all(isinstance(x, str) for x in names):
        raise BadType(f"names must be two str, got {names!r}")
    level = f"{cmp.confidence:.0%} CI"
    if not cmp.significant:
        ratio, low, high = 1 / cmp.speedup, 1 / cmp.ci_high, 1 / cmp.ci_low
        d = _digits(ratio, low, high)
        takes = (
            f"takes the same time as {names[0]} (ratio exactly 1, "
            if ratio == 1
            else f"takes {ratio:.{d}g}x the time of {names[0]} ("
        )
        return (
            f"no significant difference: {names[1]} {takes}{level} {low:.{d}g}x-{high:.{d}g}x, "
            f"p={cmp.p_value:.2g}, {cmp.method})"
        )
    if cmp.speedup >= 1:
        word, factor, low, high = "faster", cmp.speedup, cmp.ci_low, cmp.ci_high
    else:
        word, factor, low, high = "slower", 1 / cmp.speedup, 1 / cmp.ci_high, 1 / cmp.ci_low
    d = _digits(factor, low, high)
    return (
        f"{names[1]} is {factor:.{d}g}x {word} than {names[0]} "
        f"({level} {low:.{d}g}x-{high:.{d}g}x, p={cmp.p_value:.2g}, {cmp.method}: significant)"
    )

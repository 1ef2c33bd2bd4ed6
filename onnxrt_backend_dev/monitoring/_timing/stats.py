"""The statistics of timings, apart from the loop that measures them: summaries, and
two timings turned into a :class:`Comparison` (the tests themselves live in
:mod:`.._stats`, shared with ``compare`` and the pytest gate). Standard library only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .._errors import BadType, BadValue
from .._stats.distributions import student_t_quantile
from .._stats.ranks import hodges_lehmann_ratio, mann_whitney_u
from .._stats.welch import welch_test


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
        return asdict(self)


def check_arguments(
    baseline: Any, candidate: Any, confidence: Any, alpha: Any, repeat: Any, max_time: Any
) -> None:
    """The checks of ``compare``, before anything is timed: two statements (str or
    callable) or two results (mappings), levels in (0, 1), and ``repeat >= 2`` for
    statements without a budget (the type of ``repeat`` is checked by the loop)."""
    _check_levels(confidence, alpha)
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


def _check_levels(confidence: Any, alpha: Any) -> None:
    """Refuses a ``confidence`` or ``alpha`` that is not a number in (0, 1)."""
    for name, value in (("confidence", confidence), ("alpha", alpha)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadType(f"{name} must be a number in (0, 1), got {type(value).__name__}")
        if not 0 < value < 1:  # NaN fails it too
            raise BadValue(f"{name} must be in (0, 1), got {value!r}")


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
    _check_levels(confidence, alpha)
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
    """Compares two ``measure_time`` dictionaries with Welch's t-test on their averages
    (the interval of the ratio of means from the delta method on the log ratio).

    :param baseline: result of the baseline
    :param candidate: result of the candidate
    :param confidence: level of the interval of the speedup
    :param alpha: significance threshold of the test
    :return: the comparison
    """
    _check_levels(confidence, alpha)
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

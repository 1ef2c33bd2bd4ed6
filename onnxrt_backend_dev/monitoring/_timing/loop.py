"""The timing machinery behind :func:`onnxrt_backend_dev.monitoring.benchmark.measure_time`.

* :func:`build_timer` compiles the statement into a timing loop, as :mod:`timeit` does:
  a str statement is pasted into the loop body (no call per execution), a callable is
  called from the loop through a local name.
* :func:`measure` runs the warmup and the batches (a fixed ``repeat x number`` or, with
  ``max_time``, batches planned by :func:`plan_next_batch` to end right after the budget)
  and returns a :class:`TimingResult`, the one value of this capability.
* :func:`compare_results` and :func:`compare_statements` turn two timings into a
  :class:`Comparison` (speedup with a confidence interval, Welch or Mann-Whitney U).

Standard library only: nothing heavy is imported.
"""

from __future__ import annotations

import gc
import itertools
import math
import operator
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

Clock = Callable[[], float]
# Runs one batch: (iterator over the executions, clock) -> seconds measured.
Inner = Callable[[Any, Clock], float]

# The template of timeit, byte for byte: the statement is pasted in the loop, nothing
# else is timed; the trailing pass keeps a comment-only statement valid (and makes the
# loop cost exactly what timeit's costs).
_TEMPLATE = """
def inner(_it, _timer{init}):
    {setup}
    _t0 = _timer()
    for _i in _it:
        {stmt}
        pass
    _t1 = _timer()
    return _t1 - _t0
"""

# With max_time, a batch aims at max_time / _BATCHES_PER_BUDGET seconds (at most
# _MAX_BATCH_SECONDS): enough samples for a median and a spread, and the last batch is
# too short for a wrong prediction to overshoot the budget by much.
_BATCHES_PER_BUDGET = 50
_MAX_BATCH_SECONDS = 0.2
# A calibration batch grows at most this much: estimates from short batches are rough.
_MAX_GROWTH = 10
# The last batch aims this much over the remaining budget so that it ends the run
# instead of leaving a sliver for one more tiny batch.
_LAST_BATCH_MARGIN = 1.02
# Batches shorter than this fraction of the target are timed and counted in ttime but
# left out of the statistics: the clock's own cost weighs too much on them.
_SHORT_BATCH_FRACTION = 0.25


@dataclass
class Progress:
    """Counters updated after each batch, read by a live status from another thread.

    :param batches: batches timed so far
    :param runs: executions timed so far
    :param measured: seconds measured so far (the future ``ttime``)
    """

    batches: int = 0
    runs: int = 0
    measured: float = 0.0


@dataclass(frozen=True)
class TimingResult:
    """What one measurement produced.

    :param times: measured seconds of each batch kept for the statistics
    :param sizes: executions in each of those batches
    :param div_by_number: statistics per execution (True) or per batch (False)
    :param ttime: seconds measured over all timed batches, warmup excluded
    :param batches: number of timed batches, including those left out of the statistics
    :param runs: number of timed executions, including those left out of the statistics
    :param warmup_time: seconds taken by the warmup executions, all together
    :param context_size: ``sys.getsizeof(context)``
    :param max_time: the time budget, None for a fixed ``repeat x number``
    """

    times: tuple[float, ...]
    sizes: tuple[int, ...]
    div_by_number: bool
    ttime: float
    batches: int
    runs: int
    warmup_time: float
    context_size: int
    max_time: float | None = None

    def values(self) -> list[float]:
        """The samples the statistics describe: seconds per execution or per batch."""
        if self.div_by_number:
            return [t / n for t, n in zip(self.times, self.sizes, strict=True)]
        return list(self.times)

    @property
    def number(self) -> int:
        """Executions per batch (the rounded mean when batch sizes vary, as with max_time)."""
        return max(1, round(sum(self.sizes) / len(self.sizes)))

    def to_dict(self) -> dict[str, int | float]:
        """The dictionary returned by ``measure_time``: plain ints and floats only."""
        stats = summarize(self.values())
        return {
            "average": stats["average"],
            "deviation": stats["deviation"],
            "min_exec": stats["min_exec"],
            "max_exec": stats["max_exec"],
            "repeat": len(self.times),
            "number": self.number,
            "ttime": float(self.ttime),
            "context_size": int(self.context_size),
            "warmup_time": float(self.warmup_time),
            "median": stats["median"],
            "iqr": stats["iqr"],
            "mad": stats["mad"],
            "batches": int(self.batches),
            "runs": int(self.runs),
        }


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Statistics of a non-empty series, as plain floats.

    :param values: the samples
    :return: ``average``, ``deviation`` (population standard deviation, never NaN),
        ``min_exec``, ``max_exec``, ``median``, ``iqr`` (third minus first quartile)
        and ``mad`` (median absolute deviation from the median, unscaled)
    """
    if not values:
        raise ValueError("values must not be empty")
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


# --- validation ---------------------------------------------------------------------


def _check_int(name: str, value: Any, minimum: int) -> None:
    # operator.index accepts numpy integers too, refuses floats.
    try:
        if isinstance(value, bool):
            raise TypeError
        operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")


def validate(
    stmt: Any,
    repeat: Any,
    number: Any,
    warmup: Any,
    div_by_number: bool,
    max_time: Any,
) -> None:
    """Checks the arguments of ``measure_time``; messages name the parameter and value.

    :raises TypeError: a value of the wrong type (``stmt`` neither str nor callable...)
    :raises ValueError: a value out of range, or ``max_time`` without ``div_by_number``
    """
    if not isinstance(stmt, str) and not callable(stmt):
        raise TypeError(f"stmt must be a str or a callable, got {type(stmt).__name__}")
    _check_int("repeat", repeat, 1)
    _check_int("number", number, 1)
    _check_int("warmup", warmup, 0)
    if max_time is None:
        return
    if isinstance(max_time, bool) or not isinstance(max_time, (int, float)):
        raise TypeError(f"max_time must be a float or None, got {type(max_time).__name__}")
    if not max_time > 0 or math.isinf(max_time):
        raise ValueError(f"max_time must be > 0 and finite, got {max_time!r}")
    if not div_by_number:
        raise ValueError(f"div_by_number must be True when max_time is set, got {div_by_number!r}")


# --- the timing loop ----------------------------------------------------------------


def _reindent(src: str, indent: int) -> str:
    return src.replace("\n", "\n" + " " * indent)


def build_timer(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    setup: str | None = None,
) -> Inner:
    """Compiles the timing loop for ``stmt``, as :class:`timeit.Timer` does.

    :param stmt: a str, compiled into the loop with a copy of ``context`` as its
        globals (the caller's dictionary is left untouched), or a callable, called from
        the loop through a local name
    :param context: the globals of a str statement (and of ``setup``)
    :param setup: code run before each batch, outside the timed region; its names are
        local to the loop, as with ``timeit -s``
    :return: ``inner(iterator, clock) -> seconds`` running one batch
    :raises SyntaxError: ``stmt`` or ``setup`` is not valid Python
    """
    setup_src = setup or "pass"
    # Compiled alone first, so that the error points at the user's code and so that
    # code that would escape the template (a bare return, a dedent) is rejected.
    compile(setup_src, "<setup>", "exec")
    namespace: dict[str, Any] = {}
    init = ""
    if isinstance(stmt, str):
        compile(stmt, "<stmt>", "exec")
        stmt_src = stmt
    else:
        namespace["_stmt"] = stmt
        init = ", _stmt=_stmt"
        stmt_src = "_stmt()"
    src = _TEMPLATE.format(init=init, setup=_reindent(setup_src, 4), stmt=_reindent(stmt_src, 8))
    global_ns = dict(context) if context is not None else {}
    exec(compile(src, "<measure_time>", "exec"), global_ns, namespace)
    inner: Inner = namespace["inner"]
    return inner


def batch_target(max_time: float) -> float:
    """Seconds a batch aims at when the budget is ``max_time``."""
    return min(max_time / _BATCHES_PER_BUDGET, _MAX_BATCH_SECONDS)


def plan_next_batch(last_size: int, last_time: float, total: float, max_time: float) -> int:
    """Sizes the next batch so that the run ends right after ``max_time``.

    While batches are shorter than the target (:func:`batch_target`), the size grows
    (at most tenfold) towards it. Then the remaining budget is split into even batches of
    about the target; the last one aims a little over the remainder to end the run.
    Predictions use the time per execution of the last batch.

    :param last_size: executions in the last batch
    :param last_time: seconds measured for the last batch
    :param total: seconds measured so far, all batches
    :param max_time: the budget
    :return: executions in the next batch, 0 when the budget is spent
    """
    remaining = max_time - total
    if remaining <= 0:
        return 0
    target = batch_target(max_time)
    # A clock that did not tick says only that an execution is very cheap.
    per_exec = max(last_time, 1e-9) / last_size
    if last_time < target:
        size = min(last_size * _MAX_GROWTH, math.ceil(target / per_exec))
        return max(1, min(size, math.ceil(remaining * _LAST_BATCH_MARGIN / per_exec)))
    left = max(1, round(remaining / target))
    share = remaining / left
    if left == 1:
        share *= _LAST_BATCH_MARGIN
    return max(1, math.ceil(share / per_exec))


class _GcOff:
    """Disables the garbage collector unless told to keep it, then restores it."""

    def __init__(self, keep_gc: bool) -> None:
        self.keep_gc = keep_gc
        self.was_enabled = True

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        if not self.keep_gc:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def _run_batch(inner: Inner, clock: Clock, size: int, progress: Progress) -> float:
    t = float(inner(itertools.repeat(None, size), clock))
    progress.batches += 1
    progress.runs += size
    progress.measured += t
    return t


def _run_budget(
    inner: Inner, clock: Clock, max_time: float, progress: Progress
) -> tuple[list[float], list[int]]:
    times: list[float] = []
    sizes: list[int] = []
    size, total = 1, 0.0
    while size > 0:
        t = _run_batch(inner, clock, size, progress)
        times.append(t)
        sizes.append(size)
        total += t
        size = plan_next_batch(size, t, total, max_time)
    return times, sizes


def _keep_long_batches(
    times: list[float], sizes: list[int], max_time: float
) -> tuple[list[float], list[int]]:
    threshold = batch_target(max_time) * _SHORT_BATCH_FRACTION
    kept = [(t, n) for t, n in zip(times, sizes, strict=True) if t >= threshold]
    if not kept:  # a tiny budget: everything is short, keep everything
        return times, sizes
    return [t for t, _ in kept], [n for _, n in kept]


def measure(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    repeat: int = 10,
    number: int = 50,
    warmup: int = 1,
    div_by_number: bool = True,
    max_time: float | None = None,
    *,
    setup: str | None = None,
    keep_gc: bool = False,
    clock: Clock | None = None,
    progress: Progress | None = None,
) -> TimingResult:
    """Times ``stmt``; see ``measure_time`` for the parameters.

    :param setup: code run before each batch, outside the timed region
    :param keep_gc: leave the garbage collector enabled while timing
    :param clock: returns seconds, ``time.perf_counter`` by default
    :param progress: counters updated after each batch (for a live status)
    :return: the result
    """
    validate(stmt, repeat, number, warmup, div_by_number, max_time)
    # Plain Python numbers from here on (numpy integers are accepted on input).
    repeat, number, warmup = operator.index(repeat), operator.index(number), operator.index(warmup)
    inner = build_timer(stmt, context, setup)
    clock = perf_counter if clock is None else clock
    progress = Progress() if progress is None else progress
    with _GcOff(keep_gc):
        warmup_time = float(inner(itertools.repeat(None, warmup), clock)) if warmup else 0.0
        if max_time is None:
            times = [_run_batch(inner, clock, number, progress) for _ in range(repeat)]
            all_sizes = [number] * repeat
            kept, sizes = times, all_sizes
        else:
            times, all_sizes = _run_budget(inner, clock, float(max_time), progress)
            kept, sizes = _keep_long_batches(times, all_sizes, float(max_time))
    return TimingResult(
        times=tuple(float(t) for t in kept),
        sizes=tuple(sizes),
        div_by_number=div_by_number,
        ttime=float(math.fsum(times)),
        batches=len(times),
        runs=sum(all_sizes),
        warmup_time=warmup_time,
        context_size=sys.getsizeof({} if context is None else context),
        max_time=None if max_time is None else float(max_time),
    )


# --- comparison ---------------------------------------------------------------------


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


def _check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")


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


def hodges_lehmann_ratio(
    a: Sequence[float], b: Sequence[float], confidence: float
) -> tuple[float, float, float]:
    """Ratio ``a / b`` of typical values and its distribution-free confidence interval.

    The Hodges-Lehmann shift between the logarithms of the samples (the median of all
    pairwise differences) with the interval of order statistics that matches the
    Mann-Whitney test; exponentiated back into a ratio.

    :return: ``(ratio, low, high)``
    """
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    m = len(diffs)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(m / 2.0 - z * math.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12.0))
    k = min(max(k, 0), (m - 1) // 2)
    return (
        math.exp(float(statistics.median(diffs))),
        math.exp(diffs[k]),
        math.exp(diffs[m - 1 - k]),
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
        if len(xs) < 2 or min(xs) <= 0:
            raise ValueError(f"{name} needs at least 2 positive samples, got {list(xs)!r}")
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


def _summary(name: str, res: Mapping[str, Any]) -> tuple[float, float, int]:
    """Mean, sample variance (ddof=1) and count from a ``measure_time`` dictionary."""
    missing = {"average", "deviation", "repeat"} - set(res)
    if missing:
        raise ValueError(f"{name} misses keys {sorted(missing)} of a measure_time result")
    mean, dev, n = float(res["average"]), float(res["deviation"]), int(res["repeat"])
    if n < 2 or mean <= 0:
        raise ValueError(
            f"{name} needs repeat >= 2 and a positive average, got repeat={n}, average={mean}"
        )
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


def measure_interleaved(
    stmts: Sequence[str | Callable[[], Any]],
    context: Mapping[str, Any] | None = None,
    repeat: int = 20,
    number: int = 50,
    warmup: int = 1,
    *,
    setup: str | None = None,
    keep_gc: bool = False,
    clock: Clock | None = None,
) -> list[list[float]]:
    """Times several statements batch by batch in turn, so that a drift of the machine
    (frequency, another process) weighs on all of them alike; the order alternates.

    :return: seconds per execution, one list of ``repeat`` samples per statement
    """
    for stmt in stmts:
        validate(stmt, repeat, number, warmup, True, None)
    inners = [build_timer(stmt, context, setup) for stmt in stmts]
    clock = perf_counter if clock is None else clock
    samples: list[list[float]] = [[] for _ in inners]
    order = list(range(len(inners)))
    with _GcOff(keep_gc):
        if warmup:
            for inner in inners:
                inner(itertools.repeat(None, warmup), clock)
        for _ in range(repeat):
            for i in order:
                samples[i].append(float(inners[i](itertools.repeat(None, number), clock)) / number)
            order.reverse()
    return samples


def format_comparison(cmp: Comparison, names: tuple[str, str] = ("baseline", "candidate")) -> str:
    """One line such as ``candidate is 1.52x faster than baseline (95% CI 1.48x-1.56x,
    p=0.0002, mann-whitney: significant)``.

    :param cmp: the comparison
    :param names: how to call the two sides
    :return: the line
    """
    if cmp.speedup >= 1:
        word, factor, low, high = "faster", cmp.speedup, cmp.ci_low, cmp.ci_high
    else:
        word, factor, low, high = "slower", 1 / cmp.speedup, 1 / cmp.ci_high, 1 / cmp.ci_low
    verdict = "significant" if cmp.significant else "not significant"
    return (
        f"{names[1]} is {factor:.3g}x {word} than {names[0]} "
        f"({cmp.confidence:.0%} CI {low:.3g}x-{high:.3g}x, p={cmp.p_value:.2g}, "
        f"{cmp.method}: {verdict})"
    )

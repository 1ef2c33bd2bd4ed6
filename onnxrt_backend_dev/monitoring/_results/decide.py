"""The one judgement of a headline figure (a timed statement, a run's time, a memory
peak), shared by ``compare`` and the pytest gate, and the gate's four answers.

A figure is a series of positive values a side: one per process (``time --processes
N``) or run (``--repeat``), or the batches of a single process, *weaker evidence*:
they share its memory layout, hash seed and moment (two ``time --save`` of one
statement on a busy machine differed by -31 % to +56 %). The test is Mann-Whitney's with
the Hodges-Lehmann interval of the ratio from 8 values a side, Welch's test of the logs
below (4 against 4 cannot rank below p = 0.03).

With a single process a side, a spread :data:`BETWEEN_PROCESSES` is added to the
batches' own: 20 % on the wall clock (an unchanged pytest file moved between sessions
by a log spread of 0.20 to 0.42 at load 5 to 9), 8 % on the CPU clock (0.03 to 0.04,
none beyond 0.15 in 200). One process a side thus decides only large changes, never in
the wrong direction on a machine that moved.

The gate's answers (:func:`gate`) for a threshold: ``regressed`` (significant, worse,
its estimate beyond it), ``improved`` (significant, better, its interval below it),
``undecided`` (the interval, or untested the estimate, reaches beyond it: a gate that
cannot decide never passes; with the runs a side that would decide it), ``unchanged``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._stats.distributions import NORMAL
from .._stats.multiple import median
from .._stats.power import runs_needed
from .._stats.ranks import hodges_lehmann_ratio, mann_whitney_u, small_sample_test
from .._stats.robust import biweight_location
from .._stats.welch import log_welch_test, mean_and_variance

# From this many values a side, the rank test; below, Welch's test of the logs.
RANK_FROM = 8
# The log spread between two processes (or sessions) that the batches of one cannot show,
# by clock.
BETWEEN_PROCESSES = {"wall": 0.20, "cpu": 0.08}
# The log spread of one reference work's ratio between two sessions, when the session has
# too few (under MIN_REFERENCES) to show it (-48 % to +78 % at load 6 on the CPU clock).
REFERENCE_SPREAD = 0.3
MIN_REFERENCES = 3
# The least spread of a reference's log ratio (the scale of the robust mean).
REFERENCE_FLOOR = 0.02
# Up to this many pairwise differences, one sort of them all is the faster way.
_SMALL_PRODUCT = 2500
REGRESSED, UNDECIDED, IMPROVED, UNCHANGED = "regressed", "undecided", "improved", "unchanged"


@dataclass(frozen=True)
class Shift:
    """How much slower the machine was in B's session than in A's: the robust mean of
    the log ratios of the reference work timed beside each figure (only the machine moves
    it; the figures' own would take a change slowing all of them for the machine), plus
    on the wall clock what other programs took (:func:`_stolen_shift`).

    :param value: the log ratio taken out of B's values (0 when unknown)
    :param variance: its variance, carried into each figure's test
    :param references: how many references it is estimated over
    :param stolen: the part of ``value`` from other programs' time slices
    """

    value: float = 0.0
    variance: float = 0.0
    references: int = 0
    stolen: float = 0.0

    def with_stolen(self, base: Mapping[str, Any], now: Mapping[str, Any]) -> Shift:
        """This shift, plus the figure's stolen time's when both sides measured it.

        :param base: the baseline's figure
        :param now: this session's
        """
        extra = _stolen_shift(base, now)
        if extra is None:
            return self
        # The share is of the whole span, its median batch may have been spared (slices
        # come in bursts): the correction is as uncertain as it is large.
        return Shift(self.value + extra, self.variance + extra * extra, self.references, extra)

    def describe(self) -> str:
        """What was taken out, in words."""
        parts = []
        if self.references:
            machine = math.expm1(self.value - self.stolen)
            parts.append(
                f"the machine {machine:+.1%} against the baseline's (the reference work "
                f"beside {self.references} figure(s))"
            )
        if self.stolen:
            parts.append(f"other programs' share of its wall time {math.expm1(self.stolen):+.1%}")
        return "; ".join(parts)


def _stolen_shift(base: Mapping[str, Any], now: Mapping[str, Any]) -> float | None:
    """``log((1 - base's stolen share) / (1 - now's))``: how much longer the same work
    took for the time slices other programs took, None when a side lacks the share."""
    a, b = base.get("stolen"), now.get("stolen")
    ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1 for x in (a, b))
    return math.log((1 - float(a)) / (1 - float(b))) if ok else None  # type: ignore[arg-type]


def machine_shift(ratios: Sequence[float]) -> Shift:
    """The machine's shift between two sessions (:class:`Shift`): Tukey's biweight of
    the reference works' log ratios from :data:`MIN_REFERENCES` of them, below their mean
    with a variance of :data:`REFERENCE_SPREAD` squared a reference.

    :param ratios: ``log(B's reference / A's)``, one per figure
    :return: the shift (zero with no ratio)
    """
    n = len(ratios)
    if n == 0:
        return Shift()
    if n < MIN_REFERENCES:
        return Shift(math.fsum(ratios) / n, REFERENCE_SPREAD**2 / n, n)
    floors = [REFERENCE_FLOOR**2] * n
    fit = biweight_location(ratios, [1 / f for f in floors])
    return Shift(fit.value, fit.variance(floors), n)


def reference_ratio(base: Mapping[str, Any], now: Mapping[str, Any]) -> float | None:
    """``log(now's reference / base's)``: how much slower the machine was for this
    figure than for the baseline's, None when a side lacks it.

    :param base: the baseline's figure (a timing series)
    :param now: this session's
    :return: the log ratio or None
    """
    a, b = base.get("reference"), now.get("reference")
    ok = all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
        for x in (a, b)
    )
    return math.log(float(b) / float(a)) if ok else None  # type: ignore[arg-type]


def per_execution(series: Mapping[str, Any]) -> list[float]:
    """The seconds per execution of each batch of a timing series or a pytest figure.

    :param series: its ``times`` and ``sizes``
    """
    return [t / n for t, n in zip(series["times"], series["sizes"], strict=True)]


@dataclass(frozen=True)
class Decision:
    """The test of one headline figure.

    :param change: ``B / A - 1`` of the medians (None when A is 0)
    :param low: lower bound of its interval (None when not tested)
    :param high: upper bound
    :param p_value: the test's p-value (None when not tested)
    :param significant: ``p_value < alpha``
    :param tested: whether a test was made
    :param weaker: judged on the batches of a single process a side
    :param note: why it was not tested, or what the evidence is
    :param log_variance: the pooled variance of one value's log, None when unknown
    """

    change: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    significant: bool = False
    tested: bool = False
    weaker: bool = False
    note: str = ""
    log_variance: float | None = None


def _pooled_log_variance(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The variance of one value's log, pooled over both sides, None with fewer than two
    values a side or a value <= 0."""
    if len(xs) < 2 or len(ys) < 2 or min(min(xs), min(ys)) <= 0:
        return None
    _, va = mean_and_variance([math.log(x) for x in xs])
    _, vb = mean_and_variance([math.log(y) for y in ys])
    return ((len(xs) - 1) * va + (len(ys) - 1) * vb) / (len(xs) + len(ys) - 2)


def judge(
    xs: Sequence[float],
    ys: Sequence[float],
    alpha: float = 0.05,
    confidence: float = 0.95,
    weaker: bool = False,
    clock: str = "wall",
    shift: Shift | None = None,
) -> Decision:
    """Tests two series of positive values (see the module's description).

    :param xs: A's values (one per process, run, or batch)
    :param ys: B's values
    :param alpha: the level
    :param confidence: the level of the interval
    :param weaker: the values are the batches of a single process a side
    :param clock: ``wall`` or ``cpu``, the clock of the values
    :param shift: the machine's shift between the sessions, taken out of ``ys``, its
        variance added to the test's
    """
    if shift is not None and shift.value:
        ys = [y * math.exp(-shift.value) for y in ys]
    a, b = median(xs), median(ys)
    # The change shown is the one of the medians shown beside it; the interval and the
    # p-value are the test's.
    shown = change = b / a - 1 if a > 0 else None
    if len(xs) < 2 or len(ys) < 2:
        return Decision(change, note="a single value on a side: significance not judged")
    if min(min(xs), min(ys)) <= 0:
        return Decision(change, note="a value of zero: no ratio to test")
    variance = _pooled_log_variance(xs, ys)
    if len(xs) >= RANK_FROM and len(ys) >= RANK_FROM:
        if len(xs) * len(ys) <= _SMALL_PRODUCT:
            change, low, high, p = small_sample_test(xs, ys, confidence)
        else:
            _, p = mann_whitney_u(xs, ys)
            ratio, r_low, r_high = hodges_lehmann_ratio(xs, ys, confidence)
            change, low, high = 1 / ratio - 1, 1 / r_high - 1, 1 / r_low - 1
    else:
        test = log_welch_test(xs, ys, confidence)
        change, low, high, p = test.change, test.low, test.high, test.p_value
    extra_var = 0.0  # a variance of the log ratio the values cannot show
    if weaker:
        spread = BETWEEN_PROCESSES.get(clock, BETWEEN_PROCESSES["wall"])
        extra_var = 2 * spread**2
        # The runs that would decide it are processes: each one's figure spreads by the
        # spread between processes, plus its batches' own.
        if variance is not None:
            variance = spread**2 + variance / min(len(xs), len(ys))
    if shift is not None:
        extra_var += shift.variance
    if extra_var:
        change, low, high, p = _widened(change, low, high, confidence, extra_var)
    note = "weaker evidence: the batches of a single process a side" if weaker else ""
    return Decision(
        change if shown is None else shown, low, high, p, p < alpha, True, weaker, note,
        log_variance=variance,
    )  # fmt: skip


def _widened(
    change: float, low: float, high: float, confidence: float, extra_var: float
) -> tuple[float, float, float, float]:
    """The test widened by a variance the values cannot show (normal, on the logs)."""
    q = NORMAL.inv_cdf(0.5 + confidence / 2.0)
    d = math.log1p(change)
    se_batches = (math.log1p(high) - math.log1p(low)) / (2 * q)
    se = math.sqrt(se_batches**2 + extra_var)
    p = min(1.0, 2 * NORMAL.cdf(-abs(d) / se))
    return change, math.expm1(d - q * se), math.expm1(d + q * se), p


def gate(
    decision: Decision,
    above: float,
    alpha: float = 0.05,
    strict: bool = True,
) -> tuple[str, int | None]:
    """The gate's answer for one figure, and the runs a side that would decide it when
    undecided and the spread is known.

    :param decision: from :func:`judge`
    :param above: the threshold, a fraction (0.05 for 5 %)
    :param alpha: the level the runs are counted for (at 80 % power)
    :param strict: undecided whenever the interval reaches above the threshold; False:
        only when the estimate does
    :return: ``(answer, runs)``: :data:`REGRESSED`, :data:`UNDECIDED`, :data:`IMPROVED`
        or :data:`UNCHANGED`, and None or a number of runs
    """
    change = decision.change
    if change is None:
        return UNCHANGED, None
    if decision.significant and change > above:
        return REGRESSED, None
    reach = change if not decision.tested or not strict else (decision.high or change)
    if reach > above:
        runs = None
        if decision.log_variance is not None and decision.log_variance > 0 and above > 0:
            runs = runs_needed(decision.log_variance, above, alpha)
        return UNDECIDED, runs
    if decision.significant and change < 0:
        return IMPROVED, None
    return UNCHANGED, None

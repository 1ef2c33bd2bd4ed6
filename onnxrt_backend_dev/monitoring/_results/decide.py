"""The one judgement of a headline figure (a timed statement, a run's wall time, a
memory peak), shared by ``compare`` and the pytest gate, and the gate's four answers.

A figure is a series of positive values a side: one per process (a timing saved with
``time --processes N``), one per run (``--repeat``), or, with a single process a side,
the batches of that process, which is *weaker evidence*: its batches share the process's
memory layout, hash seed and the load of its moment, and say little of another process
(two ``time --save`` of one statement, one after the other on a busy machine, differed
by -31 % to +56 %). The test is Mann-Whitney's with the Hodges-Lehmann interval of the
ratio from 8 values a side (a run the machine slowed is one rank, not a weight), and
Welch's test of the logs below (a rank test of 4 against 4 cannot go under p = 0.03).

With a single process a side, the batches cannot show how much two processes differ:
a spread of :data:`BETWEEN_PROCESSES` is added to the batches' own, in the test and its
interval: 7 % a process on the wall clock (two ``time --save`` of one statement, one
after the other on this project's busy machine, differed by -31 % to +56 %), 3 % on the
CPU clock (the time other programs take is not counted).

The gate's answers (:func:`gate`), for a threshold ``above`` (0.05 for 5 %):

* ``regressed``: the change is significant, for the worse, and its estimate exceeds
  the threshold;
* ``undecided``: the estimate exceeds the threshold but the evidence cannot decide it
  (not significant, too few runs, a single value a side): never a pass. The runs a side
  that would decide it come with it, when the spread is known. On weaker evidence
  (``strict``, as ``compare`` judges), it is undecided too when the interval's upper
  bound exceeds the threshold: one process a side passes only what it can rule out;
* ``improved``: significant and for the better;
* ``unchanged``: none of these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .._stats.distributions import NORMAL
from .._stats.power import runs_needed
from .._stats.ranks import hodges_lehmann_ratio, mann_whitney_u, small_sample_test
from .._stats.welch import log_welch_test, mean_and_variance

# From this many values a side, the rank test; below, Welch's test of the logs.
RANK_FROM = 8
# The log spread between two processes (or sessions) that the batches of one cannot show,
# by clock.
BETWEEN_PROCESSES = {"wall": 0.07, "cpu": 0.03}
# Up to this many pairwise differences, one sort of them all is the faster way.
_SMALL_PRODUCT = 2500
REGRESSED, UNDECIDED, IMPROVED, UNCHANGED = "regressed", "undecided", "improved", "unchanged"


@dataclass(frozen=True)
class Decision:
    """The test of one headline figure.

    :param change: ``B / A - 1`` of the typical values (None when A is 0)
    :param low: lower bound of its interval (None when not tested)
    :param high: upper bound
    :param p_value: the test's p-value (None when not tested)
    :param significant: ``p_value < alpha``
    :param tested: whether a test was made
    :param weaker: judged on the batches of a single process a side
    :param method: ``mann-whitney``, ``welch`` or ``""``
    :param note: why it was not tested, or what the evidence is
    :param log_variance: the run-to-run variance of the log of one value (pooled), None
        when unknown
    """

    change: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    significant: bool = False
    tested: bool = False
    weaker: bool = False
    method: str = ""
    note: str = ""
    log_variance: float | None = None


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def pooled_log_variance(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The variance of the log of one value, pooled over both sides (each about its own
    mean), None with fewer than two values a side or a value <= 0.

    :param xs: A's values
    :param ys: B's values
    :return: the variance or None
    """
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
) -> Decision:
    """Tests two series of positive values (see the module's description).

    :param xs: A's values (one per process, run, or batch)
    :param ys: B's values
    :param alpha: the level
    :param confidence: the level of the interval
    :param weaker: the values are the batches of a single process a side
    :param clock: ``wall`` or ``cpu``, the clock of the values (the spread between
        processes that weaker evidence adds)
    :return: the decision
    """
    a = _median(xs) if xs else 0.0
    b = _median(ys) if ys else 0.0
    change = b / a - 1 if a > 0 else None
    if len(xs) < 2 or len(ys) < 2:
        return Decision(change, note="a single value on a side: significance not judged")
    if min(min(xs), min(ys)) <= 0:
        return Decision(change, note="a value of zero: no ratio to test")
    variance = pooled_log_variance(xs, ys)
    if len(xs) >= RANK_FROM and len(ys) >= RANK_FROM:
        if len(xs) * len(ys) <= _SMALL_PRODUCT:
            change, low, high, p = small_sample_test(xs, ys, confidence)
        else:
            _, p = mann_whitney_u(xs, ys)
            ratio, r_low, r_high = hodges_lehmann_ratio(xs, ys, confidence)
            change, low, high = 1 / ratio - 1, 1 / r_high - 1, 1 / r_low - 1
        method = "mann-whitney"
    else:
        test = log_welch_test(xs, ys, confidence)
        change, low, high, p, method = test.change, test.low, test.high, test.p_value, "welch"
    if weaker:
        spread = BETWEEN_PROCESSES.get(clock, BETWEEN_PROCESSES["wall"])
        change, low, high, p = _widened(change, low, high, confidence, spread)
    note = "weaker evidence: the batches of a single process a side" if weaker else ""
    return Decision(
        change, low, high, p, p < alpha, True, weaker, method, note, log_variance=variance
    )


def _widened(
    change: float, low: float, high: float, confidence: float, spread: float
) -> tuple[float, float, float, float]:
    """The change of one process a side, its interval and p-value widened by the spread
    between processes the batches cannot show (normal approximation on the logs)."""
    q = NORMAL.inv_cdf(0.5 + confidence / 2.0)
    d = math.log1p(change)
    se_batches = (math.log1p(high) - math.log1p(low)) / (2 * q)
    se = math.sqrt(se_batches**2 + 2 * spread**2)
    p = min(1.0, 2 * NORMAL.cdf(-abs(d) / se))
    return change, math.expm1(d - q * se), math.expm1(d + q * se), p


def gate(
    decision: Decision,
    above: float,
    alpha: float = 0.05,
    power: float = 0.8,
    strict: bool = True,
) -> tuple[str, int | None]:
    """The gate's answer for one figure, and the runs a side that would decide it when
    it is undecided and the spread is known.

    :param decision: from :func:`judge`
    :param above: the threshold, a fraction (0.05 for 5 %)
    :param alpha: the level the runs are counted for
    :param power: the chance the counted runs give to decide a change of ``above``
    :param strict: weaker evidence passes only what its interval rules out (``compare``);
        False judges it on its estimate as the rest (the pytest gate, whose undecided
        figures are said, not failed)
    :return: ``(answer, runs)``, one of :data:`REGRESSED`, :data:`UNDECIDED`,
        :data:`IMPROVED`, :data:`UNCHANGED`, and None or a number of runs
    """
    change = decision.change
    if change is None:
        return UNCHANGED, None
    if decision.significant and change > above:
        return REGRESSED, None
    if decision.significant and change < 0:
        return IMPROVED, None
    doubtful = strict and decision.weaker and (decision.high or 0.0) > above
    if (change > above or doubtful) and not decision.significant:
        runs = None
        if decision.log_variance is not None and decision.log_variance > 0 and above > 0:
            runs = runs_needed(decision.log_variance, above, alpha, power)
        return UNDECIDED, runs
    return UNCHANGED, None

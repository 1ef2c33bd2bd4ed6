"""Tests fit for counts: the samples a sampling profiler took in a call path are counts,
Poisson-like (the variance of ``log k`` is about ``1 / k``), zero in some runs for small
paths, where a log of the time alone would be undefined and a rank test mostly ties."""

from __future__ import annotations

import math

from .distributions import NORMAL

# Half a count added to each side: the log of a zero count stays defined, and the bias of
# log(k) for small k shrinks (Anscombe's correction for the log of a Poisson count).
HALF = 0.5


def count_ratio_test(
    count_a: float,
    count_b: float,
    factor: float = 0.0,
    extra_var: float = 0.0,
    confidence: float = 0.95,
    margin: float = 0.0,
    runs: tuple[int, int] = (1, 1),
) -> tuple[float, float, float, float]:
    """Compares the counts of two sides when one has a single run: the log ratio of the
    counts per run, ``log((k_B + 1/2) / n_B) - log((k_A + 1/2) / n_A)``, less the
    run-wide ``factor``, with the Poisson variance of each total plus ``extra_var`` (the
    run-to-run spread a single run cannot show), by the normal approximation.

    :param count_a: A's count (samples), all its runs added up
    :param count_b: B's count
    :param factor: the log ratio expected when nothing changed
    :param extra_var: variance added to the Poisson one
    :param confidence: level of the interval
    :param margin: the change deemed negligible, a fraction >= 0
    :param runs: the runs of A and B the counts add up
    :return: ``(B / A - 1, low, high, p-value)``, the change corrected for the factor
    """
    d = math.log(count_b + HALF) - math.log(count_a + HALF) - factor - math.log(runs[1] / runs[0])
    # The variance of log(k + 1/2) of a Poisson count of mean k: 1 / (k + 1/2) (delta method).
    se = math.sqrt(1.0 / (count_a + HALF) + 1.0 / (count_b + HALF) + extra_var)
    z = max(abs(d) - math.log1p(margin), 0.0) / se
    p = min(1.0, 2.0 * NORMAL.cdf(-z))
    q = NORMAL.inv_cdf(0.5 + confidence / 2.0)
    return math.expm1(d), math.expm1(d - q * se), math.expm1(d + q * se), p

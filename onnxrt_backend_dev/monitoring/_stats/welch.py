"""Welch's t-test: from summaries, on the logs of two series of positive figures, and
*moderated* (a prior variance borrowed from the other figures, as limma does), with a
margin of negligible change.

The logs, because a machine's speed and a function's work act as factors: the change is
a ratio. The moderation, because a comparison of profiles has 5 to 20 runs a side and
hundreds of figures: one figure's variance over 8 degrees is a poor estimate (t > 5 for
p < 1e-3), the figures together say well what spread a figure of that size has. The
moderated variance is their mean weighted by degrees of freedom; with no change the
statistic is Student's t with the degrees added (Smyth 2004).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .distributions import student_t_quantile, student_t_sf2


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


@dataclass(frozen=True)
class LogTest:
    """The test of two series of log figures.

    :param change: ``B / A - 1``, from the difference of the log means
    :param low: lower bound of its interval
    :param high: upper bound
    :param p_value: two-sided p-value (of a change beyond the margin)
    """

    change: float
    low: float
    high: float
    p_value: float


def mean_and_variance(xs: Sequence[float]) -> tuple[float, float]:
    """``(mean, sample variance)`` (ddof=1; 0 for a single value).

    :param xs: the values, at least one
    """
    n = len(xs)
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, 0.0
    return mean, math.fsum([(x - mean) ** 2 for x in xs]) / (n - 1)


def trimmed_mean_and_variance(xs: Sequence[float], trim: float = 0.0) -> tuple[float, float, int]:
    """Yuen's trimmed mean, the variance of one value it implies (winsorized, scaled so
    that the mean's squared standard error is ``variance / n``) and its degrees of
    freedom: a run a sampler got wrong (4 ms for a 50 ms function) moves neither.

    :param xs: the values, at least one
    :param trim: the fraction trimmed at each end, in [0, 0.5)
    :return: ``(trimmed mean, variance, degrees of freedom)``; untrimmed, the mean, the
        sample variance and ``n - 1``
    """
    n = len(xs)
    g = int(trim * n)
    if g == 0 or n - 2 * g < 2:
        mean, var = mean_and_variance(xs)
        return mean, var, n - 1
    s = sorted(xs)
    h = n - 2 * g
    mean = math.fsum(s[g : n - g]) / h
    wins = [s[g]] * g + s[g : n - g] + [s[n - g - 1]] * g
    wmean = math.fsum(wins) / n
    wvar = math.fsum([(x - wmean) ** 2 for x in wins]) / (n - 1)
    # Yuen: the squared standard error is (n - 1) wvar / (h (h - 1)).
    return mean, (n - 1) * wvar * n / (h * (h - 1)), h - 1


def moderated_log_test(
    la: Sequence[float],
    lb: Sequence[float],
    confidence: float = 0.95,
    prior_var: float = 0.0,
    prior_df: float = 0.0,
    margin: float = 0.0,
    extra_var: float = 0.0,
    trim: float = 0.0,
    floors: tuple[float, float] = (0.0, 0.0),
) -> LogTest:
    """Welch's test of two series of logs, each side's variance moderated by a prior:
    ``(d0 s0^2 + (n - 1) s^2) / (d0 + n - 1)``, with Welch-Satterthwaite degrees of
    ``d0 + n - 1`` a side (``prior_df = 0``: Welch's plain test). The statistic is
    ``(|d| - log(1 + margin)) / se``: a steady 0.5 % (code moved in memory) is never
    significant, however many runs show it.

    :param la: logs of A's figures (at least one; two unless a prior is given)
    :param lb: logs of B's figures
    :param confidence: level of the interval
    :param prior_var: the prior variance of one log figure
    :param prior_df: its degrees of freedom (0: none)
    :param margin: the change deemed negligible, a fraction >= 0
    :param extra_var: a variance added to the difference's (a shift taken out of ``lb``)
    :param trim: Yuen's test: the fraction trimmed at each end
    :param floors: each side's least variance of one log figure (a count's Poisson part:
        runs agreeing better than their samples allow make the test no surer)
    """
    ma, va, dfa = trimmed_mean_and_variance(la, trim)
    mb, vb, dfb = trimmed_mean_and_variance(lb, trim)
    parts = []
    for n, v, own_df, floor in ((len(la), va, dfa, floors[0]), (len(lb), vb, dfb, floors[1])):
        df = prior_df + own_df
        var = (prior_df * prior_var + own_df * v) / df if df > 0 else math.inf
        parts.append((max(var, floor) / n, df))
    se2 = parts[0][0] + parts[1][0] + extra_var
    d = mb - ma
    shift = math.log1p(margin)
    if not math.isfinite(se2):
        return LogTest(math.expm1(d), -1.0, math.inf, 1.0)
    if se2 <= 0:
        p = 0.0 if abs(d) > shift else 1.0
        return LogTest(math.expm1(d), math.expm1(d), math.expm1(d), p)
    denom = sum(s * s / df for s, df in parts if df > 0 and s > 0)
    df = se2 * se2 / denom if denom > 0 else math.inf
    se = math.sqrt(se2)
    p = student_t_sf2(max(abs(d) - shift, 0.0) / se, df)
    # The interval's degrees rounded to a quarter (its bounds move by < 0.1 % for it),
    # so that the quantiles of a comparison's hundreds of tests are a few cached ones.
    q = student_t_quantile(0.5 + confidence / 2.0, max(round(df * 4) / 4, 1.0))
    return LogTest(math.expm1(d), math.expm1(d - q * se), math.expm1(d + q * se), p)


def log_welch_test(xs: Sequence[float], ys: Sequence[float], confidence: float = 0.95) -> LogTest:
    """Welch's test of the logs of two series of positive figures (two a side or more).

    :param xs: A's figures, > 0
    :param ys: B's figures, > 0
    :param confidence: level of the interval
    """
    return moderated_log_test([math.log(x) for x in xs], [math.log(y) for y in ys], confidence)


def welch_difference(
    xs: Sequence[float], ys: Sequence[float], confidence: float = 0.95, margin: float = 0.0
) -> tuple[float, float, float, float]:
    """Welch's test of ``mean B - mean A`` of figures of any sign (a memory growth: a
    function may free), two a side or more: ``(difference, low, high, p-value)``.

    :param xs: A's figures
    :param ys: B's figures
    :param confidence: level of the interval
    :param margin: a difference deemed negligible, in the figures' unit, >= 0
    """
    ma, va = mean_and_variance(xs)
    mb, vb = mean_and_variance(ys)
    na, nb = len(xs), len(ys)
    se2 = va / na + vb / nb
    d = mb - ma
    if se2 <= 0:
        return d, d, d, (0.0 if abs(d) > margin else 1.0)
    df = se2 * se2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    se = math.sqrt(se2)
    p = student_t_sf2(max(abs(d) - margin, 0.0) / se, df)
    q = student_t_quantile(0.5 + confidence / 2.0, df)
    return d, d - q * se, d + q * se, p

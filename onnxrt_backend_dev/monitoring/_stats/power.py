"""How many runs would decide: the runs a side a two-sample test of log figures needs to
tell a given change from none, at a level and a power."""

from __future__ import annotations

import math

from .distributions import NORMAL

# Mann-Whitney's efficiency relative to the t-test on normal data (3 / pi): the rank test
# needs about 5 % more runs for the same power.
RANK_EFFICIENCY = 3 / math.pi


def runs_needed(log_variance: float, change: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Runs a side (at least 2) for a two-sided rank test at ``alpha`` to find
    ``change`` with probability ``power`` (normal approximation, corrected for the rank
    test's efficiency).

    :param log_variance: the run-to-run variance of the log of one run's figure
    :param change: the change to find, a fraction (0.05 for 5 %), != 0
    :param alpha: the level
    :param power: the chance to find it
    """
    effect = abs(math.log1p(change))
    if effect <= 0 or log_variance <= 0:
        return 2
    z = NORMAL.inv_cdf(1 - alpha / 2) + NORMAL.inv_cdf(power)
    n = 2 * z * z * log_variance / (effect * effect) / RANK_EFFICIENCY
    return max(2, math.ceil(n))

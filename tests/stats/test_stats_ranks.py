"""The rank statistics and Welch's test (_stats/ranks.py, _stats/welch.py,
_stats/distributions.py): agreement with scipy, the exact selection of the Hodges-Lehmann
order statistics against sorting all the pairs, in linear memory."""

from __future__ import annotations

import math
import random
import statistics
import tracemalloc
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring._stats import distributions, ranks, welch


def test_statistical_tests_agree_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    a = [1.0, 1.2, 0.9, 1.4, 1.1, 1.3, 1.0, 1.25, 1.15, 1.05]
    b = [0.8, 0.95, 0.85, 1.0, 0.9, 0.7, 0.9, 0.75, 1.1, 0.88]
    _, p = ranks.mann_whitney_u(a, b)
    expected = stats.mannwhitneyu(a, b, use_continuity=True, method="asymptotic").pvalue
    assert p == pytest.approx(expected, rel=1e-6)

    t, df, p = welch.welch_test(2.0, 0.3, 8, 1.7, 0.1, 12)
    ref = stats.ttest_ind_from_stats(2.0, 0.3**0.5, 8, 1.7, 0.1**0.5, 12, equal_var=False)
    assert (t, p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-6)
    assert distributions.student_t_quantile(0.975, df) == pytest.approx(
        stats.t.ppf(0.975, df), rel=1e-6
    )


# --- Hodges-Lehmann: exact selection, not quadratic ------------------------------------------


def _hodges_lehmann_by_sorting(
    a: list[float], b: list[float], confidence: float
) -> tuple[float, float, float]:
    """The former implementation: every pairwise difference, sorted (O(n m))."""
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    m = len(diffs)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(m / 2.0 - z * math.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12.0))
    k = min(max(k, 0), (m - 1) // 2)
    return math.exp(statistics.median(diffs)), math.exp(diffs[k]), math.exp(diffs[m - 1 - k])


@pytest.mark.parametrize("seed", range(12))
def test_hodges_lehmann_is_exactly_the_one_of_all_sorted_pairs(seed: int) -> None:
    rng = random.Random(seed)
    n, m = rng.randint(2, 150), rng.randint(2, 150)  # up to 22,500 pairs: several rounds
    # Ties on purpose (a coarse clock gives them): a few repeated values among random ones.
    a = [rng.choice([1.0, 1.25, rng.uniform(0.5, 2.0)]) for _ in range(n)]
    b = [rng.choice([1.0, 1.1, rng.uniform(0.5, 2.0)]) for _ in range(m)]
    confidence = rng.choice([0.9, 0.95, 0.99])
    assert ranks.hodges_lehmann_ratio(a, b, confidence) == _hodges_lehmann_by_sorting(
        a, b, confidence
    )


def test_kth_difference_matches_sorting_at_every_rank() -> None:
    rng = random.Random(7)
    a = sorted(rng.choice([0.0, 0.5, rng.random()]) for _ in range(90))
    bd = sorted((rng.choice([0.0, rng.random()]) for _ in range(70)), reverse=True)
    expected = sorted(x - y for x in a for y in bd)
    assert [ranks.kth_difference(a, bd, k) for k in range(0, len(expected), 37)] == expected[::37]
    with pytest.raises(ValueError, match=r"k must be in \[0, 6300\), got 6300"):
        ranks.kth_difference(a, bd, 6300)


def test_hodges_lehmann_needs_linear_memory_and_few_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    a = [rng.uniform(1.0, 2.0) for _ in range(2000)]
    b = [rng.uniform(1.0, 2.0) for _ in range(2000)]
    walks: list[float] = []
    ranks_below = ranks._ranks_below

    def counted(x: Any, y: Any, pivot: float) -> tuple[list[int], list[int]]:
        walks.append(pivot)
        return ranks_below(x, y, pivot)

    monkeypatch.setattr(ranks, "_ranks_below", counted)
    tracemalloc.start()
    try:
        ranks.hodges_lehmann_ratio(a, b, 0.95)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Sorting the 4,000,000 pairs would take over 100 MB; the selection keeps a few lists
    # of 2,000 indices.
    assert peak < 4_000_000, peak
    # Four order statistics, each a few O(n) passes (two per round), not O(n m) work.
    assert len(walks) <= 4 * 2 * 8, len(walks)

"""Power and false-alarm rates of the tests the comparisons use, on seeded synthetic data
(no clock): the moderated test of logs, the count test of a single run a side, Holm's
correction, the runs a side that would decide a change, and whole comparisons of
profiles that are identical, or where one caller of a shared function got slower."""

from __future__ import annotations

import math
import random

import pytest
from results_data import profile_doc, sampled_doc, shared_callee_stacks

from onnxrt_backend_dev.monitoring._results.compare import compare_results, label
from onnxrt_backend_dev.monitoring._stats.counts import count_ratio_test
from onnxrt_backend_dev.monitoring._stats.multiple import holm, median, weighted_median
from onnxrt_backend_dev.monitoring._stats.power import runs_needed
from onnxrt_backend_dev.monitoring._stats.welch import (
    log_welch_test,
    moderated_log_test,
    welch_difference,
)


def _logs(rng: random.Random, n: int, shift: float, sd: float) -> list[float]:
    return [rng.gauss(shift, sd) for _ in range(n)]


def test_the_moderated_test_holds_its_level_and_gains_power() -> None:
    # GIVEN 5 runs a side of figures whose spread the prior knows (sd 0.1)
    rng = random.Random(1)
    trials = 600
    alarms = plain_found = moderated_found = 0
    for _ in range(trials):
        la, lb = _logs(rng, 5, 0.0, 0.1), _logs(rng, 5, 0.0, 0.1)
        alarms += moderated_log_test(la, lb, prior_var=0.01, prior_df=4).p_value < 0.05
        la, lb = _logs(rng, 5, 0.0, 0.1), _logs(rng, 5, math.log(1.2), 0.1)
        plain_found += moderated_log_test(la, lb).p_value < 0.001
        moderated_found += moderated_log_test(la, lb, prior_var=0.01, prior_df=4).p_value < 0.001
    # THEN the false alarms stay near 5 % and a 20 % change is found at p < 0.001 more often
    assert alarms / trials < 0.07
    assert moderated_found > plain_found + trials // 10


def test_the_margin_keeps_a_tiny_consistent_change_from_being_significant() -> None:
    # GIVEN a 0.5 % change that every run shows (code moved in memory)
    rng = random.Random(2)
    la = _logs(rng, 20, 0.0, 0.001)
    lb = _logs(rng, 20, math.log(1.005), 0.001)
    # THEN significant without a margin, not within a 2 % one
    assert moderated_log_test(la, lb).p_value < 1e-6
    assert moderated_log_test(la, lb, margin=0.02).p_value == 1.0
    # AND a 10 % change beyond it still is
    lc = _logs(rng, 20, math.log(1.1), 0.001)
    assert moderated_log_test(la, lc, margin=0.02).p_value < 1e-6


def test_welch_agrees_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    xs = [1.0, 1.2, 0.9, 1.4, 1.1, 1.3]
    ys = [0.8, 0.95, 0.85, 1.0, 0.9, 0.7, 0.9]
    ref = stats.ttest_ind([math.log(x) for x in xs], [math.log(y) for y in ys], equal_var=False)
    assert log_welch_test(xs, ys).p_value == pytest.approx(ref.pvalue, rel=1e-6)
    ref = stats.ttest_ind(xs, ys, equal_var=False)
    d, low, high, p = welch_difference(xs, ys)
    assert p == pytest.approx(ref.pvalue, rel=1e-6) and low < d < high


def test_the_count_test_of_one_run_a_side_holds_its_level() -> None:
    # GIVEN Poisson counts of one run a side, no change, the run-to-run spread it assumes
    rng = random.Random(3)
    trials, alarms = 2000, 0
    for _ in range(trials):
        mean = 200 * rng.lognormvariate(0, 0.03)
        a = sum(1 for _ in range(400) if rng.random() < mean / 400)
        b = sum(1 for _ in range(400) if rng.random() < 200 * rng.lognormvariate(0, 0.03) / 400)
        alarms += count_ratio_test(a, b, extra_var=0.03**2)[3] < 0.05
    # THEN the false alarms stay near 5 %; AND a doubled count is found
    assert alarms / trials < 0.07
    assert count_ratio_test(100, 200, extra_var=0.03**2)[3] < 1e-6


def test_holm_matches_its_definition() -> None:
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []
    # weighted 9:1, the heavy one is tested at 0.9 alpha, the light one after it
    assert holm([0.01, 0.04], [9.0, 1.0]) == pytest.approx([0.01 / 0.9, 0.04])
    assert holm([0.01, 0.04, 0.03], [2.0, 2.0, 2.0]) == pytest.approx(holm([0.01, 0.04, 0.03]))


def test_medians() -> None:
    assert weighted_median([3.0, 1.0, 2.0], [1.0, 1.0, 1.0]) == 2.0
    assert weighted_median([3.0, 1.0, 2.0], [10.0, 1.0, 1.0]) == 3.0
    assert weighted_median([], []) == 0.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5 and median([]) == 0.0


def test_the_runs_needed_find_the_change_about_as_often_as_asked() -> None:
    # GIVEN a 5 % change and a 4 % spread a run: the runs a side for 80 % power
    n = runs_needed(0.04**2, 0.05)
    assert 8 <= n <= 14
    rng = random.Random(4)
    found = 0
    for _ in range(300):
        xs = [math.exp(rng.gauss(0, 0.04)) for _ in range(n)]
        ys = [math.exp(rng.gauss(math.log(1.05), 0.04)) for _ in range(n)]
        found += log_welch_test(xs, ys).p_value < 0.05
    # THEN with that many runs a side the change is found about 80 % of the time
    assert 0.65 < found / 300 < 0.95
    assert runs_needed(0.0, 0.05) == 2


def test_identical_profiles_raise_few_false_alarms() -> None:
    # GIVEN 30 pairs of identical programs (sampled, 5 runs a side; cProfile, 10 a side)
    sampled = cprofile = 0
    stacks = shared_callee_stacks(each=0.3)
    for seed in range(30):
        cmp = compare_results(
            sampled_doc(5, stacks, seed=seed), sampled_doc(5, stacks, seed=99 - seed)
        )
        sampled += any(c.significant for c in cmp.changes if c.file is not None)
        cmp = compare_results(profile_doc(10, seed=seed), profile_doc(10, seed=99 - seed))
        cprofile += any(c.significant for c in cmp.changes if c.file is not None)
    # THEN a significant figure in at most 3 of 30 (Holm bounds it at 5 %)
    assert sampled <= 3 and cprofile <= 3


def test_a_slowed_caller_is_found_and_no_other() -> None:
    # GIVEN 20 pairs where f07 passes 40 % more work to the shared spin (5 runs a side)
    stacks = shared_callee_stacks(each=0.5)
    found = others = 0
    for seed in range(20):
        a = sampled_doc(5, stacks, seed=seed)
        b = sampled_doc(5, stacks, slow={("<module>", "main", "f07", "spin"): 1.4}, seed=50 + seed)
        listed = [label(c) for c in compare_results(a, b).ordered() if c.verdict and c.file]
        found += "f07 → spin" in listed
        others += any(x.startswith("f") and x != "f07 → spin" for x in listed)
    # THEN named in most of them, and another caller hardly ever
    assert found >= 17 and others <= 1

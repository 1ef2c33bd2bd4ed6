"""The one judgement of a headline figure and the gate's four answers: undecided whenever
the interval reaches above the threshold, the machine's shift between two sessions from
their reference works."""

from __future__ import annotations

import math

import pytest

from onnxrt_backend_dev.monitoring._results.decide import (
    REFERENCE_SPREAD,
    Decision,
    gate,
    judge,
    machine_shift,
    reference_ratio,
)


def _d(change: float, low: float, high: float, significant: bool) -> Decision:
    return Decision(change, low, high, 0.01 if significant else 0.3, significant, True)


@pytest.mark.parametrize(
    ("decision", "answer"),
    [
        (_d(0.20, 0.10, 0.30, True), "regressed"),
        (_d(0.03, 0.01, 0.06, True), "undecided"),  # worse, perhaps beyond 5 %
        (_d(0.02, -0.10, 0.15, False), "undecided"),  # the estimate under 5 %, not its interval
        (_d(0.01, -0.02, 0.04, False), "unchanged"),
        (_d(-0.20, -0.30, -0.10, True), "improved"),
        (_d(-0.05, -0.40, 0.30, False), "undecided"),  # faster, perhaps, but not decided
        (Decision(0.02), "unchanged"),  # untested, under the threshold
        (Decision(0.20), "undecided"),  # untested, above it
    ],
)
def test_a_gate_that_cannot_decide_never_says_pass(decision: Decision, answer: str) -> None:
    assert gate(decision, 0.05)[0] == answer


def test_the_change_is_the_one_of_the_medians_shown() -> None:
    xs = [1.0, 1.1, 1.2, 1.3, 5.0]
    ys = [1.2, 1.3, 1.4, 1.5, 1.6]
    d = judge(xs, ys)
    assert d.change == pytest.approx(1.4 / 1.2 - 1)


def test_the_machine_shift_from_the_references() -> None:
    # GIVEN the references of six figures, the machine about 50 % slower, one reference
    # measured in a moment of other load
    ratios = [math.log(x) for x in (1.5, 1.52, 1.48, 1.51, 1.49, 3.0)]
    shift = machine_shift(ratios)
    # THEN their robust mean, the outlier left out, its variance small
    assert math.expm1(shift.value) == pytest.approx(0.5, abs=0.02)
    assert shift.references == 6 and shift.variance < 1e-3
    # AND with two, their mean with the spread a reference has between sessions
    two = machine_shift(ratios[:2])
    assert two.variance == pytest.approx(REFERENCE_SPREAD**2 / 2)
    assert machine_shift([]).references == 0
    # AND a reference missing, zero, NaN or a bool on a side gives no ratio
    assert reference_ratio({"reference": 1e-3}, {"reference": 2e-3}) == pytest.approx(math.log(2))
    for bad in (None, 0.0, float("nan"), True, "1"):
        assert reference_ratio({"reference": 1e-3}, {"reference": bad}) is None

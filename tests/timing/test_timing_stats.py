"""Tests for the statistics of timings (_timing/stats.py) and ``compare`` / ``format_comparison``
(benchmark.py): exact figures with a fake clock, the validation of result dictionaries (the
tests themselves are tested in tests/stats/)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._timing.stats import Comparison
from onnxrt_backend_dev.monitoring.benchmark import ClockError, compare, format_comparison

# --- comparison ------------------------------------------------------------------------------


def _jittered(clock: FakeClock, cost: float) -> Callable[[], None]:
    # Deterministic jitter of +-1 % so that the samples are not all tied.
    steps = iter([cost * (1 + 0.01 * math.sin(i)) for i in range(10**6)])
    return clock.costing_each(steps)


def test_compare_statements_finds_a_twofold_speedup() -> None:
    clock = FakeClock()
    cmp = compare(_jittered(clock, 2e-6), _jittered(clock, 1e-6), clock=clock, number=1)
    assert cmp.method == "mann-whitney"
    assert cmp.speedup == pytest.approx(2.0, rel=0.02)
    assert cmp.ci_low <= cmp.speedup <= cmp.ci_high
    assert cmp.significant and cmp.p_value < 1e-4
    assert (cmp.n_baseline, cmp.n_candidate) == (20, 20)
    assert format_comparison(cmp).startswith("candidate is 2")


def test_compare_identical_statements_is_not_significant() -> None:
    clock = FakeClock()
    cost = 2.0**-20  # exact sums: every sample is tied
    cmp = compare(clock.costing(cost), clock.costing(cost), clock=clock)
    assert cmp.speedup == pytest.approx(1.0)
    assert cmp.p_value == 1.0 and not cmp.significant


def test_compare_interleaves_in_alternating_order() -> None:
    order: list[str] = []
    compare(lambda: order.append("a"), lambda: order.append("b"), repeat=3, number=1, warmup=0)
    assert "".join(order) == "abbaab"


def test_compare_results_uses_welch() -> None:
    a = {"average": 2e-6, "deviation": 1e-7, "repeat": 10}
    b = {"average": 1e-6, "deviation": 1e-7, "repeat": 10}
    cmp = compare(a, b)
    assert cmp.method == "welch"
    assert cmp.speedup == pytest.approx(2.0)
    assert cmp.ci_low < 2.0 < cmp.ci_high and cmp.significant
    assert "faster" in format_comparison(cmp)
    assert "slower" in format_comparison(compare(b, a))


def test_compare_rejects_mixed_or_thin_inputs() -> None:
    with pytest.raises(TypeError, match="both statements or both results, got dict and str"):
        compare({"average": 1.0, "deviation": 0.0, "repeat": 3}, "pass")
    with pytest.raises(ValueError, match=r"baseline\['repeat'\] must be an int >= 2"):
        compare(
            {"average": 1.0, "deviation": 0.0, "repeat": 1},
            {"average": 1.0, "deviation": 0.0, "repeat": 3},
        )
    with pytest.raises(ValueError, match="misses keys"):
        compare({"average": 1.0}, {"average": 1.0})
    with pytest.raises(ValueError, match="confidence must be in"):
        compare("pass", "pass", confidence=1.5)


def test_compare_ten_thousand_batches_with_a_fake_clock() -> None:
    clock = FakeClock()
    cmp = compare(
        _jittered(clock, 1.02e-6), _jittered(clock, 1e-6), repeat=10_000, number=1, clock=clock
    )
    assert (cmp.n_baseline, cmp.n_candidate) == (10_000, 10_000)
    assert cmp.speedup == pytest.approx(1.02, rel=2e-3)
    assert cmp.ci_low < cmp.speedup < cmp.ci_high and cmp.significant


# --- result dictionaries are checked ------------------------------------------------------------


def _comparison(speedup: float, low: float, high: float, significant: bool) -> Comparison:
    return Comparison(
        baseline=speedup * 1e-6,
        candidate=1e-6,
        speedup=speedup,
        ci_low=low,
        ci_high=high,
        confidence=0.95,
        p_value=0.01 if significant else 0.5,
        significant=significant,
        method="mann-whitney",
        n_baseline=20,
        n_candidate=20,
    )


_SAMPLE = _comparison(1.5, 1.4, 1.6, True)


# Wrongly typed calls on purpose: what a user without a type checker may write.
_untyped_compare: Any = compare
_untyped_format: Any = format_comparison

GOOD = {"average": 1e-6, "deviation": 1e-8, "repeat": 10}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("average", math.nan, r"baseline\['average'\] must be a finite number > 0, got nan"),
        ("average", math.inf, r"baseline\['average'\] must be a finite number > 0, got inf"),
        ("average", -1e-6, r"baseline\['average'\] must be a finite number > 0, got -1e-06"),
        ("average", 0.0, r"baseline\['average'\] must be a finite number > 0, got 0.0"),
        ("average", "1e-6", r"baseline\['average'\] must be a finite number > 0, got '1e-6'"),
        ("deviation", math.nan, r"baseline\['deviation'\] must be a finite number >= 0, got nan"),
        ("deviation", -1.0, r"baseline\['deviation'\] must be a finite number >= 0, got -1.0"),
        ("deviation", math.inf, r"baseline\['deviation'\] must be a finite number >= 0, got inf"),
        ("repeat", 1, r"baseline\['repeat'\] must be an int >= 2, got 1"),
        ("repeat", 2.5, r"baseline\['repeat'\] must be an int >= 2, got 2.5"),
        ("repeat", True, r"baseline\['repeat'\] must be an int >= 2, got True"),
        ("repeat", "10", r"baseline\['repeat'\] must be an int >= 2, got '10'"),
        ("repeat", None, r"baseline\['repeat'\] must be an int >= 2, got None"),
    ],
)
def test_compare_results_checks_each_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        compare({**GOOD, key: value}, GOOD)
    with pytest.raises(ValueError, match=f"^{message.replace('baseline', 'candidate')}$"):
        compare(GOOD, {**GOOD, key: value})


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: _untyped_compare(None, "pass"),
            TypeError,
            "baseline must be a statement .* got NoneType",
        ),
        (
            lambda: _untyped_compare("pass", 3),
            TypeError,
            "candidate must be a statement .* got int",
        ),
        (
            lambda: _untyped_compare("x", "x", context=[1]),
            TypeError,
            "context must be a dict or None, got list",
        ),
        (
            lambda: _untyped_compare("x", "x", setup=1),
            TypeError,
            "setup must be a str or None, got int",
        ),
        (lambda: _untyped_format(None), TypeError, "cmp must be a Comparison, got NoneType"),
        (
            lambda: _untyped_format(_SAMPLE, ("a",)),
            ValueError,
            r"names must be two names .* got \('a',\)",
        ),
        (lambda: _untyped_format(_SAMPLE, "ab"), ValueError, "names must be two names"),
        (
            lambda: _untyped_format(_SAMPLE, ("a", 2)),
            TypeError,
            r"names must be two str, got \('a', 2\)",
        ),
        (lambda: _untyped_compare("pass", "pass", max_time=0), ValueError, "max_time must be > 0"),
        (
            lambda: _untyped_compare("pass", "pass", repeat=1),
            ValueError,
            r"repeat must be >= 2 to compare \(two batches a side\), got 1",
        ),
    ],
)
def test_errors_name_the_parameter(
    call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call()


# --- format_comparison never says "1x" ----------------------------------------------------------


def test_no_significant_difference_says_so_with_a_ratio_that_is_not_one() -> None:
    line = format_comparison(_comparison(1.0004, 0.999, 1.0018, False), ("old", "new"))
    assert line == (
        "no significant difference: new takes 0.9996x the time of old "
        "(95% CI 0.9982x-1.001x, p=0.5, mann-whitney)"
    )


def test_a_significant_tiny_speedup_gets_the_digits_it_needs() -> None:
    line = format_comparison(_comparison(1.00004, 1.00001, 1.00007, True))
    assert line.startswith("candidate is 1.00004x faster than baseline (95% CI 1.00001x-1.00007x")


@pytest.mark.parametrize("significant", [True, False])
def test_never_one_x(significant: bool) -> None:
    for e in range(1, 16):
        for sign in (1, -1):
            speedup = 1 + sign * 10.0**-e
            line = format_comparison(
                _comparison(speedup, speedup * 0.99, speedup * 1.01, significant)
            )
            assert not re.search(r"(?<![\d.])1x", line), line


def test_compare_identical_statements_reads_as_no_difference() -> None:
    clock = FakeClock()
    cost = 2.0**-20
    line = format_comparison(compare(clock.costing(cost), clock.costing(cost), clock=clock))
    assert line.startswith(
        "no significant difference: candidate takes the same time as baseline (ratio exactly 1, "
    )


# --- compare with a time budget -------------------------------------------------------------------


def test_compare_with_max_time_alternates_batches_until_the_budget() -> None:
    clock = FakeClock()
    cmp = compare(
        _jittered(clock, 1.02e-6), _jittered(clock, 1e-6), clock=clock, max_time=1.0, repeat=3
    )
    assert cmp.n_baseline == cmp.n_candidate
    assert 450 <= cmp.n_baseline <= 520  # about 500 batches a side, repeat is ignored
    assert clock.now >= 1.0  # everything timed, warmup and calibration included
    assert clock.now <= 1.0 + 2 * 0.002 + 1e-4  # at most one round over the budget
    assert cmp.significant and cmp.speedup == pytest.approx(1.02, rel=2e-3)


def test_compare_with_max_time_times_at_least_five_batches_of_a_slow_statement() -> None:
    clock = FakeClock()
    cmp = compare(clock.costing(2.0), clock.costing(2.0), clock=clock, max_time=1.0, warmup=0)
    assert (cmp.n_baseline, cmp.n_candidate) == (5, 5)
    assert clock.now == pytest.approx(2.0 * 2 * (5 + 1))  # one calibration round, then 5


def test_compare_with_a_frozen_clock_stops() -> None:
    with pytest.raises(ClockError, match="did not advance over 8 batches"):
        compare("pass", "pass", clock=lambda: 1.0, max_time=0.1)
    with pytest.raises(ClockError, match="did not advance"):
        compare("pass", "pass", clock=lambda: 1.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"confidence": "x"}, TypeError, "confidence must be a number in (0, 1), got str"),
        ({"confidence": True}, TypeError, "confidence must be a number in (0, 1), got bool"),
        ({"alpha": None}, TypeError, "alpha must be a number in (0, 1), got NoneType"),
        ({"confidence": math.nan}, ValueError, "confidence must be in (0, 1), got nan"),
        ({"alpha": 1.0}, ValueError, "alpha must be in (0, 1), got 1.0"),
        ({"keep_gc": "no"}, TypeError, "keep_gc must be a bool (True or False), got str"),
        ({"calibrate": "yes"}, TypeError, "calibrate must be a bool (True or False), got str"),
        ({"progress": []}, TypeError, "progress must be a CompareProgress or None, got list"),
    ],
)
def test_compare_refuses_bad_arguments_before_timing_anything(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    # GIVEN statements that record their runs WHEN compare gets a bad argument
    ran: list[int] = []
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        compare(lambda: ran.append(1), lambda: ran.append(2), **kwargs)
    # THEN it says which, and nothing ran
    assert ran == []


@pytest.mark.parametrize(
    ("stmt", "message"),
    [
        ("-" * 100_000 + "1", "stmt is too deeply nested to compile (100,001 characters)"),
        ("x = 1\0", "source code string cannot contain null bytes"),
    ],
)
def test_a_statement_the_parser_cannot_take_is_refused_in_one_line(stmt: str, message: str) -> None:
    with pytest.raises((ValueError, SyntaxError), match=re.escape(message)):
        compare(stmt, "pass")

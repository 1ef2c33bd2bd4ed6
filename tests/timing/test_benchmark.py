"""Tests for ``measure_time`` and ``compare`` (benchmark.py) and their machinery (_timing/).

The logic is tested with a fake clock that the statement itself advances, so every
figure is exact; a few real-time tests check the shape of the result and honest bounds.
"""

from __future__ import annotations

import copy
import gc
import io
import math
import re
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pprint import pprint
from typing import Any

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._timing import loop as _timing
from onnxrt_backend_dev.monitoring._timing import stats as _stats
from onnxrt_backend_dev.monitoring.benchmark import ClockError, compare, measure_time

DOCUMENTED = {
    "average",
    "deviation",
    "min_exec",
    "max_exec",
    "repeat",
    "number",
    "ttime",
    "context_size",
    "warmup_time",
}
EXTRAS = {"median", "iqr", "mad", "batches", "runs", "total_time"}


# --- contract: shape -----------------------------------------------------------------


def test_reference_example_runs_verbatim_and_prints_plain_numbers() -> None:
    from math import cos

    res = measure_time(lambda: cos(0.5))
    buffer = io.StringIO()
    pprint(res, stream=buffer)

    assert set(res) >= DOCUMENTED | EXTRAS
    assert all(type(v) in (int, float) for v in res.values()), res
    assert "np." not in buffer.getvalue()
    assert (res["repeat"], res["number"], res["context_size"]) == (10, 50, sys.getsizeof({}))
    assert not math.isnan(res["deviation"])
    assert res["min_exec"] <= res["average"] <= res["max_exec"]
    assert res["warmup_time"] > 0 and res["ttime"] > 0


def test_fixed_batches_give_exact_per_execution_figures() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(1e-6), repeat=4, number=5, warmup=3, clock=clock)
    assert res["average"] == pytest.approx(1e-6)
    assert res["min_exec"] == pytest.approx(1e-6) and res["max_exec"] == pytest.approx(1e-6)
    assert res["deviation"] == pytest.approx(0.0, abs=1e-18)
    assert (res["repeat"], res["number"], res["batches"], res["runs"]) == (4, 5, 4, 20)
    assert res["total_time"] == pytest.approx(20e-6)  # repeat * number * average
    assert res["ttime"] == pytest.approx(4e-6)  # the reference's: repeat * average
    assert res["warmup_time"] == pytest.approx(3e-6)


def test_div_by_number_false_gives_per_batch_figures_and_same_total_time() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(1e-6), repeat=4, number=5, div_by_number=False, clock=clock)
    assert res["average"] == pytest.approx(5e-6)
    assert res["total_time"] == pytest.approx(20e-6)  # repeat * average
    assert res["ttime"] == pytest.approx(20e-6)  # per batch figures: the same sum


def test_ttime_is_the_reference_average_times_repeat() -> None:
    # GIVEN the reference's example figures: an average of 9.12e-08 s over repeat=10
    # (number=50) WHEN timed on a fake clock THEN ttime is 9.12e-07 (average x repeat)
    # and total_time the seconds measured, 50 times more
    clock = FakeClock()
    res = measure_time(clock.costing(9.12e-8), clock=clock)
    assert (res["repeat"], res["number"]) == (10, 50)
    assert res["ttime"] == pytest.approx(9.12e-7)
    assert res["ttime"] == pytest.approx(res["average"] * res["repeat"])
    assert res["total_time"] == pytest.approx(9.12e-7 * 50)


def test_statistics_match_the_statistics_module() -> None:
    clock = FakeClock()
    per_batch = [3.0, 1.0, 2.0, 10.0, 2.5]
    costs = iter([0.0, *per_batch])  # warmup first, then one execution per batch
    res = measure_time(clock.costing_each(costs), repeat=5, number=1, clock=clock)
    assert res["average"] == pytest.approx(statistics.fmean(per_batch))
    assert res["deviation"] == pytest.approx(statistics.pstdev(per_batch))
    assert res["median"] == pytest.approx(2.5)
    q1, _, q3 = statistics.quantiles(per_batch, n=4, method="inclusive")
    assert res["iqr"] == pytest.approx(q3 - q1)
    assert res["mad"] == pytest.approx(0.5)
    assert (res["min_exec"], res["max_exec"]) == (1.0, 10.0)


def test_equal_samples_keep_min_average_max_ordered() -> None:
    stats = _stats.summarize([0.1] * 7)
    assert stats["min_exec"] <= stats["average"] <= stats["max_exec"]
    assert stats["deviation"] == 0.0


def test_one_batch_has_zero_spread_not_nan() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(1e-3), repeat=1, number=1, clock=clock)
    assert (res["deviation"], res["iqr"], res["mad"]) == (0.0, 0.0, 0.0)


def test_warmup_zero_reports_zero() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(1e-3), repeat=2, number=1, warmup=0, clock=clock)
    assert res["warmup_time"] == 0.0 and type(res["warmup_time"]) is float


# --- contract: str statements and context ----------------------------------------------


def test_str_statement_is_compiled_into_the_loop_not_called() -> None:
    inner = _timing.build_timer("cos(x)", {"x": 0.5})
    code: Any = inner.__code__
    assert "cos" in code.co_names and "x" in code.co_names  # looked up in the loop body
    assert "_stmt" not in code.co_varnames
    callable_inner = _timing.build_timer(lambda: None)
    assert "_stmt" in callable_inner.__code__.co_varnames  # a local, as in timeit


def test_timing_loop_is_timeit_template() -> None:
    import timeit

    # Same loop, same cost per execution as timeit: the harness adds nothing of its own.
    assert timeit.template == _timing._TEMPLATE  # type: ignore[attr-defined]


def test_str_statement_sees_context_which_is_left_untouched() -> None:
    seen: list[int] = []
    context = {"seen": seen, "value": 7}
    res = measure_time("seen.append(value)", context, repeat=2, number=3, warmup=1)
    assert seen == [7] * 7
    assert set(context) == {"seen", "value"}  # no __builtins__ added
    assert res["context_size"] == sys.getsizeof(context)


def test_setup_runs_before_each_batch_with_local_names() -> None:
    calls: list[int] = []
    measure_time(
        "items.append(1)",
        {"calls": calls},
        repeat=3,
        number=2,
        warmup=1,
        setup="calls.append(1)\nitems = []",
    )
    assert len(calls) == 4  # warmup batch + 3 batches


def test_multiline_and_comment_only_str_statements() -> None:
    res = measure_time("a = 1\nfor i in range(3):\n    a += i", repeat=2, number=2)
    assert res["runs"] == 4
    assert measure_time("# nothing", repeat=2, number=2)["runs"] == 4


# --- contract: max_time -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cost", "budget"), [(30e-9, 0.05), (1e-6, 0.5), (20e-3, 0.5), (0.3, 0.5), (1e-3, 100.0)]
)
def test_max_time_ends_just_past_the_budget(cost: float, budget: float) -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(cost), max_time=budget, clock=clock)
    assert res["total_time"] >= budget
    assert res["total_time"] <= budget * 1.03 + cost  # at most one execution over, and the margin
    assert res["runs"] * cost == pytest.approx(res["total_time"])
    assert res["average"] == pytest.approx(cost)
    assert 1 <= res["repeat"] <= res["batches"]


def test_max_time_reports_the_batches_and_runs_really_made() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(1e-6), repeat=3, number=7, max_time=0.5, clock=clock)
    assert res["batches"] > 10  # repeat is ignored
    assert res["repeat"] < res["batches"]  # short calibration batches are left out
    assert res["runs"] == pytest.approx(0.5 / 1e-6, rel=0.03)
    assert res["number"] * res["repeat"] <= res["runs"]


def test_max_time_copes_with_a_statement_that_slows_down() -> None:
    clock = FakeClock()
    costs = (1e-6 if i < 200_000 else 3e-6 for i in range(10**9))
    res = measure_time(clock.costing_each(costs), max_time=0.5, clock=clock)
    assert 0.5 <= res["total_time"] <= 0.55


def test_max_time_longer_than_one_execution_stops_after_one_batch() -> None:
    clock = FakeClock()
    res = measure_time(clock.costing(2.0), max_time=0.5, clock=clock)
    assert (res["batches"], res["runs"], res["total_time"]) == (1, 1, 2.0)


def test_plan_next_batch_grows_at_most_tenfold_while_calibrating() -> None:
    assert _timing.plan_next_batch(1, 30e-9, 30e-9, 0.5) == 10
    assert _timing.plan_next_batch(1000, 1e-3, 2e-3, 0.5) == math.ceil(1000 * 10e-3 / 1e-3)


def test_plan_next_batch_splits_the_remainder_evenly_and_stops() -> None:
    target = _timing.batch_target(0.5)
    assert _timing.plan_next_batch(100, target, 0.5, 0.5) == 0
    # 2.4 targets left: 2 even batches of 1.2 targets, i.e. 120 executions.
    assert _timing.plan_next_batch(100, target, 0.5 - 2.4 * target, 0.5) == pytest.approx(
        120, abs=1
    )
    # A quarter target left: one last batch slightly over it.
    assert _timing.plan_next_batch(100, target, 0.5 - 0.25 * target, 0.5) == 26


def test_progress_counts_batches_and_runs() -> None:
    clock = FakeClock()
    progress = _timing.Progress()
    _timing.measure(clock.costing(1e-3), repeat=3, number=2, clock=clock, progress=progress)
    assert (progress.batches, progress.runs) == (3, 6)
    assert progress.measured == pytest.approx(6e-3)


def test_max_time_real_clock_shape_and_bounds() -> None:
    begin = time.perf_counter()
    res = measure_time("x = 1 + 1", max_time=0.2)
    wall = time.perf_counter() - begin
    assert res["total_time"] >= 0.2
    assert wall >= 0.2
    assert wall < 5.0  # generous: a busy machine, never a speed claim
    assert res["min_exec"] <= res["median"] <= res["max_exec"]


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repeat": 0}, "repeat must be >= 1, got 0"),
        ({"number": 0}, "number must be >= 1, got 0"),
        ({"warmup": -1}, "warmup must be >= 0, got -1"),
        ({"max_time": 0}, "max_time must be > 0 and finite, got 0"),
        ({"max_time": -1.5}, "max_time must be > 0 and finite, got -1.5"),
        ({"max_time": math.inf}, "max_time must be > 0 and finite, got inf"),
        (
            {"max_time": 1.0, "div_by_number": False},
            "div_by_number must be True when max_time is set, got False",
        ),
    ],
)
def test_bad_values_raise_value_error_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message.replace('.', '[.]')}$"):
        measure_time("pass", **kwargs)


@pytest.mark.parametrize("stmt", [42, None, b"pass", ["pass"]])
def test_bad_statement_type_raises_type_error_naming_it(stmt: Any) -> None:
    with pytest.raises(TypeError, match=f"got {type(stmt).__name__}$"):
        measure_time(stmt)


def test_numpy_integers_are_accepted_and_plain_ints_returned() -> None:
    np = pytest.importorskip("numpy")
    res = measure_time("pass", repeat=np.int64(3), number=np.int32(4), max_time=None)
    assert (type(res["repeat"]), type(res["number"]), res["runs"]) == (int, int, 12)


def test_non_int_count_raises_type_error() -> None:
    with pytest.raises(TypeError, match="repeat must be an int, got float"):
        measure_time("pass", repeat=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("stmt", "setup"), [("x = ", None), ("pass", "def"), ("return 1", None)])
def test_syntax_error_at_call_time(stmt: str, setup: str | None) -> None:
    with pytest.raises(SyntaxError):
        measure_time(stmt, setup=setup)


def test_exception_of_the_statement_propagates_unchanged_and_gc_is_restored() -> None:
    error = KeyError("boom")

    def fail() -> None:
        raise error

    assert gc.isenabled()
    with pytest.raises(KeyError) as info:
        measure_time(fail)
    assert info.value is error
    assert gc.isenabled()


# --- garbage collector ---------------------------------------------------------------------


@pytest.mark.parametrize(("keep_gc", "expected"), [(False, False), (True, True)])
def test_gc_is_off_while_timing_unless_kept(keep_gc: bool, expected: bool) -> None:
    seen: set[bool] = set()
    measure_time(lambda: seen.add(gc.isenabled()), repeat=2, number=2, keep_gc=keep_gc)
    assert seen == {expected}
    assert gc.isenabled()


# --- a clock that cannot time ---------------------------------------------------------------


def test_frozen_clock_with_max_time_stops_after_a_bounded_number_of_batches() -> None:
    progress = _timing.Progress()
    with pytest.raises(ClockError, match=r"did not advance over 8 batches in a row"):
        _timing.measure("pass", clock=lambda: 1.0, max_time=0.1, progress=progress)
    # Sizes 1, 10, ... 10**7: bounded, never a hang.
    assert progress.batches == 8 and progress.runs == 11_111_111


def test_frozen_clock_in_fixed_batches_is_refused_not_reported_as_zero() -> None:
    progress = _timing.Progress()
    with pytest.raises(ClockError, match=r"did not advance over 10 batches in a row"):
        _timing.measure("pass", clock=lambda: 1.0, progress=progress)
    assert progress.batches == 10


class _Readings:
    """A clock that returns the given readings, then keeps returning the last one."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


@pytest.mark.parametrize(
    ("clock", "error", "message"),
    [
        (
            _Readings(0.0, 5.0, 4.0),
            ClockError,
            r"the clock went backwards: a batch of 1 executions measured -1.0 s",
        ),
        (
            _Readings(0.0, 0.0, 1.0, 2.0, 1.5),
            ClockError,
            r"the clock went backwards: a batch of (50|1) executions measured -0.5 s",
        ),
        (_Readings(0.0, 0.0, 0.0, math.nan), ClockError, r"the clock returned nan"),
        (_Readings(math.nan), ClockError, r"the clock returned nan"),
        (_Readings(0.0, 0.0, 0.0, 0.0, math.inf), ClockError, r"the clock returned inf"),
        (lambda: None, TypeError, r"clock must return a float, got NoneType"),
        (lambda: "1.0", TypeError, r"clock must return a float, got str"),
    ],
)
def test_a_clock_going_backwards_or_nan_is_refused_at_once(
    clock: Callable[[], Any], error: type[Exception], message: str
) -> None:
    # The first reading is the check of the clock, then two per batch (warmup first).
    with pytest.raises(error, match=message):
        measure_time("pass", clock=copy.deepcopy(clock))
    with pytest.raises(error, match=message):
        measure_time("pass", clock=copy.deepcopy(clock), max_time=0.1)


def test_a_coarse_clock_still_times_with_max_time() -> None:
    clock = FakeClock()
    # Ticks of 1 ms for a statement of 1 us: most small batches measure 0.
    coarse = lambda: math.floor(clock.now * 1000) / 1000  # noqa: E731
    res = measure_time(clock.costing(1e-6), max_time=0.5, clock=coarse)
    assert res["total_time"] >= 0.5
    assert res["average"] == pytest.approx(1e-6, rel=0.1)
    assert res["deviation"] >= 0 and res["min_exec"] >= 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context": [1]}, "context must be a dict or None, got list"),
        ({"context": "x"}, "context must be a dict or None, got str"),
        ({"setup": 1}, "setup must be a str or None, got int"),
        ({"setup": b"pass"}, "setup must be a str or None, got bytes"),
        ({"clock": 1.0}, "clock must be a callable or None, got float"),
    ],
)
def test_errors_name_context_setup_and_clock(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=f"^{message}$"):
        measure_time("pass", **kwargs)


def test_a_statement_slower_than_the_budget_runs_warmup_and_one_execution() -> None:
    # Documented bound: the budget bounds the timed batches, never one execution.
    clock = FakeClock()
    res = measure_time(clock.costing(2.0), max_time=1.0, clock=clock)
    assert (res["warmup_time"], res["total_time"], clock.now) == (2.0, 2.0, 4.0)
    clock = FakeClock()
    res = measure_time(clock.costing(2.0), max_time=1.0, warmup=0, clock=clock)
    assert (res["total_time"], clock.now) == (2.0, 2.0)


# --- timeit's autorange and partial results ------------------------------------------------


@pytest.mark.parametrize(
    ("cost", "expected"), [(1.1e-6, 200_000), (3e-7, 1_000_000), (0.5, 1), (0.15, 2)]
)
def test_autorange_finds_the_batch_timeit_would(cost: float, expected: int) -> None:
    clock = FakeClock()
    res = _timing.measure(clock.costing(cost), repeat=1, warmup=0, clock=clock, calibrate=True)
    assert res.number == expected


def test_autorange_with_a_frozen_clock_stops() -> None:
    with pytest.raises(
        ClockError,
        match=r"did not advance over 22 batches in a row \(the last one of 10,000,000 executions\)",
    ):
        _timing.measure("pass", warmup=0, clock=lambda: 1.0, calibrate=True)


def test_progress_result_is_what_was_timed_so_far() -> None:
    clock = FakeClock()
    progress = _timing.Progress()
    costs = iter([1e-3] * 3 + [1.0] * 10)  # warmup 1, then 2 batches of 1, then a failure

    def stmt() -> None:
        cost = next(costs)
        if cost == 1.0:
            raise KeyboardInterrupt
        clock.advance(cost)

    with pytest.raises(KeyboardInterrupt):
        _timing.measure(stmt, repeat=5, number=1, clock=clock, progress=progress)
    res = progress.result()
    assert (res["repeat"], res["runs"], res["warmup_time"]) == (2, 2, 1e-3)
    assert res["average"] == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="no batch was timed"):
        _timing.Progress().result()


# --- calibrate=True: the number timeit's autorange picks ------------------------------------


def test_calibrate_picks_the_number_autorange_would_after_the_warmup(
    fake_clock: FakeClock,
) -> None:
    # GIVEN a statement of 1 ms WHEN measured with calibrate=True THEN number is the
    # first of 1, 2, 5, 10... whose batch lasts >= 0.2 s (200), the trial batches are
    # not counted, and the warmup is timed apart
    res = measure_time(fake_clock.costing(1e-3), repeat=3, calibrate=True, clock=fake_clock)
    assert (res["number"], res["repeat"], res["runs"]) == (200, 3, 600)
    assert res["total_time"] == pytest.approx(0.6)
    assert res["ttime"] == pytest.approx(3e-3)
    assert res["warmup_time"] == pytest.approx(1e-3)
    # 1 warmup + the trials 1+2+5+10+20+50+100+200 + 3 batches of 200
    assert fake_clock.now == pytest.approx(1e-3 * (1 + 388 + 600))


def test_calibrate_is_told_by_the_progress(fake_clock: FakeClock) -> None:
    progress = _timing.Progress()
    measure_time(
        fake_clock.costing(0.15), repeat=2, calibrate=True, clock=fake_clock, progress=progress
    )
    assert progress.calibrated and progress.result()["number"] == 2


def test_calibrate_with_max_time_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^calibrate must be False when max_time is set"):
        measure_time("pass", max_time=0.1, calibrate=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"div_by_number": "no"}, "div_by_number must be a bool (True or False), got str"),
        ({"div_by_number": 0}, "div_by_number must be a bool (True or False), got int"),
        ({"keep_gc": "yes"}, "keep_gc must be a bool (True or False), got str"),
        ({"calibrate": 1}, "calibrate must be a bool (True or False), got int"),
        ({"calibrate": None}, "calibrate must be a bool (True or False), got NoneType"),
        ({"max_time": "1"}, "max_time must be a float or None, got str"),
        ({"progress": {}}, "progress must be a Progress or None, got dict"),
    ],
)
def test_flags_and_progress_must_have_their_type(kwargs: dict[str, Any], message: str) -> None:
    # GIVEN a flag that would read as True ('no' is truthy) WHEN measuring THEN a
    # TypeError of the family names the parameter, before anything runs
    ran: list[int] = []
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        measure_time(lambda: ran.append(1), **kwargs)
    assert ran == []


def test_nan_max_time_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^max_time must be > 0 and finite, got nan$"):
        measure_time("pass", max_time=math.nan)


# --- a multi-line statement runs as written -------------------------------------------------


def test_a_multi_line_statement_keeps_its_string_literals_as_written() -> None:
    # GIVEN a statement whose triple-quoted string spans lines and holds a tab
    seen: list[str] = []
    stmt = 'seen.append("""a\n\tb\n  c""")'
    # WHEN timed THEN the string is what the user wrote (no indentation pasted into it)
    measure_time(stmt, {"seen": seen}, repeat=1, number=1, warmup=0)
    assert seen == ["a\n\tb\n  c"]


def test_a_tab_indented_statement_runs() -> None:
    seen: list[int] = []
    measure_time("if True:\n\tseen.append(1)", {"seen": seen}, repeat=2, number=1, warmup=0)
    assert seen == [1, 1]


def test_an_error_points_at_the_line_of_the_statement() -> None:
    # GIVEN a statement failing on its 3rd line WHEN timed THEN the traceback's last frame
    # is that line of the statement, not a line of the template
    with pytest.raises(ZeroDivisionError) as info:
        measure_time("x = 1\ny = 2\nx / 0", repeat=1, number=1, warmup=0)
    assert info.traceback[-1].lineno + 1 == 3


def test_statement_cannot_escape_the_loop() -> None:
    for stmt in ("break", "return 1", "yield 1", "continue"):
        with pytest.raises(SyntaxError):
            measure_time(stmt)


# --- bounded memory: the batches kept for the statistics ------------------------------------


def test_batch_sample_keeps_an_evenly_spaced_bounded_sample() -> None:
    # GIVEN a sample of capacity 4 WHEN 20 batches are added (batch i measured i s)
    sample = _timing.BatchSample(4)
    for i in range(20):
        sample.add(float(i), 1)
    # THEN at most 4 are kept, evenly spaced from the first, and all were seen
    assert len(sample) <= 4 and sample.seen == 20
    assert list(sample.times) == [0.0, 8.0, 16.0]
    assert sample.stride == 8


def test_a_huge_repeat_keeps_bounded_statistics_and_exact_totals(
    monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock
) -> None:
    # GIVEN at most 16 batches kept WHEN 1,000 batches of 1 ms are timed
    monkeypatch.setattr(_timing, "MAX_KEPT_BATCHES", 16)
    progress = _timing.Progress()
    res = measure_time(
        fake_clock.costing(1e-3),
        repeat=1000,
        number=1,
        warmup=0,
        clock=fake_clock,
        progress=progress,
    )
    # THEN the statistics read a sample (<= 16 batches), the totals count all of them
    assert len(progress.kept) <= 16 and res["repeat"] == len(progress.kept)
    assert (res["batches"], res["runs"]) == (1000, 1000)
    assert res["total_time"] == pytest.approx(1.0)
    assert res["average"] == pytest.approx(1e-3)


def test_compare_keeps_a_bounded_paired_sample(
    monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock
) -> None:
    monkeypatch.setattr(_timing, "MAX_KEPT_BATCHES", 8)
    progress = _timing.CompareProgress()
    compare(
        fake_clock.costing(2e-3),
        fake_clock.costing(1e-3),
        repeat=100,
        number=1,
        clock=fake_clock,
        progress=progress,
    )
    first, second = progress.paired()
    assert len(first) == len(second) <= 8 and progress.rounds == 100
    sides = progress.sides()
    assert sides[0]["average"] == pytest.approx(2e-3) and sides[1]["average"] == pytest.approx(1e-3)
    assert progress.measured == pytest.approx(100 * 3e-3 + 0)


# --- compare: calibration and which statement failed ----------------------------------------


def test_compare_calibrate_takes_the_smaller_autorange_size(fake_clock: FakeClock) -> None:
    # GIVEN statements of 1 ms and 3 ms WHEN compared with calibrate=True THEN the batch
    # size makes the slower one's batch last >= 20 ms: min(20, 10) = 10
    progress = _timing.CompareProgress()
    cmp = compare(
        fake_clock.costing(1e-3),
        fake_clock.costing(3e-3),
        repeat=4,
        calibrate=True,
        clock=fake_clock,
        progress=progress,
    )
    assert progress.number == 10 and progress.calibrated
    assert cmp.speedup == pytest.approx(1 / 3)


@pytest.mark.parametrize(("bad", "index"), [(0, 0), (1, 1)])
def test_compare_progress_names_the_statement_that_raised(bad: int, index: int) -> None:
    stmts = ["pass", "pass"]
    stmts[bad] = "1/0"
    progress = _timing.CompareProgress()
    with pytest.raises(ZeroDivisionError):
        compare(stmts[0], stmts[1], repeat=3, number=1, progress=progress)
    assert progress.running == index


def test_compare_progress_names_the_statement_with_a_syntax_error() -> None:
    progress = _timing.CompareProgress()
    with pytest.raises(SyntaxError):
        compare("pass", "x =", progress=progress)
    assert progress.running == 1


def test_the_spliced_loop_is_timeits_bytecode() -> None:
    # GIVEN statements spliced as syntax trees (not pasted as text) THEN the timing loop
    # is the very bytecode timeit compiles: the same cost per execution
    for stmt, setup in [("cos(x)", "x = 0.5"), ("a = 1\nb = a + 1", "pass"), ("f()", "import os")]:
        ours = _timing.build_timer(stmt, {"cos": abs, "f": abs}, setup)
        theirs = timeit.Timer(stmt, setup, globals={"cos": abs, "f": abs}).inner  # type: ignore[attr-defined]
        assert ours.__code__.co_code == theirs.__code__.co_code
        assert ours.__code__.co_names == theirs.__code__.co_names


class _Boom(Exception):
    """What a signal's handler raising in the middle of the bookkeeping looks like."""


def _record_interrupted_at(progress: _timing.Progress, line: int) -> None:
    """Records a batch of 3 executions measuring 2 s, raising at its ``line``-th line."""
    calls = iter(range(1, 100))

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and next(calls) == line:
            raise _Boom
        return tracer

    sys.settrace(tracer)
    try:
        progress.record(2.0, 3)
    except _Boom:
        pass
    finally:
        sys.settrace(None)


def test_a_signal_at_any_point_of_the_bookkeeping_leaves_consistent_counts() -> None:
    for line in range(1, 8):
        # GIVEN one batch recorded, then the next one interrupted at its line-th line
        progress = _timing.Progress()
        progress.record(1.0, 3)
        _record_interrupted_at(progress, line)
        # THEN the counters agree with each other and the result can be read
        assert progress.runs == 3 * progress.batches
        assert progress.measured == pytest.approx({1: 1.0, 2: 3.0}[progress.batches])
        res = progress.result()
        assert res["runs"] == res["batches"] * 3 and 1 <= res["repeat"] <= 2

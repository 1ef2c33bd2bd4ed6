"""The pytest session's figures as a result, and the gate against a baseline."""

from __future__ import annotations

import pytest

from onnxrt_backend_dev.monitoring._errors import BadValue
from onnxrt_backend_dev.monitoring._results.gate import (
    Baseline,
    figure_names,
    parse_threshold,
    session_data,
)
from onnxrt_backend_dev.monitoring._results.store import make_result

MiB = 2**20


def _time(label: str, *per_batch: float) -> dict:
    return {"kind": "time", "label": label, "times": list(per_batch), "sizes": [1] * len(per_batch)}


def _memory(label: str, increase: float) -> dict:
    return {"kind": "memory", "label": label, "peak": 100 * MiB + increase, "begin": 100 * MiB}


def _baseline(*figures: dict) -> Baseline:
    data = session_data([("t.py::test_a", list(figures))])
    assert data is not None
    return Baseline(make_result("report", data, env={}))


def test_repeated_labels_get_numbered_names() -> None:
    names = figure_names("t.py::a", [_time("x", 1.0), _time("x", 1.0), _memory("x", 0)])
    assert names == ["t.py::a::x", "t.py::a::x#2", "t.py::a::x"]


def test_a_session_saves_as_a_report_with_every_batch() -> None:
    # GIVEN a test with a measured block (3 batches) and a memory block
    data = session_data([("t.py::a", [_time("m", 1.0, 2.0, 3.0), _memory("b", MiB)])])
    # THEN the result holds the batches and the peak, under the test's names
    assert data is not None
    assert data["timing"]["series"][0]["name"] == "t.py::a::m"
    assert data["timing"]["series"][0]["times"] == [1.0, 2.0, 3.0]
    assert data["memory"]["channels"]["t.py::a::b"][0]["peak"] == 101 * MiB
    assert session_data([("t.py::a", [])]) is None


def test_several_batches_fail_only_when_significant_and_above_the_threshold() -> None:
    base = _baseline(_time("m", *[1.0 + 0.01 * i for i in range(10)]))
    slower = [_time("m", *[3.0 + 0.03 * i for i in range(10)])]
    faster = [_time("m", *[0.5 + 0.005 * i for i in range(10)])]
    noisy = [_time("m", *[0.7, 2.2, 0.8, 1.5, 1.0, 1.4, 1.25, 0.9, 1.2, 1.7])]
    # WHEN 3 times slower in every batch THEN significant, failed, with its test (compare's)
    # and the times measured
    (found,) = base.check("t.py::test_a", slower, 0.1)
    assert found.state == "regressed"
    assert "significant" in found.message and "+200.0%" in found.message
    assert "3.13 s per run, was 1.04 s" in found.message and "weaker evidence" in found.message
    # WHEN 30 % slower in every batch: within what two sessions differ by, undecided
    (wide,) = base.check("t.py::test_a", [_time("m", *[1.3 + 0.01 * i for i in range(10)])], 0.1)
    assert wide.state == "undecided" and "may be above the 10% threshold" in wide.message
    assert "not significant" in wide.message
    # WHEN above the threshold but noisy: undecided, said, not failed
    (undecided,) = base.check("t.py::test_a", noisy, 0.1)
    assert undecided.state == "undecided" and "not significant" in undecided.message
    # WHEN its interval lies under the threshold, or much faster: pass
    assert base.check("t.py::test_a", slower, 5.0) == []
    assert base.check("t.py::test_a", faster, 0.1) == []


def test_one_run_is_undecided_for_time_and_judged_on_the_plain_threshold_for_memory() -> None:
    base = _baseline(_time("once", 0.100), _memory("alloc", 10 * MiB))
    now = [_time("once", 0.125), _memory("alloc", 15 * MiB)]
    time_, memory = base.check("t.py::test_a", now, 0.1)
    assert time_.state == "undecided" and "significance not judged" in time_.message
    assert memory.state == "regressed" and "plain 10% threshold" in memory.message
    assert "weaker evidence" in memory.message
    # THEN below the memory floor, a single run is noise; a time under the threshold passes
    tiny = _baseline(_time("once", 0.100), _memory("alloc", 1000))
    assert tiny.check("t.py::test_a", [_time("once", 0.105), _memory("alloc", 9000)], 0.1) == []
    # AND a block timed once that more than doubled (by 10 ms) regresses, weaker evidence
    (doubled,) = tiny.check("t.py::test_a", [_time("once", 0.250)], 0.1)
    assert doubled.state == "regressed" and "more than doubled" in doubled.message
    (small,) = _baseline(_time("once", 0.001)).check("t.py::test_a", [_time("once", 0.005)], 0.1)
    assert small.state == "undecided"  # quadrupled, but by 4 ms: the clock's noise
    # AND a test or a block absent from the baseline is not judged
    assert base.check("t.py::other", now, 0.1) == []


def test_figures_of_different_clocks_are_not_compared() -> None:
    base = _baseline(_time("m", 1.0, 1.0))
    now = [{**_time("m", 2.0, 2.0), "clock": "cpu"}]
    (found,) = base.check("t.py::test_a", now, 0.1)
    assert found.state == "undecided" and "cpu clock, the baseline with the wall clock" in (
        found.message
    )


def test_memory_is_judged_on_the_allocations_peak_when_both_sides_counted_it() -> None:
    # GIVEN a block whose RSS increase moved a lot (what ran before) but whose own
    # allocations did not, then one whose allocations grew 20 %
    base = _baseline(dict(_memory("load", 140 * MiB), alloc_peak=112 * MiB))
    steady = [dict(_memory("load", 186 * MiB), alloc_peak=112.5 * MiB)]
    grown = [dict(_memory("load", 140 * MiB), alloc_peak=135 * MiB)]
    assert base.check("t.py::test_a", steady, 0.1) == []
    (found,) = base.check("t.py::test_a", grown, 0.1)
    assert "allocations' peak 135 MiB, was 112 MiB: +20.5%" in found.message
    # WHEN one side has no count (a baseline saved without the shim) THEN the RSS
    assert base.check("t.py::test_a", [_memory("load", 186 * MiB)], 0.1)[0].message.startswith(
        "memory load: increase"
    )


@pytest.mark.parametrize(
    ("text", "value"), [("10%", 0.1), ("0.25", 0.25), (" 5 % ", 0.05), ("0", 0.0)]
)
def test_thresholds(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["x", "-5%", "nan", "inf%", "", "%"])
def test_bad_thresholds(text: str) -> None:
    with pytest.raises(BadValue, match="threshold must be a number >= 0"):
        parse_threshold(text)


def _session(*figures: dict) -> tuple[Baseline, list[dict]]:
    """A baseline of tests t0, t1... each with one measured figure and its reference."""
    rows = [(f"t.py::t{i}", [f]) for i, f in enumerate(figures)]
    data = session_data(rows)
    assert data is not None
    return Baseline(make_result("report", data, env={})), [f for _, (f,) in rows]


def _measured(scale: float, reference: float | None = 1e-3) -> dict:
    return {**_time("m", *[scale * (1 + 0.01 * i) for i in range(10)]), "reference": reference}


def test_the_machine_shift_between_sessions_is_estimated_and_taken_out() -> None:
    # GIVEN a baseline of six tests, the reference work at 1 ms beside each
    base, _ = _session(*[_measured(1.0) for _ in range(6)])
    # WHEN the machine is 60 % slower in this session (every reference at 1.6 ms) and the
    # figures with it, then the last test 4 times slower than the machine
    found = [base.check(f"t.py::t{i}", [_measured(1.6, 1.6e-3)], 0.1) for i in range(5)] + [
        base.check("t.py::t5", [_measured(6.4, 1.6e-3)], 0.1)
    ]
    # THEN the figures that moved with the machine pass, the slower one fails, its message
    # saying what was measured and what the machine did
    assert found[:5] == [[]] * 5
    (slow,) = found[5]
    assert slow.state == "regressed" and "6.69 s per run, was 1.04 s (+540.0%)" in slow.message
    assert "the machine +60.0% against the baseline's" in slow.message


def test_a_shift_the_references_do_not_show_is_never_taken_out_nor_failed() -> None:
    # GIVEN every figure 40 % slower while the reference work did not move (a change of
    # the code every test runs, or a session on a busier machine than its references show)
    base, _ = _session(*[_measured(1.0) for _ in range(6)])
    found = [base.check(f"t.py::t{i}", [_measured(1.4)], 0.1) for i in range(6)]
    # THEN no test fails on it (one session a side cannot tell), and none passes in silence
    assert all(f and f[0].state == "undecided" for f in found)
    # AND without references (an older baseline) the same: undecided, not failed
    plain, _ = _session(*[_measured(1.0, None) for _ in range(3)])
    assert plain.check("t.py::t0", [_measured(1.4, None)], 0.1)[0].state == "undecided"


def test_on_the_wall_clock_other_programs_time_slices_are_taken_out() -> None:
    # GIVEN a baseline where other programs took 20 % of the figure's wall time, a
    # session where they took 80 % and the figure four times longer with it
    base, _ = _session(*[{**_measured(1.0), "stolen": 0.2} for _ in range(3)])
    now = {**_measured(4.0), "stolen": 0.8}
    # THEN it passes: the same work ran for the same time
    assert base.check("t.py::t0", [now], 0.1) == []
    # AND a figure far slower than that is found, the message saying what was taken out
    # (the correction as uncertain as it is large: the median batch may have been spared)
    (slow,) = base.check("t.py::t1", [{**_measured(100.0), "stolen": 0.8}], 0.1)
    assert slow.state == "regressed" and "other programs' share of its wall time +300.0%" in (
        slow.message
    )
    # AND a calm session against a baseline whose figure lost 60 % of its wall time to
    # other programs (in bursts: its median batch spared), the same figure twice as long
    # now: not failed (measured beside two busy loops: a share 49 % lower, twice longer)
    busy, _ = _session(*[{**_measured(1.0), "stolen": 0.6} for _ in range(3)])
    calm = {**_measured(2.0), "stolen": 0.1}
    assert [f.state for f in busy.check("t.py::t2", [calm], 0.1)] in ([], ["undecided"])
    # AND without the share on a side, the four times longer figure is not passed
    (found,) = base.check("t.py::t0", [{**_measured(4.0), "stolen": None}], 0.1)
    assert found.state in ("regressed", "undecided")


def test_a_block_timed_once_is_judged_after_the_share_other_programs_took() -> None:
    # GIVEN a block timed once, 38 ms with 20 % of its wall time taken by other programs,
    # then 102 ms with 75 % taken: the same work
    base = _baseline({**_time("once", 0.038), "stolen": 0.2})
    assert base.check("t.py::test_a", [{**_time("once", 0.102), "stolen": 0.75}], 0.1) == []
    # AND without the shares, more than doubled: it fails, as before
    plain = _baseline(_time("once", 0.038))
    assert plain.check("t.py::test_a", [_time("once", 0.102)], 0.1)[0].state == "regressed"

"""Tests for the report's flat per-function figures (``Report.functions``, built in
_report/build.py): callees included, a recursive call counted once, own time to the
innermost user function; round trip through JSON."""

from __future__ import annotations

import json

import pytest

from onnxrt_backend_dev.monitoring._report.build import RunFacts, build_report
from onnxrt_backend_dev.monitoring._report.model import Ending, FunctionRow, Report
from onnxrt_backend_dev.monitoring._report.render_json import from_json, to_dict, to_json
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

MIB = float(2**20)
NUMPY = "/venv/lib/python3.11/site-packages/numpy/_core/numeric.py"


def _report() -> Report:
    """``main`` calls ``rec`` (recursing once) for one tick, then ``numpy.ones`` for two."""
    agg = Aggregator()
    module, main = SampledFrame("<module>", "s.py", 1, 9), SampledFrame("main", "s.py", 2, 3)
    agg.add_stack(
        0, (module, main, SampledFrame("rec", "s.py", 5, 6), SampledFrame("rec", "s.py", 5, 7))
    )
    agg.add_stack(1, (module, main, SampledFrame("ones", NUMPY, 160, 170)))
    for t, mib, sid in [(0.0, 10, 0), (0.1, 30, 0), (0.2, 50, 1), (0.3, 50, 1)]:
        agg.add_tick(t, mib * MIB, mib * MIB, sid)
    facts = RunFacts(program="s.py", ending=Ending("exit", 0, "exited"), interval=0.1, wall=0.3)
    return build_report(agg, facts)


def _row(report: Report, function: str) -> FunctionRow:
    return next(r for r in report.functions if r.site.function == function)


def test_callees_are_included_and_a_recursion_counted_once() -> None:
    # GIVEN a run where rec (recursing) grew 20 MiB in 0.1 s, numpy.ones 20 MiB in 0.2 s
    report = _report()
    # THEN rec holds its tick once, not twice
    rec = _row(report, "rec")
    assert (rec.time, rec.self_time) == pytest.approx((0.1, 0.1))
    assert rec.net == pytest.approx(20 * MIB) and rec.site.line == 5
    # AND main holds both, callees included; its own time is numpy's (a library it called)
    main = _row(report, "main")
    assert main.time == pytest.approx(0.3) and main.self_time == pytest.approx(0.2)
    assert main.net == pytest.approx(40 * MIB) == main.to_peak
    ones = _row(report, "ones")
    assert ones.site.library and ones.self_time == 0.0 and ones.time == pytest.approx(0.2)
    # AND the own times add up to the time of the ticks, most time first
    assert sum(r.self_time for r in report.functions) == pytest.approx(0.3)
    assert [r.site.function for r in report.functions][:2] == ["<module>", "main"]


def test_the_functions_round_trip_through_json() -> None:
    report = _report()
    assert from_json(to_json(report)) == report
    doc = to_dict(report)
    assert {"site", "time", "self_time", "net", "to_peak"} <= set(doc["functions"][0])


def test_a_report_written_before_the_functions_still_reads() -> None:
    doc = to_dict(_report())
    del doc["functions"]
    assert from_json(json.dumps(doc)).functions == ()

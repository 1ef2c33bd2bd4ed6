"""The report built from fake ticks, and its renderers: text, JSON, HTML."""

from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._errors import ResultFormatError
from onnxrt_backend_dev.monitoring._report.build import RunFacts, build_report, package_of
from onnxrt_backend_dev.monitoring._report.model import SCHEMA_VERSION, Device, Ending, Report
from onnxrt_backend_dev.monitoring._report.render_html import to_html
from onnxrt_backend_dev.monitoring._report.render_json import from_json, to_dict, to_json
from onnxrt_backend_dev.monitoring._report.render_text import MAX_LINES, to_text
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

MIB = 2**20
GIB = 1024.0 * MIB
NUMPY = "/venv/lib/python3.11/site-packages/numpy/_core/numeric.py"
NUMPY_INNER = "/venv/lib/python3.11/site-packages/numpy/_core/multiarray.py"


def _report(
    tmp_path: Path,
    hostile: str = "",
    devices: int = 1,
    stacks: tuple[tuple[SampledFrame, ...], ...] = (),
    **facts: object,
) -> Report:
    """A run of ``main`` calling ``build`` (Python) and ``make_peak`` (numpy.ones); the
    ``stacks`` given are declared after its three (ids 3, 4...)."""
    script = tmp_path / "script.py"
    script.write_text("def main():\n    build()\n    a = ones(10)\n    b = ones(10)\n")
    s = str(script)
    agg = Aggregator()
    module = SampledFrame("<module>", s, 1, 5)
    main = SampledFrame("main", s, 1, 2)
    agg.add_stack(0, (module, main, SampledFrame(f"build{hostile}", s, 2, 2)))
    ones = SampledFrame("ones", NUMPY, 160, 170)
    copyto = SampledFrame("copyto", NUMPY_INNER, 1, 5)
    agg.add_stack(1, (module, SampledFrame("make_peak", s, 3, 4), ones, copyto))
    agg.add_stack(2, (module,))
    for sid, frames in enumerate(stacks, 3):
        agg.add_stack(sid, frames)
    ticks = [(0.0, 10, 0), (0.1, 60, 0), (0.2, 80, 0), (0.3, 380, 1), (0.4, 680, 1), (0.5, 20, 2)]
    for t, mib, sid in ticks:
        agg.add_tick(t, mib * MIB, max(mib, 680 if t >= 0.4 else mib) * MIB, sid)
    ending = Ending("exit", 0, "exited with code 0")
    defaults: dict[str, object] = {
        "program": f"script.py{hostile}",
        "ending": ending,
        "interval": 0.1,
        "cpu": 0.25,
        "wall": 0.5,
        "devices": [Device(f"fake:gpu{i}", (i + 1) * 1024 * MIB, 0, 0) for i in range(devices)],
        "curves": [(f"fake:gpu{i}", [0.0, 0.5], [0.0, GIB], "fake") for i in range(devices)],
        "notes": [f"note{hostile}"] if hostile else [],
    }  # fmt: skip
    defaults.update(facts)
    return build_report(agg, RunFacts(**defaults))  # type: ignore[arg-type]


def test_the_peak_names_the_user_line_and_the_library_call(tmp_path: Path) -> None:
    # WHEN the report of the fake run is built
    report = _report(tmp_path)
    # THEN the peak is exact, dated, and built on line 4 by numpy.ones
    assert report.peak.value == 680 * MIB and report.peak.time == pytest.approx(0.4)
    assert report.peak.site is not None and report.peak.site.line == 4
    assert report.peak.site.function == "make_peak" and report.peak.called == "numpy.ones"
    # AND the composition adds up to peak - start
    assert sum(p.bytes for p in report.composition) == pytest.approx(670 * MIB)
    assert (
        report.composition[0].label.startswith("make_peak (")
        and report.composition[0].bytes == 600 * MIB
    )
    assert report.utilisation == pytest.approx(0.5)


def test_the_tree_folds_library_frames_and_its_roots_add_up(tmp_path: Path) -> None:
    # WHEN the tree is built
    report = _report(tmp_path)
    names = [(r.depth, r.site.function) for r in report.tree]
    # THEN copyto (numpy called by numpy) folds into ones, named as hidden
    assert (2, "ones") in names and all(n != "copyto" for _, n in names)
    ones = next(r for r in report.tree if r.site.function == "ones")
    assert ones.hidden == "1 frame hidden (numpy)"
    # AND the roots' net growth is last - first, their time the ticks' span
    roots = [r for r in report.tree if r.parent < 0]
    assert sum(r.net for r in roots) == pytest.approx(10 * MIB)
    assert report.total_time == pytest.approx(0.5)
    # AND every parent index points to a row before with one less depth
    for r in report.tree:
        assert r.parent < 0 or report.tree[r.parent].depth == r.depth - 1


def test_hot_lines_carry_their_source(tmp_path: Path) -> None:
    report = _report(tmp_path)
    by_line = {r.site.line: r for r in report.lines}
    assert by_line[4].source == "b = ones(10)" and by_line[4].to_peak == pytest.approx(600 * MIB)


def test_the_text_summary_fits_30_lines_even_with_many_notes(tmp_path: Path) -> None:
    # GIVEN a report with 40 notes and 8 devices
    report = _report(tmp_path, devices=8, notes=[f"n{i}" for i in range(40)])
    # WHEN rendered as text THEN at most 30 lines, the peak and its line named
    text = to_text(report)
    assert len(text.splitlines()) <= MAX_LINES
    assert "peak RSS 680 MiB (hwm)" in text, text
    assert "script.py:4) calling numpy.ones" in text, text


def test_json_round_trips_with_a_schema_and_a_version(tmp_path: Path) -> None:
    report = _report(tmp_path)
    text = to_json(report)
    doc = json.loads(text)
    assert doc["schema"] == "onnxrt-monitoring-report" and doc["version"] == SCHEMA_VERSION
    assert from_json(text) == report


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(schema="other"), "not a report"),
        (lambda d: d.update(version=99), "version 99"),
        (lambda d: d.pop("peak"), "malformed report: KeyError"),
        (lambda d: d.update(wall="1"), "expected a number"),
        (lambda d: d["curves"][0].update(times=[0.0]), "1 times"),
    ],
)
def test_a_document_that_is_not_a_report_is_refused(
    tmp_path: Path, change: object, message: str
) -> None:
    doc = to_dict(_report(tmp_path))
    assert callable(change)
    change(doc)
    with pytest.raises(ResultFormatError, match=message):
        from_json(json.dumps(doc))


def test_not_json_is_refused() -> None:
    with pytest.raises(ResultFormatError, match="not JSON"):
        from_json("{")


HOSTILE = '</script><img src=x onerror=alert(1)>"&'


def test_untrusted_names_are_escaped_in_html_and_json(tmp_path: Path) -> None:
    # GIVEN a program and a function named with markup
    report = _report(tmp_path, hostile=HOSTILE)
    page = to_html(report)
    # THEN no markup from the program reaches the page
    assert "<img" not in page and "</script>" not in page and "&lt;img" in page
    assert "</" not in to_json(report).replace("<\\/", "")


def test_the_page_is_self_contained_and_marks_the_peak(tmp_path: Path) -> None:
    page = to_html(_report(tmp_path))
    # THEN no script, no external resource; the sections are there
    assert "<script" not in page and "http://" not in page and "https://" not in page
    for title in (
        "Memory over time",
        "Timeline",
        "What the peak is made of",
        "Call tree",
        "Hot lines",
    ):
        assert title in page
    assert "peak 680 MiB: make_peak" in page and "fake:gpu0" in page


def test_an_empty_run_still_renders(tmp_path: Path) -> None:
    # GIVEN no tick at all (a program killed at once)
    report = build_report(Aggregator(), RunFacts("x.py", Ending("signal", 137, "killed"), 0.005))
    # THEN every renderer writes something readable
    assert "killed" in to_text(report) and "killed" in to_html(report)
    assert from_json(to_json(report)) == report


def test_a_deep_stack_is_built_without_recursion(tmp_path: Path) -> None:
    # GIVEN a stack 5000 frames deep (deeper than the recursion limit's default)
    agg = Aggregator()
    agg.add_stack(0, tuple(SampledFrame(f"f{i}", "deep.py", i, i) for i in range(5000)))
    agg.add_tick(0.0, 1.0, 1.0, 0)
    agg.add_tick(1.0, 2.0, 2.0, 0)
    report = build_report(agg, RunFacts("deep", Ending("exit", 0, "ok"), 0.005))
    assert len(report.tree) == 5000 and report.tree[-1].depth == 4999
    assert to_dict(report)["tree"][-1]["depth"] == 4999
    assert dataclasses.replace(report) == report


@pytest.mark.parametrize(
    ("path", "package"),
    [
        (NUMPY, "numpy"),
        ("/usr/lib/python3.11/json/decoder.py", "stdlib"),
        ("<frozen os>", "built-in"),
    ],
)
def test_package_of(path: str, package: str) -> None:
    assert package_of(path) == package


def test_the_rss_curve_starts_at_the_program_start_with_its_first_rss(tmp_path: Path) -> None:
    # GIVEN a spy whose samples begin before the program (the tool's own start) and
    # whose first sample after the start comes late
    spy = ("rss", [-0.05, 0.3, 0.45], [3 * MIB, 380 * MIB, 680 * MIB], "sampling")
    # WHEN the report is built (the ticks start at t=0 with 10 MiB)
    report = _report(tmp_path, curves=[spy], t0=0.0)
    rss = report.curves[0]
    # THEN the curve starts at t=0 with the first tick's RSS, nothing before it, and
    # keeps the ticks' points before the spy's first one
    assert rss.times[0] == 0.0 and rss.values[0] == 10 * MIB
    assert min(rss.times) >= 0.0 and 3 * MIB not in rss.values
    assert 0.1 in rss.times and 0.3 in rss.times


def test_the_page_axes_have_round_ticks(tmp_path: Path) -> None:
    page = to_html(_report(tmp_path))
    # a 0.5 s run: 0 ms, 50 ms ... 500 ms, not the old 0 s, 50.0 ms ... 500 ms; memory up
    # to the fake GPU's 1 GiB: 0.0 GiB, 0.2 GiB ... 1.0 GiB, not 0 B, 283 MiB, 566 MiB
    times = [f">{i} ms<" for i in range(0, 550, 50)]
    assert all(t in page for t in times) and "50.0 ms" not in page and ">0 s<" not in page
    assert all(f">{i / 10:.1f} GiB<" in page for i in range(0, 12, 2))


def test_a_peak_less_the_tool_says_the_raw_mark_beside(tmp_path: Path) -> None:
    # GIVEN a report whose figures had 2 MiB of the tool's start-up memory taken off
    report = _report(tmp_path, tool_rss=2.0 * MIB)
    # THEN text, page and JSON say it beside the peak, and the JSON round-trips it
    raw = "high-water mark 682 MiB less 2.00 MiB of this tool's own memory in it"
    assert raw in to_text(report) and html.escape(raw) in to_html(report)
    assert from_json(to_json(report)).peak.tool == 2.0 * MIB
    assert "less" not in to_text(_report(tmp_path)).split("built by")[0]


def test_the_main_threads_rows_come_before_a_heavier_thread(tmp_path: Path) -> None:
    # GIVEN a run whose main thread worked 0.3 s while another thread worked 2 s
    s = str(tmp_path / "script.py")
    busy = (
        SampledFrame("_bootstrap", "/usr/lib/python3.11/threading.py", 980, 990),
        SampledFrame("crunch", s, 19, 20),
    )
    main = (SampledFrame("<module>", s, 1, 1), SampledFrame("work", s, 2, 3))
    # The threads' time is given on the aggregator's stack ids.
    threads = [("worker", False, {3: (2.0, 1.5)}), ("MainThread", True, {4: (0.3, 0.3)})]
    report = _report(tmp_path, stacks=(busy, main), threads=threads)
    # THEN the first root row is the program's, the thread's comes after it
    roots = [r.site.function for r in report.tree if r.parent < 0]
    assert roots == ["<module>", "thread worker"], roots


def test_a_thread_that_only_waits_is_not_the_program_s_time(tmp_path: Path) -> None:
    # GIVEN a run whose main thread worked 0.3 s while another thread (IPython's history
    # thread, a pool's idle worker) waited 2 s on an Event, using no CPU
    s = str(tmp_path / "script.py")
    waiting = (
        SampledFrame("_bootstrap", "/usr/lib/python3.11/threading.py", 980, 990),
        SampledFrame("wait", "/usr/lib/python3.11/threading.py", 300, 320),
    )
    main = (SampledFrame("<module>", s, 1, 1), SampledFrame("work", s, 2, 3))
    threads = [("waiter", False, {3: (2.0, 0.0)}), ("MainThread", True, {4: (0.3, 0.3)})]
    report = _report(tmp_path, stacks=(waiting, main), threads=threads)
    # THEN it is neither a root of the tree nor a function of the summary
    assert "thread waiter" not in [r.site.function for r in report.tree if r.parent < 0]
    assert "_bootstrap" not in to_text(report) and "Thread" not in to_text(report)


def test_a_peak_that_never_rose_over_its_start_names_no_builder() -> None:
    # GIVEN flat memory (a process attached to, idle)
    agg = Aggregator(attached=True)
    agg.add_stack(1, (SampledFrame("wait_for_next", "/app/serve.py", 7, 8),))
    for i in range(5):
        agg.add_tick(i * 0.1, 10 * 2**20, 200 * 2**20, 1)
    report = build_report(agg, RunFacts("serve.py", Ending("exit", 0, "observed"), 0.1))
    # THEN no line built it, in the text and on the page, one word for both
    text = to_text(report)
    assert "nothing grew while observed" in text and "built by" not in text
    assert "reached in" not in text
    assert "nothing grew while observed" in to_html(report)


def test_a_run_without_a_tick_has_no_negative_moment() -> None:
    # GIVEN a program ending before the first tick (started 1596 s into the clock)
    facts = RunFacts("-dash.py", Ending("exit", 2, "exited with code 2"), 0.005, t0=1596.0)
    report = build_report(Aggregator(), facts)
    # THEN its peak is at 0, and the report says why there is nothing
    assert report.peak.time == 0.0
    assert "no memory tick: the program ended before the first one" in report.notes


def test_a_pools_cpu_is_a_hot_line_column_only_when_a_line_has_it(tmp_path: Path) -> None:
    # GIVEN the main thread's line 3 run 0.3 s while a pool used 0.6 s of CPU
    s = str(tmp_path / "script.py")
    main = (SampledFrame("<module>", s, 1, 1), SampledFrame("work", s, 2, 3))
    row = (0.3, 0.3, 1.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6)
    report = _report(tmp_path, stacks=(main,), threads=[("MainThread", True, {3: row})])
    # THEN the hot lines have a pool column, 200 % of the line's time on line 3
    text = to_text(report)
    assert "wait pool (% of the line's time)" in text
    assert "  100    0    0  200  " in next(x for x in text.splitlines() if "script.py:3 " in x)
    assert "<th>pool CPU</th>" in to_html(report) and "<td>200 %</td>" in to_html(report)
    assert from_json(to_json(report)).lines == report.lines  # kept by the JSON
    # AND without it (a row saved before the column existed), no pool column
    report = _report(tmp_path, stacks=(main,), threads=[("MainThread", True, {3: row[:7]})])
    assert "wait pool" not in to_text(report) and "pool CPU" not in to_html(report)
    assert "wait (% of the line's time)" in to_text(report)

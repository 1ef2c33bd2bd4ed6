"""The report's allocations section from synthetic estimates: by line (the innermost
user line, the native library named), the icicle of what is live at the peak, the leak
candidates, the line that built the peak; and its renderings (text, HTML, JSON)."""

from __future__ import annotations

import dataclasses

import pytest

from onnxrt_backend_dev.monitoring._alloc.estimate import NO_STACK, SiteEstimate
from onnxrt_backend_dev.monitoring._report.allocations import (
    AllocFacts,
    build_allocations,
    library_label,
    peak_place,
)
from onnxrt_backend_dev.monitoring._report.build import RunFacts, build_report
from onnxrt_backend_dev.monitoring._report.model import Ending, Site
from onnxrt_backend_dev.monitoring._report.render_html import to_html
from onnxrt_backend_dev.monitoring._report.render_json import from_json, to_json
from onnxrt_backend_dev.monitoring._report.render_text import to_text
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

MiB = 2**20
NUMPY = "/venv/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.cpython-311.so"
ORT = "/venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime.so.1.20"
LIBPYTHON = "/usr/lib/libpython3.11.so.1.0"
PANDAS = "/venv/lib/python3.11/site-packages/pandas/io.py"
MAIN = SampledFrame("<module>", "/w/train.py", 1, 30)
STACKS = [
    (
        MAIN,
        SampledFrame("evaluate", "/w/train.py", 10, 12),
        SampledFrame("forward", "/w/model.py", 38, 40),
    ),
    (MAIN, SampledFrame("evaluate", "/w/train.py", 10, 14)),
    (
        MAIN,
        SampledFrame("load", "/w/train.py", 20, 21),
        SampledFrame("read_csv", PANDAS, 1, 5),
        SampledFrame("_read", PANDAS, 8, 9),
    ),
    (MAIN, SampledFrame("_find_and_load", "<frozen importlib._bootstrap>", 1, 1)),
    (MAIN, SampledFrame("leak", "/w/train.py", 49, 50)),
]


def site(sid: int, lib: int, peak: float, end: float = 0.0, var: float = 0.0,
         allocated: float | None = None, temporary: float = 0.0) -> SiteEstimate:  # fmt: skip
    allocated = peak if allocated is None else allocated
    return SiteEstimate((sid, lib), 3, peak, var, allocated, var, 3.0, temporary, 0.0,
                        1.0 if temporary else 0.0, end, var)  # fmt: skip


def facts(**changes: object) -> AllocFacts:
    base = AllocFacts(
        sites=[
            site(0, 0, 82 * MiB),
            site(1, 0, 82 * MiB, temporary=10 * MiB),
            site(2, 1, 41 * MiB, end=41 * MiB),
            site(3, 2, 20 * MiB, end=20 * MiB),  # an import: not a leak
            site(4, 2, 5 * MiB, end=30 * MiB),
            site(NO_STACK, 3, 3 * MiB, var=(1 * MiB) ** 2),
        ],
        stacks=STACKS,
        libraries=[NUMPY, LIBPYTHON, LIBPYTHON, ORT],
        mean=256 * 1024,
        samples=120,
        peak=233 * MiB,
        peak_time=1.5,
        allocated=900 * MiB,
        count=12345,
    )
    return base._replace(**changes)  # type: ignore[arg-type]


def test_library_labels_name_the_package_and_leave_the_interpreter_out() -> None:
    assert library_label(NUMPY) == "numpy (_multiarray_umath)"
    assert library_label(ORT) == "onnxruntime (libonnxruntime)"
    assert library_label(LIBPYTHON) == ""
    assert library_label("/usr/lib/x86_64-linux-gnu/libstdc++.so.6") == "libstdc++"
    numpy_libs = "/v/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so"
    assert library_label(numpy_libs) == "numpy (libscipy_openblas64_-32a4b2a6)"


def test_lines_are_the_innermost_user_lines_with_their_native_library() -> None:
    section = build_allocations(facts())
    rows = {(r.site.file, r.site.line): r for r in section.lines}
    assert [(r.site.function, r.site.line) for r in section.lines[:3]] == [
        ("forward", 40), ("evaluate", 14), ("load", 21)
    ]  # fmt: skip
    assert rows["/w/model.py", 40].native == "numpy (_multiarray_umath)"
    # a pandas call is credited to the user's line that made it, naming the call
    load = rows["/w/train.py", 21]
    assert load.called == "pandas.read_csv" and load.native == ""
    no_frame = [r for r in section.lines if r.site.function == "(no Python frame)"]
    assert no_frame[0].native == "onnxruntime (libonnxruntime)"
    assert no_frame[0].live_peak_err == pytest.approx(1.96 * MiB, rel=1e-3)
    assert section.temporaries[0].site.line == 14
    assert section.allocating[0].allocated == 82 * MiB


def test_leaks_are_lines_still_holding_above_one_percent_imports_left_out() -> None:
    section = build_allocations(facts())
    assert [(r.site.function, r.live_end) for r in section.leaks] == [
        ("load", 41 * MiB), ("leak", 30 * MiB)
    ]  # fmt: skip
    # a line under 1 % of the peak, or within its own error bar, is no leak
    quiet = facts(sites=[site(4, 2, 0.0, end=2 * MiB), site(2, 1, 0.0, end=40 * MiB,
                                                           var=(30 * MiB) ** 2)])  # fmt: skip
    assert build_allocations(quiet).leaks == ()


def test_the_icicle_is_pre_order_with_widths_adding_up() -> None:
    section = build_allocations(facts())
    nodes = section.flame
    roots = [n for n in nodes if n.parent < 0]
    assert sum(n.bytes for n in roots) == pytest.approx(233 * MiB)
    for i, node in enumerate(nodes):  # a child after its parent, one level deeper
        if node.parent >= 0:
            assert node.parent < i and node.depth == nodes[node.parent].depth + 1
    # each node's children add up to it, at most (a leaf's native library is a box)
    for i, node in enumerate(nodes):
        below = sum(n.bytes for n in nodes if n.parent == i)
        assert below <= node.bytes * (1 + 1e-9)
    labels = [n.site.function for n in nodes]
    assert "[numpy (_multiarray_umath)]" in labels and "(no Python frame)" in labels
    # library frames called by library frames fold into the first
    read_csv = next(n for n in nodes if n.site.function == "read_csv")
    assert read_csv.hidden == "1 frames hidden (pandas)"


def test_the_peak_is_built_by_the_line_holding_most_at_it() -> None:
    place = peak_place(facts())
    assert place is not None
    line, called, stack = place
    assert (line.function, line.line) == ("forward", 40) and called == ""
    assert [s.function for s in stack] == ["<module>", "evaluate", "forward"]
    assert peak_place(facts(sites=[site(NO_STACK, 3, 5 * MiB)])) is None


def report(**changes: object):  # type: ignore[no-untyped-def]
    agg = Aggregator()
    agg.add_tick(0.0, 10 * MiB, 10 * MiB, -1)
    agg.add_tick(0.1, 300 * MiB, 300 * MiB, -1)
    alloc = facts(**changes)
    run = RunFacts("train.py", Ending("exit", 0, "exited with code 0"), 0.005,
                   allocations=build_allocations(alloc), held=peak_place(alloc))  # fmt: skip
    return build_report(agg, run)


def test_text_says_what_is_live_at_the_peak_instead_of_the_growth() -> None:
    text = to_text(report())
    assert "heap peak 233 MiB at 1.50 s (allocated 900 MiB in 12,345 calls" in text
    assert "live at the peak, by line:" in text
    assert "/w/model.py:40 forward" in text and "[numpy (_multiarray_umath)]" in text
    assert "still live at the end (leak candidates):" in text
    assert "the peak is made of" not in text
    assert "built by forward (/w/model.py:40)" in text
    assert len(text.splitlines()) <= 30


def test_html_shows_the_icicle_and_the_tables_escaped() -> None:
    hostile = [(MAIN, SampledFrame("<script>x</script>", "/w/a&b.py", 1, 3))]
    page = to_html(report(stacks=hostile + STACKS[1:]))
    assert "What is live at the peak (allocations)" in page
    assert "<svg" in page and 'aria-label="what is live at the peak"' in page
    assert "Still live at the end (leak candidates)" in page
    assert "<script>x" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "RSS growth per function from the start to the peak" in page


def test_json_round_trips_the_allocations() -> None:
    original = report()
    again = from_json(to_json(original))
    assert again.allocations == original.allocations
    assert again.peak.site == original.peak.site
    # a report without allocations reads back without them
    plain = dataclasses.replace(original, allocations=None)
    assert from_json(to_json(plain)).allocations is None


def test_a_report_without_the_shim_keeps_the_growth_answer() -> None:
    agg = Aggregator()
    agg.add_tick(0.0, 10 * MiB, 10 * MiB, -1)
    agg.add_tick(0.1, 300 * MiB, 300 * MiB, -1)
    plain = build_report(agg, RunFacts("p.py", Ending("exit", 0, "ok"), 0.005))
    assert plain.allocations is None
    assert "heap peak" not in to_text(plain)
    assert "What the peak is made of: RSS growth" in to_html(plain)


def test_no_site_is_no_line() -> None:
    section = build_allocations(facts(sites=[]))
    assert section.lines == () and section.flame == () and section.leaks == ()
    assert "nothing live at the peak was sampled" in to_html(report(sites=[]))


def test_sites_of_an_unknown_stack_or_library_are_kept() -> None:
    section = build_allocations(facts(sites=[site(99, 42, 4 * MiB)], stacks=[]))
    assert section.lines[0].site == Site("(no Python frame)", "", 0, True)
    assert section.lines[0].native == ""


def test_heap_and_rss_peaks_apart_are_explained_and_the_interpreters_lines_named() -> None:
    # GIVEN the heap's peak 1.4 s after the RSS's (233 MiB at 1.5 s, 300 MiB at 0.1 s)
    apart = report()
    # THEN a note says why two peaks differ, in the text and on the page
    assert any("the heap peak (233 MiB at 1.50 s) is not the RSS peak" in n for n in apart.notes)
    # AND a line whose allocations the interpreter made names it on the page
    page = to_html(apart)
    assert '<td class="l note">the interpreter' in page
    # WHEN they coincide THEN nothing is said
    near = report(peak_time=0.1, peak=300 * MiB)
    assert not any("the heap peak" in n for n in near.notes)


def test_a_name_with_a_line_break_stays_on_its_row_in_the_allocation_lines() -> None:
    from onnxrt_backend_dev.monitoring._report.render_text import allocation_lines

    hostile = [(MAIN, SampledFrame("evil\nname", "/w/a.py", 1, 3))]
    lines = allocation_lines(build_allocations(facts(stacks=hostile + STACKS[1:])))
    row = next(line for line in lines if "evil" in line)
    assert "evil\\nname" in row and all("\n" not in line for line in lines)

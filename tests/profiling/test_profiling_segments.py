"""The reference rows as segments (``TreeRows.segments``) and the text rendered from them
(``render_segments_text``): the same rows, in the same order, and the same text byte for
byte as the row-by-row renderer, on random graphs, hand-made graphs with odd figures and
every filter."""

from __future__ import annotations

import random
from pstats import SortKey
from typing import Any

import pytest
from test_profiling import FakeStats, chain_stats, self_recursion_stats

from onnxrt_backend_dev.monitoring._profiling.filters import ViewOptions
from onnxrt_backend_dev.monitoring._profiling.reference import render_segments_text
from onnxrt_backend_dev.monitoring._profiling.view_reference import TreeRows
from onnxrt_backend_dev.monitoring.profiling import ProfileNode, profile2graph

LIB = "/usr/lib/python3.11/json/encoder.py"


def render_forest_text(
    rows: Any,
    total: float,
    show_share: bool = False,
    max_count: int | None = None,
    rows_again: Any = None,
    **layout: Any,
) -> str:
    """The raw rows of ``TreeRows.raw`` rendered one by one (one segment per row), their
    shares of ``total`` (moved here from the package, whose only text path is
    ``to_text``'s segments)."""
    if rows_again is None and max_count is None:
        kept = rows = list(rows)
        rows_again = lambda: kept  # noqa: E731

    def one_row_segments(raw: Any) -> Any:
        return ((depth, (node,), (el,), ref) for node, depth, el, ref in raw)

    again = None if rows_again is None else lambda: one_row_segments(rows_again())
    return render_segments_text(
        one_row_segments(rows), max_count=max_count or 0, segments_again=again,
        share_of=total if show_share else None, **layout,
    )  # fmt: skip


def _random_stats(seed: int, n: int = 60) -> FakeStats:
    """Fan-in, back edges (cycles), library files, built-ins and names with ``%``."""
    rnd = random.Random(seed)
    st = FakeStats()
    files = ["prog.py", LIB, "~", "/site-packages/pkg/m%d.py"]
    keys = [(files[i % 4], i + 1, f"f{i}%s" if i % 7 == 0 else f"f{i}") for i in range(n)]
    for key in keys:
        st.add(key, rnd.randint(1, 12), rnd.randint(1, 12), rnd.uniform(0, 1e-3), rnd.uniform(0, 1))
    for i in range(1, n):
        for c in rnd.sample(range(i), min(i, rnd.randint(1, 3))):
            k = rnd.choice([1, 2, 9, 40, 12345])
            st.call(keys[c], keys[i], k, rnd.uniform(0, 1e-4), rnd.uniform(0, 0.2))
    for _ in range(n // 6):
        a = rnd.randrange(n)
        st.call(keys[a], keys[rnd.randrange(a + 1)], 3, 1e-5, rnd.uniform(0, 0.5))
    return st


def _hand_made() -> ProfileNode:
    """A cycle, a list as a call's figures, a longer tuple, a callee called twice."""
    a = ProfileNode("prog.py", 1, "a\n%d", 1, 1, 0.1, 1.0)
    b = ProfileNode("prog.py", 2, "b", 3, 3, 0.2, 0.8)
    c = ProfileNode("prog.py", 3, "c", 2, 2, 0.3, 0.5)
    d = ProfileNode(LIB, 4, "lib_d", 120, 120, 0.01, 0.01)
    calls: list[tuple[ProfileNode, ProfileNode, Any]] = [
        (a, b, (3, 3, 0.2, 0.8)),
        (b, c, [2, 2, 0.3, 0.5]),
        (c, b, (1, 1, 0.01, 0.02, "extra")),
        (b, d, (120, 120, 0.01, 0.01)),
        (a, d, (7, 7, 0.0, 0.0)),
    ]
    for caller, callee, el in calls:
        caller.add_calls_to(callee, el)
        callee.add_called_by(caller)
    return a


def _graphs() -> list[ProfileNode]:
    graphs = [profile2graph(_random_stats(seed))[0] for seed in range(6)]
    graphs.append(profile2graph(chain_stats(45))[0])
    graphs.append(profile2graph(self_recursion_stats(30))[0])
    graphs.append(_hand_made())
    return graphs


OPTIONS: list[dict[str, Any]] = [
    {},
    {"sort_key": SortKey.CUMULATIVE},
    {"sort_key": "time", "hide_stdlib": True},
    {"hide_stdlib": True},
    {"min_share": 0.05},
    {"max_depth": 2},
    {"focus": "f1"},
    {"focus": "b", "hide_stdlib": True, "max_depth": 3},
    {"filter_node": lambda node, info=None: node.line % 3 != 0},
]


def _row_by_row(root: ProfileNode, opts: dict[str, Any], **text: Any) -> str:
    """The text of the row-by-row renderer, the reference the segments must match."""
    opts = dict(opts)
    filter_node, sort_key = opts.pop("filter_node", None), opts.pop("sort_key", SortKey.LINE)
    view = ViewOptions(**opts)
    rows = TreeRows(root, filter_node, sort_key, view)
    # A second walk of the same view, as segments_again gives the segments.
    again = lambda: TreeRows(root, filter_node, sort_key, view).raw()  # noqa: E731
    return render_forest_text(
        rows.raw(), rows.total, max_count=rows.max_count, rows_again=again, **text
    )


@pytest.mark.parametrize("opts", OPTIONS, ids=[str(i) for i in range(len(OPTIONS))])
def test_segments_render_the_row_by_row_text(opts: dict[str, Any]) -> None:
    for root in _graphs():
        layouts: list[dict[str, Any]] = [{}, {"fct_width": 12, "max_indent": 2}, {"fct_width": 0}]
        for text in layouts:
            # GIVEN a graph, filters and a layout
            # WHEN it is rendered from segments (to_text) and row by row
            fast = root.to_text(**opts, **text)
            # THEN the two texts are the same, byte for byte
            assert fast == _row_by_row(root, opts, **text)


def test_segments_hold_the_rows_in_order() -> None:
    for root in _graphs():
        for opts in OPTIONS:
            opts = dict(opts)
            filt, key = opts.pop("filter_node", None), opts.pop("sort_key", SortKey.LINE)
            # GIVEN the rows of a view, one by one
            rows = list(TreeRows(root, filt, key, ViewOptions(**opts)).raw())
            # WHEN the same view is read as segments
            segments = list(TreeRows(root, filt, key, ViewOptions(**opts)).segments())
            # THEN each segment is a run of one depth and kind, the rows the same
            flat = [
                (node, depth, el, ref)
                for depth, nodes, els, ref in segments
                for node, el in zip(nodes, els, strict=True)
            ]
            assert flat == rows
            assert all(len(nodes) == len(els) >= 1 for _, nodes, els, _ in segments)


def test_segments_text_sizes_columns_from_the_rows() -> None:
    # GIVEN a graph whose largest count (a node's) is wider than any row's count
    root = ProfileNode("p.py", 1, "p", 1, 1, 1.0, 2.0)
    big = ProfileNode("p.py", 2, "q", 10**9, 10**9, 1.0, 1.0)
    root.add_calls_to(big, (3, 3, 1.0, 1.0))
    big.add_called_by(root)
    rows = TreeRows(root)
    # WHEN rendered with the graph's largest count as the first guess
    text = render_segments_text(
        rows.segments(), max_count=10**9, segments_again=rows.segments_again
    )
    # THEN the columns are those of the rows' counts (the reference's rule), as row by row
    assert text == _row_by_row(root, {})
    assert " --  1  1 -- " in text


def test_segments_text_of_no_rows_is_empty() -> None:
    # GIVEN a view that keeps nothing (focus on a name no function has)
    root = profile2graph(chain_stats(3))[0]
    rows = TreeRows(root, None, SortKey.LINE, ViewOptions(focus="nothing"))
    # WHEN rendered THEN the text is empty, as row by row
    assert render_segments_text(rows.segments()) == ""
    assert root.to_text(focus="nothing") == _row_by_row(root, {"focus": "nothing"}) == ""


def test_segments_text_refuses_a_bad_layout() -> None:
    rows = TreeRows(profile2graph(chain_stats(3))[0])
    with pytest.raises(ValueError, match="fct_width must be an int"):
        render_segments_text(rows.segments(), fct_width=-1)
    with pytest.raises(ValueError, match="max_indent must be >= 1"):
        render_segments_text(rows.segments(), max_indent=0)

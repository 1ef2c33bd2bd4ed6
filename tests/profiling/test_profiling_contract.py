"""The reference contract, byte for byte: ``ProfileNode.to_text`` with its defaults and
``profile2df``'s table, pinned against literal expected text and columns."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers import DATA as _DATA

from onnxrt_backend_dev.monitoring._profiling.reference import count_width
from onnxrt_backend_dev.monitoring.profiling import profile, profile2df, profile2graph

# The document's example, its functions on the document's lines (fct0 on line 7...):
# compiled under the file name "", the keys read ":7:fct0" as in the document.
_EXAMPLE = """

import time
from onnxrt_backend_dev.monitoring.profiling import profile, profile2graph


def fct0(t):
    time.sleep(t)


def fct1(t):
    time.sleep(t)


def fct2():
    fct1(0.01)
    fct1(0.001)


def fct3():
    fct0(0.02)
    fct1(0.05)


def fct4():
    fct2()
    fct3()
"""

SLEEP = "<built-in method time.sleep>"
DATA = _DATA
# The document's rows, timings written T.TTTTT. The reference implementation prints
# every function called from zero or several places as a root, time.sleep included:
# its row is the last one (the document's excerpt stops before it).
EXPECTED_TEXT = (DATA / "reference_to_text.txt").read_text("utf-8").rstrip("\n")

_TIME = re.compile(r"\d+\.\d{5}")


@pytest.fixture(scope="module")
def example() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(_EXAMPLE, "", "exec"), namespace)
    return profile(namespace["fct4"])[0]


def test_to_text_defaults_print_the_reference_lines(example: Any) -> None:
    root, _ = profile2graph(example, clean_text=lambda x: x.split("/")[-1])
    text = root.to_text()
    assert _TIME.sub("T.TTTTT", text) == EXPECTED_TEXT
    # a referenced row ENDS with " +++": no column after it
    assert [ln.endswith(" +++") for ln in text.splitlines()].count(True) == 4


def test_to_text_share_is_opt_in(example: Any) -> None:
    root, _ = profile2graph(example, clean_text=lambda x: x.split("/")[-1])
    lines = root.to_text(show_share=True).splitlines()
    assert len(lines) == 10
    assert all(re.search(r" -- \d+\.\d%$", ln) for ln in lines)
    assert re.search(r"\(fct1\) \+\+\+ -- \d+\.\d%$", lines[4])


class _Stats:
    """pstats-like data: ``stats[func] = (cc, nc, tt, ct, callers)``."""

    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats


def _fixed_stats(calls: int) -> _Stats:
    """main -> work (``calls`` calls) and main -> tiny (3 calls), fixed timings."""
    main, work, tiny = ("m.py", 1, "main"), ("m.py", 5, "work"), ("m.py", 9, "tiny")
    return _Stats(
        {
            main: (1, 1, 0.5, 2.0, {}),
            work: (calls, calls, 1.25, 1.25, {main: (calls, calls, 1.25, 1.25)}),
            tiny: (3, 3, 0.25, 0.25, {main: (3, 3, 0.25, 0.25)}),
        }
    )


def test_to_text_exact_bytes_on_fixed_timings() -> None:
    root, _ = profile2graph(_fixed_stats(32))
    expected = (DATA / "reference_to_text_fixed.txt").read_text("utf-8")
    assert root.to_text() == expected.rstrip("\n")


def test_count_columns_follow_the_references_rule() -> None:
    # The reference writes counts with "{: Nd}", N = int(log10(max count) + 1.5):
    # with 31 calls at most N is 2, so "31" takes 3 characters and "3" only 2.
    root, _ = profile2graph(_fixed_stats(31))
    lines = root.to_text().splitlines()
    assert " --  1  1 -- " in lines[0]
    assert " --  31  31 -- " in lines[1]
    assert " --  3  3 -- " in lines[2]
    assert [count_width(n) for n in (0, 1, 3, 4, 9, 10, 31, 32, 316, 317)] == [
        1,
        1,
        1,
        2,
        2,
        2,
        2,
        3,
        3,
        4,
    ]


def _two_profiles() -> list[_Stats]:
    """Two profiles sharing ``work``: its figures are summed in profile2df."""
    main, work = ("m.py", 1, "main"), ("m.py", 5, "work")
    first = _Stats(
        {
            main: (1, 1, 0.5, 2.0, {}),
            work: (2, 2, 1.5, 1.5, {main: (2, 2, 1.5, 1.5)}),
        }
    )
    other = ("o.py", 3, "other")
    second = _Stats(
        {
            other: (1, 1, 0.25, 4.0, {}),
            work: (3, 4, 3.75, 3.75, {other: (4, 3, 3.75, 3.75)}),
        }
    )
    return [first, second]


REFERENCE_COLUMNS = ["fct", "file", "ncalls1", "ncalls2", "tin", "cum_tin", "tall", "cum_tall"]


def test_profile2df_is_the_references_table() -> None:
    pytest.importorskip("pandas")
    df = profile2df(_two_profiles())
    assert list(df.columns) == REFERENCE_COLUMNS
    assert list(df.index) == [0, 1, 2]
    assert df.to_dict(orient="records") == [
        {
            "fct": "work",
            "file": "m.py:5",
            "ncalls1": 5,
            "ncalls2": 6,
            "tin": 5.25,
            "cum_tin": 5.25,
            "tall": 5.25,
            "cum_tall": 5.25,
        },
        {
            "fct": "other",
            "file": "o.py:3",
            "ncalls1": 1,
            "ncalls2": 1,
            "tin": 0.25,
            "cum_tin": 0.25,
            "tall": 4.0,
            "cum_tall": 4.0,
        },
        {
            "fct": "main",
            "file": "m.py:1",
            "ncalls1": 1,
            "ncalls2": 1,
            "tin": 0.5,
            "cum_tin": 0.5,
            "tall": 2.0,
            "cum_tall": 2.0,
        },
    ]
    # code written against the reference: df.set_index("fct")
    assert df.set_index("fct").loc["work", "ncalls2"] == 6


def test_profile2df_rows_and_clean_text() -> None:
    rows = profile2df(_two_profiles(), as_df=False, clean_text=lambda x: x.upper())
    assert len(rows) == 4  # one per function of each profile, not summed
    assert all(set(REFERENCE_COLUMNS) <= set(r) for r in rows)
    assert {r["file"] for r in rows} == {"M.PY:1", "M.PY:5", "O.PY:3"}


def test_profile2df_of_a_real_profile(example: Any) -> None:
    pytest.importorskip("pandas")
    df = profile2df(example, clean_text=lambda x: x.split("/")[-1])
    assert list(df.columns) == REFERENCE_COLUMNS
    assert list(df.index) == list(range(len(df)))
    assert df["cum_tall"].is_monotonic_decreasing
    by_fct = df.set_index("fct")
    assert by_fct.loc["fct1", "ncalls1"] == 3 and by_fct.loc["fct1", "file"] == ":11"
    assert by_fct.loc[SLEEP, "ncalls2"] == 4


def test_profile_as_df_keeps_namefct() -> None:
    pytest.importorskip("pandas")
    _, df = profile(lambda: sorted(range(10)), as_df=True)
    assert list(df.columns) == ["namefct", *REFERENCE_COLUMNS[1:]]


def test_count_columns_sized_from_the_rows_printed() -> None:
    # GIVEN a graph whose largest count (work, 32 calls) is filtered out
    root, _ = profile2graph(_fixed_stats(32))

    def no_work(node: Any, info: Any = None) -> bool:
        return node.func_name != "work"

    # THEN the columns are those of the rows printed (3 calls at most), as the reference
    lines = root.to_text(filter_node=no_work).splitlines()
    assert len(lines) == 2
    assert " --  1  1 -- " in lines[0] and " --  3  3 -- " in lines[1]
    # and the same rows from a list of raw rows give the same text
    from test_profiling_segments import render_forest_text

    from onnxrt_backend_dev.monitoring._profiling.view_reference import TreeRows

    view = TreeRows(root, no_work)
    assert render_forest_text(list(view.raw()), view.total) == "\n".join(lines)

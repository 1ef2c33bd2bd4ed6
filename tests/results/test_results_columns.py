"""The per-function columns of a profile in bulk: medians over the runs, shares, and the
same figures from a version 1 file (rows per run) as from version 2 (integer columns)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from results_data import profile_doc

from onnxrt_backend_dev.monitoring._results import columns, store
from onnxrt_backend_dev.monitoring._results.compare import compare_results

V1 = Path(__file__).parent.parent / "data" / "results"


@pytest.mark.parametrize("runs", [1, 2, 3, 4, 7])
def test_medians_are_the_medians_of_each_function(runs: int) -> None:
    # GIVEN 5 functions of `runs` figures each, function-major
    rows = [[(7 * i + 3 * r) % 11 + i for r in range(runs)] for i in range(5)]
    flat = [x for row in rows for x in row]
    # WHEN the medians are taken in bulk, in a unit of 10
    got = columns.medians(flat, runs, 10.0)
    # THEN each is statistics.median of its row, over 10
    assert got == pytest.approx([statistics.median(row) / 10 for row in rows])


def test_constant_rows_skip_the_sort_and_mixed_rows_do_not() -> None:
    # GIVEN calls the same in every run, then one row that varies
    same = [3, 3, 3, 5, 5, 5]
    mixed = [3, 3, 3, 5, 9, 5]
    # WHEN asked as likely constant THEN the right medians either way
    assert columns.medians(same, 3, constant=True) == [3.0, 5.0]
    assert columns.medians(mixed, 3, constant=True) == [3.0, 5.0]
    assert columns.medians([1, 2, 3, 9], 2, constant=True) == [1.5, 6.0]


def test_split_and_row() -> None:
    # GIVEN 3 functions of 2 runs WHEN cut THEN one row per function
    flat = [1, 2, 3, 4, 5, 6]
    assert columns.split(flat, 2) == [[1, 2], [3, 4], [5, 6]]
    table = columns.Columns({"functions": [["f", 1, "a"]] * 3, "wall": [1.0, 1.0],
                             "own_ns": flat, "cumulative_ns": flat, "calls": flat})  # fmt: skip
    assert table.row(table.own, 1) == [3, 4]
    # AND the shares divide by each run's total (9 and 12)
    assert table.shares() == pytest.approx([1 / 9, 2 / 12, 3 / 9, 4 / 12, 5 / 9, 6 / 12])


def _v1(doc: dict[str, Any]) -> dict[str, Any]:
    """The same result in version 1's layout (rows per run, seconds)."""
    data = dict(doc["data"])
    n = len(data.pop("wall"))
    walls = doc["data"]["wall"]
    own, cum, calls = data.pop("own_ns"), data.pop("cumulative_ns"), data.pop("calls")
    data["runs"] = [
        {"wall": walls[r], "own": [x / 1e9 for x in own[r::n]],
         "cumulative": [x / 1e9 for x in cum[r::n]], "calls": [float(c) for c in calls[r::n]]}
        for r in range(n)
    ]  # fmt: skip
    return store.parse_result(json.dumps({**doc, "version": 1, "data": data}))


def test_version_1_and_2_of_the_same_runs_compare_alike() -> None:
    # GIVEN the same runs saved in both layouts
    a, b = profile_doc(12, seed=5), profile_doc(12, slow={4: 1.2}, seed=6)
    a1, b1 = _v1(a), _v1(b)
    # WHEN compared in each layout, and one of each
    results = [compare_results(x, y) for x, y in ((a, b), (a1, b1), (a1, b))]
    # THEN the same verdicts, changes and figures
    first = results[0]
    assert [c.function for c in first.changes if c.significant and c.figure == "own"] == ["f_004"]
    for other in results[1:]:
        for c, d in zip(first.changes, other.changes, strict=True):
            assert (c.function, c.significant, c.tested) == (d.function, d.significant, d.tested)
            assert d.change == pytest.approx(c.change)
            assert d.a == pytest.approx(c.a) and d.b == pytest.approx(c.b)


def test_a_saved_version_1_file_compares_with_a_new_one(tmp_path: Path) -> None:
    # GIVEN the version 1 baseline kept in tests/data, and a new result of the same program
    base = store.load_result(V1 / "profile_v1_a.json")
    new = store.load_result(store.save_result(tmp_path / "new.json", profile_doc(6, 8, seed=1)))
    assert (base["version"], new["version"]) == (1, 3)
    # WHEN compared THEN every function is matched, none only on one side
    cmp = compare_results(base, new)
    assert cmp.judged and not [c for c in cmp.changes if c.note.startswith("only")]
    assert len([c for c in cmp.changes if c.file is not None and c.figure == "own"]) == 8

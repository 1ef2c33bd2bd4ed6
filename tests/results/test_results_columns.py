"""The per-function columns of a profile in bulk (_results.tables): medians over the runs,
totals, and the same figures from a version 1 file (rows per run, upgraded as it loads)
as from the current table (integer columns)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from results_data import profile_doc

from onnxrt_backend_dev.monitoring._results import store, tables
from onnxrt_backend_dev.monitoring._results.compare import compare_results

V1 = Path(__file__).parent.parent / "data" / "results"


@pytest.mark.parametrize("runs", [1, 2, 3, 4, 7])
def test_medians_are_the_medians_of_each_function(runs: int) -> None:
    # GIVEN 5 functions of `runs` figures each
    rows = {i: [float((7 * i + 3 * r) % 11 + i) for r in range(runs)] for i in range(5)}
    # WHEN the medians are taken in bulk
    got = tables.medians(rows)
    # THEN each is statistics.median of its row
    assert got == pytest.approx({i: statistics.median(row) for i, row in rows.items()})


def test_constant_and_mixed_rows_give_their_medians() -> None:
    # GIVEN rows the same in every run, then one row that varies
    same = {0: [3.0, 3.0, 3.0], 1: [5.0, 5.0, 5.0]}
    mixed = {0: [3.0, 3.0, 3.0], 1: [5.0, 9.0, 5.0]}
    # WHEN their medians are taken THEN the right medians either way
    assert tables.medians(same) == tables.medians(mixed) == {0: 3.0, 1: 5.0}
    assert tables.medians({0: [1.0, 2.0], 1: [3.0, 9.0]}) == {0: 1.5, 1: 6.0}


def test_split_and_totals() -> None:
    # GIVEN 3 functions of 2 runs WHEN cut THEN one row per function
    flat = [1, 2, 3, 4, 5, 6]
    assert tables.split(flat, 2) == [[1, 2], [3, 4], [5, 6]]
    functions = [["f.py", 1, "a"], ["f.py", 2, "b"], ["f.py", 3, "c"]]
    data = {"profiler": "cprofile", "unit": "ns", "functions": functions, "wall": [1.0, 1.0]}
    side = tables.side_table(
        "profile", {**data, "function_figures": {"own": flat, "inclusive": flat}}
    )
    assert list(side.own.values())[1] == pytest.approx([3e-9, 4e-9])
    # AND each run's total adds up its own times (9 and 12 ns)
    assert side.totals() == pytest.approx([9e-9, 12e-9])


def _v1(doc: dict[str, Any]) -> dict[str, Any]:
    """The same result in version 1's layout (rows per run, seconds)."""
    data = dict(doc["data"])
    n = len(data.pop("wall"))
    walls = doc["data"]["wall"]
    for key in ("unit", "stacks", "stack_figures"):
        del data[key]
    figures = data.pop("function_figures")
    own, cum, calls = figures["own"], figures["inclusive"], figures["calls"]
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
    written = json.loads((V1 / "profile_v1_a.json").read_text(encoding="utf-8"))["version"]
    assert (written, base["version"], new["version"]) == (1, 4, 4)
    # WHEN compared THEN every function is matched, none only on one side
    cmp = compare_results(base, new)
    assert cmp.judged and not [c for c in cmp.changes if c.note.startswith("only")]
    assert len([c for c in cmp.changes if c.file is not None and c.figure == "own"]) == 8

"""A statement's count: what can be sent to the counting interpreter, the dictionary it
gives, and one real count (``time --counter``) where valgrind is installed."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._count.statement import (
    Statement,
    _figure,
    _spec,
    _unseen,
    count_measure,
)
from onnxrt_backend_dev.monitoring._errors import BadType, BadValue
from onnxrt_backend_dev.monitoring.benchmark import measure_time

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
# valgrind runs a program 20 to 100 times slower: minutes at load 8
pytestmark = pytest.mark.timeout(600)


def test_one_step_of_the_allocator_does_not_move_the_figure() -> None:
    # GIVEN counts of k, 2k, 3k, 4k executions where, once, 1,000 executions cost
    # 1.9 M instructions less (an arena given back): a step in one difference
    counts = [100_000_000, 140_697_000, 178_515_000, 218_312_000]
    counted = _figure(counts, 100)
    # THEN the figure is the median difference, its noise the distance to the closer
    assert counted.per_execution == 397_970 and counted.noise == 9_000
    assert _figure([5, 5, 5, 5], 10).per_execution == 0  # nothing counted
    assert _figure([10, 9, 11, 10], 10).per_execution == 0  # less than nothing: 0


def test_the_dictionary_has_measure_times_keys() -> None:
    counted = _figure([1_000_000, 1_373_000, 1_746_500, 2_119_000], 1000)
    res = counted.to_dict(context_size=64)
    reference = {"average", "context_size", "deviation", "max_exec", "min_exec", "number",
                 "repeat", "ttime", "warmup_time"}  # fmt: skip
    assert reference <= set(res) and res["counter"] == "instructions"
    assert res["min_exec"] <= res["average"] <= res["max_exec"]
    assert (res["min_exec"], res["average"], res["max_exec"]) == (372.5, 373.0, 373.5)
    assert res["number"] == 1000 and res["runs"] == 3000 and res["noise"] == 0.5


def test_what_cannot_be_sent_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "spec")
    with pytest.raises(BadType, match=r"cannot send .*<lambda>"):
        _spec(Statement(lambda: None), path)
    with pytest.raises(BadType, match=r"context\['f'\]"):
        _spec(Statement("f.read()", context={"f": open(__file__)}), path)  # noqa: SIM115
    _spec(Statement("x + 1", context={"x": 1}), path)
    assert Path(path).stat().st_size > 0


def test_what_the_counter_cannot_see_is_said() -> None:
    assert _unseen(0.0, 0.01) == ""
    assert "gives the CPU up 1 times" in _unseen(1.0, 0.0)
    assert "40% of its CPU time is the kernel's" in _unseen(0.0, 0.4)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("max_time", 1.0, "max_time does not apply with counter='instructions', got 1.0"),
        ("clock", math.cos, "clock does not apply"),
        ("calibrate", True, "calibrate does not apply"),
        ("div_by_number", False, "div_by_number must be True"),
    ],
)
def test_measure_time_refuses_what_times(option: str, value: object, message: str) -> None:
    with pytest.raises(BadValue, match=message):
        measure_time("1 + 1", counter="instructions", **{option: value})  # type: ignore[arg-type]
    with pytest.raises(BadValue, match="counter must be one of instructions"):
        count_measure("1", None, "cycles")


@needs_valgrind
def test_time_counts_a_statement_and_compares_two(tmp_path: Path) -> None:
    # WHEN two statements are counted (a fixed loop length: no plain run first)
    save = str(tmp_path / "a.json")
    code, out, err = run_cli(
        "time", "--counter", "instructions", "-n", "2000", "-s", "x = list(range(50))",
        "sum(x)", "--compare", "sum(x) + sum(x)", "--save", save,
    )  # fmt: skip
    # THEN each has its instructions per run, and the second is about twice the first
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("sum(x): ") and "instr per run" in lines[0]
    assert "more work" in lines[2]
    series = json.loads(Path(save).read_text())["data"]["series"]
    per = [s["times"][0] / s["sizes"][0] for s in series]
    assert series[0]["counter"] == "instructions" and 1.7 < per[1] / per[0] < 2.3
    # AND compare reads the two as counted, deterministic figures
    b = str(tmp_path / "b.json")
    doc = json.loads(Path(save).read_text())
    doc["data"]["series"] = [dict(series[1], name=series[0]["name"])]
    Path(b).write_text(json.dumps(doc))
    doc["data"]["series"] = [series[0]]
    Path(save).write_text(json.dumps(doc))
    code, out, _ = run_cli("compare", save, b)
    assert code == 1 and "counted by valgrind" in out and "instr" in out


def test_the_sampled_attribution_is_labelled() -> None:
    from onnxrt_backend_dev.monitoring._cli.profile_counted import counted_json, counted_text
    from onnxrt_backend_dev.monitoring._count.valgrind import Counted

    counted = Counted(1_000_000, None, 1.0, ["Python 3.11 has no perf trampolines"])
    shares = {("prog.py", 3, "spin"): 0.75, ("prog.py", 9, "main"): 0.25}
    text = counted_text(counted, "prog.py", sampled=shares)
    assert "an estimate, not counted" in text and "750 k instr" in text and "75.0%" in text
    assert counted_json(counted, shares)["sampled"][0] == {
        "file": "prog.py", "line": 3, "name": "spin", "share": 0.75,
    }  # fmt: skip

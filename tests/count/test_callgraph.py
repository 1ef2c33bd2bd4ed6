"""callgrind's output and a perf map turned into Python functions' counts: synthetic
files, so that the arithmetic is checked without valgrind."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._count.callgraph import (
    INTERPRETER,
    PerfMap,
    allocations_of,
    first_lines,
    parse_callgrind,
    read_callgrind,
    read_total,
    stats_of,
)
from onnxrt_backend_dev.monitoring._errors import CounterError

# GIVEN a run of main -> f (twice) -> g, where f also calls an unnamed stub (its cost is
# f's own), and the root (the loader's entry) calls <module>.
CALLGRIND = """\
# callgrind format
version: 1
events: Ir
summary: 10000
totals: 10000

fn=0x0000000000001000
0 500
cfn=0x0000000000000100
calls=1 0
0 9000

fn=0x0000000000000100
0 100
cfn=0x0000000000000200
calls=1 0
0 8900

fn=0x0000000000000200
0 200
cfn=0x0000000000000300
calls=2 0
0 8700

fn=0x0000000000000300
0 4000
cfn=0x0000000000000400
calls=4 0
0 3000
cfn=0x0000000000009999
calls=7 0
0 1700

fn=0x0000000000009999
0 1700

fn=0x0000000000000400
0 3000
junk line that does not parse
"""
PERF = """\
100 b py::<module>:/work/prog.py
200 b py::main:/work/prog.py
300 b py::f:/work/prog.py
400 b py::A.g:/work/prog.py
not a line
"""


@pytest.fixture
def run(tmp_path: Path) -> tuple[str, str]:
    out, perf = tmp_path / "count.1", tmp_path / "perf-1.map"
    out.write_text(CALLGRIND, encoding="utf-8")
    perf.write_text(PERF, encoding="utf-8")
    return str(out), str(perf)


def _by_name(stats: dict) -> dict:
    return {key[2]: value for key, value in stats.items()}


def test_own_inclusive_and_callers(run: tuple[str, str]) -> None:
    # WHEN the run is read
    stats, _, notes = read_callgrind(run[0], run[1], 10000)
    assert stats is not None
    # THEN each function has its own count (f with its stub's), inclusive, calls, callers
    assert notes == []
    rows = _by_name(stats)
    assert rows["f"][2] == 4000 + 1700 and rows["f"][3] == 8700 and rows["f"][1] == 2
    assert rows["A.g"][2:4] == [3000, 3000] and rows["A.g"][1] == 4
    assert rows["main"][2:4] == [200, 8900]
    assert rows["<module>"][3] == 9000
    callers = rows["A.g"][4]
    assert (
        list(callers) == [("/work/prog.py", 0, "f")]
        and callers[("/work/prog.py", 0, "f")][3] == 3000
    )
    # AND what no function ran is the interpreter's, so that the functions add up
    assert stats[INTERPRETER][2] == 10000 - (100 + 200 + 5700 + 3000)
    assert sum(v[2] for v in stats.values()) == 10000


def test_a_stripped_interpreter_counts_the_whole_run(tmp_path: Path, run: tuple[str, str]) -> None:
    # GIVEN every call between Python functions going through unnamed C code (the
    # interpreter's own functions, nameless in a stripped build)
    text = """fn=0x0000000000001000
0 10
cfn=0x0000000000000100
calls=1 0
0 990
fn=0x0000000000000100
0 90
cfn=0x0000000000008000
calls=1 0
0 900
fn=0x0000000000008000
0 100
cfn=0x0000000000000200
calls=1 0
0 800
fn=0x0000000000000200
0 800
"""
    out = tmp_path / "stripped"
    out.write_text(text, encoding="utf-8")
    # WHEN read, THEN the functions are not given, and the note says why
    stats, _, notes = read_callgrind(str(out), run[1], 1000)
    assert stats is None and "stripped" in notes[0]


def test_a_missing_perf_map_is_said(run: tuple[str, str], tmp_path: Path) -> None:
    stats, _, notes = read_callgrind(run[0], str(tmp_path / "nope.map"), 10000)
    assert stats is None and "perf map" in notes[0]


def test_recursion_is_counted_once(tmp_path: Path) -> None:
    # GIVEN f calling itself (callgrind's 'N contexts)
    text = """fn=0x0000000000001000
0 1
cfn=0x0000000000000300
calls=1 0
0 1000
fn=0x0000000000000300
0 400
cfn=0x0000000000000300'2
calls=1 0
0 600
fn=0x0000000000000300'2
0 600
"""
    out = tmp_path / "rec"
    out.write_text(text, encoding="utf-8")
    perf = tmp_path / "map"
    perf.write_text("300 b py::f:/x.py\n", encoding="utf-8")
    stats = stats_of(parse_callgrind(str(out)), PerfMap(str(perf)), 1001)
    f = _by_name(stats)["f"]
    assert f[2] == 1000 and f[3] == 1000 and f[1] == 1


def test_read_total_and_bad_files(tmp_path: Path) -> None:
    good = tmp_path / "cachegrind.out"
    good.write_text("desc: I1 cache:\ncmd: python x.py\nevents: Ir\nsummary: 123456\n")
    assert read_total(str(good)) == 123456
    bad = tmp_path / "bad"
    bad.write_text("summary: lots\n")
    with pytest.raises(CounterError, match="holds no count"):
        read_total(str(bad))


def test_first_lines_of_nested_functions(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "class A:\n    def g(self):\n        return (i for i in ())\n"
        "def f():\n    def h():\n        pass\n    return lambda: 1\n",
        encoding="utf-8",
    )
    lines = first_lines(str(src))
    assert lines["A"] == 1 and lines["A.g"] == 2 and lines["A.g.<locals>.<genexpr>"] == 3
    assert lines["f"] == 4 and lines["f.<locals>.h"] == 5 and lines["f.<locals>.<lambda>"] == 7
    assert first_lines(str(tmp_path / "missing.py")) == {}


def test_allocation_calls_per_function(tmp_path: Path) -> None:
    # GIVEN f calling malloc 3 times, and an unnamed stub twice; g the stub 3 times; the
    # stub calling PyObject_Malloc 10 times
    text = """fn=0x0000000000000300
0 1
cfn=malloc
calls=3 0
0 30
cfn=0x0000000000009000
calls=2 0
0 20
fn=0x0000000000000400
0 1
cfn=0x0000000000009000
calls=3 0
0 30
fn=0x0000000000009000
0 5
cfn=PyObject_Malloc
calls=10 0
0 45
"""
    out = tmp_path / "alloc"
    out.write_text(text, encoding="utf-8")
    perf = tmp_path / "map"
    perf.write_text("300 b py::f:/x.py\n400 b py::g:/x.py\n", encoding="utf-8")
    graph = parse_callgrind(str(out))
    py = {n: (("/x.py", 0, f[1]) if (f := PerfMap(str(perf)).function(n)) else None)
          for n in ("0x0000000000000300", "0x0000000000000400", "0x0000000000009000", "malloc",
                    "PyObject_Malloc")}  # fmt: skip
    # THEN f has its 3 and 2/5 of the stub's 10; g 3/5 of them
    assert allocations_of(graph, py) == {("/x.py", 0, "f"): 7, ("/x.py", 0, "g"): 6}

"""Runs of programs in child processes: parsing the command, profiled runs interleaved, a
failing run, a run killed at its timeout, a command that is not Python."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._errors import BadValue
from onnxrt_backend_dev.monitoring._results import runner, store
from onnxrt_backend_dev.monitoring._results.compare import compare_results

SCRIPT = """
import sys
def work(n):
    return sum(i * i for i in range(n))
def main():
    work(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
main()
"""


@pytest.mark.parametrize(
    ("command", "how", "target", "args"),
    [
        ("python old.py -x", "path", "old.py", ("-x",)),
        ("old.py 1 2", "path", "old.py", ("1", "2")),
        ("python3 -m json.tool f", "module", "json.tool", ("f",)),
    ],
)
def test_parse_python_programs(command: str, how: str, target: str, args: tuple[str, ...]) -> None:
    # GIVEN a Python command line WHEN parsed THEN profiled, with its target and arguments
    program = runner.parse_program(command)
    assert program.profiled and (program.how, program.target, program.args) == (how, target, args)


def test_parse_other_commands() -> None:
    # GIVEN a command that is not Python THEN timed only; an empty one is refused
    assert not runner.parse_program("sleep 0.1").profiled
    with pytest.raises(BadValue, match="must be a command line"):
        runner.parse_program("")
    with pytest.raises(BadValue, match="nothing to run"):
        runner.parse_program("python")


@pytest.mark.parametrize(("profiler", "size"), [("sampled", "600000"), ("cprofile", "2000")])
def test_profiled_runs_interleaved(tmp_path: Path, profiler: str, size: str) -> None:
    # GIVEN a script and its copy
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(SCRIPT, encoding="utf-8")
    b.write_text(SCRIPT, encoding="utf-8")
    order: list[int] = []
    # WHEN run 3 times each, sampled (the default) or under cProfile
    cmp, doc_a, doc_b = runner.compare_programs(
        [sys.executable, str(a), size], f"{b} {size}", repeat=3, timeout=60,
        on_run=lambda r, i: order.append(i), profiler=profiler,
    )  # fmt: skip
    # THEN interleaved A B A B A B, each a report with a profile and a memory peak
    assert order == [0, 1, 0, 1, 0, 1]
    assert doc_a["kind"] == doc_b["kind"] == "report"
    assert doc_a["data"]["profile"]["profiler"] == profiler
    assert len(doc_a["data"]["profile"]["wall"]) == 3 and doc_a["data"]["memory"]["channels"]["cpu"]
    names = {f[2] for f in doc_a["data"]["profile"]["functions"]}
    assert {"work", "main"} <= names
    # AND the scripts' functions match across the two files
    work = next(c for c in cmp.changes if c.function == "work" and c.figure == "inclusive")
    assert work.note != "only in B" and work.file == str(b)
    # AND the results can be saved and compared again
    store.save_result(tmp_path / "a.json", doc_a)
    again = compare_results(store.load_result(tmp_path / "a.json"), doc_b)
    assert len(again.changes) == len(cmp.changes)


def test_failing_run_is_reported(tmp_path: Path) -> None:
    # GIVEN a script that raises
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('boom')\n", encoding="utf-8")
    # WHEN run THEN the failure names the command, its exit code and the error's line
    with pytest.raises(runner.RunFailed, match=r"bad.py exited with 1: ValueError: boom"):
        runner.run_interleaved([runner.parse_program(str(bad))], repeat=1, timeout=60)


def test_run_past_its_timeout_is_killed(tmp_path: Path) -> None:
    # GIVEN a program that would sleep 60 s and leave its pid
    pid_file = tmp_path / "pid"
    script = tmp_path / "sleepy.py"
    script.write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
        encoding="utf-8",
    )
    start = time.monotonic()
    # WHEN run with a timeout of 1 s THEN it fails quickly and its process is gone
    with pytest.raises(runner.RunFailed, match="ran past its timeout of 1 s"):
        runner.run_interleaved([runner.parse_program(str(script))], repeat=1, timeout=1.0)
    assert time.monotonic() - start < 30
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_command_that_is_not_python_is_timed() -> None:
    # GIVEN a shell command WHEN compared with itself THEN a timing of wall times
    cmp, doc_a, _ = runner.compare_programs("true", "true", repeat=2, timeout=30)
    assert doc_a["kind"] == "timing" and cmp.kind == "timing"
    assert len(doc_a["data"]["series"][0]["times"]) == 2


def test_max_time_stops_after_two_rounds() -> None:
    # GIVEN a budget already spent after the first rounds WHEN run THEN 2 rounds, not 50
    runs = runner.run_interleaved(
        [runner.parse_program("true")], repeat=50, timeout=30, max_time=1e-9
    )
    assert len(runs.runs[0]) == 2


def test_mixed_programs_are_refused() -> None:
    with pytest.raises(BadValue, match="both be Python programs"):
        runner.compare_programs("python a.py", "true", repeat=1)

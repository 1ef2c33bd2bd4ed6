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


# A line whose time is spent inside one C call (sorting a large list), then a tiny call:
# a sampler inside the program credits the C call's time to the next call's first line.
C_CALL = """
import sys
def tiny(x):
    return x
def main():
    data = list(range(300000, 0, -1))
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20):
        out = sorted(data, key=abs)
        tiny(out)
main()
"""


def _sampled(path: Path, collector: str, *args: str) -> runner.Program:
    return runner.Program(
        (str(path), *args), sys.executable, "path", str(path), args, "sampled", 0.002,
        collector=collector,
    )  # fmt: skip


def _observer_here() -> bool:
    from onnxrt_backend_dev.monitoring._observe.session import availability

    return availability().ok


@pytest.mark.skipif(not _observer_here(), reason="the observer cannot run on this machine")
def test_sampled_runs_are_read_from_outside_by_default(tmp_path: Path) -> None:
    # GIVEN a program spending its time inside a C call
    script = tmp_path / "ccall.py"
    script.write_text(C_CALL, encoding="utf-8")
    program = _sampled(script, "auto", "10")
    assert runner.observed(program)
    # WHEN run twice under the default collector
    runs = runner.run_interleaved([program], repeat=2, timeout=120).runs[0]
    # THEN the observer sampled them (its timer), with the memory it read, and the time
    # of the sort is main's own (the line inside the C call), not tiny's
    data = runner.profile_result_data(runs, program)
    assert data["sampler"] == "observer" and len(data["wall"]) == 2
    assert all(r.peak is not None and r.begin is not None and r.peak >= r.begin for r in runs)
    names = [f[2] for f in data["functions"]]
    own: dict[str, float] = {}
    for sid, stack in enumerate(data["stacks"]):
        leaf = names[stack[-1]]
        own[leaf] = own.get(leaf, 0.0) + sum(data["stack_figures"]["cpu"][sid * 2 : sid * 2 + 2])
    total = sum(own.values())
    assert total > 0 and own.get("tiny", 0.0) < 0.05 * total, own


@pytest.mark.skipif(not _observer_here(), reason="the observer cannot run on this machine")
def test_an_observed_run_past_its_timeout_is_ended_and_a_failure_named(tmp_path: Path) -> None:
    # GIVEN a program that would sleep 60 s, and one that raises
    pid_file, sleepy, bad = tmp_path / "pid", tmp_path / "sleepy.py", tmp_path / "bad.py"
    sleepy.write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
        encoding="utf-8",
    )
    bad.write_text("raise ValueError('boom')\n", encoding="utf-8")
    # WHEN run under the observer THEN the sleeper is ended at 1 s, the failure named
    with pytest.raises(runner.RunFailed, match="ran past its timeout of 1 s"):
        runner.run_interleaved([_sampled(sleepy, "observer")], repeat=1, timeout=1.0)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    with pytest.raises(runner.RunFailed, match=r"bad.py exited with 1: ValueError: boom"):
        runner.run_interleaved([_sampled(bad, "observer")], repeat=1, timeout=60)


def test_the_in_process_sampler_on_request_and_the_observer_refused_where_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._observe import session

    script = tmp_path / "a.py"
    script.write_text(SCRIPT, encoding="utf-8")
    # GIVEN the in-process sampler asked for WHEN run THEN the child's sampler took it
    program = _sampled(script, "in-process", "600000")
    assert not runner.observed(program)
    runs = runner.run_interleaved([program], repeat=1, timeout=60).runs[0]
    assert runner.profile_result_data(runs, program)["sampler"] != "observer"
    # GIVEN a machine where the observer cannot run: auto falls back, observer refuses
    monkeypatch.setattr(session, "availability", lambda: session.Availability(False, "no way"))
    assert not runner.observed(_sampled(script, "auto"))
    with pytest.raises(BadValue, match="collector 'observer' cannot run here: no way"):
        runner.observed(_sampled(script, "observer"))


def test_an_observed_run_keeps_the_program_not_the_interpreter_start() -> None:
    from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile, ThreadProfile
    from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame as F

    site = (F("<module>", "<frozen site>", 1, 1),)
    ours = (F("<module>", "prog.py", 1, 3), F("work", "prog.py", 5, 6))
    module = (F("_run_module_as_main", "<frozen runpy>", 173, 198), F("<module>", "m.py", 1, 1))
    worker = (F("Thread._bootstrap", "threading.py", 990, 995),)
    main = ThreadProfile(1, "MainThread", True, {0: [1.0, 1.0, 1.0], 1: [2.0, 2.0, 2.0]},
                         [(0.0, 1.0, 0), (1.0, 2.0, 1)])  # fmt: skip
    other = ThreadProfile(2, "worker", False, {2: [1.0, 1.0, 1.0]})
    # GIVEN the observed stacks of a script: the interpreter's start, the program, a thread
    profile = SampledProfile([site, ours, worker], [main, other], 0.001, "observer", 3, 3, 3)
    runner._program_only(profile, "prog.py")
    # THEN the main thread keeps the program's stacks, the other threads everything
    assert list(main.totals) == [1] and [e[2] for e in main.timeline] == [1]
    assert list(other.totals) == [2]
    # AND under -m, the stacks under runpy's _run_module_as_main are the program's
    main2 = ThreadProfile(1, "MainThread", True, {0: [1.0] * 3, 1: [1.0] * 3})
    runner._program_only(SampledProfile([site, module], [main2], 0.001, "o", 1, 1, 1), None)
    assert list(main2.totals) == [1]
    # AND a program the rule does not fit keeps everything
    main3 = ThreadProfile(1, "MainThread", True, {0: [1.0] * 3})
    runner._program_only(SampledProfile([site], [main3], 0.001, "o", 1, 1, 1), "prog.py")
    assert list(main3.totals) == [0]

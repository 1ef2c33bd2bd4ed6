"""Tests for the ``time`` subcommand (_cli/cmd_time.py): in process, and once as a subprocess."""

from __future__ import annotations

import argparse
import errno
import functools
import io
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import Terminal, run_cli

from onnxrt_backend_dev.monitoring._cli import cmd_time as _cli_time
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli
from onnxrt_backend_dev.monitoring._timing import loop as _timing

LINE = re.compile(
    r"^cos\(0\.5\): [\d.]+ (ns|µs|ms) ± [\d.]+ \1 \(median [\d.]+ \1, min [\d.]+ \1; "
    r"3 x 20 runs\)$"
)


_main = functools.partial(run_cli, "time")


def test_command_is_registered() -> None:
    assert _cli_time.COMMAND.name == "time"
    _, commands = _cli.build_parser()
    assert "time" in commands


def test_prints_one_line_with_average_spread_median_min_and_counts() -> None:
    code, out, err = _main("cos(0.5)", "-s", "from math import cos", "-r", "3", "-n", "20", "-q")
    assert code == 0 and err == ""
    assert LINE.match(out.rstrip("\n")), out


def test_format_line_reads_like_the_issue() -> None:
    res = {
        "average": 24.1e-9,
        "deviation": 0.6e-9,
        "median": 24.0e-9,
        "min_exec": 23.7e-9,
        "repeat": 10,
        "number": 50,
    }
    assert _cli_time.format_line("cos(0.5)", res) == (
        "cos(0.5): 24.1 ns ± 0.6 ns (median 24.0 ns, min 23.7 ns; 10 x 50 runs)"
    )


def test_format_line_says_when_the_statistics_read_a_sample() -> None:
    # GIVEN a run of 100,000 batches whose statistics kept 50,000 of them
    res = {"average": 2e-9, "deviation": 0.0, "median": 2e-9, "min_exec": 2e-9}
    res |= {"repeat": 50_000, "batches": 100_000, "number": 1, "calibrated": False}
    # THEN the line counts every batch and says the statistics read a sample
    assert _cli_time.format_line("pass", res).endswith(
        "; 100,000 x 1 runs, statistics on 50,000 evenly spaced)"
    )


def test_setup_is_repeatable() -> None:
    code, out, _ = _main(
        "f(x)", "-s", "from math import cos as f", "-s", "x = 0.5", "-r", "2", "-n", "20"
    )
    assert code == 0 and out.startswith("f(x): ")


def test_json_output_is_the_result_dictionary() -> None:
    code, out, _ = _main("pass", "--json", "-r", "2", "-n", "3", "-w", "0")
    assert code == 0
    doc = json.loads(out)
    assert doc["stmt"] == "pass"
    assert (doc["repeat"], doc["number"], doc["warmup_time"]) == (2, 3, 0.0)
    assert {"average", "deviation", "min_exec", "max_exec", "ttime", "median"} <= set(doc)


def test_max_time_reports_runs_batches_and_measured_total() -> None:
    code, out, _ = _main("pass", "--max-time", "0.05", "-q")
    assert code == 0
    # ms, or s if a loaded machine stopped the last batch for a second
    assert re.search(r"; [\d,]+ runs in [\d,]+ batches, [\d.]+ m?s measured\)$", out.strip()), out


def test_live_status_on_a_terminal_for_long_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # The threshold and LiveStatus's wait before its first draw (1 s) are lowered, so
    # that the test stays short and a busy machine still sees a draw within the run.
    from onnxrt_backend_dev.monitoring import _progress

    class QuickStatus(_progress.LiveStatus):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "delay": 0.05})

    monkeypatch.setattr(_progress, "LiveStatus", QuickStatus)
    monkeypatch.setattr(_cli_time, "_LIVE_STATUS_MIN_SECONDS", 0.1)
    terminal = Terminal()
    code, out, err = _main("pass", "--max-time", "0.6", err=terminal)
    assert code == 0 and out.startswith("pass: ")
    assert re.search(r"\rtiming pass: [\d.]+ s, [\d,]+ runs", err), repr(err)
    # The status line is erased before returning (a warning about a busy machine may follow).
    assert err.split("warning:")[0].endswith("\r"), repr(err)


def test_quiet_shows_no_live_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cli_time, "_LIVE_STATUS_MIN_SECONDS", 0.01)
    code, _, err = _main("pass", "--max-time", "0.05", "-q", err=Terminal())
    assert code == 0 and err == ""


def test_compare_prints_both_lines_and_the_verdict() -> None:
    # GIVEN a statement that cannot take less than 2 ms against `pass`, 6 batches of 2:
    # the verdict holds at any load (the sleep's batch lasts >= 4 ms; `pass` would need
    # to be stopped longer than that in most of its sub-microsecond batches)
    code, out, _ = _main(
        "time.sleep(0.002)", "--compare", "pass", "-s", "import time", "-r", "6", "-n", "2", "-q"
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert lines[0].startswith("time.sleep(0.002): ") and lines[1].startswith("pass: ")
    assert re.match(r"^pass is [\d.,e+]+x faster than time\.sleep\(0\.002\) ", lines[2]), lines


def test_compare_json() -> None:
    code, out, _ = _main("pass", "--compare", "pass", "--json", "-r", "3", "-n", "5")
    doc = json.loads(out)
    assert code == 0 and [s["stmt"] for s in doc["stmts"]] == ["pass", "pass"]
    assert doc["comparison"]["method"] == "mann-whitney"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["x ="], 1, "error: SyntaxError in the statement: invalid syntax (line 1)\n"),
        (["pass", "--compare", "x ="], 1, "error: SyntaxError in --compare STMT2: invalid syntax"),
        (["pass", "-s", "x ="], 1, "error: SyntaxError in --setup: invalid syntax (line 1)\n"),
        (["~" * 100_000 + "1"], 1, "error: the statement is too deeply nested to compile\n"),
        (
            ["pass", "--compare", "(" * 300 + ")" * 300],
            1,
            "error: SyntaxError in --compare STMT2: too many nested parentheses (line 1)\n",
        ),
        (["pass", "-s", "x = 1", "-s", "if x:"], 1, "error: SyntaxError in --setup: expected"),
        (["pass", "-r", "0"], 2, "error: -r/--repeat must be >= 1, got 0\n"),
        (["pass", "-n", "0"], 2, "error: -n/--number must be >= 1, got 0\n"),
        (["pass", "-w", "-1"], 2, "error: -w/--warmup must be >= 0, got -1\n"),
        (["pass", "-t", "0"], 2, "error: -t/--max-time must be > 0 and finite, got 0.0\n"),
        (["pass", "-t", "inf"], 2, "error: -t/--max-time must be > 0 and finite, got inf\n"),
        (["pass", "-t", "nan"], 2, "error: -t/--max-time must be > 0 and finite, got nan\n"),
        (
            ["pass", "--compare", "pass", "-r", "1"],
            2,
            "error: -r/--repeat must be >= 2 with --compare (a test needs two batches a side), "
            "got 1\n",
        ),
        (["pass", "-p", "0"], 2, "error: -p/--processes must be >= 1, got 0\n"),
        (
            ["pass", "-p", "2", "--compare", "pass"],
            2,
            "error: -p/--processes cannot be combined with --compare (which interleaves",
        ),
        (["pass", "-p", "2", "--timeout", "0"], 2, "error: --timeout must be > 0 and finite"),
        (["pass", "-p", "2", "--timeout", "nan"], 2, "error: --timeout must be > 0 and finite"),
        (
            ["1/0", "-p", "2"],
            1,
            "error: time --processes: time 1/0 exited with 1: error: the statement raised "
            "ZeroDivisionError: division by zero\n",
        ),
        (["1/0"], 1, "error: the statement raised ZeroDivisionError: division by zero\n"),
        (["cos(1)"], 1, "error: the statement raised NameError: name 'cos' is not defined\n"),
        (
            ["len(5)"],
            1,
            "error: the statement raised TypeError: object of type 'int' has no len()\n",
        ),
        (
            ["int('x')"],
            1,
            "error: the statement raised ValueError: invalid literal for int() with base 10: 'x'\n",
        ),
        (
            ["pass", "--compare", "len(5)", "-n", "2"],
            1,
            "error: the --compare statement raised TypeError: object of type 'int' has no len()\n",
        ),
        (
            ["len(5)", "--compare", "pass", "-n", "2"],
            1,
            "error: the first statement raised TypeError: object of type 'int' has no len()\n",
        ),
        (
            ["pass", "--compare", "1/0"],
            1,
            "error: the --compare statement raised ZeroDivisionError: division by zero\n",
        ),
        (
            ["pass", "--compare", "1", "-s", "import no_such_module_xyz"],
            1,
            "error: the first statement or its --setup raised ModuleNotFoundError",
        ),
        (
            ["1", "-s", "import no_such_module_xyz"],
            1,
            "error: the statement or its --setup raised ModuleNotFoundError",
        ),
        (["pass", "--setup-once", "x ="], 1, "error: SyntaxError in --setup-once: invalid syntax"),
        (
            ["1", "--setup-once", "import no_such_module_xyz"],
            1,
            "error: --setup-once raised ModuleNotFoundError: No module named "
            "'no_such_module_xyz'\n",
        ),
        (
            ["pass", "--compare", "1", "--setup-once", "1/0"],
            1,
            "error: --setup-once raised ZeroDivisionError: division by zero\n",
        ),
        (
            ["pass", "--setup-once", "raise SystemExit(4)"],
            1,
            "error: --setup-once raised SystemExit: 4\n",
        ),
        (["y", "--setup-once", "x = 1"], 1, "error: the statement raised NameError"),
    ],
)
def test_user_mistakes_are_one_line_naming_the_culprit(
    argv: list[str], code: int, message: str
) -> None:
    got, out, err = _main(*argv, "-n", "3") if "-n" not in argv else _main(*argv)
    assert (got, out) == (code, "")
    assert err.startswith(message) and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pass", "--clock", "gpu"], "argument --clock: invalid choice: 'gpu'"),
        (["pass", "--clock"], "argument --clock: expected one argument"),
        (["pass", "--setup-once"], "argument --setup-once: expected one argument"),
    ],
)
def test_bad_option_values_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(*argv)
    text = err + capsys.readouterr().err  # argparse writes to sys.stderr
    assert (code, out) == (2, "")
    assert message in text and "Traceback" not in text


class _Full(io.StringIO):
    """An output stream on a full disk."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_output_is_not_blamed_on_the_statement() -> None:
    err = io.StringIO()
    code = _cli.main(["time", "pass", "-n", "3", "-r", "2"], out=_Full(), err=err)
    assert code != 0
    assert "statement" not in err.getvalue() and "No space left" in err.getvalue()


# --- calibration, as timeit -------------------------------------------------------------------


@pytest.fixture
def quick_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    # Batches of at least 5 ms instead of timeit's 0.2 s: same logic, a shorter test.
    monkeypatch.setattr(_timing, "AUTORANGE_SECONDS", 0.005)


@pytest.mark.usefixtures("quick_calibration")
def test_without_n_the_batch_is_calibrated_and_the_counts_are_said() -> None:
    code, out, _ = _main("sum(range(50))", "-q")
    assert code == 0
    assert re.search(r"; 5 x [\d,]+ runs, calibrated\)$", out.strip()), out
    code, out, _ = _main("sum(range(50))", "-q", "--json")
    doc = json.loads(out)
    assert (doc["repeat"], doc["batches"], doc["calibrated"]) == (5, 5, True)
    # The size itself depends on the machine (tests/timing checks it on a fake clock).
    assert doc["number"] >= 1 and doc["runs"] == 5 * doc["number"]


@pytest.mark.usefixtures("quick_calibration")
def test_r_alone_calibrates_the_number_and_keeps_the_repeat() -> None:
    code, out, _ = _main("pass", "-r", "3", "--json")
    doc = json.loads(out)
    assert code == 0 and (doc["repeat"], doc["calibrated"]) == (3, True)


@pytest.mark.parametrize(
    ("argv", "repeat", "number"), [(["-n", "7"], 5, 7), (["-n", "7", "-r", "3"], 3, 7)]
)
def test_n_and_r_are_obeyed_exactly(argv: list[str], repeat: int, number: int) -> None:
    code, out, _ = _main("pass", *argv, "--json")
    doc = json.loads(out)
    assert code == 0
    assert (doc["repeat"], doc["number"], doc["runs"], doc["batches"]) == (
        repeat,
        number,
        repeat * number,
        repeat,
    )
    assert doc["calibrated"] is False and doc["max_time"] is None
    code, out, _ = _main("pass", *argv)
    assert out.rstrip().endswith(f"; {repeat} x {number} runs)"), out


def test_compare_calibrates_when_n_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_timing, "COMPARE_AUTORANGE_SECONDS", 0.002)
    code, out, _ = _main("pass", "--compare", "pass", "--json", "-r", "4")
    doc = json.loads(out)
    assert code == 0 and doc["comparison"]["n_baseline"] == 4
    assert doc["stmts"][0]["calibrated"] is True and doc["stmts"][0]["number"] > 1


def test_compare_with_a_budget() -> None:
    code, out, _ = _main("pass", "--compare", "pass", "-t", "0.1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["comparison"]["n_baseline"] >= 5
    assert doc["stmts"][0]["max_time"] == 0.1 and doc["stmts"][0]["ttime"] > 0


# --- a signal stops it and what was measured is printed ----------------------------------------


def _signal_at(execution: int, how: str) -> list[str]:
    """A statement that sends itself a signal (or raises KeyboardInterrupt) at its
    ``execution``-th run, counting the warmup, with batches of 10."""
    act = "raise KeyboardInterrupt" if how == "SIGINT" else f"os.kill(os.getpid(), signal.{how})"
    return [
        f"_n.append(1)\nif len(_n) == {execution}: {act}",
        "-s",
        "import os, signal\n_n = globals().setdefault('_n', [])",
        "-n",
        "10",
        "-r",
        "100",
        "-q",
    ]


@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_a_signal_prints_what_was_measured_so_far(how: str, code: int) -> None:
    if not hasattr(signal, how):
        pytest.skip(f"no {how} here")
    got, out, err = _main(*_signal_at(35, how))
    assert got == code
    # Warmup 1, then batches of 10: the 35th execution is in the 4th batch, 3 were timed.
    assert re.search(r"; 3 x 10 runs\)$", out.strip()), out
    assert err == f"interrupted by {how}: what was measured so far, 30 runs in 3 batches\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is given back


def test_a_signal_before_any_batch_says_so() -> None:
    got, out, err = _main(*_signal_at(3, "SIGTERM"))
    assert (got, out) == (143, "")
    assert err == "interrupted by SIGTERM before a batch was timed\n"


def test_a_signal_json_marks_the_result_as_interrupted() -> None:
    got, out, _ = _main(*_signal_at(35, "SIGTERM"), "--json")
    doc = json.loads(out)
    assert got == 143 and (doc["interrupted"], doc["repeat"], doc["runs"]) == ("SIGTERM", 3, 30)


def test_a_signal_during_compare_compares_what_was_timed() -> None:
    argv = _signal_at(75, "SIGTERM")
    got, out, err = _main(argv[0], "--compare", "_n.append(1)", *argv[1:])
    lines = out.splitlines()
    assert got == 143 and len(lines) == 3, (out, err)
    # Only the first statement counts (each has its own globals): 1 + 7 x 10 < 75.
    assert lines[0].rstrip().endswith("; 7 x 10 runs)"), lines
    assert err == "interrupted by SIGTERM: what was measured so far\n"


def test_sigterm_to_a_real_process(tmp_path: Path) -> None:
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onnxrt_backend_dev.monitoring",
            "time",
            "time.sleep(0.001)",
            "-s",
            # The setup runs before the warmup and each batch: three marks mean a batch
            # was timed (a fixed sleep would race with a loaded machine).
            f"import time\nwith open({str(started)!r}, 'a') as f: f.write('.')",
            "-n",
            "10",
            "-r",
            "100000",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if started.exists() and len(started.read_text()) >= 3:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert re.match(r"^time\.sleep\(0\.001\): .*; [\d,]+ x 10 runs\)$", out.strip()), out
    assert err.startswith("interrupted by SIGTERM: what was measured so far, "), err


def test_sigterm_stops_a_huge_repeat_at_once_in_bounded_memory(tmp_path: Path) -> None:
    # GIVEN `time pass -n 1 -r 1000000000` (a billion batches) running in a real process
    started = tmp_path / "started"
    argv = ["time", "pass", "-n", "1", "-r", "1000000000", "-w", "0", "--json"]
    setup = (
        f"import os\nif not os.path.exists({str(started)!r}): open({str(started)!r}, 'w').close()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", *argv, "-s", setup],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(1.0)  # many batches, more than the statistics keep on most machines
        # WHEN SIGTERM comes
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # THEN it stops with the measure printed and exit 143; the statistics kept a bounded
    # sample of the batches while every batch is counted
    assert proc.returncode == 143, err
    doc = json.loads(out)
    assert doc["interrupted"] == "SIGTERM" and doc["batches"] >= 1
    assert doc["repeat"] <= _timing.MAX_KEPT_BATCHES + 1 and doc["repeat"] <= doc["batches"]
    assert doc["runs"] == doc["batches"]
    assert err.startswith("interrupted by SIGTERM: what was measured so far, "), err


def test_real_subprocess() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnxrt_backend_dev.monitoring",
            "time",
            "cos(0.5)",
            "-s",
            "from math import cos",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.match(
        r"^cos\(0\.5\): [\d.]+ (ns|µs) ± [\d.]+ \1 \(median [\d.]+ \1, min [\d.]+ \1; "
        r"5 x [\d,]+ runs, calibrated\)$",
        proc.stdout.strip(),
    ), proc.stdout


@pytest.mark.parametrize("stmt", ["import sys; sys.exit(0)", "raise SystemExit(3)"])
def test_a_statement_leaving_with_system_exit_is_an_error_not_a_silent_exit(stmt: str) -> None:
    # GIVEN a statement calling sys.exit WHEN timed THEN one line says so, exit 1 (the
    # command never exits with the statement's code without a word)
    code, out, err = _main(stmt, "-n", "1", "-r", "2", "-q")
    assert (code, out) == (1, "")
    assert err.startswith("error: the statement raised SystemExit") and err.count("\n") == 1


def test_compare_json_gives_each_statement_its_own_ttime_and_total_time() -> None:
    code, out, _ = _main(
        "sum(range(300))", "--compare", "sum(range(30))", "-r", "4", "-n", "50", "--json", "-q"
    )
    assert code == 0
    stmts = json.loads(out)["stmts"]
    for side in stmts:
        assert side["ttime"] == pytest.approx(side["average"] * side["repeat"])
        total = side["average"] * side["repeat"] * side["number"]
        assert side["total_time"] == pytest.approx(total)
    assert stmts[0]["total_time"] != stmts[1]["total_time"]


def test_processes_time_in_fresh_interpreters_and_save_each_ones_batches(tmp_path: Path) -> None:
    # GIVEN 3 processes of 4 batches of 50 runs, saved
    path = tmp_path / "p.json"
    code, out, err = _main("sum(range(50))", "-p", "3", "-r", "4", "-n", "50", "--save", str(path))
    # THEN one line over the 12 batches says it, and the file keeps each process's batches
    assert code == 0 and "12 x 50 runs in 3 processes)" in out, (out, err)
    series = json.loads(path.read_text(encoding="utf-8"))["data"]["series"][0]
    assert series["processes"] == [4, 4, 4] and series["sizes"] == [50] * 12
    assert series["summary"]["batches"] == 12 and series["summary"]["runs"] == 600


def test_the_child_command_keeps_every_option(tmp_path: Path) -> None:
    # GIVEN the options of time WHEN a process's command line is built
    from onnxrt_backend_dev.monitoring._cli.time_processes import child_argv

    parser = argparse.ArgumentParser()
    _cli_time.COMMAND.prepare_parser(parser)
    args = parser.parse_args(
        ["-s", "-1", "-s", "y = 2", "-r", "3", "-t", "0.5", "-w", "0", "-p", "2", "--", "-x"]
    )
    argv = child_argv(args, "out.json")
    # THEN the setups (one starting with "-"), budget and warmup go through; the
    # statement after "--"; no --processes (a process times once)
    assert argv[1:4] == ["-m", "onnxrt_backend_dev.monitoring", "time"] and argv[-2:] == [
        "--",
        "-x",
    ]
    assert "--setup=-1" in argv and "--setup=y = 2" in argv and "-p" not in argv
    assert argv[argv.index("-t") + 1] == "0.5" and argv[argv.index("-w") + 1] == "0"
    assert argv[argv.index("--save") + 1] == "out.json"


def test_a_signal_between_processes_keeps_those_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN processes whose second is stopped by Ctrl-C (the runner killed it)
    from onnxrt_backend_dev.monitoring._results import payloads, runner, store

    def fake_runs(programs: Any, repeat: int, timeout: float, **kw: Any) -> None:
        out = programs[0].real[programs[0].real.index("--save") + 1]
        doc = store.make_result(
            "timing",
            payloads.timing_data([payloads.timing_series("pass", [0.1, 0.2], [10, 10], {})]),
            ["time"],
            {},
        )
        store.save_result(out, doc, force=True)
        kw["on_run"](0, 0)
        # Ctrl-C as the supervisor receives it: its handler records it (the running
        # process's group is ended) and the runs stop
        kw["supervisor"].signals.handler(signal.SIGINT, None)

    monkeypatch.setattr(runner, "run_interleaved", fake_runs)
    path = tmp_path / "p.json"
    code, out, err = _main("pass", "-p", "5", "--save", str(path))
    # THEN exit 130, the first process printed and saved, the stop said
    assert code == 130 and "2 x 10 runs" in out
    assert "interrupted by SIGINT: what was measured so far, 1 of 5 processes" in err
    saved = json.loads(path.read_text(encoding="utf-8"))["data"]["series"][0]
    assert saved["times"] == [0.1, 0.2] and saved["processes"] == [2]


# --- the user's folder, a setup run once, the clock --------------------------------------------


def _module(folder: Path, name: str = "mymodel") -> Path:
    """A module of the user's folder that counts how often it is loaded, in a file."""
    (folder / f"{name}.py").write_text(
        "import os\n"
        "def load():\n"
        "    with open(os.path.join(os.path.dirname(__file__), 'loads'), 'a') as f:\n"
        "        f.write('x')\n"
        "    return [1, 2, 3]\n",
        encoding="utf-8",
    )
    return folder / "loads"


def test_the_console_script_imports_from_the_current_folder(tmp_path: Path) -> None:
    # GIVEN ./mymodel.py and the console script (its sys.path[0] is its own bin folder)
    _module(tmp_path)
    script = Path(sys.executable).parent / "onnxrt-monitoring"
    if not script.exists():
        pytest.skip("the console script is not installed beside this interpreter")
    # WHEN -s imports it, as python -m timeit allows
    proc = subprocess.run(
        [str(script), "time", "-s", "import mymodel", "-n", "5", "-r", "2", "mymodel.load"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    # THEN it is found
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("mymodel.load: ")


def test_the_current_folder_is_on_the_path_only_while_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, "mymodel_inprocess")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    try:
        code, _out, err = _main(
            "m.load", "-s", "import mymodel_inprocess as m", "-n", "2", "-r", "2"
        )
    finally:
        sys.modules.pop("mymodel_inprocess", None)
    assert code == 0, err
    assert sys.path == before  # the command ran inside this process: nothing left behind


@pytest.mark.parametrize(
    ("argv", "loads"),
    [
        (["-r", "3", "-n", "2"], 1),
        (["-t", "0.05"], 1),
        (["--compare", "len(m)", "-r", "3", "-n", "2"], 1),
        (["-p", "2", "-r", "2", "-n", "2"], 2),  # once per process
    ],
)
def test_setup_once_runs_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], loads: int
) -> None:
    # GIVEN a model loaded by --setup-once, and -s run before each batch as timeit does
    counter = _module(tmp_path, "mymodel_once")
    monkeypatch.chdir(tmp_path)
    try:
        code, _out, err = _main(
            "sum(m)", "--setup-once", "import mymodel_once; m = mymodel_once.load()",
            "-s", "k = len(m)", *argv, "-q",
        )  # fmt: skip
    finally:
        sys.modules.pop("mymodel_once", None)
    # THEN the model was loaded once per process, and its names are the statement's
    assert code == 0, err
    assert counter.read_text() == "x" * loads


def test_setup_once_names_are_seen_by_the_setup_and_the_statement() -> None:
    code, out, err = _main(
        "x + y", "--setup-once", "x = 40", "-s", "y = x + 2", "-n", "3", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["runs"] == 15


def test_clock_cpu_times_cpu_time_and_says_so() -> None:
    # GIVEN a statement that sleeps 10 ms: wall time, no CPU time
    sleep = ["import time; time.sleep(0.01)", "-n", "2", "-r", "2"]
    code, out, err = _main(*sleep, "--clock", "cpu", "--json")
    cpu = json.loads(out)
    code_wall, out_wall, _ = _main(*sleep, "--json")
    wall = json.loads(out_wall)
    assert (code, code_wall) == (0, 0), err
    # THEN the CPU clock sees a small fraction of it, the wall clock all of it (a sleep is
    # never shorter than asked, and takes microseconds of CPU at any load)
    assert cpu["clock"] == "cpu" and wall["clock"] == "wall"
    assert wall["min_exec"] >= 0.01 and cpu["average"] < 0.005
    code, out, _ = _main(*sleep, "--clock", "cpu")
    assert code == 0 and out.rstrip().endswith("; 2 x 2 runs, CPU time)"), out


def test_clock_cpu_is_saved_with_the_timing(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    code, _, err = _main("pass", "-n", "3", "-r", "2", "--clock", "cpu", "--save", str(path))
    assert code == 0, err
    series = json.loads(path.read_text(encoding="utf-8"))["data"]["series"][0]
    assert series["summary"]["clock"] == "cpu"


def test_the_child_command_keeps_setup_once_and_the_clock() -> None:
    from onnxrt_backend_dev.monitoring._cli.time_processes import child_argv

    parser = argparse.ArgumentParser()
    _cli_time.COMMAND.prepare_parser(parser)
    args = parser.parse_args(["--setup-once", "-import x", "--clock", "cpu", "-p", "2", "pass"])
    argv = child_argv(args, "out.json")
    assert "--setup-once=-import x" in argv
    assert argv[argv.index("--clock") + 1] == "cpu"

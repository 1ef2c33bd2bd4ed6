"""Tests for the ``time`` subcommand (_cli/cmd_time.py): in process, and once as a subprocess."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest
from helpers import Terminal, run_cli

from onnxrt_backend_dev.monitoring._cli import cmd_time as _cli_time
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli

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


def test_setup_is_repeatable() -> None:
    code, out, _ = _main("f(x)", "-s", "from math import cos as f", "-s", "x = 0.5", "-r", "2")
    assert code == 0 and out.startswith("f(x): ")


def test_json_output_is_the_result_dictionary() -> None:
    code, out, _ = _main("pass", "--json", "-r", "2", "-n", "3", "-w", "0")
    assert code == 0
    doc = json.loads(out)
    assert doc["stmt"] == "pass"
    assert (doc["repeat"], doc["number"], doc["warmup_time"]) == (2, 3, 0.0)
    assert {"average", "deviation", "min_exec", "max_exec", "ttime", "median"} <= set(doc)


def test_max_time_reports_measured_total() -> None:
    code, out, _ = _main("pass", "--max-time", "0.05", "-q")
    assert code == 0
    assert re.search(r"; \d+ x \d+ runs, [\d.]+ ms measured\)$", out.strip()), out


def test_live_status_on_a_terminal_for_long_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # The threshold is lowered so that the test stays short; LiveStatus waits 1 s to draw.
    monkeypatch.setattr(_cli_time, "_LIVE_STATUS_MIN_SECONDS", 0.1)
    terminal = Terminal()
    code, out, err = _main("pass", "--max-time", "1.4", err=terminal)
    assert code == 0 and out.startswith("pass: ")
    assert re.search(r"\rtiming pass: [\d.]+ s, [\d,]+ runs", err), repr(err)
    assert err.endswith("\r")  # the status line is erased before returning


def test_quiet_shows_no_live_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cli_time, "_LIVE_STATUS_MIN_SECONDS", 0.01)
    code, _, err = _main("pass", "--max-time", "0.05", "-q", err=Terminal())
    assert code == 0 and err == ""


def test_compare_prints_both_lines_and_the_verdict() -> None:
    code, out, _ = _main(
        "sum(range(200))", "--compare", "sum(range(20))", "-r", "6", "-n", "20", "-q"
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert lines[0].startswith("sum(range(200)): ") and lines[1].startswith("sum(range(20)): ")
    assert re.match(r"^sum\(range\(20\)\) is [\d.]+x faster than sum\(range\(200\)\) ", lines[2])


def test_compare_json() -> None:
    code, out, _ = _main("pass", "--compare", "pass", "--json", "-r", "3", "-n", "5")
    doc = json.loads(out)
    assert code == 0 and [s["stmt"] for s in doc["stmts"]] == ["pass", "pass"]
    assert doc["comparison"]["method"] == "mann-whitney"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["x ="], "error: SyntaxError: "),
        (["pass", "-r", "0"], "error: ValueError: repeat must be >= 1, got 0\n"),
        (["pass", "-n", "0"], "error: ValueError: number must be >= 1, got 0\n"),
        (["pass", "-w", "-1"], "error: ValueError: warmup must be >= 0, got -1\n"),
        (["pass", "-t", "0"], "error: ValueError: max_time must be > 0 and finite, got 0.0\n"),
        (["1/0"], "error: the statement raised ZeroDivisionError: division by zero\n"),
        (["cos(1)"], "error: the statement raised NameError: name 'cos' is not defined\n"),
        (["pass", "--compare", "pass", "-t", "1"], "error: --compare times a fixed"),
        (
            ["1", "-s", "import no_such_module_xyz"],
            "error: the statement or its --setup raised ModuleNotFoundError",
        ),
    ],
)
def test_user_mistakes_are_one_line_and_exit_code_1(argv: list[str], message: str) -> None:
    code, out, err = _main(*argv)
    assert code == 1 and out == ""
    assert err.startswith(message) and err.count("\n") == 1, err


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
        r"10 x 50 runs\)$",
        proc.stdout.strip(),
    ), proc.stdout

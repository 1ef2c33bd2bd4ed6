"""``profile --repeat N``: runs in child processes, merged, every run saved."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._results.store import load_result

_PROGRAM = """
import sys

def work(n):
    return sum(i * i for i in range(n))

work(20000)
if sys.argv[1:] == ["hang"]:
    import time
    time.sleep(120)
if sys.argv[1:] == ["fail"]:
    raise SystemExit(3)
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(_PROGRAM, encoding="utf-8")
    return path


def test_repeat_runs_the_program_n_times_and_saves_every_run(program: Path, tmp_path: Path) -> None:
    # GIVEN a program WHEN profiled 3 times with --save
    saved = tmp_path / "runs.json"
    code, out, err = run_cli("profile", "--repeat", "3", "--save", str(saved), str(program))
    # THEN the merged tree counts 3 calls of the work, and the result holds 3 runs
    assert code == 0, err
    assert "3 runs (cpu clock)" in err
    rows = [line.split() for line in out.splitlines() if "prog.py:4" in line]
    assert rows and rows[0][2] == "3"  # share, time, calls, ...
    doc = load_result(saved, kind="profile")
    assert len(doc["data"]["wall"]) == 3 and doc["data"]["timer"] == "cpu"
    names = [f[2] for f in doc["data"]["functions"]]
    assert "work" in names
    # AND two such results compare, judged (2 runs a side at least)
    code, out, _ = run_cli("compare", str(saved), str(saved), "--format", "json")
    assert code == 0 and '"judged": true' in out


def test_a_run_past_its_timeout_is_killed_and_named(program: Path) -> None:
    start = time.monotonic()
    code, _, err = run_cli("profile", "--repeat", "2", "--timeout", "2", str(program), "hang")
    assert code == 1
    assert "ran past its timeout of 2 s" in err
    assert time.monotonic() - start < 60  # the sleeping child did not run its 120 s


def test_a_failing_run_stops_with_its_exit_code(program: Path) -> None:
    code, _, err = run_cli("profile", "--repeat", "2", str(program), "fail")
    assert code == 1 and "exited with 3" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--repeat", "0"], "--repeat must be >= 1, got 0"),
        (["--repeat", "x"], "argument --repeat: invalid int value: 'x'"),
        (["--repeat", "1.5"], "argument --repeat: invalid int value: '1.5'"),
        (["--max-time", "5"], "--max-time needs --repeat N"),
        (["--timeout", "5"], "--timeout needs --repeat N"),
        (["--clock", "wall"], "--clock needs --repeat N"),
        (["--repeat", "2", "--max-time", "nan"], "--max-time must be a number > 0, got nan"),
        (["--repeat", "2", "--max-time", "0"], "--max-time must be a number > 0, got 0.0"),
        (["--repeat", "2", "--timeout", "-1"], "--timeout must be a number > 0, got -1.0"),
        (["--repeat", "2", "--timeout", "inf"], "--timeout must be a number > 0, got inf"),
        (["--repeat", "2", "--clock", "gpu"], "argument --clock: invalid choice: 'gpu'"),
        (["--repeat", "2", "missing.py"], "cannot run 'missing.py': no such file"),
    ],
)
def test_bad_repeat_inputs(
    argv: list[str], message: str, program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = [] if argv[-1].endswith(".py") else [str(program)]
    code, _, err = run_cli("profile", *argv, *target)
    text = err + capsys.readouterr().err  # argparse writes to sys.stderr
    assert code == 2
    assert message in text
    assert "Traceback" not in text


def test_max_time_stops_starting_runs_after_two(program: Path) -> None:
    # GIVEN 50 runs asked within a budget shorter than one run THEN two are made
    code, _, err = run_cli("profile", "--repeat", "50", "--max-time", "0.001", str(program))
    assert code == 0, err
    assert "2 runs (cpu clock)" in err


def test_module_programs_run_repeated_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "workmod.py").write_text(_PROGRAM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("profile", "--repeat", "2", "--clock", "wall", "-m", "workmod")
    assert code == 0, err
    assert "2 runs (wall clock)" in err and "workmod.py" in out

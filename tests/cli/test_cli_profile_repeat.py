"""``profile --repeat N`` and ``profile --save``: runs in child processes (sampled by
default, cProfile with ``--cprofile``), merged, every run saved."""

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

work(int(sys.argv[2]) if sys.argv[2:] else 300000)
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
    # GIVEN a program WHEN profiled 3 times with --save (sampled, the default)
    saved = tmp_path / "runs.json"
    code, out, err = run_cli("profile", "--repeat", "3", "--save", str(saved), str(program))
    # THEN the runs added up are shown, and the result holds 3 runs of stacks
    assert code == 0, err
    assert "3 runs (cpu clock)" in err and "3 runs added up" in out and "work" in out
    doc = load_result(saved, kind="profile")
    data = doc["data"]
    assert data["profiler"] == "sampled" and len(data["wall"]) == 3 and data["stacks"]
    assert "work" in [f[2] for f in data["functions"]]
    # AND two such results compare, judged (2 runs a side at least): passed, or undecided
    # when 3 runs a side cannot rule out 5 %
    code, out, _ = run_cli("compare", str(saved), str(saved), "--format", "json")
    assert code in (0, 3) and '"judged": true' in out


def test_repeat_under_cprofile_counts_the_calls(program: Path, tmp_path: Path) -> None:
    saved = tmp_path / "runs.json"
    code, out, err = run_cli(
        "profile", "--cprofile", "--repeat", "3", "--save", str(saved), str(program), "", "2000"
    )
    assert code == 0, err
    # THEN the tree starts at the program (runpy's exec, which importlib's share, is not
    # its caller: a caller shared with the imports would cut the program in two rows)
    tree = [line for line in out.splitlines() if "─" in line and "prog.py:" in line]
    assert "<module>" in tree[0] and "import prog" not in out and "run_path" not in out
    # AND the reference view counts the calls of the 3 runs
    code, out, err = run_cli(
        "profile", "--cprofile", "--view", "reference", "--repeat", "3", str(program), "", "2000"
    )
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["work"]]
    assert rows and rows[0][2] == "3"  # name, --, calls, primitive calls, ...
    data = load_result(saved, kind="profile")["data"]
    assert data["profiler"] == "cprofile" and data["timer"] == "cpu" and data["stacks"]


def test_save_alone_runs_once_in_a_child_showing_the_program_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('hello from the program')\nsum(range(3_000_000))\n")
    saved = tmp_path / "one.json"
    code, out, err = run_cli("profile", "--save", str(saved), str(script))
    assert code == 0, err
    assert "hello.py" in out  # the profile, rendered here
    assert "hello from the program" in capfd.readouterr().out  # the child's own stdout
    data = load_result(saved, kind="profile")["data"]
    assert data["profiler"] == "sampled" and len(data["wall"]) == 1


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
        (["--cprofile", "--clock", "wall"], "--clock needs --repeat N"),
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
    assert "2 runs (wall clock)" in err and "workmod.py" in out, out

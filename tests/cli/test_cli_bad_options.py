"""Options given together that one would ignore, out of range, or misspelt: each refused
before any work, in one line naming them, exit 2, no traceback (the battery's standard);
and the notebook and library faces over the same values."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

PROGRAM = "open('ran', 'w').close()\n"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        # an interval no sampler can keep (one would wait forever), or meaningless
        (["run", "--interval", "1e9", "{p}"], "--interval must be <= 1"),
        (["run", "--interval", "nan", "{p}"], "--interval"),
        (["profile", "--interval", "60", "{p}"], "--interval must be <= 1"),
        (["run", "--pid", "1", "--duration", "1", "--interval", "1e9"], "--interval"),
        (["profile", "--cprofile", "--interval", "0", "{p}"], "--interval is the sampler's"),
        # options one would silently ignore together
        (["profile", "--duration", "1", "{p}"], "--duration is for --pid"),
        (["run", "--duration", "1", "{p}"], "--duration is for --pid"),
        (["profile", "--pid", "1", "--repeat", "3"], "--repeat runs the program anew"),
        (["run", "--pid", "1", "--repeat", "3"], "--repeat runs the program anew"),
        (["profile", "--cprofile", "--pid", "1"], "--pid is sampled from outside"),
        (["profile", "--cprofile", "--collector", "observer", "{p}"], "--collector observer"),
        (["profile", "--timer", "real", "--collector", "observer", "{p}"], "--timer is the in"),
        (["profile", "--sort", "time", "--timer", "real", "{p}"], "--timer is the sampler's"),
        # values no type can hold, command lines that cannot be read
        (["run", "--alloc-sample", "1e400", "{p}"], "size must be finite, got '1e400'"),
        (["compare", "--a", "python3 'x", "--b", "python3 p.py"], '--a "python3 \'x": No closing'),
        (["compare", "--a", "", "--b", "python3 p.py"], "--a '': the program must be"),
        (["compare", "--a", "no_such_cmd", "--b", "no_such_cmd"], "--a 'no_such_cmd': command not"),
        (["compare", "--a", "python3 nope.py", "--b", "python3 p.py"], "script not found"),
        # a typo: the command's usage, with the option meant
        (["profile", "--intervl", "0.01", "{p}"], "did you mean --interval?"),
        (["run", "--alloc-sampel", "1", "{p}"], "did you mean --alloc-sample?"),
    ],
)
def test_a_bad_combination_or_value_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], needle: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text(PROGRAM)
    argv = [a.replace("{p}", "p.py") for a in argv]
    code, _, err = run_cli(*argv)
    err += capsys.readouterr().err  # argparse writes to sys.stderr
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1
    assert not (tmp_path / "ran").exists()  # refused before the program ran


def test_monitor_refuses_an_interval_it_cannot_keep() -> None:
    from onnxrt_backend_dev.monitoring.report import monitor

    with (
        pytest.raises(ValueError, match=r"interval must be <= 1, got 1000000000"),
        monitor(interval=1e9),
    ):
        pass


@pytest.mark.parametrize(("value", "tracked"), [("off", False), ("No", False), ("1", True)])
def test_the_switch_of_allocation_tracking_reads_its_words(value: str, tracked: bool) -> None:
    from onnxrt_backend_dev.monitoring._alloc.shim import check_switch

    assert check_switch({"ONNXRT_MONITORING_ALLOC": value}) is tracked


@pytest.mark.parametrize("command", [["run"], ["spy", "--where"]])
def test_a_switch_of_allocation_tracking_meaning_neither_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ONNXRT_MONITORING_ALLOC", "abc")
    (tmp_path / "p.py").write_text(PROGRAM)
    code, _, err = run_cli(*command, "p.py")
    assert code == 2 and "ONNXRT_MONITORING_ALLOC must be 0 or 1 (off or on), got 'abc'" in err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        # what Python would refuse, refused before anything starts (no profile of its start)
        (["profile", "nonexist.py"], 2, "script not found: 'nonexist.py'"),
        (["profile", "-m", "no_such_module_xyz"], 2, "no module named 'no_such_module_xyz'"),
        (["profile", "syntax.py"], 1, "SyntaxError: invalid syntax (syntax.py, line 1)"),
        (["profile", "latin.py"], 1, "SyntaxError: (unicode error) 'utf-8' codec"),
        (["run", "latin.py"], 1, "SyntaxError: (unicode error) 'utf-8' codec"),
        # a file here taken for a command: the shell's 127, and what to give instead
        (["run", "notes.txt"], 127, "a file 'notes.txt' is here: ./notes.txt runs it"),
        (["spy", "--", "notes.txt"], 127, "a Python script runs with python notes.txt"),
    ],
)
def test_a_program_that_cannot_run_is_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], code: int, needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "syntax.py").write_text("def f(:\n")
    (tmp_path / "latin.py").write_bytes(b'x = "\xe9t\xe9"\n')
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    found, out, err = run_cli(*argv)
    assert found == code, err
    assert needle in err and "Traceback" not in err and not out
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", [None, 5, "x"])
def test_a_renderer_given_no_report_names_it(value: object) -> None:
    from onnxrt_backend_dev.monitoring.report import to_html, to_json, to_text

    for render in (to_text, to_html, to_json):
        with pytest.raises(TypeError, match=r"report must be a Report .*got "):
            render(value)  # type: ignore[arg-type]


def test_a_limit_no_size_can_hold_is_one_line() -> None:
    from onnxrt_backend_dev.monitoring._pytest_plugin import MemoryBlock

    with pytest.raises(ValueError, match=r"size must be finite, got '1e400 MB'"):
        MemoryBlock("b", limit="1e400 MB")


@pytest.mark.parametrize(
    "command",
    [["run"], ["run", "--collector", "in-process"], ["spy", "--cuda", "--", "python3", "p.py"]],
)
def test_a_probe_that_cannot_be_read_here_is_a_usage_error_before_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    from onnxrt_backend_dev.monitoring._memory import registry

    def no_driver(*args: object) -> None:
        raise registry.ProbeError("cuda=True but NVML is unusable: no driver (test)")

    monkeypatch.setattr(registry, "open_probe", no_driver)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text(PROGRAM)
    argv = [*command, "--probe", "nvml", "p.py"] if command[0] == "run" else command
    code, _, err = run_cli(*argv)
    assert code == 2 and "--probe nvml: cannot be read here: cuda=True but NVML" in err
    assert not (tmp_path / "ran").exists()


def test_profile_ranks_by_cpu_without_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text("sum(range(100_000))\n")
    code, out, err = run_cli("profile", "--clock", "cpu", "p.py")
    assert code == 0, err
    assert "(rows ranked by CPU time)" in out

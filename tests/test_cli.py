"""Tests for the command-line dispatcher (`_cli.main`)."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import pytest

from onnxrt_backend_dev import __version__
from onnxrt_backend_dev.monitoring._cli import common as _common
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli
from onnxrt_backend_dev.monitoring._optional import MissingDependencyError, require


class _FakeCommand:
    name = "fake"
    help = "a command for tests"

    def __init__(self, exc: BaseException | None = None, code: int = 0) -> None:
        self.exc = exc
        self.code = code

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("word")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        if self.exc is not None:
            raise self.exc
        out.write(f"got {args.word}\n")
        return self.code


def _run(
    monkeypatch: pytest.MonkeyPatch, command: _FakeCommand, *argv: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(_cli, "_load_commands", lambda: [command])
    out, err = io.StringIO(), io.StringIO()
    code = _cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_command_runs_and_its_exit_code_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _run(monkeypatch, _FakeCommand(code=3), "fake", "hello")
    assert (code, out, err) == (3, "got hello\n", "")


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (
            _common.CommandError("no such file: x.prof", exit_code=4),
            4,
            "error: no such file: x.prof\n",
        ),
        (
            ValueError("repeat must be >= 1, got 0"),
            1,
            "error: ValueError: repeat must be >= 1, got 0\n",
        ),
        (MissingDependencyError("pandas is required"), 1, "error: pandas is required\n"),
        (KeyboardInterrupt(), 130, "interrupted\n"),
    ],
)
def test_user_mistakes_become_one_line_and_an_exit_code(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, code: int, message: str
) -> None:
    got_code, out, err = _run(monkeypatch, _FakeCommand(exc=exc), "fake", "x")
    assert (got_code, out, err) == (code, "", message)


def test_bugs_are_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ZeroDivisionError):
        _run(monkeypatch, _FakeCommand(exc=ZeroDivisionError("bug")), "fake", "x")


def test_no_command_prints_help(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = _run(monkeypatch, _FakeCommand())
    assert code == _common.EXIT_USAGE
    assert "fake" in out and "a command for tests" in out


def test_every_registered_command_is_loaded() -> None:
    _, commands = _cli.build_parser()
    assert list(commands) == list(_cli._COMMAND_MODULES)
    for name, command in commands.items():
        assert command.name == name and command.help


def test_require_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"onnxrt-backend-dev\[plot\]"):
        require("surely_not_a_module_xyz", "plot", "pictures")


def test_version_and_help_in_a_real_subprocess() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert __version__ in res.stdout


def test_check_output_path(tmp_path: Path) -> None:
    _common.check_output_path(str(tmp_path / "new.json"), "--json")  # a new file: fine
    for bad in (tmp_path, tmp_path / "no-such-folder" / "x.json"):
        with pytest.raises(_common.CommandError, match="cannot write --json"):
            _common.check_output_path(str(bad), "--json")


def test_check_output_path_refuses_what_may_not_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a folder, and a file in it, that may not be written (faked: tests run as root)
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    denied = {str(tmp_path), str(existing)}
    monkeypatch.setattr(_common.os, "access", lambda p, mode: str(p) not in denied)
    # THEN both a new file there and the existing file are refused, naming the option
    for target in (tmp_path / "new.json", existing):
        with pytest.raises(_common.CommandError, match=r"cannot write -o .*permission denied"):
            _common.check_output_path(str(target), "-o")


def test_a_reader_going_away_stops_the_command_quietly(tmp_path: Path) -> None:
    # GIVEN a program printing far more than a pipe holds, profiled, its output read by a
    # consumer that stops after a few bytes (``... | head``)
    loud = tmp_path / "loud.py"
    loud.write_text("for i in range(200_000):\n    print(i)\n")
    cmd = [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "profile", str(loud)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.read(10)
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    # THEN it stops with code 1 and says nothing: no traceback, no "Exception ignored"
    assert proc.returncode == 1
    assert err.decode() == ""


def test_argparse_exits_become_return_codes(capsys: pytest.CaptureFixture[str]) -> None:
    # main(argv) -> int: --help and usage errors return their code, never raise SystemExit
    assert _cli.main(["--help"]) == 0
    assert _cli.main(["time"]) == 2
    assert _cli.main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err

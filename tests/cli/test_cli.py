"""Tests for the command-line dispatcher (`_cli.main`)."""

from __future__ import annotations

import argparse
import errno
import functools
import io
import os
import re
import subprocess
import sys
import tempfile
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
    monkeypatch.setattr(_cli, "_COMMAND_MODULES", {command.name: ("unused", command.help)})
    monkeypatch.setattr(_cli, "_load_command", lambda name: command)
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
        # The help shown by the top-level --help (kept in the table) is the command's own.
        assert command.name == name and command.help == _cli._COMMAND_MODULES[name][1]


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["profile", "x.py"], "profile"),
        (["run", "--help"], "run"),
        (["--help"], None),
        (["--version"], None),
        ([], None),
        (["nosuch"], None),
        (["x.py", "profile"], None),
    ],
)
def test_the_command_run_is_the_first_argument(argv: list[str], chosen: str | None) -> None:
    assert _cli.chosen_command(argv) == chosen


def test_a_run_imports_only_the_command_it_runs() -> None:
    # In a child, so that no module is already imported by other tests.
    code = (
        "import sys\n"
        "from onnxrt_backend_dev.monitoring._cli import dispatch\n"
        "assert dispatch.main(['time', '--help']) == 0\n"
        "mods = sorted(m for m in sys.modules if '._cli.cmd_' in m)\n"
        "print(mods, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr.strip() == "['onnxrt_backend_dev.monitoring._cli.cmd_time']"


def test_the_top_level_help_lists_every_command_without_importing_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _cli.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name, (_, help_text) in _cli._COMMAND_MODULES.items():
        assert name in out and " ".join(help_text.split()) in out


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


def test_check_outputs(tmp_path: Path) -> None:
    _common.check_outputs({"--json": str(tmp_path / "new.json")})  # a new file: fine
    for bad in (tmp_path, tmp_path / "no-such-folder" / "x.json"):
        with pytest.raises(_common.CommandError, match="cannot write --json"):
            _common.check_outputs({"--json": str(bad)})


def test_check_outputs_refuses_what_may_not_be_written(
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
            _common.check_outputs({"-o": str(target)})


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
    # THEN it stops with code 1; the only traceback is the program's own, the one a plain
    # `python loud.py | head` prints (the program writes to the pipe itself), none of
    # the tool's, no "Exception ignored"
    assert proc.returncode == 1
    text = err.decode()
    assert "onnxrt_backend_dev" not in text and "Exception ignored" not in text
    assert text == "" or text.rstrip().endswith("BrokenPipeError: [Errno 32] Broken pipe")


def test_argparse_exits_become_return_codes(capsys: pytest.CaptureFixture[str]) -> None:
    # main(argv) -> int: --help and usage errors return their code, never raise SystemExit
    assert _cli.main(["--help"]) == 0
    assert _cli.main(["time"]) == 2
    assert _cli.main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_check_outputs_sees_the_same_file_under_other_names(tmp_path: Path) -> None:
    # GIVEN an input, a hard link and a symbolic link to it
    source = tmp_path / "in.prof"
    source.write_text("x")
    hard, soft = tmp_path / "hard.prof", tmp_path / "soft.prof"
    os.link(source, hard)
    soft.symlink_to(source)
    # THEN neither may be an output, nor the same new file twice, in any spelling
    for alias in (hard, soft, tmp_path / "." / "in.prof"):
        with pytest.raises(_common.CommandError, match="the same file as the input") as e:
            _common.check_outputs({"-o": str(alias)}, inputs=[str(source)])
        assert e.value.exit_code == _common.EXIT_USAGE
    new = tmp_path / "new.json"
    with pytest.raises(_common.CommandError, match=r"--csv .*: the same file as --json"):
        _common.check_outputs({"--json": str(new), "--csv": str(tmp_path / "." / "new.json")})
    # AND a missing input, an option not given and a special file twice are fine
    _common.check_outputs(
        {"--json": os.devnull, "--csv": os.devnull, "--plot": None},
        inputs=[str(tmp_path / "missing.py"), os.devnull],
    )


@pytest.mark.parametrize(
    ("name", "accepted"),
    [("x.png", True), ("x.SVG", True), ("x.pdf", True), ("x", False), ("x.xyz", False)],
)
def test_check_outputs_suffixes(tmp_path: Path, name: str, accepted: bool) -> None:
    path = str(tmp_path / name)
    check = functools.partial(
        _common.check_outputs, {"--plot": path}, suffixes={"--plot": _common.PLOT_SUFFIXES}
    )
    if accepted:
        check()
    else:
        with pytest.raises(_common.CommandError, match=r"--plot .* is not supported, use one"):
            check()


def test_save_output_falls_back_then_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a writer that fails on the target (a full disk) but not elsewhere
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    target = tmp_path / "out.speedscope.json"

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write("partial")
            if path == str(target):
                raise OSError(errno.ENOSPC, "No space left on device")

    # WHEN it is saved THEN the error names the file and the fallback, of the same kind
    with pytest.raises(_common.CommandError, match="No space left on device") as e:
        _common.save_output("-o", str(target), write)
    assert e.value.exit_code == _common.EXIT_ERROR
    saved = [p.name for p in fallback.iterdir()]
    assert len(saved) == 1 and saved[0].endswith(".speedscope.json")
    assert saved[0] in str(e.value) and str(target) in str(e.value)
    assert not target.exists()  # the partial file is not left as if it were the result
    # AND when the fallback fails too, it says so and leaves nothing behind

    def always_full(path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(_common.CommandError, match="could not be saved elsewhere either"):
        _common.save_output("-o", str(target), always_full)
    assert len(list(fallback.iterdir())) == 1


def test_save_outputs_writes_the_others_when_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    good = tmp_path / "good.csv"

    def full(path: str) -> None:
        if "bad" in path:
            raise OSError(errno.ENOSPC, "No space left on device")
        Path(path).write_text("ok")

    with pytest.raises(_common.CommandError, match=r"cannot write --json .*bad\.json") as e:
        bad = ("--json", str(tmp_path / "bad.json"), full)
        _common.save_outputs([bad, ("--csv", str(good), full), ("--plot", None, full)])
    assert "\n" not in str(e.value)
    assert good.read_text() == "ok"


def test_every_command_tells_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    for name in _cli._COMMAND_MODULES:
        assert _cli.main([name, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "exit code" in text.lower(), (name, text[-400:])
        assert re.search(r"\b2\b", text) and re.search(r"\b130\b", text), (name, text[-400:])


def test_guarded_output_is_no_oserror_for_the_commands() -> None:
    # The commands mistake an OSError for their user's code failing: the guard raises
    # CommandError subclasses instead, keeping a copy of what was written.
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    guarded = _cli.GuardedOutput(Full())
    with pytest.raises(_cli.OutputFailed, match="No space left on device"):
        guarded.write("result\n")
    assert guarded.copy == ["result\n"]

    class Gone(io.StringIO):
        def flush(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    with pytest.raises(_cli.ReaderGone):
        _cli.GuardedOutput(Gone()).flush()
    assert not issubclass(_cli.OutputFailed, OSError)
    assert issubclass(_cli.ReaderGone, _common.CommandError)


def test_a_closed_stdout_is_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Python sets sys.stdout to None when descriptor 1 is closed (``>&-``)
    monkeypatch.setattr(sys, "stdout", None)
    err = io.StringIO()
    assert _cli.main(["demo", "--out", str(tmp_path / "demo")], err=err) == 1
    assert err.getvalue() == "error: the standard output is closed: nothing could be printed\n"
    assert not (tmp_path / "demo").exists()


# --- the program's name in usage lines ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/venv/bin/onnxrt-monitoring", "onnxrt-monitoring"),
        ("onnxrt-monitoring", "onnxrt-monitoring"),
        ("/site/onnxrt_backend_dev/monitoring/__main__.py", _cli.MODULE_PROG),
        ("-c", _cli.MODULE_PROG),
        ("-m", _cli.MODULE_PROG),
        ("", _cli.MODULE_PROG),
        (None, _cli.MODULE_PROG),
    ],
)
def test_program_name_follows_how_it_was_invoked(argv0: str | None, prog: str) -> None:
    assert _cli.program_name(argv0) == prog


def test_help_of_the_console_script_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the console script's argv WHEN it asks for help (argv read from sys.argv)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/onnxrt-monitoring", "time", "--help"])
    assert _cli.main() == 0
    # THEN the usage line names the script, not python -m
    assert capsys.readouterr().out.startswith("usage: onnxrt-monitoring time ")


def test_help_of_python_dash_m_names_the_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: {_cli.MODULE_PROG} [-h]"), proc.stdout


# --- Ctrl-C while the command line starts ---------------------------------------------------


def test_ctrl_c_while_the_commands_are_imported_exits_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN Ctrl-C arriving while the commands' modules are imported
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_cli.importlib, "import_module", interrupted)
    out, err = io.StringIO(), io.StringIO()
    # WHEN any command line runs THEN one line, exit 130, no traceback
    assert _cli.main(["time", "pass"], out=out, err=err) == 130
    assert (out.getvalue(), err.getvalue()) == ("", "interrupted\n")


_INTERRUPTED_IMPORT = """
import runpy, sys

INTERRUPTED = sys.argv[1]

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == INTERRUPTED:
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = [sys.argv[0], "time", "--help"]
runpy.run_module("onnxrt_backend_dev.monitoring", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module",
    [
        "onnxrt_backend_dev.monitoring._cli",
        "onnxrt_backend_dev.monitoring._cli.dispatch",
        "onnxrt_backend_dev.monitoring._cli.cmd_time",
    ],
)
def test_ctrl_c_during_start_up_imports_of_python_dash_m_exits_130(module: str) -> None:
    # GIVEN a real `python -m onnxrt_backend_dev.monitoring time --help` interrupted while it
    # imports `module` WHEN it ends THEN exit 130 and one line, no traceback
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, module],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "interrupted\n")


def test_emit_text_ends_the_terminal_output_with_a_line_break(tmp_path: Path) -> None:
    # GIVEN a rendering without a final line break WHEN written to the terminal THEN the
    # prompt starts a new line; WHEN written to -o THEN the file holds the text as is
    out = io.StringIO()
    assert _common.emit_text("a\nb", None, out) is False and out.getvalue() == "a\nb\n"
    out = io.StringIO()
    assert _common.emit_text("", None, out) is False and out.getvalue() == ""
    path = tmp_path / "x.txt"
    assert _common.emit_text("a\nb", str(path), io.StringIO()) is True
    assert path.read_text(encoding="utf-8") == "a\nb"

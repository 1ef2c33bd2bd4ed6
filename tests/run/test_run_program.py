"""The one program harness (``_run.program``): the program a command runs, its checks and
command lines, a child run to its end, the rounds of repeated runs."""

from __future__ import annotations

import argparse
import io
import signal
import sys
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._errors import CommandError, CommandNotFound
from onnxrt_backend_dev.monitoring._run.program import (
    Target,
    last_line,
    run_child,
    run_rounds,
    say_stopped,
    supervised,
    target_of,
)


def _args(
    target: str | None = None, *rest: str, module: list[str] | None = None
) -> argparse.Namespace:
    return argparse.Namespace(target=target, args=list(rest), module=module)


def test_the_program_of_the_arguments_and_its_command_lines(tmp_path: Path) -> None:
    # GIVEN a script, a module, a command and a folder, as run and profile read them
    (tmp_path / "app").mkdir()
    script = target_of(_args("prog.py", "-x"), commands=True)
    module = target_of(_args(None, module=["pkg.main", "1"]), commands=True)
    command = target_of(_args("ls", "-l"), commands=True)
    folder = target_of(_args(str(tmp_path / "app")), commands=True)
    # THEN each is what it is, named and started as given
    assert script == Target("script", "prog.py", ("-x",)) and folder and folder.kind == "script"
    assert module == Target("module", "pkg.main", ("1",)) and command == Target(
        "command", "ls", ("-l",)
    )
    assert [t.shown for t in (script, module, command)] == ["prog.py", "-m pkg.main", "ls -l"]
    assert module.argv(["python"]) == ["python", "-m", "pkg.main", "1"]
    assert command.fresh() == ["ls", "-l"] and not command.python
    # AND a fresh interpreter is this one; a script named like an option is ./-named
    assert script.fresh()[0] == sys.executable and script.fresh()[-2:] == ["prog.py", "-x"]
    assert Target("script", "-dash.py").fresh()[-1] == "./-dash.py"
    # AND profile reads every target as a script; none given is None or the usage error
    assert target_of(_args("ls")) == Target("script", "ls")
    assert target_of(_args()) is None
    with pytest.raises(CommandError, match="give a script") as caught:
        target_of(_args(), missing="give a script")
    assert caught.value.exit_code == 2


def test_a_program_that_cannot_run_is_refused_before_anything_starts(tmp_path: Path) -> None:
    script = tmp_path / "ok.py"
    script.write_text("x = 1\n", encoding="utf-8")
    # THEN a script names its code's file, a module and a command nothing
    assert Target("script", str(script)).check() == str(script)
    assert Target("module", "json.tool").check() is None
    assert Target("command", "true").check() is None
    # AND the missing ones are one line each, as the commands say them
    with pytest.raises(CommandError, match="script not found") as missing:
        Target("script", str(tmp_path / "missing.py")).check()
    assert missing.value.exit_code == 2
    with pytest.raises(CommandError, match="no module named"):
        Target("module", "no_such_module_here").check()
    with pytest.raises(CommandNotFound, match="command not found") as absent:
        Target("command", "no-such-command-here").check()
    assert absent.value.exit_code == 127


def test_a_child_runs_to_its_end_its_failure_and_its_timeout_said(tmp_path: Path) -> None:
    errors = str(tmp_path / "stderr")
    code = "import sys; print('first', file=sys.stderr); sys.exit('the last line')"
    with supervised() as sup:
        ended = run_child(sup, [sys.executable, "-c", code], errors, timeout=60)
        assert ended is not None and ended.code == 1 and not ended.timed_out
        assert last_line(errors) == "the last line"
        # AND past its timeout it is ended, and says so
        slow = run_child(sup, [sys.executable, "-c", "import time; time.sleep(60)"], errors, 0.3)
        assert slow is not None and slow.timed_out


def test_a_signal_stops_the_rounds_and_is_said() -> None:
    # GIVEN rounds of two sides whose third run is stopped by a signal
    done: list[tuple[int, int]] = []

    def run_one(round_: int, side: int) -> bool:
        return len(done) < 2

    assert not run_rounds(run_one, 5, 2, on_run=lambda r, i: done.append((r, i)))
    # THEN the runs ran A B, then stopped
    assert done == [(0, 0), (0, 1)]
    err = io.StringIO()
    say_stopped(err, "run --repeat", signal.SIGTERM, len(done))
    say_stopped(err, "profile --save", signal.SIGINT, 0)
    assert err.getvalue() == (
        "run --repeat: stopped by SIGTERM: the 2 run(s) done\n"
        "profile --save: stopped by SIGINT: no run ended\n"
    )
    # AND with max_time, two rounds at least run
    count: list[int] = []

    def run_ok(round_: int, side: int) -> bool:
        count.append(round_)
        return True

    assert run_rounds(run_ok, 10, max_time=1e-9)
    assert count == [0, 1]

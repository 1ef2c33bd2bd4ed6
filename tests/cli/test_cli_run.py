"""Tests for the ``run`` subcommand (_cli/cmd_run.py): bad inputs in process (refused
before anything runs), real runs as subprocesses (signals, kills, exit codes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, run_cli

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="run needs fork")
TIMEOUT = 60
SCRIPT = """\
import os, sys, time

def build():
    return [bytearray(2**20) for _ in range(40)]

def main():
    data = build()
    print("ran", sys.argv[1:], __name__, flush=True)
    if "sleep" in sys.argv:
        open(sys.argv[-1], "w").close()  # the gate: the program is running
        time.sleep(30)
    if "kill" in sys.argv:
        os.kill(os.getpid(), 9)
    if "exit" in sys.argv:
        sys.exit(3)
    if "raise" in sys.argv:
        raise ValueError("boom")
    return data

main()
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    return path


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run", *argv],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--interval", "0", "x.py"], "--interval must be >= 0.001"),
        (["--interval", "nan", "x.py"], "--interval must be a finite number"),
        (["--interval", "abc", "x.py"], "invalid float value"),
        (["--probe", "nope", "x.py"], "--probe 'nope'"),
        (["-o", "out.pdf", "x.py"], "cannot tell the format of -o"),
        (["--format", "xml", "x.py"], "invalid choice"),
        ([], "give a script, -m module, -- COMMAND, or --pid PID"),
        (["-o", "{missing}/r.html", "x.py"], "does not exist"),
        (["--format", "text", "-o", "{script}", "{script}"], "the same file as the input"),
        (["-o", "{tmp}", "x.py"], "it is a folder"),
        (["missing.py"], "script not found"),
        (["-m", "no_such_module_xyz"], "no module named"),
    ],
)
def test_bad_inputs_are_one_line_and_exit_2_before_anything_runs(
    tmp_path: Path,
    script: Path,
    argv: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN options naming files around the test's folder
    subst = {"missing": str(tmp_path / "missing"), "script": str(script), "tmp": str(tmp_path)}
    argv = [a.format(**subst) for a in argv]
    # WHEN run is called in process THEN exit 2, one line naming the problem, nothing ran
    code, out, err = run_cli("run", *argv)
    err += capsys.readouterr().err  # argparse writes to sys.stderr
    assert code == 2, (out, err)
    assert words in err and "Traceback" not in err
    assert "ran" not in out and len(err.strip().splitlines()) <= 2  # argparse adds its usage


@pytest.mark.parametrize(
    ("command", "code", "line"),
    [
        ("/nonexistent/cmd", 127, "error: command not found: /nonexistent/cmd"),
        ("no-such-command-xyz", 127, "error: command not found: no-such-command-xyz"),
        (str(DATA / "reference_to_text.txt"), 126, "error: command not executable: {}"),
    ],
)
def test_a_command_that_cannot_run_is_one_line_with_the_shell_s_code(
    command: str, code: int, line: str
) -> None:
    # WHEN run -- COMMAND names what a shell could not run THEN as spy says: one line,
    # 127 (not found) or 126 (not executable), nothing started
    got, out, err = run_cli("run", "--", command)
    assert (got, out, err) == (code, "", line.format(command) + "\n")


def test_a_run_writes_html_and_json_and_keeps_the_exit_code(tmp_path: Path, script: Path) -> None:
    # WHEN a script exiting with 3 runs with -o report.json
    report = tmp_path / "r.json"
    proc = _run("-o", str(report), str(script), "exit")
    # THEN its exit code is kept, its output shown, the summary on stderr
    assert proc.returncode == 3, proc.stderr
    assert "ran ['exit'] __main__" in proc.stdout
    assert "report written to" in proc.stderr and "peak RSS" in proc.stderr
    doc = json.loads(report.read_text())
    assert doc["ending"]["kind"] == "exit" and doc["ending"]["code"] == 3
    assert doc["peak"]["site"]["function"] == "build"
    # AND an HTML page is written the same way, quietly with -q
    page = tmp_path / "r.html"
    proc = _run("-q", "-o", str(page), str(script))
    assert proc.returncode == 0 and proc.stderr == ""
    assert "<svg" in page.read_text() and "build" in page.read_text()


def test_text_goes_to_stdout_and_an_exception_is_reported(script: Path) -> None:
    proc = _run(str(script), "raise")
    assert proc.returncode == 1
    assert "ValueError: boom" in proc.stderr  # the program's own traceback, as in a plain run
    assert "prog.py: exited with code 1" in proc.stdout
    assert len(proc.stdout.splitlines()) <= 31  # the program's line and the summary
    assert proc.stdout.endswith("\n")  # the shell's prompt goes on a line of its own


def test_a_program_killed_by_sigkill_still_leaves_its_report(tmp_path: Path, script: Path) -> None:
    # WHEN the program kills itself with SIGKILL (as the OOM killer would)
    report = tmp_path / "r.json"
    started = time.monotonic()
    proc = _run("-o", str(report), str(script), "kill")
    # THEN 137, and the report says so and names main as allocating at the end
    assert proc.returncode == 137, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["ending"]["kind"] == "signal" and "SIGKILL" in doc["ending"]["detail"]
    assert doc["ending"]["last_site"]["function"] in ("build", "main")
    assert time.monotonic() - started < TIMEOUT


def _signalled_run(
    tmp_path: Path, script: Path, report: Path, send: Callable[[subprocess.Popen[str]], None]
) -> tuple[subprocess.Popen[str], str]:
    """Starts ``run -o report`` of the sleeping program in its own session, waits for the
    program's gate, sends the signal with ``send`` and returns the ended command and its
    stderr; the session is killed if it did not end."""
    gate = tmp_path / "gate"
    cli = subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run", "-o", str(report),
         str(script), "sleep", str(gate)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT / 2
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        send(cli)
        _, err = cli.communicate(timeout=TIMEOUT / 2)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait(TIMEOUT)
    return cli, err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_terminating_signal_is_forwarded_and_the_report_written(
    tmp_path: Path, script: Path, signum: int, code: int
) -> None:
    # GIVEN a run sleeping in its program WHEN the command receives the signal
    report = tmp_path / "r.json"
    cli, err = _signalled_run(tmp_path, script, report, lambda p: p.send_signal(signum))
    # THEN the conventional code, a report saying how the program ended
    assert cli.returncode == code, err
    doc = json.loads(report.read_text())
    assert doc["ending"]["code"] == code and signal.Signals(signum).name in doc["ending"]["detail"]
    _no_process_left(cli.pid)


def test_ctrl_c_on_the_terminal_gives_130_and_the_report(tmp_path: Path, script: Path) -> None:
    report = tmp_path / "r.json"
    # The terminal sends Ctrl-C to the whole group
    cli, err = _signalled_run(tmp_path, script, report, lambda p: os.killpg(p.pid, signal.SIGINT))
    assert cli.returncode == 130, err
    assert json.loads(report.read_text())["ending"]["kind"] == "interrupted"
    _no_process_left(cli.pid)


def test_a_ctrl_c_reaching_only_the_command_is_forwarded_to_the_ticking_program(
    tmp_path: Path, script: Path
) -> None:
    # GIVEN a program asleep, ticking (its stream is never idle) WHEN only the command
    # gets the Ctrl-C (the program's own was lost: it landed before its exec)
    report = tmp_path / "r.json"
    cli, err = _signalled_run(tmp_path, script, report, lambda p: os.kill(p.pid, signal.SIGINT))
    # THEN the command forwards it: the program is interrupted (not after its 30 s sleep)
    assert cli.returncode == 130, err
    assert json.loads(report.read_text())["ending"]["kind"] == "interrupted"
    _no_process_left(cli.pid)


def _no_process_left(session: int) -> None:
    """No process of the command's session remains (its child, the spy)."""
    deadline = time.monotonic() + 10
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session and fields[0] != "Z":
                left.append(pid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert left == []


def test_interrupted_starts_leave_no_process(tmp_path: Path, script: Path) -> None:
    # WHEN ten runs are interrupted at once, at different moments of their start
    for i in range(10):
        cli = subprocess.Popen(
            [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run", "-q",
             "-o", str(tmp_path / f"r{i}.json"), str(script), "sleep", str(tmp_path / "g")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        time.sleep(0.05 * i)
        os.killpg(cli.pid, signal.SIGINT)
        try:
            cli.wait(TIMEOUT)
        finally:
            if cli.poll() is None:
                os.killpg(cli.pid, signal.SIGKILL)
                cli.wait(TIMEOUT)
        # THEN nothing of the command is left
        _no_process_left(cli.pid)


def test_a_command_that_is_not_python_is_measured_as_a_process_tree(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    proc = _run("-o", str(report), "--", "sh", "-c", "exit 4")
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["ending"]["code"] == 4 and doc["program"] == "sh -c exit 4"


def test_a_module_runs_with_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "modx.py").write_text(SCRIPT)
    proc = _run("-m", "modx", "a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ran ['a'] __main__" in proc.stdout and "-m modx: exited with code 0" in proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_the_program_dies_with_the_command(tmp_path: Path, script: Path) -> None:
    # GIVEN a run sleeping in its program
    gate = tmp_path / "gate"
    cli = subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run", "-q", str(script),
         "sleep", str(gate)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT / 2
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # WHEN the command itself is killed with SIGKILL
        cli.kill()
        cli.wait(TIMEOUT)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait(TIMEOUT)
    # THEN its program and the program's spy end too
    _no_process_left(cli.pid)


LEAN = """\
import json, sys
heavy = ["argparse", "onnxrt_backend_dev.monitoring._report.build",
         "onnxrt_backend_dev.monitoring._cli.common", "datetime", "dataclasses"]
print(json.dumps({"loaded": [m for m in heavy if m in sys.modules], "path0": sys.path[0],
                  "argv": sys.argv}))
import time
time.sleep(0.3)  # read a few times, even at load 8 (its first read may come late)
"""


def test_the_program_runs_in_a_fresh_lean_interpreter_and_its_peak_is_its_own(
    tmp_path: Path,
) -> None:
    # GIVEN a script telling which of the command's modules it sees
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "lean.py"
    path.write_text(LEAN)
    report = tmp_path / "r.json"
    # WHEN it runs under `run`
    proc = _run("-o", str(report), str(path), "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    # THEN none of the command's machinery is in its process, sys.path and sys.argv are
    # a plain run's
    assert seen["loaded"] == []
    assert seen["path0"] == str(tmp_path / "sub") and seen["argv"] == [str(path), "x"]
    # AND nothing of the tool's is in its memory but the allocation shim's pages, taken
    # off every figure (and said so)
    peak = json.loads(report.read_text())["peak"]
    assert peak["tool"] < 8 * 2**20 and peak["value"] > peak["start"] > 0
    assert ("own memory in it" in proc.stderr) == (peak["tool"] > 0)


CHILDREN = """\
import multiprocessing, os, subprocess, sys, time

def spawned_work():
    end = time.perf_counter() + 0.4
    while time.perf_counter() < end:
        sum(range(100))

def main():
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
    subprocess.run([sys.executable, child, "arg\\x1b[31m"], check=True)
    p = multiprocessing.get_context("spawn").Process(target=spawned_work)
    p.start()
    p.join()

if __name__ == "__main__":
    main()
"""
CHILD = """\
import time

def hot_child():
    end = time.perf_counter() + 0.4
    while time.perf_counter() < end:
        sum(range(100))

hot_child()
"""


def _tree_rows(report: dict[str, Any]) -> list[tuple[str, float, int]]:
    """(function, seconds, index of the top-level row it sits under) of every row."""
    rows, top = [], -1
    for row in report["tree"]:
        if row["depth"] == 0:
            top += 1
        rows.append((row["site"]["function"], float(row["time"]), top))
    return rows


def test_spawned_and_subprocess_python_children_get_their_own_trees(tmp_path: Path) -> None:
    # GIVEN a program running `python child.py` with subprocess, then a spawn Process
    (tmp_path / "prog.py").write_text(CHILDREN)
    (tmp_path / "child.py").write_text(CHILD)
    report = tmp_path / "r.json"
    # WHEN it runs under `run`
    proc = _run("-q", "-o", str(report), str(tmp_path / "prog.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _tree_rows(json.loads(report.read_text()))
    labels = {name: top for name, _, top in rows if name.startswith("process ")}
    # THEN each child is a tree of its own, labelled by pid and its command line (one
    # printable line: the escape sequence of its argument is not passed on)
    child = next(n for n in labels if "child.py" in n)
    spawned = next(n for n in labels if "spawn_main" in n)
    assert re.fullmatch(r"process \d+: .*python\S* .*child\.py arg\?\[31m", child), child
    # AND its hot function sits under it, with time (0.4 s each; generous at any load)
    by_name = {name: (secs, top) for name, secs, top in rows}
    assert by_name["hot_child"][1] == labels[child] and by_name["hot_child"][0] > 0.1
    assert by_name["spawned_work"][1] == labels[spawned] and by_name["spawned_work"][0] > 0.1


ATEXIT = """\
import atexit, sys

def bye():
    print("bye", flush=True)
    open(sys.argv[1], "w").write("flushed")

atexit.register(bye)
if "raise" in sys.argv:
    raise ValueError("boom")
"""


@pytest.mark.parametrize(("how", "code"), [("ok", 0), ("raise", 1)])
def test_the_programs_atexit_callbacks_run_as_in_a_plain_run(
    tmp_path: Path, how: str, code: int
) -> None:
    # GIVEN a program whose atexit callback prints and writes a file (then raises, or not)
    path = tmp_path / "prog.py"
    path.write_text(ATEXIT)
    marker = tmp_path / "marker.txt"
    # WHEN it runs under `run`
    proc = _run("-q", "-o", str(tmp_path / "r.json"), str(path), str(marker), how)
    # THEN the callback ran (after the traceback, as python does), the exit code kept
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "bye\n" and marker.read_text() == "flushed"
    assert ("ValueError: boom" in proc.stderr) == (how == "raise")


_START_UP = """\
import json, sys
from onnxrt_backend_dev.monitoring._cli import dispatch
parser, _ = dispatch.build_parser(load=["run"])
from onnxrt_backend_dev.monitoring._report import runner
from onnxrt_backend_dev.monitoring._run import program
heavy = ["dataclasses", "statistics", "tempfile", "onnxrt_backend_dev.monitoring._results",
         "onnxrt_backend_dev.monitoring._report.build",
         "onnxrt_backend_dev.monitoring._report.model",
         "onnxrt_backend_dev.monitoring._report.child",
         "onnxrt_backend_dev.monitoring._memory"]
print(json.dumps([m for m in heavy if m in sys.modules]))
"""


def test_the_command_forks_before_importing_the_report_model() -> None:
    # GIVEN a fresh interpreter WHEN it builds the parser of run and imports what forks
    # the child THEN the report's model (dataclasses), the spy and --save/--repeat's
    # machinery are not imported yet: they come while the program runs, or when asked
    # for (the forking runner imports none of what the child runs either)
    done = subprocess.run(
        [sys.executable, "-c", _START_UP], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


_FREEZE = """\
import gc, json, sys
from onnxrt_backend_dev.monitoring import _cli
out, script = sys.argv[1:3]
codes, frozen = [], []
for argv, as_command_line in (
    (["profile", "-q", "-o", out + ".txt", script], True),
    (["run", "-q", "-o", out + ".json", script], False),
    (["run", "-q", "-o", out + ".json", script], True),
):
    sys.argv = ["onnxrt-monitoring", *argv]
    codes.append(_cli.main() if as_command_line else _cli.main(argv))
    frozen.append(gc.get_freeze_count() > 0)
print(json.dumps([codes, frozen]))
"""


def test_only_runs_own_command_line_freezes_its_objects_before_the_exit(tmp_path: Path) -> None:
    # GIVEN a program WHEN `profile` runs it as the process's command line, then `run` in
    # process (a caller's argv), then `run` as the command line
    prog = tmp_path / "tiny.py"
    prog.write_text("x = sum(range(1000))\n")
    done = subprocess.run(
        [sys.executable, "-c", _FREEZE, str(tmp_path / "out"), str(prog)],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    codes, frozen = json.loads(done.stdout.splitlines()[-1])
    # THEN all succeed, and only the last froze the process's objects: `profile` ran the
    # user's code in it, and a caller in process keeps its collector as it was
    assert codes == [0, 0, 0]
    assert frozen == [False, False, True]


def test_a_script_named_like_an_option_and_a_script_given_to_spy_run_as_scripts(
    tmp_path: Path,
) -> None:
    # GIVEN scripts named "-dash.py" and "train.py" (not executable)
    (tmp_path / "-dash.py").write_text("print('dash ran')\n")
    (tmp_path / "train.py").write_text("print('train ran')\n")
    # WHEN run after "--", and given to spy without "--"
    dash = _run("--", "-dash.py", cwd=tmp_path)
    spy = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", "train.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    # THEN each runs as Python would run it, not as an option nor a command not found
    assert dash.returncode == 0 and "dash ran" in dash.stdout, dash.stderr
    assert "Unknown option" not in dash.stderr
    assert spy.returncode == 0 and "train ran" in spy.stdout, spy.stderr


_RUN_IMPORTS = """\
import json, sys
from onnxrt_backend_dev.monitoring._cli import dispatch
from onnxrt_backend_dev.monitoring._observe.session import availability
code = dispatch.main(["run", "-q", "-o", sys.argv[2], sys.argv[3]])
package = [m for n, m in sys.modules.items() if n.startswith("onnxrt_backend_dev")]
made = sorted(f"{m.__name__}.{k}" for m in package for k, v in vars(m).items()
              if isinstance(v, type) and v.__module__ == m.__name__
              and "__dataclass_fields__" in vars(v))
watched = [m for m in json.loads(sys.argv[1]) if m in sys.modules]
print(json.dumps([code, availability().ok, watched, made]))
"""


def test_an_observed_run_imports_none_of_the_in_process_recorder(tmp_path: Path) -> None:
    # GIVEN a fresh interpreter running `run` on a tiny script
    prog = tmp_path / "tiny.py"
    prog.write_text("x = sum(range(1000))\n")
    watched = ["datetime", "faulthandler", "onnxrt_backend_dev.monitoring._cli.run_child",
               "onnxrt_backend_dev.monitoring._report.child"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _RUN_IMPORTS, json.dumps(watched), "out.json", str(prog)],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, observed, loaded, dataclasses = json.loads(done.stdout.splitlines()[-1])
    if not observed:
        pytest.skip("the observer cannot run here: the in-process recorder ran")
    # THEN the report was written, without the in-process recorder's modules, and the
    # only dataclasses made are the public ones (the report's model, what monitor()
    # yields): each costs its methods' compilation at every start, the run's own records
    # are NamedTuples or plain classes
    assert code == 0 and (tmp_path / "out.json").exists()
    assert loaded == []
    public = {"_report.model.Report", "_report.model.Site", "_report.session.Monitored"}
    assert {f"onnxrt_backend_dev.monitoring.{name}" for name in public} <= set(dataclasses)
    assert {d.rsplit(".", 1)[0].rsplit(".", 1)[1] for d in dataclasses} == {"model", "session"}

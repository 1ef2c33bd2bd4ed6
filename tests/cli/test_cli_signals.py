"""Signals to the commands that start children, as a CI cancel or ``timeout`` sends them:
every descendant ends, what was measured is written, the exit code is the conventional
one (``benchmarks/signal_storm.py`` sends hundreds of them at random moments; these are
a few at chosen ones, with bounds that hold at load 8)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TIMEOUT = 120
# Seconds the descendants have to be gone once the command exited (2 s is the floor; the
# bound is generous for a loaded machine).
GONE = 10.0
# A program run by the repeat commands: says it started (one line per run), leaves a
# grandchild in its group, then sleeps: 0.2 s the first time, argv[2] seconds after.
PROGRAM = """\
import os, subprocess, sys, time
with open(sys.argv[1], "a+") as f:
    f.seek(0)
    first = not f.read()
    f.write(f"{os.getpid()}\\n")
child = subprocess.Popen(["sleep", "60"])
time.sleep(0.2 if first else float(sys.argv[2]))
child.kill()
child.wait()
"""


def _session(sid: int) -> list[int]:
    """The processes of a session (zombies excepted): every descendant of a command
    started in a session of its own, whatever groups they made."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(stat.parent.name))
    return found


def _left_after(sid: int) -> list[int]:
    deadline = time.monotonic() + GONE
    while (left := _session(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _start(tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _lines(path: Path, count: int) -> None:
    """Waits until ``path`` has ``count`` lines (the program's runs started)."""
    deadline = time.monotonic() + TIMEOUT / 2
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {count} lines")


def _signal_then_wait(cli: subprocess.Popen[str], signum: int) -> tuple[str, str]:
    try:
        cli.send_signal(signum)
        return cli.communicate(timeout=TIMEOUT / 2)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.communicate(timeout=TIMEOUT / 2)


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    return path


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(
    ("command", "signum"), [("run", signal.SIGTERM), ("profile", signal.SIGHUP)]
)
def test_a_signal_into_a_repeat_ends_every_process_and_keeps_the_runs_done(
    tmp_path: Path, program: Path, command: str, signum: int
) -> None:
    # GIVEN `run|profile --repeat 3` of a program leaving a grandchild, its first run
    # done in 0.2 s and the second one started (it would sleep 30 s)
    starts, saved = tmp_path / "starts", tmp_path / "runs.json"
    cli = _start(
        tmp_path, command, "--repeat", "3", "--save", str(saved), str(program), str(starts), "30"
    )
    _lines(starts, 2)
    # WHEN the command gets the signal while the second run sleeps
    out, err = _signal_then_wait(cli, signum)
    # THEN the conventional exit code, one line saying so, no traceback
    assert cli.returncode == 128 + signum, err
    assert f"stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err
    # AND what was measured is written: the runs done, shown and saved
    assert out.strip() and saved.exists()
    data = json.loads(saved.read_text())["data"]
    assert len(data["wall"]) == 1
    # AND nothing is left: no process of its session, no temporary folder
    assert _left_after(cli.pid) == []
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_into_compare_of_two_programs_leaves_nothing(
    tmp_path: Path, program: Path, signum: int
) -> None:
    # GIVEN compare --a/--b of a program that sleeps 30 s, its first run started
    starts = tmp_path / "starts"
    side = f"{sys.executable} {program} {starts} 30"  # the sampler is imported there
    save_a = tmp_path / "a.json"
    cli = _start(tmp_path, "compare", "--a", side, "--b", side, "--repeat", "3",
                 "--save-a", str(save_a))  # fmt: skip
    _lines(starts, 1)
    # WHEN SIGTERM, or SIGKILL (nothing of the command can run then)
    _, err = _signal_then_wait(cli, signum)
    # THEN the exit code, and no child and no temporary folder left
    assert cli.returncode == (143 if signum == signal.SIGTERM else -9), err
    assert _left_after(cli.pid) == []
    deadline = time.monotonic() + GONE
    while os.listdir(tmp_path / "tmp") and time.monotonic() < deadline:
        time.sleep(0.05)  # after kill -9, the janitor removes it
    assert os.listdir(tmp_path / "tmp") == []
    if signum == signal.SIGTERM:
        assert "compare: stopped by SIGTERM: no comparison" in err and "Traceback" not in err
        assert not save_a.exists()  # no run of A ended: nothing to save


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_kill_9_of_run_of_a_command_kills_the_command(tmp_path: Path) -> None:
    # GIVEN `run -q -- sleep 20` WHEN the command is killed outright
    cli = _start(tmp_path, "run", "-q", "--", "sleep", "20")
    deadline = time.monotonic() + TIMEOUT / 2
    while not any(
        Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\0") for p in _session(cli.pid)
    ):
        assert time.monotonic() < deadline, "sleep never started"
        time.sleep(0.05)
    _signal_then_wait(cli, signal.SIGKILL)
    # THEN sleep dies with it
    assert _left_after(cli.pid) == []


# Busy for a while in Python, so that the signals land in the program.
BUSY = (
    "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end:\n"
    "    sum(range(1000))\n"
)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_two_sigints_2_ms_apart_to_spy_where_write_the_measure(tmp_path: Path) -> None:
    # GIVEN spy --where of a busy program, running
    script, report = tmp_path / "busy.py", tmp_path / "r.json"
    script.write_text(BUSY)
    cli = _start(tmp_path, "spy", "--where", "--json", str(report), str(script))
    time.sleep(2.0)  # the program runs (its start takes well under this at load 8)
    # WHEN two SIGINTs 2 ms apart, as timeout or a CI runner sends them
    cli.send_signal(signal.SIGINT)
    time.sleep(0.002)
    out, err = _signal_then_wait(cli, signal.SIGINT)
    # THEN exit 130, the measure printed and written, no traceback
    assert cli.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert "cpu: peak" in out and json.loads(report.read_text())["signal"] == signal.SIGINT


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_on_a_terminal_the_command_reads_it_and_gets_ctrl_c(tmp_path: Path) -> None:
    import pty
    import select

    # GIVEN spy -- COMMAND on a terminal, the command reading a line from it
    script = "import time; print('got', input()); time.sleep(30)"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on the terminal
        os.execv(sys.executable, [sys.executable, "-m", "onnxrt_backend_dev.monitoring",
                                  "spy", "-q", "--", sys.executable, "-c", script])  # fmt: skip
    out = b""

    def read_until(text: bytes, seconds: float) -> None:
        nonlocal out
        deadline = time.monotonic() + seconds
        while text not in out and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    out += os.read(fd, 4096)
                except OSError:  # the terminal closed: the CLI ended
                    return

    try:
        os.write(fd, b"hello\n")
        read_until(b"got hello", TIMEOUT / 3)
        # THEN it read the terminal (it stayed in the terminal's foreground job)
        assert b"got hello" in out, out
        # WHEN Ctrl-C is typed THEN it reaches the command, the measure is printed, 130
        os.write(fd, b"\x03")
        read_until(b"exit code 130", TIMEOUT / 3)
        _, status = os.waitpid(pid, 0)
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130, out
    assert b"cpu: peak" in out and b"exit code 130" in out


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("command", ["profile", "run"])
def test_two_sigints_2_ms_apart_to_an_observed_program_write_its_profile(
    tmp_path: Path, command: str
) -> None:
    # GIVEN profile/run -o of a busy program under the observer (a plain interpreter in a
    # group of its own), running
    script, out = tmp_path / "busy.py", tmp_path / "out.json"
    script.write_text(BUSY)
    cli = _start(tmp_path, command, "--collector", "observer", "-o", str(out), str(script))
    time.sleep(2.0)  # the program runs and has been sampled (its start is well under this)
    # WHEN two SIGINTs 2 ms apart
    cli.send_signal(signal.SIGINT)
    time.sleep(0.002)
    _, err = _signal_then_wait(cli, signal.SIGINT)
    # THEN the program got Ctrl-C (its traceback is its own), the tool's exit code is the
    # interrupt's, the output was written with the busy loop in it, and nothing is left
    assert cli.returncode == 130, err
    assert "KeyboardInterrupt" in err and "onnxrt_backend_dev/" not in err
    assert command == "run" or "terminated by SIGINT" in err  # run: said in its report
    written = out.read_text()
    assert "busy.py" in written
    assert _left_after(cli.pid) == []


# --- the exit code and the output whenever the signal comes (issue 37, item 12) ----------

SLEEPER = "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)\n"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("command", ["profile", "run"])
def test_two_sigints_2_ms_apart_to_an_attach_write_its_output(tmp_path: Path, command: str) -> None:
    # GIVEN profile/run --pid of a running program, attached and sampling
    target = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        out = tmp_path / "out.json"
        cli = _start(tmp_path, command, "--pid", str(target.pid), "-o", str(out))
        time.sleep(1.5)
        # WHEN two SIGINTs 2 ms apart (Ctrl-C stops an attach: its output is written)
        cli.send_signal(signal.SIGINT)
        time.sleep(0.002)
        _, err = _signal_then_wait(cli, signal.SIGINT)
        # THEN the output is written, one stop, no traceback; the program goes on
        assert cli.returncode == 0, err
        assert "Traceback" not in err and "<module>" in out.read_text()
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_two_sigints_2_ms_apart_to_cprofile_write_its_profile(tmp_path: Path) -> None:
    (tmp_path / "busy.py").write_text(SLEEPER)
    out = tmp_path / "p.txt"
    cli = _start(tmp_path, "profile", "--cprofile", "-o", str(out), "busy.py")
    assert cli.stdout is not None and cli.stdout.readline() == "ready\n"
    cli.send_signal(signal.SIGINT)
    time.sleep(0.002)
    _, err = _signal_then_wait(cli, signal.SIGINT)
    assert cli.returncode == 130, err
    assert "Call tree of busy.py" in out.read_text()


KEYBOARD = """\
import sys
from onnxrt_backend_dev.monitoring._cli.dispatch import forget_interrupt
try:
    exec("raise KeyboardInterrupt")  # a dataclass being made when Ctrl-C came
except KeyboardInterrupt:
    if len(sys.argv) > 1:
        forget_interrupt()
sys.exit(130)
"""


@pytest.mark.parametrize(("forget", "code"), [(True, 130), (False, -signal.SIGINT)])
def test_a_keyboard_interrupt_caught_in_code_run_from_a_string_leaves_the_exit_code(
    tmp_path: Path, forget: bool, code: int
) -> None:
    # GIVEN a module run with python -m, as the command line is, that caught a
    # KeyboardInterrupt raised in code run from a string
    (tmp_path / "caught.py").write_text(KEYBOARD)
    argv = [sys.executable, "-m", "caught", *(["forget"] if forget else [])]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=TIMEOUT)
    # THEN CPython kills itself with SIGINT at exit unless its mark was forgotten
    assert proc.returncode == code, proc.stderr

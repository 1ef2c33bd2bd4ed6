"""Tests for ``python -m onnxrt_backend_dev.monitoring spy``: in-process, once for real."""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import Terminal, run_cli

from onnxrt_backend_dev.monitoring._cli import cmd_spy as _cli_spy
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli
from onnxrt_backend_dev.monitoring._cli.cmd_spy import COMMAND, SpyCommand
from onnxrt_backend_dev.monitoring._memory import command as _spy_command

TIMEOUT = 60
ALLOC = "import sys, time; b = b'x' * (50 * 2**20); time.sleep(0.1); sys.exit({code})"


_main = functools.partial(run_cli, "spy")


def test_the_command_is_registered() -> None:
    assert COMMAND.name == "spy" and "memory" in COMMAND.help
    _, commands = _cli.build_parser()
    assert commands["spy"] is COMMAND


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "nothing to spy on"),
        (("--pid", "1", "--", "true"), "either --pid PID or -- COMMAND"),
        (("--delay", "0", "--", "true"), "--delay must be >= 0.001 s and finite, got 0.0"),
        (("--delay", "1e-6", "--", "true"), "--delay must be >= 0.001 s and finite, got 1e-06"),
        (("--delay", "nan", "--", "true"), "--delay must be >= 0.001 s and finite, got nan"),
        (("--delay", "inf", "--", "true"), "--delay must be >= 0.001 s and finite, got inf"),
        (("--delay", "inf", "--where", "x.py"), "--delay must be >= 0.001 s and finite"),
        (("--probe", "rocm", "--", "true"), "--probe: unknown probe 'rocm', choose from"),
        (("--pid", "12", "--probe", "nvml", "--probe", "x"), "--probe: unknown probe 'x'"),
        (("--pid", "99999999999999999999"), "--pid must be <= "),
        (("--pid", "-4"), "--pid must be > 0, got -4"),
        (("--probe", "torch", "--", "true"), "--probe torch is read inside the measured program"),
        (("--pid", "1", "--probe", "torch"), "start_spying_on(probes=['torch'])"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(argv: tuple[str, ...], message: str) -> None:
    code, out, err = _main(*argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_missing_command_exits_127() -> None:
    code, _, err = _main("--", "no-such-command-xyz")
    assert code == 127 and "command not found: no-such-command-xyz" in err


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_a_command_is_measured_and_its_exit_code_returned(tmp_path: Path) -> None:
    # GIVEN a command allocating 50 MiB and exiting with 3
    files = {k: tmp_path / f"series.{k}" for k in ("json", "csv", "png")}
    code, out, err = _main(
        "--json", str(files["json"]), "--csv", str(files["csv"]), "--plot", str(files["png"]),
        "--", sys.executable, "-c", ALLOC.format(code=3),
    )  # fmt: skip
    # THEN its exit code, the figures with units, the files, and nothing on stderr
    assert code == 3, err
    assert err == ""  # not a terminal: no live status
    assert "cpu: peak" in out and "MiB" in out and "duration" in out and "exit code 3" in out
    doc = json.loads(files["json"].read_text())
    assert doc["exit_code"] == 3 and doc["cpu"]["peak"] > 50 * 2**20
    assert doc["target_exited"] is True and doc["peak_source"] == "hwm"
    with files["csv"].open() as f:
        rows = list(csv.DictReader(f))
    assert rows and rows[0]["channel"] == "cpu" and float(rows[0]["bytes"]) > 0
    assert files["png"].read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_live_status_on_a_terminal_and_none_with_quiet() -> None:
    slow = "import time; b = b'x' * (20 * 2**20); time.sleep(1.2)"
    code, _, err = _main("--", sys.executable, "-c", slow, err=Terminal())
    assert code == 0 and "peak so far" in err
    # the first status line says what the resets do, the next ones do not repeat it
    assert err.count("ru_maxrss") == 1 and "--no-reset-peak" in err
    code, _, err = _main("--quiet", "--", sys.executable, "-c", slow, err=Terminal())
    assert code == 0 and err == ""


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_attach_to_a_running_process_until_it_ends() -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        code, out, err = _main("--pid", str(target.pid), "--delay", "0.02")
    finally:
        target.wait(TIMEOUT)
    assert code == 0, err
    assert out.startswith(f"pid {target.pid}\n") and "exited before stop()" in out
    # THEN the user is told, once, that the resets change what the process's owner reads
    assert err.count(f"pid {target.pid} was not started by the spy") == 1
    assert "ru_maxrss" in err and "--no-reset-peak" in err


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_attach_without_reset_says_nothing() -> None:
    # (1.5 s: a target of 0.3 s ended before the spy attached at load 4, a full suite
    # beside a signal storm)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        code, out, err = _main("--no-reset-peak", "--pid", str(target.pid), "--delay", "0.02")
    finally:
        target.wait(TIMEOUT)
    assert (code, err) == (0, "")
    assert "source=sampling+hwm" in out


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_attach_to_a_missing_pid_is_one_error_line() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(TIMEOUT)
    code, _, err = _main("--pid", str(proc.pid))
    assert code == 1 and err == f"error: ProcessLookupError: no process with pid {proc.pid}\n"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU driver is present")
def test_cuda_without_a_driver_is_one_error_line_and_no_leftover_command() -> None:
    pytest.importorskip("pynvml")
    code, out, err = _main("--cuda", "--", sys.executable, "-c", "import time; time.sleep(30)")
    # a probe that cannot be read here: a usage error before anything runs (exit 2)
    assert code == 2 and out == ""
    assert err.startswith("error: --probe nvml: cannot be read here: cuda=True but NVML")


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_real_subprocess_exits_with_the_command_code() -> None:
    begin = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", "--",
         sys.executable, "-c", ALLOC.format(code=5)],
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 5, res.stderr
    assert "cpu: peak" in res.stdout and res.stderr == ""
    assert time.monotonic() - begin < TIMEOUT


@pytest.mark.parametrize("quiet", [["-q"], []])
def test_where_of_a_program_calling_os_exit_still_reports(tmp_path: Path, quiet: list[str]) -> None:
    # GIVEN a script that allocates then ends with os._exit(7) (no unwinding, no atexit)
    script = tmp_path / "ex.py"
    script.write_text("import os\nb = bytearray(40 * 2**20)\nos._exit(7)\n", encoding="utf-8")
    report = tmp_path / "r.json"
    res = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", *quiet, "--where",
         "--json", str(report), str(script)],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    # THEN its exit code is kept, and the measure is printed and written before it exits
    assert res.returncode == 7, res.stderr
    assert "memory growth by function" in res.stdout and "exit code 7" in res.stdout
    assert "ex.py exited with os._exit(7)" in res.stderr
    assert json.loads(report.read_text(encoding="utf-8"))["exit_code"] == 7


# The gate: a command shorter than the spy's start is measured; its end too.

HUNDRED_MB = "x = b'1' * 100_000_000"
# Allocates then exits at once: with a long --delay the spy never ticks in between.
LATE_SPIKE = "import os; x = b'1' * 100_000_000; os._exit(4)"
# Writes the targets of its descriptors above 2 (the one listing /proc/self/fd is closed
# by then: exists() is False).
FDS = (
    "import os, sys; fds = [f'/proc/self/fd/{f}' for f in os.listdir('/proc/self/fd')];"
    " links = [os.readlink(f) for f in fds if os.path.exists(f) and int(f.split('/')[-1]) > 2];"
    " open(sys.argv[1], 'w').write(repr(links))"
)


# Runs the CLI after a 300 MB peak in the same process (exec keeps ru_maxrss), as when a
# test runner or a notebook that has used much memory starts it.
BIG_PARENT = "import os, sys; x = b'1' * 300_000_000; del x; os.execv(sys.executable, sys.argv[1:])"


def _run_cli(*argv: str, big_parent: bool = False) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", *argv]
    if big_parent:
        cli = [sys.executable, "-c", BIG_PARENT, *cli]
    return subprocess.run(cli, capture_output=True, text=True, timeout=TIMEOUT)


def _gone(pid: int) -> bool:
    """True once the process does not exist, not even as a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def spied_pids(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the pid handed to the spy (the gated shell, then the command)."""
    pids: list[int] = []
    real = SpyCommand._spy

    def spy(self: SpyCommand, pid: int, args: argparse.Namespace) -> Any:
        pids.append(pid)
        return real(self, pid, args)

    monkeypatch.setattr(SpyCommand, "_spy", spy)
    return pids


@pytest.mark.slow
def test_the_command_does_not_inherit_the_gate(tmp_path: Path) -> None:
    # GIVEN the CLI in a process of its own (its gate gets a single-digit descriptor)
    fds = tmp_path / "fds"
    res = _run_cli("--", sys.executable, "-c", FDS, str(fds))
    # THEN the command holds no pipe beyond its standard streams
    assert res.returncode == 0, res.stderr
    assert "pipe:" not in fds.read_text(), fds.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(("cmd", "expected"), [(["true"], 0), (["sh", "-c", "exit 3"], 3)])
def test_a_command_shorter_than_the_spy_start_is_measured(
    tmp_path: Path, cmd: list[str], expected: int
) -> None:
    # GIVEN a command ending in about a millisecond, far less than the spy's start
    res = _run_cli("--json", str(tmp_path / "r.json"), "--", *cmd)
    # THEN it is measured (the spy was attached before it ran) and its exit code returned
    assert res.returncode == expected, res.stderr
    assert res.stderr == "" and "cpu: peak" in res.stdout and "duration" in res.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cpu"]["n"] >= 1 and 0 < doc["cpu"]["peak"] < 50 * 2**20
    assert doc["exit_code"] == expected and doc["target_exited"] is True


@pytest.mark.slow
def test_a_100_mb_allocation_of_a_few_ms_is_measured(tmp_path: Path) -> None:
    res = _run_cli("--json", str(tmp_path / "r.json"), "--", sys.executable, "-c", HUNDRED_MB)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["cpu"]["peak"] >= 95e6


@pytest.mark.slow
@pytest.mark.parametrize("big_parent", [False, True])
def test_a_spike_after_the_last_tick_is_measured_at_the_exit(
    tmp_path: Path, big_parent: bool
) -> None:
    # GIVEN a command allocating 100 MB then exiting, with a tick every 5 s:
    # the spy's only tick is before the gate opens
    res = _run_cli("--delay", "5", "--json", str(tmp_path / "r.json"),
                   "--", sys.executable, "-c", LATE_SPIKE, big_parent=big_parent)  # fmt: skip
    # THEN the peak comes from the kernel's figure at the exit (ru_maxrss), in the series too
    assert res.returncode == 4, res.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cpu"]["n"] == 1 and doc["cpu"]["peak"] >= 95e6
    assert doc["cpu"]["begin"] < 10 * 2**20  # the gated shell
    assert max(r["bytes"] for r in doc["series"] if r["channel"] == "cpu") >= 95e6
    assert doc["duration"] < TIMEOUT


@pytest.mark.slow
def test_a_missing_command_exits_127_clearly_and_starts_nothing() -> None:
    name = f"no-such-command-{uuid.uuid4().hex}"
    res = _run_cli("--", name, "arg")
    assert (res.returncode, res.stdout) == (127, "")
    assert res.stderr == f"error: command not found: {name}\n"
    leftovers = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if name.encode() in cmdline.read_bytes():
                leftovers.append(cmdline)
    assert leftovers == []


def test_a_path_that_cannot_run_exits_126_or_127(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    assert _main("--", str(tmp_path / "missing"))[0] == 127
    code, _, err = _main("--", str(plain))
    assert code == 126 and err == f"error: command not executable: {plain}\n"
    assert _main("--", str(tmp_path))[0] == 126


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_a_command_vanished_after_the_check_exits_127_from_the_shell(
    monkeypatch: pytest.MonkeyPatch, spied_pids: list[int], capfd: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a command found by the check, gone when the gate's exec runs
    monkeypatch.setattr(_cli_spy.shutil, "which", lambda name: name)
    code, out, _ = _main("--", "no-such-command-xyz")
    # THEN the shell's code and message; the shell was measured and reaped
    assert code == 127 and "cpu: peak" in out and "exit code 127" in out
    assert "no-such-command-xyz: not found" in capfd.readouterr().err
    assert len(spied_pids) == 1 and _gone(spied_pids[0])


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_the_command_is_reaped_no_zombie(spied_pids: list[int]) -> None:
    code, out, err = _main("--", "sh", "-c", "exit 3")
    assert code == 3 and "cpu: peak" in out, err
    assert len(spied_pids) == 1 and _gone(spied_pids[0])


@pytest.mark.timeout(TIMEOUT)
def test_a_spy_failing_to_start_kills_the_gated_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a spy that cannot start
    pids: list[int] = []

    def broken(self: SpyCommand, pid: int, args: argparse.Namespace) -> Any:
        pids.append(pid)
        raise RuntimeError("the memory spy did not start")

    monkeypatch.setattr(SpyCommand, "_spy", broken)
    marker = tmp_path / "ran"
    begin = time.monotonic()
    code, out, err = _main("--", "touch", str(marker))
    # THEN one error line, the command never ran, the shell is killed and reaped at once
    assert (code, out) == (1, "")
    assert err == "error: RuntimeError: the memory spy did not start\n"
    assert not marker.exists() and len(pids) == 1 and _gone(pids[0])
    assert time.monotonic() - begin < 5


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_the_gate_works_above_descriptor_9() -> None:
    # GIVEN descriptors 3 to 9 all taken: the gate's pipe gets a two-digit one,
    # which dash cannot name in a redirection
    taken: list[int] = []
    try:
        while (fd := os.open(os.devnull, os.O_RDONLY)) <= 9:
            taken.append(fd)
        os.close(fd)
        code, out, err = _main("--", "sh", "-c", "exit 3")
    finally:
        for fd in taken:
            os.close(fd)
    # THEN the command is still gated and measured
    assert code == 3 and "cpu: peak" in out, err


def _child_named(ppid: int, name: str) -> int | None:
    """The pid of a child of ``ppid`` running ``name``, None if none yet."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):  # gone meanwhile
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            head, _, rest = stat.read_text().rpartition(")")
            if head.endswith(f"({name}") and int(rest.split()[1]) == ppid:
                return int(stat.parent.name)
    return None


def _spy_sleep_then(
    send: Callable[[int], None],
) -> tuple[subprocess.Popen[str], str, str, int | None]:
    """Runs ``spy -- sleep 30`` in a session of its own, calls ``send(cli_pid)`` once the
    gate opened (the shell exec'd sleep), and waits for the CLI.

    :return: the CLI, its stdout and stderr, and the pid of sleep (None if never seen)
    """
    cli = subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", "--", "sleep", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT / 2
        while (sleeper := _child_named(cli.pid, "sleep")) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        send(cli.pid)
        out, err = cli.communicate(timeout=TIMEOUT / 2)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(TIMEOUT)
    return cli, out, err, sleeper


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_ctrl_c_reports_the_measure_and_the_command_s_signal() -> None:
    # GIVEN the CLI running `sleep 30` in a session of its own (its own terminal group)
    # WHEN Ctrl-C: SIGINT to the whole group, the CLI and the command
    cli, out, err, _ = _spy_sleep_then(lambda pid: os.killpg(pid, signal.SIGINT))
    # THEN the measure and the command's own status (killed by SIGINT: 130), not 0
    assert cli.returncode == 130, err
    assert "cpu: peak" in out and "exit code 130" in out


@pytest.mark.parametrize("option", ["--json", "--csv", "--plot"])
def test_unwritable_outputs_are_refused_before_the_command_runs(
    tmp_path: Path, option: str
) -> None:
    # GIVEN a command that leaves a trace, and an output in a folder that does not exist
    trace = tmp_path / "ran"
    target = str(tmp_path / "missing-folder" / "out.file")
    # WHEN the spy is asked to write there THEN one error line and the command never ran
    code, out, err = _main(option, target, "--", "touch", str(trace))
    assert (code, out) == (2, "")
    assert f"cannot write {option}" in err and err.count("\n") == 1
    assert not trace.exists()


# --- other tools' view of the command: ru_maxrss, /usr/bin/time ----------------------

# 200 MB live for a moment, freed, then 0.3 s of ticks resetting the high-water mark.
FREED_SPIKE = "import time; b = b'x' * 200_000_000; del b; time.sleep(0.3)"


def test_help_says_what_the_resets_do(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = _main("--help")
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "--no-reset-peak" in text and "ru_maxrss" in text and "high-water mark" in text


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.skipif(not os.path.exists("/usr/bin/time"), reason="needs GNU time (/usr/bin/time)")
@pytest.mark.parametrize("reset", [True, False])
def test_the_true_maximum_is_reported_and_time_is_right_without_reset(
    tmp_path: Path, reset: bool
) -> None:
    # GIVEN the CLI under /usr/bin/time, spying on a command whose 200 MB are freed early
    options = [] if reset else ["--no-reset-peak"]
    res = subprocess.run(
        ["/usr/bin/time", "-f", "TIME-MAXRSS-KB %M", sys.executable, "-m",
         "onnxrt_backend_dev.monitoring", "spy", *options, "--json", str(tmp_path / "r.json"),
         "--", sys.executable, "-c", FREED_SPIKE],
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    time_kb = int(res.stderr.split("TIME-MAXRSS-KB")[-1])
    doc = json.loads((tmp_path / "r.json").read_text())
    # THEN the spy reports the command's true maximum, resets or not, beside ru_maxrss
    assert doc["max_rss"] >= 195e6 and "max RSS" in res.stdout
    if reset:
        # the resets lowered the command's ru_maxrss, and so what time reads; the spy says so
        assert doc["ru_maxrss"] < 150e6 and time_kb * 1024 < 150e6
        assert "lowered by the spy's resets" in res.stdout
        assert doc["peak_source"] == "hwm"
    else:
        # nothing written to clear_refs: time and ru_maxrss see the 200 MB
        assert doc["ru_maxrss"] >= 195e6 and time_kb * 1024 >= 195e6
        assert doc["peak_source"] == "sampling+hwm"


# --- signals: SIGTERM, SIGHUP forwarded; SIGINT to the CLI alone ---------------------

# Writes its marker once ready (the SIGTERM/SIGHUP disposition set), then sleeps.
READY_THEN_SLEEP = (
    "import signal, sys, time\n"
    "if sys.argv[2] == 'ignore':\n"
    "    for s in (signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
    "open(sys.argv[1], 'w').close()\n"
    "time.sleep(30)\n"
)


def _signal_when(marker: Path, signum: int) -> None:
    """Sends ``signum`` to this process (the CLI, in process) once ``marker`` exists."""
    deadline = time.monotonic() + TIMEOUT / 2
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(os.getpid(), signum)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(
    ("signum", "behaviour", "command_code"),
    [
        (signal.SIGTERM, "default", 143),  # dies of the forwarded signal
        (signal.SIGHUP, "default", 129),
        (signal.SIGTERM, "ignore", 137),  # ignores it: killed after the grace
    ],
)
def test_sigterm_and_sighup_are_forwarded_and_the_measure_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spied_pids: list[int],
    signum: int,
    behaviour: str,
    command_code: int,
) -> None:
    import threading

    monkeypatch.setattr(_spy_command, "_INTERRUPT_GRACE", 0.5)
    marker, report = tmp_path / "ready", tmp_path / "r.json"
    sender = threading.Thread(target=_signal_when, args=(marker, signum), daemon=True)
    sender.start()
    # WHEN the CLI gets the signal while the command runs
    code, out, err = _main(
        "--json", str(report), "--", sys.executable, "-c", READY_THEN_SLEEP, str(marker), behaviour
    )
    sender.join(TIMEOUT)
    # THEN the conventional exit code, the command's own status, the measure written
    assert code == 128 + signum, err
    assert f"exit code {command_code}" in out and "cpu: peak" in out
    assert f"{signal.Signals(signum).name} forwarded to the command" in err
    doc = json.loads(report.read_text())
    assert (doc["exit_code"], doc["signal"]) == (command_code, signum)
    # AND the command is gone (reaped), not left running under pid 1
    assert len(spied_pids) == 1 and _gone(spied_pids[0])


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_one_sigint_to_the_cli_alone_stops_the_command_cleanly() -> None:
    # GIVEN the CLI running `sleep 30` in a session of its own
    # WHEN SIGINT reaches the CLI only (kill -INT), not the command
    cli, out, err, sleeper = _spy_sleep_then(lambda pid: os.kill(pid, signal.SIGINT))
    # THEN the command got SIGINT and ended of it (130), not SIGKILL (137)
    assert cli.returncode == 130, err
    assert "exit code 130" in out and "cpu: peak" in out
    assert sleeper is not None and _gone(sleeper)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_sigterm_while_attached_ends_the_measure_not_the_process(tmp_path: Path) -> None:
    import threading

    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    default = signal.getsignal(signal.SIGTERM)

    def send_once_trapped() -> None:
        deadline = time.monotonic() + TIMEOUT / 2
        while signal.getsignal(signal.SIGTERM) == default and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send_once_trapped, daemon=True)
    sender.start()
    try:
        code, out, err = _main("--pid", str(target.pid), "--json", str(tmp_path / "r.json"))
        sender.join(TIMEOUT)
        # THEN the measure is written, the exit code is 143, the spied process lives on
        assert code == 143, err
        assert out.startswith(f"pid {target.pid}\n") and "cpu: peak" in out
        assert json.loads((tmp_path / "r.json").read_text())["signal"] == signal.SIGTERM
        assert target.poll() is None
    finally:
        target.kill()
        target.wait(TIMEOUT)
    assert signal.getsignal(signal.SIGTERM) == default  # the handler was put back

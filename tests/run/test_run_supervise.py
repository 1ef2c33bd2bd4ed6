"""The supervision of children (``_run.supervise``): groups, gate, timeout, signals,
death with the parent, and the janitor after a ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import DATA

from onnxrt_backend_dev.monitoring._errors import CommandNotFound
from onnxrt_backend_dev.monitoring._run.supervise import Exit, Supervisor, check_command, shell_code

TIMEOUT = 60
# Bounds that hold on a loaded 2-core machine: what must be quick is well under them.
SLOW = 15.0


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _read_pids(path: Path, count: int) -> list[int]:
    """The pids a child wrote into ``path`` (one a line), once ``count`` are there."""
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(w) for w in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} pids")


# A shell that starts a grandchild in its group and writes both pids, then waits.
FAMILY = '{trap}sleep 60 & echo $! >> "$1"; echo $$ >> "$1"; wait'


@pytest.mark.parametrize(
    ("status", "code", "killed_by"), [(0, 0, None), (3 << 8, 3, None), (9, 137, 9), (15, 143, 15)]
)
def test_wait_statuses_read_as_a_shell_does(status: int, code: int, killed_by: int | None) -> None:
    assert shell_code(status) == code
    assert (Exit(status).code, Exit(status).killed_by) == (code, killed_by)


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("no-such-command-xyz", 127, "command not found: no-such-command-xyz"),
        ("", 127, "command not found: "),
        ("/nonexistent/cmd", 127, "command not found: /nonexistent/cmd"),
        ("/", 126, "command not executable: /"),
        (
            str(DATA / "profiled_script.py"),
            126,
            f"command not executable: {DATA}/profiled_script.py",
        ),
    ],
)
def test_a_command_that_cannot_run_is_refused_as_a_shell_does(
    name: str, code: int, message: str
) -> None:
    with pytest.raises(CommandNotFound) as caught:
        check_command(name)
    assert (caught.value.exit_code, str(caught.value)) == (code, message)


def test_a_runnable_command_is_found() -> None:
    assert os.path.isabs(check_command("sh")) and check_command("/bin/sh") == "/bin/sh"


@pytest.mark.timeout(TIMEOUT)
def test_start_of_a_missing_path_is_one_error_with_127() -> None:
    with Supervisor() as sup, pytest.raises(CommandNotFound) as caught:
        sup.start(["/nonexistent/cmd"], stdin=subprocess.DEVNULL)
    assert caught.value.exit_code == 127


@pytest.mark.timeout(TIMEOUT)
def test_the_gate_holds_the_command_until_released(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with Supervisor() as sup:
        child = sup.start(["touch", str(marker)], gate=True, stdin=subprocess.DEVNULL)
        time.sleep(0.3)
        # THEN it does not run until released
        assert child.poll() is None and not marker.exists() and child.gated
        child.release()
        assert sup.wait(child, SLOW).code == 0 and marker.exists()


@pytest.mark.timeout(TIMEOUT)
def test_a_gate_never_released_never_runs_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with Supervisor() as sup:
        child = sup.start(["touch", str(marker)], gate=True, stdin=subprocess.DEVNULL)
    # THEN ended at its gate by the supervisor's exit (the shell reads end-of-file: 125)
    assert child.exit is not None and child.exit.code == 125 and not marker.exists()


@pytest.mark.timeout(TIMEOUT)
def test_the_gate_is_not_inherited_by_the_command(tmp_path: Path) -> None:
    fds = tmp_path / "fds"
    script = (
        "import os,sys; f=os.listdir('/proc/self/fd'); open(sys.argv[1],'w').write(' '.join(f))"
    )
    with Supervisor() as sup:
        child = sup.start(
            [sys.executable, "-c", script, str(fds)],
            gate=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        child.release()
        assert sup.wait(child, SLOW).code == 0
    assert set(fds.read_text().split()) <= {"0", "1", "2", "3"}  # 3: listdir's own


@pytest.mark.timeout(TIMEOUT)
def test_a_timeout_ends_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with Supervisor(grace=0.5) as sup:
        child = sup.start(
            ["sh", "-c", FAMILY.format(trap="trap '' TERM; "), "sh", str(pids)],
            stdin=subprocess.DEVNULL,
        )
        family = _read_pids(pids, 2)
        ended = sup.wait(child, 0.5)
    # THEN timed out, and the shell (which ignores SIGTERM) and its grandchild are gone
    assert ended.timed_out and ended.killed_by == signal.SIGKILL
    assert _gone_within(family, SLOW)


@pytest.mark.timeout(TIMEOUT)
def test_what_is_left_of_a_group_is_ended_with_its_leader(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with Supervisor() as sup:
        # GIVEN a leader that exits at once, leaving a background child in its group
        child = sup.start(
            ["sh", "-c", 'sleep 60 & echo $! > "$1"', "sh", str(pids)], stdin=subprocess.DEVNULL
        )
        assert sup.wait(child, SLOW).code == 0
    assert _gone_within(_read_pids(pids, 1), SLOW)


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_this_process_is_forwarded_to_the_group(tmp_path: Path, signum: int) -> None:
    pids = tmp_path / "pids"
    with Supervisor(grace=0.5) as sup:
        child = sup.start(["sh", "-c", FAMILY.format(trap=""), "sh", str(pids)], group=True)
        family = _read_pids(pids, 2)
        # WHEN this process receives the signal (its handler, as from the kernel)
        sup.signals.handler(signum, None)
        ended = sup.wait(child, SLOW)
        # THEN the shell died of it, the command must stop, its grandchild is gone too
        assert ended.killed_by in (signum, signal.SIGKILL)
        assert sup.stopped == signum and sup.exit_code == 128 + signum
    assert _gone_within(family, SLOW)


@pytest.mark.timeout(TIMEOUT)
def test_a_child_ignoring_the_forwarded_signal_is_killed_after_the_grace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with Supervisor(grace=0.3) as sup:
        child = sup.start(
            ["sh", "-c", FAMILY.format(trap="trap '' TERM; "), "sh", str(pids)], group=True
        )
        family = _read_pids(pids, 2)
        sup.signals.handler(signal.SIGTERM, None)
        # THEN the timer thread kills it: the wait returns without anyone else acting
        assert sup.wait(child, SLOW).killed_by == signal.SIGKILL
    assert _gone_within(family, SLOW)


@pytest.mark.timeout(TIMEOUT)
def test_a_signal_before_a_start_means_the_child_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with Supervisor() as sup:
        sup.signals.handler(signal.SIGTERM, None)
        child = sup.start(["touch", str(marker)], gate=True, stdin=subprocess.DEVNULL)
        ended = sup.wait(child, SLOW)
    assert ended.code in (125, 137) and not marker.exists()


@pytest.mark.timeout(TIMEOUT)
def test_a_gated_command_runs_once_released_and_returns_its_code() -> None:
    with Supervisor() as sup:
        child = sup.start(["sh", "-c", "exit 7"], gate=True, stdin=subprocess.DEVNULL)
        time.sleep(0.1)
        assert child.poll() is None  # held at its gate
        child.release()
        assert sup.wait(child, SLOW).code == 7
        failing = sup.start([sys.executable, "-c", "1 // 0"], stderr=subprocess.DEVNULL)
        assert sup.wait(failing, SLOW).code == 1


@pytest.mark.timeout(TIMEOUT)
def test_a_temporary_folder_is_removed_at_the_end(tmp_path: Path) -> None:
    with Supervisor() as sup, sup.folder(str(tmp_path / "runs-")) as folder:
        Path(folder, "x").write_text("x")
    assert not os.path.exists(folder)


# A supervisor in a process of its own: a group of two sleeps, a folder, then it waits.
SUPERVISOR = textwrap.dedent(
    """
    import subprocess, sys, time
    from onnxrt_backend_dev.monitoring._run.supervise import Supervisor
    with Supervisor() as sup, sup.folder(sys.argv[1]) as folder:
        sup.start(["sh", "-c", 'sleep 60 & echo $! >> "$1"; echo $$ >> "$1"; wait',
                   "sh", sys.argv[2]], stdin=subprocess.DEVNULL)
        print(folder, flush=True)
        time.sleep(60)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_kill_9_of_the_supervisor_leaves_no_process_and_no_folder(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(tmp_path / "runs-"), str(pids)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        folder = proc.stdout.readline().strip()
        family = _read_pids(pids, 2)
        assert os.path.isdir(folder)
        # WHEN the supervisor is killed outright (the OOM killer, kill -9)
        proc.kill()
        proc.wait(TIMEOUT)
        # THEN its child dies with it, the janitor kills the group and removes the folder
        assert _gone_within(family, SLOW)
        deadline = time.monotonic() + SLOW
        while os.path.exists(folder) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(folder)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()

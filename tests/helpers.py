"""What the tests share: a fake terminal, an in-process CLI run, a checked subprocess run,
headless chromium."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from onnxrt_backend_dev.monitoring._cli import dispatch as _cli

# The tests folder (where the shared fakes live), its data and the repository root.
TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
ROOT = TESTS.parent


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so that live status lines are drawn."""

    def isatty(self) -> bool:
        return True


def run_cli(command: str, *argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    """Runs ``main([command, *argv])`` in process.

    :param command: the subcommand
    :param argv: its arguments
    :param err: the error stream (a new StringIO if None)
    :return: exit code, stdout, stderr
    """
    out = io.StringIO()
    err = io.StringIO() if err is None else err
    code = _cli.main([command, *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def run_checked(
    cmd: Sequence[str | Path],
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    what: str = "",
) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd`` with no input and a timeout; fails the test with its output if it fails.

    :param cmd: the command
    :param cwd: its working folder
    :param timeout: seconds before it is killed
    :param env: its environment (this process's if None)
    :param what: what the command is, for the failure message (the command if empty)
    :return: the completed process
    """
    args = [str(c) for c in cmd]
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{what or ' '.join(args)} failed with exit code {proc.returncode}\n"
        f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    )
    return proc


def browser() -> str | None:
    """The headless browser the HTML tests open pages in, None without one."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dump_dom(url: str, timeout: float = 60.0, virtual_time_ms: int | None = None) -> str:
    """Loads ``url`` in headless chromium and returns the DOM after its scripts ran.

    :param url: the page
    :param timeout: seconds before the browser is killed
    :param virtual_time_ms: lets timers and image errors fire first (virtual time)
    :return: the DOM as HTML
    """
    path = browser()
    assert path is not None
    budget = [] if virtual_time_ms is None else [f"--virtual-time-budget={virtual_time_ms}"]
    with tempfile.TemporaryDirectory() as profile_dir:
        cmd = [
            path,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile_dir}",
            *budget,
            "--dump-dom",
            url,
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return out.decode("utf-8", "replace")

"""What the tests share: a fake terminal, an in-process CLI run, a checked subprocess run,
headless chromium."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from onnxrt_backend_dev.monitoring._cli import dispatch as _cli

# The tests folder (where the shared fakes live), its data and the repository root.
TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
ROOT = TESTS.parent

F = TypeVar("F", bound=Callable[..., Any])


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


_TREE_ROW = re.compile(
    r"^((?:[│|` ]  |[├└|`][─-] )*)(?:\[\d+\] )?([\d.]+) (s|ms|µs)\s+[\d.]+ %  (.+?)(  .*)?$"
)
_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


def tree_rows(text: str) -> list[tuple[int, float, str, str]]:
    """The rows of a call tree's text (the sampled ``profile``'s and ``--cprofile``'s):
    ``(depth, seconds, name, the rest)``, the top level under the thread's line at
    depth 1.

    :param text: the text
    :return: the rows in order
    """
    found = []
    for line in text.splitlines():
        m = _TREE_ROW.match(line)
        if m:
            seconds = float(m.group(2)) * _UNITS[m.group(3)]
            found.append((len(m.group(1)) // 3, seconds, m.group(4), m.group(5) or ""))
    return found


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


# One try of the browser, and a browser test's own budget: a hung try is retried (see
# dump_dom) and a test loads up to three pages, all under pytest's per-test timeout.
BROWSER_TRY_S = 45.0
BROWSER_TEST_TIMEOUT_S = 420


def needs_browser(test: F) -> F:
    """Marks a test that opens pages in chromium: skipped without one, with the time for
    a retry of a hung browser."""
    test = pytest.mark.timeout(BROWSER_TEST_TIMEOUT_S)(test)
    return pytest.mark.skipif(browser() is None, reason="no chromium to open the page")(test)


def dump_dom(url: str, timeout: float = BROWSER_TRY_S, virtual_time_ms: int | None = None) -> str:
    """Loads ``url`` in headless chromium and returns the DOM after its scripts ran.

    Chromium on a loaded machine now and then hangs before it loads anything (1 suite in
    20 at load 3: creating its profile, starting its zygote). That is the browser, not the
    page: a hung try is retried with a fresh profile, and if a trivial page hangs too the
    test is skipped with that reason. A page that hangs where a trivial one loads fails.

    :param url: the page
    :param timeout: seconds before one try of the browser is killed
    :param virtual_time_ms: lets timers and image errors fire first (virtual time)
    :return: the DOM as HTML
    """
    path = browser()
    assert path is not None
    for _ in range(2):
        dom = _dump_dom_once(path, url, timeout, virtual_time_ms)
        if dom is not None:
            return dom
    if _dump_dom_once(path, "data:text/html,<p>ok</p>", timeout, None) is None:
        pytest.skip(f"headless chromium hangs on a trivial page too ({timeout:g} s): the machine")
    dom = _dump_dom_once(path, url, timeout, virtual_time_ms)
    assert dom is not None, f"the page never settled in chromium ({timeout:g} s, 3 tries): {url}"
    return dom


def _dump_dom_once(path: str, url: str, timeout: float, virtual_time_ms: int | None) -> str | None:
    """One try of :func:`dump_dom`: the DOM, or None if the browser did not end in time."""
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
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                return None
            # A browser that printed the whole DOM and then hung on its way out did its job.
            return out.decode("utf-8", "replace") if b"</html>" in out else None
        finally:
            if proc.poll() is None:
                _kill_group(proc.pid)
                proc.wait()
    return out.decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    """Kills the browser and its helpers (its own process group), gone or not."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)

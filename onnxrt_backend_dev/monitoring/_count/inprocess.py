"""Blocks counted inside a process that callgrind runs: the pytest plugin's
``--monitoring-counter instructions`` runs the whole session under callgrind, its
instrumentation off, and each measured block turns it on, runs, and dumps the counters
(valgrind's client requests, the compiled ``_client`` module). Outside valgrind nothing
here is active.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from .._errors import CounterError
from .valgrind import environment, find_valgrind, interpreter, read_total

# The folder of the session's dumps, set by the outer process for the counted one.
FOLDER_VARIABLE = "ONNXRT_MONITORING_COUNT_DIR"
NOT_BUILT = (
    "--monitoring-counter instructions needs valgrind's client requests, a compiled part "
    "of this package built by pip where valgrind's headers are found (apt-get install "
    "valgrind, then reinstall the package)"
)


def client() -> ModuleType | None:
    """The compiled client requests, None when they were not built."""
    import importlib

    try:
        return importlib.import_module(__name__.rsplit(".", 1)[0] + "._client")
    except ImportError:
        return None


def active() -> bool:
    """Whether this process is a counted session's: valgrind runs it and the outer
    process named the dumps' folder."""
    found = client()
    return bool(os.environ.get(FOLDER_VARIABLE)) and found is not None and found.running() > 0


def _dump(folder: str) -> int:
    """The instructions of the dump just written (the newest of this process), removed."""
    files = glob.glob(os.path.join(folder, f"count.{os.getpid()}.*"))
    files = [f for f in files if f.rsplit(".", 1)[-1].isdigit()]
    if not files:
        raise CounterError("callgrind left no dump of the counted block", usage=False)
    newest = max(files, key=lambda f: int(f.rsplit(".", 1)[-1]))
    try:
        return read_total(newest)
    finally:
        for f in files:
            with contextlib.suppress(OSError):
                os.remove(f)


class Count:
    """What a counted block counted: ``instructions`` once it ended."""

    def __init__(self) -> None:
        self.instructions = 0


@contextlib.contextmanager
def counting(label: str) -> Iterator[Count]:
    """Counts the instructions of the ``with`` block (in a counted session).

    :param label: names the dump
    :return: the count, filled at the end of the block
    :raises CounterError: not in a counted session, or no dump was left
    """
    found = client()
    folder = os.environ.get(FOLDER_VARIABLE, "")
    if found is None or not folder:
        raise CounterError("not in a counted session (pytest --monitoring-counter instructions)")
    result = Count()
    found.begin()
    try:
        yield result
    finally:
        found.end(label.replace("\n", " ")[:200])
        result.instructions = _dump(folder)


def measure(
    stmt: str | Callable[[], Any],
    context: dict[str, Any] | None,
    setup: str | None,
    warmup: int,
    keep_gc: bool,
    executions: int = 100,
) -> dict[str, Any]:
    """A statement's instructions per execution, counted here.

    :param stmt: a str or a callable
    :param context: the globals of a str statement
    :param setup: run before the loop, not counted
    :param warmup: executions before it, not counted
    :param keep_gc: keep the garbage collector on
    :param executions: executions counted
    :return: ``measure_time``'s keys, in instructions per execution
    """
    import sys
    import time

    from .._gc import gc_paused
    from .._timing.template import build_timer

    inner = build_timer(stmt, context, setup)
    if warmup:
        inner(itertools.repeat(None, warmup), time.perf_counter)
    with gc_paused(keep_gc), counting("measure") as count:
        inner(itertools.repeat(None, executions), time.perf_counter)
    per = count.instructions / executions
    return {
        "average": per, "deviation": 0.0, "min_exec": per, "max_exec": per, "repeat": 1,
        "number": executions, "ttime": per, "context_size": sys.getsizeof(context or {}),
        "warmup_time": 0.0, "counter": "instructions", "unit": "instructions", "noise": 0.0,
        "median": per, "runs": executions, "counts": [count.instructions], "unseen": "",
    }  # fmt: skip


def run_session(args: Sequence[str], cwd: str) -> int:
    """Runs a pytest session under callgrind, its output this process's (signals
    forwarded).

    :param args: pytest's arguments as given
    :param cwd: the folder pytest was started in
    :return: its exit code (``128 + N`` when signal N stopped it)
    :raises CounterError: valgrind or the compiled client requests are missing
    """
    import sys

    from .._run.program import run_child, supervised

    valgrind = find_valgrind()
    if client() is None:
        raise CounterError(NOT_BUILT)
    python = interpreter(sys.executable).binary
    with supervised() as sup, sup.folder("onnxrt-monitoring-counted-") as folder:
        argv = [
            valgrind, "--tool=callgrind", "--instr-atstart=no", "--dump-line=no",
            "--dump-instr=no", f"--callgrind-out-file={os.path.join(folder, 'count')}.%p",
            f"--log-file={os.path.join(folder, 'valgrind')}.%p", python, "-m", "pytest", *args,
        ]  # fmt: skip
        env = {**environment(), FOLDER_VARIABLE: folder}
        # In the terminal's job when it reads the terminal: pytest's output is the user's.
        ended = run_child(sup, argv, show_output=True, cwd=cwd, env=env, group=None)
        return sup.exit_code or (ended.code if ended is not None else 1)

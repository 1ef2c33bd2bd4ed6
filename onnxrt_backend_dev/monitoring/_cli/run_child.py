"""The child of ``run``: a fresh interpreter that runs the program as ``__main__`` under
the ticks and streams them to the command (:func:`.._report.runner.run_fresh`).

Why not the forked command itself: a fork carries the command's memory (its modules,
argparse, the report's model and renderers: 4-6 MB measured), which then counts in the
program's peak. This interpreter imports only the recorder and what runs the program,
measures its RSS before and after those imports, and takes the difference (the tool's
own start-up memory) off the figures it sends (see :mod:`.._report.child`).

:data:`BOOT` is the code given to ``python -c``: it reads the RSS first, before any of the
tool's imports, then calls :func:`main` with the arguments of :func:`command_line`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import types

from .._report.child import record
from .._report.follow import follow_descendants
from .._report.recording import resident
from .._run.program import Outcome, Target, as_main, run_main
from .guard import terminating_signals

# sys.argv of ``python -c BOOT ROOT ...`` is ['-c', ROOT, ...]: ROOT (where this package
# is) replaces the '' that -c puts first in sys.path, and the program's folder replaces
# it when the program starts, so that the program sees the sys.path of a plain run. The
# RSS is read first: what comes after is the tool's share, taken off the figures.
BOOT = """\
import os, sys
try:
    try:
        _f = os.open("/proc/self/statm", os.O_RDONLY)
        _rss = int(os.pread(_f, 64, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
        os.close(_f)
    except (OSError, ValueError, IndexError):
        _rss = 0
    if sys.path and sys.path[0] == "":
        sys.path[0] = sys.argv[1]
    else:  # -P or -I: no '' to replace, the standard library may come first
        sys.path.insert(0, sys.argv[1])
    from onnxrt_backend_dev.monitoring._cli.run_child import main
except KeyboardInterrupt:
    os._exit(130)
main(_rss)
"""

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def command_line(fd: int, interval: float, target: Target) -> list[str]:
    """The child's command line.

    :param fd: the pipe's write end
    :param interval: seconds between ticks
    :param target: the script (or folder) or the module, and its arguments
    :return: the interpreter, its flags (``-X``, ``-W``, ``-O`` of this one), ``-c BOOT``
        and the arguments
    """
    import subprocess

    # What multiprocessing passes to its own fresh interpreters (spawn).
    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    head = [sys.executable, *flags, "-c", BOOT, _ROOT, str(fd), repr(float(interval))]
    return [*head, target.kind, target.name, *target.args]


def program_of(
    code: types.CodeType, module: types.ModuleType, argv: list[str], path0: str, name: str
) -> Outcome:
    """Runs the program as ``__main__``, every way it can end caught.

    :param code: its code
    :param module: its ``__main__`` module
    :param argv: its ``sys.argv``
    :param path0: its ``sys.path[0]``
    :param name: its name in error messages
    :return: how it ended
    """
    with terminating_signals() as signals, as_main(module, argv, path0):
        try:
            outcome = run_main(code, module, name, sys.stderr)
            # This process ends with os._exit, which skips them: the program's atexit
            # callbacks run here, as at the end of a plain run (files flushed, logging
            # shut down, multiprocessing's pools and semaphores finalized), timed.
            atexit._run_exitfuncs()
            return outcome
        finally:
            signals.program_over()


def main(rss0: float) -> None:
    """The child's life; never returns (``os._exit`` with the program's code).

    :param rss0: the RSS when the interpreter started, bytes (0 if unknown)
    """
    code = 1
    try:
        _, fd, interval, kind, target, *args = sys.argv[1:]
        if kind == "module":
            sys.path[0] = os.getcwd()  # where ``python -m`` looks first
        program, module, argv, path0 = Target(kind, target, tuple(args)).code()
        name = os.path.basename(argv[0])
        ready = resident()
        tool = max(ready - rss0, 0.0) if ready and rss0 else 0.0
        follow_descendants(int(fd), float(interval))  # its spawned Python children
        code = record(
            int(fd),
            lambda: program_of(program, module, argv, path0, name),
            float(interval),
            program,
            tool_rss=tool,
        )
    except KeyboardInterrupt:  # before the program started: as an interrupted program
        code = 130
    except BaseException:  # the recorder failed: say it, the command reports the rest
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing more to say
                stream.flush()
        os._exit(code)

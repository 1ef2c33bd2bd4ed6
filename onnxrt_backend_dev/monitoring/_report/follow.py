"""Python children that are not forks (``multiprocessing``'s spawn, ``subprocess``
running ``python``) recorded too, each as its own tree of the report.

A forked child goes on with the program's recorder (:mod:`.recording`). A fresh
interpreter starts from nothing, so ``run`` leaves two things in the environment the
program hands down: :data:`ENV` (where the stream is, the interval, this package's
folder) and ``PYTHONPATH`` starting with the folder of :mod:`._boot`, whose
``sitecustomize`` every Python started below the program imports at start-up. It calls
:func:`start_in_descendant`: that process opens the program's pipe by its ``/proc``
path (a pipe cannot be inherited across ``subprocess``, which closes the other
descriptors), says who it is (pid, parent, command line) and streams its ticks with its
own pid, as a forked child does; the reader makes one tree per pid. At its exit the
ticks stop and what waits is written (a process killed at once leaves what it had
sent). Linux only (``/proc``); an interpreter that cannot import this package (another
version), ``-E``/``-I`` or a program replacing the environment: not followed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV = "ONNXRT_MONITORING_FOLLOW"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")
# The package's folder (what ``import onnxrt_backend_dev`` needs on sys.path).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
END_TIMEOUT = 2.0  # seconds a following process may take to hand its last ticks over
_FOLLOWING: list[Any] = []


def follow_descendants(fd: int, interval: float) -> None:
    """Leaves in the environment what makes the program's Python children record
    themselves into the pipe ``fd`` (called in the program's process, before it runs).

    :param fd: the pipe's write end in this process
    :param interval: seconds between ticks
    """
    if not os.path.isdir(f"/proc/{os.getpid()}/fd"):
        return  # no /proc: a child could not open the pipe
    os.environ[ENV] = f"/proc/{os.getpid()}/fd/{fd}|{interval!r}|{_ROOT}"
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = BOOT_DIR if not path else BOOT_DIR + os.pathsep + path


def parse_spec(spec: str) -> tuple[str, float] | None:
    """``(pipe path, interval)`` from the variable, None when it makes no sense.

    :param spec: the value of :data:`ENV`
    """
    parts = spec.split("|")
    if len(parts) != 3 or not parts[0].startswith("/proc/"):
        return None
    try:
        interval = float(parts[1])
    except ValueError:
        return None
    if not 1e-4 <= interval <= 60:  # also refuses NaN
        return None
    return parts[0], interval


def start_in_descendant(spec: str) -> bool:
    """Starts recording this process into the program's pipe (from ``sitecustomize``).

    :param spec: the value of :data:`ENV`
    :return: whether it started
    """
    parsed = parse_spec(spec)
    if parsed is None or _FOLLOWING:
        return False
    path, interval = parsed
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:  # the program is gone, or this is not its pipe
        return False
    import atexit

    from .recording import Recording
    from .stream import StreamSink, command_label

    sink = StreamSink(fd)
    # Ticks only, as a forked child: no spy (the command's follows the whole tree).
    recording = Recording(sink, interval, spy=False, sampler=False)
    argv = list(getattr(sys, "orig_argv", sys.argv))
    facts = {"pid": os.getpid(), "ppid": os.getppid(), "command": command_label(argv)}
    sink.send("M", facts)
    _FOLLOWING.append(recording)
    atexit.register(_end, recording, sink)
    return True


def _end(recording: Any, sink: Any) -> None:
    """At exit: the ticks stopped (no signal in the interpreter's teardown), the rest
    handed over."""
    recording.close()
    sink.drain(END_TIMEOUT)

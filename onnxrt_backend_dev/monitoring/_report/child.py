"""The program's side of the flight recorder: records, runs the program, sends the end.

Lean on purpose (the standard library, the recorder, the stream, the sampler): the child
that ``run`` starts is a fresh interpreter importing this and little else, so that what
the tool adds to the program's memory stays small. That share, ``tool_rss``, is measured
(the RSS when the interpreter started, before any of the tool's imports, against the RSS
just before the program starts) and taken off every memory figure the ticks send: the
report's RSS is the program's, as a plain ``python script.py`` would have it; the raw
high-water mark of the process is that plus ``tool_rss``, and the report says so. What
the tool allocates while the program runs (its tables of stacks) is not taken off.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from collections.abc import Callable
from types import CodeType
from typing import Any

from .._run.program import Outcome
from .recording import Recording
from .stream import StreamSink

END_TIMEOUT = 5.0  # seconds to hand the end message over


INPROCESS_ENV = "ONNXRT_MONITORING_INPROCESS_PROBES"


def _inprocess_probes() -> Any:
    """The probes read inside the program (``run --probe torch``), named by the command
    in the environment; None when there are none or they cannot start."""
    spec = os.environ.pop(INPROCESS_ENV, "")  # the program's own children do not inherit it
    if not spec:
        return None
    try:
        from .._memory.inprocess import program_probes

        return program_probes([a for a in spec.split(";") if a])
    except Exception as e:  # the report stands without them, saying why
        return str(e)


def _add_inprocess(inside: Any, facts: dict[str, Any]) -> None:
    if inside is None:
        return
    if isinstance(inside, str):
        facts.setdefault("notes", []).append(f"in-process probes could not start: {inside}")
        return
    from .._memory.inprocess import device_facts

    curves, devices = device_facts(inside.stop())
    facts.setdefault("curves", []).extend(curves)
    facts.setdefault("devices", []).extend(devices)
    facts.setdefault("notes", []).extend(getattr(inside, "notes", ()))


def record(
    wfd: int,
    program: Callable[[], Outcome],
    interval: float,
    root_code: CodeType | None,
    tool_rss: float = 0.0,
) -> int:
    """The child's life: record, run ``program``, send the end to the pipe ``wfd``.

    :param wfd: the pipe's write end
    :param program: runs the program, catching everything it raises
    :param interval: seconds between ticks
    :param root_code: the program's code: stacks start there
    :param tool_rss: bytes of the tool's own start-up memory, taken off the figures
    :return: the program's exit code
    """
    faulthandler.enable(all_threads=True)  # a segfault still prints where it happened
    sink = StreamSink(wfd)
    # The spy runs from the parent (it outlives a killed child): none in here.
    recording = Recording(sink, interval, spy=False, offset=tool_rss, root_code=root_code)
    start: dict[str, Any] = {"t0": recording.t0, "pid": os.getpid()}
    start["started"] = recording.started
    start["tool_rss"] = float(tool_rss)
    start["cpu0"] = recording.cpu0  # the interpreter's start: not the program's CPU time
    # ru_maxrss below this says nothing of this process (the mark before an exec).
    start["maxrss_floor"] = float(recording.memory.floor)
    sink.send("M", start)
    inside = _inprocess_probes()
    try:
        outcome = program()
    finally:
        # The program is over: a Ctrl-C now would lose its end, not stop it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        facts = recording.finish()
        _add_inprocess(inside, facts)
    facts["ending"] = (outcome.kind, outcome.code, outcome.detail)
    facts["dropped"] = int(facts.get("dropped", 0)) + sink.dropped
    sink.send("E", facts)
    sink.drain(END_TIMEOUT)
    return outcome.code

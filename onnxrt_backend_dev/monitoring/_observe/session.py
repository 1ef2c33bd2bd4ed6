"""Observing a program from outside, from its start (a command this process starts) or
from now (a process already running, by its pid).

:func:`choose` is the one choice of collector: the observer where :func:`availability`
(checked once: the platform, ``process_vm_readv``, this interpreter's layout checked
against itself) allows it, the in-process fallback otherwise, and why.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import BadValue, ObserveError
from .observer import Observer, ProcessRecord
from .process import executable, mappings, read_proc, state_of
from .reader import StackReader
from .target import Interpreter, locate
from .verify import Verified, verify

LOCATE_TIMEOUT = 5.0  # seconds a fresh interpreter may take to map its library


class Availability(NamedTuple):
    """Whether the observer can run here.

    :param ok: it can
    :param reason: why not (empty when it can)
    """

    ok: bool
    reason: str


_AVAILABLE: list[Availability] = []


def availability() -> Availability:
    """Whether programs run by this interpreter can be observed from outside (checked
    once: this interpreter's layout read and compared with its own view).

    :return: yes, or no with the reason in words
    """
    if _AVAILABLE:
        return _AVAILABLE[0]
    if not sys.platform.startswith("linux"):
        found = Availability(False, f"reading another process is not implemented on {sys.platform}")
    elif os.environ.get("ONNXRT_MONITORING_OBSERVER", "") == "0":
        found = Availability(False, "ONNXRT_MONITORING_OBSERVER=0 turns it off")
    else:
        try:
            verify(locate(os.getpid()))
            found = Availability(True, "")
        except ObserveError as e:
            found = Availability(False, str(e))
    _AVAILABLE.append(found)
    return found


class Choice(NamedTuple):
    """Who collects: the observer, or the in-process fallback, and why.

    :param observer: the observer collects
    :param why: why the in-process fallback collects instead ('' when the observer does)
    """

    observer: bool
    why: str = ""

    def note(self, fallback: str = "the in-process sampler") -> str:
        """The one note saying which collector ran and why ('' for the observer)."""
        return "" if self.observer else f"collector: {fallback} ({self.why})"


def choose(
    collector: str = "auto", inside: str = "", python: str | None = None, name: str = ""
) -> Choice:
    """The one choice of collector, for every face: the observer where this machine and
    the program's interpreter allow it, the in-process fallback otherwise.

    :param collector: what was asked: ``auto``, ``observer`` or ``in-process``
    :param inside: why the program must be sampled inside ('' when nothing asks it)
    :param python: the program's interpreter (None: this one)
    :param name: how the caller spells the request, for the refusal
    :raises BadValue: ``observer`` asked for where it cannot run
    """
    if collector == "in-process":
        return Choice(False, f"{name or 'collector'} in-process asked for")
    found = availability()
    why = inside or found.reason
    if (
        not why
        and python is not None
        and os.path.realpath(python) != os.path.realpath(sys.executable)
    ):
        why = f"{python!r} is not {sys.executable!r}"
    if why and collector == "observer":
        raise BadValue(f"{name or 'collector'} 'observer' cannot run here: {why}")
    return Choice(not why, why)


class Target(NamedTuple):
    """A process ready to be read.

    :param interpreter: where its interpreter is
    :param verified: the layout's check
    :param reader: its stacks' reader
    :param why_python: why its stacks are read in Python, not by the C walk ('')
    """

    interpreter: Interpreter
    verified: Verified
    reader: StackReader
    why_python: str = ""


def open_target(pid: int) -> Target:
    """Locates, checks and opens a Python process for reading.

    :param pid: the process
    :raises ObserveError: see :func:`.target.locate` and :func:`.verify.verify`
    """
    from .memory import open_memory
    from .walk import attach_native

    interp = locate(pid)
    checked = verify(interp)
    reader = StackReader(open_memory(pid), interp.layout, interp.runtime, interp.types,
                         checked.pthread_tid)  # fmt: skip
    reader.names = checked.names
    why = checked.native or attach_native(reader, pid)
    return Target(interp, checked, reader, why)


def opener(pid: int, patience: float, why: list[str]) -> Callable[[], Any]:
    """What the observer calls, at its samples, to open a process that just started an
    interpreter (its library may not be mapped yet): ``(reader, flags)`` once it is
    readable, None to try again, False to give up (the reason appended to ``why``).

    :param pid: the process
    :param patience: seconds it may take
    :param why: where the reason goes
    """
    start = time.monotonic()

    def attempt() -> tuple[StackReader, bytes, str] | bool | None:
        try:
            target = open_target(pid)
        except ObserveError as e:
            retry = _retry(pid, e, start, patience)
            if retry is None:
                why.append("the program ended before its interpreter could be read")
            elif not retry:
                why.append(str(e))
            return None if retry else False
        return target.reader, target.verified.native_flags, describe(target)

    return attempt


def describe(target: Target) -> str:
    """How a target is read, for the notes of a report.

    :param target: the target
    :return: ``Python 3.11, layout from the table, checked against this interpreter;
        stacks read by the C walker``
    """
    lay = target.interpreter.layout
    against = "this interpreter" if target.verified.how == "self" else "a probe of its executable"
    kept = " (a check kept from an earlier run)" if target.verified.kept else ""
    walk = (f"stacks read in Python: {target.why_python}" if target.why_python
            else "stacks read by the C walker")  # fmt: skip
    return (
        f"Python {lay.name}, layout from the {lay.source}, checked against {against}{kept}; {walk}"
    )


def _retry(pid: int, e: ObserveError, since: float, patience: float) -> bool | None:
    """After a failed open: None when the process is gone, True to try again (it may
    still become readable, and ``patience`` seconds since ``since`` have not passed)."""
    if e.reason == "gone" or not alive(pid):
        return None
    waiting = e.reason == "starting" or (
        e.reason in ("not-python", "unsupported") and _may_become_python(pid)
    )
    return waiting and time.monotonic() - since < patience


def _may_become_python(pid: int) -> bool:
    """Whether a process not readable as Python yet may still become readable: its
    executable is named like an interpreter (its library may be mapping; a reading of
    the mappings can miss lines that change meanwhile), or the dynamic loader is not
    done with it (it has not mapped the C library: an interpreter not found once it has
    is not coming)."""
    import re

    if re.match(r"python\d", os.path.basename(executable(pid) or "")):
        return True
    try:
        names = {os.path.basename(m.path) for m in mappings(pid)}
    except OSError:
        return False
    return not any(n.startswith(("libc.so", "libc-", "libpython")) for n in names)


def attach(pid: int, interval: float, sink: Any) -> tuple[Observer, Target]:
    """An observer of a process already running.

    :param pid: the process
    :param interval: seconds between samples
    :param sink: where its memory ticks go
    :return: the observer (nothing sampled yet) and the target
    :raises ObserveError: see :func:`open_target`
    """
    if pid == os.getpid():
        raise ObserveError("--pid is this command's own process", "refused")
    target = open_target(pid)
    record = ProcessRecord(pid, target.reader, target.verified.native_flags, sink)
    record.collector = describe(target)
    return Observer(record, interval), target


def alive(pid: int) -> bool:
    """Whether a process runs (not gone, not a zombie).

    :param pid: the process
    """
    state = state_of(pid)
    return state is not None and state not in ("Z", "X")


def command_line_of(pid: int) -> str:
    """A process's command line, as one string ('' if unreadable).

    :param pid: the process
    """
    raw = read_proc(f"/proc/{pid}/cmdline", 4096)
    text = " ".join(p.decode(errors="replace") for p in raw.split(b"\0") if p)
    # Untrusted: a control character (an escape sequence) would act on the terminal.
    return "".join(c if c.isprintable() else "?" for c in text)


def label_of(pid: int) -> str:
    """``process PID: command line``.

    :param pid: the process
    """
    return f"process {pid}: {command_line_of(pid)}".rstrip(": ")


def reopen_after_exec(record: ProcessRecord) -> None:
    """What the observer does when a process execs: it is opened again (its interpreter
    maps anew: tried at the next samples), and labelled by its new command line.

    :param record: the process
    """
    record.opener = opener(record.pid, LOCATE_TIMEOUT, [])
    if record.label.startswith("process "):
        record.label = label_of(record.pid)


def follower(make_sink: Callable[[], Any], patience: float = 2.0) -> Callable[[int], Any]:
    """What the observer calls for a new descendant: its record with stacks when it is a
    Python process it can read, with memory only otherwise; None (try again later) while
    a fresh interpreter has not mapped its library yet.

    :param make_sink: a new memory sink for the descendant
    :param patience: seconds a process may take to become readable
    """
    first_seen: dict[int, float] = {}

    def follow(pid: int) -> ProcessRecord | bool | None:
        seen = first_seen.setdefault(pid, time.monotonic())
        try:
            target: Target | None = open_target(pid)
        except ObserveError as e:
            retry = _retry(pid, e, seen, patience)
            if retry is None:
                return False
            if retry:
                return None
            target = None
        reader = target.reader if target is not None else None
        flags = target.verified.native_flags if target is not None else bytes(256)
        record = ProcessRecord(pid, reader, flags, make_sink(), label_of(pid))
        record.collector = describe(target) if target is not None else ""
        record.on_exec = reopen_after_exec
        return record

    return follow

"""The ticks taken inside the program: a timer signal every ``interval`` seconds whose
handler reads the RSS and the high-water mark and keeps the interrupted stack.

Why a signal and not a thread: Python runs the handler in the main thread at the next
point the interpreter checks for signals, which, after a C call that held the GIL (a
``numpy.concatenate``), is right after that call returns, in the frame that called it. So
the stack kept with a rise of the high-water mark is the one that allocated, where a
sampling thread would see the line after (it waits for the GIL). Main thread only.

Cheap per tick: one ``pread`` of ``/proc/self/statm``, one ``getrusage``, a walk of the
stack into a tuple of integers, a dictionary look-up. A stack is resolved into names
once, when first seen, and handed to the sink with its id.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, Protocol

from .._errors import StateError
from .._sampling.aggregate import NO_STACK, RawFrame
from .._sampling.frames import WALKING_CODES, line_of, walk_within
from .._sampling.intern import MIN_CAPACITY, CodeTable, KeyTable, filled, grow


class _Either:
    """Membership in either of two sets, both kept by reference (they may grow)."""

    def __init__(self, first: set[Any], second: set[Any]) -> None:
        self.first, self.second = first, second

    def __contains__(self, item: object) -> bool:
        return item in self.first or item in self.second


MAX_DEPTH = 128  # frames kept per stack, the innermost ones
MAX_STACKS = 50_000  # distinct stacks at most; more count as NO_STACK
MIN_INTERVAL = 0.001
# Timers to use, in order: the first whose signal has no handler of the program's.
_TIMERS = (("SIGALRM", "ITIMER_REAL"), ("SIGPROF", "ITIMER_PROF"))


class Sink(Protocol):
    """Where ticks go: an :class:`.aggregate.Aggregator` or a stream to another process."""

    def add_stack(self, sid: int, frames: tuple[RawFrame, ...]) -> None:
        """Declares a stack."""

    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        """Adds a tick."""


class ProcMemory:
    """Reads the RSS (``/proc/self/statm``) and the high-water mark of the current
    process, less ``offset`` bytes.

    The mark is ``ru_maxrss`` (one cheap call), which Linux keeps equal to ``VmHWM``
    except after an ``exec``: it then keeps at least the mark of the process that called
    ``exec`` (the command that started this one), which the reset of ``clear_refs`` does
    not lower. That inherited floor is read at the start; while ``ru_maxrss`` has not
    passed it, the mark is read from ``VmHWM`` in ``/proc/self/status`` instead (slower,
    exact).

    :param offset: bytes taken off both figures (the tool's own start-up memory, see
        :mod:`.child`)
    """

    def __init__(self, offset: float = 0.0) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes or KiB
        self.offset = float(offset)
        self.fd = _open("/proc/self/statm")
        self.status = _open("/proc/self/status")
        self.floor = 0.0  # ru_maxrss below which it says nothing of this process
        hwm = self._status_hwm()
        maxrss = self._maxrss()
        if hwm is not None and maxrss > hwm:
            self.floor = maxrss
        if self.floor == 0.0 and self.status is not None:
            os.close(self.status)  # ru_maxrss is the mark: no need of the slow file
            self.status = None

    def _maxrss(self) -> float:
        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * self.scale)

    def _status_hwm(self) -> float | None:
        if self.status is None:
            return None
        try:
            data = os.pread(self.status, 8192, 0)
            start = data.index(b"VmHWM:") + 6
            return float(int(data[start : data.index(b"kB", start)]) * 1024)
        except (OSError, ValueError):
            return None

    def high_water_mark(self) -> float:
        """The process's own high-water mark now, bytes (no offset taken)."""
        maxrss = self._maxrss()
        if maxrss > self.floor:
            return maxrss
        hwm = self._status_hwm()
        return maxrss if hwm is None else hwm

    def __call__(self) -> tuple[float, float]:
        """The RSS and the high-water mark now, in bytes, less the offset."""
        hwm = self.high_water_mark() - self.offset
        if self.fd is None:
            return hwm, hwm
        try:
            rss = float(int(os.pread(self.fd, 128, 0).split()[1]) * self.page)
        except (OSError, IndexError, ValueError):
            return hwm, hwm
        return rss - self.offset, hwm

    def close(self) -> None:
        """Closes the files."""
        for name in ("fd", "status"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def resident() -> float | None:
    """The RSS of this process now, bytes (``/proc/self/statm``), None without it."""
    fd = _open("/proc/self/statm")
    if fd is None:
        return None
    try:
        return float(int(os.pread(fd, 128, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, IndexError, ValueError):
        return None
    finally:
        os.close(fd)


def reset_high_water_mark() -> bool:
    """Resets the kernel's high-water mark of this process to its current RSS (Linux):
    the peak measured then is this run's, not what ran before.

    :return: True if it was reset
    """
    try:
        with open("/proc/self/clear_refs", "wb", buffering=0) as f:
            f.write(b"5")
    except OSError:
        return False
    return True


class TickRecorder:
    """Takes a tick every ``interval`` seconds in the main thread.

    :param sink: where ticks go
    :param interval: seconds between ticks (at least ``MIN_INTERVAL``)
    :param clock: the clock (``time.monotonic``, the spy's)
    :param memory: returns ``(rss, hwm)`` in bytes
    :param max_stacks: distinct stacks kept at most
    :param root_code: the program's code (a module's): kept, the frames above it (the
        tool's) left out; a tick outside it has an empty stack
    :param root_frame: the frame of the code measured (kept, the frames above it left out)
    :param offset: bytes taken off the memory read (the default reading only): the tool's
        own start-up memory
    """

    def __init__(
        self,
        sink: Sink,
        interval: float = 0.005,
        clock: Callable[[], float] = time.monotonic,
        memory: Callable[[], tuple[float, float]] | None = None,
        max_stacks: int = MAX_STACKS,
        root_code: CodeType | None = None,
        root_frame: FrameType | None = None,
        offset: float = 0.0,
    ) -> None:
        self.sink = sink
        self.interval = max(float(interval), MIN_INTERVAL)
        self.clock = clock
        self._own_memory = memory is None
        self.memory: Callable[[], tuple[float, float]] = (
            ProcMemory(offset) if memory is None else memory
        )
        self.max_stacks = max_stacks
        self.dropped = 0
        # Arrays, no object per stack or frame (see _sampling.intern): a tick taken while
        # the program fills memory with small objects must not keep it resident.
        self._interned = KeyTable()
        self._codes = CodeTable()  # the codes of the stacks interned, kept alive
        self._frames = KeyTable()  # (id(code), offset) seen; its line in _lines
        self._lines = filled("q", 0, MIN_CAPACITY)
        self._signal: int | None = None
        self._timer: int | None = None
        self._previous: Any = None
        self._busy = False
        self._last_sid: int | None = None
        self.root_code = root_code
        self._own_codes = {TickRecorder._handler.__code__, TickRecorder.tick.__code__}
        self._foreign: set[Any] = set()
        self.root_frame = root_frame

    def tick(self, frame: FrameType | None) -> None:
        """Takes one tick with ``frame`` as the running frame (the handler's body)."""
        t = self.clock()
        rss, hwm = self.memory()
        sid = self._last_sid = self._intern(frame)
        self.sink.add_tick(t, rss, hwm, sid)

    def edge_tick(self) -> None:
        """A tick outside the handler, at the start or the end: the memory then, credited
        to the stack of the last tick (what ran until now), to none at the start."""
        t = self.clock()
        rss, hwm = self.memory()
        sid = NO_STACK if self._last_sid is None else self._last_sid
        self.sink.add_tick(t, rss, hwm, sid)

    @property
    def signal_name(self) -> str:
        """The signal the ticks use (``SIGALRM``, ``SIGPROF``), empty when stopped."""
        return signal.Signals(self._signal).name if self._signal is not None else ""

    def _walk(
        self, frame: FrameType | None, codes: dict[int, CodeType] | None = None
    ) -> tuple[int, ...]:
        """``id(code), f_lasti`` per frame, innermost first, up to the root, a handler's
        frames (a tick's, a sampler's) and what they called left out; ``codes``, when
        given, completed with their codes."""
        return walk_within(
            frame, codes, _Either(self._own_codes, self._foreign),
            self.root_frame, self.root_code, MAX_DEPTH,
        )  # fmt: skip

    def _intern(self, frame: FrameType | None) -> int:
        key = self._walk(frame)
        if not key:
            return NO_STACK  # outside the code measured (the tool's own frames)
        interned = self._interned
        sid = interned.find(key)
        if sid >= 0:
            return sid
        if len(interned) >= self.max_stacks:
            self.dropped += 1
            return NO_STACK
        found: dict[int, CodeType] = {}
        self._walk(frame, found)  # the same frames, now with their codes (kept)
        self._codes.update(found.values())
        sid = interned.add(key)
        self.sink.add_stack(sid, self._resolve(key))
        return sid

    def _resolve(self, key: tuple[int, ...]) -> tuple[RawFrame, ...]:
        frames = []
        seen, lines = self._frames, self._lines
        for i in range(len(key) - 2, -1, -2):  # outermost first
            code = self._codes[key[i]]
            pair = key[i : i + 2]
            fid = seen.find(pair)
            if fid < 0:  # one line-table scan per code and offset, ever
                fid = seen.add(pair)
                grow(lines, fid + 1)
                lines[fid] = line_of(code, key[i + 1])
            name = getattr(code, "co_qualname", code.co_name)
            frames.append((name, code.co_filename, lines[fid], code.co_firstlineno))
        return tuple(frames)

    def own_codes(self) -> set[CodeType]:
        """The code a tick runs (the handler, the sink, the memory reading): another
        sampler interrupting a tick leaves them out."""
        codes = {TickRecorder._handler.__code__, TickRecorder.tick.__code__}
        codes |= {TickRecorder._intern.__code__, TickRecorder._walk.__code__}
        codes |= {TickRecorder._resolve.__code__} | WALKING_CODES
        for obj in (self.sink, self.memory):
            for name in ("__call__", "add_tick", "add_stack", "_send", "flush", "_keep"):
                function = getattr(type(obj), name, None)
                code = getattr(function, "__code__", None)
                if code is not None:
                    codes.add(code)
        for name in ("_date_peak", "_tolerance", "_keep"):  # an aggregator as the sink
            code = getattr(getattr(type(self.sink), name, None), "__code__", None)
            if code is not None:
                codes.add(code)
        return codes

    def skip_codes(self, codes: set[Any]) -> None:
        """Leaves out, at the innermost end of a stack, the frames of another sampler
        whose handler a tick interrupted.

        :param codes: its code objects (kept by reference: it may add more later)
        """
        self._foreign = codes

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._busy:  # a tick interrupting a tick would see the recorder's own frames
            return
        self._busy = True
        try:
            self.tick(frame)
        finally:
            self._busy = False

    def start(self) -> TickRecorder:
        """Installs the handler and starts the timer (main thread only).

        :return: self
        :raises RuntimeError: not the main thread, or both timer signals are taken
        """
        if threading.current_thread() is not threading.main_thread():
            raise StateError("the report's ticks need the main thread (signal handlers)")
        for sig_name, timer_name in _TIMERS:
            signum = getattr(signal, sig_name, None)
            timer = getattr(signal, timer_name, None)
            if signum is None or timer is None:
                continue
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                self.edge_tick()  # the memory at the start
                self._previous = signal.signal(signum, self._handler)
                self._signal, self._timer = signum, timer
                signal.setitimer(timer, self.interval, self.interval)
                return self
        raise StateError("SIGALRM and SIGPROF both have a handler: no timer for the ticks")

    def restart_in_child(self, sink: Sink) -> None:
        """Goes on in a forked child (the timer is not inherited, the handler is): a
        new sink, stacks interned anew (the child's ids are its own), the timer armed.

        :param sink: the child's sink
        """
        self.sink = sink
        self._interned = KeyTable()
        self._busy = False
        self._last_sid = None
        if self._timer is not None:
            signal.setitimer(self._timer, self.interval, self.interval)

    def stop(self) -> None:
        """Stops the timer and restores the previous handler (idempotent)."""
        if self._timer is not None and self._signal is not None:
            signal.setitimer(self._timer, 0.0, 0.0)
            signal.signal(self._signal, self._previous or signal.SIG_DFL)
            self._timer = self._signal = None
            self.edge_tick()  # the memory at the end, and a rise since the last tick
        if self._own_memory and isinstance(self.memory, ProcMemory):
            self.memory.close()

"""Device probes read inside the measured process (registered with ``inprocess=True``).

The spy is another process: it cannot read counters that live in the measured program's
memory, such as torch's caching allocator's. :class:`InProcessProbes` reads those probes
from a daemon thread of the measured process, every ``delay`` seconds, into one
:class:`Monitor <.series.Monitor>` per channel, timed with ``time.monotonic`` as the spy
(``CLOCK_MONOTONIC`` is system-wide on Linux): the monitors join the spy's result on the
same time axis as the RSS and NVML (``MemorySpy.stop()`` adds them).

- **Exact peaks**: a probe whose library keeps a high-water mark returns it with each
  reading (``DeviceProbe.read_peaks``); :meth:`InProcessProbes.start` resets it
  (``reset_peaks``), :meth:`InProcessProbes.stop` takes a last reading, so the peak is
  the block's, a spike between two ticks included. A block inside another resets the
  mark too: every measure running in the process first takes a reading (it keeps the
  peak so far), so the outer one stays exact.
- **The line**: at the tick where a channel's peak rose, the stack of the measured
  thread (the one that started the measure) is kept in ``Monitor.peak_frames`` and
  ``Monitor.peak_stack`` (the running line when the rise was seen; with
  ``stacks=True`` the spy's attribution refines it).

For ``run``, the program's side: :func:`program_probes` opens each probe only once the
program imported its library (and, for torch, initialized CUDA), without resetting
anything (the program is fresh), and :func:`device_facts` turns the monitors into the
report's plain facts. The thread is named :data:`THREAD_NAME`: views leave it out.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from .series import DEFAULT_MAX_POINTS, Monitor
from .worker import DeviceSet

__all__ = ["THREAD_NAME", "InProcessProbes", "device_facts", "program_probes"]

THREAD_NAME = "memory-spy-devices"
MIN_DELAY = 0.001
# The measures running in this process: a new one reads them all before it resets a mark.
_LIVE: list[InProcessProbes] = []
_LIVE_LOCK = threading.Lock()


def _ready(arg: str) -> bool:
    """True once the program imported the probe's library and the probe's ``ready(module)``
    says so (the probe waiting to open, a ``ProbeSpec.to_arg()`` value)."""
    target, _, lib = arg.partition("=")[2].partition(",")
    module = sys.modules.get(lib) if lib else None
    if lib and module is None:
        return False
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    ready = getattr(cls, "ready", None)
    return not callable(ready) or bool(ready(module))


class InProcessProbes:
    """Reads in-process device probes from a daemon thread (see the module).

    :param args: the probes, as ``ProbeSpec.to_arg()`` writes them (``name=module:Class,lib``)
    :param delay: seconds between two readings
    :param max_points: bound of each retained series
    :param thread: the thread whose stack says where a peak rose (the caller's if None)
    :param reset: reset the probes' high-water marks at start (a block's exact peak)
    :param wait_import: open each probe only once the program imported its library (and
        the probe's ``ready(module)`` says so); a probe that then fails to open is
        skipped with a note, not raised
    :param clock: a monotonic clock, the spy's
    :param current_frames: ``sys._current_frames`` (tests pass a fake)
    """

    def __init__(
        self,
        args: Sequence[str],
        delay: float,
        max_points: int = DEFAULT_MAX_POINTS,
        thread: int | None = None,
        reset: bool = True,
        wait_import: bool = False,
        clock: Callable[[], float] = time.monotonic,
        current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
    ) -> None:
        self.delay = max(float(delay), MIN_DELAY)
        self.thread = threading.get_ident() if thread is None else thread
        self.reset = reset
        self.wait_import = wait_import
        self.clock = clock
        self.current_frames = current_frames
        self.devices = DeviceSet(max_points)
        self.pending = list(args)  # the probes not opened yet
        self.notes: list[str] = []
        self.read_errors: list[str] = []  # a probe unread at a tick: unknown there, no note
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._codes: dict[int, Any] = {}

    def _open_ready(self) -> None:
        """Opens the waiting probes whose library the program imported (``wait_import``)."""
        for arg in list(self.pending):
            try:
                if not _ready(arg):
                    continue
                self.pending.remove(arg)
                self.devices.open(arg, _this_process)
            except Exception as e:  # the program's devices are not ours to break
                with contextlib.suppress(ValueError):
                    self.pending.remove(arg)
                self.notes.append(f"the {arg.partition('=')[0]!r} probe could not be read: {e}")

    def start(self) -> InProcessProbes:
        """Opens the probes (unless waiting for an import), resets their marks, takes
        the first reading and starts the thread.

        :raises RuntimeError: a probe cannot be opened (the cause in words)
        """
        if not self.wait_import:
            self.devices.open_all(self.pending, _this_process)
            self.pending = []
        with _LIVE_LOCK:
            if self.reset and self.devices.probes:
                for other in _LIVE:  # before the marks move: they keep the peak so far
                    other.tick()
                for probe in self.devices.probes:
                    probe.reset_peaks()
            _LIVE.append(self)
        self.tick()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def tick(self, from_thread: bool = False) -> None:
        """Takes one reading of every open probe.

        :param from_thread: the reading thread's call: none once stopping (the monitors
            are the result then)
        """
        with self._lock:
            if from_thread and self._stop.is_set():
                return
            if self.pending and self.wait_import:
                self._open_ready()
            rose = self.devices.read(self.clock(), self.read_errors)
            if rose:
                from .frames import frame_label

                frames = self._stack()
                for mon in rose:
                    mon.peak_frames = frames
                    mon.peak_stack = tuple(map(frame_label, frames)) if frames else None

    def _stack(self) -> tuple[Any, ...] | None:
        """The measured thread's stack now, as the user reads it (None if it is gone)."""
        from .._sampling.frames import decode_key, walk
        from .._sampling.recorder import RUNNING_DEPTH
        from .frames import user_view

        frame = self.current_frames().get(self.thread)
        if frame is None:
            return None
        try:
            key = walk(frame, self._codes, RUNNING_DEPTH)
        finally:
            del frame  # frames keep their locals alive
        return user_view(decode_key(key, self._codes)) or None

    def _run(self) -> None:
        # Event.wait, not time.sleep: stop() ends the thread at once, none left sleeping.
        while not self._stop.wait(self.delay):
            self.tick(from_thread=True)

    def _halt(self) -> None:
        with self._lock:  # once set, the thread reads no more (a reading in progress ends)
            self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)  # it wakes at once (its wait is on the event)
        with _LIVE_LOCK:
            if self in _LIVE:
                _LIVE.remove(self)

    def stop(self) -> list[Monitor]:
        """Stops the thread, takes a last reading (a spike just before the end counts),
        closes the probes; every monitor, probe after probe."""
        self._halt()
        self.tick()
        for probe, mons in zip(self.devices.probes, self.devices.monitors, strict=True):
            for mon, channel in zip(mons, probe.channels, strict=False):
                mon.uuid = getattr(channel, "uuid", None)  # learnt once CUDA started
        self.close()
        return self.devices.all()

    def close(self) -> None:
        """Stops the thread and closes the probes, without a last reading (idempotent)."""
        self._halt()
        self.devices.close()


def _this_process() -> set[int]:
    import os

    return {os.getpid()}


def program_probes(
    args: Sequence[str], delay: float = 0.01, thread: int | None = None
) -> InProcessProbes:
    """The hook of ``run``'s program side (see the module): the started reader, to stop
    when the program ends before :func:`device_facts`.

    :param args: the probes, as ``ProbeSpec.to_arg()`` writes them
    :param delay: seconds between two readings
    :param thread: the thread whose stack says where a peak rose (the main thread if None)
    """
    main = threading.main_thread().ident if thread is None else thread
    return InProcessProbes(args, delay, thread=main, reset=False, wait_import=True).start()


def device_facts(monitors: Sequence[Monitor]) -> tuple[list[Any], list[Any]]:
    """The report's plain facts of device monitors (they may cross a pipe): curves
    ``(qualname, times, values, source)`` and devices ``(qualname, peak, begin, end,
    extras)``, ``extras`` holding ``role``, ``uuid``, ``context`` and ``site`` (the
    innermost user frame when the peak rose: ``(function, file, line)``) when known.

    :param monitors: the monitors (the spy's devices, in-process ones)
    """
    from .frames import innermost_user

    curves, devices = [], []
    for mon in monitors:
        times, values = zip(*mon.series, strict=True) if len(mon.series) else ((), ())
        curves.append((mon.qualname, list(times), list(values), str(mon.peak_source)))
        extras: dict[str, Any] = {"role": mon.role, "uuid": mon.uuid, "context": mon.context}
        if mon.peak_frames:
            frame = mon.peak_frames[innermost_user(mon.peak_frames)]
            extras["site"] = (frame.name, frame.file, frame.line)
        devices.append((mon.qualname, mon.max_peak, mon.begin, mon.end, extras))
    return curves, devices

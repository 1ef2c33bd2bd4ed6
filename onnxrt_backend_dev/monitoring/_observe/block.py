"""The observer of a block of code: the memory spy (another process) reads its parent's
stacks at each of its ticks, on its clock (``spy(stacks=True)``, ``%%spy --stacks``,
``spy --where``): no thread, no signal handler in the program measured.

At each tick, every thread's stack; the tick's stack is the one credited with what the
memory did since the previous tick (see :func:`.observer.credit`), among the threads
that are not this tool's own (the spy's reader thread in the parent, by name). The
result is plain values (it crosses a pipe): the tick times and stack ids, the stacks as
frames, and each thread's columns per stack.
"""

from __future__ import annotations

import array
from typing import Any

from .observer import EMPTY, ProcessRecord, sample_threads
from .session import describe, open_target

# Threads of this tool inside a measured process: never the code measured.
OWN_THREADS = frozenset({"memory-spy-reader", "memory-spy-stacks", "onnxrt-sampler",
                         "onnxrt-layout-check", "live-status"})  # fmt: skip
MAX_TICKS = 1 << 20


class _NoSink:
    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        """Memory is the spy's own series: nothing here."""


class BlockObserver:
    """Reads the stacks of process ``pid`` at each :meth:`tick`.

    :param pid: the process (the spy's parent)
    :param max_points: tick records kept at most (halved beyond, as the spy's series)
    :raises ObserveError: it cannot be read (the caller falls back)
    """

    def __init__(self, pid: int, max_points: int = MAX_TICKS) -> None:
        target = open_target(pid)
        self.record = ProcessRecord(pid, target.reader, target.verified.native_flags, _NoSink())
        self.collector = describe(target)
        self.max_points = max(int(max_points), 2)
        self.times = array.array("d")
        self.ids = array.array("q")
        self.stride = 1
        self._skip = 0
        self.failed = 0

    def tick(self, t: float) -> None:
        """Reads every thread now and records the credited stack.

        :param t: the tick's time (the spy's clock)
        """
        record = self.record
        dt = t - record.last_t if record.samples else 0.0
        record.samples += 1
        record.last_t = t
        try:
            samples = record.reader.threads() if record.reader is not None else []
        except Exception:  # the process moved or is ending: this tick has no stack
            self.failed += 1
            samples = []
        sid = sample_threads(record, samples, t, dt, skip=self._own_thread)
        if self._skip:
            self._skip -= 1
            return
        self._skip = self.stride - 1
        self.times.append(t)
        self.ids.append(sid)
        if len(self.times) >= self.max_points:
            self.times, self.ids = self.times[::2], self.ids[::2]
            self.stride *= 2
            self._skip = self.stride - 1

    def _own_thread(self, name: str) -> bool:
        return name in OWN_THREADS

    def result(self) -> dict[str, Any]:
        """What was read, as plain values: ``times`` and ``ids`` (array bytes), ``stacks``
        (frames ``(name, file, first line, line)``, outermost first), ``threads`` (name,
        main, ``{stack id: columns}``), ``collector``, ``failed``."""
        from .build import decode_stacks

        record = self.record
        stacks = [
            [(f.name, f.file, f.first_line, f.line) for f in frames]
            for frames in decode_stacks(record)
        ]
        threads = []
        for key in record.order:
            th = record.threads[key]
            if th.name in OWN_THREADS:
                continue
            rows = {sid: list(row) for sid, row in th.rows.items() if record.key_list[sid]}
            threads.append(
                (th.name or ("MainThread" if th.is_main else str(th.native_id)), th.is_main, rows)
            )
        return {
            "times": self.times.tobytes(),
            "ids": self.ids.tobytes(),
            "stacks": stacks,
            "threads": threads,
            "collector": self.collector,
            "failed": self.failed,
            "empty": record.keys.get(EMPTY, -1),
        }

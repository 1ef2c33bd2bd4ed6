"""The stacks of the memory attribution (``stacks=True``): what the observer read of
the spied process (:func:`from_observer`), or, where it cannot run, what the one
in-process sampler took (:class:`StackSampler`): at each sample the stack of the thread
that runs (see :func:`pick_thread`) at ``time.monotonic``, the spy's clock too, so that
:mod:`.where` joins them with the memory series.
"""

from __future__ import annotations

import array
import sys
import sysconfig
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, NamedTuple

from .._sampling.frames import SampledFrame, StackKey
from .series import DEFAULT_MAX_POINTS, check_max_points

MAX_DEPTH = 256  # frames kept per stack, from the innermost (a deep recursion is cut)
MAX_STACKS = 20_000  # distinct stacks interned at most (a few MB at worst)
MIN_DELAY = 0.001  # the sampler never wakes more often: it takes the GIL each time
NO_STACK = -1  # the sample's stack was not interned (table full) or no thread ran


# A thread whose innermost frame is one of these standard modules waits (join, a queue,
# a lock, select): it does not allocate, another thread is the one running.
_IDLE_MODULES = (
    "threading.py",
    "queue.py",
    "selectors.py",
    "socket.py",
    "subprocess.py",
    "concurrent/futures/thread.py",
    "concurrent/futures/_base.py",
    "multiprocessing/connection.py",
    "multiprocessing/pool.py",
    "asyncio/base_events.py",
)
_STDLIB = sysconfig.get_paths().get("stdlib", "").replace("\\", "/").rstrip("/") + "/"
_IDLE_FILES = tuple(_STDLIB + name for name in _IDLE_MODULES)


class StackSamples(NamedTuple):
    """What the sampler recorded: sample times, their stack ids, the stacks."""

    times: array.array[float]
    ids: array.array[int]
    stacks: list[tuple[SampledFrame, ...]]  # outermost frame first
    dropped: int  # samples whose stack could not be interned


class TickLog:
    """Sample times and their stack ids, bounded: once ``max_points`` are kept, every
    other one is dropped and from then on one sample in ``stride`` is kept.

    :param max_points: records kept at most (>= 2)
    """

    def __init__(self, max_points: int) -> None:
        self.max_points = max_points
        self.times = array.array("d")
        self.ids = array.array("q")
        self.stride = 1
        self._skip = 0  # samples to skip before the next kept one (stride)

    def add(self, t: float, sid: int) -> None:
        """Records one sample (or skips it, see the class)."""
        if self._skip:
            self._skip -= 1
            return
        self.times.append(t)
        self.ids.append(sid)
        if len(self.times) >= self.max_points:
            self.times, self.ids = self.times[::2], self.ids[::2]
            self.stride *= 2
        self._skip = self.stride - 1


def is_idle(key: StackKey, codes: dict[int, CodeType]) -> bool:
    """Tells if a thread waits in the standard library (see ``_IDLE_MODULES``).

    :param key: its stack
    :param codes: ``id(code) -> code``
    """
    return not key or codes[key[0]].co_filename.replace("\\", "/").startswith(_IDLE_FILES)


def pick_thread(
    stacks: dict[int, Any],
    previous: dict[int, Any],
    main: int,
    codes: dict[int, CodeType] | None = None,
    idle: Callable[[Any], bool] | None = None,
) -> int | None:
    """The thread that most likely runs: not idle first, then one whose stack changed
    since the previous sample, then the main thread. None when every thread waits: a
    waiting thread (``Event.wait``, a queue, a join) is never credited with what memory
    did meanwhile (a C extension's thread, the garbage collector, another process's
    pages); that goes to "no stack sampled".

    :param stacks: thread id -> stack now (a key, or a stack id with ``idle``)
    :param previous: thread id -> stack at the previous sample
    :param main: the main thread's id
    :param codes: ``id(code) -> code``
    :param idle: tells a waiting stack (default: :func:`is_idle` with ``codes``)
    """
    waits = idle or (lambda key: is_idle(key, codes or {}))
    best, best_score = None, (False, False, False)
    for ident, key in stacks.items():
        score = (not waits(key), previous.get(ident) != key, ident == main)
        if best is None or score > best_score:
            best, best_score = ident, score
    return best if best_score[0] else None


class StackSampler:
    """The spy's fallback where the observer cannot run: the one in-process sampler
    (:class:`.._sampling.recorder.Recorder`, ticked by a thread every ``delay`` seconds),
    keeping at each sample the stack of the thread that runs (:func:`pick_thread`).

    :param delay: seconds between two samples (at least ``MIN_DELAY``)
    :param max_points: samples kept at most (>= 2), halved beyond
    :param max_stacks: distinct stacks kept at most (beyond, their outer frames)
    :param clock: the clock, ``time.monotonic`` as the spy's
    :param current_frames: ``sys._current_frames`` (tests pass a fake)
    """

    def __init__(
        self,
        delay: float,
        max_points: int = DEFAULT_MAX_POINTS,
        max_stacks: int = MAX_STACKS,
        clock: Callable[[], float] = time.monotonic,
        current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
    ) -> None:
        from .._sampling.frames import StackTable
        from .._sampling.recorder import Recorder

        check_max_points(max_points)
        self.delay = max(float(delay), MIN_DELAY)
        table = StackTable(max_stacks, MAX_DEPTH)
        self.recorder = Recorder(self.delay, clock, current_frames, lambda ident: None,
                                 lambda ident: "", max_points, table)  # fmt: skip
        self.recorder.listener = self._keep
        self.log = TickLog(max_points)
        self._previous: dict[int, int] = {}
        self._idle: dict[int, bool] = {}  # stack id -> waits in the standard library
        self._ticker: Any = None

    @property
    def dropped(self) -> int:
        """Samples whose stack was kept as its outer frames only (the table full)."""
        return int(self.recorder.table.merged)

    def sample(self) -> None:
        """Takes one sample now."""
        self.recorder.sample()

    def _keep(self, t: float, sids: dict[int, int]) -> None:
        """The running thread's stack at ``t``, of ``sids`` (thread id -> stack id)."""
        ident = pick_thread(sids, self._previous, self.recorder.main_ident, idle=self._waits)
        self._previous = sids
        self.log.add(t, NO_STACK if ident is None else sids[ident])

    def _waits(self, sid: int) -> bool:
        found = self._idle.get(sid)
        if found is None:
            table = self.recorder.table
            key = table.key(sid)
            found = self._idle[sid] = is_idle(key, {key[0]: table.codes[key[0]]} if key else {})
        return found

    def start(self) -> StackSampler:
        """Starts the sampling thread; self (its first sample comes after ``delay``: one
        taken here would show the spy starting, not the code measured)."""
        from .._sampling.timer import Ticker

        self._ticker = Ticker(self.recorder, "thread")
        self._ticker.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stops the sampling thread (idempotent), waiting ``timeout`` seconds at most."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.stop(timeout)

    def snapshot(self) -> StackSamples:
        """What was sampled, stacks outermost first."""
        return StackSamples(array.array("d", self.log.times), array.array("q", self.log.ids),
                            self.recorder.table.decode(), self.dropped)  # fmt: skip


def frames_of(raw: Any) -> tuple[SampledFrame, ...] | None:
    """The frames, outermost first, of a stack as the spy's observer sends it (``(name,
    file, first line, line)`` each, untrusted), None when it is not one."""
    try:
        return tuple(SampledFrame(str(n), str(f), int(first), int(line))
                     for n, f, first, line in raw)  # fmt: skip
    except (TypeError, ValueError):
        return None


def from_observer(doc: dict[str, Any]) -> StackSamples:
    """What the spy's observer read of this process (see ``_memory.observed``), as the
    in-process sampler's records: one attribution for both collectors.

    :param doc: the ``stacks`` entry of the spy's result (plain values, checked)
    """
    times = array.array("d")
    ids = array.array("q")
    raw_times, raw_ids = doc.get("times", b""), doc.get("ids", b"")
    if isinstance(raw_times, bytes) and isinstance(raw_ids, bytes):
        times.frombytes(raw_times[: len(raw_times) // 8 * 8])
        ids.frombytes(raw_ids[: len(raw_ids) // 8 * 8])
    n = min(len(times), len(ids))
    stacks = [frames_of(raw) or () for raw in doc.get("stacks", ())]
    empty = doc.get("empty", -1)
    cleaned = array.array("q", (i if 0 <= i < len(stacks) and i != empty else NO_STACK
                                for i in ids[:n]))  # fmt: skip
    return StackSamples(times[:n], cleaned, stacks, int(doc.get("failed", 0) or 0))

"""What the sampler records at each sample, with bounded memory.

Every sample reads the stack of every Python thread and adds, per (thread, stack), the
real time since the previous sample (wall) and the thread's own CPU time over that gap.
Those totals are exact however long the run. The timeline (which stack each thread ran
when) is kept per thread up to ``max_points`` entries, then halved (every other entry
kept, its neighbour's time added to it) and sampled at half the rate, as the memory
series does: an hour-long run stays a few MB.

The same recorder is the memory spy's in-process fallback (``running=True``, where the
observer cannot run): at each sample it also keeps the stack of the thread that runs
(:func:`pick_thread`), which :mod:`.._memory.where` joins with the memory series.
"""

from __future__ import annotations

import array
import functools
import operator
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import NamedTuple

from .._stacks.frames import SampledFrame
from .aggregate import NO_STACK
from .frames import StackKey, StackTable
from .intern import MIN_CAPACITY, Totals, filled, grow

MAX_POINTS = 20_000  # timeline entries kept per thread before halving
DELAY_FACTOR = 2.5  # a gap over this many intervals is a sample delayed by a GIL holder
# The spy's fallback keeps fewer, shorter stacks (a deep recursion is cut, a few MB at worst).
RUNNING_DEPTH = 256
RUNNING_STACKS = 20_000

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


class StackSamples(NamedTuple):
    """The running thread's stack at each sample: what :mod:`.._memory.where` joins with
    the memory series (from the in-process recorder, or the spy's observer)."""

    times: array.array[float]
    ids: array.array[int]  # stack ids, ``NO_STACK`` when no thread ran
    stacks: list[tuple[SampledFrame, ...]]  # outermost frame first
    dropped: int  # samples whose stack could not be interned whole


class ThreadLine:
    """The timeline of one thread: start times, stack ids and the time each stands for,
    in buffers made once (see :mod:`.intern`: no object per sample)."""

    def __init__(self, capacity: int = MIN_CAPACITY) -> None:
        self._times = filled("d", 0.0, capacity)
        self._stacks = filled("q", 0, capacity)
        self._weights = filled("d", 0.0, capacity)
        self.n = 0
        self.stride = 1
        self._skip = 0

    @property
    def times(self) -> array.array[float]:
        """Start time of each entry (seconds since the recording started)."""
        return self._times[: self.n]

    @property
    def stacks(self) -> array.array[int]:
        """Stack id of each entry."""
        return self._stacks[: self.n]

    @property
    def weights(self) -> array.array[float]:
        """Seconds each entry stands for."""
        return self._weights[: self.n]

    def add(self, t: float, stack: int, weight: float, max_points: int) -> None:
        """Records one sample (every ``stride``-th is kept, the others add their time)."""
        n = self.n
        if self._skip:
            self._skip -= 1
            if n:
                self._weights[n - 1] += weight
            return
        self._skip = self.stride - 1
        if n == len(self._times):
            for buffer in (self._times, self._stacks, self._weights):
                grow(buffer, n + 1)
        self._times[n] = t - weight
        self._stacks[n] = stack
        self._weights[n] = weight
        self.n = n + 1
        if self.n >= max_points:
            self._halve()

    def _halve(self) -> None:
        n = self.n
        half = (n + 1) // 2
        weights = self._weights
        merged = array.array("d", map(operator.add, weights[0:n:2], weights[1:n:2]))
        if n % 2:
            merged.append(weights[n - 1])
        self._times[:half] = self._times[0:n:2]
        self._stacks[:half] = self._stacks[0:n:2]
        self._weights[:half] = merged
        self.n = half
        self.stride *= 2
        self._skip = self.stride - 1


def thread_clock_id(native_id: int) -> int:
    """The CPU-time clock of a Linux thread, from its kernel id: what
    ``pthread_getcpuclockid`` computes (``MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)``).

    :param native_id: the thread's kernel id (``Thread.native_id``)
    :return: a clock id for ``time.clock_gettime``
    """
    return ((~native_id) << 3) | 6


def _cpu_clock(ident: int) -> Callable[[], float] | None:
    """A reader of a thread's CPU time, None where the platform has none or the thread
    is unknown or gone.

    On Linux the clock is named by the thread's kernel id, found in :mod:`threading`:
    ``pthread_getcpuclockid`` reads the thread's descriptor, which is freed when a
    thread ends, so a thread ending just after the sample listed it would crash the
    program (it does with an id that is no thread's). A clock of a thread gone only
    fails to read (``OSError``).
    """
    getid = getattr(time, "pthread_getcpuclockid", None)
    if getid is None:
        return None
    try:
        if sys.platform.startswith("linux"):
            native = next((t.native_id for t in threading.enumerate() if t.ident == ident), None)
            if native is None:
                return None
            clock = thread_clock_id(native)
        else:
            clock = getid(ident)
        time.clock_gettime(clock)
    except (OSError, OverflowError, ValueError):
        return None
    return lambda: time.clock_gettime(clock)


OWN_CODES: set[object] = set()  # the sampler's own code (the timer adds its handler's)


class Recorder:
    """Aggregates samples of every thread (not thread-safe: the sampler serialises).

    :param interval: the sampling interval, seconds (to tell a delayed sample)
    :param clock: wall clock, seconds
    :param current_frames: ``sys._current_frames`` (tests pass a fake)
    :param cpu_clock: thread id -> a reader of that thread's CPU time (None: unknown)
    :param thread_name: thread id -> its name
    :param max_points: timeline entries per thread before halving
    :param table: the stack table (a fresh one by default)
    :param running: also keep the running thread's stack at each sample (the spy's
        fallback, see :meth:`running_samples`)
    """

    def __init__(
        self,
        interval: float,
        clock: Callable[[], float],
        current_frames: Callable[[], dict[int, FrameType]],
        cpu_clock: Callable[[int], Callable[[], float] | None] = _cpu_clock,
        thread_name: Callable[[int], str] | None = None,
        max_points: int = MAX_POINTS,
        table: StackTable | None = None,
        running: bool = False,
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.current_frames = current_frames
        self.cpu_clock = cpu_clock
        self.thread_name = thread_name or _thread_name
        self.max_points = max_points
        self.table = table if table is not None else StackTable()
        self.start = clock()
        self.last = self.start
        self.samples = 0
        self.delayed = 0
        self.skip_ident: int | None = None  # the sampler's own thread
        self.main_ident = threading.main_thread().ident or 0
        # ident -> [name, Totals (per stack id: wall, cpu, count), ThreadLine, cpu reader,
        #           last cpu, last stack id]
        self.threads: dict[int, list] = {}
        self.order: list[int] = []  # idents in the order first seen
        # Told each sample's time and stacks (thread id -> stack id), when set.
        self.listener: Callable[[float, dict[int, int]], None] | None = None
        self.running = ThreadLine() if running else None
        self._previous: dict[int, int] = {}  # thread id -> stack id at the previous sample
        self._idle: dict[int, bool] = {}  # stack id -> waits in the standard library

    def sample(self, main_frame: FrameType | None = None, final: bool = False) -> None:
        """Takes one sample of every thread now.

        :param main_frame: the main thread's frame when a signal handler samples (its
            own frame would otherwise top the main thread's stack)
        :param final: the last sample, taken by ``stop()``: the main thread is in the
            sampler's code, its time since the previous sample goes to its last stack
        """
        now = self.clock()
        gap = now - self.last
        self.last = now
        if gap <= 0:
            return
        self.samples += 1
        late = gap > DELAY_FACTOR * self.interval
        self.delayed += late
        frames = self.current_frames()
        if main_frame is not None:
            frames[self.main_ident] = main_frame
        else:
            main = _program_frame(frames.get(self.main_ident))
            if main is not None:
                frames[self.main_ident] = main
        table, skip = self.table, self.skip_ident
        seen: dict[int, int] = {}
        for ident, frame in frames.items():
            if ident == skip:
                continue
            state = self.threads.get(ident)
            if state is None:
                state = self._new_thread(ident)
            cpu = self._cpu_delta(state)
            reader = state[3]
            held = late and (cpu > 0.5 * gap if reader is not None else ident == self.main_ident)
            if final and ident == self.main_ident and state[5] >= 0:
                sid = state[5]
            else:
                sid = table.intern_frame(frame, held)
            state[5] = seen[ident] = sid
            state[1].add(sid, gap, cpu)
            state[2].add(now - self.start, sid, gap, self.max_points)
        del frames  # frames keep their locals alive: release them at once
        if self.running is not None:
            self._keep_running(self.running, now, seen)
        if self.listener is not None:
            self.listener(now, seen)

    def _keep_running(self, line: ThreadLine, now: float, seen: dict[int, int]) -> None:
        """Keeps the stack of the thread that runs (of ``seen``: thread id -> stack id)."""
        ident = pick_thread(seen, self._previous, self.main_ident, self._waits)
        self._previous = seen
        line.add(now, NO_STACK if ident is None else seen[ident], 0.0, self.max_points)

    def _waits(self, sid: int) -> bool:
        """Tells if the stack ``sid`` waits in the standard library (cached)."""
        found = self._idle.get(sid)
        if found is None:
            key = self.table.key(sid)
            found = self._idle[sid] = is_idle(
                key, {key[0]: self.table.codes[key[0]]} if key else {}
            )
        return found

    def running_samples(self) -> StackSamples:
        """What ``running`` kept, the stacks decoded (outermost first)."""
        line = self.running or ThreadLine()
        return StackSamples(line.times, line.stacks, self.table.decode(), int(self.table.merged))

    @staticmethod
    def _cpu_delta(state: list) -> float:
        """The thread's CPU seconds since its previous sample (0 where unknown)."""
        reader = state[3]
        if reader is None:
            return 0.0
        try:
            now_cpu = reader()
        except OSError:  # the thread ended between the two reads
            return 0.0
        cpu, state[4] = max(0.0, now_cpu - state[4]), now_cpu
        return float(cpu)

    def prime(self) -> None:
        """Reads the main thread's CPU clock now, so that its first sample counts the CPU
        it used since the start (a short block may get one sample only)."""
        if self.main_ident not in self.threads:
            self._new_thread(self.main_ident)

    def _new_thread(self, ident: int) -> list:
        reader = self.cpu_clock(ident)
        first = 0.0
        if reader is not None:
            try:
                first = reader()
            except OSError:
                reader = None
        state = [self.thread_name(ident), Totals(), ThreadLine(), reader, first, -1]
        self.threads[ident] = state
        self.order.append(ident)
        return state


OWN_CODES.add(Recorder.sample.__code__)


def spy_recorder(
    delay: float,
    max_points: int,
    clock: Callable[[], float] = time.monotonic,
    current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
    max_stacks: int = RUNNING_STACKS,
) -> Recorder:
    """The memory spy's in-process fallback: a recorder keeping the running thread's stack
    (``running``) on the spy's clock, without the threads' CPU clocks.

    :param delay: seconds between two samples
    :param max_points: samples kept at most (>= 2), halved beyond
    :param clock: the clock, ``time.monotonic`` as the spy's
    :param current_frames: ``sys._current_frames`` (tests pass a fake)
    :param max_stacks: distinct stacks kept at most (beyond, their outer frames)
    """
    table = StackTable(max_stacks, RUNNING_DEPTH)
    return Recorder(delay, clock, current_frames, _no_cpu_clock, str, max_points, table, True)


def _no_cpu_clock(ident: int) -> None:
    """No thread's CPU time (the spy's fallback does not read it)."""


def is_idle(key: StackKey, codes: dict[int, CodeType]) -> bool:
    """Tells if a thread waits in the standard library (see ``_IDLE_MODULES``).

    :param key: its stack
    :param codes: ``id(code) -> code``
    """
    return not key or codes[key[0]].co_filename.replace("\\", "/").startswith(_idle_files())


@functools.cache
def _idle_files() -> tuple[str, ...]:
    """``_IDLE_MODULES`` under the standard library (sysconfig imported at the first use)."""
    import sysconfig

    stdlib = sysconfig.get_paths().get("stdlib", "").replace("\\", "/").rstrip("/") + "/"
    return tuple(stdlib + name for name in _IDLE_MODULES)


def pick_thread(
    stacks: dict[int, int], previous: dict[int, int], main: int, idle: Callable[[int], bool]
) -> int | None:
    """The thread that most likely runs: not idle first, then one whose stack changed
    since the previous sample, then the main thread. None when every thread waits: a
    waiting thread (``Event.wait``, a queue, a join) is never credited with what memory
    did meanwhile (a C extension's thread, the garbage collector, another process's
    pages); that goes to "no stack sampled".

    :param stacks: thread id -> stack id now
    :param previous: thread id -> stack id at the previous sample
    :param main: the main thread's id
    :param idle: tells a waiting stack
    """
    best, best_score = None, (False, False, False)
    for ident, sid in stacks.items():
        score = (not idle(sid), previous.get(ident) != sid, ident == main)
        if best is None or score > best_score:
            best, best_score = ident, score
    return best if best_score[0] else None


def _program_frame(frame: FrameType | None, depth: int = 12) -> FrameType | None:
    """The main thread's frame below the sampler's own code, when a thread samples while
    the main thread runs the signal handler (seen within ``depth`` frames)."""
    f, n = frame, 0
    while f is not None and n < depth:
        if f.f_code in OWN_CODES:
            return f.f_back
        f, n = f.f_back, n + 1
    return frame


def _thread_name(ident: int) -> str:
    for thread in threading.enumerate():
        if thread.ident == ident:
            return thread.name
    return str(ident)  # a thread threading does not know (started by _thread or C)

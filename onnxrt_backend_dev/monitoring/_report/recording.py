"""One recording inside the current process: the high-water mark reset, the one
in-process sampler (:class:`.sampling.Sampling`: every thread's stack and CPU time) with,
at each of its samples, a memory tick (the RSS, the high-water mark and the main thread's
stack, to a sink), the memory spy (curves, devices), the CPU time.

Why the samples' handler and not a thread reads the memory: Python runs a signal handler
in the main thread at the next point the interpreter checks for signals, which, after a
C call that held the GIL (a ``numpy.concatenate``), is right after that call returns, in
the frame that called it: the stack kept with a rise of the high-water mark is the one
that allocated. Where the handler does not run (a sleep, a wait) the sampler's watchdog
thread samples, and ticks, instead.

Lean on purpose: the child ``run`` starts (a fresh interpreter) imports this and the
sampler, not the report's model, so that the tool's own share of the program's memory
stays small (see :mod:`.child`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Sequence
from types import CodeType
from typing import Any, Protocol

from .._sampling.aggregate import NO_STACK
from .._sampling.frames import decode_key
from .._sampling.intern import MIN_CAPACITY, filled, grow
from .._sampling.rates import DEFAULT_INTERVAL
from .._stacks.frames import SampledFrame
from .stream import StreamSink

SPY_DELAY = 0.01
MIN_INTERVAL = 0.001
_UNSEEN = -2
# The recordings streaming now: a forked child of the program goes on streaming its own
# ticks (as its own process) into the same pipe.
_STREAMING: list[Recording] = []


def _after_fork_in_child() -> None:
    for recording in _STREAMING:
        sink = recording.ticks.sink
        if isinstance(sink, StreamSink):
            recording.restart_in_child(StreamSink(sink.fd))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Sink(Protocol):
    """Where ticks go: an :class:`.._sampling.aggregate.Aggregator` or a stream."""

    def add_stack(self, sid: int, frames: tuple[SampledFrame, ...]) -> None:
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


class Ticks:
    """The memory ticks of the one in-process sampler: told each sample (its time and
    every thread's stack id), it reads the memory and sends a tick credited to the main
    thread's stack, on the sampler's own stack id (one table, no second interning); each
    stack is declared to the sink once, with its lines, cut at the root (the frames above
    it, the tool's, left out; a stack outside the root is ``NO_STACK``).

    :param sink: where ticks go
    :param memory: returns ``(rss, hwm)`` in bytes
    :param root_code: the code measured (a module's, a cell's), None: every frame kept
    :param every: seconds between two ticks at least (the sampler may sample more often)
    """

    def __init__(
        self, sink: Sink, memory: Any, root_code: CodeType | None, every: float = 0.0
    ) -> None:
        self.sink = sink
        self.every = every
        self.next_t = float("-inf")
        self.memory = memory
        self.root = None if root_code is None else id(root_code)
        self._root_code = root_code  # kept: its id stays its own
        self.recorder: Any = None
        self.reset()

    def reset(self) -> None:
        """Forgets the stacks declared (a forked child declares them to its own sink)."""
        # An array, no object per stack (see _sampling.intern): a tick taken while the
        # program fills memory with small objects must not keep it resident.
        self._declared = filled("q", _UNSEEN, MIN_CAPACITY)  # stack id -> id or NO_STACK
        self.last = NO_STACK

    def bind(self, recorder: Any) -> Ticks:
        """Listens to ``recorder`` (:class:`.._sampling.recorder.Recorder`).

        :return: self, the recorder's listener
        """
        self.recorder = recorder
        return self

    def __call__(self, t: float, sids: dict[int, int]) -> None:
        if t < self.next_t:
            return
        self.next_t = t + 0.999 * self.every
        sid = sids.get(self.recorder.main_ident)
        self.tick(t, NO_STACK if sid is None else self.stack_id(sid))

    def tick(self, t: float, tid: int) -> None:
        """Sends a tick: the memory now, credited to the stack ``tid``."""
        rss, hwm = self.memory()
        self.last = tid
        self.sink.add_tick(t, rss, hwm, tid)

    def stack_id(self, sid: int, cut: bool = True) -> int:
        """A sampler's stack as the ticks and the threads' time give it: its own id,
        declared to the sink the first time.

        :param sid: the sampler's stack id
        :param cut: cut at the root (the main thread's stacks), else whole
        :return: ``sid``, ``NO_STACK`` for a cut stack outside the root
        """
        declared = self._declared
        if sid >= len(declared):
            n = len(declared)
            grow(declared, sid + 1)
            declared[n:] = filled("q", _UNSEEN, len(declared) - n)
        if declared[sid] == _UNSEEN:
            table = self.recorder.table
            key = table.key(sid)  # innermost first: cut at the root's outermost frame
            if cut and self.root is not None:
                at = [i for i in range(0, len(key), 2) if key[i] == self.root]
                key = key[: at[-1] + 2] if at else ()
            declared[sid] = sid if key else NO_STACK
            if key:
                self.sink.add_stack(sid, decode_key(key, table.codes))
        return int(declared[sid])


class Recording:
    """Starts the sampler (with its ticks) and the spy; :meth:`finish` stops them and
    says what they saw.

    :param sink: where ticks go
    :param interval: seconds between samples (at least ``MIN_INTERVAL``)
    :param probes: device probes for the spy, by registry name
    :param spy: start the memory spy (curves during long C calls, devices)
    :param sampler: keep the sampler's time columns (every thread)
    :param offset: bytes taken off every memory reading of the ticks (the tool's own
        start-up memory, see :mod:`.child`)
    :param root_code: the code measured: the frames above it (the tool's) left out
    """

    def __init__(
        self,
        sink: Sink,
        interval: float = 0.005,
        probes: Sequence[str] = (),
        spy: bool = True,
        sampler: bool = True,
        offset: float = 0.0,
        root_code: CodeType | None = None,
    ) -> None:
        from .sampling import Sampling

        self.notes: list[str] = []
        if not reset_high_water_mark():
            self.notes.append("the high-water mark could not be reset: the peak may be older")
        # datetime's isoformat, without importing datetime (half a megabyte) for it.
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        self.cpu0 = _cpu()
        self.t0 = time.monotonic()
        self.keep_threads = sampler
        self.spy: Any = None
        if spy or probes:
            from .._memory.spy import MemorySpy

            # No reset by the spy: the ticks read the same mark and must see it rise.
            self.spy = MemorySpy(os.getpid(), delay=SPY_DELAY, reset_peak=False,
                                 probes=tuple(probes))  # fmt: skip
        self.memory = ProcMemory(offset)
        interval = max(float(interval), MIN_INTERVAL)
        self.ticks = Ticks(sink, self.memory, root_code, every=interval)
        # The time columns at the sampler's own rate (a short block gets samples too),
        # the memory ticks every ``interval``.
        every = min(interval, DEFAULT_INTERVAL)
        self.sampling: Any = Sampling(every, _timer(), clock=time.monotonic, skip_outer=0,
                                      collector="in-process")  # fmt: skip
        self.sampling.listen = self.ticks.bind
        try:
            self.ticks.tick(time.monotonic(), NO_STACK)  # the memory at the start
            self.sampling.start()
            if isinstance(sink, StreamSink):
                _STREAMING.append(self)
        except BaseException:
            self.close()
            raise

    def restart_in_child(self, sink: Sink) -> None:
        """Goes on in a forked child (the timer is not inherited, the handler is): a
        new sink, stacks sent anew (the child's ids are its own), the timer armed.

        :param sink: the child's sink
        """
        self.ticks.sink = sink
        self.ticks.reset()
        self.sampling.rearm()

    def close(self) -> None:
        """Stops everything without reading the spy (after a failure)."""
        if self in _STREAMING:
            _STREAMING.remove(self)
        sampling, self.sampling = getattr(self, "sampling", None), None
        if sampling is not None:
            with contextlib.suppress(Exception):  # the failure being reported matters more
                sampling.stop()
        if self.spy is not None:
            with contextlib.suppress(Exception):
                self.spy.stop()
            self.spy = None
        self.memory.close()

    def finish(self) -> dict[str, Any]:
        """Stops the sampler, its ticks and the spy.

        :return: plain facts (they may cross a pipe): ``wall``, ``cpu``, ``curves``,
            ``devices``, ``exact_peak``, ``notes``, ``t0``, ``started``, ``pid``
        """
        if self in _STREAMING:
            _STREAMING.remove(self)
        sampling, self.sampling = self.sampling, None
        try:
            profile = sampling.stop().profile
        except Exception:  # the report stands on the ticks alone
            profile = None
        self.ticks.tick(time.monotonic(), self.ticks.last)  # the memory at the end
        self.memory.close()
        facts = block_facts(self.t0, self.cpu0, self.started, self.notes)
        facts["threads"] = _threads(profile, self.ticks) if profile and self.keep_threads else []
        spy, self.spy = self.spy, None
        result = stop_spy(spy, facts["notes"])
        if result is not None:
            spy_facts(result, facts)
        return facts


def stop_spy(spy: Any, notes: list[str]) -> Any:
    """Stops the memory spy, if any: its result, None when it failed (the report stands
    on the ticks alone, a note says why).

    :param spy: the spy, None for none
    :param notes: where the failure is said
    """
    if spy is None:
        return None
    try:
        return spy.stop()
    except Exception as e:
        notes.append(f"the memory spy failed: {e}")
        return None


def spy_facts(result: Any, facts: dict[str, Any], offset: float = 0.0) -> None:
    """Adds the spy's measures to plain facts: the RSS curve, the exact peak, each
    device's curve and peak.

    :param result: what ``MemorySpy.stop()`` returned
    :param facts: completed here (``curves``, ``devices``, ``exact_peak``)
    :param offset: bytes taken off the RSS figures (the tool's start-up memory)
    """
    cpu = result["cpu"]
    times, values = zip(*cpu.series, strict=True) if len(cpu.series) else ((), ())
    rss = [v - offset for v in values]
    facts.setdefault("curves", []).append(("rss", list(times), rss, cpu.peak_source))
    facts["exact_peak"] = max(float(facts.get("exact_peak") or 0.0), cpu.max_peak - offset)
    from .._memory.inprocess import device_facts

    curves, devices = device_facts(list(result.get("devices", {}).values()))
    facts["curves"].extend(curves)
    facts.setdefault("devices", []).extend(devices)


def block_facts(t0: float, cpu0: float, started: str, notes: Sequence[str]) -> dict[str, Any]:
    """The plain facts of a block recorded in this process, from its start to now.

    :param t0: its start (``time.monotonic``)
    :param cpu0: the process's CPU time then
    :param started: its start as an ISO date
    :param notes: its notes so far
    :return: the facts, ``curves``, ``devices``, ``threads`` still empty
    """
    return {"wall": time.monotonic() - t0, "cpu": _cpu() - cpu0, "t0": t0, "started": started,
            "pid": os.getpid(), "curves": [], "devices": [], "exact_peak": None,
            "notes": list(notes), "threads": []}  # fmt: skip


def _timer() -> str:
    """The sampler's timer: wall time (SIGALRM), so that a block that waits or allocates,
    using little CPU, is ticked as often as one that computes; CPU time (SIGPROF) where
    the program took SIGALRM (pytest-timeout, an alarm); a thread where it took both."""
    import signal

    for name, timer, which in (
        ("SIGALRM", "real", "ITIMER_REAL"),
        ("SIGPROF", "prof", "ITIMER_PROF"),
    ):
        signum, itimer = getattr(signal, name, None), getattr(signal, which, None)
        if (
            signum is not None
            and itimer is not None
            and signal.getsignal(signum) in (signal.SIG_DFL, None)
            and signal.getitimer(itimer) == (0.0, 0.0)
        ):
            return timer
    return "thread"


def _threads(profile: Any, ticks: Ticks) -> list[Any]:
    """The sampler's time per thread on the ticks' stack ids, as plain values (they may
    cross a pipe), the main thread's stacks cut at the root (the tool's frames left out,
    as the ticks' are; outside it: ``NO_STACK``)."""
    from .._sampling.frames import OWN_THREADS

    threads = []
    for thread in profile.threads:
        if thread.name in OWN_THREADS:
            continue
        rows: dict[int, list[float]] = {}  # wall, cpu, samples: the model's first columns
        for sid, totals in thread.totals.items():
            row = rows.setdefault(ticks.stack_id(sid, cut=thread.is_main), [0.0, 0.0, 0.0])
            for i in range(3):
                row[i] += float(totals[i])
        threads.append((thread.name, thread.is_main, rows))
    return threads


def _cpu() -> float:
    times = os.times()
    return times.user + times.system

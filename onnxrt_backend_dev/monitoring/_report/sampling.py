"""The library's entry points: ``with sampling() as s: ...`` and ``sample(fct, ...)``."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from .._errors import StateError
from .._sampling.frames import depth
from .._sampling.model import SampledProfile, ThreadProfile
from .._sampling.rates import DEFAULT_INTERVAL, check_interval
from .._sampling.recorder import MAX_POINTS, Recorder
from .._sampling.result import SamplingResult
from .._sampling.timer import TIMERS, Ticker
from .._stacks.frames import SampledFrame
from .._validate import check_callable, check_choice, check_int, check_str

COLLECTORS = ("auto", "observer", "in-process")

_OWN_FILES = frozenset(
    m.__file__ for m in (sys.modules[__name__], sys.modules[Recorder.__module__],
                         sys.modules[Ticker.__module__]) if m.__file__
)  # fmt: skip


def _is_own(stack: tuple[SampledFrame, ...]) -> bool:
    return any(f.file in _OWN_FILES for f in stack)


class Sampling:
    """Samples every thread's stack while active (a context manager, or start/stop).

    :param interval: seconds between samples (default 2 ms; at least 0.1 ms)
    :param timer: ``prof`` (CPU-time signal with a watchdog thread, the default),
        ``real`` (wall-time signal), ``thread`` (a sampling thread only)
    :param program: a name for the headers
    :param max_points: timeline entries kept per thread before halving
    :param skip_outer: frames of the main thread left out at the root; None leaves out
        the frames above the code that entered the context
    :param clock: the wall clock (tests pass a fake)
    :param current_frames: ``sys._current_frames`` (tests pass a fake)
    :param collector: ``auto`` (the observer where this machine allows it, the in-process
        sampler otherwise), ``observer`` (another process reads this one's stacks from
        outside: no signal handler, no thread in this process, the right line inside C
        calls), ``in-process`` (signal handlers and a watchdog thread, see ``timer``)
    """

    def __init__(
        self,
        interval: float = DEFAULT_INTERVAL,
        timer: str = "prof",
        program: str = "",
        max_points: int = MAX_POINTS,
        skip_outer: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
        current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
        collector: str = "auto",
    ) -> None:
        self.interval = check_interval(interval)
        self.timer = check_choice("timer", timer, TIMERS)
        self.collector = check_choice("collector", collector, COLLECTORS)
        self.note = ""  # why the in-process sampler ran, when auto could not observe
        # Given the recorder at start, returns what it tells each sample (the ticks of a
        # recording); None: nothing listens.
        self.listen: Callable[[Recorder], Callable[[float, dict[int, int]], None]] | None = None
        self.program = check_str("program", program)
        self.max_points = check_int("max_points", max_points, minimum=2)
        if skip_outer is not None:
            check_int("skip_outer", skip_outer, minimum=0)
        self.skip_outer = skip_outer
        self._clock = clock
        self._current_frames = current_frames
        self._ticker: Ticker | None = None
        self._spy: Any = None  # the observer (a spy reading this process's stacks)
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._started_in = threading.current_thread()
        self.result: SamplingResult | None = None

    def start(self, skip_outer: int | None = None) -> Sampling:
        """Starts sampling.

        :param skip_outer: as the constructor's, for this run
        :return: self
        """
        if self._ticker is not None or self._spy is not None:
            raise StateError("this sampling is already running")
        if skip_outer is None:
            skip_outer = self.skip_outer
        if skip_outer is None:  # the caller of start() is the root
            skip_outer = depth(sys._getframe(1)) - 1
        self._skip = skip_outer
        if self._observed():
            return self
        recorder = Recorder(self.interval, self._clock, self._current_frames,
                            max_points=self.max_points)  # fmt: skip
        if self.listen is not None:
            recorder.listener = self.listen(recorder)
        recorder.prime()
        self._ticker = Ticker(recorder, self.timer)
        self._started_in = threading.current_thread()
        self._cpu0 = time.process_time()
        self._ticker.start()
        return self

    def rearm(self) -> None:
        """In a forked child: the signal timer armed again (a fork does not inherit it)."""
        if self._ticker is not None:
            self._ticker.rearm()

    def _observed(self) -> bool:
        """Starts the observer when the collector asks for it and it can run here."""
        from .._observe.session import choose

        try:
            found = choose(self.collector)
        except ValueError as e:  # asked at start(), as every other state of the run
            raise StateError(str(e)) from None
        if not found.observer:
            if self.collector != "in-process":
                self.note = found.note()
            return False
        from .._memory.spy import MemorySpy

        self._spy = MemorySpy(os.getpid(), delay=self.interval, reset_peak=False, stacks=True)
        self._t0 = self._clock()  # the block starts once the observer is ready
        self._cpu0 = time.process_time()
        return True

    def _stop_observed(self) -> SamplingResult:
        from .._memory.observed import profile_from

        spy, self._spy = self._spy, None
        spy.stop()
        duration = self._clock() - self._t0
        cpu = time.process_time() - self._cpu0
        doc = spy.observed
        notes = [f"collector: the observer, another process reading this one "
                 f"({doc.get('collector', '')})"] if doc else []  # fmt: skip
        if doc is None:  # the spy could not read the stacks: nothing was sampled
            notes = [spy.stacks_note or "the observer read no stack"]
            doc = {}
        profile = profile_from(doc, self._skip, self.interval, duration, cpu,
                               self.program, notes)  # fmt: skip
        self.result = SamplingResult(profile)
        return self.result

    def stop(self) -> SamplingResult:
        """Stops sampling (the timer, handler and thread are gone when it returns).

        :return: the result
        """
        if self._spy is not None:
            return self._stop_observed()
        ticker = self._ticker
        if ticker is None:
            if self.result is None:
                raise StateError("this sampling was never started")
            return self.result
        self._ticker = None
        ticker.stop()  # from any thread: the timer, the thread and the handler all go
        self.result = SamplingResult(self._build(ticker))
        started = self._started_in
        if threading.current_thread() is not started:
            raise StateError(
                f"stop() must be called from the thread that called start() ({started.name}), "
                f"not {threading.current_thread().name}: the sampling is stopped, its result "
                "is in .result"
            )
        return self.result

    def _build(self, ticker: Ticker) -> SampledProfile:
        rec = ticker.recorder
        stacks = list(rec.table.decode())
        # Samples caught in the sampler's own start or stop are not the program's time.
        # (For the main thread, below the frames left out at the root: sample() is one.)
        own_main = {i for i, st in enumerate(stacks) if _is_own(st[self._skip :])}
        own_other = {i for i, st in enumerate(stacks) if _is_own(st)}
        threads = []
        for ident in rec.order:
            name, all_totals, line = rec.threads[ident][:3]
            own = own_main if ident == rec.main_ident else own_other
            totals = {sid: t for sid, t in all_totals.items() if sid not in own}
            timeline = [
                entry
                for entry in zip(line.times, line.weights, line.stacks, strict=True)
                if entry[2] not in own
            ]
            threads.append(ThreadProfile(ident, name, ident == rec.main_ident, totals, timeline))
        threads.sort(key=lambda t: not t.is_main)  # stable: then in order of appearance
        notes = list(ticker.notes)
        if self.note:
            notes.insert(0, self.note)
        if rec.table.merged:
            notes.append(f"stack table full: {rec.table.merged} samples kept as their outer frames")
        strides = [rec.threads[i][2].stride for i in rec.order]
        if strides and max(strides) > 1:
            notes.append(f"long run: the timeline keeps one sample in {max(strides)}")
        return SampledProfile(
            stacks=stacks,
            threads=threads,
            interval=self.interval,
            timer=self.timer if ticker.signal_samples or self.timer == "thread" else "thread",
            duration=rec.last - rec.start,
            cpu_time=time.process_time() - self._cpu0,
            samples=rec.samples,
            notes=notes,
            program=self.program,
            skip_outer=self._skip,
            cpu_known=any(rec.threads[i][3] is not None for i in rec.order),
        )

    def __enter__(self) -> Sampling:
        return self.start(depth(sys._getframe(1)) - 1 if self.skip_outer is None else None)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sampling(
    interval: float = DEFAULT_INTERVAL,
    timer: str = "prof",
    program: str = "",
    collector: str = "auto",
) -> Sampling:
    """Samples the stacks of every thread while the ``with`` block runs::

        with sampling() as s:
            work()
        print(s.result.to_text())

    :param interval: seconds between samples (default 2 ms)
    :param timer: ``prof`` (default), ``real`` or ``thread``, see :mod:`.timer`
    :param program: a name for the headers
    :param collector: ``auto``, ``observer`` or ``in-process`` (see :class:`Sampling`)
    :return: the context manager; its ``result`` is set on exit
    """
    return Sampling(interval, timer, program, collector=collector)


def sample(fct: Callable[..., Any], *args: Any, **kwargs: Any) -> SamplingResult:
    """Calls ``fct(*args, **kwargs)`` under the sampler.

    :param fct: the function
    :param args: its positional arguments
    :param kwargs: its keyword arguments (use :class:`Sampling` to set the interval)
    :return: the result; the function's return value is its ``value``
    """
    check_callable("fct", fct)
    s = Sampling(program=getattr(fct, "__qualname__", "") or repr(fct))
    s.start(depth(sys._getframe(0)))  # the root is fct itself
    try:
        value = fct(*args, **kwargs)
    finally:
        result = s.stop()
    result.value = value
    return result

"""One recording inside the current process: the high-water mark reset, the ticks, the
time sampler, the memory spy (curves, devices), the CPU time.

Lean on purpose: the child ``run`` starts (a fresh interpreter) imports this and the
recorder, not the report's model, so that the tool's own share of the program's memory
stays small (see :mod:`.child`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from .recorder import Sink, TickRecorder, reset_high_water_mark
from .stream import StreamSink

SPY_DELAY = 0.01
# The recordings streaming now: a forked child of the program goes on streaming its own
# ticks (as its own process) into the same pipe.
_STREAMING: list[Recording] = []


def _after_fork_in_child() -> None:
    for recording in _STREAMING:
        sink = recording.recorder.sink
        if isinstance(sink, StreamSink):
            recording.recorder.restart_in_child(StreamSink(sink.fd))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Recording:
    """Starts the ticks and the spy; :meth:`finish` stops them and says what they saw.

    :param sink: where ticks go
    :param interval: seconds between ticks
    :param probes: device probes for the spy, by registry name
    :param spy: start the memory spy (curves during long C calls, devices)
    :param sampler: also run the time sampler (every thread, CPU-time signal): the time
        columns then come from it
    :param offset: bytes taken off every memory reading of the ticks (the tool's own
        start-up memory, see :mod:`.child`)
    :param roots: ``root_code`` and ``root_frame`` of :class:`.recorder.TickRecorder`
    """

    def __init__(
        self,
        sink: Sink,
        interval: float = 0.005,
        probes: Sequence[str] = (),
        spy: bool = True,
        sampler: bool = True,
        offset: float = 0.0,
        **roots: Any,
    ) -> None:
        self.notes: list[str] = []
        if not reset_high_water_mark():
            self.notes.append("the high-water mark could not be reset: the peak may be older")
        # datetime's isoformat, without importing datetime (half a megabyte) for it.
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        self.cpu0 = _cpu()
        self.t0 = time.monotonic()
        self.spy: Any = None
        if spy or probes:
            from .._memory.spy import MemorySpy

            # No reset by the spy: the ticks read the same mark and must see it rise.
            self.spy = MemorySpy(
                os.getpid(), delay=SPY_DELAY, reset_peak=False, probes=tuple(probes)
            )
        self.recorder = TickRecorder(sink, interval, offset=offset, **roots)
        self.root = _root_key(roots)
        self.sampling: Any = None
        try:
            self.recorder.start()
            if isinstance(sink, StreamSink):
                _STREAMING.append(self)
            if sampler:
                # SIGALRM is the program's (pytest-timeout's, an alarm): the ticks took
                # SIGPROF, the sampler's signal; the sampler then samples from a thread.
                timer = "thread" if self.recorder.signal_name == "SIGPROF" else "prof"
                self.sampling = _start_sampler(self.recorder, timer)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stops everything without reading the spy (after a failure)."""
        recorder = getattr(self, "recorder", None)
        if recorder is not None:
            recorder.stop()
        if self in _STREAMING:
            _STREAMING.remove(self)
        _stop_sampler(getattr(self, "sampling", None), recorder)
        self.sampling = None
        if self.spy is not None:
            with contextlib.suppress(Exception):  # the failure being reported matters more
                self.spy.stop()
            self.spy = None

    def finish(self) -> dict[str, Any]:
        """Stops the ticks and the spy.

        :return: plain facts (they may cross a pipe): ``wall``, ``cpu``, ``curves``,
            ``devices``, ``exact_peak``, ``notes``, ``t0``, ``started``, ``pid``
        """
        self.recorder.stop()
        if self in _STREAMING:
            _STREAMING.remove(self)
        sampling, self.sampling = self.sampling, None
        profile = _stop_sampler(sampling, self.recorder)
        own = _code_keys(self.recorder.own_codes())
        threads = _threads(profile, self.root, own) if profile is not None else []
        wall = time.monotonic() - self.t0
        facts: dict[str, Any] = {
            "wall": wall,
            "cpu": _cpu() - self.cpu0,
            "t0": self.t0,
            "started": self.started,
            "pid": os.getpid(),
            "curves": [],
            "devices": [],
            "exact_peak": None,
            "notes": list(self.notes),
            "dropped": self.recorder.dropped,
            "threads": threads,
        }
        spy, self.spy = self.spy, None
        if spy is None:
            return facts
        try:
            result = spy.stop()
        except Exception as e:  # the report stands on the ticks alone
            facts["notes"].append(f"the memory spy failed: {e}")
            return facts
        spy_facts(result, facts)
        return facts


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


def _start_sampler(recorder: TickRecorder, timer: str) -> Any:
    """Starts the time sampler (its own signal, SIGPROF in CPU time, beside the ticks'
    SIGALRM); each leaves the other's handler frames out of its stacks."""
    from .._sampling.recorder import OWN_CODES
    from .sampling import Sampling

    OWN_CODES.update(recorder.own_codes())
    recorder.skip_codes(OWN_CODES)
    return Sampling(timer=timer, skip_outer=0).start()


def _stop_sampler(sampling: Any, recorder: TickRecorder | None) -> Any:
    """Stops the time sampler and takes the ticks' code back out of its own set.

    :return: its profile, None if it did not run or failed
    """
    if sampling is None:
        return None
    from .._sampling.recorder import OWN_CODES

    try:
        return sampling.stop().profile
    except Exception:  # the report stands on the ticks alone
        return None
    finally:
        if recorder is not None:
            OWN_CODES.difference_update(recorder.own_codes())


def _root_key(roots: dict[str, Any]) -> tuple[str, str, int] | None:
    """``(function, file, first line)`` of the root the stacks start at, if any."""
    code = roots.get("root_code")
    frame = roots.get("root_frame")
    if code is None and frame is not None:
        code = frame.f_code
    if code is None:
        return None
    return getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno


def _code_keys(codes: set[Any]) -> set[tuple[str, str, int]]:
    return {(getattr(c, "co_qualname", c.co_name), c.co_filename, c.co_firstlineno) for c in codes}


def _threads(
    profile: Any, root: tuple[str, str, int] | None, own: set[tuple[str, str, int]]
) -> list[Any]:
    """The sampler's stacks per thread as plain values (they may cross a pipe), the main
    thread's cut at the root and before a tick's handler (the tool's frames left out, as
    the ticks' are)."""
    from .._sampling.frames import OWN_THREADS

    threads = []
    for thread in profile.threads:
        if thread.name in OWN_THREADS:
            continue
        stacks = []
        for sid, totals in thread.totals.items():
            frames = tuple((f.name, f.file, f.line, f.first_line) for f in profile.stacks[sid])
            keys = [(f[0], f[1], f[3]) for f in frames]
            handler = next((i for i, k in enumerate(keys) if k in own), None)
            if handler is not None:  # the sample caught a tick: the program was under it
                frames, keys = frames[:handler], keys[:handler]
            if thread.is_main and root is not None:
                frames = frames[keys.index(root) :] if root in keys else ()
            stacks.append((frames, float(totals[0]), float(totals[1])))
        threads.append((thread.name, thread.is_main, stacks))
    return threads


def _cpu() -> float:
    times = os.times()
    return times.user + times.system

"""One recorded run inside the current process: the high-water mark reset, the ticks,
the memory spy (curves, devices), the CPU time; and the library's context manager."""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .aggregate import Aggregator
from .build import RunFacts, build_report
from .model import Device, Ending, Report
from .recorder import Sink, TickRecorder, reset_high_water_mark

SPY_DELAY = 0.01


class Recording:
    """Starts the ticks and the spy; :meth:`finish` stops them and says what they saw.

    :param sink: where ticks go
    :param interval: seconds between ticks
    :param probes: device probes for the spy, by registry name
    :param spy: start the memory spy (curves during long C calls, devices)
    :param roots: ``root_code`` and ``root_frame`` of :class:`.recorder.TickRecorder`
    """

    def __init__(
        self,
        sink: Sink,
        interval: float = 0.005,
        probes: Sequence[str] = (),
        spy: bool = True,
        **roots: Any,
    ) -> None:
        self.notes: list[str] = []
        if not reset_high_water_mark():
            self.notes.append("the high-water mark could not be reset: the peak may be older")
        self.started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.cpu0 = _cpu()
        self.t0 = time.monotonic()
        self.spy: Any = None
        if spy or probes:
            from ..memory_peak import start_spying_on

            # No reset by the spy: the ticks read the same mark and must see it rise.
            self.spy = start_spying_on(delay=SPY_DELAY, reset_peak=False, probes=tuple(probes))
        self.recorder = TickRecorder(sink, interval, **roots)
        try:
            self.recorder.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stops everything without reading the spy (after a failure)."""
        self.recorder.stop() if hasattr(self, "recorder") else None
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
        }
        spy, self.spy = self.spy, None
        if spy is None:
            return facts
        try:
            result = spy.stop()
        except Exception as e:  # the report stands on the ticks alone
            facts["notes"].append(f"the memory spy failed: {e}")
            return facts
        cpu = result["cpu"]
        times, values = zip(*cpu.series, strict=True) if len(cpu.series) else ((), ())
        facts["curves"].append(("rss", list(times), list(values), cpu.peak_source))
        facts["exact_peak"] = cpu.max_peak
        for name, mon in result.get("devices", {}).items():
            t, v = zip(*mon.series, strict=True) if len(mon.series) else ((), ())
            facts["curves"].append((name, list(t), list(v), str(mon.peak_source)))
            facts["devices"].append((name, mon.max_peak, mon.begin, mon.end))
        return facts


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def facts_of(
    program: str, interval: float, ending: Ending, facts: dict[str, Any], dropped: int = 0
) -> RunFacts:
    """:class:`RunFacts` from :meth:`Recording.finish`'s plain facts.

    :param program: what ran
    :param interval: seconds between ticks
    :param ending: how it ended
    :param facts: the plain facts
    :param dropped: ticks lost on the way
    :return: the facts
    """
    devices = [
        Device(str(n), float(p), float(b), float(e)) for n, p, b, e in facts.get("devices", ())
    ]
    notes = list(facts.get("notes", ()))
    lost = dropped + int(facts.get("dropped", 0))
    if lost:
        notes.append(f"{lost} ticks were lost (a full pipe or too many distinct stacks)")
    return RunFacts(
        program=program,
        ending=ending,
        interval=interval,
        cpu=facts.get("cpu"),
        wall=facts.get("wall"),
        t0=facts.get("t0"),
        curves=facts.get("curves", ()),
        devices=devices,
        exact_peak=facts.get("exact_peak"),
        pid=int(facts.get("pid", 0)),
        started=str(facts.get("started", "")),
        notes=notes,
    )


class Monitored:
    """What :func:`monitor` yields: ``report`` is set when the block ends."""

    def __init__(self) -> None:
        self.report: Report | None = None


@contextmanager
def monitor(
    label: str = "block", interval: float = 0.005, probes: Sequence[str] = (), spy: bool = True
) -> Iterator[Monitored]:
    """Records the block: time per function, memory growth per function and line, the
    exact peak and where it was built, the devices' memory.

    ::

        with monitor("training") as m:
            train()
        print(to_text(m.report))

    :param label: the report's title
    :param interval: seconds between ticks
    :param probes: device probes (``("nvml",)``)
    :param spy: also run the memory spy (the curve during long C calls, devices)
    :return: a :class:`Monitored`, its ``report`` set at the end (also on an exception)
    """
    from .._validate import check_number

    check_number("interval", interval, minimum=0.001)
    agg = Aggregator()
    handle = Monitored()
    caller = sys._getframe(2)  # the block's frame (above: contextlib's __enter__)
    recording = Recording(agg, interval, probes, spy, root_frame=caller)
    ending = Ending("exit", 0, "the block ended")
    try:
        yield handle
    except BaseException as e:
        ending = Ending("exception", 1, f"the block raised {type(e).__name__}: {e}")
        raise
    finally:
        facts = recording.finish()
        handle.report = build_report(agg, facts_of(label, interval, ending, facts))

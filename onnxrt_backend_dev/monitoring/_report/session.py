"""One recorded run inside the current process (its :class:`.recording.Recording`)
turned into a report; and the library's context manager."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType
from typing import Any

from .aggregate import Aggregator
from .build import RunFacts, build_report
from .model import Device, Ending, Report
from .recording import SPY_DELAY, Recording, spy_facts

__all__ = ["SPY_DELAY", "Recording", "facts_of", "monitor", "run_monitored", "spy_facts"]


def facts_of(
    program: str,
    interval: float,
    ending: Ending,
    facts: dict[str, Any],
    dropped: int = 0,
    children: Sequence[tuple[str, Aggregator]] = (),
) -> RunFacts:
    """:class:`RunFacts` from :meth:`Recording.finish`'s plain facts.

    :param program: what ran
    :param interval: seconds between ticks
    :param ending: how it ended
    :param facts: the plain facts
    :param dropped: ticks lost on the way
    :param children: the program's forked children, labelled, and their ticks
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
        threads=facts.get("threads", ()),
        children=children,
        tool_rss=float(facts.get("tool_rss") or 0.0),
        allocations=facts.get("allocations"),
        held=facts.get("held"),
    )


class Monitored:
    """What :func:`monitor` yields: ``report`` is set when the block ends."""

    def __init__(self) -> None:
        self.report: Report | None = None


@contextmanager
def monitor(
    label: str = "block",
    interval: float = 0.005,
    probes: Sequence[str] = (),
    spy: bool = True,
    sampler: bool = True,
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
    :param sampler: also run the time sampler (every thread; the time columns)
    :return: a :class:`Monitored`, its ``report`` set at the end (also on an exception)
    """
    from .._validate import check_number

    check_number("interval", interval, minimum=0.001)
    agg = Aggregator()
    handle = Monitored()
    caller = sys._getframe(2)  # the block's frame (above: contextlib's __enter__)
    recording = Recording(agg, interval, probes, spy, sampler, root_frame=caller)
    ending = Ending("exit", 0, "the block ended")
    try:
        yield handle
    except BaseException as e:
        ending = Ending("exception", 1, f"the block raised {type(e).__name__}: {e}")
        raise
    finally:
        facts = recording.finish()
        handle.report = build_report(agg, facts_of(label, interval, ending, facts))


def run_monitored(
    run: Callable[[], None],
    label: str,
    root_code: CodeType,
    interval: float = 0.005,
    probes: Sequence[str] = (),
) -> Report:
    """Runs ``run()`` under the ticks, the sampler and the spy, the stacks starting at
    ``root_code`` (a notebook cell's code); an exception is reported, then raised.

    :param run: runs the code
    :param label: the report's title
    :param root_code: the code object of what ``run`` executes
    :param interval: seconds between ticks
    :param probes: device probes
    :return: the report
    """
    agg = Aggregator()
    recording = Recording(agg, interval, probes, root_code=root_code)
    ending = Ending("exit", 0, "the cell ended")
    try:
        run()
    except BaseException as e:
        ending = Ending("exception", 1, f"the cell raised {type(e).__name__}: {e}")
        raise
    finally:
        facts = recording.finish()
    return build_report(agg, facts_of(label, interval, ending, facts))

"""One recorded run inside the current process (its :class:`.recording.Recording`)
turned into a report; and the library's context manager."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType
from typing import Any

from .._memory.series import context_of
from .aggregate import Aggregator
from .build import RunFacts, build_report
from .model import Device, Ending, Report, Site
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
    devices = devices_of(facts.get("devices", ()))
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
    )


def _device(fact: Sequence[Any]) -> Device:
    """One device from its plain fact: ``(name, peak, begin, end)``, then optionally the
    extras of ``inprocess.device_facts`` (role, uuid, context, site)."""
    name, peak, begin, end = fact[:4]
    extras = fact[4] if len(fact) > 4 and isinstance(fact[4], dict) else {}
    site = extras.get("site")
    context = extras.get("context")
    return Device(
        str(name),
        float(peak),
        float(begin),
        float(end),
        role=str(extras.get("role") or ""),
        context=None if context is None else float(context),
        site=None if not site else Site(str(site[0]), str(site[1]), int(site[2])),
        uuid=None if extras.get("uuid") is None else str(extras["uuid"]),
    )


def devices_of(facts: Sequence[Sequence[Any]]) -> list[Device]:
    """Every device of the plain facts, with the CUDA context measured apart where the
    spy's NVML (this process's usage) and the program's torch (its reserved memory) of
    one GPU are both known: the facts of ``run`` come from the two processes.

    :param facts: the devices' plain facts
    :return: the devices, in order
    """
    devices = [_device(f) for f in facts]
    found = context_of([(d.role, d.uuid, d.end) for d in devices])
    return [
        dataclasses.replace(d, context=found[i]) if d.context is None and i in found else d
        for i, d in enumerate(devices)
    ]


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
    :param probes: device probes (``("nvml",)``; ``"torch"``: torch's allocator, read in
        this process, its exact peak and the line where it rose; both: the CUDA context
        measured apart)
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

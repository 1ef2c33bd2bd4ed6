"""One recorded run inside the current process (its :class:`.recording.Recording`)
turned into a report; and the library's context manager."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType
from typing import Any

from .._memory.series import context_of
from .._sampling.aggregate import Aggregator
from .build import RunFacts, build_report
from .model import Device, Ending, Report, Site
from .recording import SPY_DELAY, Recording, block_facts, spy_facts

__all__ = ["SPY_DELAY", "Recording", "facts_of", "monitor", "run_monitored", "spy_facts"]


# Plain facts that RunFacts takes as they are (absent: its default).
_AS_THEY_ARE = ("cpu", "wall", "t0", "curves", "exact_peak", "threads", "allocations", "held")


def facts_of(
    program: str,
    interval: float,
    ending: Ending,
    facts: dict[str, Any],
    children: Sequence[tuple[str, Aggregator]] = (),
) -> RunFacts:
    """:class:`RunFacts` from :meth:`Recording.finish`'s plain facts.

    :param program: what ran
    :param interval: seconds between ticks
    :param ending: how it ended
    :param facts: the plain facts
    :param children: the program's forked children, labelled, and their ticks
    :return: the facts
    """
    notes = list(facts.get("notes", ()))
    lost = int(facts.get("dropped", 0))
    if lost:
        notes.append(f"{lost} ticks were lost (a full pipe or too many distinct stacks)")
    return RunFacts(
        program,
        ending,
        interval,
        devices=devices_of(facts.get("devices", ())),
        pid=int(facts.get("pid", 0)),
        started=str(facts.get("started", "")),
        notes=notes,
        children=children,
        tool_rss=float(facts.get("tool_rss") or 0.0),
        **{name: facts[name] for name in _AS_THEY_ARE if name in facts},
    )


def devices_of(facts: Sequence[Sequence[Any]]) -> list[Device]:
    """Every device of the plain facts, with the CUDA context measured apart where the
    spy's NVML (this process's usage) and the program's torch (its reserved memory) of
    one GPU are both known: the facts of ``run`` come from the two processes.

    :param facts: the devices' plain facts: ``(name, peak, begin, end)``, then optionally
        the extras of ``inprocess.device_facts`` (role, uuid, context, site)
    :return: the devices, in order
    """
    devices = []
    for fact in facts:
        name, peak, begin, end = fact[:4]
        extras = fact[4] if len(fact) > 4 and isinstance(fact[4], dict) else {}
        site, context, uuid = extras.get("site"), extras.get("context"), extras.get("uuid")
        devices.append(
            Device(
                str(name),
                float(peak),
                float(begin),
                float(end),
                role=str(extras.get("role") or ""),
                context=None if context is None else float(context),
                site=None if not site else Site(str(site[0]), str(site[1]), int(site[2])),
                uuid=None if uuid is None else str(uuid),
            )
        )
    found = context_of([(d.role, d.uuid, d.end) for d in devices])
    return [
        dataclasses.replace(d, context=found[i]) if d.context is None and i in found else d
        for i, d in enumerate(devices)
    ]


FALLBACK = "the in-process recorder (ticks inside the program)"


def _observed(
    interval: float, probes: Sequence[str], root: CodeType
) -> Callable[[str, Ending], Report]:
    """Starts the observer of this process, the frames above ``root`` (the block's
    callers) left out; returns what stops it and makes the report."""
    from .._memory.observed import report_inputs, root_key
    from .._memory.spy import MemorySpy

    key = root_key(root)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    spy = MemorySpy(os.getpid(), delay=max(interval, SPY_DELAY / 10), stacks=True,
                    probes=tuple(probes))  # fmt: skip
    t0 = time.monotonic()
    cpu0 = os.times().user + os.times().system

    def report(label: str, ending: Ending) -> Report:
        result = spy.stop()
        facts = block_facts(t0, cpu0, started, ())
        doc = spy.observed
        agg = Aggregator()
        if doc is not None:
            agg, facts["threads"] = report_inputs(doc, key)
            facts["notes"].append(f"collector: the observer, the memory spy reading this "
                                  f"process ({doc.get('collector', '')})")  # fmt: skip
        else:
            facts["notes"].append(spy.stacks_note or "the observer read no stack")
        spy_facts(result, facts)
        return build_report(agg, facts_of(label, interval, ending, facts))

    return report


def _block(
    interval: float,
    probes: Sequence[str],
    root: CodeType,
    auto: bool = True,
    spy: bool = True,
    sampler: bool = True,
) -> Callable[[str, Ending], Report]:
    """The recording of a block, started: the observer where :func:`.._observe.session.
    choose` takes it (``auto``), the in-process recorder otherwise (its first note says
    why) or without the spy or the sampler (``auto`` False: nothing reads from outside).

    :param spy: the in-process recorder's spy (see :class:`.recording.Recording`)
    :param sampler: its time columns
    :return: ``report(label, ending)``, which stops it and makes the report
    """
    from .._observe.session import Choice, choose

    choice = choose() if auto else Choice(False)
    if choice.observer:
        return _observed(interval, probes, root)
    agg = Aggregator()
    recording = Recording(agg, interval, probes, spy, sampler, root_code=root)
    recording.notes[:0] = [choice.note(FALLBACK)] if choice.why else []
    return lambda label, ending: build_report(
        agg, facts_of(label, interval, ending, recording.finish())
    )


@dataclasses.dataclass
class Monitored:
    """What :func:`monitor` yields: ``report`` is set when the block ends."""

    report: Report | None = None


def check_probe_names(probes: Any) -> tuple[str, ...]:
    """Refuses ``probes`` unless a sequence of registry names (a single name as a str is
    refused: it would read as its letters).

    :param probes: what the caller gave
    :return: the names
    """
    from .._errors import BadType

    if isinstance(probes, (str, bytes)) or not isinstance(probes, (list, tuple)):
        raise BadType(
            f"probes must be a list or tuple of probe names such as ('nvml',), got "
            f"{type(probes).__name__}"
        )
    bad = [p for p in probes if not isinstance(p, str)]
    if bad:
        raise BadType(f"probes must hold probe names (str), got {type(bad[0]).__name__}")
    return tuple(probes)


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
    from .._sampling.rates import check_interval
    from .._validate import check_bool, check_str

    check_str("label", label)
    check_interval(interval, minimum=0.001)
    check_probe_names(probes)
    check_bool("spy", spy)
    check_bool("sampler", sampler)
    handle = Monitored()
    caller = sys._getframe(2)  # the block's frame (above: contextlib's __enter__)
    ending = Ending("exit", 0, "the block ended")
    stop = _block(interval, probes, caller.f_code, spy and sampler, spy, sampler)
    try:
        yield handle
    except BaseException as e:
        ending = Ending("exception", 1, f"the block raised {type(e).__name__}: {e}")
        raise
    finally:
        handle.report = stop(label, ending)


def run_monitored(
    run: Callable[[], None],
    label: str,
    root_code: CodeType,
    interval: float = 0.005,
    probes: Sequence[str] = (),
    keep: Callable[[Report], None] | None = None,
) -> Report:
    """Runs ``run()`` under the ticks, the sampler and the spy, the stacks starting at
    ``root_code`` (a notebook cell's code); an exception is reported, then raised.

    :param run: runs the code
    :param label: the report's title
    :param root_code: the code object of what ``run`` executes
    :param interval: seconds between ticks
    :param probes: device probes
    :param keep: called with the report before it is returned, or before the code's
        exception (an interrupt too) goes on: the report of a failed cell is kept
    :return: the report
    """
    ending = Ending("exit", 0, "the cell ended")
    stop = _block(interval, probes, root_code)
    try:
        run()
    except BaseException as e:
        ending = Ending("exception", 1, f"the cell raised {type(e).__name__}: {e}")
        raise
    finally:
        report = stop(label, ending)
        if keep is not None:
            keep(report)
    return report

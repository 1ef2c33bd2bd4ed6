"""The allocation tracker's figures at the end of an observed run, as the report takes
them (:class:`AllocFacts`), with the notes saying what could not
be tracked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._stacks.frames import SampledFrame
from .estimate import NO_STACK, SiteEstimate
from .ring import STATE_FINALIZE, STATE_STACKS
from .tracker import AllocTracker


class AllocFacts(NamedTuple):
    """What the allocation tracking knows at the end of a run.

    :param sites: the estimates per ``(stack id, library id)``: columns keyed on the
        run's stack ids
    :param stacks: the run's stack table (the frames of each id, outermost first), not
        a copy
    :param libraries: each library id's file
    :param mean: bytes between two samples on average
    :param samples: allocations sampled
    :param peak: the exact peak of live allocated bytes
    :param peak_time: when (on the report's clock, seconds)
    :param allocated: bytes allocated (exact)
    :param count: allocation calls (exact)
    :param lost: records lost
    :param notes: what could not be tracked
    """

    sites: Sequence[SiteEstimate]
    stacks: Sequence[Sequence[SampledFrame]]
    libraries: Sequence[str]
    mean: float
    samples: int
    peak: float
    peak_time: float
    allocated: float
    count: int  # type: ignore[assignment]  # tuple.count shadowed: not called
    lost: int = 0
    notes: Sequence[str] = ()


def tracking_notes(tracker: AllocTracker, children: int = 0, preloaded: str = "") -> list[str]:
    """What the reader must know of the tracking: what was not tracked, and why.

    :param tracker: the tracker
    :param children: child processes the program started (their allocations are not
        in the report)
    :param preloaded: an allocator the user preloaded (tracked through it)
    """
    notes: list[str] = []
    header = tracker.header
    if header is None:
        return [f"allocation tracking: nothing was read ({tracker.why or 'no record'})"]
    if not header.state & STATE_STACKS:
        notes.append(f"allocations without Python stacks: {header.why or 'unknown reason'}")
    if not header.state & STATE_FINALIZE:
        notes.append("the interpreter's finalization is not known: leaks include what it frees")
    if header.table_full:
        notes.append(
            f"{header.table_full} sampled allocations' frees could not be followed (too many "
            "sampled allocations live at once): they count as live to the end"
        )
    if preloaded:
        notes.append(f"allocator {preloaded} (preloaded): its allocations are tracked through it")
    if children:
        notes.append(
            f"{children} child process(es): their allocations are not in this report (the "
            "shim is not passed on to subprocesses; forked children keep their own records)"
        )
    return notes


def by_library(sites: Sequence[SiteEstimate], libraries: Sequence[int]) -> list[SiteEstimate]:
    """The sites keyed ``(stack id, call site id)`` as ``(stack id, library id)``: the
    call sites of one library on one stack added up.

    :param sites: the estimator's sites
    :param libraries: each call site's library id
    """
    merged: dict[tuple[int, int], list[float]] = {}
    for site in sites:
        sid, call = site.key
        lid = libraries[call] if 0 <= call < len(libraries) else -1
        values = site[1:]
        row = merged.get((sid, lid), [0.0] * len(values))
        merged[sid, lid] = [a + b for a, b in zip(row, values, strict=True)]
    return [SiteEstimate((sid, lid), int(v[0]), *v[1:]) for (sid, lid), v in merged.items()]


def alloc_facts(
    tracker: AllocTracker,
    stacks: Sequence[Sequence[SampledFrame]],
    t0: float,
    notes: Sequence[str] = (),
) -> AllocFacts | None:
    """The figures of a run's allocations, None when the shim was never read.

    :param tracker: the tracker, after the run
    :param stacks: the process's decoded stacks, by id (:func:`.._observe.build.decode_stacks`)
    :param t0: the start on the records' clock (seconds)
    :param notes: what could not be tracked
    """
    header, est = tracker.header, tracker.estimator
    if header is None or est is None:
        return None
    estimates = est.estimates()
    peak_time = estimates.peak_time if estimates.peak_time >= 0 else header.peak_time / 1e9
    return AllocFacts(
        sites=by_library(estimates.sites, tracker.site_libraries()),
        stacks=stacks,
        libraries=list(tracker.libraries),
        mean=float(header.mean),
        samples=estimates.samples,
        peak=float(max(header.peak, 0)),
        peak_time=max(peak_time - t0, 0.0),
        allocated=float(header.allocated),
        count=int(header.allocs),
        lost=tracker.lost(),
        notes=list(notes),
    )


def tracker_doc(tracker: AllocTracker, t0: float) -> tuple[Any, ...] | None:
    """What a tracker read, as plain values (it crosses the spy's pipe, marshalled): the
    fields of its :class:`AllocFacts`, the sites as tuples, the stacks travelling apart.

    :param tracker: the tracker
    :param t0: the start on the records' clock (seconds)
    """
    facts = alloc_facts(tracker, (), t0, tracking_notes(tracker))
    if facts is None:
        return None
    return ([tuple(s) for s in facts.sites], *facts[1:])


def facts_from_doc(doc: Any, stacks: Sequence[Sequence[SampledFrame]]) -> AllocFacts | None:
    """The figures of :func:`tracker_doc` again (None when ``doc`` is not one), on the
    stacks the receiver decoded (and cut at the block's root); the sites whose stack was
    cut away (outside the block: the tool's own) left out.

    :param doc: what :func:`tracker_doc` gave (untrusted: checked)
    :param stacks: the frames of each stack id, outermost first (``SampledFrame``)
    """
    try:
        raw, _, libraries, mean, samples, peak, peak_time, allocated, count, lost, notes = doc
        sites = [SiteEstimate((int(s[0][0]), int(s[0][1])), int(s[1]),
                              *(float(v) for v in s[2:])) for s in raw]  # fmt: skip
        facts = AllocFacts(sites, stacks, [str(x) for x in libraries], float(mean),
                           int(samples), float(peak), float(peak_time), float(allocated),
                           int(count), int(lost), [str(x) for x in notes])  # fmt: skip
    except (TypeError, ValueError, IndexError):
        return None
    n = len(stacks)
    kept = [s for s in sites if s.key[0] == NO_STACK or (0 <= s.key[0] < n and stacks[s.key[0]])]
    return facts._replace(sites=kept)

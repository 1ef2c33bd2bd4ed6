"""The observer of a block of code: the memory spy (another process) reads its parent's
stacks at each of its ticks, on its clock (``spy(stacks=True)``, ``%%spy --stacks``,
``spy --where``): no thread, no signal handler in the program measured.

At each tick, every thread's stack; the tick's stack is the one credited with what the
memory did since the previous tick (see :func:`.observer.credit`), among the threads
that are not this tool's own (the spy's reader thread in the parent, by name). The
result is plain values (it crosses a pipe): the tick times and stack ids, the stacks as
frames, and each thread's columns per stack.
"""

from __future__ import annotations

import array
import itertools
from typing import Any

from .._observe.observer import EMPTY, ProcessRecord, read_rows, sample_threads
from .._observe.session import describe, open_target
from .._sampling.aggregate import NO_STACK, Aggregator, to_state
from .._sampling.frames import OWN_THREADS
from .._sampling.recorder import StackSamples, ThreadLine
from .._stacks.frames import SampledFrame
from .frames import is_own_frame

MAX_TICKS = 1 << 20


class _NoSink:
    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        """Memory is the spy's own series: nothing here."""


class BlockObserver:
    """Reads the stacks of process ``pid`` at each :meth:`tick`.

    :param pid: the process (the spy's parent)
    :param max_points: tick records kept at most (halved beyond, as the spy's series)
    :param alloc: the allocation shim's file when the process samples its allocations
        into its ring (read at each tick, see :mod:`.._alloc.tracker`), '' otherwise
    :raises ObserveError: it cannot be read (the caller falls back)
    """

    def __init__(self, pid: int, max_points: int = MAX_TICKS, alloc: str = "") -> None:
        target = open_target(pid)
        self.record = ProcessRecord(pid, target.reader, target.verified.native_flags, _NoSink())
        if alloc:
            from .._alloc.tracker import AllocTracker

            self.record.alloc = AllocTracker(pid, alloc)
        self.first_t = -1.0
        self.collector = describe(target)
        self.max_points = max(int(max_points), 2)
        self.log = ThreadLine()  # the credited stack at each tick
        self.failed = 0
        # The memory of each tick with its stack: what a report of the block is made of.
        self.aggregate = Aggregator()

    def tick(self, t: float, rss: float | None = None, peak: float | None = None) -> None:
        """Reads every thread now and records the credited stack (and, given the
        spy's reading of the memory, the tick in :attr:`aggregate`).

        :param t: the tick's time (the spy's clock)
        :param rss: the resident memory now (bytes)
        :param peak: the highest since the previous tick (bytes), or the high-water mark
        """
        record = self.record
        dt = t - record.last_t if record.samples else 0.0
        record.samples += 1
        record.last_t = t
        try:
            rows = read_rows(record)
        except Exception:  # the process moved or is ending: this tick has no stack
            rows = None
        if rows is None:
            self.failed += 1
        sid = sample_threads(record, rows or [], t, dt, skip=self._own_thread)
        if record.alloc is not None:
            record.alloc.sample(record, t)
        if self.first_t < 0:
            self.first_t = t
        if rss is not None:
            self.aggregate.add_tick(t, rss, peak if peak is not None else rss, sid)
        self.log.add(t, sid, 0.0, self.max_points)

    def _own_thread(self, name: str) -> bool:
        return name in OWN_THREADS

    def result(self) -> dict[str, Any]:
        """What was read, as plain values: ``times`` and ``ids`` (array bytes), ``stacks``
        (frames ``(name, file, first line, line)``, outermost first), ``threads`` (name,
        main, ``{stack id: columns}``), ``collector``, ``failed``, ``allocations`` (see
        :func:`.._alloc.report.tracker_doc`, None when not sampled)."""
        from .._observe.build import decode_stacks, native_threads

        record = self.record
        stacks = [
            [(f.name, f.file, f.first_line, f.line) for f in frames]
            for frames in decode_stacks(record)
        ]
        threads = []
        for key in record.order:
            th = record.threads[key]
            if th.name in OWN_THREADS:
                continue
            rows = {sid: list(row) for sid, row in th.rows.items() if record.key_list[sid]}
            name = th.name or ("MainThread" if th.is_main else str(th.native_id))
            line = th.line
            timeline = (line.times.tobytes(), line.weights.tobytes(), line.stacks.tobytes())
            threads.append((name, th.is_main, rows, th.ident, timeline))
        allocations = None
        if record.alloc is not None:
            from .._alloc.report import tracker_doc

            allocations = tracker_doc(record.alloc, self.first_t)
        return {
            "allocations": allocations,
            "times": self.log.times.tobytes(),
            "ids": self.log.stacks.tobytes(),
            "stacks": stacks,
            "threads": threads,
            "collector": self.collector,
            "failed": self.failed,
            "empty": record.keys.get(EMPTY, -1),
            "aggregate": to_state(self.aggregate),
            "native_threads": native_threads(record),
        }


# -- the parent's side: what the spy's observer read, as the models -------------------

RootKey = tuple[str, str, int]  # a code's (qualified name, file, first line)


def decoded(doc: dict[str, Any]) -> list[tuple[SampledFrame, ...]]:
    """The observer's stacks, one per id, as frames outermost first (sent as ``(name,
    file, first line, line)`` each, untrusted: one that is not a stack is empty).

    :param doc: the ``stacks`` entry of the spy's result
    """
    out: list[tuple[SampledFrame, ...]] = []
    for raw in doc.get("stacks", ()):
        try:
            out.append(tuple(SampledFrame(str(n), str(f), int(first), int(line))
                             for n, f, first, line in raw))  # fmt: skip
        except (TypeError, ValueError):
            out.append(())
    return out


def from_observer(doc: dict[str, Any]) -> StackSamples:
    """What the spy's observer read of this process as the in-process recorder's running
    stacks (:meth:`.._sampling.recorder.Recorder.running_samples`): one attribution for
    both collectors.

    :param doc: the ``stacks`` entry of the spy's result (plain values, checked)
    """
    times = array.array("d")
    ids = array.array("q")
    raw_times, raw_ids = doc.get("times", b""), doc.get("ids", b"")
    if isinstance(raw_times, bytes) and isinstance(raw_ids, bytes):
        times.frombytes(raw_times[: len(raw_times) // 8 * 8])
        ids.frombytes(raw_ids[: len(raw_ids) // 8 * 8])
    n = min(len(times), len(ids))
    stacks = decoded(doc)
    empty = doc.get("empty", -1)
    cleaned = array.array("q", (i if 0 <= i < len(stacks) and i != empty else NO_STACK
                                for i in ids[:n]))  # fmt: skip
    return StackSamples(times[:n], cleaned, stacks, int(doc.get("failed", 0) or 0))


def root_key(code: Any) -> RootKey:
    """``(qualified name, file, first line)`` of a code object as the observer reads it:
    the root of a block's stacks (the frames above it are the caller's, not the block's).

    :param code: a code object
    """
    return getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno


def cut(frames: tuple[Any, ...], root: RootKey | None) -> tuple[Any, ...]:
    """A stack from the block's root down, the tool's own frames (its start and stop
    running in the block's thread) and what they called left out; empty when the root
    is not on it (a stack outside the block).

    :param frames: outermost first
    :param root: the block's root, None to keep every frame
    """
    start = 0
    if root is not None:
        start = next((i for i, f in enumerate(frames) if (f.name, f.file, f.first_line) == root),
                     -1)  # fmt: skip
        if start < 0:
            return ()
    end = next((i for i in range(start, len(frames)) if is_own_frame(frames[i])), len(frames))
    return tuple(frames[start:end])


def stacks_of(doc: dict[str, Any], root: RootKey | None) -> list[tuple[Any, ...]]:
    """The observer's stacks, one per id, decoded and cut at the block's root (see
    :func:`cut`: empty where outside the block).

    :param doc: the ``stacks`` entry of the spy's result
    :param root: the block's root
    """
    return [cut(frames, root) if frames else () for frames in decoded(doc)]


def _timeline(raw: Any) -> list[tuple[float, float, int]]:
    try:
        times, weights, stacks = (array.array(c) for c in "ddq")
        times.frombytes(raw[0])
        weights.frombytes(raw[1])
        stacks.frombytes(raw[2])
    except (TypeError, ValueError, IndexError):
        return []
    return list(zip(times, weights, stacks, strict=False))


def profile_from(
    doc: dict[str, Any],
    skip_outer: int,
    interval: float,
    duration: float,
    cpu_time: float,
    program: str,
    notes: list[str],
) -> Any:
    """The sampled profile (a :class:`.._sampling.model.SampledProfile`) of a block,
    from what the spy's observer read.

    :param doc: the ``stacks`` entry of the spy's result
    :param skip_outer: frames of the main thread's stacks left out at the root (the
        block's callers), as the in-process sampler's ``skip_outer``
    :param interval: seconds between samples
    :param duration: wall seconds of the block
    :param cpu_time: CPU seconds of the process over the block
    :param program: a name for the headers
    :param notes: sentences for the reader
    """
    from .._observe.build import split
    from .._sampling.model import SampledProfile, ThreadProfile

    raw = decoded(doc)
    index: dict[tuple[Any, ...], int] = {}  # the stacks kept, in order

    def kept(sid: int, is_main: bool) -> int:
        if not 0 <= sid < len(raw):
            return -1
        frames = cut(raw[sid][skip_outer:] if is_main else raw[sid], None)
        return index.setdefault(frames, len(index)) if frames else -1

    threads = []
    for name, is_main, rows, ident, timeline in doc.get("threads", ()):
        totals: dict[int, list[float]] = {}
        for sid, row in rows.items():
            new = kept(int(sid), bool(is_main))
            if new >= 0:
                cols = split(list(map(float, row)))
                old = totals.get(new, [])
                # Two stacks cut to one: a row with the pool's column and one without.
                totals[new] = [a + b for a, b in itertools.zip_longest(old, cols, fillvalue=0.0)]
        if not totals:
            continue
        line = [(t, w, kept(s, bool(is_main))) for t, w, s in _timeline(timeline)]
        line = [e for e in line if e[2] >= 0]
        threads.append(ThreadProfile(int(ident), str(name), bool(is_main), totals, line))
    threads.sort(key=lambda t: not t.is_main)
    samples = sum(int(r[0]) for e in doc.get("threads", ()) for r in e[2].values())
    return SampledProfile(
        stacks=list(index), threads=threads, interval=interval, timer="observer",
        duration=duration, cpu_time=cpu_time, samples=samples, notes=notes,
        program=program, skip_outer=0, cpu_known=True, split_known=True,
        native_threads=[tuple(t) for t in doc.get("native_threads", ())],
    )  # fmt: skip


def report_inputs(
    doc: dict[str, Any], root: RootKey | None
) -> tuple[Aggregator, list[tuple[str, bool, dict[int, list[float]]]]]:
    """The memory ticks (an aggregator, its stacks declared) and the sampled threads of
    a block, as the report's builder takes them.

    :param doc: the ``stacks`` entry of the spy's result
    :param root: the block's root code
    """
    from .._observe.build import totals_of
    from .._sampling.aggregate import from_state

    stacks = stacks_of(doc, root)
    agg = from_state(doc["aggregate"])
    for sid, frames in enumerate(stacks):
        agg.add_stack(sid, frames)
    threads = []
    for name, is_main, rows, _ident, _timeline_raw in doc.get("threads", ()):
        kept = totals_of(rows, stacks)
        if kept:
            threads.append((str(name), bool(is_main), kept))
    return agg, threads

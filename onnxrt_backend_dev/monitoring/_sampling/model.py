"""The sampled profile: decoded stacks and, per thread, the time each stack stood for.

Plain data, built once at the end of a run (see :mod:`.session`); the views
(:mod:`.view`) and the renderers read it, it imports neither.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._stacks.frames import SampledFrame

Stack = tuple[SampledFrame, ...]  # outermost first

# The columns of a thread's row for one stack (``ThreadProfile.totals``): the first three
# always, the CPU split where the collector measures it (the observer), the memory where
# the run measured it (``run``: growth while the stack ran, growth up to the peak, the
# highest resident memory seen while it ran), then the CPU of the threads Python does not
# know (a BLAS or ONNX Runtime pool) while the main thread ran the stack (the observer).
# A shorter row means zeros (highest: 0): a file saved before a column was added loads.
WALL, CPU, SAMPLES, PYTHON, NATIVE, SYSTEM, QUEUED, NET, TO_PEAK, HIGHEST, POOL = range(11)
NCOLUMNS = 11

# The ``timer`` of a profile that was not sampled: cProfile's call paths, each stack
# weighted by its own time (see ``_profiling.view_folded``): no samples, no lines.
CPROFILE = "cprofile"


def column(totals: list[float], index: int) -> float:
    """A column of a row, 0 where the row is shorter.

    :param totals: the row
    :param index: the column
    """
    return totals[index] if index < len(totals) else 0.0


class ThreadProfile:
    """What one thread ran.

    :param ident: the thread's id
    :param name: its name
    :param is_main: True for the main thread
    :param totals: stack id -> its row of columns (:data:`WALL`, :data:`CPU`,
        :data:`SAMPLES`, then where known :data:`PYTHON`... :data:`POOL`)
    :param timeline: ``(start, duration, stack id)`` in time order, seconds from the start
    :param kind: ``thread``, or ``process`` for a child process of the program (its
        ``name`` then says which)
    """

    def __init__(
        self,
        ident: int,
        name: str,
        is_main: bool,
        totals: dict[int, list[float]],
        timeline: list[tuple[float, float, int]] | None = None,
        kind: str = "thread",
    ) -> None:
        self.ident = ident
        self.name = name
        self.kind = kind
        self.is_main = is_main
        self.totals = totals
        self.timeline = timeline if timeline is not None else []

    @property
    def wall(self) -> float:
        """Seconds this thread was sampled for."""
        return sum(t[0] for t in self.totals.values())

    @property
    def cpu(self) -> float:
        """CPU seconds of this thread over its samples (0 where unknown)."""
        return sum(t[1] for t in self.totals.values())

    def split(self) -> tuple[float, float, float]:
        """Python, native and system CPU seconds of this thread (0 where unknown)."""
        py = nat = sy = 0.0
        for t in self.totals.values():
            if len(t) >= 6:
                py, nat, sy = py + t[3], nat + t[4], sy + t[5]
        return py, nat, sy


class SampledProfile:
    """A run as the sampler saw it.

    :param stacks: stack id -> frames, outermost first
    :param threads: one per thread, the main thread first, then in order of appearance
    :param interval: the sampling interval, seconds
    :param timer: how samples were taken (``prof``, ``real``, ``thread``, ``observer``), or
        :data:`CPROFILE` for cProfile's call paths
    :param duration: wall seconds from start to stop
    :param cpu_time: CPU seconds of the process over the run
    :param samples: samples taken
    :param notes: what the user must know (a signal taken, stacks merged, decimation)
    :param program: what ran (a script name, a function), for the headers
    :param skip_outer: frames left out at the root of the main thread's stacks (the
        caller's frames above the profiled code)
    :param cpu_known: whether per-thread CPU times were read
    :param split_known: whether the CPU time is split into Python, native and system
    :param native_threads: threads Python does not know (a BLAS or ONNX Runtime pool):
        ``(kernel name, count, CPU seconds)``
    :param memory_known: whether rows have the memory columns (a ``run``)
    :param lines_known: whether frames hold the line that ran (a saved result keeps
        functions only: no hot lines then)
    """

    def __init__(
        self,
        stacks: list[Stack],
        threads: list[ThreadProfile],
        interval: float,
        timer: str,
        duration: float,
        cpu_time: float,
        samples: int,
        notes: list[str] | None = None,
        program: str = "",
        skip_outer: int = 0,
        cpu_known: bool = True,
        split_known: bool = False,
        native_threads: list[tuple[str, int, float]] | None = None,
        memory_known: bool = False,
        lines_known: bool = True,
    ) -> None:
        # A plain class: importing dataclasses (and inspect) would slow every run's start.
        self.stacks = stacks
        self.threads = threads
        self.interval = interval
        self.timer = timer
        self.duration = duration
        self.cpu_time = cpu_time
        self.samples = samples
        self.notes = notes if notes is not None else []
        self.program = program
        self.skip_outer = skip_outer
        self.cpu_known = cpu_known
        self.split_known = split_known
        self.native_threads = native_threads if native_threads is not None else []
        self.memory_known = memory_known
        self.lines_known = lines_known

    def thread_stacks(self, thread: ThreadProfile) -> Iterator[tuple[Stack, list[float]]]:
        """``(frames, [wall, cpu, samples])`` of a thread, the caller's frames left out.

        :param thread: one of :attr:`threads`
        """
        skip = self.skip_outer if thread.is_main else 0
        for sid, totals in thread.totals.items():
            yield self.stacks[sid][skip:], totals

    def weighted_stacks(self, cpu: bool = False) -> Iterator[tuple[list[SampledFrame], float]]:
        """Every thread's stacks as the shared exporters read them, each rooted at a frame
        naming its thread (``thread MainThread``).

        :param cpu: weight by CPU seconds, not wall seconds
        :return: ``(frames, seconds)`` pairs
        """
        for thread in self.threads:
            root = SampledFrame(f"thread {thread.name}", "", 0, 0)
            for frames, totals in self.thread_stacks(thread):
                yield [root, *(f.function() for f in frames)], totals[1 if cpu else 0]

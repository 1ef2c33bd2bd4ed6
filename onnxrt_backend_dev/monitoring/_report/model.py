"""The report's model: frozen values, no rendering.

Memory columns have one meaning each, all in bytes of resident memory (RSS):

- ``net``: the net growth while the code ran, rises minus falls; over all rows of one
  level it adds up to ``last - first``;
- ``to_peak``: the same, from the start up to the peak moment (the peak's exact excess
  over the last tick, measured by the high-water mark, credited to the code running
  when the mark rose); it adds up to ``peak - start``;
- ``highest``: the highest RSS reached while the code ran.

Allocations (:class:`Allocations`, when the allocation shim ran in the program) are
another measure: bytes the program asked of the allocator (``malloc``... and anonymous
``mmap``), estimated from allocations sampled by bytes, each with its 95 % error bar.
What is live at the peak of those bytes answers "what is the peak made of"; the RSS
columns above answer "what grew the resident memory".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA = "onnxrt-monitoring-report"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Site:
    """A place in the code.

    :param function: the (qualified) function name, ``<module>`` for a module's code
    :param file: the file
    :param line: the line running (the function's first line in the call tree)
    :param library: the file belongs to the standard library or an installed package
    """

    function: str
    file: str
    line: int
    library: bool = False


@dataclass(frozen=True)
class Curve:
    """A memory curve: ``(seconds since the start, bytes)`` points.

    :param name: ``"rss"`` for the process, ``"nvml:gpu0"``... for a device
    :param times: seconds since the start
    :param values: bytes
    :param peak: the highest value (exact where the source is the high-water mark)
    :param peak_time: when it was reached, seconds since the start
    :param source: where the figures come from (``"hwm"``, ``"ticks"``, the probe)
    """

    name: str
    times: tuple[float, ...]
    values: tuple[float, ...]
    peak: float
    peak_time: float
    source: str = ""


@dataclass(frozen=True)
class Span:
    """A stretch of time where one function ran (the timeline).

    :param start: seconds since the start
    :param end: seconds since the start
    :param row: 0 for the outermost user function, 1 for the innermost one
    :param label: the function's label
    """

    start: float
    end: float
    row: int
    label: str


@dataclass(frozen=True)
class TreeRow:
    """One row of the call tree, in pre-order; ``parent`` is an index into the rows.

    :param parent: the parent row's index, -1 for a root
    :param depth: 0 for a root
    :param site: the function (``line`` is its first line)
    :param time: seconds inside it (its callees included), from the ticks: each tick
        stands for the time since the previous one
    :param self_time: seconds where it was the innermost shown frame
    :param net: net memory growth while it ran (callees included)
    :param to_peak: net growth up to the peak moment (callees included)
    :param highest: highest RSS reached while it ran
    :param hidden: library frames folded into this row (``"3 frames hidden (numpy)"``)
    """

    parent: int
    depth: int
    site: Site
    time: float
    self_time: float
    net: float
    to_peak: float
    highest: float
    hidden: str = ""


@dataclass(frozen=True)
class LineRow:
    """One source line: the innermost user line of the ticks.

    :param site: the line
    :param time: seconds on it
    :param net: net growth credited to it
    :param to_peak: growth up to the peak credited to it
    :param source: the line's text (stripped), empty when unreadable
    :param split: CPU seconds in Python, native code and the kernel, and seconds
        runnable waiting for a CPU, where the collector measures them (zeros otherwise),
        then the CPU seconds of the threads Python does not know while it ran, if any
    """

    site: Site
    time: float
    net: float
    to_peak: float
    source: str = ""
    split: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class FunctionRow:
    """One function's figures, flat (every call path added up, a recursive call counted
    once), as the tree's columns mean them; unlike the tree, nothing folded. What ``run
    --save`` keeps of a run.

    :param site: the function (``line`` is its first line)
    :param time: seconds while it ran (its callees included)
    :param self_time: seconds where it was the innermost user function (the library
        functions it called folded in, as the hot lines count them)
    :param net: net growth while it ran (callees included)
    :param to_peak: growth up to the peak while it ran (callees included)
    :param self_cpu: CPU seconds of its thread where it was the innermost user function
        (from the time sampler; 0 without it): what other processes take from the
        program on a busy machine is not counted
    """

    site: Site
    time: float
    self_time: float
    net: float
    to_peak: float
    self_cpu: float = 0.0


@dataclass(frozen=True)
class Part:
    """One slice of what the peak is made of.

    :param label: the function (``function (file:line)``) or ``"other"``
    :param bytes: its growth from the start to the peak (negative: it freed memory)
    """

    label: str
    bytes: float


@dataclass(frozen=True)
class Peak:
    """The exact peak of the process's RSS and where it was built.

    :param value: bytes, from the high-water mark
    :param start: RSS at the first tick
    :param time: seconds since the start when the high-water mark rose to it
    :param site: the line that built the peak: the line running when the mark rose to
        it, unless another user line grew the memory more than twice as much up to the
        peak (what holds most of it); None if unknown
    :param called: the first library function that line called (``numpy.ones``)
    :param stack: a stack of that line, outermost first
    :param source: ``"hwm"`` (exact) or ``"ticks"`` (sampled)
    :param reached: the innermost user line running when the mark rose to the peak
    :param tool: bytes of this tool's own start-up memory taken off every RSS figure
        (``value``, ``start``, the curve): the process's high-water mark was
        ``value + tool``; 0 when nothing was taken off
    """

    value: float
    start: float
    time: float
    site: Site | None = None
    called: str = ""
    stack: tuple[Site, ...] = ()
    source: str = "hwm"
    reached: Site | None = None
    tool: float = 0.0


@dataclass(frozen=True)
class Ending:
    """How the program ended.

    :param kind: ``"exit"``, ``"exception"``, ``"signal"`` (killed by one),
        ``"interrupted"``, ``"os_exit"``, ``"lost"`` (the process vanished without a word)
    :param code: the exit code the command returns
    :param detail: one readable sentence (``"killed by SIGKILL"``)
    :param last_site: the innermost user line allocating at the end (the last tick whose
        RSS rose), None if none rose
    :param last_stack: the stack of that tick, outermost first
    """

    kind: str
    code: int
    detail: str
    last_site: Site | None = None
    last_stack: tuple[Site, ...] = ()


@dataclass(frozen=True)
class Device:
    """One channel of a device's memory (a GPU): every one the probes measured, the
    device-wide and the per-process ones alike.

    :param name: ``probe:name`` (``"nvml:gpu0"``, ``"nvml:gpu0:process"``,
        ``"torch:cuda0"``, ``"torch:cuda0:reserved"``)
    :param peak: bytes (exact for torch's allocated memory: ``max_memory_allocated``)
    :param begin: bytes at the first measure
    :param end: bytes at the last measure
    :param role: what it measures: ``"device"`` (the whole device, every process),
        ``"process"`` (this process's usage), ``"allocated"``, ``"reserved"`` (an
        allocator's), empty if unknown
    :param context: for a ``"process"`` channel, the bytes outside torch's allocator at
        the end (the CUDA context, the libraries' workspaces) when measured apart (torch's
        reserved memory of the same GPU known), None otherwise
    :param site: the line running when the peak rose (in-process probes), None if unknown
    :param uuid: the device's UUID where known
    """

    name: str
    peak: float
    begin: float
    end: float
    role: str = ""
    context: float | None = None
    site: Site | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class AllocLine:
    """One source line's allocations: those whose innermost user frame is this line
    (the native calls it made included). Bytes are estimates from the samples; each
    ``*_err`` is the 95 % error bar of the figure before it.

    :param site: the line
    :param live_peak: bytes of its allocations live at the peak
    :param live_peak_err: error bar
    :param allocated: bytes it allocated over the run
    :param allocated_err: error bar
    :param count: allocations it made (an estimate)
    :param temporary: bytes of its allocations freed with at most one other allocation
        of their thread in between (memray's ``--temporary-allocations``)
    :param temporary_count: how many
    :param live_end: bytes of its allocations still live at the end of the program's
        code (freed only by the interpreter's finalization, or never)
    :param live_end_err: error bar
    :param samples: sampled allocations behind these figures
    :param called: the first library function the line called (``numpy.concatenate``)
    :param native: the native library that called the allocator for most of its bytes
        (``onnxruntime``, ``numpy``...), empty for the interpreter itself
    :param source: the line's text
    """

    site: Site
    live_peak: float
    live_peak_err: float
    allocated: float
    allocated_err: float
    count: float
    temporary: float
    temporary_count: float
    live_end: float
    live_end_err: float
    samples: int
    called: str = ""
    native: str = ""
    source: str = ""


@dataclass(frozen=True)
class AllocNode:
    """One box of the icicle of what is live at the peak, in pre-order; ``parent`` is an
    index into the nodes.

    :param parent: the parent node's index, -1 for a root
    :param depth: 0 for a root
    :param site: the frame: its function and the line running in it (a native
        library's box: ``[library]`` with no file)
    :param bytes: bytes live at the peak below it
    :param err: their error bar
    :param hidden: library frames folded into it (``"3 frames hidden (numpy)"``)
    :param source: the line's text (a user frame's), empty otherwise
    """

    parent: int
    depth: int
    site: Site
    bytes: float
    err: float
    hidden: str = ""
    source: str = ""


@dataclass(frozen=True)
class Allocations:
    """The program's allocations, from the allocation shim: exact counters and
    estimates from allocations sampled by bytes.

    :param mean: bytes between two samples on average (the sampling rate)
    :param samples: allocations sampled
    :param peak: the exact peak of live allocated bytes (every allocation counted)
    :param peak_time: when, seconds since the start
    :param live_peak: the samples' estimate of it (a check of the estimates)
    :param live_peak_err: its error bar
    :param allocated: bytes allocated over the run (exact)
    :param count: allocation calls (exact)
    :param lines: the lines holding most at the peak, most first
    :param flame: the icicle of what is live at the peak
    :param leaks: lines whose allocations are still live at the end, most first, above
        1 % of the peak and their error bar (imports left out: a module's state is kept
        on purpose; and what no Python line allocated)
    :param temporaries: lines allocating the most in temporary allocations
    :param allocating: lines allocating the most bytes over the run
    :param lost: records lost on the way (a full ring), whose allocations the
        estimates miss
    :param notes: what could not be tracked, and why
    """

    mean: float
    samples: int
    peak: float
    peak_time: float
    live_peak: float
    live_peak_err: float
    allocated: float
    count: int
    lines: tuple[AllocLine, ...] = ()
    flame: tuple[AllocNode, ...] = ()
    leaks: tuple[AllocLine, ...] = ()
    temporaries: tuple[AllocLine, ...] = ()
    allocating: tuple[AllocLine, ...] = ()
    lost: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """Time, memory and GPU of one run.

    :param program: what ran (``script.py``, ``-m mod``, a command line)
    :param wall: seconds
    :param cpu: CPU seconds of the process (user + system), None if unknown
    :param interval: seconds between two ticks
    :param n_ticks: ticks taken
    :param peak: the exact peak and where it was built
    :param end_rss: RSS at the last tick
    :param ending: how the program ended
    :param curves: the RSS curve first, then one per device
    :param devices: each device's peak
    :param timeline: which function ran when
    :param tree: the call tree, pre-order
    :param lines: the hot lines, most time first
    :param composition: what the peak is made of, largest first, adding up to
        ``peak.value - peak.start``
    :param pid: the process
    :param started: when it started (ISO 8601, UTC)
    :param dropped: ticks lost (full buffers, too many distinct stacks)
    :param notes: what the reader should know (a sampled peak, lost ticks)
    :param functions: every function's flat figures, most time first (not folded as the
        tree's small rows are)
    :param allocations: the allocations, when the allocation shim ran (None otherwise)
    """

    program: str
    wall: float
    cpu: float | None
    interval: float
    n_ticks: int
    peak: Peak
    end_rss: float
    ending: Ending
    curves: tuple[Curve, ...] = ()
    devices: tuple[Device, ...] = ()
    timeline: tuple[Span, ...] = ()
    tree: tuple[TreeRow, ...] = ()
    lines: tuple[LineRow, ...] = ()
    composition: tuple[Part, ...] = ()
    pid: int = 0
    started: str = ""
    dropped: int = 0
    notes: tuple[str, ...] = field(default=())
    version: int = SCHEMA_VERSION
    functions: tuple[FunctionRow, ...] = ()
    allocations: Allocations | None = None

    def export(self, path: Any, fmt: str | None = None, **options: Any) -> str:
        """Writes the report into ``path`` in the format its suffix names (``.txt``,
        ``.json``, ``.html``), as every result of the package does (see ``_export``:
        the renderers are imported there, never by the model).

        :param path: the file
        :param fmt: ``text``, ``json`` or ``html``; None to guess it from the suffix
        :param options: given to the renderer
        :return: the format written
        """
        from .._export import export

        return export(self, path, fmt, **options)

    @property
    def utilisation(self) -> float | None:
        """CPU time over wall time (1.0 is one core busy), None if unknown."""
        if self.cpu is None or self.wall <= 0:
            return None
        return self.cpu / self.wall

    @property
    def total_time(self) -> float:
        """Seconds counted in the call tree (its roots' time)."""
        return sum(r.time for r in self.tree if r.parent < 0)


def check_report(report: Any) -> Report:
    """Refuses what is not a report (a renderer's argument), naming its type.

    :param report: what was given
    :return: the report
    :raises BadType: not a :class:`Report`
    """
    if not isinstance(report, Report):
        from .._errors import BadType

        raise BadType("report must be a Report (from monitor() or from_json), got "
                      f"{type(report).__name__}")  # fmt: skip
    return report

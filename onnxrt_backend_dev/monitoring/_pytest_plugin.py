"""pytest plugin: time and memory of a block inside a test, and time and memory limits.

Installing ``onnxrt-backend-dev`` registers it (entry point ``onnxrt_monitoring``; ``-p
no:onnxrt_monitoring`` disables it). Nothing happens to a test that does not ask for it:
importing the plugin imports nothing heavy, and the fixtures and markers act only where
used. Fixtures::

    def test_load(monitor_time, monitor_memory):
        with monitor_time("load") as t:                # one run, monotonic clock
            data = load()
        with monitor_memory("build", limit="200 MB") as m:
            model = build(data)
        assert t.elapsed < 10 and m.increase < 300 * 2**20
        res = monitor_time.measure(lambda: model(data), repeat=5, number=3)

``monitor_time.measure`` calls
:func:`~onnxrt_backend_dev.monitoring.benchmark.measure_time`; ``monitor_memory`` runs
the block under :func:`~onnxrt_backend_dev.monitoring.memory_peak.start_spying_on` (see
:class:`MemoryBlock`). Peaks are exact (the kernel's high-water mark, reset at each tick
of the spy) for the outermost block; a nested block may miss spikes shorter than its
``delay``.

Markers: ``@pytest.mark.limit_memory("200 MB")`` fails the test when its call phase
(fixtures excluded) allocates more: the peak of the bytes live of the allocations made
during the call, counted exactly (``malloc`` and its kin, anonymous ``mmap``), as
pytest-memray does; the same code gives the same bytes whatever ran before. Without the
allocation shim, or with ``source="rss"``, the limit applies to how far the resident
memory rose (``absolute=True``: the peak itself). Sizes are read by
:func:`~onnxrt_backend_dev.monitoring._format.parse_bytes` (``kB``, ``MB``, ``GB`` are
powers of 1024). ``@pytest.mark.limit_time(2.5)``
fails the test when its call phase takes more than 2.5 seconds.

Every measured block is listed in a "monitoring" section of the test's report and in
``user_properties`` (JUnit XML), and a table at the end of the session
(``--no-monitoring-summary`` or ``monitoring_summary = false`` turns it off). The
options ``--monitoring-save``, ``--monitoring-compare``, ``--monitoring-threshold``,
``--monitoring-clock``, ``--monitoring-counter``, ``--monitoring-json`` and
``--monitoring-force`` are described in the docs (integrations, "pytest plugin").
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from ._errors import BadType, BadValue, MonitoringError
from ._format import format_bytes, format_count, format_duration, one_line, parse_bytes
from ._validate import check_bool, check_number, check_str

PLUGIN_NAME = "onnxrt_monitoring"
# The name pytest gives to the report section added by _report.
_SECTION = "Captured monitoring call"
# The summary is a two-column table while test ids are at most this long; beyond, each
# test id takes a line, its blocks indented below.
_MAX_ID_WIDTH = 50


class _Record(Protocol):
    """A measured block, listed in the test's report."""

    def summary(self) -> str:
        """One line for the report."""

    def properties(self) -> list[tuple[str, object]]:
        """``(name, value)`` pairs for ``user_properties``."""

    def figure(self) -> dict[str, Any]:
        """The raw figures, JSON-ready (see ``_results.gate``)."""


_RECORDS = pytest.StashKey[list[_Record]]()


def _reference_work() -> int:
    """A fixed piece of Python work (about 0.3 ms): the machine's speed of the moment."""
    return sum(i * i for i in range(3000))


def machine_speed(clock: Callable[[], float], runs: int = 7) -> float:
    """The median seconds of :func:`_reference_work` on ``clock``, measured beside each
    timed figure when the session saves or compares: the gate estimates the machine's
    shift between two sessions from them (one statement's CPU time moved by +54 % from
    one session to the next beside two busy loops, with the machine, not the code).

    :param clock: the clock of the figures
    :param runs: executions timed
    :return: seconds
    """
    times = []
    for _ in range(runs):
        start = clock()
        _reference_work()
        times.append(clock() - start)
    times.sort()
    return max(times[len(times) // 2], 1e-9)


# Where Linux says how long this thread waited for a CPU while it could run: the time
# slices other programs took from it.
_SCHEDSTAT = "/proc/thread-self/schedstat"


def _runqueue_wait() -> float | None:
    """Seconds this thread waited on a run queue so far (Linux), None where unknown."""
    try:
        with open(_SCHEDSTAT, encoding="ascii") as f:
            fields = f.read().split()
        return int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class StolenTime:
    """The share of a span of wall time that other programs took from this thread
    (waiting for a CPU while runnable), measured over a timed figure on the wall clock
    when the session saves or compares: the gate takes out how much more of it other
    programs took in one session than in the other."""

    def __init__(self) -> None:
        self._wait = _runqueue_wait()
        self._start = time.perf_counter()

    def share(self) -> float | None:
        """The share since the start, in [0, 0.99], None where unknown."""
        wait, wall = _runqueue_wait(), time.perf_counter() - self._start
        if wait is None or self._wait is None or wall <= 0:
            return None
        return min(max((wait - self._wait) / wall, 0.0), 0.99)


def _time_figure(
    label: str,
    times: list[float],
    sizes: list[int],
    reference: float | None = None,
    stolen: float | None = None,
    **kind: str,
) -> dict[str, Any]:
    """A time figure: batches of seconds (or counts) and executions; ``kind`` is its
    ``clock`` or its ``counter``."""
    figure: dict[str, Any] = {"kind": "time", "label": label, "times": times, "sizes": sizes}
    figure.update(kind)
    if reference is not None:
        figure["reference"] = reference
    if stolen is not None:
        figure["stolen"] = stolen
    return figure


def _records(item: pytest.Item) -> list[_Record]:
    """Returns the list of records of a test, created on first use."""
    return item.stash.setdefault(_RECORDS, [])


class TimedBlock:
    """A block timed once: ``with monitor_time("load") as t: ...``, then ``t.elapsed``.

    :param label: name shown in the report
    :param limit: seconds; the test fails when the block takes longer
    :param clock: monotonic clock in seconds
    """

    def __init__(
        self,
        label: str,
        limit: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
        clock_name: str = "wall",
        reference: bool = False,
    ) -> None:
        check_str("label", label)
        if limit is not None:
            # A bool, a str, NaN or infinity name the parameter (NaN would pass any bound).
            limit = check_number("limit", limit)
            if limit <= 0:
                raise BadValue(f"limit must be > 0 seconds, got {limit!r}")
        self.label, self.limit, self.clock = label, limit, clock
        self.clock_name, self.reference = clock_name, reference
        self.speed: list[float] = []
        self.elapsed: float = float("nan")
        self.stolen: float | None = None
        self._stolen: StolenTime | None = None
        self._start = 0.0

    def __enter__(self) -> TimedBlock:
        if self.reference:
            self.speed.append(machine_speed(self.clock))
            self._stolen = StolenTime() if self.clock_name == "wall" else None
        self._start = self.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = self.clock() - self._start
        if self._stolen is not None:
            self.stolen = self._stolen.share()
        if self.reference:
            self.speed.append(machine_speed(self.clock))
        if exc[0] is None and self.limit is not None and self.elapsed > self.limit:
            pytest.fail(self.failure(), pytrace=False)

    def failure(self) -> str:
        """The message of a block over its limit."""
        return (
            f"block {self.label!r} took {format_duration(self.elapsed)}, "
            f"more than the limit {format_duration(self.limit or 0.0)}"
        )

    def summary(self) -> str:
        return f"time {one_line(self.label)}: {format_duration(self.elapsed)}"

    def properties(self) -> list[tuple[str, object]]:
        return [(f"time.{self.label}.elapsed", self.elapsed)]

    def figure(self) -> dict[str, Any]:
        """One batch of one execution (nothing when the block never ended)."""
        ok = math.isfinite(self.elapsed) and self.elapsed > 0
        times, sizes = ([self.elapsed], [1]) if ok else ([], [])
        reference = sorted(self.speed)[len(self.speed) // 2] if self.speed else None
        return _time_figure(self.label, times, sizes, reference, self.stolen, clock=self.clock_name)


class CountedBlock:
    """A block counted in a counted session (``--monitoring-counter instructions``):
    ``with monitor_time("load") as t: ...``, then ``t.instructions`` (and ``t.elapsed``,
    the wall time under valgrind, many times the plain one).

    :param label: name shown in the report
    :param limit: refused: a count has no time limit
    """

    def __init__(self, label: str, limit: float | None = None) -> None:
        check_str("label", label)
        if limit is not None:
            raise BadValue(f"limit does not apply to a counted block, got {limit!r}")
        self.label = label
        self.instructions = 0
        self.elapsed: float = float("nan")
        self._counting: Any = None
        self._start = 0.0

    def __enter__(self) -> CountedBlock:
        from ._count.inprocess import counting

        self._counting = counting(self.label)
        self._count = self._counting.__enter__()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.elapsed = time.perf_counter() - self._start
        self._counting.__exit__(*exc_info)
        self.instructions = self._count.instructions

    def summary(self) -> str:
        return f"instructions {one_line(self.label)}: {format_count(self.instructions)}"

    def properties(self) -> list[tuple[str, object]]:
        return [(f"instructions.{self.label}", self.instructions)]

    def figure(self) -> dict[str, Any]:
        """The block's instructions, one execution (nothing when it never ended)."""
        ok = math.isfinite(self.elapsed)
        times, sizes = ([float(self.instructions)], [1]) if ok else ([], [])
        return _time_figure(self.label, times, sizes, counter="instructions")


class MemoryBlock:
    """A block run under the memory spy: ``with monitor_memory("build") as m: ...``.

    After the block, ``peak``, ``begin``, ``end``, ``mean`` and ``increase`` hold the
    resident memory of the process (bytes) and ``stats`` the spy's result.

    :param label: name shown in the report
    :param limit: bytes or a size such as ``"200 MB"``; the test fails when the peak
        rises more than this above ``begin`` (or above zero when ``absolute``)
    :param delay: seconds between two measures of the spy
    :param cuda: also spy on the GPUs (the ``nvml`` probe)
    :param absolute: compare the peak itself with the limit, not its increase
    :param stacks: sample the Python stacks too: where the peak happened
    :param probes: device probes to read too, by registry name (``("nvml",)``)
    :param source: what the limit applies to: ``"allocations"`` (the peak of the bytes
        live of the block's own allocations, counted exactly), ``"rss"`` (the resident
        memory), ``"auto"`` (allocations where the shim is built, RSS otherwise); the
        other is measured too
    """

    def __init__(
        self,
        label: str,
        limit: int | float | str | None = None,
        delay: float = 0.01,
        cuda: bool = False,
        absolute: bool = False,
        stacks: bool = False,
        probes: Sequence[str] = (),
        source: str = "auto",
    ) -> None:
        from ._memory.spy import check_delay, probe_names
        from ._validate import check_choice

        self.label = check_str("label", label)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool):
            check_number("limit", limit, minimum=0)
        self.limit = None if limit is None else parse_bytes(limit)
        self.delay = check_delay(delay)
        self.probes = probe_names(probes, check_bool("cuda", cuda))
        self.stacks = check_bool("stacks", stacks)
        self.cuda = cuda
        self.absolute = check_bool("absolute", absolute)
        self.stats: dict[str, Any] = {}
        self.peak = self.begin = self.end = 0
        self.mean = 0.0
        self._spy: Any = None
        self.source = check_choice("source", source, SOURCES)
        self.counted = _counting(self.source)
        # The block's own allocations (bytes, exact), when counted: their peak, what is
        # still live at the end, what was allocated and in how many calls.
        self.alloc_peak = self.alloc_end = self.alloc_total = self.alloc_count = 0
        self._alloc: Any = None
        self.not_counted = ""  # why the allocations were not counted after all

    @property
    def increase(self) -> int:
        """How far the peak rose above the memory at the start, in bytes."""
        return self.peak - self.begin

    # Blocks running now in this process. A spy resets the kernel's high-water mark at
    # each tick to get exact peaks; two spies doing so would hide peaks from each other,
    # so only the outermost block resets it and nested ones read it as it is.
    _active = 0

    def __enter__(self) -> MemoryBlock:
        from .memory_peak import start_spying_on

        outermost = MemoryBlock._active == 0
        self._spy = start_spying_on(
            delay=self.delay, reset_peak=outermost, stacks=self.stacks, probes=self.probes
        )
        MemoryBlock._active += 1
        if self.counted:  # after the spy's start: its own allocations are not the block's
            from ._alloc.block import AllocationBlock

            try:
                self._alloc = AllocationBlock().__enter__()
            except OSError as e:  # another tracker took the calls: judged on the RSS
                if self.source == "allocations":
                    self._stop_spy()
                    raise BadValue(f"source='allocations' cannot be measured: {e}") from None
                self.counted, self.not_counted = False, str(e)
        return self

    def _stop_spy(self) -> None:
        MemoryBlock._active -= 1
        self._spy.stop()

    def __exit__(self, *exc: object) -> None:
        MemoryBlock._active -= 1
        if self._alloc is not None:  # before the spy's stop, which allocates
            self._alloc.__exit__(None, None, None)
            f = self._alloc.figures
            if f is not None:
                self.alloc_peak, self.alloc_end = f.peak, f.live
                self.alloc_total, self.alloc_count = f.allocated, f.calls
        self.stats = self._spy.stop()
        cpu = self.stats["cpu"]
        self.peak, self.begin, self.end = int(cpu.max_peak), int(cpu.begin), int(cpu.end)
        self.mean = float(cpu.mean)
        if exc[0] is None and self.exceeded():
            pytest.fail(self.failure(), pytrace=False)

    def exceeded(self) -> bool:
        """Tells whether the block went over its limit (False without a limit)."""
        if self.limit is None:
            return False
        if self.counted:
            return self.alloc_peak > self.limit
        return (self.peak if self.absolute else self.increase) > self.limit

    def failure(self) -> str:
        """The message of a test failing its limit."""
        if self.counted:
            return (
                f"{self.label}: allocations' peak {format_bytes(self.alloc_peak)} exceeds the "
                f"limit {format_bytes(self.limit or 0)} (the bytes live of the block's own "
                f"allocations, counted exactly; RSS rose {format_bytes(self.increase)}, "
                f"source='rss' to limit that)"
            )
        what = "peak RSS" if self.absolute else "RSS increase"
        used = self.peak if self.absolute else self.increase
        return (
            f"{self.label}: {what} {format_bytes(used)} exceeds the limit "
            f"{format_bytes(self.limit or 0)} (peak {format_bytes(self.peak)}, "
            f"{format_bytes(self.begin)} at start)"
        )

    def summary(self) -> str:
        """One line for the report (two with ``stacks``: where the peak happened)."""
        line = (
            f"memory {one_line(self.label)}: peak {format_bytes(self.peak)} "
            f"(+{format_bytes(self.increase)} over {format_bytes(self.begin)} at start), "
            f"end {format_bytes(self.end)}"
        )
        if self.counted:
            line += (
                f"; allocations: peak {format_bytes(self.alloc_peak)}, end "
                f"{format_bytes(self.alloc_end)}, {format_bytes(self.alloc_total)} in "
                f"{self.alloc_count:,} calls"
            )
        elif self.not_counted:
            line += f"; {self.not_counted}"
        cpu = self.stats.get("cpu")
        if cpu is not None and cpu.where is not None:
            from ._memory.frames import peak_line

            line += "\n  " + peak_line(cpu.max_peak, cpu.peak_time, cpu.where.peak_stack)
        for mon in self._devices():  # every device channel, per-process ones included
            line += f"\n  {mon.qualname}: {mon.summary()}"
        return line

    def _devices(self) -> list[Any]:
        devices = self.stats.get("devices", {})
        return list(devices.values()) if isinstance(devices, dict) else []

    def properties(self) -> list[tuple[str, object]]:
        props: list[tuple[str, object]] = [
            (f"memory.{self.label}.peak", self.peak),
            (f"memory.{self.label}.increase", self.increase),
            *((f"memory.{self.label}.{m.qualname}.peak", m.max_peak) for m in self._devices()),
        ]
        if self.counted:
            props.append((f"memory.{self.label}.alloc_peak", self.alloc_peak))
        return props

    def figure(self) -> dict[str, Any]:
        """Peak, begin, end and mean in bytes (RSS), and the allocations' peak when
        counted (the gate compares it, steadier, when both sides have it)."""
        figure = {"kind": "memory", "label": self.label, "peak": self.peak, "begin": self.begin,
                  "end": self.end, "mean": self.mean}  # fmt: skip
        if self.counted:
            figure["alloc_peak"] = self.alloc_peak
        return figure


SOURCES = ("auto", "allocations", "rss")


def _counting(source: str) -> bool:
    """Whether a block with this ``source`` counts its allocations (``"allocations"``
    where the shim cannot: an error naming why)."""
    if source == "rss":
        return False
    from ._alloc.block import block_status

    why = block_status()
    if why and source == "allocations":
        raise BadValue(f"source='allocations' cannot be measured here: {why}")
    return not why


@dataclass(eq=False)
class _Measured:
    """A ``measure_time`` result kept for the report."""

    label: str
    res: dict[str, Any]
    times: Sequence[float] = ()
    sizes: Sequence[int] = ()
    clock_name: str = "wall"
    speed: float | None = None
    stolen: float | None = None

    def summary(self) -> str:
        if self.res.get("counter"):
            return (
                f"instructions {one_line(self.label)}: {format_count(self.res['average'])} "
                f"per run ({self.res['runs']} runs)"
            )
        return (
            f"time {one_line(self.label)}: {format_duration(self.res['average'])} ± "
            f"{format_duration(self.res['deviation'])} per run "
            f"({self.res['repeat']} × {self.res['number']})"
        )

    def properties(self) -> list[tuple[str, object]]:
        return [(f"time.{self.label}.average", self.res["average"])]

    def figure(self) -> dict[str, Any]:
        """Every batch: seconds and executions (a count: one batch of every run)."""
        if self.res.get("counter"):
            runs = int(self.res["runs"])
            times, sizes = [float(self.res["average"]) * runs], [runs]
            kind = {"counter": self.res["counter"]}
        else:
            times, sizes = [float(t) for t in self.times], [int(n) for n in self.sizes]
            kind = {"clock": self.clock_name}
        return _time_figure(self.label, times, sizes, self.speed, self.stolen, **kind)


@dataclass(eq=False, repr=False)
class TimeMonitor:
    """What the ``monitor_time`` fixture returns.

    :param records: where measured blocks are kept for the report
    :param clock: monotonic clock in seconds
    :param clock_name: ``wall`` or ``cpu`` (``--monitoring-clock``): what the figures
        saved and compared say they were timed with
    :param reference: time the machine's speed beside each figure (:func:`machine_speed`,
        when the session saves or compares)
    :param counted: count the blocks' instructions (a counted session) instead of
        timing them
    """

    records: list[_Record]
    clock: Callable[[], float] = time.perf_counter
    clock_name: str = "wall"
    reference: bool = False
    counted: bool = False

    def __call__(
        self, label: str = "block", limit: float | None = None
    ) -> TimedBlock | CountedBlock:
        """Returns a context manager timing a block once.

        :param label: name shown in the report
        :param limit: seconds; the test fails when the block takes longer
        :return: the block, whose ``elapsed`` is set on exit (and ``instructions`` in a
            counted session)
        """
        block: TimedBlock | CountedBlock
        if self.counted:
            block = CountedBlock(label, limit)
        else:
            block = TimedBlock(label, limit, self.clock, self.clock_name, self.reference)
        self.records.append(block)
        return block

    def measure(
        self, stmt: str | Callable[[], Any], context: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Calls :func:`~onnxrt_backend_dev.monitoring.benchmark.measure_time`.

        :param stmt: statement or function to time
        :param context: variables the statement sees
        :param kwargs: other parameters of ``measure_time`` and ``label``
        :return: the dictionary of ``measure_time``
        """
        from .benchmark import Progress, measure_time

        label = str(kwargs.pop("label", "measure"))
        if self.counted:
            res = measure_time(stmt, context, counter="instructions", **kwargs)
            self.records.append(_Measured(label, res))
            return res
        # The batches themselves are kept (for --monitoring-save and -compare).
        progress = kwargs.setdefault("progress", Progress())
        name = self.clock_name if kwargs.get("clock") is None else "custom"
        if name == "cpu":
            kwargs["clock"] = time.process_time
        clock = kwargs.get("clock") or self.clock
        speed = [machine_speed(clock)] if self.reference else []
        stolen = StolenTime() if self.reference and name == "wall" else None
        res = measure_time(stmt, context, **kwargs)
        share = stolen.share() if stolen is not None else None
        if self.reference:
            speed.append(machine_speed(clock))
        kept = getattr(progress, "kept", None)
        times, sizes = (kept.times, kept.sizes) if kept is not None else ((), ())
        ref = sum(speed) / len(speed) if speed else None
        self.records.append(_Measured(label, res, times, sizes, name, ref, share))
        return res


@dataclass(eq=False, repr=False)
class MemoryMonitor:
    """What the ``monitor_memory`` fixture returns.

    :param records: where measured blocks are kept for the report
    """

    records: list[_Record]

    def __call__(self, label: str = "block", *args: Any, **kwargs: Any) -> MemoryBlock:
        """Returns a context manager spying on the memory of a block.

        :param label: name shown in the report
        :param args: the other parameters of :class:`MemoryBlock` (``limit``, ``delay``...)
        :param kwargs: the same by name
        :return: the block, whose ``peak``, ``increase``, ``alloc_peak``... are set on exit
        """
        block = MemoryBlock(label, *args, **kwargs)
        self.records.append(block)
        return block


# The clocks of --monitoring-clock: the wall clock, or the process's CPU time (steadier
# for CPU-bound code beside other load: time slices given to other programs not counted).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def clock_option(config: pytest.Config) -> str:
    """``--monitoring-clock`` or the ini's ``monitoring_clock`` (``wall`` by default).

    :param config: pytest's configuration
    :return: ``wall`` or ``cpu``
    """
    value = config.getoption("monitoring_clock", None) or config.getini("monitoring_clock")
    name = str(value or "wall").strip().lower()
    if name not in CLOCKS:
        raise pytest.UsageError(f"--monitoring-clock must be wall or cpu, got {value!r}")
    return name


@pytest.fixture
def monitor_time(request: pytest.FixtureRequest) -> TimeMonitor:
    """Times blocks of a test: ``with monitor_time("label") as t:``, then ``t.elapsed``."""
    name = clock_option(request.config)
    config = request.config
    gated = bool(config.getoption("monitoring_save") or config.getoption("monitoring_compare"))
    counted = False
    if config.getoption("monitoring_counter", None) is not None:
        from ._count.inprocess import active

        counted = active()
    return TimeMonitor(
        _records(request.node), CLOCKS[name], name, reference=gated and not counted,
        counted=counted,
    )  # fmt: skip


@pytest.fixture
def monitor_memory(request: pytest.FixtureRequest) -> MemoryMonitor:
    """Spies on the memory of blocks of a test: ``with monitor_memory("label") as m:``."""
    return MemoryMonitor(_records(request.node))


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declares the plugin's options (argparse's defaults: False for a switch, None
    otherwise)."""
    group = parser.getgroup(PLUGIN_NAME, "time and memory monitoring (onnxrt-backend-dev)")
    group.addoption(
        "--no-monitoring-summary",
        action="store_true",
        help="do not list the time and memory measured by each test at the end",
    )
    parser.addini(
        "monitoring_summary",
        type="bool",
        default=True,
        help="list the time and memory measured by each test at the end (true)",
    )
    group.addoption(
        "--monitoring-save",
        metavar="FILE.json",
        help="save what each test measured (every batch, every peak) as a result that "
        "--monitoring-compare and the compare command read",
    )
    group.addoption(
        "--monitoring-force",
        action="store_true",
        help="let --monitoring-save replace an existing file",
    )
    group.addoption(
        "--monitoring-compare",
        metavar="FILE.json",
        help="fail a test whose time or memory regressed beyond --monitoring-threshold "
        "compared with this saved session",
    )
    group.addoption(
        "--monitoring-threshold",
        metavar="PERCENT",
        default="10%",
        help="growth allowed by --monitoring-compare (10%%): a time fails when significantly "
        "above it over its batches (undecided, not failed, when it cannot be judged), a memory "
        "increase when above it",
    )
    group.addoption(
        "--monitoring-clock",
        metavar="CLOCK",
        choices=tuple(CLOCKS),
        help="the clock of monitor_time's blocks and measure: wall (the default) or cpu, the "
        "process's CPU time, steadier for CPU-bound code beside other load",
    )
    parser.addini(
        "monitoring_clock", default="wall", help="the clock of monitor_time: wall or cpu (wall)"
    )
    group.addoption(
        "--monitoring-counter",
        metavar="COUNTER",
        choices=("instructions",),
        help="count the instructions of monitor_time's blocks and measure instead of timing "
        "them: the session runs again under valgrind (callgrind), each block counted alone; "
        "the same count whatever the machine's load (for CI gates)",
    )
    group.addoption(
        "--monitoring-json",
        metavar="FILE.json",
        help="write the session's table (each test, its blocks and their figures) as JSON",
    )


class _Summary:
    """Collects the measured blocks of each test from the reports (which also come from
    xdist workers) and prints them as a table at the end of the session."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, list[str]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keeps the monitoring section of each test's call."""
        if report.when != "call":
            return
        for name, content in report.sections:
            if name == _SECTION and content.strip():
                self.rows.append((report.nodeid, content.splitlines()))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Prints the table, when a test measured something."""
        if not self.rows:
            return
        terminalreporter.write_sep("=", "monitoring: time and memory per test")
        for line in summary_lines(self.rows):
            terminalreporter.write_line(line)


def summary_lines(rows: list[tuple[str, list[str]]]) -> list[str]:
    """Formats the summary: the test id beside its first measured block, the others
    below; with long test ids, each on a line of its own with its blocks indented.

    :param rows: ``(test id, lines of its monitoring section)`` pairs
    :return: the lines of the table
    """
    rows = [(one_line(nodeid), blocks) for nodeid, blocks in rows]
    width = max(len(nodeid) for nodeid, _ in rows)
    lines = []
    for nodeid, blocks in rows:
        if width > _MAX_ID_WIDTH:
            lines.append(nodeid)
            lines.extend(f"    {block}" for block in blocks)
            continue
        lines.extend(
            f"{nodeid if i == 0 else '':<{width}}  {block}" for i, block in enumerate(blocks)
        )
    return lines


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--monitoring-counter instructions``: this session runs again under valgrind
    (callgrind), where each block is counted alone, and its exit code is this one's;
    nothing runs here. Refused, as a usage error, where it cannot count.

    :param config: pytest's configuration
    :return: the counted session's exit code, None when not counting (or when this is
        the counted session)
    """
    if config.getoption("monitoring_counter", None) is None:
        return None
    from ._count import inprocess
    from ._errors import CounterError

    if inprocess.active():
        return None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError(
            "--monitoring-counter runs the session in one process under valgrind: drop -n"
        )
    params = config.invocation_params
    try:
        return inprocess.run_session(list(params.args), str(params.dir))
    except CounterError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_configure(config: pytest.Config) -> None:
    """Declares the marker (so that ``--strict-markers`` accepts it) and registers the
    end-of-session summary unless it is turned off."""
    try:
        wanted = config.getini("monitoring_summary")
    except (ValueError, pytest.UsageError) as e:  # 'maybe': pytest's words name no option
        raise pytest.UsageError(f"monitoring_summary (ini) must be true or false ({e})") from None
    if wanted and not config.getoption("no_monitoring_summary"):
        config.pluginmanager.register(_Summary(), f"{PLUGIN_NAME}_summary")
    clock_option(config)  # a bad ini value is refused before any test runs
    config.addinivalue_line(
        "markers",
        "limit_memory(size, absolute=False, delay=0.01, source='auto'): fail the test when "
        "its call allocates more than size (e.g. '200 MB'; the peak of its allocations' live "
        "bytes, or of its RSS with source='rss') (onnxrt_monitoring)",
    )
    config.addinivalue_line(
        "markers",
        "limit_time(seconds): fail the test when its call takes longer (onnxrt_monitoring)",
    )
    session = _session_from_options(config)
    if session is not None:
        config.pluginmanager.register(session, f"{PLUGIN_NAME}_session")


def _session_from_options(config: pytest.Config) -> Any:
    """The session's saving, comparing and exporting, None when no option asks for it;
    bad options are refused before any test runs (one line, pytest's usage error)."""
    save, compare = config.getoption("monitoring_save"), config.getoption("monitoring_compare")
    export = config.getoption("monitoring_json")
    threshold = str(config.getoption("monitoring_threshold"))
    if threshold != "10%":  # the default needs no check (nor the import)
        from ._results.gate import parse_threshold

        try:
            parse_threshold(threshold)
        except ValueError as e:
            raise pytest.UsageError(f"--monitoring-threshold: {e}") from None
    if save is None and compare is None and export is None:
        return None
    from ._pytest_session import Session

    try:
        return Session(
            save=save,
            compare=compare,
            export=export,
            threshold=threshold,
            force=bool(config.getoption("monitoring_force")),
            worker=hasattr(config, "workerinput"),  # pytest-xdist: the controller writes
        )
    except (ValueError, OSError, MonitoringError) as e:
        raise pytest.UsageError(str(e)) from None


def _marker_args(marker: pytest.Mark, usage: str) -> dict[str, Any]:
    """A marker's arguments by name, its one positional one as ``limit`` (``usage``: the
    error when it has none or more)."""
    args = dict(marker.kwargs)
    if marker.args:
        args["limit"] = marker.args[0]
    if "limit" not in args or len(marker.args) > 1:
        raise BadType(usage)
    return args


def _marker_block(marker: pytest.Mark) -> MemoryBlock:
    """Builds the memory block a ``limit_memory`` marker asks for."""
    usage = "limit_memory takes one size, e.g. limit_memory('200 MB')"
    return MemoryBlock("limit_memory", **_marker_args(marker, usage))


def _new_style_wrapper() -> Callable[[Any], Any] | None:
    """``pytest.hookimpl(wrapper=True)``, or None where pluggy is older than 1.1.

    The plugin is loaded by every pytest session of an environment where the package is
    installed, so an old pytest must not break at import: there the fixtures still work
    and a test marked ``limit_memory`` fails with a clear message instead.
    """
    try:
        return pytest.hookimpl(wrapper=True)
    except TypeError:
        return None


_WRAPPER = _new_style_wrapper()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuses ``limit_memory`` where it cannot be applied (pluggy < 1.1)."""
    for name in ("limit_memory", "limit_time"):
        if _WRAPPER is None and item.get_closest_marker(name) is not None:
            pytest.fail(f"{name} needs pluggy >= 1.1 (pytest >= 8 brings it)", pytrace=False)


def _time_marker_block(marker: pytest.Mark) -> TimedBlock:
    """Builds the timed block a ``limit_time`` marker asks for."""
    usage = "limit_time takes one number of seconds, e.g. limit_time(2.5)"
    args = _marker_args(marker, usage)
    if set(args) != {"limit"}:
        raise BadType(usage)
    if args["limit"] is None:
        raise BadType("limit_time needs a number of seconds, got None")
    return _TimeLimit("limit_time", args["limit"])


class _TimeLimit(TimedBlock):
    """The call of a test marked ``limit_time``."""

    def failure(self) -> str:
        """The message of a test over its budget."""
        return (
            f"the test took {format_duration(self.elapsed)}, more than its limit_time of "
            f"{format_duration(self.limit or 0.0)}"
        )


def _marker_blocks(item: pytest.Item) -> list[MemoryBlock | TimedBlock]:
    """The blocks the test's markers ask for (fails the test on a bad marker)."""
    blocks: list[MemoryBlock | TimedBlock] = []
    for name, build in (("limit_time", _time_marker_block), ("limit_memory", _marker_block)):
        marker = item.get_closest_marker(name)
        if marker is None:
            continue
        try:
            blocks.append(build(marker))
        except (TypeError, ValueError) as e:
            bad = f"{name}: {e}"
        else:
            continue
        pytest.fail(bad, pytrace=False)  # outside the except: one line, no chained error
    return blocks


def _runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Applies ``limit_time`` and ``limit_memory`` and lists the measured blocks in the
    report."""
    try:
        blocks = _marker_blocks(item)
        _records(item).extend(blocks)
        with contextlib.ExitStack() as stack:
            for block in blocks:
                stack.enter_context(block)
            return (yield)
    finally:
        _report(item)


if _WRAPPER is not None:
    pytest_runtest_call = _WRAPPER(_runtest_call)


def _report(item: pytest.Item) -> None:
    """Adds the test's measured blocks to its report and user properties."""
    records = item.stash.get(_RECORDS, None)
    if not records:
        return
    item.add_report_section("call", "monitoring", "\n".join(r.summary() for r in records))
    for record in records:
        item.user_properties.extend(record.properties())
    item.stash[_FIGURES] = [r.figure() for r in records]


# The raw figures of a test's blocks, copied onto its call report (``monitoring``) for
# the session's --monitoring-save, -compare and -json (xdist carries it to the controller).
_FIGURES = pytest.StashKey[list[dict[str, Any]]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Puts the test's raw figures on its call report, and fails it when it regressed
    compared with ``--monitoring-compare``."""
    outcome = yield
    figures = item.stash.get(_FIGURES, None) if call.when == "call" else None
    if not figures:
        return
    report = outcome.get_result()
    report.monitoring = figures
    session = item.config.pluginmanager.get_plugin(f"{PLUGIN_NAME}_session")
    if session is not None:
        session.judge(report, figures)

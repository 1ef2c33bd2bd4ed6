"""The memory spy's data: per-channel statistics and a bounded time series.

One :class:`Monitor` per channel (the process, each GPU) keeps exact statistics
(peak, mean, count, first and last values) and a :class:`MemorySeries`, the curve behind
them. The series is bounded: once full it halves itself, keeping the larger point of each
pair, and from then on stores the maximum of every ``stride`` ticks, so the true maximum
always survives and the memory used does not grow with the duration.
:class:`SpyResult` is what ``MemorySpy.stop()`` returns; the views (the plot, the
DataFrame) are in :mod:`.views`, this model imports none. This module only imports the
standard library: the spy process uses it too.
"""

from __future__ import annotations

import array
import math

from .._errors import BadType, BadValue

TYPE_CHECKING = False  # typing is not imported at run time: the spy process stays small
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

# 2 x 8 bytes per point: 1 MiB per channel however long the spy runs
# (the budget is 10 MB per hour at delay=0.01, i.e. 360,000 ticks).
DEFAULT_MAX_POINTS = 65536
# How the memory of a GPU's process outside torch's allocator is named (``Monitor.context``).
CONTEXT_WORDS = "CUDA context and other memory outside torch's allocator"
# ``peak_time`` moves to a later tick only if memory rose by more than this (or 1 % of
# the rise above ``begin`` if less) over the value it had at ``peak_time``: a plateau
# gaining a few pages later is still dated from when it was reached.
PEAK_TOLERANCE = 2**20


def _finite(name: str, value: Any) -> float:
    """``value`` as a float: a finite real number (a NaN would poison every maximum)."""
    if value is None or isinstance(value, (bool, str, bytes)):
        raise BadType(f"{name} must be a number, got {type(value).__name__}")
    try:
        number = float(value)  # numpy scalars and other reals convert
    except (TypeError, ValueError):
        raise BadType(f"{name} must be a number, got {type(value).__name__}") from None
    if not math.isfinite(number):
        raise BadValue(f"{name} must be finite, got {value!r}")
    return number


def check_max_points(max_points: Any) -> int:
    """Refuses a bound of a series that is not an int >= 2."""
    if isinstance(max_points, bool) or not isinstance(max_points, int):
        raise BadType(f"max_points must be an int, got {type(max_points).__name__}")
    if max_points < 2:
        raise BadValue(f"max_points must be >= 2, got {max_points!r}")
    return max_points


class MemorySeries:
    """A bounded ``(timestamp, bytes)`` series that always keeps its maximum.

    :param max_points: number of points kept at most (>= 2); when reached, pairs of
        points are merged into the larger one and the sampling stride doubles
    """

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        self.max_points = check_max_points(max_points)
        self.times = array.array("d")
        self.values = array.array("d")
        # The memory at the end of each point's ticks (the peak may be higher): what a
        # rise in the next point starts from (the memory growth of :mod:`.where`).
        self.ends = array.array("d")
        self.stride = 1
        # Pending bucket: the largest of the last `_bucket_n` ticks not stored yet.
        self._bucket_n = 0
        self._bucket_t = 0.0
        self._bucket_v = 0.0
        self._bucket_e = 0.0

    def append(self, timestamp: float, value: float, end: float | None = None) -> None:
        """Adds one tick.

        :param timestamp: seconds (``time.monotonic`` in the spy)
        :param value: bytes, the peak since the previous tick
        :param end: the memory at the tick, ``value`` if None
        """
        if self._bucket_n == 0 or value > self._bucket_v:
            self._bucket_t, self._bucket_v = timestamp, value
        self._bucket_e = value if end is None else end
        self._bucket_n += 1
        if self._bucket_n >= self.stride:
            self._flush()

    def _flush(self) -> None:
        if self._bucket_n == 0:
            return
        self.times.append(self._bucket_t)
        self.values.append(self._bucket_v)
        self.ends.append(self._bucket_e)
        self._bucket_n = 0
        if len(self.values) >= self.max_points:
            self._halve()

    def _halve(self) -> None:
        """Merges consecutive pairs into their larger point and doubles the stride."""
        values, n = self.values, len(self.values)
        kept = [i if values[i] >= values[i + 1] else i + 1 for i in range(0, n - 1, 2)]
        kept += [n - 1] * (n % 2)
        self.times = array.array("d", (self.times[i] for i in kept))
        self.values = array.array("d", (values[i] for i in kept))
        self.ends = self.ends[1::2] + self.ends[n - n % 2 :]
        self.stride *= 2

    def finish(self) -> None:
        """Stores the pending bucket (call once the spy stops)."""
        self._flush()

    def __len__(self) -> int:
        return len(self.values) + (1 if self._bucket_n else 0)

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return ((t, v) for t, v, _ in self.with_ends())

    def with_ends(self) -> Iterator[tuple[float, float, float]]:
        """The points as ``(timestamp, peak, memory at the end)``."""
        yield from zip(self.times, self.values, self.ends, strict=False)
        if self._bucket_n:
            yield self._bucket_t, self._bucket_v, self._bucket_e

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return (len(self.times) + len(self.values) + len(self.ends)) * self.times.itemsize

    def to_bytes(self) -> bytes:
        """Serializes the stored points (times, values then ends, native doubles)."""
        self.finish()
        return self.times.tobytes() + self.values.tobytes() + self.ends.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, max_points: int, stride: int) -> MemorySeries:
        """Rebuilds a series from :meth:`to_bytes`, its ``max_points`` and ``stride``."""
        series = cls(max_points)
        third = len(data) // 3
        series.times.frombytes(data[:third])
        series.values.frombytes(data[third : 2 * third])
        series.ends.frombytes(data[2 * third :])
        series.stride = stride
        return series


class Monitor:
    """Memory statistics of one channel, in bytes.

    ``max_peak`` is the highest memory seen; with the kernel's high-water mark
    (``peak_source == "hwm"``) it includes spikes shorter than the spy's delay.
    ``mean``, ``begin`` and ``end`` come from the memory sampled at each tick,
    ``n_measures`` counts the ticks. ``previous_peak`` is the target's high-water mark
    from before the spy started (None when unknown). ``peak_time`` says when the
    maximum was reached (seconds since the first tick); with ``stacks=True``,
    ``peak_stack`` and ``where`` say in which code.

    ``qualname`` joins probe and name (``"nvml:gpu0"``); ``probe``, ``device`` and
    ``group`` are None for the process (``"cpu"``).

    :param name: the channel, ``"cpu"``, ``"gpu0"``...
    :param max_points: bound of the retained series, see :class:`MemorySeries`
    :param probe: the device probe's registry name (``"nvml"``)
    :param device: the device's index for that probe
    :param group: the result key whose list holds this monitor (``"gpus"``)
    """

    def __init__(
        self,
        name: str = "cpu",
        max_points: int = DEFAULT_MAX_POINTS,
        probe: str | None = None,
        device: int | None = None,
        group: str | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise BadType(f"name must be a str, got {type(name).__name__}")
        self.name = name
        self.probe = probe
        self.device = device
        self.group = group
        #: What a device's channel measures (``"device"``, ``"process"``, ``"allocated"``,
        #: ``"reserved"``: see ``registry.ROLES``), empty for the process and unknown roles.
        self.role = ""
        #: The device's identity (its UUID) where the probe knows it, None otherwise.
        self.uuid: str | None = None
        #: For a ``"process"`` channel of a GPU where torch's reserved memory is known too:
        #: the bytes of this process's usage outside torch's allocator at the end (the CUDA
        #: context, the libraries' workspaces), None when not measured apart.
        self.context: float | None = None
        self.max_peak = 0.0
        self.n_measures = 0
        self.begin = 0.0
        self.end = 0.0
        self.total = 0.0
        self.peak_source = "sampling"
        self.previous_peak: float | None = None
        self.series = MemorySeries(max_points)
        # When the maximum was first reached: the tick that saw it and the one before
        # (the peak happened in between), on the spy's clock; the first tick's time.
        self.peak_timestamp = 0.0
        self.peak_prev_timestamp = 0.0
        self.start_timestamp = 0.0
        self._last_timestamp = 0.0
        self._dated_peak = 0.0  # the peak at peak_timestamp
        #: With ``stacks=True``: the stack of the running thread when memory rose to its
        #: maximum, ``"file:line:function"`` strings, outermost first (None otherwise).
        self.peak_stack: tuple[str, ...] | None = None
        #: With ``stacks=True``: the per-function table and the memory flame graph
        #: (a :class:`MemoryProfile <.where.MemoryProfile>`), None otherwise.
        self.where: Any = None
        #: For a probe read inside the measured process: the stack (``SampledFrame``
        #: values, outermost first) of the measured thread at the tick that saw the peak
        #: rise; None otherwise. Never sent across processes.
        self.peak_frames: tuple[Any, ...] | None = None

    def update(self, value: float, peak: float | None = None, timestamp: float = 0.0) -> None:
        """Adds one measure.

        :param value: memory at this tick, in bytes
        :param peak: highest memory since the previous tick if known (high-water mark)
        :param timestamp: when, in seconds; the series stores ``(timestamp, peak)``
        """
        value = _finite("value", value)
        peak = None if peak is None else _finite("peak", peak)
        timestamp = _finite("timestamp", timestamp)
        top = value if peak is None or peak < value else peak
        first = self.n_measures == 0
        if first:
            self.begin = value
            self.start_timestamp = self._last_timestamp = timestamp
        if first or top > self.max_peak:
            self._raise_peak(top, timestamp, first)
        self._last_timestamp = timestamp
        self.end = value
        self.total += value
        self.n_measures += 1
        self.series.append(timestamp, top, value)

    def _raise_peak(self, top: float, timestamp: float, first: bool = False) -> None:
        """A higher ``max_peak``, dated at this tick unless it passes the dated one by
        ``PEAK_TOLERANCE`` at most (1 % of the rise for small figures)."""
        self.max_peak = top
        tolerance = min(PEAK_TOLERANCE, 0.01 * (self._dated_peak - self.begin))
        if first or top > self._dated_peak + tolerance:
            self.peak_timestamp = timestamp
            self.peak_prev_timestamp = self._last_timestamp
            self._dated_peak = top

    def add_final_peak(self, value: float, timestamp: float) -> None:
        """Adds a peak in bytes known after the last tick (the command's ``ru_maxrss`` at
        exit), at ``timestamp`` on the spy's clock."""
        value, timestamp = _finite("value", value), _finite("timestamp", timestamp)
        if value > self.max_peak:
            self._raise_peak(value, timestamp)
        self.series.append(timestamp, value)  # the curve shows what max_peak says

    @property
    def peak_time(self) -> float:
        """Seconds from the first tick to the tick that first saw ``max_peak``."""
        return self.peak_timestamp - self.start_timestamp

    @property
    def qualname(self) -> str:
        """``probe:name`` for a device (``"nvml:gpu0"``), the name for the process."""
        return self.name if self.probe is None else f"{self.probe}:{self.name}"

    @property
    def mean(self) -> float:
        """Mean of the sampled memory (0 without any measure)."""
        return self.total / self.n_measures if self.n_measures else 0.0

    @property
    def delta_peak(self) -> float:
        """``max_peak - begin``: what the measured code added at its peak."""
        return self.max_peak - self.begin

    @property
    def delta_end(self) -> float:
        """``end - begin``: what the measured code left allocated."""
        return self.end - self.begin

    def to_dict(self, unit: int | float = 1) -> dict[str, Any]:
        """Returns ``{'peak', 'mean', 'n', 'begin', 'end', 'peak_time'}``, sizes divided
        by ``unit``; with ``stacks=True`` also ``'peak_stack'`` and ``'functions'``
        (the per-function table, see :meth:`MemoryProfile.to_dict <.where.MemoryProfile.to_dict>`).

        :param unit: divide byte figures by this (``2**20`` for MiB); ``n`` stays a count
        :return: the dictionary
        """
        f = _finite("unit", unit)
        if not f > 0:
            raise BadValue(f"unit must be > 0, got {unit!r}")
        doc: dict[str, Any] = {
            "peak": self.max_peak / f,
            "mean": self.mean / f,
            "n": self.n_measures,
            "begin": self.begin / f,
            "end": self.end / f,
            "peak_time": self.peak_time,
        }
        if self.where is not None:
            doc.update(self.where.to_dict(f))
        elif self.peak_stack is not None:
            doc["peak_stack"] = list(self.peak_stack)
        if self.context is not None:
            doc["context"] = self.context / f
        return doc

    def summary(self) -> str:
        """One line with units, e.g. ``peak 312 MiB, mean 40.1 MiB, ...``."""
        from .._format import format_bytes  # not at import: the spy process stays small

        text = (
            f"peak {format_bytes(self.max_peak)}, mean {format_bytes(self.mean)}, "
            f"begin {format_bytes(self.begin)}, end {format_bytes(self.end)}, "
            f"n={self.n_measures}, source={self.peak_source}"
        )
        if self.context is not None:
            text += f", of which {format_bytes(self.context)} {CONTEXT_WORDS}"
        return text

    def __repr__(self) -> str:
        return f"Monitor({self.name}: {self.summary()})"

    def to_state(self) -> tuple[dict[str, Any], bytes]:
        """A header of plain values (it crosses the spy's pipe) and the series bytes."""
        data = self.series.to_bytes()
        header = {name: getattr(self, name) for name in _STATE}
        header.update(
            max_points=self.series.max_points,
            stride=self.series.stride,
            nbytes=len(data),
            peak_times=(self.start_timestamp, self.peak_prev_timestamp, self.peak_timestamp),
        )
        return header, data

    @classmethod
    def from_state(cls, header: dict[str, Any], data: bytes) -> Monitor:
        """Rebuilds a monitor from :meth:`to_state`."""
        mon = cls(header["name"], header["max_points"])
        for name in _STATE:
            setattr(mon, name, header[name])
        mon.series = MemorySeries.from_bytes(data, header["max_points"], header["stride"])
        mon.start_timestamp, mon.peak_prev_timestamp, mon.peak_timestamp = header["peak_times"]
        mon.role = str(mon.role or "")
        mon.uuid = mon.uuid if isinstance(mon.uuid, str) else None
        return mon


# The attributes of a Monitor that :meth:`Monitor.to_state` copies as they are.
_STATE = (
    "name",
    "probe",
    "device",
    "group",
    "max_peak",
    "n_measures",
    "begin",
    "end",
    "total",
    "peak_source",
    "previous_peak",
    "role",
    "uuid",
)


def same_device(a: str | None, b: str | None) -> bool:
    """Tells if two device UUIDs, as NVML or torch spell them (``GPU-0b42...``,
    ``0b42...``), name the same device; an unknown one never matches."""

    def key(uuid: str | None) -> str:
        text = (uuid or "").strip().lower()
        for prefix in ("gpu-", "mig-"):
            text = text.removeprefix(prefix)
        return text.replace("-", "")

    return bool(key(a)) and key(a) == key(b)


def join_context(monitors: Sequence[Monitor]) -> None:
    """Measures the CUDA context apart where it can be: for each GPU whose process usage
    (NVML, role ``"process"``) and torch's reserved memory (role ``"reserved"``) are both
    known, with the same UUID, the process monitor's ``context`` is the first less the
    second at the end (the context, cuBLAS' and cuDNN's workspaces, any allocation made
    outside torch). Negative differences (readings a tick apart) are left unknown, and so
    is a GPU this process does not use (no context there).

    :param monitors: the device monitors of one result
    """
    measured = [m for m in monitors if m.n_measures]
    found = context_of([(m.role, m.uuid, m.end) for m in measured])
    for i, context in found.items():
        measured[i].context = context


def context_of(channels: Sequence[tuple[str, str | None, float]]) -> dict[int, float]:
    """The rule of :func:`join_context` over plain values (the report joins the facts of
    two processes with it: NVML's from the spy, torch's from the program).

    :param channels: ``(role, uuid, bytes at the end)`` per channel
    :return: index of a ``"process"`` channel -> its bytes outside torch's allocator
    """
    found: dict[int, float] = {}
    pools = [(uuid, end) for role, uuid, end in channels if role == "reserved"]
    for i, (role, uuid, end) in enumerate(channels):
        if role != "process":
            continue
        pool = next((e for u, e in pools if same_device(u, uuid)), None)
        if pool is not None and end > 0 and end >= pool:  # 0: no context on that GPU
            found[i] = end - pool
    return found


class SpyResult(dict):
    """What ``MemorySpy.stop()`` returns: a dict with ``'cpu'`` (a :class:`Monitor`) and,
    with ``cuda=True``, ``'gpus'`` (one Monitor per GPU, device-wide used memory) and
    ``'gpus_process'`` (the spied process's own usage per GPU, where the driver reports it).
    Beside them: ``'duration'`` (seconds), ``'target_exited'`` (the spied process ended
    before ``stop()``), ``'marks'`` (``(seconds since start, label)`` pairs), and with any
    device probe ``'devices'``: every device monitor by ``qualname`` (``"nvml:gpu0"``),
    in the order the probes measured them (each also listed under its ``group`` key).
    ``str()`` gives a readable summary with units.
    """

    def __init__(self, *args: Any, t0: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: ``time.monotonic()`` at the spy's first tick: the origin of the series.
        self.t0 = t0

    def monitors(self) -> list[Monitor]:
        """Every monitor: cpu first, then the devices."""
        mons: list[Monitor] = [self["cpu"]]
        if "devices" in self:
            mons.extend(self["devices"].values())
        else:  # built by hand
            mons.extend(self.get("gpus", []))
            mons.extend(self.get("gpus_process", []))
        return mons

    def __str__(self) -> str:
        from .._format import format_duration, one_line

        lines = [f"{m.name}: {m.summary()}" for m in self.monitors()]
        extra = f"duration {format_duration(float(self.get('duration', 0.0)))}"
        if self.get("target_exited"):
            extra += ", the spied process exited before stop()"
        lines.append(extra)
        lines.extend(f"mark {format_duration(t)}: {label}" for t, label in self.get("marks", []))
        cpu = self.get("cpu")
        if cpu is not None and cpu.where is not None:
            from .frames import peak_line

            lines.append(peak_line(cpu.max_peak, cpu.peak_time, cpu.where.peak_stack))
        return "\n".join(map(one_line, lines))  # marks and names from the program

    def to_rows(self) -> list[dict[str, Any]]:
        """The retained series as rows ``{'time', 'channel', 'bytes', 'label'}``, ``time``
        in seconds since the spy started; marks are rows of channel ``'mark'`` (``bytes``
        None). Ordered by channel then time, marks last."""
        rows: list[dict[str, Any]] = []
        for mon in self.monitors():
            rows.extend(
                {"time": t - self.t0, "channel": mon.name, "bytes": v, "label": None}
                for t, v in mon.series
            )
        rows.extend(
            {"time": t, "channel": "mark", "bytes": None, "label": label}
            for t, label in self.get("marks", [])
        )
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The measure as plain data: ``duration``, ``target_exited``, ``peak_source``,
        ``max_rss``/``ru_maxrss``/``signal`` when known, one entry per monitor (its
        ``to_dict()``), ``marks`` and ``series`` (:meth:`to_rows`)."""
        return {
            "duration": self["duration"],
            "target_exited": self["target_exited"],
            "peak_source": self["cpu"].peak_source,
            **{k: self[k] for k in ("max_rss", "ru_maxrss", "signal") if k in self},
            **{m.name: m.to_dict() for m in self.monitors()},
            "marks": self.get("marks", []),
            "series": self.to_rows(),
        }

    def to_json(self, indent: int | None = 1) -> str:
        """:meth:`to_dict` as JSON."""
        import json

        return json.dumps(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        """The series as CSV: ``time,channel,bytes,label``, one row per reading."""
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["time", "channel", "bytes", "label"])
        writer.writeheader()
        writer.writerows(self.to_rows())
        return buffer.getvalue()

    def export(self, path: Any, fmt: str | None = None, **options: Any) -> str:
        """Writes the measure into ``path`` in the format its suffix names (``.txt``: the
        summary, ``.json``: :meth:`to_dict`, ``.csv``: the series), as every result of
        the package does (see ``_export``).

        :param path: the file
        :param fmt: ``text``, ``json`` or ``csv``; None to guess it from the suffix
        :param options: given to the renderer
        :return: the format written
        """
        from .._export import export

        return export(self, path, fmt, **options)


def summary_text(result: SpyResult) -> str:
    """``str(result)``: the text format of :meth:`SpyResult.export`."""
    return str(result)

"""The spy process's own program.

``memory_peak.MemorySpy`` starts it with ``subprocess`` (``python -I -S -c ...``), never
with multiprocessing: it does not depend on the start method, never re-imports the
user's ``__main__`` and never copies the parent's memory. It imports the standard
library only (plus the modules of the device probes it is asked to open, see
:mod:`.registry`).

Protocol. The parent writes ``stop`` (or ``peek``) lines to the spy's stdin. The spy
writes frames to its stdout (see :func:`encode_frame`); the header's ``kind`` is
``ready`` once the probes are open (after the first reset of the high-water mark),
``error`` if they cannot be (then it exits), ``peek`` (the peak so far, on request),
``result`` with every monitor's state when asked to stop or when the spied process ended
(then it exits). It also exits, silently, when its stdin reaches end-of-file or its
parent changes: the parent died.
"""

from __future__ import annotations

import marshal
import math
import os
import select
import sys
import time

from .._errors import BY_NAME
from .probes import TargetGone, TreeProbe, make_process_probe
from .registry import open_probe, parse_args
from .series import DEFAULT_MAX_POINTS, Monitor

TYPE_CHECKING = False  # typing, json, argparse are left out: the spy starts in milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from .probes import Probe
    from .registry import DeviceProbe

WRITE_TIMEOUT = 5.0  # seconds to hand the result over before giving up


class SpyLoop:
    """Reads the probes at each tick and feeds one :class:`Monitor` per channel.

    :param cpu: the process (or process tree) probe
    :param devices: the device probes (GPUs), open, with their monitors
    :param clock: a monotonic clock
    :param max_points: bound of each retained series
    """

    def __init__(
        self,
        cpu: Probe,
        devices: DeviceSet | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> None:
        self.cpu = cpu
        self.devices = DeviceSet(max_points) if devices is None else devices
        self.clock = clock
        self.monitors = [Monitor("cpu", max_points), *self.devices.all()]
        self.monitors[0].peak_source = cpu.source
        self.monitors[0].previous_peak = cpu.previous_peak
        self.first: float | None = None
        self.last = 0.0
        # The parent's stacks read from here at each tick (stacks=True), see
        # .._memory.observed; why not, when it could not start (the parent samples itself).
        self.observer: Any = None
        self.pending_observer: Any = None
        self.stacks_error = ""

    def tick(self) -> bool:
        """Takes one measure of every channel.

        :return: False once the spied process is gone
        """
        t = self.clock()
        try:
            current, peak = self.cpu.read()
        except TargetGone:
            return False
        if self.first is None:
            self.first = t
        self.last = t
        self.monitors[0].update(current, peak, t)
        if self.observer is not None:
            self.observer.tick(t, current, peak)
        self.devices.read(t)
        return True

    def result(self, target_exited: bool) -> tuple[dict[str, Any], bytes]:
        """Every monitor: a header and the concatenated series bytes."""
        headers, chunks = [], []
        for mon in self.monitors:
            header, data = mon.to_state()
            headers.append(header)
            chunks.append(data)
        payload = b"".join(chunks)
        first = self.last if self.first is None else self.first
        header = {
            "kind": "result",
            "target_exited": target_exited,
            "t0": first,
            "duration": self.last - first,
            "monitors": headers,
            "nbytes": len(payload),
        }
        if self.observer is not None:
            header["stacks"] = self.observer.result()
        return header, payload

    def close(self) -> None:
        """Closes the probes."""
        self.cpu.close()
        self.devices.close()


class DeviceSet:
    """Device probes and one :class:`Monitor` per channel, read together: the one reading
    of the devices of the spy, of the observer (:mod:`.devices`) and of a thread of the
    measured process (:mod:`.inprocess`).

    :param max_points: bound of each retained series
    """

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        self.max_points = max_points
        self.probes: list[DeviceProbe] = []
        # One list of monitors per probe, in the order of its read().
        self.monitors: list[list[Monitor]] = []

    def open(self, arg: str, pids: Callable[[], set[int]]) -> None:
        """Opens one probe (see :func:`.registry.open_probe`), one monitor per channel."""
        probe = open_probe(arg, pids)
        mons = []
        for ch in probe.channels:
            mon = Monitor(
                ch.name, self.max_points, probe=probe.name, device=ch.device, group=ch.group
            )
            mon.role = getattr(ch, "role", "") or ""
            mon.uuid = getattr(ch, "uuid", None)
            mon.peak_source = probe.source
            mons.append(mon)
        self.probes.append(probe)
        self.monitors.append(mons)

    def open_all(self, args: Sequence[str], pids: Callable[[], set[int]]) -> DeviceSet:
        """Opens every probe (``--probe`` values); none is left open when one fails."""
        try:
            for arg in args:
                self.open(arg, pids)
        except BaseException:
            self.close()
            raise
        return self

    def read(self, t: float, errors: list[str] | None = None) -> list[Monitor]:
        """Reads every probe at time ``t``.

        :param t: the tick's time
        :param errors: where a probe's failure is noted (once), the probe skipped at this
            tick; None: the failure is raised
        :return: the monitors whose peak was dated at this tick (see :func:`update_devices`)
        """
        rose = []
        for probe, mons in zip(self.probes, self.monitors, strict=False):  # none once closed
            try:
                readings = probe.read_peaks()
            except Exception as e:
                if errors is None:
                    raise
                note = f"{probe.name}: {e}"
                if note not in errors:
                    errors.append(note)
                continue
            rose.extend(update_devices(mons, readings, t))
        return rose

    def all(self) -> list[Monitor]:
        """Every monitor, probe after probe."""
        return [mon for mons in self.monitors for mon in mons]

    def close(self) -> None:
        """Releases the devices, once (never raises); the monitors stay."""
        probes, self.probes = self.probes, []
        for probe in probes:
            # No contextlib here: importing it costs the spy milliseconds at start.
            try:  # noqa: SIM105
                probe.close()
            except Exception:
                pass


def _finite(value: Any) -> bool:
    # None, NaN or inf: unknown at this tick (a NaN would poison the peak)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def update_devices(
    mons: Sequence[Monitor], readings: Sequence[tuple[Any, Any]], t: float
) -> list[Monitor]:
    """Feeds one tick of a device probe to its monitors.

    :param mons: the probe's monitors
    :param readings: ``(bytes now, highest since the previous read or None)`` per channel
    :param t: the tick's time
    :return: the monitors whose peak was dated at this tick (it rose)
    """
    rose = []
    for mon, reading in zip(mons, readings, strict=False):
        value, peak = reading if isinstance(reading, tuple) and len(reading) == 2 else (None, None)
        if not _finite(value):
            continue
        first, before = mon.n_measures == 0, mon.peak_timestamp
        mon.update(value, peak if _finite(peak) else None, t)
        if not first and mon.peak_timestamp != before:
            rose.append(mon)
    return rose


def encode_frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """A frame: header and payload sizes (8 bytes each), the marshalled header, the payload
    (marshal, not json: both ends run the same interpreter and json would import ``re``).

    :param header: plain values only (str, int, float, bool, None, lists, dicts)
    :param payload: raw bytes
    """
    head = marshal.dumps(header)
    return len(head).to_bytes(8, "little") + len(payload).to_bytes(8, "little") + head + payload


def write_frame(
    fd: int, header: dict[str, Any], payload: bytes = b"", timeout: float = WRITE_TIMEOUT
) -> bool:
    """Writes one frame, giving up after ``timeout`` seconds (nobody reading).

    :return: True if everything was written
    """
    data = memoryview(encode_frame(header, payload))
    deadline = time.monotonic() + timeout
    os.set_blocking(fd, False)
    while data:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        select.select([], [fd], [], left)
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            continue
        except OSError:  # the reader is gone
            return False
        data = data[n:]
    return True


def _read_request(rfd: int) -> str | None:
    """Reads the parent's messages: ``"stop"``, ``"peek"`` (or ``""``), None at end-of-file."""
    try:
        data = os.read(rfd, 4096)
    except OSError:
        return None
    if not data:
        return None
    if b"stop" in data:
        return "stop"
    return "peek" if b"peek" in data else ""


def serve(
    loop: SpyLoop,
    rfd: int,
    wfd: int,
    delay: float,
    parent: int,
    getppid: Callable[[], int] = os.getppid,
) -> int:
    """Ticks every ``delay`` seconds until told to stop, the target ends or the parent dies.

    :param loop: the probes and monitors
    :param rfd: the parent's messages
    :param wfd: where frames go
    :param delay: seconds between two ticks
    :param parent: pid of the parent; another parent means it died
    :param getppid: returns the current parent pid
    :return: the exit code
    """
    clock = loop.clock
    next_tick = clock() + delay
    while True:
        readable, _, _ = select.select([rfd], [], [], max(next_tick - clock(), 0.0))
        if readable:
            request = _read_request(rfd)
            if request is None:
                return 0  # the parent closed the pipe or died: nobody wants the result
            if request == "stop":
                exited = not loop.tick()  # a last measure: a spike just before stop() counts
                write_frame(wfd, *loop.result(exited))
                return 0
            if request == "peek":
                cpu = loop.monitors[0]
                write_frame(wfd, {"kind": "peek", "peak": cpu.max_peak, "n": cpu.n_measures})
            continue  # the tick keeps its schedule
        if getppid() != parent:
            return 0
        if not loop.tick():
            write_frame(wfd, *loop.result(True))
            return 0
        # Late (machine busy): no burst of ticks to catch up.
        next_tick = max(next_tick + delay, clock())


def build_loop(opts: dict[str, Any]) -> SpyLoop:
    """Opens the probes described by ``opts`` (see :func:`.registry.parse_args`)."""
    pid = opts["pid"]
    reset = not opts["no_reset"]
    cpu: Probe
    if opts["children"]:
        cpu = TreeProbe(pid, exclude=[os.getpid()], reset_peak=reset)
    else:
        cpu = make_process_probe(pid, reset)

    def pids() -> set[int]:  # whose own usage the device probes read
        return {pid, *cpu.probes} if isinstance(cpu, TreeProbe) else {pid}

    try:
        devices = DeviceSet(opts["max_points"]).open_all(opts["probes"], pids)
    except BaseException:
        cpu.close()
        raise
    loop = SpyLoop(cpu, devices, max_points=opts["max_points"])
    if opts["stacks"]:
        _open_observer(loop, pid, opts["max_points"], opts["alloc"])
    return loop


def _open_observer(loop: SpyLoop, pid: int, max_points: int, alloc: str = "") -> None:
    """The observer of the parent's stacks (imported only then: the spy starts lean),
    and of its allocations when it samples them (``alloc``: the shim's file)."""
    try:
        from .observed import BlockObserver

        # Read from the tick after 'ready': before, the parent is in the spy's start.
        loop.pending_observer = BlockObserver(pid, max_points, alloc)
    except Exception as e:  # the parent samples its stacks itself, saying why
        loop.stacks_error = str(e) or type(e).__name__


def _error(error: BaseException, started: bool = False) -> dict[str, Any]:
    """The ``error`` frame of an exception, under its class name or that of its nearest
    ancestor of the family (a probe's subclass of ``SpyError`` arrives as a ``SpyError``),
    so that the parent rebuilds it as a class it knows (see ``_errors.rebuild``).

    :param error: what was raised
    :param started: raised once the spy ran: outside the family it is the spy's own failure
    """
    name = next((c.__name__ for c in type(error).__mro__ if BY_NAME.get(c.__name__) is c), None)
    if name is None and started:  # unexpected: reported rather than printed as a traceback
        return {"kind": "error", "type": "SpyError", "message": f"spy failed: {error!r}"}
    return {"kind": "error", "type": name or type(error).__name__, "message": str(error)}


def main(argv: Sequence[str] | None = None, rfd: int = 0, wfd: int = 1) -> int:
    """Runs the spy: opens the probes, says ready, ticks, sends the result; errors are
    sent to the parent as an ``error`` frame, never printed.

    :param argv: the arguments, ``sys.argv[1:]`` if None
    :param rfd: file descriptor of the parent's messages
    :param wfd: file descriptor for the frames
    :return: the exit code
    """
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
        loop = build_loop(opts)
    except Exception as e:
        write_frame(wfd, _error(e))
        return 1
    try:
        alive = loop.tick()  # the first measure: ``begin`` is the memory at start
        ready = {
            "kind": "ready",
            "t0": loop.first,
            "source": loop.cpu.source,
            "stacks": loop.pending_observer is not None,
            "stacks_error": loop.stacks_error,
        }
        loop.observer, loop.pending_observer = loop.pending_observer, None
        if not write_frame(wfd, ready):
            return 0
        if not alive:
            write_frame(wfd, *loop.result(True))
            return 0
        return serve(loop, rfd, wfd, opts["delay"], opts["parent"])
    except Exception as e:  # one of the family (a probe's own error) as it is
        write_frame(wfd, _error(e, started=True))
        return 1
    finally:
        loop.close()

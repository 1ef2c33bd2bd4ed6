"""Memory probes behind one interface, used by the spy process.

A probe's ``read()`` returns ``(current, peak)`` in bytes, where ``peak`` is the highest
memory since the previous read, and raises :class:`TargetGone` once the process ended.

On Linux, :class:`ProcessProbe` reads ``/proc/PID/status`` directly (no psutil):
``VmRSS`` is the current resident memory and ``VmHWM`` the kernel's high-water mark.
Writing ``5`` to ``/proc/PID/clear_refs`` resets the high-water mark to the current RSS,
so reading it then resetting it at every tick gives the exact peak of each interval, even
of a spike shorter than the interval. The reset also lowers the target's ``ru_maxrss``
(``resource.getrusage``), which reads the same counter. Where the reset is not permitted
or turned off, the high-water mark is still used whenever it changes (it rose, or another
spy reset it), and the current RSS otherwise; without ``/proc`` (another OS) psutil samples RSS.
Each probe says which in ``source``: ``"hwm"``, ``"sampling+hwm"`` or ``"sampling"``.

Device probes (GPUs) are apart: see :mod:`.registry` and :mod:`.nvml`.
"""

from __future__ import annotations

import abc
import os
import time

from .._errors import TargetGone

TYPE_CHECKING = False  # typing is not imported at run time: the spy process stays small
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


class Probe(abc.ABC):
    """Reads the memory of one process (or one process tree)."""

    #: ``"hwm"``, ``"sampling+hwm"`` or ``"sampling"``, see the module
    source: str = "sampling"
    #: the high-water mark left by what ran before the spy started (None if unknown)
    previous_peak: float | None = None
    #: the resident memory when opened, in bytes
    rss: float = 0.0

    @abc.abstractmethod
    def read(self) -> tuple[float, float]:
        """Returns ``(current, peak since the previous read)`` in bytes.

        :raises TargetGone: the process ended
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Releases what the probe holds."""


PERMISSION_ADVICE = (
    "run the spy as the same user as the spied process or as root "
    "(or check that /proc is not mounted with hidepid)"
)
PROC_ROOT = "/proc"


def _parse_kb(data: bytes, key: bytes) -> int | None:
    """Extracts ``key:   1234 kB`` from a status file, in bytes."""
    i = data.find(key)
    if i < 0:
        return None
    j = data.find(b"kB", i)
    return int(data[i + len(key) : j]) * 1024


def _no_process(pid: int) -> ProcessLookupError:
    return ProcessLookupError(f"no process with pid {pid}")


def get_memory_rss(pid: int) -> int:
    """Returns the resident memory (RSS) of a process in bytes.

    :param pid: the process
    """
    probe = make_process_probe(pid, reset_peak=False)
    probe.close()
    return int(probe.rss)


class ProcessProbe(Probe):
    """One process, through ``/proc/PID/status`` and ``/proc/PID/clear_refs``.

    :param pid: the process
    :param reset_peak: reset the high-water mark at each read (exact peaks)
    :param proc_root: where procfs is mounted
    """

    def __init__(self, pid: int, reset_peak: bool = True, proc_root: str = PROC_ROOT) -> None:
        self.pid = pid
        base = f"{proc_root}/{pid}"
        try:
            self._fd = os.open(f"{base}/status", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise _no_process(pid) from None
        except PermissionError as e:
            raise PermissionError(
                f"cannot read the memory of pid {pid} ({e.strerror}): {PERMISSION_ADVICE}"
            ) from None
        self._clear_fd: int | None = None
        try:
            self.rss, hwm = self._read_raw()
        except TargetGone:
            self.close()
            raise ProcessLookupError(
                f"process {pid} has no user memory (ended or a kernel thread)"
            ) from None
        # The mark left by what ran before the spy started, kept before the first reset.
        self.previous_peak: float | None = hwm
        self._last_hwm = hwm or 0
        self.source = "sampling" if hwm is None else "sampling+hwm"
        if hwm is not None and reset_peak:
            try:
                fd = os.open(f"{base}/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
            except OSError:
                return  # not permitted (another user's process): no reset
            try:
                os.write(fd, b"5")
            except OSError:
                os.close(fd)
                return
            self._clear_fd = fd
            self.source = "hwm"

    def _read_raw(self) -> tuple[int, int | None]:
        try:
            data = os.pread(self._fd, 8192, 0)
        except OSError:
            raise TargetGone(self.pid) from None
        rss = _parse_kb(data, b"VmRSS:")
        if rss is None:  # a zombie shows no memory
            raise TargetGone(self.pid)
        return rss, _parse_kb(data, b"VmHWM:")

    def read(self) -> tuple[float, float]:
        rss, hwm = self._read_raw()
        if self._clear_fd is not None:
            try:
                os.write(self._clear_fd, b"5")
            except OSError:
                raise TargetGone(self.pid) from None
            return rss, max(rss, hwm or 0)
        if hwm is None or hwm == self._last_hwm:
            return rss, rss  # no new mark: sampling only
        # A higher mark was reached during this interval: it is its peak. A lower one
        # means another spy resets it (an outer block): it is the peak since then.
        self._last_hwm = hwm
        return rss, max(rss, hwm)

    def close(self) -> None:
        for fd in (self._fd, self._clear_fd):
            if fd is not None:
                # No contextlib here: importing it costs the spy milliseconds at start.
                try:  # noqa: SIM105
                    os.close(fd)
                except OSError:
                    pass
        self._clear_fd = None


class PsutilProbe(Probe):
    """One process sampled with psutil, where ``/proc`` is missing.

    :param pid: the process
    """

    def __init__(self, pid: int) -> None:
        import psutil

        self._psutil = psutil
        try:
            self._proc = psutil.Process(pid)
            self.rss = int(self._proc.memory_info().rss)
        except psutil.NoSuchProcess:
            raise _no_process(pid) from None
        except psutil.AccessDenied as e:
            raise PermissionError(
                f"cannot read the memory of pid {pid}: {PERMISSION_ADVICE}"
            ) from e

    def read(self) -> tuple[float, float]:
        try:
            rss = float(self._proc.memory_info().rss)
        except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
            raise TargetGone(self._proc.pid) from None
        return rss, rss

    def close(self) -> None:
        """Nothing to release."""


def make_process_probe(pid: int, reset_peak: bool = True, proc_root: str = PROC_ROOT) -> Probe:
    """The best probe for one process on this system (parameters: see :class:`ProcessProbe`)."""
    if os.path.isdir(f"{proc_root}/self"):
        return ProcessProbe(pid, reset_peak, proc_root)
    return PsutilProbe(pid)


def children_map(proc_root: str = PROC_ROOT) -> dict[int, list[int]]:
    """Scans procfs (mounted at ``proc_root``): parent pid -> child pids."""
    children: dict[int, list[int]] = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc_root}/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendants(pid: int, children: dict[int, list[int]], exclude: Iterable[int] = ()) -> list[int]:
    """All descendants of ``pid`` (not itself), skipping ``exclude`` and their subtrees.

    :param pid: the root
    :param children: parent -> children, see :func:`children_map`
    :param exclude: pids left out with everything below them
    """
    skip = set(exclude)
    found: list[int] = []
    seen = {pid}
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child in skip or child in seen:
                continue
            seen.add(child)
            found.append(child)
            stack.append(child)
    return found


class TreeProbe(Probe):
    """A process and all its descendants, summed.

    The current figure is the sum of the current RSS, the peak the sum of each process's
    peak during the interval (an upper bound when the processes peak at different
    moments). The tree is rescanned every ``refresh`` seconds.

    :param pid: the root process
    :param exclude: pids never counted, with their subtrees (the spy itself)
    :param reset_peak: see :class:`ProcessProbe`
    :param proc_root: where procfs is mounted
    :param refresh: seconds between two scans of the process tree
    :param clock: a monotonic clock
    """

    def __init__(
        self,
        pid: int,
        exclude: Iterable[int] = (),
        reset_peak: bool = True,
        proc_root: str = PROC_ROOT,
        refresh: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pid = pid
        self.root = make_process_probe(pid, reset_peak, proc_root)
        self.source = self.root.source
        self.previous_peak = self.root.previous_peak
        self.exclude = set(exclude)
        self.reset_peak = reset_peak
        self.proc_root = proc_root
        self.refresh = refresh
        self.clock = clock
        self.probes: dict[int, Probe] = {}
        self._next_scan = clock()

    def _scan(self) -> None:
        pids = set(descendants(self.pid, children_map(self.proc_root), self.exclude))
        for gone in set(self.probes) - pids:
            self.probes.pop(gone).close()
        for pid in pids - set(self.probes):
            try:
                self.probes[pid] = make_process_probe(pid, self.reset_peak, self.proc_root)
            except (ProcessLookupError, PermissionError):
                continue  # ended meanwhile, or not ours to read

    def read(self) -> tuple[float, float]:
        current, peak = self.root.read()
        now = self.clock()
        if now >= self._next_scan:
            self._next_scan = now + self.refresh
            self._scan()
        for pid, probe in list(self.probes.items()):
            try:
                c, p = probe.read()
            except TargetGone:
                self.probes.pop(pid).close()
                continue
            current += c
            peak += p
        return current, peak

    def close(self) -> None:
        self.root.close()
        for probe in self.probes.values():
            probe.close()
        self.probes.clear()

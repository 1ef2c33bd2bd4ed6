"""What ``/proc`` says of a process: its executable and mappings, its threads' state and
CPU time, its resident memory and high-water mark, its children.

Readings are kept cheap (a file opened once, read again with ``pread``) because the
observer takes them at every sample. What ``/proc`` gives is the kernel's, but a process
may end at any moment: a reading of a process gone returns None, never raises.
"""

from __future__ import annotations

import os
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Mapping(NamedTuple):
    """One line of ``/proc/PID/maps``.

    :param start: first address
    :param end: address past the last
    :param perms: ``r-xp``...
    :param offset: offset in the file
    :param path: the file ('' for anonymous memory)
    """

    start: int
    end: int
    perms: str
    offset: int
    path: str


def mappings(pid: int) -> list[Mapping]:
    """The mappings of a process.

    :param pid: the process
    :return: its mappings, in address order
    :raises OSError: the process is gone or unreadable
    """
    out = []
    with open(f"/proc/{pid}/maps", "rb") as f:
        for raw in f:
            parts = raw.split(None, 5)
            if len(parts) < 5:
                continue
            try:
                start, end = (int(x, 16) for x in parts[0].split(b"-"))
                offset = int(parts[2], 16)
            except ValueError:
                continue
            path = parts[5].strip().decode(errors="replace") if len(parts) > 5 else ""
            out.append(Mapping(start, end, parts[1].decode(errors="replace"), offset, path))
    return out


def load_base(maps: list[Mapping], path: str) -> int | None:
    """Where a file is loaded: the start of its lowest mapping (offset 0).

    :param maps: the process's mappings
    :param path: the file, as the mappings name it
    :return: the address, None if it is not mapped
    """
    starts = [m.start - m.offset for m in maps if m.path == path]
    return min(starts) if starts else None


class TaskStat(NamedTuple):
    """A thread's line of ``/proc/PID/task/TID/stat``.

    :param state: ``R`` running, ``S`` sleeping, ``D`` disk wait, ``Z``...
    :param utime: user CPU seconds
    :param stime: system CPU seconds
    :param reaped: page faults of the children it waited for (``cminflt``): above 0
        once it reaped a child, whose ``ru_maxrss`` then counts in its own at ``wait4``
    :param parent: its parent process
    """

    state: str
    utime: float
    stime: float
    reaped: int = 0
    parent: int = 0


def parse_stat(data: bytes) -> TaskStat | None:
    """A ``stat`` line (the command name may hold spaces and parentheses: the fields
    start after the last ``)``).

    :param data: the file's bytes
    :return: the figures, None if malformed
    """
    end = data.rfind(b")")
    if end < 0:
        return None
    fields = data[end + 2 :].split()
    if len(fields) < 13:
        return None
    try:
        utime, stime = int(fields[11]) / TICKS, int(fields[12]) / TICKS
        return TaskStat(fields[0].decode(), utime, stime, int(fields[8]), int(fields[1]))
    except (ValueError, UnicodeDecodeError):
        return None


class ProcFile:
    """A ``/proc`` file kept open and read again from the start.

    :param path: the file
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = None

    def read(self, size: int = 4096) -> bytes | None:
        """The file's bytes now, None once unreadable (the process or thread ended)."""
        if self.fd is None:
            return None
        try:
            return os.pread(self.fd, size, 0)
        except OSError:
            self.close()
            return None

    def close(self) -> None:
        """Closes the file (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class ProcessFiles:
    """The ``/proc`` readings of one process taken at every sample.

    :param pid: the process
    """

    def __init__(self, pid: int) -> None:
        self.status = ProcFile(f"/proc/{pid}/status")
        self.stat = ProcFile(f"/proc/{pid}/stat")

    def memory(self) -> tuple[float | None, float | None]:
        """Resident bytes and the high-water mark now, from one reading of ``status``
        (``VmRSS``, ``VmHWM``): one system call where ``statm`` and ``status`` took two.

        :return: ``(rss, hwm)``, None where unreadable (0 for a process whose memory is
            gone: exiting)
        """
        data = self.status.read(8192)
        if not data:
            return None, None
        return _kb(data, b"VmRSS:"), _kb(data, b"VmHWM:")

    def process_stat(self) -> TaskStat | None:
        """The whole process's state and CPU times."""
        data = self.stat.read(1024)
        return parse_stat(data) if data else None

    def close(self) -> None:
        """Closes every file."""
        for f in (self.status, self.stat):
            f.close()


def _kb(data: bytes, key: bytes) -> float | None:
    at = data.find(key)
    if at < 0:
        return 0.0 if key == b"VmRSS:" else None  # a zombie has no memory lines
    try:
        return float(int(data[at + len(key) : data.index(b"kB", at)]) * 1024)
    except ValueError:
        return None


def thread_ids(pid: int) -> list[int]:
    """The kernel ids of a process's threads (empty once it ended).

    :param pid: the process
    """
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
    except OSError:
        return []


def read_proc(path: str, size: int) -> bytes:
    """The first ``size`` bytes of a ``/proc`` file, b'' once unreadable (it ended)."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def thread_name(pid: int, tid: int) -> str:
    """A thread's kernel name (``/proc/PID/task/TID/comm``), '' once it ended."""
    return read_proc(f"/proc/{pid}/task/{tid}/comm", 64).decode(errors="replace").strip()


def children_of(pid: int) -> list[int]:
    """The direct children of a process (every thread's ``children`` file, or a scan of
    ``/proc`` where the kernel has no such file).

    :param pid: the process
    """
    found: set[int] = set()
    tids = thread_ids(pid)
    readable = False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.update(int(x) for x in f.read().split())
            readable = True
        except (OSError, ValueError):
            continue
    if readable or not tids:
        return sorted(found)
    for entry in os.listdir("/proc"):
        stat = parse_stat(read_proc(f"/proc/{entry}/stat", 512)) if entry.isdigit() else None
        if stat is not None and stat.parent == pid:
            found.add(int(entry))
    return sorted(found)


def state_of(pid: int) -> str | None:
    """A process's state letter (``R``, ``S``, ``Z``...), None if there is no such process.

    :param pid: the process
    """
    stat = parse_stat(read_proc(f"/proc/{pid}/stat", 1024))
    return stat.state if stat else None


def executable(pid: int) -> str | None:
    """The file a process runs (``/proc/PID/exe``), None if unreadable.

    :param pid: the process
    """
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None

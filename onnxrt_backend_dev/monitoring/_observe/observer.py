"""The observer's loop: every ``interval`` seconds of one clock, for each process
watched, the Python stack of every thread, each thread's state and CPU time, the
resident memory and its high-water mark, in one pass.

What a sample adds, per thread and stack (the columns of :class:`Columns`): one sample,
the wall time since the previous sample, the CPU time the thread used meanwhile (the
kernel's nanosecond count, ``/proc/PID/task/TID/schedstat``), the part of it spent in
bytecode (the thread held the GIL and its innermost frame was not in a call or an
operator) or in native code (the rest), and the kernel's user and system ticks, which
split that CPU time into user and system at the end. Memory goes to one stack per
sample: the thread that used the most CPU in the interval (the one allocating), the main
thread when none ran.

The observer runs in another process than the program: nothing of it is in the
program's memory, signals or threads. It reads, it never writes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .._sampling.recorder import ThreadLine
from .memory import ReadError
from .process import ProcessFiles, ProcFile, children_of, parse_stat, thread_ids, thread_name
from .reader import StackReader, ThreadSample

MAX_POINTS = 20_000
MAX_STACKS = 100_000
# Columns of a row: samples, wall, cpu, python cpu, native cpu, user ticks, system ticks.
SAMPLES, WALL, CPU, PYTHON, NATIVE, UTICKS, STICKS = range(7)
NCOLUMNS = 7
OTHERS_EVERY = 25  # samples between two listings of threads Python does not know
CHILDREN_EVERY = 10  # samples between two looks for new child processes
EMPTY: tuple[int, ...] = ()


class ThreadRecord:
    """What one thread ran, as rows of columns per stack id, and its timeline.

    :param ident: its Python id
    :param native_id: its kernel id (0 unknown)
    :param is_main: it is the main thread
    """

    def __init__(self, ident: int, native_id: int, is_main: bool) -> None:
        self.ident = ident
        self.native_id = native_id
        self.is_main = is_main
        self.rows: dict[int, list[float]] = {}
        self.line = ThreadLine()
        self.cpu_ns = -1  # schedstat's last reading
        self.ticks = (-1.0, -1.0)  # stat's last user and system seconds
        self.stat: ProcFile | None = None
        self.sched: ProcFile | None = None
        self.first_seen = 0.0

    def add(self, sid: int, values: list[float]) -> None:
        """Adds one sample's figures to a stack's row."""
        row = self.rows.get(sid)
        if row is None:
            self.rows[sid] = list(values)
        else:
            for i, v in enumerate(values):
                row[i] += v

    def close(self) -> None:
        """Closes its ``/proc`` files."""
        for f in (self.stat, self.sched):
            if f is not None:
                f.close()


class ProcessRecord:
    """One process watched: its reader, its threads, its memory ticks.

    :param pid: the process
    :param reader: its stacks' reader (None: memory only, not Python or not readable yet)
    :param native_flags: 256 flags of native instructions (see :mod:`.opcodes`)
    :param sink: where memory ticks go (``add_tick(t, rss, hwm, sid)``)
    :param label: how the report names it
    """

    def __init__(
        self,
        pid: int,
        reader: StackReader | None,
        native_flags: bytes,
        sink: Any,
        label: str = "",
    ) -> None:
        self.pid = pid
        self.reader = reader
        self.flags = native_flags
        self.sink = sink
        self.label = label or f"process {pid}"
        self.files = ProcessFiles(pid)
        self.threads: dict[tuple[int, int], ThreadRecord] = {}  # by (tstate, ident)
        self.order: list[tuple[int, int]] = []
        self.keys: dict[tuple[int, ...], int] = {}
        self.key_list: list[tuple[int, ...]] = []
        self.others: dict[int, list[Any]] = {}  # kernel id -> [name, cpu seconds, ns]
        self.samples = 0
        self.read_failures = 0
        self.gone = False
        self.last_t = 0.0
        self.started = 0.0
        self.python_seen = False
        self.overflow = 0
        # Tries to open the interpreter of a process that just started: returns a reader
        # and its flags, None to try again, False to give up (set by the session).
        self.opener: Callable[[], Any] | None = None
        self.collector = ""  # how its stacks are read, for the notes
        # Allocation tracking (``_alloc.tracker.AllocTracker``), read at each sample.
        self.alloc: Any = None

    def intern(self, key: tuple[int, ...]) -> int:
        """The id of a stack key (a cut key once the table is full)."""
        sid = self.keys.get(key)
        if sid is None:
            if len(self.key_list) >= MAX_STACKS:
                self.overflow += 1
                key = key[-32:]  # its outermost 16 frames
                sid = self.keys.get(key)
                if sid is not None:
                    return sid
            sid = self.keys[key] = len(self.key_list)
            self.key_list.append(key)
        return sid

    def close(self) -> None:
        """Closes every ``/proc`` file."""
        self.files.close()
        for t in self.threads.values():
            t.close()


class Observer:
    """Samples a process (and, with ``follow``, its descendants) on one clock.

    :param root: the main process's record
    :param interval: seconds between samples
    :param clock: the clock (``time.monotonic``)
    :param follow: gives a record for a new descendant, None to try again later, False
        never (None: descendants are not followed)
    :param devices: device probes read in the same loop
    """

    def __init__(
        self,
        root: ProcessRecord,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        follow: Callable[[int], ProcessRecord | bool | None] | None = None,
        devices: Any = None,
    ) -> None:
        self.root = root
        self.devices = devices
        self.processes: list[ProcessRecord] = [root]
        self.interval = interval
        self.clock = clock
        self.follow = follow
        self.known_pids = {root.pid}
        self.samples = 0
        self.late = 0
        self.t0 = clock()
        root.started = root.last_t = self.t0
        self.cost = 0.0  # seconds of this process's CPU spent sampling

    def sample(self) -> None:
        """One sample of every process watched."""
        t = self.clock()
        for record in self.processes:
            if not record.gone:
                sample_process(record, t)
        if self.devices is not None:
            self.devices.sample(t, force=self.samples == 0)
        if self.follow is not None and self.samples % CHILDREN_EVERY == 0:
            self._look_for_children(t)
        self.samples += 1

    def _look_for_children(self, t: float) -> None:
        assert self.follow is not None
        for record in list(self.processes):
            if record.gone:
                continue
            for pid in _descendants(record.pid):
                if pid in self.known_pids:
                    continue
                child = self.follow(pid)
                if child is None:
                    continue  # not readable yet (an interpreter starting): next time
                self.known_pids.add(pid)
                if isinstance(child, ProcessRecord):
                    child.started = child.last_t = t
                    self.processes.append(child)

    def run(self, done: Callable[[], bool], on_sample: Callable[[], None] | None = None) -> None:
        """Samples every ``interval`` seconds until ``done()``; a sample that could not
        be taken on time is skipped and counted (the next one keeps the grid).

        :param done: when to stop (checked before each sample)
        :param on_sample: called after each sample (signals, a live status)
        """
        cpu0 = time.process_time()
        interval = self.interval
        next_t = self.clock()
        while not done():
            self.sample()
            if on_sample is not None:
                on_sample()
            next_t += interval
            now = self.clock()
            if now > next_t:
                missed = int((now - next_t) / interval) + 1
                self.late += missed
                next_t += missed * interval
            time.sleep(max(next_t - self.clock(), 0.0))
        self.cost += time.process_time() - cpu0

    def close(self) -> None:
        """Closes every ``/proc`` file and the devices."""
        for record in self.processes:
            record.close()
        if self.devices is not None:
            self.devices.sample(self.clock(), force=True)
            self.devices.close()

    def pids(self) -> set[int]:
        """The processes watched and still running."""
        return {r.pid for r in self.processes if not r.gone}


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    stack = [pid]
    seen = {pid}
    while stack and len(out) < 256:
        for child in children_of(stack.pop()):
            if child not in seen:
                seen.add(child)
                out.append(child)
                stack.append(child)
    return out


def sample_process(record: ProcessRecord, t: float) -> None:
    """One sample of one process: memory, then every thread's stack and CPU.

    :param record: the process
    :param t: the sample's time
    """
    files = record.files
    dt = t - record.last_t
    hwm = files.high_water_mark()
    rss = files.rss()
    if rss is None:
        record.gone = True
        return
    samples: list[ThreadSample] = []
    if record.reader is None and record.opener is not None and record.samples % 2 == 0:
        _try_open(record)
    if record.reader is not None:
        try:
            samples = record.reader.threads()
            record.read_failures = 0
        except ReadError:
            record.read_failures += 1
    record.samples += 1
    record.last_t = t
    credited = _threads(record, samples, t, dt)
    if record.samples % OTHERS_EVERY == 1:
        _other_threads(record, samples)
    record.sink.add_tick(t, rss, hwm or 0.0, credited)
    if record.alloc is not None:
        record.alloc.sample(record, t)


def _try_open(record: ProcessRecord) -> None:
    assert record.opener is not None
    found = record.opener()
    if found is None:
        return
    record.opener = None
    if found is not False:
        record.reader, record.flags, record.collector = found


def _threads(record: ProcessRecord, samples: list[ThreadSample], t: float, dt: float) -> int:
    """Adds each thread's figures; the stack id credited with the memory of this
    sample (-1: none)."""
    best_cpu, credited, main_sid = -1.0, -1, -1
    flags = record.flags
    infos = record.reader.infos if record.reader is not None else []
    pid = record.pid
    for s in samples:
        if s.frames:
            record.python_seen = True
        key = (s.address, s.ident)  # a thread state reused by a new thread is new
        th = record.threads.get(key)
        if th is None:
            is_main = s.native_id == pid if s.native_id else not record.threads
            th = record.threads[key] = ThreadRecord(s.ident, s.native_id, is_main)
            th.first_seen = t
            record.order.append(key)
        cpu, uticks, sticks = _cpu(th, pid)
        sid = record.intern(s.frames) if s.frames else record.intern(EMPTY)
        native = True
        if s.frames:
            info = infos[s.frames[0]]
            offset = s.frames[1]
            op = info.ops[offset] if 0 <= offset < len(info.ops) else 0
            native = bool(flags[op]) or not s.gil
        weight = dt if th.first_seen < t else 0.0
        python_cpu = 0.0 if native else cpu
        th.add(sid, [1.0, weight, cpu, python_cpu, cpu - python_cpu, uticks, sticks])
        th.line.add(t - record.started, sid, weight, MAX_POINTS)
        if th.is_main:
            main_sid = sid
        if s.frames and cpu > best_cpu:
            best_cpu, credited = cpu, sid
    if best_cpu <= 0.0:
        credited = main_sid
    return credited


def _cpu(th: ThreadRecord, pid: int) -> tuple[float, float, float]:
    """The thread's CPU seconds since its last sample, and its user and system ticks
    (seconds, coarse) over the same gap."""
    if not th.native_id:
        return 0.0, 0.0, 0.0
    if th.sched is None:
        th.sched = ProcFile(f"/proc/{pid}/task/{th.native_id}/schedstat")
        th.stat = ProcFile(f"/proc/{pid}/task/{th.native_id}/stat")
    data = th.sched.read(128)
    cpu = 0.0
    if data:
        try:
            ns = int(data.split()[0])
        except (IndexError, ValueError):
            ns = -1
        if ns >= 0 and th.cpu_ns >= 0:
            cpu = max(ns - th.cpu_ns, 0) / 1e9
        if ns >= 0:
            th.cpu_ns = ns
    stat = parse_stat(th.stat.read(1024) or b"") if th.stat is not None else None
    if stat is None:
        return cpu, 0.0, 0.0
    last_u, last_s = th.ticks
    th.ticks = (stat.utime, stat.stime)
    if last_u < 0:
        return cpu, 0.0, 0.0
    return cpu, max(stat.utime - last_u, 0.0), max(stat.stime - last_s, 0.0)


def _other_threads(record: ProcessRecord, samples: list[ThreadSample]) -> None:
    """The CPU of threads Python does not know (a BLAS or ONNX Runtime pool), by their
    kernel name, read every few samples."""
    known = {s.native_id for s in samples if s.native_id}
    for tid in thread_ids(record.pid):
        if tid in known:
            continue
        entry = record.others.get(tid)
        try:
            with open(f"/proc/{record.pid}/task/{tid}/schedstat", "rb") as f:
                ns = int(f.read(128).split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if entry is None:
            record.others[tid] = [thread_name(record.pid, tid) or f"thread {tid}", ns, ns]
        else:
            entry[2] = ns


def own_pid() -> int:
    """This process's id (tests replace it)."""
    return os.getpid()

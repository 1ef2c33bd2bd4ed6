"""The observer's loop: every ``interval`` seconds of one clock, for each process
watched, the Python stack of every thread, each thread's state and CPU time, the
resident memory and its high-water mark, in one pass.

What a sample adds, per thread and stack (a row's columns, :data:`SAMPLES`...): one sample,
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

import time
from collections.abc import Callable
from typing import Any

from .._sampling.recorder import ThreadLine
from . import opcodes
from .memory import ReadError
from .pools import name_pools
from .process import (
    TICKS,
    ProcessFiles,
    ProcFile,
    children_of,
    parse_stat,
    read_proc,
    thread_ids,
    thread_name,
)
from .reader import StackReader, ThreadSample
from .walk import (
    ADDRESS,
    COMPLETE,
    GIL,
    IDENT,
    OUTER,
    RUN_NS,
    STACK,
    STATE,
    TID,
    Fault,
    drop_native,
    set_timer_slack,
)

MAX_POINTS = 20_000
MAX_STACKS = 100_000
# Columns of a row: samples, wall, cpu, python cpu, native cpu, user ticks, system ticks,
# seconds runnable but waiting for a CPU (a busy machine); then, on the rows the threads
# Python does not know were credited to only (see :func:`credit_pool`), their CPU.
SAMPLES, WALL, CPU, PYTHON, NATIVE, UTICKS, STICKS, QUEUED, POOL = range(9)
NCOLUMNS = 8  # the columns every row has (a row grows to POOL when credited)
# Seconds between two listings of threads Python does not know, two readings of the
# threads' user and system ticks (the kernel moves them by 10 ms), two looks for new
# child processes: on the clock, not every so many samples, so that 10,000 samples a
# second cost no more of these than 500 do.
# The memory's high-water mark (exact, a spike between two samples included) is read
# every millisecond: every sample at the default rate.
OTHERS_PERIOD = 0.05
STAT_PERIOD = 0.008
CHILDREN_PERIOD = 0.02
STATUS_PERIOD = 0.001
DONE_PERIOD = 0.001  # seconds between two asks whether the observation is done
FINE = 0.001  # intervals below this sleep with 1 µs of timer slack
NAP = 0.05  # seconds: the longest sleep between two looks at whether to stop
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
        self.cpu_ns = -1  # schedstat's last reading: on the CPU, waiting for one
        self.queue_ns = -1
        self.ticks = (-1.0, -1.0)  # stat's last user and system seconds
        self.stat: ProcFile | None = None
        self.sched: ProcFile | None = None
        self.first_seen = 0.0
        self.last_sid = -1  # its stack at the previous sample
        self.last_in_call = False
        self.name = ""  # its threading name, read once it is known
        self.name_tries = 0

    def add(
        self, sid: int, wall: float, cpu: float, python: float, user: float, system: float,
        queued: float,
    ) -> None:  # fmt: skip
        """Adds one sample's figures to a stack's row (see :data:`NCOLUMNS`)."""
        row = self.rows.get(sid)
        if row is None:
            self.rows[sid] = [1.0, wall, cpu, python, cpu - python, user, system, queued]
        else:
            row[SAMPLES] += 1.0
            row[WALL] += wall
            row[CPU] += cpu
            row[PYTHON] += python
            row[NATIVE] += cpu - python
            row[UTICKS] += user
            row[STICKS] += system
            row[QUEUED] += queued

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
        self.kinds = bytearray()  # per stack id: what its innermost frame runs (opcodes)
        self.stat_t = 0.0  # when the threads' ticks are read next
        self.status_t = 0.0  # when the memory's high-water mark is read next
        self.others_t = 0.0  # when threads Python does not know are listed next
        self.others_read = False  # listed once: a thread seen later was born since
        self.faults: list[str] = []  # the C walk's faults (it was dropped)
        # kernel id -> [name, first and last CPU ns, library, reads] (see .pools)
        self.others: dict[int, list[Any]] = {}
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
        self.tool_rss = 0.0  # bytes of this tool's own in its RSS (the allocation shim's)
        self.user_codes: dict[int, bool] = {}  # code id -> it is the user's (see credit)
        self.reaped = False  # it waited for a child of its own (see TaskStat.reaped)
        self.comm = ""  # its kernel name (its threads started from C inherit it)
        self.last_credited = -1  # the stack credited with the memory at the last sample
        # What the process runs (its first mapping, its command line): changes with an
        # exec, after which it is read anew (see :func:`check_exec`).
        self.image = image_of(pid)
        # Called after an exec (set by the session): gives the record a new opener (and
        # a new label); None: the process is not read after an exec.
        self.on_exec: Callable[[ProcessRecord], None] | None = None
        # Every code object read, by id, whatever reader read it (an exec brings a new
        # reader: the stacks seen before keep their meaning).
        self.infos: list[Any] = reader.infos if reader is not None else []

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
            self.kinds.append(_kind(self, key))
        return sid

    def close(self) -> None:
        """Closes every ``/proc`` file (the C walk's too; idempotent)."""
        self.files.close()
        for t in self.threads.values():
            t.close()
        native = getattr(self.reader, "native", None)
        if native is not None:
            native.close()


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
        self.children_t = 0.0  # when new descendants are looked for next

    def sample(self) -> None:
        """One sample of every process watched."""
        t = self.clock()
        for record in self.processes:
            if not record.gone:
                sample_process(record, t)
        if self.devices is not None:
            self.devices.sample(t, force=self.samples == 0)
        if t >= self.children_t:
            self.children_t = t + CHILDREN_PERIOD
            for record in self.processes:  # children the program waited for (ru_maxrss)
                stat = None if record.gone else record.files.process_stat()
                record.reaped = record.reaped or bool(stat and stat.reaped)
            if self.follow is not None:
                self._look_for_children(t)
        self.samples += 1

    def _look_for_children(self, t: float) -> None:
        assert self.follow is not None
        for record in list(self.processes):
            if record.gone:
                continue
            check_exec(record)
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
        if interval < FINE:  # the kernel's 50 µs of slack would cost a fine rate its rate
            set_timer_slack(1000)
        next_t = self.clock()
        done_t = next_t
        while next_t < done_t or not done():
            if next_t >= done_t:
                done_t = next_t + DONE_PERIOD
            self.sample()
            if on_sample is not None:
                on_sample()
            next_t += interval
            now = self.clock()
            if now > next_t:
                missed = int((now - next_t) / interval) + 1
                self.late += missed
                next_t += missed * interval
            if self._nap(next_t, done):
                break
        self.cost += time.process_time() - cpu0

    def _nap(self, until: float, done: Callable[[], bool]) -> bool:
        """Sleeps until the next sample, in naps short enough that the program's end or a
        signal ends the loop at once (a long interval does not keep it waiting); True
        when ``done()`` said so meanwhile."""
        while True:
            left = until - self.clock()
            if left <= 0:
                return False
            time.sleep(min(left, NAP))
            if left > NAP and done():
                return True

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
    dt = t - record.last_t
    if record.reader is None and record.opener is not None and record.samples % 2 == 0:
        _try_open(record)
    stat, status = t >= record.stat_t, t >= record.status_t
    if stat:
        record.stat_t = t + STAT_PERIOD
    if status:
        record.status_t = t + STATUS_PERIOD
    rss, hwm, rows = _read(record, stat, status=status)
    if not rss:  # gone, or exiting (its memory already released: no VmRSS)
        record.gone = True
        record.close()  # its files (the C walk's too): a long run follows many processes
        return
    failed = rows is None and record.reader is not None
    _count_failure(record, failed)
    rows = rows or []
    record.samples += 1
    record.last_t = t
    credited = sample_threads(record, rows, t, dt, stat=stat)
    if credited < 0 and (failed or any(not r[COMPLETE] for r in rows)):
        # The stacks could not be read this time (the program moved under the read): the
        # memory goes on to the code credited last, not to no code. (No Python frame
        # read whole is no code: the interpreter starting or finalizing.)
        credited = record.last_credited
    record.last_credited = credited
    if t >= record.others_t:
        record.others_t = t + OTHERS_PERIOD
        _other_threads(record, rows)
    if not record.python_seen and any(record.key_list[r[STACK]] for r in rows):
        record.python_seen = True
    # The memory from the program's first line on (before, the interpreter's start: not
    # the program's, as a report made inside it would start); a process never read as
    # Python (a command) from its start.
    if record.alloc is not None:
        record.alloc.sample(record, t)  # the allocation shim's records
    if record.python_seen or (record.reader is None and record.opener is None):
        tool = record.tool_rss  # the shim's own pages: not the program's
        record.sink.add_tick(t, rss - tool, max((hwm or 0.0) - tool, 0.0), credited)


def _count_failure(record: ProcessRecord, failed: bool) -> None:
    """Counts reads in a row that gave no stacks; the first of each four looks whether
    the process exec'd (what was read was replaced)."""
    if not failed:
        record.read_failures = 0
        return
    record.read_failures += 1
    if record.read_failures % 4 == 1:
        check_exec(record)


def _read(
    record: ProcessRecord, stat: bool, memory: bool = True, status: bool = True
) -> tuple[float | None, float | None, Any]:
    """The memory (when asked; its high-water mark with ``status``: the C walk reads the
    resident bytes alone cheaper) and the threads' rows (None: not read), by the C walk
    when the reader has one (the stacks straight into the record's table), else by the
    Python reader. A fault of the C code drops the walk: the Python reader reads from now
    on, the notes say why."""
    reader = record.reader
    if reader is not None and reader.native is not None:
        if reader.owner is not record:
            reader.bind(record)
        try:
            return reader.native.sample(stat, status and memory)
        except Fault as e:
            record.faults.append(str(e))
            drop_native(reader)
    rss, hwm = record.files.memory() if memory else (None, None)
    if reader is None or (memory and not rss):
        return rss, hwm, None
    try:
        return rss, hwm, _python_rows(record, reader.threads())
    except ReadError:
        return rss, hwm, None


def read_rows(record: ProcessRecord, stat: bool = True) -> list[Any] | None:
    """The threads of a process now, as rows (see :func:`sample_threads`), when its
    memory is read elsewhere (a block's spy): None when not read.

    :param record: the process
    :param stat: read the threads' user and system ticks too
    """
    return _read(record, stat, memory=False)[2]


def _python_rows(record: ProcessRecord, samples: list[ThreadSample]) -> list[Any]:
    """The Python reader's threads as the C walk's rows (CPU left to be read here)."""
    intern = record.intern
    return [(s.address, s.ident, s.native_id, intern(s.frames), s.complete, s.dropped, s.gil,
             s.outer, None) for s in samples]  # fmt: skip


def image_of(pid: int) -> tuple[bytes, bytes]:
    """What a process runs now: its first mapping and its command line (an exec changes
    them; the first mapping moves with address randomisation even for the same file)."""
    maps, cmdline = (
        read_proc(f"/proc/{pid}/{name}", 256).split(b"\n", 1)[0] for name in ("maps", "cmdline")
    )
    return maps, cmdline


def check_exec(record: ProcessRecord) -> bool:
    """Whether a process exec'd since it was opened; if so, it is read anew: a new
    reader (sharing the code table, so the stacks seen before keep their meaning), a new
    label. A process forked and not yet exec'd (a ``subprocess`` child) is a copy of its
    parent until then.

    :param record: the process
    :return: True if it exec'd
    """
    image = image_of(record.pid)
    if not image[0] or image == record.image:
        return False
    record.image = image
    record.reader = None
    if record.on_exec is not None:
        record.on_exec(record)  # opened again at the next samples (see _try_open)
    for th in record.threads.values():
        th.last_sid = -1
    return True


def _try_open(record: ProcessRecord) -> None:
    assert record.opener is not None
    found = record.opener()
    if found is None:
        return
    record.opener = None
    if found is not False:
        record.reader, record.flags, record.collector = found
        record.reader.infos = record.infos  # ids already given stay valid


def sample_threads(
    record: ProcessRecord,
    rows: list[Any],
    t: float,
    dt: float,
    skip: Callable[[str], bool] | None = None,
    stat: bool = True,
) -> int:
    """Adds each thread's figures (its CPU since its previous sample, the split, the
    stack it runs); returns the stack id credited with what memory did since the
    previous sample (-1: none): the credited stack of the thread that used the most CPU
    meanwhile, the main thread's when none did (see :func:`credit`).

    :param record: the process
    :param rows: its threads, just read (the C walk's rows, see :mod:`.walk`, with this
        record's stack ids; ``None`` for the CPU: read here)
    :param t: the sample's time
    :param dt: seconds since the previous sample
    :param skip: thread name -> True to leave that thread out (this tool's own)
    :param stat: read the threads' user and system ticks (the Python reader's rows)
    """
    best_cpu, credited, main_sid, best_frames = -1.0, -1, -1, EMPTY
    pid = record.pid
    threads, key_list, kinds = record.threads, record.key_list, record.kinds
    for row in rows:
        key = (row[ADDRESS], row[IDENT])  # a thread state reused by a new thread is new
        th = threads.get(key)
        if th is None:
            th = _new_thread(record, row, t)
        if not th.name and not th.is_main and th.name_tries < 5 and row[OUTER]:
            th.name_tries += 1
            th.name = _name_of(record, row)
        if skip is not None and th.name and skip(th.name):
            continue
        cpu, uticks, sticks, queued = (
            _delta(th, *row[RUN_NS:STATE]) if row[RUN_NS] is not None else _cpu(th, pid, stat)
        )
        sid = row[STACK]
        if not key_list[sid] and not row[COMPLETE] and th.last_sid >= 0:
            sid = th.last_sid  # unreadable now: still where it was
        kind = kinds[sid]
        in_call = kind != opcodes.PYTHON
        # An operator is native while it lasts (a numpy ``a @ b``), not for one sample
        # of an int's ``%`` in a loop: the same instruction at the previous sample too.
        native = (
            kind == opcodes.NATIVE_CALL
            or (kind == opcodes.OPERATOR and sid == th.last_sid)
            or not row[GIL]
        )
        weight = dt if th.first_seen < t else 0.0
        python_cpu = 0.0 if native else cpu
        th.add(sid, weight, cpu, python_cpu, uticks, sticks, queued)
        th.line.add(t - record.started, sid, weight, MAX_POINTS)
        chosen = credit(th.last_sid, th.last_in_call, sid, in_call) if key_list[sid] else -1
        th.last_sid, th.last_in_call = sid, in_call
        if th.is_main:
            main_sid = chosen
        if chosen >= 0 and cpu > best_cpu:
            best_cpu, credited, best_frames = cpu, chosen, key_list[sid]
    # A pool's thread running library code only (pandas 3's read_csv parses in worker
    # threads): the memory is the user's line waiting for it, in the main thread.
    if best_cpu <= 0.0 or (main_sid >= 0 and not has_user_code(record, best_frames)):
        credited = main_sid
    return credited


def _new_thread(record: ProcessRecord, row: Any, t: float) -> ThreadRecord:
    native = row[TID]
    is_main = native == record.pid if native else not record.threads
    key = (row[ADDRESS], row[IDENT])
    th = record.threads[key] = ThreadRecord(row[IDENT], native, is_main)
    th.first_seen = t
    record.order.append(key)
    return th


def has_user_code(record: ProcessRecord, frames: tuple[int, ...]) -> bool:
    """Whether a stack holds a frame of the user's code (not a library's), cached by
    code id.

    :param record: the process
    :param frames: the stack's key (code id, offset, ...)
    :return: True when one frame is the user's
    """
    from .._stacks.frames import is_library_path

    known = record.user_codes
    for cid in frames[::2]:
        user = known.get(cid)
        if user is None:
            info = record.infos[cid] if 0 <= cid < len(record.infos) else None
            file = getattr(info, "file", "") or "<"
            user = known[cid] = not file.startswith("<") and not is_library_path(file)
        if user:
            return True
    return False


def _name_of(record: ProcessRecord, row: Any) -> str:
    if record.reader is None:
        return ""
    frames = record.key_list[row[STACK]]
    sample = ThreadSample(row[ADDRESS], row[IDENT], row[TID], frames, True, 0, False,
                          row[OUTER])  # fmt: skip
    try:
        return record.reader.thread_name(sample)
    except (ReadError, IndexError, ValueError):
        return ""


def _kind(record: ProcessRecord, frames: tuple[int, ...]) -> int:
    """What the innermost frame runs: Python, a call into C or an operator (see
    :func:`.opcodes.kind_of`)."""
    if not frames or record.reader is None or frames[0] >= len(record.infos):
        return opcodes.PYTHON
    info = record.infos[frames[0]]
    offset = frames[1]
    return record.flags[info.ops[offset]] if 0 <= offset < len(info.ops) else opcodes.PYTHON


def credit(before: int, before_in_call: bool, now: int, now_in_call: bool) -> int:
    """The stack credited with what memory did between two samples of a thread: the code
    running at the start of the interval, unless only the code at its end is inside a
    call (an allocation starting within the interval).

    Why the start: memory rises while a line allocates, and the interval where it
    reaches its peak is the one where that line ends; the stack at the end of that
    interval is already the next line. A line that allocates for a while is on both
    ends of the intervals inside it.

    :param before: the thread's stack id at the previous sample (-1 none)
    :param before_in_call: its innermost frame was inside a call or an operator
    :param now: its stack id now
    :param now_in_call: the same, now
    """
    if before < 0 or before == now:
        return now
    if now_in_call and not before_in_call:
        return now
    return before


def _cpu(th: ThreadRecord, pid: int, stat: bool) -> tuple[float, float, float, float]:
    """The thread's CPU seconds since its last sample, its user and system ticks
    (seconds, coarse) and its seconds runnable but not running (waiting for a CPU) over
    the same gap, from the kernel's scheduler statistics (the Python reader's path: the
    C walk reads them itself)."""
    if not th.native_id:
        return 0.0, 0.0, 0.0, 0.0
    if th.sched is None:
        th.sched = ProcFile(f"/proc/{pid}/task/{th.native_id}/schedstat")
        th.stat = ProcFile(f"/proc/{pid}/task/{th.native_id}/stat")
    data = th.sched.read(128)
    run_ns = wait_ns = -1
    if data:
        try:
            run_ns, wait_ns = (int(x) for x in data.split()[:2])
        except ValueError:
            run_ns = wait_ns = -1
    uticks = sticks = -1
    parsed = parse_stat(th.stat.read(1024) or b"") if stat and th.stat is not None else None
    if parsed is not None:
        uticks, sticks = round(parsed.utime * TICKS), round(parsed.stime * TICKS)
    return _delta(th, run_ns, wait_ns, uticks, sticks)


def _delta(
    th: ThreadRecord, run_ns: int, wait_ns: int, uticks: int, sticks: int
) -> tuple[float, float, float, float]:
    """CPU, user and system seconds (from the kernel's ticks, which move by 10 ms: read
    every few samples, their difference goes to the stack of that sample) and seconds
    runnable, since the thread's previous reading."""
    cpu = queued = user = system = 0.0
    if run_ns >= 0:
        if th.cpu_ns >= 0:
            cpu = max(run_ns - th.cpu_ns, 0) / 1e9
            queued = max(wait_ns - th.queue_ns, 0) / 1e9
        th.cpu_ns, th.queue_ns = run_ns, wait_ns
    if uticks >= 0:
        u, s = uticks / TICKS, sticks / TICKS
        last_u, last_s = th.ticks
        th.ticks = (u, s)
        if last_u >= 0:
            user, system = max(u - last_u, 0.0), max(s - last_s, 0.0)
    return cpu, user, system, queued


def _other_threads(record: ProcessRecord, rows: list[Any]) -> None:
    """The CPU of threads Python does not know (a BLAS or ONNX Runtime pool), by their
    kernel name or the library on their stack (:func:`.pools.name_pools`), read every
    :data:`OTHERS_PERIOD` seconds; what they used since the previous read is credited to
    the main thread's stack now (see :func:`credit_pool`)."""
    if record.reader is None:
        return  # no Python thread read yet: every thread would look unknown
    # Python's threads, whenever seen (a read that failed, or a thread starting without
    # its id yet, lists none of them now): their CPU is theirs, never counted twice.
    known = {th.native_id for th in record.threads.values() if th.native_id}
    known.update(r[TID] for r in rows if r[TID])
    for tid in [tid for tid in record.others if tid in known]:
        del record.others[tid]
    if not record.comm:
        record.comm = thread_name(record.pid, record.pid)
    spent = 0
    for tid in thread_ids(record.pid):
        if tid in known:
            continue
        entry = record.others.get(tid)
        try:
            ns = int(read_proc(f"/proc/{record.pid}/task/{tid}/schedstat", 128).split()[0])
        except (ValueError, IndexError):  # the thread ended (b'') or a bad line
            continue
        if entry is None:
            # Born since the first listing: all its CPU is the run's (a pool that works
            # and idles between two reads is not lost); before it, from now on.
            first = 0 if record.others_read else ns
            record.others[tid] = [thread_name(record.pid, tid), first, ns, "", 0]
            spent += ns - first
        else:
            spent += max(ns - entry[2], 0)
            entry[2] = ns
    record.others_read = True
    name_pools(record.pid, record.others, record.comm, getattr(record.reader, "memory", None))
    if spent:
        credit_pool(record, spent / 1e9)


def credit_pool(record: ProcessRecord, seconds: float) -> None:
    """Adds CPU seconds of the threads Python does not know to the :data:`POOL` column
    of the stack the main thread runs now (the last sample's): a pool spinning while the
    program runs Python, or working for the line that called it, is seen on that line.
    The main thread, not the thread that started the pool: the kernel does not say which
    one did, and the main thread is where a program's phases are.

    :param record: the process
    :param seconds: the pool's CPU since the previous credit
    """
    th = next((t for t in record.threads.values() if t.is_main and t.last_sid >= 0), None)
    row = th.rows.get(th.last_sid) if th is not None else None
    if row is None:
        return  # no main thread read yet: the pool's total keeps it
    if len(row) <= POOL:
        row.extend([0.0] * (POOL + 1 - len(row)))
    row[POOL] += seconds

"""The shim's ring of records, read from outside the program.

The ring (``onnxrt_alloc_ring`` in ``shim.c``) is a header of counters and a circular
array of fixed-size records that the program's threads claim with an atomic increment
of ``head``. A record is whole when both its first word (``seq``) and its last
(``seq_end``) hold its index + 1; one still being written is read again at the next
poll; one the writers lapped before it was read is lost, and counted. The reader keeps
its own position, and writes one word into the ring, nowhere else: how far it read
(``read``), so that the program, at its exit, waits for its last records to be read.

Everything read is untrusted: the header must carry the magic, the version and the sizes
this module knows, and every count is bounded.
"""

from __future__ import annotations

import ctypes
import errno
import struct
from collections.abc import Callable
from typing import NamedTuple

from .._errors import RingError
from .._observe.memory import Memory, ReadError

SYMBOL = "onnxrt_alloc_ring"
MAGIC = b"ONNXALC\0"
VERSION = 2
HEADER = struct.Struct("<8sIIIIiIQQQqqQQQQQQQQQ104sQ")
READ_AT = 136  # where the reader says how far it read (the program waits for it at exit)
RECORD = struct.Struct("<QIHHQQQqQQQQ")
FRAMES_AT = 80
RECORD_SIZE = 1112
RECORDS_AT = 256
MAX_FRAMES = 64
KIND_ALLOC, KIND_FREE, KIND_PEAK = 1, 2, 3
FLAG_FINALIZING, FLAG_TRUNCATED, FLAG_NO_THREAD, FLAG_MMAP = 1, 2, 4, 8
STATE_SAMPLING, STATE_STACKS, STATE_COUNTING, STATE_FINALIZE, STATE_EXITING = 1, 2, 4, 8, 16
TELL_EVERY = 16  # polls between two words written, unless the program is exiting
MAX_BATCH = 2048  # records read in one system call (2.2 MB)
PATIENCE = 3  # polls a record being written is waited for before it counts as lost
_U64 = struct.Struct("<Q")
assert HEADER.size == RECORDS_AT


class Header(NamedTuple):
    """The ring's header: where the writers are and the shim's exact counters.

    :param pid: the process writing (set again in a forked child)
    :param state: ``STATE_*`` bits (sampling, stacks, counting, finalization known,
        exiting)
    :param mean: bytes between two samples on average (0: not sampling)
    :param fork_head: the first index written by this process
    :param head: the next index to be claimed
    :param live: bytes live now (exact, up to each thread's unflushed 64 KiB)
    :param peak: the highest ``live``
    :param allocs: allocation calls
    :param allocated: bytes allocated
    :param frees: free calls
    :param table_full: sampled allocations whose free could not be followed
    :param reentrant: allocations made inside the shim (counted, not sampled)
    :param peak_time: when ``peak`` was last raised (``CLOCK_MONOTONIC`` ns)
    :param samples: sampled allocations
    :param generation: forks the process came through
    :param read: 1 + the index the reader said it read up to (0: no reader yet)
    :param capacity: records in the ring
    :param why: why stacks are off, when they are
    :param own: bytes of the shim's own data, resident from its start (taken off the
        program's RSS)
    """

    pid: int
    state: int
    mean: int
    fork_head: int
    head: int
    live: int
    peak: int
    allocs: int
    allocated: int
    frees: int
    table_full: int
    reentrant: int
    peak_time: int
    samples: int
    generation: int
    read: int
    capacity: int
    why: str
    own: int = 0


class Record(NamedTuple):
    """One record.

    :param order: its place in the ring's sequence (the order of events)
    :param kind: ``KIND_ALLOC``, ``KIND_FREE`` or ``KIND_PEAK``
    :param flags: ``FLAG_*`` bits
    :param address: the allocation's address
    :param size: the bytes asked for (an allocation)
    :param time_ns: ``CLOCK_MONOTONIC`` nanoseconds
    :param live: the process's live bytes then (exact up to unflushed counters)
    :param tid: the kernel thread id
    :param caller: the native return address of the allocation call
    :param nallocs: allocations the thread had made by then
    :param caller2: the return address one frame further out (0 unknown)
    :param frames: ``(code object, instruction)`` pairs, innermost first, flat
    """

    order: int
    kind: int
    flags: int
    address: int
    size: int
    time_ns: int
    live: int
    tid: int
    caller: int
    nallocs: int
    caller2: int
    frames: tuple[int, ...]


def parse_header(data: bytes) -> Header:
    """Reads a ring's header.

    :param data: its first :data:`RECORDS_AT` bytes
    :return: the header
    :raises RingError: not a ring of this version
    """
    if len(data) < HEADER.size:
        raise RingError("the ring's header is cut short")
    f = HEADER.unpack_from(data, 0)
    if f[0] == bytes(8):
        raise RingError("the shim has not started", starting=True)
    if f[0] != MAGIC:  # the loader may not have zeroed the page yet: read again later
        raise RingError("no ring at the shim's symbol (its magic is wrong)", starting=True)
    if f[1] != VERSION or f[2] != RECORD_SIZE or f[4] != MAX_FRAMES or not 0 < f[3] <= 1 << 20:
        raise RingError(f"a ring of another version ({f[1]}, records of {f[2]} bytes)")
    why = f[21].split(b"\0", 1)[0].decode("utf-8", "replace")
    return Header(f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13], f[14], f[15], f[16],
                  f[17], f[18], f[19], f[20], f[3], why, f[22])  # fmt: skip


def parse_record(data: bytes | memoryview, offset: int, index: int) -> Record | None:
    """One record, None when it is not whole (being written, or overwritten).

    :param data: bytes holding it
    :param offset: where it starts in them
    :param index: the index it must carry
    """
    f = RECORD.unpack_from(data, offset)
    end = _U64.unpack_from(data, offset + RECORD_SIZE - 8)[0]
    if f[0] != index + 1 or end != index + 1:
        return None
    n = min(f[3], MAX_FRAMES)
    frames = struct.unpack_from(f"<{2 * n}Q", data, offset + FRAMES_AT) if n else ()
    return Record(index, f[1], f[2], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], frames)


class RingReader:
    """Reads the new records of a ring at each poll, in order.

    :param memory: the program's memory
    :param address: the ring's address
    :param pid: the process (a ring whose header names another pid is not read yet: a
        forked child before its fork handler ran)
    :param tell: writes how far the reader read into the ring: ``tell(address, value)``
        (``process_vm_writev`` of one word by default; None: nothing written)
    """

    def __init__(
        self,
        memory: Memory,
        address: int,
        pid: int,
        tell: Callable[[int, int], None] | None = None,
    ) -> None:
        self.memory = memory
        self.address = address
        self.pid = pid
        self.tell = tell
        self.told = -1
        self.polls = 0
        self.next: int | None = None  # the next index to read
        self.lost = 0  # records lapped by the writers before they were read
        self.header: Header | None = None
        self._waited = 0  # polls the record at ``next`` has been incomplete

    def read_header(self) -> Header:
        """The header now.

        :raises ReadError: the process is gone
        :raises RingError: not a ring
        """
        self.header = parse_header(self.memory.read(self.address, HEADER.size))
        return self.header

    def poll(self) -> list[Record]:
        """The records written since the last poll (those whole; a record still being
        written stops the poll there, and is read at the next one).

        :raises ReadError: the process is gone
        :raises RingError: not a ring
        """
        header = self.read_header()
        if header.pid != self.pid:
            return []
        if not header.state and not header.why:  # its start half done: its mean not set yet
            raise RingError("the shim is starting", starting=True)
        if self.next is None:
            self.next = header.fork_head
        cap = header.capacity
        head = header.head
        if head - self.next > cap:
            self.lost += head - cap - self.next
            self.next = head - cap
        out: list[Record] = []
        while self.next < head:
            count = min(head - self.next, MAX_BATCH)
            records, stop = self._read(self.next, count, cap)
            out.extend(records)
            if stop:
                break
        # How far it read: what the program waits for at its exit (then at every poll;
        # before, now and then: a write into another process costs tens of µs).
        self.polls += 1
        due = self.told < 0 or header.state & STATE_EXITING or self.polls % TELL_EVERY == 0
        if self.tell is not None and self.next != self.told and due:
            self.told = self.next
            self.tell(self.address + READ_AT, self.next + 1)
        return out

    def _read(self, first: int, count: int, cap: int) -> tuple[list[Record], bool]:
        """Reads ``count`` records from index ``first`` (at most two contiguous runs)."""
        slot = first % cap
        runs = [(slot, min(count, cap - slot))]
        if runs[0][1] < count:
            runs.append((0, count - runs[0][1]))
        got = self.memory.read_many(
            [(self.address + RECORDS_AT + s * RECORD_SIZE, n * RECORD_SIZE) for s, n in runs]
        )
        if any(g is None for g in got):
            raise ReadError(self.address, count * RECORD_SIZE, "the ring is unreadable")
        # Records the writers may have lapped while they were read are not trusted (a
        # backlog under a quarter of the ring cannot be lapped within one read).
        after = first + count
        if count > cap // 4:  # the head now (the header's word at 48)
            after = _U64.unpack(self.memory.read(self.address + 48, 8))[0]
        safe_from = after - cap
        data = b"".join(g for g in got if g is not None)
        out: list[Record] = []
        for k in range(count):
            index = first + k
            rec = parse_record(data, k * RECORD_SIZE, index) if index >= safe_from else None
            if rec is None:
                if index < safe_from or self._waited >= PATIENCE or after - index > cap // 2:
                    self.lost += 1  # lapped, or a writer that never finished
                    self._waited = 0
                    self.next = index + 1
                    continue
                self._waited += 1
                self.next = index
                return out, True
            self._waited = 0
            out.append(rec)
            self.next = index + 1
        return out, False


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def teller(pid: int) -> Callable[[int, int], None]:
    """Writes one 64-bit word into process ``pid`` (``process_vm_writev``): how far the
    reader read, into the shim's ring. A failed write is ignored (the program then waits
    its bounded time at exit).

    :param pid: the process
    :raises OSError: the platform has no ``process_vm_writev``
    """
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "process_vm_writev", None)
    if call is None:
        raise OSError(errno.ENOSYS, "process_vm_writev is not available on this platform")
    call.restype = ctypes.c_ssize_t
    word = ctypes.c_uint64(0)
    local = _IoVec(ctypes.cast(ctypes.pointer(word), ctypes.c_void_p), 8)
    remote = _IoVec(0, 8)

    def tell(address: int, value: int) -> None:
        word.value = value
        remote.base = address
        call(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)

    return tell

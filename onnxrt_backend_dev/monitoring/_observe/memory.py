"""Reading another process's memory: ``process_vm_readv`` (Linux), no ptrace stop, no
code in the process read.

Everything read is untrusted: a read of unmapped memory, or a short one, raises
:class:`ReadError`, which the reader counts as a torn or failed sample, never as the
program's failure. Tests give the reader a :class:`FakeMemory` instead.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from .._errors import ReadError
from .walk import _walker as _native  # where built: reads without ctypes (a costly import)

MAX_READ = 1 << 22  # one read at most 4 MiB: a size read from the process is untrusted
IOV_MAX = 1024  # iovecs per call (Linux's UIO_MAXIOV)


class Memory(Protocol):
    """What the reader needs of a process's memory."""

    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``.

        :raises ReadError: unmapped or short
        """

    def read_many(self, requests: Sequence[tuple[int, int]]) -> list[bytes | None]:
        """Several reads at once; None for each one that failed."""


def open_memory(pid: int) -> Memory:
    """The memory of process ``pid`` (see :class:`ProcessMemory`).

    :param pid: the process
    :raises OSError: the platform has no ``process_vm_readv``
    """
    return ProcessMemory(pid)


_IOVEC: list[Any] = []  # the iovec structure, made once ctypes is imported


def _ctypes() -> Any:
    """ctypes, imported when first needed (with :data:`_IOVEC`)."""
    import ctypes

    if not _IOVEC:

        class _IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        _IOVEC.append(_IoVec)
    return ctypes


class ProcessMemory:
    """The memory of process ``pid`` read with ``process_vm_readv``: by the C walk's
    module where built (the same batches, in C), else through ctypes.

    :param pid: the process
    :raises OSError: the platform has no ``process_vm_readv``
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.calls = 0  # system calls made: the cost of a sample, for the report
        if _native is None:
            self._open_ctypes()

    def _open_ctypes(self) -> None:
        """The ctypes call and its buffers (no C module built)."""
        self._ctypes = _ctypes()
        try:
            call = self._ctypes.CDLL(None, use_errno=True).process_vm_readv
        except (OSError, AttributeError) as e:
            raise OSError(errno.ENOSYS, "process_vm_readv is not available on this platform") from e
        call.restype = self._ctypes.c_ssize_t
        # No argtypes: checking them costs a third of the call. The arguments are a pid
        # and small counts (C ints) and iovec pointers (byref or arrays), nothing else.
        call.argtypes = None
        self._call = call
        self._size = 1 << 16
        self._buffer = self._ctypes.create_string_buffer(self._size)
        self._local = _IOVEC[0](self._ctypes.cast(self._buffer, self._ctypes.c_void_p), 0)
        self._remote = _IOVEC[0](0, 0)
        self._local_ptr = self._ctypes.byref(self._local)
        self._remote_ptr = self._ctypes.byref(self._remote)
        self._shapes: dict[int, struct.Struct] = {}
        self._make_iovecs(64)
        self._view = memoryview(self._buffer).cast("B")

    def _ensure(self, size: int) -> None:
        if size > self._size:
            while self._size < size:
                self._size *= 2
            self._buffer = self._ctypes.create_string_buffer(self._size)
            self._local.base = self._ctypes.cast(self._buffer, self._ctypes.c_void_p)
            self._view = memoryview(self._buffer).cast("B")

    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address`` of the process.

        :param address: where
        :param size: how many (at most :data:`MAX_READ`)
        :raises ReadError: unmapped, short, or the process is gone
        """
        if size <= 0:
            return b""
        if size > MAX_READ or address <= 0 or address >= 1 << 64:
            raise ReadError(address, size, "out of bounds")
        if _native is not None:
            self.calls += 1
            try:
                return _native.read(self.pid, address, size)
            except OSError as e:
                raise ReadError(address, size, os.strerror(e.errno) if e.errno else str(e)) from e
        self._ensure(size)
        self._local.len = size
        self._remote.base = address
        self._remote.len = size
        self.calls += 1
        n = self._call(self.pid, self._local_ptr, 1, self._remote_ptr, 1, 0)
        if n != size:
            err = self._ctypes.get_errno() if n < 0 else 0
            raise ReadError(address, size, os.strerror(err) if err else f"short read ({n})")
        return self._view[:size].tobytes()

    def read_many(self, requests: Sequence[tuple[int, int]]) -> list[bytes | None]:
        """Several reads in as few system calls as possible (one per :data:`IOV_MAX`
        requests; a failed one is retried alone, so one bad address costs only itself).

        :param requests: ``(address, size)`` pairs
        :return: the bytes of each, None where it failed
        """
        if _native is not None:
            self.calls += 1
            return _native.read_many(self.pid, requests)
        out: list[bytes | None] = []
        for start in range(0, len(requests), IOV_MAX):
            out.extend(self._read_batch(requests[start : start + IOV_MAX]))
        return out

    def _read_batch(self, batch: Sequence[tuple[int, int]]) -> list[bytes | None]:
        n = len(batch)
        if n == 1:
            return [self._try(*batch[0])]
        total = 0
        for address, size in batch:
            if size <= 0 or size > MAX_READ or address <= 0 or address >= 1 << 64:
                return [self._try(a, s) for a, s in batch]
            total += size
        self._ensure(total)
        if n > self._iov_capacity:
            self._make_iovecs(max(n, 2 * self._iov_capacity))
        # The iovecs packed in one call each (field by field costs a ctypes call per field).
        base = self._ctypes.addressof(self._buffer)
        local: list[int] = []
        remote: list[int] = []
        offset = 0
        for address, size in batch:
            local.append(base + offset)
            local.append(size)
            remote.append(address)
            remote.append(size)
            offset += size
        shape = self._shapes.get(n)
        if shape is None:
            shape = self._shapes[n] = struct.Struct(f"<{2 * n}Q")
        shape.pack_into(self._local_view, 0, *local)
        shape.pack_into(self._remote_view, 0, *remote)
        self.calls += 1
        got = self._call(self.pid, self._local_iov, n, self._remote_iov, n, 0)
        if got == total:
            data = self._view[:total].tobytes()
            out: list[bytes | None] = []
            offset = 0
            for _, size in batch:
                out.append(data[offset : offset + size])
                offset += size
            return out
        # A failure stops the kernel at the first bad request: redo them one by one.
        return [self._try(a, s) for a, s in batch]

    def _make_iovecs(self, capacity: int) -> None:
        self._iov_capacity = capacity
        self._local_iov = (_IOVEC[0] * capacity)()
        self._remote_iov = (_IOVEC[0] * capacity)()
        self._local_view = memoryview(self._local_iov).cast("B")
        self._remote_view = memoryview(self._remote_iov).cast("B")

    def _try(self, address: int, size: int) -> bytes | None:
        try:
            return self.read(address, size)
        except ReadError:
            return None


class FakeMemory:
    """Regions of bytes at addresses: the memory of a process that tests make up.

    :param regions: ``address -> bytes``
    """

    def __init__(self, regions: dict[int, bytes] | None = None) -> None:
        self.regions: dict[int, bytearray] = {a: bytearray(b) for a, b in (regions or {}).items()}
        self.calls = 0
        self.hook: object = None  # tests: a callable run before each read (moves memory)

    def write(self, address: int, data: bytes) -> None:
        """Overwrites bytes inside a region.

        :param address: where
        :param data: the new bytes
        """
        for base, region in self.regions.items():
            if base <= address and address + len(data) <= base + len(region):
                region[address - base : address - base + len(data)] = data
                return
        raise ReadError(address, len(data), "unmapped (write)")

    def read(self, address: int, size: int) -> bytes:
        """See :meth:`ProcessMemory.read`."""
        self.calls += 1
        if callable(self.hook):
            self.hook(address, size)
        if size <= 0:
            return b""
        for base, region in self.regions.items():
            if base <= address and address + size <= base + len(region):
                return bytes(region[address - base : address - base + size])
        raise ReadError(address, size, "unmapped")

    def read_many(self, requests: Sequence[tuple[int, int]]) -> list[bytes | None]:
        """See :meth:`ProcessMemory.read_many`."""
        out: list[bytes | None] = []
        for address, size in requests:
            try:
                out.append(self.read(address, size))
            except ReadError:
                out.append(None)
        return out

"""Naming a native pool's thread that keeps the process's name (OpenBLAS's, ONNX Runtime's)
by the library whose code is on its stack, read from outside once per new thread.

A thread blocked in the kernel (a pool's, between jobs, on a futex) gives its stack
pointer in ``/proc/PID/task/TID/syscall``; a window of its stack above it is read and its
words looked up in the executable mappings: the first return address in a library other
than the C runtime's, OpenMP's or the interpreter's names the thread (OpenMP's when no
other is there). A thread running is tried again on later reads. Everything read is the
target's: a bad line, an unmapped stack or a thread gone leaves the thread unnamed, never
raises.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from .._errors import ReadError
from .memory import Memory
from .process import Mapping, mappings, read_proc

WINDOW = 1 << 16  # bytes of a thread's stack read above its stack pointer at most
LAST_TRY = 600  # reads (of OTHERS_PERIOD: 30 s) after which a thread running is left unnamed
# The C runtime's code, on every thread's stack: not a pool's (nor the interpreter's).
RUNTIME = ("libc.", "libc-", "libpthread", "libstdc++", "libgcc_s", "ld-linux", "libm.",
           "libm-", "libdl", "librt", "[")  # fmt: skip


def library_label(path: str) -> str:
    """How a report names a native library: ``numpy (_multiarray_umath)``,
    ``libonnxruntime``; empty for the interpreter itself.

    :param path: the library's file
    """
    base = os.path.basename(path)
    if base.startswith("libpython") or base.startswith("python"):
        return ""
    name = base.split(".", 1)[0]
    marker = next((m for m in ("site-packages/", "dist-packages/") if m in path), None)
    if marker is None:
        return name
    package = path.split(marker, 1)[1].split("/", 1)[0].removesuffix(".libs")
    return name if package == base else f"{package} ({name})"


class Code:
    """A process's mappings in address order, each with the library its code names (''
    for data, the C runtime, the interpreter), looked up by bisection.

    :param maps: the mappings (:func:`.process.mappings`)
    """

    def __init__(self, maps: list[Mapping]) -> None:
        self.maps = sorted(maps)
        self.starts = [m.start for m in self.maps]
        self.labels = [
            library_label(m.path)
            if "x" in m.perms and m.path and not os.path.basename(m.path).startswith(RUNTIME)
            else ""
            for m in self.maps
        ]

    def at(self, address: int) -> int:
        """The index of the mapping holding ``address``, -1 for none."""
        i = bisect_right(self.starts, address) - 1
        return i if i >= 0 and address < self.maps[i].end else -1


def stack_library(line: bytes, code: Code, memory: Memory) -> str:
    """The library a blocked thread's stack names, from its ``syscall`` line.

    :param line: ``nr a1..a6 sp pc`` (or ``-1 sp pc``), hex
    :param code: the process's mappings
    :param memory: the process's memory
    :return: its label, '' for none (or a line without a stack pointer)
    """
    fields = line.split()
    try:
        if len(fields) not in (3, 9):
            return ""
        sp, pc = int(fields[-2], 16), int(fields[-1], 16)
        i = code.at(sp)
        size = min(WINDOW, code.maps[i].end - sp) & ~7 if i >= 0 else 0
        words = array("Q", memory.read(sp, size)) if size > 0 else array("Q")
    except (ValueError, OSError, ReadError):
        return ""
    found = ""  # OpenMP's, when no other library is on the stack (a worker between jobs)
    for word in (pc, *words):
        i = code.at(word)
        label = code.labels[i] if i >= 0 else ""
        if label and "libgomp" not in label:
            return label
        found = found or label
    return found


def _syscall(pid: int, tid: int) -> bytes:
    return read_proc(f"/proc/{pid}/task/{tid}/syscall", 512)


def name_pools(
    pid: int,
    others: dict[int, list[Any]],
    own: str,
    memory: Memory | None,
    syscall: Callable[[int, int], bytes] = _syscall,
    maps: Callable[[int], list[Mapping]] = mappings,
) -> None:
    """Names the threads keeping the process's name by their stacks: each entry of
    ``others`` (``[name, first ns, last ns, library, reads]``) gets its library at the
    first read that finds the thread blocked (a pool spins while it works: ONNX Runtime's
    through a whole loop of runs), until :data:`LAST_TRY`; ``reads`` -1 once named or
    given up. A thread running costs one read of its ``syscall`` line; the mappings are
    read once a call, when a thread is blocked.

    :param pid: the process
    :param others: kernel id -> entry, of the threads Python does not know
    :param own: the process's kernel name
    :param memory: the process's memory (None: nothing is named)
    :param syscall: reads a thread's ``syscall`` line (tests give theirs)
    :param maps: reads the process's mappings (tests give theirs)
    """
    code = None
    for tid, entry in others.items():
        if entry[4] < 0 or not own or entry[0] != own or memory is None:
            continue
        entry[4] = entry[4] + 1 if entry[4] < LAST_TRY else -1
        line = syscall(pid, tid)
        if line.startswith(b"running"):
            continue
        try:
            code = code or Code(maps(pid))
        except (OSError, ValueError):
            return
        entry[3], entry[4] = stack_library(line, code, memory), -1

"""The walk in C (``walker.c``, built with the package where a compiler was there): one
call reads every thread's stack, its GIL, CPU time and state, and the resident memory,
with the offsets and checks of :mod:`.reader`, which stays the fallback and keeps what
is read once per code object (names, files, line tables: the walk hands it the code
objects it has not seen, :meth:`.reader.StackReader.learn`).

A stack comes back as a local id; the frames of an id come once, the first time it is
seen (``(code id, byte offset)`` pairs, innermost first, as the Python reader gives
them). A fault of the C code itself raises :class:`Fault`: the caller drops the walk and
goes on with the Python reader, saying so.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import WalkerFault
from .memory import Memory, ReadError
from .reader import StackReader, ThreadSample

Fault = WalkerFault  # what a fault of the C code raises

ENV = "ONNXRT_MONITORING_WALKER"  # "python": the Python reader even where C is built

WHY_NOT = ""  # '' when the C walk is built, else why not (for the notes)
try:
    from . import _walker
except ImportError as e:  # built without a compiler, or another platform
    _walker = None  # type: ignore[assignment]
    WHY_NOT = f"the C walker is not built ({e})"

if not WHY_NOT and os.environ.get(ENV, "") == "python":
    WHY_NOT = f"{ENV}=python turns the C walker off"
# Which walk this installation has (a check kept between runs depends on it).
BUILD_TAG = "python" if WHY_NOT else f"c{_walker.VERSION}"

# A thread's row, as the walk returns it.
ADDRESS, IDENT, TID, STACK, COMPLETE, DROPPED, GIL, OUTER = range(8)
RUN_NS, WAIT_NS, UTICKS, STICKS, STATE = range(8, 13)


class NativeWalk:
    """The C walk of one process, for one reader.

    :param reader: the reader it reads for (its layout, addresses, code objects)
    :param source: the process id, or (tests) a memory with ``read_many``
    :raises OSError: not built here
    :raises ValueError: a layout the walk cannot use
    """

    def __init__(self, reader: StackReader, source: int | Memory) -> None:
        if WHY_NOT:
            raise OSError(WHY_NOT)
        lay = reader.layout
        self.reader = reader
        # The stacks, by id: its own table until :meth:`bind` gives another one.
        self.key_list: list[tuple[int, ...]] = []
        self.keys: dict[tuple[int, ...], int] = {}
        self.owner: Any = None
        self.walker = _walker.Walker(
            source, dict(lay.offsets), lay.version[1], reader.runtime, reader.code_type,
            reader.learn, self._intern, reader.max_depth, reader.pthread_tid,
        )  # fmt: skip

    def _intern(self, frames: tuple[int, ...]) -> int:
        sid = self.keys.get(frames)
        if sid is None:
            sid = self.keys[frames] = len(self.key_list)
            self.key_list.append(frames)
        return sid

    def bind(self, owner: Any) -> None:
        """Gives the stacks' ids to another table from now on (the observer's record of
        the process: its ``intern`` and ``key_list``).

        :param owner: what interns them
        """
        self.owner = owner
        self.key_list = owner.key_list
        self.walker.set_interner(owner.intern)

    def sample(
        self, stat: bool = True, status: bool = True
    ) -> tuple[float | None, float | None, list[Any] | None]:
        """One read of the process.

        :param stat: read each thread's user and system ticks and state too
        :param status: read the high-water mark too (``/proc/PID/status``; the resident
            bytes alone come from ``statm``, five times cheaper)
        :return: the resident bytes and their high-water mark (None unread or
            unreadable, 0 once the process has no memory), the threads' rows (None: the
            runtime could not be read), each ``(thread state, ident, kernel id, stack
            id, complete, dropped, holds the GIL, outermost frame, run ns, runnable ns,
            user ticks, system ticks, state)`` with -1 where unread
        :raises Fault: the C code faulted
        """
        return self.walker.sample(stat, status)

    def threads(self) -> list[ThreadSample]:
        """Every thread read now, as :meth:`.reader.StackReader.threads` gives them.

        :raises ReadError: the runtime cannot be read (the process is gone)
        """
        _, _, rows = self.sample(stat=False, status=False)
        if rows is None:
            raise ReadError(self.reader.runtime, 8, "the runtime is unreadable")
        keys = self.key_list
        return [ThreadSample(r[ADDRESS], r[IDENT], r[TID], keys[r[STACK]], r[COMPLETE],
                             r[DROPPED], r[GIL], r[OUTER]) for r in rows]  # fmt: skip

    def counts(self) -> tuple[int, int, int]:
        """Stack reads that moved and were read again, kept as their outer frames, that
        gave nothing."""
        torn, partial, failed, _ = self.walker.counts
        return int(torn), int(partial), int(failed)

    def close(self) -> None:
        """Closes its ``/proc`` files (a later sample opens them again)."""
        self.walker.close()


def attach_native(reader: StackReader, source: int | Memory) -> str:
    """Gives a reader the C walk.

    :param reader: the reader
    :param source: the process id, or a memory with ``read_many`` (tests)
    :return: '' when attached, else why not
    """
    try:
        reader.native = NativeWalk(reader, source)
    except (OSError, ValueError) as e:
        return str(e)
    return ""


def drop_native(reader: StackReader) -> None:
    """Takes the C walk away from a reader (it faulted): its counts stay the reader's."""
    walk = reader.native
    if walk is None:
        return
    reader.torn, reader.partial, reader.failed = reader.counts()  # its own and the walk's
    reader.native = None
    walk.close()


def set_timer_slack(ns: int) -> bool:
    """How late the kernel may wake this thread's sleeps (50 µs by default: a tenth of a
    sample at 10 kHz). Returns whether it was set."""
    if _walker is None:
        return False
    try:
        _walker.set_timer_slack(ns)
    except OSError:
        return False
    return True

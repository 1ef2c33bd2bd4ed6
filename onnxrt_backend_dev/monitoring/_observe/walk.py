"""The walk in C (``walker.c``, built with the package where a compiler was there): one
call reads every thread's stack, its GIL, CPU time and state, and the resident memory,
with the offsets and checks of :mod:`.reader`, which stays the fallback and keeps what
is read once per code object (names, files, line tables: the walk hands it the code
objects it has not seen, :meth:`.reader.StackReader.learn`).

``reader.native.sample(stat, status)`` gives the resident bytes, their high-water mark
and a row per thread (:data:`ADDRESS`...: -1 where not read). A stack comes back as an
id of the reader's table, or of the table it was bound to: the frames of an id come
once, the first time it is seen (``(code id, byte offset)`` pairs, innermost first, as
the Python reader gives them). A fault of the C code itself raises :class:`Fault`: the
caller drops the walk and goes on with the Python reader, saying so.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._errors import WalkerFault

if TYPE_CHECKING:
    from .memory import Memory
    from .reader import StackReader

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


def attach_native(reader: StackReader, source: int | Memory) -> str:
    """Gives a reader the C walk, its stacks in the reader's table (see
    :meth:`.reader.StackReader.bind`).

    :param reader: the reader it reads for (its layout, addresses, code objects)
    :param source: the process id, or a memory with ``read_many`` (tests)
    :return: '' when attached, else why not (not built here, a layout it cannot use)
    """
    if WHY_NOT:
        return WHY_NOT
    lay = reader.layout
    try:
        reader.native = _walker.Walker(
            source, dict(lay.offsets), lay.version[1], reader.runtime, reader.code_type,
            reader.learn, reader.intern, reader.max_depth, reader.pthread_tid,
        )  # fmt: skip
    except (OSError, ValueError) as e:
        return str(e)
    reader.owner = reader
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

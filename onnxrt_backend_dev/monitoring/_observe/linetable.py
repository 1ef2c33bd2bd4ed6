"""Lines of instruction offsets, read from a code object's ``co_linetable`` as read
from another process (the interpreter's own ``co_lines()`` cannot be called there).

Two formats: 3.10's pairs of deltas (``Objects/lnotab_notes.txt``) and the location
table of 3.11+ (``Objects/locations.md``). The bytes are untrusted: a table that runs
past its end or says something impossible stops the decoding where it went wrong; the
ranges decoded before stand. The line of an offset is found once per code object and
offset (see :class:`.reader.CodeInfo`), by one lookup: :func:`line` here, the same
walk in C where the walk's module is built (:data:`line_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .._errors import BadData
from .walk import _walker

MAX_RANGES = 1 << 20

# The same lookup in C (the walk's module, where built): a line found in microseconds;
# :func:`line` stays the lookup without it.
line_of: Callable[[bytes, int, int, int], int] | None = _walker.line if _walker else None


def line(table: bytes, first_line: int, offset: int, minor: int) -> int:
    """The line of a byte offset: that of the last range starting at or before it that
    has one (a ``CACHE`` or an artificial instruction has none), the first line when
    none does or before the code.

    :param table: ``co_linetable``
    :param first_line: ``co_firstlineno``
    :param offset: a byte offset
    :param minor: the minor Python version (3.10's format, or 3.11+'s: a code unit is
        2 bytes)
    """
    found = first_line
    if offset < 0:
        return found
    ranges = _ranges_311 if minor >= 11 else _ranges_310
    for count, (start, end, here) in enumerate(ranges(table, first_line)):
        if start > offset or count >= MAX_RANGES:
            break
        if end > start and here >= 0:
            found = here
    return found


def _ranges_310(table: bytes, first_line: int) -> Iterator[tuple[int, int, int]]:
    line, addr = first_line, 0
    for i in range(0, len(table) - 1, 2):
        start_delta, line_delta = table[i], table[i + 1]
        if line_delta >= 128:
            line_delta -= 256
        end = addr + start_delta
        if line_delta == -128:
            yield addr, end, -1
        else:
            line += line_delta
            yield addr, end, line
        addr = end


def _varint(table: bytes, i: int) -> tuple[int, int]:
    b = table[i]
    value, shift = b & 63, 6
    i += 1
    while b & 64:
        b = table[i]
        i += 1
        value |= (b & 63) << shift
        shift += 6
        if shift > 60:
            raise BadData("varint too long")
    return value, i


def _svarint(table: bytes, i: int) -> tuple[int, int]:
    value, i = _varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i


def _ranges_311(table: bytes, first_line: int) -> Iterator[tuple[int, int, int]]:
    line, addr, i, n = first_line, 0, 0, len(table)
    try:
        while i < n:
            head = table[i]
            if not head & 0x80:
                return  # not the start of an entry: a torn or foreign table
            code, length = (head >> 3) & 15, (head & 7) + 1
            i += 1
            here = line
            if code == 15:
                here = -1
            elif code == 14:
                delta, i = _svarint(table, i)
                line += delta
                here = line
                for _ in range(3):  # end line, column, end column
                    _, i = _varint(table, i)
            elif code == 13:
                delta, i = _svarint(table, i)
                line += delta
                here = line
            elif code >= 10:
                line += code - 10
                here = line
                i += 2
            else:
                i += 1
            end = addr + 2 * length
            yield addr, end, here
            addr = end
    except (IndexError, ValueError):
        return  # cut short: keep what was decoded

"""Lines of instruction offsets, decoded from a code object's ``co_linetable`` as read
from another process (the interpreter's own ``co_lines()`` cannot be called there).

Two formats: 3.10's pairs of deltas (``Objects/lnotab_notes.txt``) and the location
table of 3.11+ (``Objects/locations.md``). The bytes are untrusted: a table that runs
past its end or says something impossible stops the decoding where it went wrong; the
ranges decoded so far are kept. A table is decoded as far as the offsets asked for
need, once (a code object's table is read once, see :class:`.reader.CodeInfo`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator

from .._errors import BadData

MAX_RANGES = 1 << 20

# The same lookup in C (the walk's module, where built): a line found in microseconds,
# with no table decoded in Python; this module stays the decoder without it.
line_of: Callable[[bytes, int, int, int], int] | None
try:
    from ._walker import line as line_of
except ImportError:
    line_of = None


class LineTable:
    """Ranges of byte offsets and their lines, decoded as far as the offsets asked for
    need (a sample's offsets are mostly near the start of a function: its table is not
    decoded past them), searchable.

    :param ranges: ``(start, end, line)`` with offsets in bytes, in order; line -1 where
        the code has none (an iterator: consumed as far as needed)
    :param first_line: the function's first line (the line of an offset before the code)
    """

    def __init__(self, ranges: Iterable[tuple[int, int, int]], first_line: int) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.lines: list[int] = []
        self.first_line = first_line
        self._rest: Iterator[tuple[int, int, int]] | None = iter(ranges)

    def _decode_past(self, offset: int) -> None:
        """Decodes until a range ends past ``offset`` (or the table does); neighbouring
        ranges of the same line are joined."""
        rest, starts, ends, lines = self._rest, self.starts, self.ends, self.lines
        while rest is not None and (not ends or ends[-1] <= offset):
            item = next(rest, None)
            if item is None or len(starts) >= MAX_RANGES:
                self._rest = rest = None
                break
            start, end, line = item
            if end <= start:
                continue
            if lines and lines[-1] == line and ends[-1] == start:
                ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
                lines.append(line)

    def line(self, offset: int) -> int:
        """The line of a byte offset; the last line known before it when the range has
        none (a ``CACHE`` or an artificial instruction), the first line before the code.

        :param offset: a byte offset
        """
        if offset < 0:
            return self.first_line
        if self._rest is not None:
            self._decode_past(offset)
        i = bisect.bisect_right(self.starts, offset) - 1
        while i >= 0:
            line = self.lines[i]
            if line >= 0:
                return line
            i -= 1
        return self.first_line


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


def decode(table: bytes, first_line: int, version: tuple[int, int]) -> LineTable:
    """The line table of a code object of a given Python version: 3.10's
    ``(bytes advanced, line delta)`` pairs (-128 for no line), or the location table of
    3.11+ (offsets in bytes: a code unit is 2 bytes).

    :param table: ``co_linetable``
    :param first_line: ``co_firstlineno``
    :param version: ``(major, minor)``
    """
    ranges = _ranges_311 if version >= (3, 11) else _ranges_310
    return LineTable(ranges(table, first_line), first_line)

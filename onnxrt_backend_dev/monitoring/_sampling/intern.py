"""Tables a sampler fills while the program runs, with no Python object per entry.

Why: a small object kept alive (a stack's tuple, its totals, a dictionary's entry) is put
by Python's small-object allocator wherever the program is allocating at that moment. If
the program fills a hundred megabytes with small objects (dicts, strings) and frees them,
each object the sampler created in between keeps its whole 1 MiB arena resident: a
sampler seeing 20 new stacks during that phase kept 5-10 MiB after the program freed its
memory, and the peak measured later was that much too high. These tables hold integers
and floats in ``array`` buffers instead, which live outside those arenas once past a few
hundred bytes (they start past it); lookups make short-lived objects only.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import CodeType
from typing import Any

_EMPTY = -1
MIN_CAPACITY = 128  # 1 KiB buffers at least: past the small-object size (512 bytes)


def filled(typecode: str, value: float, n: int) -> array.array[Any]:
    """An array of ``n`` times ``value``, allocated at once.

    :param typecode: the array's type (``"q"``, ``"d"``)
    :param value: the value of every item
    :param n: the length
    """
    return array.array(typecode, [value]) * n


def grow(buffer: array.array[Any], length: int) -> None:
    """Makes ``buffer`` at least ``length`` items long, doubling it (the new items 0):
    one reallocation past the small-object size, rarely.

    :param buffer: an array
    :param length: the length it needs
    """
    if length > len(buffer):
        buffer.extend(filled(buffer.typecode, 0, max(length, 2 * len(buffer)) - len(buffer)))


class KeyTable:
    """Interns tuples of integers into dense ids 0, 1, 2...; a hash table with linear
    probing over ``array`` buffers, the keys one after another in one buffer. Every
    buffer is allocated past the small-object size and grows by doubling."""

    def __init__(self) -> None:
        size = MIN_CAPACITY
        self._slots = filled("q", _EMPTY, size)
        self._mask = size - 1
        self._n = 0  # keys
        self._used = 0  # integers of _flat in use
        self._flat = filled("q", 0, 4 * size)  # the keys' integers, one after another
        self._starts = filled("q", 0, size // 2 + 1)  # key i: _flat[starts[i]:starts[i+1]]
        self._hashes = filled("q", 0, size // 2)

    def __len__(self) -> int:
        return self._n

    def find(self, key: Sequence[int]) -> int:
        """The id of ``key``, -1 if it was never added.

        :param key: a tuple of integers (signed, 64 bits)
        """
        h = hash(key)
        slots, hashes, starts, mask = self._slots, self._hashes, self._starts, self._mask
        i = h & mask
        probe = None
        while True:
            sid = slots[i]
            if sid == _EMPTY:
                return -1
            if hashes[sid] == h:
                if probe is None:
                    probe = array.array("q", key)
                if self._flat[starts[sid] : starts[sid + 1]] == probe:
                    return sid
            i = (i + 1) & mask

    def add(self, key: Sequence[int]) -> int:
        """Adds ``key`` (not in the table: see :meth:`find`) and returns its new id.

        :param key: a tuple of integers
        """
        sid, begin = self._n, self._used
        end = begin + len(key)
        grow(self._flat, end)
        self._flat[begin:end] = array.array("q", key)
        self._used = end
        if 2 * (sid + 1) > len(self._slots):  # at most half full: probes stay short
            size = 2 * len(self._slots)
            grow(self._starts, size // 2 + 1)
            grow(self._hashes, size // 2)
            self._slots = filled("q", _EMPTY, size)
            self._mask = size - 1
            for old in range(sid):
                self._place(old)
        self._starts[sid + 1] = end
        self._hashes[sid] = hash(key)
        self._n = sid + 1
        self._place(sid)
        return sid

    def key(self, sid: int) -> tuple[int, ...]:
        """The key of an id.

        :param sid: an id from :meth:`add`
        """
        if not 0 <= sid < self._n:
            raise IndexError(f"no key of id {sid}")
        return tuple(self._flat[self._starts[sid] : self._starts[sid + 1]])

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        """Every key, in id order."""
        return (self.key(sid) for sid in range(self._n))

    def _place(self, sid: int) -> None:
        slots, mask = self._slots, self._mask
        i = self._hashes[sid] & mask
        while slots[i] != _EMPTY:
            i = (i + 1) & mask
        slots[i] = sid


class Totals(Mapping[int, list[float]]):
    """Per id: wall seconds, CPU seconds and a count, in ``array`` buffers that grow
    with the ids (no float object kept per entry). Read as a mapping ``id -> [wall, cpu,
    count]`` of the ids with a sample, in id order (each value made when read)."""

    def __init__(self) -> None:
        self.wall = filled("d", 0.0, MIN_CAPACITY)
        self.cpu = filled("d", 0.0, MIN_CAPACITY)
        self.count = filled("q", 0, MIN_CAPACITY)

    def add(self, sid: int, wall: float, cpu: float) -> None:
        """Adds one sample of ``sid``.

        :param sid: a dense id (>= 0)
        :param wall: its wall seconds
        :param cpu: its CPU seconds
        """
        if sid >= len(self.count):
            for buffer in (self.wall, self.cpu, self.count):
                grow(buffer, sid + 1)
        self.wall[sid] += wall
        self.cpu[sid] += cpu
        self.count[sid] += 1

    def __getitem__(self, sid: int) -> list[float]:
        if not 0 <= sid < len(self.count) or not self.count[sid]:
            raise KeyError(sid)
        return [self.wall[sid], self.cpu[sid], self.count[sid]]

    def __iter__(self) -> Iterator[int]:
        count = self.count
        return (sid for sid in range(len(count)) if count[sid])

    def __len__(self) -> int:
        return len(self.count) - self.count.count(0)


class CodeTable:
    """Code objects by ``id``, kept alive so that their ids stay unique (a stack key is
    made of ids), with no Python object per entry (an ``int`` key per code would be one).
    """

    def __init__(self) -> None:
        self._ids = KeyTable()
        self._codes: list[CodeType | None] = [None] * MIN_CAPACITY

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, code: CodeType) -> None:
        """Keeps ``code`` (once).

        :param code: a code object
        """
        key = (id(code),)
        if self._ids.find(key) < 0:
            index = self._ids.add(key)
            if index >= len(self._codes):
                self._codes.extend([None] * len(self._codes))
            self._codes[index] = code

    def update(self, codes: Iterable[CodeType]) -> None:
        """Keeps each of ``codes``.

        :param codes: code objects
        """
        for code in codes:
            self.add(code)

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, int) and self._ids.find((cid,)) >= 0

    def __getitem__(self, cid: int) -> CodeType:
        index = self._ids.find((cid,))
        code = self._codes[index] if index >= 0 else None
        if code is None:
            raise KeyError(cid)
        return code

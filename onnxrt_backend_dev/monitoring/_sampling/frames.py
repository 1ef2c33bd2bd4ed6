"""The one place that walks Python frames into interned stacks.

Cheap at each sample, decoded once at the end: a stack is a flat tuple of integers,
``id(code), f_lasti`` per frame from the innermost (integers hash fast; ``f_lasti`` is
read as is, where ``f_lineno`` would decode the line table). The code objects are kept
in the table, which also keeps their ids from being reused. Lines and names are found
once per distinct (code, offset), in :meth:`StackTable.decode`.

A sample that came late because a C call held the GIL marks its innermost offset as
*delayed* (stored as ``-1 - f_lasti``): the time then goes to the line of the last call
instruction at or before ``f_lasti`` (the call that held the GIL), not to the line the
interpreter had moved on to.

This is the API the memory attribution (``start_spying_on(stacks=True)``) is meant to
call: :func:`walk` (or :meth:`StackTable.intern_frame`) at each sample,
:meth:`StackTable.decode` once at the end.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from types import CodeType, FrameType

from .._stacks.frames import SampledFrame
from .intern import CodeTable, KeyTable

MAX_DEPTH = 1024  # frames kept per stack, the innermost ones (a deeper recursion is cut)
MAX_STACKS = 50_000  # distinct stacks interned at most (a few MB at worst)
TRUNCATED_DEPTH = 16  # beyond MAX_STACKS, a new stack is kept as its outermost frames

# The one list of this tool's threads inside a measured process: never the code measured.
OWN_THREADS = frozenset({"memory-spy-reader", "memory-spy-stacks", "memory-spy-devices",
                         "onnxrt-sampler", "onnxrt-layout-check", "live-status"})  # fmt: skip

StackKey = tuple[int, ...]  # id(code), offset for each frame, innermost first

_CALLS: dict[CodeType, list[int]] = {}  # code -> offsets of its calls, decoded once
_CALL_OPS: frozenset[int] = frozenset()  # filled on first use: dis is slow to import


def _call_ops() -> frozenset[int]:
    global _CALL_OPS
    if not _CALL_OPS:
        import dis

        _CALL_OPS = frozenset(
            op
            for name, op in dis.opmap.items()
            if name.startswith(("CALL", "PRECALL")) or name in ("SEND", "YIELD_VALUE")
        )
    return _CALL_OPS


def walk(
    frame: FrameType | None,
    codes: dict[int, CodeType] | None,
    max_depth: int = MAX_DEPTH,
    delayed: bool = False,
) -> StackKey:
    """The stack ending at ``frame``, walked with a loop.

    :param frame: the innermost frame
    :param codes: ``id(code) -> code``, completed here (keeps the ids unique); None: not
        kept (a table keeps the codes of the stacks it interns, see
        :meth:`StackTable.intern_frame`)
    :param max_depth: frames kept at most, the innermost ones
    :param delayed: the sample came late: the innermost frame's time goes to its last
        call instruction (see the module's docstring)
    :return: ``id(code), offset`` for each frame, innermost first
    """
    items: list[int] = []
    append = items.append
    left = max_depth
    while frame is not None and left:  # the hot loop of every sample: locals only
        code = frame.f_code
        key = id(code)
        if codes is not None and key not in codes:
            codes[key] = code
        append(key)
        append(frame.f_lasti)
        frame = frame.f_back
        left -= 1
    if delayed and items:
        items[1] = -1 - items[1]
    return tuple(items)


def depth(frame: FrameType | None) -> int:
    """The number of frames from ``frame`` to the outermost one (0 for None).

    :param frame: a frame
    """
    n = 0
    while frame is not None:
        n += 1
        frame = frame.f_back
    return n


def _line_at(code: CodeType, offset: int) -> int:
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno


def call_offset(code: CodeType, offset: int) -> int:
    """The offset of the last call instruction at or before ``offset`` (``offset`` when
    there is none).

    :param code: the code object
    :param offset: an instruction offset (``f_lasti``)
    """
    offsets = _CALLS.get(code)
    if offsets is None:
        import dis

        calls = _call_ops()
        offsets = _CALLS[code] = [i.offset for i in dis.get_instructions(code) if i.opcode in calls]
    i = bisect.bisect_right(offsets, offset)
    return offsets[i - 1] if i else offset


def line_of(code: CodeType, offset: int) -> int:
    """The line of a stored offset: ``f_lasti`` as is, or, for a delayed sample's
    ``-1 - f_lasti``, the line of the call instruction before it.

    :param code: the code object
    :param offset: the stored offset
    :return: the line, the function's first line when unknown
    """
    if offset < 0:
        offset = call_offset(code, -1 - offset)
    return _line_at(code, offset)


def qualified_name(code: CodeType) -> str:
    """``co_qualname`` where the interpreter has it (3.11+), ``co_name`` otherwise.

    :param code: the code object
    """
    name = getattr(code, "co_qualname", None)
    return name if isinstance(name, str) else code.co_name


def decode_key(
    key: StackKey,
    codes: Mapping[int, CodeType] | CodeTable,
    cache: dict[tuple[int, int], SampledFrame] | None = None,
) -> tuple[SampledFrame, ...]:
    """A stack key as frames, outermost first: the one decoding of every collector in
    this process (the sampler's table, the memory ticks, a device probe's peak).

    :param key: from :func:`walk`
    :param codes: ``id(code) -> code`` of the key's codes
    :param cache: ``(id(code), offset) -> frame`` already decoded, completed here
    """
    cache = {} if cache is None else cache
    frames = []
    for i in range(len(key) - 2, -1, -2):
        frame = cache.get((key[i], key[i + 1]))
        if frame is None:
            code = codes[key[i]]
            frame = cache[key[i], key[i + 1]] = SampledFrame(
                qualified_name(code), code.co_filename, code.co_firstlineno,
                line_of(code, key[i + 1]),
            )  # fmt: skip
        frames.append(frame)
    return tuple(frames)


class StackTable:
    """Interned stacks: each distinct stack gets an id, decoded once at the end.

    :param max_stacks: distinct stacks kept at most; beyond, a new stack is interned as
        its outermost :data:`TRUNCATED_DEPTH` frames (counted in :attr:`merged`)
    :param max_depth: frames kept per stack
    """

    def __init__(self, max_stacks: int = MAX_STACKS, max_depth: int = MAX_DEPTH) -> None:
        self.max_stacks = max_stacks
        self.max_depth = max_depth
        self.codes = CodeTable()  # the codes of the stacks interned
        self.merged = 0
        # No Python object per stack (see .intern): the tables a sample adds to while
        # the program allocates must not keep its freed memory resident.
        self._keys = KeyTable()

    def __len__(self) -> int:
        return len(self._keys)

    def intern_frame(self, frame: FrameType | None, delayed: bool = False) -> int:
        """Walks ``frame`` (see :func:`walk`) and interns the stack.

        :param frame: the innermost frame
        :param delayed: see :func:`walk`
        """
        key = walk(frame, None, self.max_depth, delayed)
        index = self._keys.find(key)
        if index >= 0:  # its codes are kept: the ids in the key are theirs
            return index
        found: dict[int, CodeType] = {}
        walk(frame, found, self.max_depth)  # the same frames, now with their codes
        self.codes.update(found.values())
        return self.intern(key)

    def intern(self, key: StackKey) -> int:
        """The id of a stack key, a new one if unseen.

        :param key: from :func:`walk`, its codes in this table's ``codes``
        """
        keys = self._keys
        index = keys.find(key)
        if index >= 0:
            return index
        if len(keys) >= self.max_stacks:
            self.merged += 1
            key = key[-2 * TRUNCATED_DEPTH :]
            index = keys.find(key)
            if index >= 0:
                return index
        return keys.add(key)

    def key(self, sid: int) -> StackKey:
        """The key of a stack id."""
        return self._keys.key(sid)

    def decode(self) -> list[tuple[SampledFrame, ...]]:
        """Every stack as frames, outermost first, in id order (one tuple per id)."""
        cache: dict[tuple[int, int], SampledFrame] = {}
        return [decode_key(key, self.codes, cache) for key in self._keys]

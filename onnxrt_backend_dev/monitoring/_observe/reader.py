"""Reading the Python stacks of another process: interpreters, threads, frames, code
objects, as raw memory (see :mod:`.memory`), with a :class:`.layouts.Layout`.

A sample of a thread is a flat tuple ``(code id, byte offset)`` per frame, the innermost
first: cheap to take, hashed and interned by the observer. A code id is dense and stands
for one code object as read once (name, file, line table: :attr:`StackReader.infos`); a
code object freed and another made at the same address get different ids.

Cheap on purpose, since it runs hundreds of times a second: the reads of one sample are
batched (one system call reads every thread state; one more reads every thread's
innermost frame pointer and its data-stack chunk, where 3.11+ keeps the frames; one more
the identity of every code object on the stacks), and line tables are decoded only when
a view asks for a line.

The program runs while it is read. What was read is checked (a code object has the code
type, an offset falls inside its code, the chain has no cycle and ends), and each
thread's innermost frame pointer is read again after the walk: a stack that moved
meanwhile is read a second time, and if it moved again only the outer frames both reads
agree on are kept (callers do not move while their callee runs), the rest counted as
dropped. Dropping the whole sample instead would bias the profile against code that
calls often.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from .layouts import FRAME_OWNED_BY_CSTACK, Layout
from .linetable import line, line_of
from .memory import Memory, ReadError
from .walk import ADDRESS, COMPLETE, DROPPED, GIL, IDENT, OUTER, STACK, TID

MAX_DEPTH = 1024  # frames walked per thread at most (a deeper stack keeps its innermost)
MAX_THREADS = 4096
MAX_INTERPRETERS = 64
MAX_STRING = 1 << 16
MAX_TABLE = 1 << 22
MAX_CHUNK = 1 << 20  # bytes of a data-stack chunk read at once
MAX_CODES = 1 << 20  # distinct code objects identified at most
REFRESH_INTERPRETERS = 64  # samples between two reads of the interpreter list
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_Q = _U64.unpack_from
_I = _I32.unpack_from


def u64(data: bytes, offset: int) -> int:
    """An unsigned 64-bit little-endian integer at ``offset``."""
    return int(_Q(data, offset)[0])


class CodeInfo:
    """A code object as read: its name, file, first line, its bytecode's size and the
    bytecode itself (to tell what the innermost frame runs), and its line table, whose
    line for each offset asked is found once (see :mod:`.linetable`).

    :param name: its qualified name (``co_qualname`` on 3.11+, ``co_name`` before)
    :param file: ``co_filename``
    :param first_line: ``co_firstlineno``
    :param raw_table: ``co_linetable``
    :param version: the Python version (the table's format)
    :param size: bytes of bytecode (0 unknown)
    :param ops: the bytecode as read once (specialised instructions stay in their family)
    """

    __slots__ = ("_lines", "file", "first_line", "name", "ops", "raw_table", "size", "version")

    def __init__(
        self,
        name: str,
        file: str,
        first_line: int,
        raw_table: bytes,
        version: tuple[int, int],
        size: int = 0,
        ops: bytes = b"",
    ) -> None:
        self.name, self.file, self.first_line, self.raw_table = name, file, first_line, raw_table
        self.version, self.size, self.ops = version, size, ops
        self._lines: dict[int, int] = {}

    def line(self, offset: int) -> int:
        """The line of a byte offset (the first line before the code), found once."""
        found = self._lines.get(offset)
        if found is None:
            lookup = line_of or line  # in C where built
            found = lookup(self.raw_table, self.first_line, offset, self.version[1])
            self._lines[offset] = found
        return found


class ThreadSample(NamedTuple):
    """One thread, read once.

    :param address: its ``PyThreadState``
    :param ident: its Python id (``threading.get_ident()``)
    :param native_id: its kernel id (0 unknown)
    :param frames: ``code id, byte offset`` per frame, innermost first
    :param complete: every frame read consistently
    :param dropped: inner frames left out (the stack moved while read)
    :param gil: it holds the GIL (False where unknown)
    :param outer: the address of its outermost frame (0 unknown)
    """

    address: int
    ident: int
    native_id: int
    frames: tuple[int, ...]
    complete: bool
    dropped: int
    gil: bool
    outer: int = 0


class _Chunk:
    """A copy of the data-stack chunk the frames mostly live in (3.11+), read up to its
    top; the rest of the chunk (up to its size) holds dead frames, never valid."""

    __slots__ = ("data", "dead_end", "end", "start")

    def __init__(self, start: int, data: bytes) -> None:
        self.start = start
        self.data = data
        self.end = start + len(data)
        size = u64(data, 8) if len(data) >= 16 else 0
        self.dead_end = start + size if size > len(data) else self.end


class StackReader:
    """Reads the stacks of one process.

    :param memory: the process's memory
    :param layout: its interpreter's offsets
    :param runtime: the address of ``_PyRuntime``
    :param types: addresses of ``PyCode_Type``, ``PyUnicode_Type``, ``PyBytes_Type`` (by
        name; a missing one is not checked)
    :param pthread_tid: 3.10: the offset of the kernel thread id in glibc's thread
        descriptor (found by :mod:`.verify`), -1 unknown
    :param max_depth: frames walked per thread at most
    """

    def __init__(
        self,
        memory: Memory,
        layout: Layout,
        runtime: int,
        types: dict[str, int] | None = None,
        pthread_tid: int = -1,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.memory = memory
        self.layout = layout
        self.runtime = runtime
        self.types = dict(types or {})
        self.code_type = self.types.get("PyCode_Type", 0)
        self.pthread_tid = pthread_tid
        self.max_depth = max_depth
        self._ids: dict[tuple[int, bytes], int] = {}  # address and identity fields -> id
        self.infos: list[CodeInfo] = []  # by id
        self._gil_address: dict[int, int] = {}
        self._native: dict[int, int] = {}  # 3.10: pthread id -> kernel id
        self._interps: list[int] = []
        self._states: dict[int, list[int]] = {}  # interpreter -> its thread states last seen
        self.reads = 0  # samples taken
        self.names = True  # read threads' names (off when the check could not)
        self._key_index: dict[tuple[int, str], tuple[int, int, int, int]] = {}
        self.torn = 0  # thread reads that moved and were read again
        self.partial = 0  # thread reads kept as their agreed outer frames
        self.failed = 0  # thread reads that gave nothing
        # The walk in C (``_walker.Walker``, given by :func:`.walk.attach_native` when
        # built and checked): it reads the stacks, this reader the code objects it finds
        # (:meth:`learn`), their names and threads'. Its stacks go to this reader's table
        # until :meth:`bind` gives them to another (the observer's record of the process).
        self.native: Any = None
        self.owner: Any = self
        self.keys: dict[tuple[int, ...], int] = {}
        self.key_list: list[tuple[int, ...]] = []
        lay = layout
        self._cframe = "tstate.cframe" in lay
        self._owner_check = lay.version >= (3, 12)
        if self._cframe:
            self._leaf_at = lay["tstate.cframe"]
        elif "tstate.current_frame" in lay:
            self._leaf_at = lay["tstate.current_frame"]
        else:
            self._leaf_at = lay["tstate.frame"]
        self._span = lay.tstate_span + 16
        self._frame_span = max(lay.frame_size, lay.frame_back + 8, lay.frame_code + 8,
                               lay.frame_lasti + 4, lay.frame_instr + 8)  # fmt: skip
        self._name_at = lay["code.qualname"] if "code.qualname" in lay else lay["code.name"]
        fields = [lay["object.type"], lay["bytes.size"], lay["code.firstlineno"],
                  lay["code.filename"], self._name_at, lay["code.linetable"]]  # fmt: skip
        self._sig_span = (min(fields), max(fields) + 8)

    # -- the interpreter and its threads ------------------------------------------------

    def interpreters(self) -> list[int]:
        """The addresses of every interpreter, the main one first (read again every
        :data:`REFRESH_INTERPRETERS` samples).

        :raises ReadError: ``_PyRuntime`` cannot be read
        """
        if self._interps and self.reads % REFRESH_INTERPRETERS:
            return self._interps
        lay = self.layout
        head = u64(self.memory.read(self.runtime + lay["runtime.interpreters_head"], 8), 0)
        out: list[int] = []
        seen: set[int] = set()
        interp = head
        while interp and interp not in seen and len(out) < MAX_INTERPRETERS:
            seen.add(interp)
            out.append(interp)
            try:
                interp = u64(self.memory.read(interp + lay["interp.next"], 8), 0)
            except ReadError:
                break
        out.reverse()  # the list is newest first: the main interpreter is the last
        self._interps = out
        return out

    def _gil_request(self, interp: int) -> tuple[int, int, int] | None:
        """``(address, locked offset, holder offset)`` of the GIL's state."""
        lay = self.layout
        if "runtime.gil_locked" in lay:
            base, locked, holder = (
                self.runtime,
                lay["runtime.gil_locked"],
                lay["runtime.gil_holder"],
            )
        elif "interp.gil" in lay:
            locked, holder = lay["gil.locked"], lay["gil.holder"]
            base = self._gil_address.get(interp, 0)
            if not base:
                try:
                    base = u64(self.memory.read(interp + lay["interp.gil"], 8), 0)
                except ReadError:
                    return None
                self._gil_address[interp] = base
        else:
            return None
        if not base:
            return None
        low = min(locked, holder)
        return base + low, locked - low, holder - low

    def thread_states(self, interp: int, head: int) -> list[tuple[int, bytes]]:
        """The thread states of an interpreter chained from ``head`` and their bytes,
        oldest (main) first."""
        out: list[tuple[int, bytes]] = []
        seen: set[int] = set()
        tstate = head
        while tstate and tstate not in seen and len(out) < MAX_THREADS:
            seen.add(tstate)
            try:
                data = self.memory.read(tstate, self._span)
            except ReadError:
                break
            out.append((tstate, data))
            tstate = u64(data, self.layout["tstate.next"])
        self._states[interp] = [a for a, _ in out]
        out.reverse()
        return out

    def threads(self) -> list[ThreadSample]:
        """Every thread of every interpreter, read now.

        :return: the samples, each interpreter's main thread first
        :raises ReadError: the runtime itself cannot be read (the process is gone)
        """
        if self.native is not None:
            _, _, rows = self.native.sample(False, False)
            if rows is None:
                raise ReadError(self.runtime, 8, "the runtime is unreadable")
            keys = self.owner.key_list
            return [ThreadSample(r[ADDRESS], r[IDENT], r[TID], keys[r[STACK]], r[COMPLETE],
                                 r[DROPPED], r[GIL], r[OUTER]) for r in rows]  # fmt: skip
        self.reads += 1
        out: list[ThreadSample] = []
        for interp in self.interpreters():
            holder, states = self._gil_and_states(interp)
            out.extend(self._samples(states, holder))
        return out

    def _gil_and_states(self, interp: int) -> tuple[int, list[tuple[int, bytes]]]:
        """The GIL's holder (0 if none or unknown) and the thread states, in one read
        when the threads are those seen last time (the list walked anew otherwise)."""
        lay = self.layout
        gil = self._gil_request(interp)
        requests = [(interp + lay["interp.threads_head"], 8)]
        if gil is not None:
            requests.append((gil[0], max(gil[1], gil[2]) + 8))
        known = self._states.get(interp, [])
        requests.extend((a, self._span) for a in known)
        got = self.memory.read_many(requests)
        if got[0] is None:
            raise ReadError(interp, 8, "the interpreter's thread list is unreadable")
        head, holder = u64(got[0], 0), 0
        data = got[1] if gil is not None else None
        if gil is not None and data is not None and _I(data, gil[1])[0]:
            holder = u64(data, gil[2])
        first = 2 if gil is not None else 1
        states = got[first:]
        if known and known[0] == head and all(d is not None for d in states):
            next_at = lay["tstate.next"]
            chain = [u64(d, next_at) for d in states if d is not None]
            if chain[:-1] == known[1:] and chain[-1] == 0:
                return holder, [(a, d) for a, d in zip(known, states, strict=True) if d][::-1]
        return holder, self.thread_states(interp, head)

    def _samples(self, states: list[tuple[int, bytes]], holder: int) -> list[ThreadSample]:
        lay = self.layout
        leaves, chunks = self._leaves_and_chunks(states)
        walks = [self._walk(leaf, chunk) for leaf, chunk in zip(leaves, chunks, strict=True)]
        # One read for what the walks need checked: every code object's identity, and
        # each thread's innermost frame pointer again (did it move meanwhile?).
        codes = list(dict.fromkeys(c for raw, _, _ in walks for c, _ in raw))
        lo, hi = self._sig_span
        requests = [(c + lo, hi - lo) for c in codes]
        requests.extend(self._leaf_requests(states))
        got = self.memory.read_many(requests)
        ids = self._identify_all(codes, got[: len(codes)])
        again = [u64(raw, 0) if raw is not None else -1 for raw in got[len(codes) :]]
        tid_at = lay["tstate.thread_id"]
        native_at = lay.offsets.get("tstate.native_thread_id", -1)
        out = []
        for i, (address, data) in enumerate(states):
            raw, complete, outer = walks[i]
            frames, valid = self._resolve(raw, complete, ids)
            dropped = 0
            if not valid or again[i] != leaves[i]:
                frames, complete, dropped = self._read_again(address, frames)
            ident = u64(data, tid_at)
            native = u64(data, native_at) if native_at >= 0 else self._native_of(ident)
            out.append(ThreadSample(address, ident, native, frames, complete, dropped,
                                    holder == address, outer if complete else 0))  # fmt: skip
        return out

    def _leaf_requests(self, states: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
        """Where each thread's innermost frame pointer is: in its thread state (3.10,
        3.13), or in its C-level frame (3.11-3.12: the pointer read from the state just
        before; if that C frame has gone meanwhile, what is there now differs from the
        frame walked, and the thread is read again)."""
        if not self._cframe:
            return [(a + self._leaf_at, 8) for a, _ in states]
        at = self.layout["cframe.current_frame"]
        return [(max(u64(d, self._leaf_at), 1) + at, 8) for _, d in states]

    def _leaves_and_chunks(
        self, states: list[tuple[int, bytes]]
    ) -> tuple[list[int], list[_Chunk | None]]:
        """Every thread's innermost frame and data-stack chunk, in one read."""
        lay = self.layout
        requests: list[tuple[int, int]] = []
        plan: list[tuple[int, int]] = []  # per thread: index of its leaf read, chunk read
        chunk_at = lay.offsets.get("tstate.datastack_chunk", -1)
        for _, data in states:
            leaf_i = chunk_i = -1
            if self._cframe:
                cframe = u64(data, self._leaf_at)
                if cframe:
                    leaf_i = len(requests)
                    requests.append((cframe + lay["cframe.current_frame"], 8))
            if chunk_at >= 0:
                chunk, top = u64(data, chunk_at), u64(data, chunk_at + 8)
                if chunk and chunk < top and top - chunk <= MAX_CHUNK:
                    chunk_i = len(requests)
                    requests.append((chunk, top - chunk))
            plan.append((leaf_i, chunk_i))
        got = self.memory.read_many(requests) if requests else []
        leaves: list[int] = []
        chunks: list[_Chunk | None] = []
        for (_, data), (leaf_i, chunk_i) in zip(states, plan, strict=True):
            if self._cframe:
                raw = got[leaf_i] if leaf_i >= 0 else None
                leaves.append(u64(raw, 0) if raw is not None else 0)
            else:
                leaves.append(u64(data, self._leaf_at))
            raw = got[chunk_i] if chunk_i >= 0 else None
            chunks.append(_Chunk(requests[chunk_i][0], raw) if raw is not None else None)
        return leaves, chunks

    def _read_alone(self, tstate: int, data: bytes) -> tuple[tuple[int, ...], bool]:
        """One thread's frames from its state's bytes, and whether they are all valid and
        its innermost frame has not moved meanwhile (a :class:`ReadError` passes)."""
        (leaf,), (chunk,) = self._leaves_and_chunks([(tstate, data)])
        raw, complete, _ = self._walk(leaf, chunk)
        frames, valid = self._resolve(raw, complete, self.codes([c for c, _ in raw]))
        # Its innermost frame pointer now, read afresh (the thread state first, then, on
        # 3.11-3.12, its C-level frame).
        (fresh,) = self.memory.read_many([(tstate, self._span)])
        (now,) = self.memory.read_many(self._leaf_requests([(tstate, fresh or b"\0" * self._span)]))
        return frames, valid and now is not None and u64(now, 0) == leaf

    def _read_again(self, tstate: int, first: tuple[int, ...]) -> tuple[tuple[int, ...], bool, int]:
        """A stack that moved under its read (``first``), read once more alone: where the
        two reads disagree, only their common outer frames are kept."""
        self.torn += 1
        try:
            frames, whole = self._read_alone(tstate, self.memory.read(tstate, self._span))
        except ReadError:
            self.failed += 1
            return (), False, 0
        if whole:
            return frames, True, 0
        agreed = _agreed_outer(first, frames)
        self.partial += 1
        return agreed, False, max(len(frames) - len(agreed), 0) // 2

    def _native_of(self, ident: int) -> int:
        """3.10: the kernel id, read from glibc's thread descriptor (``pthread_t`` is its
        address) at the offset :mod:`.verify` found."""
        if self.pthread_tid < 0 or not ident:
            return 0
        native = self._native.get(ident)
        if native is None:
            try:
                native = _I(self.memory.read(ident + self.pthread_tid, 4), 0)[0]
            except ReadError:
                native = 0
            self._native[ident] = native
        return native

    # -- frames ---------------------------------------------------------------------------

    def _walk(self, leaf: int, chunk: _Chunk | None) -> tuple[list[tuple[int, int]], bool, int]:
        """The frames from ``leaf`` out as read: ``(code address, instruction pointer or
        lasti)``, innermost first; whether the chain was whole; the outermost frame's
        address. A walk stops at the first frame that cannot be one."""
        lay = self.layout
        raw_frames: list[tuple[int, int]] = []
        seen: set[int] = set()
        addr = leaf
        size = self._frame_span
        back_at, code_at = lay.frame_back, lay.frame_code
        instr_at, owner_at, lasti_at = lay.frame_instr, lay.frame_owner, lay.frame_lasti
        owner_check = self._owner_check
        complete = True
        outer = 0
        read = self.memory.read
        if chunk is not None:
            c_start, c_end, c_data = chunk.start, chunk.end - size, chunk.data
            dead_start, dead_end = chunk.end, chunk.dead_end
        else:
            c_start, c_end, c_data, dead_start, dead_end = 1, 0, b"", 1, 0
        try:
            while addr:
                if addr in seen or dead_start <= addr < dead_end:
                    complete = False  # a cycle, or a dead frame: the chain moved
                    break
                if len(seen) >= self.max_depth:
                    break  # deeper than kept: the innermost frames stand for the stack
                seen.add(addr)
                if c_start <= addr <= c_end:
                    base, raw = addr - c_start, c_data
                    back = _Q(raw, base + back_at)[0]
                    if c_start <= back <= c_end and back >= addr:
                        complete = False  # callers sit below their callees in a chunk
                        break
                else:
                    base, raw = 0, read(addr, size)
                    back = _Q(raw, base + back_at)[0]
                if owner_check and raw[base + owner_at] == FRAME_OWNED_BY_CSTACK:
                    addr = back
                    continue
                code = _Q(raw, base + code_at)[0]
                outer = addr
                if instr_at >= 0:
                    raw_frames.append((code, _Q(raw, base + instr_at)[0]))
                else:
                    raw_frames.append((code, _I(raw, base + lasti_at)[0]))
                addr = back
        except ReadError:
            complete = False
        return raw_frames, complete, outer

    def resolve(self, raw_frames: list[tuple[int, int]]) -> tuple[tuple[int, ...], bool]:
        """Frames read by someone else (the allocation shim, in the program) as this
        reader's: ``(code id, byte offset)`` pairs, innermost first. The code objects
        are identified as they are now: one freed since the frames were read, and
        another made at its address, is the caller's to tell.

        :param raw_frames: ``(code object address, instruction pointer or lasti)`` pairs,
            innermost first, as the layout's frames hold them
        :return: the frames and whether every one was valid (the walk stops at the
            first that is not)
        """
        ids = self.codes([c for c, _ in raw_frames])
        return self._resolve(raw_frames, True, ids)

    def offset(self, code: int, where: int) -> int:
        """The byte offset in its code object of a frame's instruction, as
        :meth:`resolve` computes it.

        :param code: the code object's address
        :param where: the frame's instruction pointer (3.11+) or lasti (3.10)
        """
        if self.layout.frame_instr >= 0:
            return where - code - self.layout.code_adaptive
        return 2 * where

    def _resolve(
        self, raw_frames: list[tuple[int, int]], complete: bool, ids: dict[int, int]
    ) -> tuple[tuple[int, ...], bool]:
        out: list[int] = []
        adaptive, infos = self.layout.code_adaptive, self.infos
        by_pointer = self.layout.frame_instr >= 0
        for code, where in raw_frames:
            cid = ids.get(code, -1)
            if cid < 0:
                return tuple(out), False
            offset = where - code - adaptive if by_pointer else 2 * where
            size = infos[cid].size
            if offset < -2 or (size and offset >= size):
                return tuple(out), False
            out.append(cid)
            out.append(offset)
        return tuple(out), complete

    # -- threads' names -------------------------------------------------------------------

    def thread_name(self, sample: ThreadSample) -> str:
        """The name of a :class:`threading.Thread` (its ``_name``), read from the ``self``
        of its outermost frame, ``Thread._bootstrap``; '' for other threads (the main
        one, threads started from C) or when unreadable.

        :param sample: the thread, read with its outermost frame
        """
        if not self.names or not sample.frames or not sample.outer:
            return ""
        info = self.infos[sample.frames[-2]]
        if info.name.rsplit(".", 1)[-1] != "_bootstrap" or not info.file.endswith("threading.py"):
            return ""
        try:
            this = u64(self.memory.read(sample.outer + self.layout["frame.localsplus"], 8), 0)
            value = self.attribute(this, "_name") if this else 0
        except ReadError:
            return ""
        text = self.string(value) if value else None
        return text or ""

    def attribute(self, obj: int, name: str) -> int:
        """The address of an attribute stored in an object's ``__dict__`` (its inline or
        split values, or its dict), 0 when not found.

        :param obj: the object
        :param name: the attribute
        :raises ReadError: unreadable
        """
        lay = self.layout
        type_ptr = u64(self.memory.read(obj + lay["object.type"], 8), 0)
        span = max(lay["type.flags"], lay["type.basicsize"], lay["type.dictoffset"],
                   lay["heaptype.cached_keys"]) + 8  # fmt: skip
        tdata = self.memory.read(type_ptr, span)
        flags = u64(tdata, lay["type.flags"])
        cached = u64(tdata, lay["heaptype.cached_keys"])
        version = lay.version
        if version >= (3, 13) and flags & (1 << 2):  # inline values after the object
            values = obj + u64(tdata, lay["type.basicsize"])
            if self.memory.read(values + lay["values.valid"], 1)[0] and cached:
                return self._lookup(cached, name, values + lay["values.values"])
        if version >= (3, 11) and flags & (1 << 4):  # a managed dict
            if version == (3, 11):
                values = u64(self.memory.read(obj - 32, 8), 0)
                if values and cached:
                    return self._lookup(cached, name, values + lay["values.values"])
            pointer = u64(self.memory.read(obj - 24, 8), 0)
            if version == (3, 12) and pointer & 1:  # values - 1 (odd): the values, not a dict
                return self._lookup(cached, name, pointer + 1 + lay["values.values"])
            return self._dict_lookup(pointer, name)
        offset = _Q(tdata, lay["type.dictoffset"])[0]
        if 0 < offset < 1 << 16:
            return self._dict_lookup(u64(self.memory.read(obj + offset, 8), 0), name)
        return 0

    def _dict_lookup(self, d: int, name: str) -> int:
        if not d:
            return 0
        lay = self.layout
        head = self.memory.read(d, lay["dict.values"] + 8)
        keys, values = u64(head, lay["dict.keys"]), u64(head, lay["dict.values"])
        return self._lookup(keys, name, values)

    def _lookup(self, keys: int, name: str, values: int) -> int:
        """``name``'s value in a dict's keys (its own entry, or ``values[i]`` of a split
        dict's values array)."""
        if not keys:
            return 0
        found = self._key_index.get((keys, name))
        if found is None:
            found = self._key_index[(keys, name)] = self._find_key(keys, name)
        index, entries, size, value_at = found
        if index < 0:
            return 0
        if values:
            return u64(self.memory.read(values + 8 * index, 8), 0)
        return u64(self.memory.read(entries + size * index + value_at, 8), 0)

    def _find_key(self, keys: int, name: str) -> tuple[int, int, int, int]:
        """``(index, entries address, entry size, value offset)`` of a key."""
        lay = self.layout
        head = self.memory.read(keys, lay["keys.indices"])
        nentries = min(_Q(head, lay["keys.nentries"])[0], 256)
        if lay.version >= (3, 11):
            index_bytes = 1 << head[lay["keys.log2_index_bytes"]]
            general = head[lay["keys.kind"]] == 0
        else:
            size = _Q(head, lay["keys.size"])[0]
            index_bytes = size * (1 if size <= 0xFF else 2 if size <= 0xFFFF else 4)
            general = True
        entries = keys + lay["keys.indices"] + index_bytes
        entry, key_at, value_at = (24, 8, 16) if general else (16, 0, 8)
        data = self.memory.read(entries, nentries * entry) if nentries > 0 else b""
        for i in range(nentries):
            key = u64(data, i * entry + key_at)
            if key and self.string(key) == name:
                return i, entries, entry, value_at
        return -1, entries, entry, value_at

    # -- code objects ---------------------------------------------------------------------

    def codes(self, addresses: Sequence[int]) -> dict[int, int]:
        """The ids of code objects (read when new), checked at every call: the fields
        that make a code's identity (type, size, first line, name, file, line table) are
        read for all of them in one system call and compared with what was seen.

        Why every time: code objects are freed (a module's, once imported) and the next
        ones made at the same addresses (the program's own functions); a cache trusted
        by address alone put an imported module's name on the program's frames.

        :param addresses: the objects' addresses
        :return: address -> id, -1 where it is not a code object
        """
        lo, hi = self._sig_span
        distinct = list(dict.fromkeys(addresses))
        return self._identify_all(
            distinct, self.memory.read_many([(a + lo, hi - lo) for a in distinct])
        )

    def learn(self, address: int, head: bytes) -> tuple[int, int]:
        """A code object the C walk found and does not know (new, or its identity
        changed): read here once, given an id.

        :param address: its address
        :param head: the bytes of its identity fields, as :meth:`codes` reads them
        :return: its id (-1: not a code object) and its bytecode's size in bytes
        """
        lo, hi = self._sig_span
        if len(head) != hi - lo:
            return -1, 0
        cid = self._identify_all([address], [head])[address]
        return cid, (self.infos[cid].size if cid >= 0 else 0)

    def intern(self, frames: tuple[int, ...]) -> int:
        """The id of a stack the C walk read (until :meth:`bind`).

        :param frames: ``code id, byte offset`` pairs, innermost first
        """
        sid = self.keys.get(frames)
        if sid is None:
            sid = self.keys[frames] = len(self.key_list)
            self.key_list.append(frames)
        return sid

    def bind(self, owner: Any) -> None:
        """Gives the C walk's stacks to another table from now on.

        :param owner: what interns them (its ``intern`` and ``key_list``: the observer's
            record of the process)
        """
        self.owner = owner
        self.native.set_interner(owner.intern)

    def counts(self) -> tuple[int, int, int]:
        """Stack reads that moved and were read again, kept as their outer frames, that
        gave nothing: this reader's and the C walk's."""
        torn, partial, failed = self.torn, self.partial, self.failed
        if self.native is not None:
            more = self.native.counts
            torn, partial, failed = torn + more[0], partial + more[1], failed + more[2]
        return torn, partial, failed

    def _identify_all(self, addresses: list[int], heads: list[bytes | None]) -> dict[int, int]:
        """The ids of code objects given the bytes of their identity fields."""
        out: dict[int, int] = {}
        known = self._ids
        for address, head in zip(addresses, heads, strict=True):
            if head is None:
                out[address] = -1
                continue
            key = (address, head)
            cid = known.get(key)
            if cid is None:
                cid = self._identify(address, head)
                if len(known) > 4 * MAX_CODES:  # a program making code without end
                    known.clear()
                known[key] = cid
            out[address] = cid
        return out

    def _identify(self, address: int, head: bytes) -> int:
        """A new code object (or not one): read, given an id."""
        lay = self.layout
        lo = self._sig_span[0]
        if self.code_type and u64(head, lay["object.type"] - lo) != self.code_type:
            return -1
        key = (
            address,
            u64(head, self._name_at - lo),
            u64(head, lay["code.filename"] - lo),
            u64(head, lay["code.linetable"] - lo),
            _I(head, lay["code.firstlineno"] - lo)[0],
            u64(head, lay["bytes.size"] - lo),  # 3.11+: code units (a var-size object)
        )
        info = self._read_code(key)
        if info is None or len(self.infos) >= MAX_CODES:
            return -1
        self.infos.append(info)
        return len(self.infos) - 1

    def _read_code(self, key: tuple[int, ...]) -> CodeInfo | None:
        """A code object's name, file, line table and bytecode, in two system calls (the
        objects' heads, then their contents and the bytecode; 3.10's bytecode, a bytes
        object, has its head read in one more)."""
        address, name_ptr, file_ptr, table_ptr, first_line, units = key
        if first_line < 0 or not (name_ptr and file_ptr and table_ptr):
            return None
        lay = self.layout
        str_head, bytes_head = lay["unicode.compact_size"], lay["bytes.data"]
        heads = [(name_ptr, str_head), (file_ptr, str_head), (table_ptr, bytes_head)]
        if lay.code_adaptive < 0:
            heads.append((address + lay["code.code"], 8))
        elif 2 * units > MAX_TABLE:
            return None
        got = self.memory.read_many(heads)
        spans = [self._string_span(name_ptr, got[0]), self._string_span(file_ptr, got[1]),
                 self._bytes_span(table_ptr, got[2])]  # fmt: skip
        if lay.code_adaptive >= 0:
            spans.append((address + lay.code_adaptive, 2 * units, "bytes"))
        elif got[3] is not None:  # 3.10: a bytes object (its bytecode unread: none known)
            code_ptr = u64(got[3], 0)
            if not code_ptr:
                return None
            (head,) = self.memory.read_many([(code_ptr, bytes_head)])
            spans.append(self._bytes_span(code_ptr, head))
        if any(span is None for span in spans):
            return None
        wanted = [(a, n) for a, n, _ in spans if n]  # type: ignore[misc]
        contents = iter(self.memory.read_many(wanted))
        parts: list[Any] = []
        for _, n, encoding in spans:  # type: ignore[misc]
            data = next(contents) if n else b""
            if data is None:
                return None
            parts.append(data if encoding == "bytes" else data.decode(encoding, "replace"))
        name, file, table, *rest = parts
        ops = rest[0] if rest else b""
        return CodeInfo(name, file, first_line, table, lay.version, len(ops), ops)

    def _string_span(self, address: int, head: bytes | None) -> tuple[int, int, str] | None:
        """Where a compact ``str`` object's text is, given its head: ``(address, bytes,
        encoding)``, None if it is not one."""
        if head is None:
            return None
        lay = self.layout
        str_type = self.types.get("PyUnicode_Type", 0)
        if str_type and u64(head, lay["object.type"]) != str_type:
            return None
        length = u64(head, lay["unicode.length"])
        state = _U32.unpack_from(head, lay["unicode.state"])[0]
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or length > MAX_STRING or kind not in (1, 2, 4):
            return None
        if ascii_:
            return address + lay["unicode.ascii_size"], length, "ascii"
        encoding = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return address + lay["unicode.compact_size"], length * kind, encoding

    def _bytes_span(self, address: int, head: bytes | None) -> tuple[int, int, str] | None:
        """Where a ``bytes`` object's content is, given its head, None if it is not one
        (or too big)."""
        if head is None:
            return None
        lay = self.layout
        bytes_type = self.types.get("PyBytes_Type", 0)
        if bytes_type and u64(head, lay["object.type"]) != bytes_type:
            return None
        size = u64(head, lay["bytes.size"])
        return (address + lay["bytes.data"], size, "bytes") if size <= MAX_TABLE else None

    def string(self, address: int) -> str | None:
        """A ``str`` object's text, None if it is not a compact string.

        :param address: the object's address
        """
        if not address:
            return None
        try:
            span = self._string_span(
                address, self.memory.read(address, self.layout["unicode.compact_size"])
            )
            if span is None:
                return None
            data = self.memory.read(span[0], span[1]) if span[1] else b""
        except ReadError:
            return None
        return data.decode(span[2], "replace")


def _agreed_outer(first: Sequence[int], second: Sequence[int]) -> tuple[int, ...]:
    """The outer frames two reads of a stack agree on (both innermost first)."""
    a, b = len(first), len(second)
    n = 0
    while n + 2 <= min(a, b) and first[a - n - 2 : a - n] == second[b - n - 2 : b - n]:
        n += 2
    return tuple(second[b - n :]) if n else ()

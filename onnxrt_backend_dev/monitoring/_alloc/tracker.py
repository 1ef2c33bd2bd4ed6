"""The observer's side of allocation tracking: at each of its samples, the new records of
the shim's ring in the program, their Python stacks resolved with the observer's own
stack reader (the code objects read from the program's memory, interned in the same
stack table as the time samples), their caller mapped to a native library, all folded
into an :class:`.estimate.Estimator`.

Nothing runs in the program but the shim; nothing here writes into it.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from typing import Any

from .._errors import RingError
from .._observe.elf import ElfError, symbols_of
from .._observe.memory import Memory, ReadError, open_memory
from .._observe.process import load_base, mappings
from .estimate import NO_STACK, Estimator
from .ring import (
    FLAG_FINALIZING,
    FLAG_NO_THREAD,
    KIND_ALLOC,
    KIND_FREE,
    KIND_PEAK,
    STATE_EXITING,
    SYMBOL,
    Header,
    Record,
    RingReader,
    teller,
)

MAX_PENDING = 200_000  # records kept while the program's interpreter is not readable yet
MAX_RESOLVED = 1 << 16  # raw stacks remembered with their stack id
MAPS_EVERY = 400  # polls between two reads of the program's mappings (2 s at 5 ms)
OPEN_TRIES = 200  # samples the shim may take to appear in the program's mappings
NO_LIBRARY = -1
MAX_OWN = 64 << 20  # the most the shim's own data can be (untrusted: read from the program)


class AllocTracker:
    """Follows the allocations of one process through the shim's ring.

    :param pid: the process
    :param shim: the shim's file, as the program maps it
    :param threshold: an allocation is temporary when at most this many others of its
        thread came before its free
    :param memory: the process's memory (``open_memory(pid)`` by default)
    """

    def __init__(
        self, pid: int, shim: str, threshold: int = 1, memory: Memory | None = None
    ) -> None:
        self.pid = pid
        self.shim = shim
        self.threshold = threshold
        self.memory = memory
        self.reader: RingReader | None = None
        self.estimator: Estimator | None = None
        self.header: Header | None = None  # the last one read
        self.why = ""  # why nothing was tracked, when nothing was
        self.tries = 0
        self.failed = False
        self.pending: list[Record] = []
        self.dropped_pending = 0
        self.libraries: list[str] = []  # library id -> path
        self._library_ids: dict[str, int] = {}
        self._spans: list[tuple[int, int, str]] = []  # executable mappings, sorted
        self._starts: list[int] = []
        self._maps_read_at = -1  # the poll the mappings were last read at
        self.polls = 0
        self.preloaded = ""  # an allocator the user preloads, for the notes
        self._resolved: dict[tuple[int, ...], int] = {}  # a record's raw frames -> stack id
        self._codes: dict[tuple[int, int], int] = {}  # (code object, check) -> code id
        self.sites: list[tuple[int, int]] = []  # call site id -> (caller, caller's caller)
        self._sites: dict[tuple[int, int], int] = {}
        self._sites_mapped = 0  # call sites known when the mappings were last read
        self._maps_at_exit = False

    # -- opening ---------------------------------------------------------------------

    def _open(self) -> None:
        """Finds the ring in the program: the shim's mapping and its symbol."""
        self.tries += 1
        try:
            maps = mappings(self.pid)
        except OSError:
            return
        base = load_base(maps, self.shim)
        if base is None:
            if self.tries >= OPEN_TRIES or _loaded(maps):
                self.failed = True
                self.why = (
                    "the shim was not loaded in the program (a statically linked "
                    "executable, or one that ignores LD_PRELOAD)"
                )
            return
        try:
            syms = symbols_of(self.shim, [SYMBOL])
        except (OSError, ElfError) as e:
            self.failed, self.why = True, f"the shim's symbols cannot be read: {e}"
            return
        if SYMBOL not in syms.symbols:
            self.failed, self.why = True, "the shim has no ring (another version of it)"
            return
        tell = None
        if self.memory is None:
            memory: Memory = open_memory(self.pid)
            with contextlib.suppress(OSError):
                tell = teller(self.pid)
        else:
            memory = self.memory
        address = base - syms.base_vaddr + syms.symbols[SYMBOL]
        self.reader = RingReader(memory, address, self.pid, tell)

    # -- each sample -----------------------------------------------------------------

    def sample(self, record: Any, t: float) -> None:
        """Reads what the shim wrote since the last sample (the observer's hook).

        :param record: the process's :class:`.._observe.observer.ProcessRecord`
        :param t: the sample's time
        """
        if self.failed:
            return
        if self.reader is None:
            self._open()
            if self.reader is None:
                return
        try:
            records = self.reader.poll()
        except ReadError:
            return  # gone, or not yet: the next sample tells
        except RingError as e:
            self.tries += 1
            if not e.starting or self.tries >= OPEN_TRIES:
                self.failed, self.why = True, str(e)
            return
        self.polls += 1
        self.header = self.reader.header
        if self.header is not None and 0 <= self.header.own <= MAX_OWN:
            record.tool_rss = float(self.header.own)
        if self.estimator is None and self.header is not None:
            self.estimator = Estimator(float(self.header.mean), self.threshold)
        if records:
            self._take(record, records)
        self._maps_due()

    def _take(self, record: Any, records: list[Record]) -> None:
        stacks = record.reader
        if stacks is None and record.opener is not None:  # its interpreter not read yet
            room = MAX_PENDING - len(self.pending)
            self.pending.extend(records[:room])
            self.dropped_pending += max(len(records) - room, 0)
            return
        if self.pending:
            records = [*self.pending, *records]
            self.pending = []
        for rec in records:
            self._fold(record, rec)

    def _fold(self, record: Any, rec: Record) -> None:
        est = self.estimator
        assert est is not None
        t = rec.time_ns / 1e9
        if rec.kind == KIND_ALLOC:
            sid = self._stack(record, rec)
            if rec.tid != record.pid and sid >= 0:  # a pool's thread: see _waited_for
                sid = _waited_for(record, sid)
            final = bool(rec.flags & FLAG_FINALIZING)
            key = (sid, self._caller_site(rec))
            est.alloc(rec.order, t, key, rec.size, rec.address, rec.tid, rec.nallocs, final)
        elif rec.kind == KIND_FREE:
            final = bool(rec.flags & FLAG_FINALIZING)
            est.free(rec.order, t, rec.address, rec.tid, rec.nallocs, final)
        elif rec.kind == KIND_PEAK:
            est.peak(rec.order, t, float(rec.live))

    def _stack(self, record: Any, rec: Record) -> int:
        """The stack id of a record's frames in the process's table, ``NO_STACK`` when
        it has none (a native thread) or they cannot be read. The same frames (the same
        code objects by address and check, the same instructions: a loop allocating)
        are resolved once."""
        reader = record.reader
        if not rec.frames or rec.flags & FLAG_NO_THREAD or reader is None:
            return NO_STACK
        sid = self._resolved.get(rec.frames)
        if sid is None:
            if len(self._resolved) >= MAX_RESOLVED:
                self._resolved.clear()
            sid = self._resolved[rec.frames] = self._resolve(record, rec)
        return sid

    def _resolve(self, record: Any, rec: Record) -> int:
        reader = record.reader
        pairs, checks = decode_frames(rec.frames, reader.layout.frame_instr >= 0)
        known = self._codes
        cids = [
            known.get((code, check), -1) for (code, _), check in zip(pairs, checks, strict=True)
        ]
        if min(cids) >= 0:  # every code object seen before, by address and check
            frames: list[int] = []
            for (code, where), cid in zip(pairs, cids, strict=True):
                frames.append(cid)
                frames.append(reader.offset(code, where))
            return record.intern(tuple(frames))
        found, _complete = reader.resolve(pairs)
        # A code object freed since the record, and another made at its address: the
        # check (its first line and size, as the shim read them) tells; that frame goes.
        wrong = _mismatches(reader.infos, found, checks)
        kept: list[int] = []
        for i in range(0, len(found), 2):
            if i // 2 not in wrong:
                kept.extend(found[i : i + 2])
                if len(known) < MAX_RESOLVED:
                    known[pairs[i // 2][0], checks[i // 2]] = found[i]
        return record.intern(tuple(kept)) if kept else NO_STACK

    # -- native libraries ------------------------------------------------------------
    # A record names the native addresses that called the allocator; which library they
    # belong to is found from the program's mappings, read when it exits (every library
    # then loaded) and every few seconds (a program killed before), not at every new
    # address (a pandas import maps dozens of libraries: /proc/PID/maps read each time
    # cost the observer more than the records).

    def _caller_site(self, rec: Record) -> int:
        """The id of the allocation's native call site: ``(caller, the caller's caller)``."""
        return _intern(self._sites, self.sites, (rec.caller, rec.caller2))

    def site_libraries(self) -> list[int]:
        """Each call site's library id (``NO_LIBRARY`` unknown): the caller's library, or
        its caller's when the caller is a wrapper (``operator new``, ``strdup``)."""
        out = []
        for caller, caller2 in self.sites:
            lid = self._library(caller)
            if 0 <= lid < len(self.libraries) and caller2 and _wrapper(self.libraries[lid]):
                outer = self._library(caller2)
                lid = outer if outer != NO_LIBRARY else lid
            out.append(lid)
        return out

    def _library(self, address: int) -> int:
        """The id of the file mapped at a code address (``NO_LIBRARY`` unknown)."""
        path = self._span_of(address) if address else None
        return NO_LIBRARY if path is None else _intern(self._library_ids, self.libraries, path)

    def _maps_due(self) -> None:
        """Reads the program's mappings when it exits, and every few seconds."""
        header = self.header
        exiting = header is not None and bool(header.state & STATE_EXITING)
        if exiting and not self._maps_at_exit:
            self._maps_at_exit = True
            self._read_maps()
        elif len(self.sites) > self._sites_mapped and (
            self._maps_read_at < 0 or self.polls - self._maps_read_at >= MAPS_EVERY
        ):
            self._read_maps()

    def _span_of(self, address: int) -> str | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0:
            start, end, path = self._spans[i]
            if start <= address < end:
                return path
        return None

    def _read_maps(self) -> None:
        self._maps_read_at = self.polls
        self._sites_mapped = len(self.sites)
        try:
            maps = mappings(self.pid)
        except OSError:
            return
        spans = sorted((m.start, m.end, m.path) for m in maps if "x" in m.perms and m.path)
        self._spans = spans
        self._starts = [s[0] for s in spans]

    # -- at the end ------------------------------------------------------------------

    def lost(self) -> int:
        """Records lost: lapped in the ring, or not kept while waiting for the stacks."""
        lapped = self.reader.lost if self.reader is not None else 0
        return lapped + self.dropped_pending


def _intern(ids: dict[Any, int], items: list[Any], item: Any) -> int:
    """The id of ``item``: its index in ``items``, where it is added when new."""
    found = ids.get(item)
    if found is None:
        found = ids[item] = len(items)
        items.append(item)
    return found


def _waited_for(record: Any, sid: int) -> int:
    """A stack of a thread other than the main one running library code only (pandas
    3's read_csv parses in worker threads) stands for the user's line waiting for it: the
    main thread's stack now, when it holds the user's code; else the stack itself."""
    from .._observe.observer import has_user_code

    if has_user_code(record, record.key_list[sid]):
        return sid
    main = next((th for th in record.threads.values() if th.is_main), None)
    if (
        main is None
        or main.last_sid < 0
        or not has_user_code(record, record.key_list[main.last_sid])
    ):
        return sid
    return int(main.last_sid)


def _mismatches(infos: Any, frames: tuple[int, ...], checks: list[int]) -> set[int]:
    """The frames whose code object is not the one the shim saw (another one made at its
    address since: its first line and size differ)."""
    return {
        i // 2
        for i in range(0, len(frames), 2)
        if code_check(infos[frames[i]].first_line, infos[frames[i]].size) != checks[i // 2]
    }


WRAPPERS = ("libstdc++", "libc++", "libc.so", "libc-", "libgcc_s")


def _wrapper(path: str) -> bool:
    """A library whose allocation calls are made for its callers (the C++ runtime's
    ``operator new``, the C library's ``strdup``)."""
    return os.path.basename(path).startswith(WRAPPERS)


def code_check(first_line: int, size: int) -> int:
    """The shim's check of a code object: its first line and size in bytes (see
    ``frame_word`` in shim.c).

    :param first_line: ``co_firstlineno``
    :param size: bytes of bytecode
    """
    return ((first_line & 0xFFFFFFFF) * 65599 + size) & 0xFFFFFFFF


def decode_frames(
    raw: tuple[int, ...], by_pointer: bool
) -> tuple[list[tuple[int, int]], list[int]]:
    """A record's frames as the stack reader takes them, and their checks.

    :param raw: ``(code object, word)`` pairs, innermost first (see ``frame_word``)
    :param by_pointer: the layout's frames hold an instruction pointer (3.11+), not lasti
    :return: ``(code object, instruction pointer or lasti)`` pairs and one check each
    """
    pairs: list[tuple[int, int]] = []
    checks: list[int] = []
    for i in range(0, len(raw) - 1, 2):
        code, word = raw[i], raw[i + 1]
        low = word & 0xFFFFFFFF
        lasti = low - (1 << 32) if low >= 1 << 31 else low  # signed
        pairs.append((code, code + low if by_pointer else lasti))
        checks.append(word >> 32)
    return pairs, checks


def _loaded(maps: list[Any]) -> bool:
    """Whether the dynamic loader is done (the C library is mapped): a shim not mapped
    by then is not coming."""
    names = {os.path.basename(m.path) for m in maps}
    return any(n.startswith(("libc.so", "libc-")) for n in names)

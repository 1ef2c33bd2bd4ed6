"""The ticks' way to the flight recorder, another process: framed messages on a pipe.

A message is a marshalled tuple (both ends run the same interpreter; marshal is fast
enough to call from a signal handler), cut into chunks of at most ``PIPE_BUF`` bytes,
each written by one ``write``: Linux writes such a chunk whole or not at all, so the
program's forked children (a ``multiprocessing`` pool) write into the same pipe without
their chunks mixing. A chunk is its payload's size (4 bytes), the writer's pid (4), a
flag (1: more chunks follow) and the payload. Messages:
``("F", fid, frame)`` a frame (function, file, first line, line), ``("S", sid, fids)`` a
stack as frame ids (outermost first: a deep recursion costs a few bytes per frame),
``("T", t, rss, hwm, sid)`` a tick, ``("M", {...})``
facts known at the start, ``("E", {...})`` the end, sent once the program is over. What
is read is checked (types, sizes): a bad frame ends the reading, what came before stays.

The writer never blocks the program: a full pipe keeps at most ``MAX_PENDING`` bytes
waiting, then drops ticks (counted). The reader folds ticks into an
:class:`.aggregate.Aggregator` as they come, so its memory does not grow with time.
"""

from __future__ import annotations

import collections
import marshal
import os
import select
import time
from collections.abc import Callable
from typing import Any, ClassVar

from .._errors import BadData
from .._sampling.aggregate import Aggregator
from .._sampling.intern import KeyTable
from .._stacks.frames import SampledFrame

MAX_PENDING = 4 * 2**20
MAX_FRAME = 64 * 2**20  # a message announcing more is not one of ours
PIPE_BUF = 4096  # POSIX's least: writes up to this size are atomic on a pipe
_HEAD = 9  # size, pid, flag
_CHUNK = PIPE_BUF - _HEAD


class StreamSink:
    """Writes ticks to a pipe without ever blocking.

    :param fd: the pipe's write end (made non-blocking)
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pid = os.getpid()
        os.set_blocking(fd, False)
        self.pending: collections.deque[bytes] = collections.deque()
        self.pending_bytes = 0
        self.dropped = 0
        self.broken = False
        self._flushing = False
        # Frames sent, by (name's hash, file's hash, first line, line): arrays, not an
        # object per frame (see _sampling.intern).
        self._fids = KeyTable()

    def _send(self, message: tuple[Any, ...], droppable: bool = True) -> None:
        if self.broken:
            return
        data = marshal.dumps(message)
        if droppable and self.pending_bytes + len(data) > MAX_PENDING:
            self.dropped += 1
            return
        pid = self.pid.to_bytes(4, "little")
        chunks = []
        for start in range(0, len(data), _CHUNK):
            payload = data[start : start + _CHUNK]
            more = b"\x01" if start + _CHUNK < len(data) else b"\x00"
            chunks.append(len(payload).to_bytes(4, "little") + pid + more + payload)
        # One C call: a tick's handler cannot slip its chunks between these.
        self.pending.extend(chunks)
        self.pending_bytes += len(data)
        self.flush()

    def flush(self) -> None:
        """Writes what waits, as many whole chunks as the pipe takes now. A tick
        interrupting a flush only queues its chunks: the flush under way writes them."""
        if self._flushing:
            return
        self._flushing = True
        try:
            pending = self.pending
            while pending and not self.broken:
                try:
                    os.write(self.fd, pending[0])  # at most PIPE_BUF: all of it or nothing
                except BlockingIOError:
                    return
                except OSError:  # the reader is gone: nothing more to send
                    self.broken = True
                    return
                self.pending_bytes -= len(pending.popleft()) - _HEAD
        finally:
            self._flushing = False

    def add_stack(self, sid: int, frames: tuple[SampledFrame, ...]) -> None:
        """Sends a stack, and its frames not sent yet (never dropped: ticks refer to them)."""
        fids = self._fids
        ids = []
        for frame in frames:
            key = (hash(frame[0]), hash(frame[1]), frame[2], frame[3])
            fid = fids.find(key)
            if fid < 0:
                fid = fids.add(key)
                # A plain tuple: marshal takes no tuple subclass.
                self._send(("F", fid, tuple(frame)), droppable=False)
            ids.append(fid)
        self._send(("S", sid, tuple(ids)), droppable=False)

    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        """Sends a tick (dropped when the pipe is full)."""
        self._send(("T", t, rss, hwm, sid))

    def send(self, kind: str, facts: dict[str, Any]) -> None:
        """Sends the start (``"M"``) or the end (``"E"``)."""
        self._send((kind, facts), droppable=False)

    def drain(self, timeout: float) -> bool:
        """Blocks until what waits is written, ``timeout`` seconds at most.

        :return: True if everything was written
        """
        deadline = time.monotonic() + timeout
        while self.pending and not self.broken:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([], [self.fd], [], left)
            self.flush()
        return not self.pending


def command_label(argv: list[str]) -> str:
    """The command line a followed process shows in the report (it says it in its start
    facts, see :mod:`.follow`): one line, printable, 160 characters at most.

    :param argv: its ``sys.argv`` (``sys.orig_argv`` where there is one)
    """
    text = " ".join(str(a) for a in argv)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 160 else text[:159] + "…"


class StreamReader:
    """Reads the messages into aggregators, one per writing process, and keeps the
    program's start and end facts.

    :param agg: where the program's ticks go
    :param pid: the program's process; ticks of others (its forked children) go to
        :attr:`children`, if None the first writer is the program
    """

    def __init__(self, agg: Aggregator, pid: int | None = None) -> None:
        self.agg = agg
        self.pid = pid
        # One per other writer (a forked or followed child), made at its first message.
        self.children: dict[int, Aggregator] = collections.defaultdict(Aggregator)
        self.buffer = bytearray()
        self.partial: dict[int, bytearray] = {}
        self.frames: dict[int, dict[int, SampledFrame]] = {}  # per writer
        self.start: dict[str, Any] = {}
        self.end: dict[str, Any] | None = None
        self.commands: dict[int, str] = {}  # a followed child's command line, by pid
        self.bad = ""

    def feed(self, data: bytes) -> None:
        """Takes bytes read from the pipe."""
        if self.bad:
            return
        self.buffer += data
        while len(self.buffer) >= _HEAD:
            size = int.from_bytes(self.buffer[:4], "little")
            if size > PIPE_BUF:
                self.bad = f"a chunk of {size} bytes"
                return
            if len(self.buffer) < _HEAD + size:
                return
            pid = int.from_bytes(self.buffer[4:8], "little")
            more = self.buffer[8]
            part = self.partial.setdefault(pid, bytearray())
            part += self.buffer[_HEAD : _HEAD + size]
            del self.buffer[: _HEAD + size]
            if len(part) > MAX_FRAME:
                self.bad = f"a message of more than {MAX_FRAME} bytes"
                return
            if more:
                continue
            body = bytes(self.partial.pop(pid))
            try:
                self._take(pid, marshal.loads(body))
            except (ValueError, EOFError, TypeError) as e:
                self.bad = f"an unreadable message ({e})"
                return

    def _aggregator(self, pid: int) -> Aggregator:
        if self.pid is None:
            self.pid = pid
        return self.agg if pid == self.pid else self.children[pid]

    def _take(self, pid: int, message: Any) -> None:
        if not isinstance(message, tuple) or not message:
            raise BadData("not a tuple")
        take = self._TAKERS.get((message[0], len(message)))
        if take is None:
            raise BadData(f"an unknown message {str(message[0])[:20]!r}")
        take(self, pid, message)

    def _tick(self, pid: int, message: tuple[Any, ...]) -> None:
        _, t, rss, hwm, sid = message
        if not all(isinstance(x, (int, float)) for x in (t, rss, hwm, sid)):
            raise BadData("a tick of non-numbers")
        self._aggregator(pid).add_tick(float(t), float(rss), float(hwm), int(sid))

    def _frame(self, pid: int, message: tuple[Any, ...]) -> None:
        frame = message[2]
        kinds = (str, str, int, int)  # function, file, first line, line
        if not isinstance(message[1], int) or not isinstance(frame, tuple) or len(frame) != 4:
            raise BadData("a non-frame")
        if not all(isinstance(x, kind) for x, kind in zip(frame, kinds, strict=True)):
            raise BadData("a non-frame")
        self.frames.setdefault(pid, {})[message[1]] = SampledFrame(*message[2])

    def _stack(self, pid: int, message: tuple[Any, ...]) -> None:
        table = self.frames.get(pid, {})
        ids = message[2]
        if not isinstance(message[1], int) or not isinstance(ids, tuple):
            raise BadData("a stack of unknown frames")
        if not all(i in table for i in ids):
            raise BadData("a stack of unknown frames")
        self._aggregator(pid).add_stack(message[1], tuple(table[i] for i in ids))

    def _facts(self, pid: int, message: tuple[Any, ...]) -> None:
        if not isinstance(message[1], dict):
            raise BadData("facts that are not a dict")
        if self._aggregator(pid) is not self.agg:
            # A forked child ending through the program's code is not the program; a
            # followed one (see .follow) says its command line first.
            command = message[1].get("command")
            if message[0] == "M" and isinstance(command, str):
                self.commands[pid] = command_label([command])
            return
        if message[0] == "M":
            self.start = message[1]
        else:
            self.end = message[1]

    _TAKERS: ClassVar[
        dict[tuple[str, int], Callable[[StreamReader, int, tuple[Any, ...]], None]]
    ] = {
        ("T", 5): _tick,
        ("F", 3): _frame,
        ("S", 3): _stack,
        ("M", 2): _facts,
        ("E", 2): _facts,
    }

    def read_until(
        self,
        fd: int,
        done: Callable[[], bool],
        after_read: Callable[[], None] | None = None,
    ) -> None:
        """Reads ``fd`` until end-of-file, or until ``done()`` and nothing more is there
        (a child of the program may hold the pipe open after the program ended).

        :param fd: the pipe's read end
        :param done: tells whether the writer has ended (checked every 50 ms)
        :param after_read: called after each read (the caller's own work between reads)
        """
        while True:
            readable, _, _ = select.select([fd], [], [], 0.05)
            if readable:
                try:
                    data = os.read(fd, 1 << 16)
                except InterruptedError:
                    continue
                if not data:
                    return
                self.feed(data)
                if after_read is not None:
                    after_read()
            elif done():
                return

"""The ticks' way to the flight recorder, another process: framed messages on a pipe.

A frame is a 4-byte little-endian size and a marshalled tuple (both ends run the same
interpreter; marshal is fast enough to call from a signal handler). Messages:
``("S", sid, frames)`` a stack, ``("T", t, rss, hwm, sid)`` a tick, ``("M", {...})``
facts known at the start, ``("E", {...})`` the end, sent once the program is over. What
is read is checked (types, sizes): a bad frame ends the reading, what came before stays.

The writer never blocks the program: a full pipe keeps at most ``MAX_PENDING`` bytes
waiting, then drops ticks (counted). The reader folds ticks into an
:class:`.aggregate.Aggregator` as they come, so its memory does not grow with time.
"""

from __future__ import annotations

import marshal
import os
import select
from collections.abc import Callable
from typing import Any

from .aggregate import Aggregator, RawFrame

MAX_PENDING = 4 * 2**20
MAX_FRAME = 64 * 2**20  # a frame announcing more is not one of ours


class StreamSink:
    """Writes ticks to a pipe without ever blocking.

    :param fd: the pipe's write end (made non-blocking)
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.pending = bytearray()
        self.dropped = 0
        self.broken = False

    def _send(self, message: tuple[Any, ...], droppable: bool = True) -> None:
        if self.broken:
            return
        data = marshal.dumps(message)
        frame = len(data).to_bytes(4, "little") + data
        if droppable and len(self.pending) + len(frame) > MAX_PENDING:
            self.dropped += 1
            return
        self.pending += frame
        self.flush()

    def flush(self) -> None:
        """Writes what waits, as much as the pipe takes now."""
        while self.pending and not self.broken:
            try:
                n = os.write(self.fd, self.pending)
            except BlockingIOError:
                return
            except OSError:  # the reader is gone: nothing more to send
                self.broken = True
                return
            del self.pending[:n]

    def add_stack(self, sid: int, frames: tuple[RawFrame, ...]) -> None:
        """Sends a stack (never dropped: ticks refer to it)."""
        self._send(("S", sid, frames), droppable=False)

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
        os.set_blocking(self.fd, True)
        try:
            if self.pending and not self.broken:
                select.select([], [self.fd], [], timeout)
                self.flush()
        finally:
            os.set_blocking(self.fd, False)
        return not self.pending


def _is_frames(value: Any) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(f, tuple)
        and len(f) == 4
        and isinstance(f[0], str)
        and isinstance(f[1], str)
        and isinstance(f[2], int)
        and isinstance(f[3], int)
        for f in value
    )


class StreamReader:
    """Reads the messages into an aggregator and keeps the start and end facts.

    :param agg: where ticks go
    """

    def __init__(self, agg: Aggregator) -> None:
        self.agg = agg
        self.buffer = bytearray()
        self.start: dict[str, Any] = {}
        self.end: dict[str, Any] | None = None
        self.bad = ""

    def feed(self, data: bytes) -> None:
        """Takes bytes read from the pipe."""
        if self.bad:
            return
        self.buffer += data
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "little")
            if size > MAX_FRAME:
                self.bad = f"a frame of {size} bytes"
                return
            if len(self.buffer) < 4 + size:
                return
            body = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
            try:
                self._take(marshal.loads(body))
            except (ValueError, EOFError, TypeError) as e:
                self.bad = f"an unreadable frame ({e})"
                return

    def _take(self, message: Any) -> None:
        if not isinstance(message, tuple) or not message:
            raise TypeError("not a tuple")
        kind = message[0]
        if kind == "T" and len(message) == 5:
            _, t, rss, hwm, sid = message
            if not all(isinstance(x, (int, float)) for x in (t, rss, hwm)):
                raise TypeError("a tick of non-numbers")
            self.agg.add_tick(float(t), float(rss), float(hwm), int(sid))
        elif kind == "S" and len(message) == 3 and isinstance(message[1], int):
            if not _is_frames(message[2]):
                raise TypeError("a stack of non-frames")
            self.agg.add_stack(message[1], message[2])
        elif kind in ("M", "E") and len(message) == 2 and isinstance(message[1], dict):
            if kind == "M":
                self.start = message[1]
            else:
                self.end = message[1]
        else:
            raise TypeError(f"an unknown message {str(kind)[:20]!r}")

    def read_until(self, fd: int, done: Callable[[], bool], poll: float = 0.05) -> None:
        """Reads ``fd`` until end-of-file, or until ``done()`` and nothing more is there
        (a child of the program may hold the pipe open after the program ended).

        :param fd: the pipe's read end
        :param done: tells whether the writer has ended
        :param poll: seconds between two checks of ``done``
        """
        while True:
            readable, _, _ = select.select([fd], [], [], poll)
            if readable:
                try:
                    data = os.read(fd, 1 << 16)
                except InterruptedError:
                    continue
                if not data:
                    return
                self.feed(data)
            elif done():
                return

"""The ring read from outside: whole records in order, a record being written read at
the next poll, lapped records counted as lost, a blank or foreign ring refused."""

from __future__ import annotations

import struct

import pytest

from onnxrt_backend_dev.monitoring._alloc.ring import (
    FRAMES_AT,
    HEADER,
    KIND_ALLOC,
    KIND_FREE,
    MAGIC,
    MAX_FRAMES,
    READ_AT,
    RECORD,
    RECORD_SIZE,
    RECORDS_AT,
    VERSION,
    RingError,
    RingReader,
    parse_header,
)
from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory

BASE = 0x7F00_0000_0000
CAPACITY = 8
PID = 4242


def header(head: int, pid: int = PID, fork_head: int = 0, magic: bytes = MAGIC,
           version: int = VERSION, state: int = 15) -> bytes:  # fmt: skip
    return HEADER.pack(magic, version, RECORD_SIZE, CAPACITY, MAX_FRAMES, pid, state, 65536,
                       fork_head, head, 1000, 2000, 3, 4, 5, 0, 0, 0, 3, 0, 0, b"", 0)  # fmt: skip


def record(order: int, kind: int = KIND_ALLOC, frames: tuple[int, ...] = (), whole: bool = True,
           address: int = 0xABC0) -> bytes:  # fmt: skip
    seq = order + 1 if whole else 0
    head = RECORD.pack(seq, kind, 0, len(frames) // 2, address, 100 + order, 10**9 + order,
                       5000, 77, 0x1234, order + 1, 0x5678)  # fmt: skip
    body = struct.pack(f"<{len(frames)}Q", *frames)
    data = head + body
    data += bytes(RECORD_SIZE - 8 - len(data))
    return data + struct.pack("<Q", seq if whole else 0)


class Ring:
    """A ring in a fake memory, written as the shim writes it."""

    def __init__(self) -> None:
        self.memory = FakeMemory({BASE: header(0) + bytes(CAPACITY * RECORD_SIZE)})
        self.head = 0

    def write(self, *records: bytes, head: int | None = None) -> None:
        for data in records:
            order = struct.unpack_from("<Q", data, 0)[0] - 1
            if order < 0:  # a record being written: its slot is the next one
                order = self.head
            slot = order % CAPACITY
            self.memory.write(BASE + RECORDS_AT + slot * RECORD_SIZE, data)
            self.head = max(self.head, order + 1)
        self.set_head(self.head if head is None else head)

    def set_head(self, head: int) -> None:
        self.head = head
        self.memory.write(BASE, header(head))


def test_records_are_read_in_order_with_their_frames() -> None:
    ring = Ring()
    told: list[tuple[int, int]] = []
    reader = RingReader(ring.memory, BASE, PID, lambda a, v: told.append((a - BASE, v)))
    assert reader.poll() == []
    ring.write(record(0, frames=(0x1000, 0x1010, 0x2000, 0x2020)), record(1, KIND_FREE))
    got = reader.poll()
    assert [r.order for r in got] == [0, 1]
    assert got[0].frames == (0x1000, 0x1010, 0x2000, 0x2020) and got[0].size == 100
    assert got[1].kind == KIND_FREE and got[0].tid == 77 and got[0].caller == 0x1234
    assert got[0].caller2 == 0x5678
    assert reader.poll() == [] and reader.lost == 0
    assert reader.header is not None and reader.header.live == 1000
    # the reader says how far it read (1 + the next index): at once, then now and then
    assert told == [(READ_AT, 1)]
    for _ in range(16):
        reader.poll()
    assert told == [(READ_AT, 1), (READ_AT, 3)]
    # and at every poll once the program exits (it waits for its last records)
    ring.write(record(2), record(3), head=4)
    ring.memory.write(BASE, header(4, state=15 | 16))
    reader.poll()
    assert told[-1] == (READ_AT, 5)


def test_a_record_being_written_is_read_at_the_next_poll() -> None:
    ring = Ring()
    reader = RingReader(ring.memory, BASE, PID)
    ring.write(record(0), record(1, whole=False), head=3)
    ring.write(record(2), head=3)
    assert [r.order for r in reader.poll()] == [0]  # 1 unfinished: 2 waits behind it
    ring.write(record(1))
    ring.set_head(3)
    assert [r.order for r in reader.poll()] == [1, 2]
    assert reader.lost == 0


def test_a_writer_that_never_finishes_is_skipped_after_a_few_polls() -> None:
    ring = Ring()
    reader = RingReader(ring.memory, BASE, PID)
    ring.write(record(0, whole=False), head=2)
    ring.write(record(1), head=2)
    polls = [reader.poll() for _ in range(5)]
    assert [r.order for batch in polls for r in batch] == [1]
    assert reader.lost == 1


def test_records_lapped_by_the_writers_are_lost_and_counted() -> None:
    ring = Ring()
    reader = RingReader(ring.memory, BASE, PID)
    ring.write(*(record(i) for i in range(CAPACITY + 3)))
    got = reader.poll()
    assert [r.order for r in got] == list(range(3, CAPACITY + 3))
    assert reader.lost == 3


def test_a_forked_childs_ring_is_read_from_its_fork_and_only_once_it_is_its_own() -> None:
    ring = Ring()
    ring.write(record(0), record(1))
    # GIVEN the ring still names the parent (the child's fork handler has not run)
    child = RingReader(ring.memory, BASE, PID + 1)
    assert child.poll() == []
    # WHEN the handler ran: its pid and the first index that is its own
    ring.memory.write(BASE, header(2, pid=PID + 1, fork_head=2))
    ring.write(record(2), head=3)
    ring.memory.write(BASE, header(3, pid=PID + 1, fork_head=2))
    assert [r.order for r in child.poll()] == [2]


@pytest.mark.parametrize(
    ("data", "starting", "words"),
    [
        (header(0, magic=bytes(8)), True, "has not started"),
        # a page the loader has not zeroed yet: read again (the tracker gives up later)
        (header(0, magic=b"XXXXXXXX"), True, "magic is wrong"),
        (header(0, version=99), False, "another version"),
        (b"short", False, "cut short"),
    ],
)
def test_a_blank_or_foreign_ring_is_refused(data: bytes, starting: bool, words: str) -> None:
    with pytest.raises(RingError, match=words) as caught:
        parse_header(data)
    assert caught.value.starting is starting


def test_the_record_layout_matches_the_shims() -> None:
    assert RECORD.size == FRAMES_AT and FRAMES_AT + 16 * MAX_FRAMES + 8 == RECORD_SIZE
    assert HEADER.size == RECORDS_AT


def test_a_ring_whose_start_is_half_done_is_read_later() -> None:
    # GIVEN a shim that wrote its magic, not yet its mean and state (its start goes on)
    ring = Ring()
    ring.memory.write(BASE, header(0, state=0))
    reader = RingReader(ring.memory, BASE, PID)
    # THEN the ring is not read yet (its mean read as 0 would weigh every sample as one)
    with pytest.raises(RingError, match="starting") as caught:
        reader.poll()
    assert caught.value.starting
    # AND once its state is written, it is
    ring.set_head(0)
    assert reader.poll() == []

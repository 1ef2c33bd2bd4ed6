"""The samplers' tables: interning against a dictionary as the reference, hash collisions,
growth, and the point of them: no small object kept per stack, frame or sample (counted
with ``sys.getallocatedblocks``, the small-object allocator's own count); and the
threads' CPU clocks, read without touching a thread's descriptor."""

from __future__ import annotations

import gc
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._report.recording import Ticks
from onnxrt_backend_dev.monitoring._sampling.frames import StackTable
from onnxrt_backend_dev.monitoring._sampling.intern import (
    MIN_CAPACITY,
    CodeTable,
    KeyTable,
    Totals,
)
from onnxrt_backend_dev.monitoring._sampling.recorder import (
    Recorder,
    ThreadLine,
    _cpu_clock,
    thread_clock_id,
)

# Allowed growth of the allocator's block count over a batch of additions: the table's
# few fields rebound (an int, a float) and the batch's own loop; per entry it would be
# the number of entries or more.
SLACK = 8


@pytest.fixture
def no_gc() -> Iterator[None]:
    """The collector off while blocks are counted (it frees blocks of its own accord)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _blocks(action: Callable[[], object]) -> int:
    """Small-object blocks still allocated after ``action`` (whatever it returns is
    dropped first)."""
    before = sys.getallocatedblocks()
    action()
    return sys.getallocatedblocks() - before


def test_key_table_agrees_with_a_dictionary_through_many_rehashes() -> None:
    rnd = random.Random(7)
    table, reference = KeyTable(), {}
    for _ in range(20_000):
        if rnd.random() < 0.5:  # ids and offsets: large, negative (delayed samples), empty
            key = tuple(rnd.randrange(-(2**47), 2**47) for _ in range(rnd.randrange(12)))
        else:  # few distinct small keys: many hits
            key = tuple(rnd.randrange(4) for _ in range(rnd.randrange(3)))
        if key not in reference:
            assert table.find(key) == -1
            reference[key] = table.add(key)
        assert table.find(key) == reference[key]
    assert len(table) == len(reference) > 8 * MIN_CAPACITY
    assert list(table) == sorted(reference, key=reference.__getitem__)
    assert all(table.key(sid) == key for key, sid in reference.items())


def test_keys_of_equal_hash_stay_apart() -> None:
    # GIVEN keys whose hashes are equal (hash(-1) == hash(-2) in CPython)
    keys = [(-1,), (-2,), (-1, -1), (-2, -2), (-1, -2), (-2, -1)]
    assert hash(keys[0]) == hash(keys[1])
    table = KeyTable()
    ids = [table.add(k) for k in keys]
    # THEN each is found as itself
    assert [table.find(k) for k in keys] == ids == list(range(len(keys)))
    assert table.find((-3,)) == -1


def test_a_key_id_out_of_range_is_refused() -> None:
    table = KeyTable()
    table.add((1, 2))
    assert table.key(0) == (1, 2)
    for sid in (-1, 1):
        with pytest.raises(IndexError, match=f"no key of id {sid}"):
            table.key(sid)


def test_totals_add_up_per_id_and_read_as_a_mapping() -> None:
    totals = Totals()
    totals.add(3, 0.5, 0.25)
    totals.add(3, 0.5, 0.25)
    totals.add(5 * MIN_CAPACITY, 1.0, 0.0)  # far past the first buffer: it grows
    assert dict(totals) == {3: [1.0, 0.5, 2], 5 * MIN_CAPACITY: [1.0, 0.0, 1]}
    assert len(totals) == 2 and list(totals) == [3, 5 * MIN_CAPACITY]
    for sid in (0, -1, 10**9):  # no sample, negative, past the end
        with pytest.raises(KeyError):
            totals[sid]


def test_code_table_keeps_each_code_once_and_finds_it_by_id() -> None:
    codes = [compile(f"x = {i}", f"<c{i}>", "exec") for i in range(3 * MIN_CAPACITY)]
    table = CodeTable()
    table.update(codes)
    table.update(codes[:10])  # again: kept once
    assert len(table) == len(codes)
    assert all(table[id(c)] is c for c in codes)
    assert id(codes[0]) in table and "x" not in table
    with pytest.raises(KeyError):
        table[id(table)]


def test_a_timeline_grows_past_its_buffers_and_keeps_every_entry() -> None:
    line = ThreadLine()
    for i in range(3 * MIN_CAPACITY):
        line.add(i + 1.0, i, 1.0, 10**6)
    assert list(line.stacks) == list(range(3 * MIN_CAPACITY))
    assert list(line.times) == [float(i) for i in range(3 * MIN_CAPACITY)]
    assert len(line.weights) == 3 * MIN_CAPACITY and line.stride == 1


@pytest.mark.usefixtures("no_gc")
def test_new_keys_and_samples_leave_no_small_object_behind() -> None:
    # GIVEN keys made beforehand (the tables are warm: one key of each length added)
    keys = [(i, 2 * i + 10**12, -i) for i in range(MIN_CAPACITY // 4)]
    table, totals, line = KeyTable(), Totals(), ThreadLine()
    table.add((0, 0, 0))
    totals.add(0, 0.1, 0.1)
    line.add(1.0, 0, 0.5, 10**6)

    def fill() -> None:
        for i, key in enumerate(keys):
            sid = table.add(key)
            totals.add(sid, 0.001 * i, 0.002 * i)
            line.add(2.0 + i, sid, 0.001 * i, 10**6)

    # THEN adding them keeps no block per key (a dict and lists would keep several)
    assert _blocks(fill) <= SLACK
    assert len(table) == len(keys) + 1 and len(totals) == len(keys) + 1


@dataclass
class _Frame:
    f_code: CodeType
    f_lasti: int
    f_back: _Frame | None = None


def _frames(n: int) -> list[_Frame]:
    """``n`` distinct two-frame stacks over two codes (distinct offsets)."""
    outer, inner = _frames.__code__, _Frame.__init__.__code__
    return [_Frame(inner, i, _Frame(outer, 2 * i)) for i in range(n)]


@pytest.mark.usefixtures("no_gc")
def test_the_sampler_keeps_no_small_object_per_new_stack(fake_clock: FakeClock) -> None:
    # GIVEN a recorder that has seen its thread once, and 32 new stacks to come
    frames = _frames(33)
    feed = iter(frames)

    def current() -> dict[int, Any]:
        return {1: next(feed)}

    rec = Recorder(0.002, fake_clock, current, cpu_clock=lambda i: None, thread_name=str)
    fake_clock.advance(0.002)
    rec.sample()

    def sample_all() -> None:
        for _ in frames[1:]:
            fake_clock.advance(0.002)
            rec.sample()

    assert _blocks(sample_all) <= SLACK
    assert len(rec.table) == 33


@pytest.mark.usefixtures("no_gc")
def test_the_ticks_keep_no_small_object_per_new_stack(fake_clock: FakeClock) -> None:
    # GIVEN the sampler's memory ticks with a sink that keeps nothing, warm (one stack seen)
    class Sink:
        declared = 0  # small integers: cached, no new object

        def add_stack(self, sid: int, frames: tuple[object, ...]) -> None:
            self.declared += 1

        def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
            pass

    frames = _frames(33)
    feed = iter(frames)
    main = threading.main_thread().ident or 0

    def current() -> dict[int, Any]:
        return {main: next(feed)}

    rec = Recorder(0.002, fake_clock, current, cpu_clock=lambda i: None, thread_name=str)
    sink = Sink()
    ticks = Ticks(sink, lambda: (1.0, 1.0), None)
    rec.listener = ticks.bind(rec)
    fake_clock.advance(0.002)
    rec.sample()

    def tick_all() -> None:
        for _ in frames[1:]:
            fake_clock.advance(0.002)
            rec.sample()

    # THEN 32 new stacks, each of two new (code, offset) pairs, keep no block each
    assert _blocks(tick_all) <= SLACK
    assert sink.declared == 33  # each on the sampler's id, declared once


def test_a_stack_table_decodes_what_it_interned_from_real_frames() -> None:
    table = StackTable()

    def here() -> int:
        return table.intern_frame(sys._getframe())

    ids = [here() for _ in range(3)]  # one call site: one stack
    (stack,) = table.decode()
    assert ids == [0, 0, 0]
    assert stack[-1].name.endswith("here") and stack[-1].file == __file__


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux thread clocks")
def test_a_thread_clock_from_its_kernel_id_is_pthreads_own() -> None:
    # GIVEN this thread's clock from pthread and from its kernel id
    ours = thread_clock_id(threading.get_native_id())
    theirs = time.pthread_getcpuclockid(threading.get_ident())
    # THEN they are the same clock
    assert ours == theirs


@pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no thread clocks")
def test_the_cpu_clock_of_a_thread_gone_or_unknown_is_none() -> None:
    # GIVEN a thread that ended (its descriptor freed) and an id that is no thread's
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    assert worker.ident is not None
    # THEN no clock, and no crash (pthread_getcpuclockid(1) crashes the interpreter)
    assert _cpu_clock(worker.ident) is None
    assert _cpu_clock(1) is None
    # AND this thread's clock reads its CPU time
    reader = _cpu_clock(threading.get_ident())
    assert reader is not None and reader() > 0

"""The reader on a made-up process image (tests/observe/fakeproc.py): stacks, lines,
threads, the GIL, and reads of a stack that moves under them. Every test runs twice: the
Python reader, and the C walk reading the same fake memory (skipped where not built)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakeproc import TYPES, Image

from onnxrt_backend_dev.monitoring._observe import walk
from onnxrt_backend_dev.monitoring._observe.reader import StackReader

Make = Callable[..., StackReader]


@pytest.fixture(params=["python", "c"])
def make(request: pytest.FixtureRequest) -> Make:
    """Makes a reader of an image: the Python reader, or with the C walk."""
    if request.param == "c" and walk.WHY_NOT:
        pytest.skip(walk.WHY_NOT)

    def reader(img: Image, memory: Any = None, **options: Any) -> StackReader:
        memory = img.memory if memory is None else memory
        made = StackReader(memory, img.layout, img.runtime, TYPES, **options)
        if request.param == "c":
            assert walk.attach_native(made, memory) == ""
        return made

    return reader


def _names(reader: StackReader, frames: tuple[int, ...]) -> list[tuple[str, int]]:
    out = []
    for i in range(0, len(frames), 2):
        info = reader.infos[frames[i]]
        out.append((info.name, info.line(frames[i + 1])))
    return out


def _image() -> tuple[Image, int, int, int]:
    img = Image()
    main = img.code("<module>", "app.py", 1, [1, 2, 3])
    work = img.code("work", "app.py", 10, [11, 12, 13, 14])
    inner = img.code("inner", "lib.py", 20, [21, 22])
    return img, main, work, inner


def test_a_stack_is_read_innermost_first_with_its_lines(make: Make) -> None:
    # GIVEN a main thread in inner (line 22) called from work (line 13) from <module>
    img, main, work, inner = _image()
    t = img.thread(7, 100, [(main, 16), (work, 16), (inner, 8)])
    img.hold_gil(t)
    reader = make(img)
    # WHEN the threads are read
    (sample,) = reader.threads()
    # THEN the frames are innermost first, each with the line of its instruction
    assert _names(reader, sample.frames) == [("inner", 22), ("work", 13), ("<module>", 3)]
    assert (sample.ident, sample.native_id, sample.gil, sample.complete) == (7, 100, True, True)


def test_threads_come_main_first_and_the_gil_holder_is_named(make: Make) -> None:
    img, main, work, _inner = _image()
    first = img.thread(1, 100, [(main, 0)])
    second = img.thread(2, 101, [(work, 4)])
    img.hold_gil(second)
    reader = make(img)
    samples = reader.threads()
    assert [s.ident for s in samples] == [1, 2]
    assert [s.gil for s in samples] == [False, True]
    assert first != second


def test_an_offset_before_the_first_instruction_is_the_first_line(make: Make) -> None:
    img, _main, work, _inner = _image()
    img.thread(1, 100, [(work, -2)])  # a frame just pushed: prev_instr before the code
    reader = make(img)
    assert _names(reader, reader.threads()[0].frames) == [("work", 10)]


def test_a_code_address_holding_something_else_ends_the_walk_as_torn(make: Make) -> None:
    # GIVEN a frame whose code pointer points at a string (freed code, reused memory)
    img, main, _work, _inner = _image()
    bogus = img.string("not code")
    t = img.thread(1, 100, [(main, 0), (bogus, 0)])
    reader = make(img)
    # WHEN read
    (sample,) = reader.threads()
    # THEN nothing invented: the sample is partial, nothing under it kept
    assert not sample.complete
    assert reader.counts()[0] >= 1
    assert t


def test_a_stack_that_moves_once_is_read_again_whole(make: Make) -> None:
    # GIVEN a leaf that changes (a call returns) right after the first walk
    img, main, work, inner = _image()
    t = img.thread(1, 100, [(main, 8), (work, 16), (inner, 4)])
    reader = make(img)
    caller = img.leaf(t) - img.layout.frame_size
    pointer = img.cframe_of(t) + img.layout["cframe.current_frame"]
    reads = {"n": 0}

    def move(address: int, size: int) -> None:
        if address == pointer:
            reads["n"] += 1
            if reads["n"] == 2:  # the check after the first walk: inner has returned
                img.set_leaf(t, caller)

    img.memory.hook = move
    (sample,) = reader.threads()
    # THEN the second read is whole and consistent: work is the leaf now
    assert sample.complete
    assert [n for n, _ in _names(reader, sample.frames)] == ["work", "<module>"]
    assert reader.counts()[:2] == (1, 0)


def test_a_stack_that_keeps_moving_keeps_the_outer_frames_both_reads_agree_on(make: Make) -> None:
    # GIVEN a leaf that changes at every read (a loop calling and returning fast)
    img, main, work, inner = _image()
    t = img.thread(1, 100, [(main, 8), (work, 16), (inner, 4)])
    reader = make(img)
    leaf = img.leaf(t)
    caller = leaf - img.layout.frame_size
    pointer = img.cframe_of(t) + img.layout["cframe.current_frame"]
    flip = {"n": 0}

    def move(address: int, size: int) -> None:
        if address == pointer:  # each look at the leaf finds another one than before
            flip["n"] += 1
            img.set_leaf(t, leaf if flip["n"] in (1, 4) else caller)

    img.memory.hook = move
    (sample,) = reader.threads()
    # THEN the callers both reads saw are kept, the moving part dropped and counted
    names = [n for n, _ in _names(reader, sample.frames)]
    assert names == ["work", "<module>"]
    assert not sample.complete
    assert reader.counts()[:2] == (1, 1)


def test_a_cycle_in_the_chain_ends_the_walk(make: Make) -> None:
    img, main, work, _inner = _image()
    t = img.thread(1, 100, [(main, 0), (work, 4)])
    leaf = img.leaf(t)
    img.put(leaf + img.layout.frame_back, leaf)  # the frame's caller is itself
    reader = make(img)
    (sample,) = reader.threads()
    assert not sample.complete
    assert len(sample.frames) <= 2


def test_a_deep_stack_keeps_its_innermost_frames(make: Make) -> None:
    img, main, work, _inner = _image()
    img.thread(1, 100, [(main, 0)] + [(work, 4)] * 60)
    reader = make(img, max_depth=10)
    (sample,) = reader.threads()
    assert len(sample.frames) == 20


def test_a_code_object_replaced_at_the_same_address_gets_a_new_id(make: Make) -> None:
    # GIVEN a code object read once, then another one made at its address
    img, _main, work, _inner = _image()
    t = img.thread(1, 100, [(work, 4)])
    reader = make(img)
    first = reader.threads()[0].frames[0]
    img.put(work + img.layout["code.qualname"], img.string("other"))
    # WHEN it is read again past the trust period
    for _ in range(40):
        again = reader.threads()[0].frames[0]
    # THEN it is told apart
    assert again != first
    assert reader.infos[again].name == "other"
    assert t


def test_a_runtime_that_cannot_be_read_raises_read_error(make: Make) -> None:
    import pytest

    from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory, ReadError

    img = Image()
    reader = make(img, FakeMemory())
    with pytest.raises(ReadError):
        reader.threads()

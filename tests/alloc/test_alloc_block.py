"""Exact counting of a block's own allocations in this process: the same code gives the
same bytes, garbage of earlier code freed in the block does not lower them, nested
blocks and threads are counted, fork in a block neither deadlocks nor mixes counts."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._alloc.block import AllocationBlock, block_status

MiB = 2**20
pytestmark = pytest.mark.skipif(block_status() != "", reason=block_status() or "ok")


def test_a_blocks_own_allocations_are_counted_exactly_and_the_same_each_time() -> None:
    garbage = [bytearray(4 * MiB) for _ in range(4)]
    figures = []
    for _ in range(5):
        with AllocationBlock() as block:
            garbage.clear()  # frees of what was allocated before: not the block's
            kept = bytearray(10 * MiB)
            temporary = bytearray(30 * MiB)
            del temporary
        assert block.figures is not None
        figures.append(block.figures)
        del kept
    first = figures[0]
    assert first.live >= 10 * MiB and first.live < 10.5 * MiB
    assert first.peak >= 40 * MiB and first.peak < 40.5 * MiB
    assert first.allocated >= 40 * MiB and first.calls >= 2 and first.lost == 0
    assert all(abs(f.peak - first.peak) < 64 * 1024 for f in figures)


def test_nested_blocks_count_their_own() -> None:
    with AllocationBlock() as outer:
        a = bytearray(8 * MiB)
        with AllocationBlock() as inner:
            b = bytearray(2 * MiB)
        c = bytearray(4 * MiB)
    assert inner.figures is not None and outer.figures is not None
    assert 2 * MiB <= inner.figures.peak < 2.1 * MiB
    assert 14 * MiB <= outer.figures.peak < 14.2 * MiB
    del a, b, c


def test_every_threads_allocations_are_the_blocks() -> None:
    def work() -> None:
        keep.append(bytearray(MiB))

    keep: list[bytearray] = []
    with AllocationBlock() as block:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert block.figures is not None and block.figures.live >= 8 * MiB


def test_an_allocator_looked_up_inside_the_block_is_followed() -> None:
    with AllocationBlock() as block:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(16 * MiB)
        libc.free(p)
    assert block.figures is not None and block.figures.peak >= 16 * MiB


@pytest.mark.timeout(60)
def test_fork_inside_a_block_while_threads_allocate_does_not_deadlock() -> None:
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            xs = [bytearray(3000) for _ in range(20)]
            del xs

    threads = [threading.Thread(target=churn) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        with AllocationBlock():
            for _ in range(10):
                pid = os.fork()
                if pid == 0:  # the child allocates, counts a block of its own, exits
                    with AllocationBlock() as child:
                        data = bytearray(MiB)
                    ok = child.figures is not None and child.figures.peak >= MiB
                    os._exit(0 if ok and data else 1)
                _, status = os.waitpid(pid, 0)
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        stop.set()
        for t in threads:
            t.join()


TAKEN = """\
import ctypes, os, shutil, sys
from onnxrt_backend_dev.monitoring._alloc.block import AllocationBlock
from onnxrt_backend_dev.monitoring._alloc.shim import shim_path
with AllocationBlock():
    pass
# another tracker patching the allocator's calls after this one (as pytest-memray does at
# each test): a second copy of the shim
other = shutil.copy(shim_path(), os.path.join(sys.argv[1], "other.so"))
lib = ctypes.CDLL(other, mode=os.RTLD_LOCAL | os.RTLD_NOW)
out = (ctypes.c_int64 * 7)()
lib.onnxrt_alloc_block_begin(); lib.onnxrt_alloc_block_end(out)
try:
    AllocationBlock().__enter__()
except OSError as e:
    print(e)
"""


def test_a_block_whose_allocator_calls_another_tool_took_says_so(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", TAKEN, str(tmp_path)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "allocations not counted: another tool took" in proc.stdout


def test_a_monitored_block_whose_allocations_cannot_be_counted_is_judged_on_the_rss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onnxrt_backend_dev.monitoring._pytest_plugin import MemoryBlock

    def taken(self: AllocationBlock) -> AllocationBlock:
        raise OSError("allocations not counted: another tool took (test)")

    monkeypatch.setattr(AllocationBlock, "__enter__", taken)
    with MemoryBlock("b", delay=0.005) as block:
        pass
    assert not block.counted and "another tool took" in block.summary()
    assert "alloc_peak" not in block.figure()
    with pytest.raises(ValueError, match="source='allocations' cannot be measured: alloc"):
        MemoryBlock("b", source="allocations").__enter__()

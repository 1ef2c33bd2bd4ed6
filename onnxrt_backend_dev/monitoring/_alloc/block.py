"""Exact counting of a block's allocations in this process (the pytest gate), and
sampling with stacks started in this process (``spy --where``, read by the spy).

The shim is loaded with ctypes (``RTLD_LOCAL``: its ``malloc`` does not replace this
process's); at the first block it points every loaded object's GOT entries of the
allocator (``malloc``, ``free``, ``posix_memalign``, anonymous ``mmap``...) at its hooks,
and those of libraries loaded later by path. From then on, while a block runs, every
allocation is counted in an address table: the bytes live of the allocations made
inside the block, and their peak. Frees of what was allocated before the block are not
counted, as in pytest-memray: garbage left by earlier tests and freed during the block
does not lower the figure, and memory reused from earlier tests does not hide it.

Outside a block the hooks only pass the calls on (a few nanoseconds). What cannot be
followed: allocations made by a library's own constructor while it is loaded (before
its GOT entries are patched), an allocator reached without the GOT (a function pointer
taken before the block, a static executable), allocations of a library loaded by name
(``dlopen("libfoo.so")``) until the next block.
"""

from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

from .shim import shim_status

_LIB: list[ctypes.CDLL] = []


class BlockFigures(NamedTuple):
    """What a block allocated, bytes (its own allocations only).

    :param live: still live at the block's end
    :param peak: the highest live during the block
    :param calls: allocation calls
    :param allocated: bytes allocated
    :param lost: allocations not followed (the address table could not grow)
    :param objects: loaded objects whose allocator entries are patched
    """

    live: int
    peak: int
    calls: int
    allocated: int
    lost: int
    objects: int


def block_status() -> str:
    """Why blocks cannot count allocations here, '' when they can."""
    status = shim_status()
    if status.path is None:
        return status.reason
    try:
        _library()
    except OSError as e:
        return f"allocation counting off: the shim cannot be loaded ({e})"
    return ""


def _library() -> ctypes.CDLL:
    if not _LIB:
        path = shim_status().path
        if path is None:
            raise OSError(shim_status().reason)
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        lib.onnxrt_alloc_block_begin.restype = ctypes.c_int
        lib.onnxrt_alloc_block_begin.argtypes = []
        lib.onnxrt_alloc_block_end.restype = ctypes.c_int
        lib.onnxrt_alloc_block_end.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        lib.onnxrt_alloc_sample_start.restype = ctypes.c_int
        lib.onnxrt_alloc_sample_start.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_long]
        lib.onnxrt_alloc_sample_stop.restype = None
        lib.onnxrt_alloc_sample_stop.argtypes = []
        _LIB.append(lib)
    return _LIB[0]


class AllocationBlock:
    """Counts the allocations of a ``with`` block exactly; ``figures`` is set at its end.

    Blocks nest (up to 8): an inner block's figures are its own allocations'.

    :raises OSError: the shim is not built or cannot be loaded (see :func:`block_status`),
        or another tool took the allocator's calls since it patched them
    """

    def __init__(self) -> None:
        self._lib = _library()
        self.figures: BlockFigures | None = None

    def __enter__(self) -> AllocationBlock:
        depth = int(self._lib.onnxrt_alloc_block_begin())
        if depth == -2:
            raise OSError(
                "allocations not counted: another tool took this process's allocator "
                "calls (pytest-memray, memray: one tracker at a time)"
            )
        if depth < 0:
            raise OSError("allocation counting: too many nested blocks (8 at most)")
        return self

    def __exit__(self, *exc: object) -> None:
        out = (ctypes.c_int64 * 7)()
        if self._lib.onnxrt_alloc_block_end(out) < 0:
            return
        self.figures = BlockFigures(out[0], out[1], out[2], out[3], out[4], out[5])


def start_sampling(mean: int, seed: int = 0) -> tuple[str | None, str]:
    """Starts sampling this process's allocations with their stacks, into the shim's ring
    (another process reads it: the memory spy). Frees of what was allocated before count
    too: its live bytes are a net change from now.

    :param mean: bytes between two samples on average
    :param seed: makes the sampling repeatable (0: not)
    :return: the shim's file (None when it cannot start) and why not
    """
    from .program import own_layout
    from .shim import layout_spec

    why = block_status()
    if why:
        return None, why
    layout = own_layout()
    if layout is None:
        return None, "allocation tracking off: this interpreter's layout is unknown"
    lib = _library()
    state = lib.onnxrt_alloc_sample_start(int(mean), layout_spec(layout).encode(), int(seed))
    if state < 0:
        return None, "allocation tracking off: the shim could not start sampling here"
    return shim_status().path, ""


def stop_sampling() -> None:
    """Stops what :func:`start_sampling` started (the hooks stay, passing calls on)."""
    if _LIB:
        _LIB[0].onnxrt_alloc_sample_stop()

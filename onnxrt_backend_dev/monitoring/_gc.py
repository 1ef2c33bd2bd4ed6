"""One pause of the cyclic garbage collector, for the stages that build hundreds of
thousands of objects that all survive (a call graph, a view's rows, a comparison): the
collector would only scan them again and again."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(keep: bool = False) -> Iterator[None]:
    """Pauses the cyclic garbage collector for the block, and restores it as it was
    (a block nested in another, or run with the collector off, leaves it off).

    :param keep: leave the collector as it is (``measure_time(keep_gc=True)``)
    """
    was_enabled = gc.isenabled()
    if not keep:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

"""Each Python function's allocated bytes, counted by valgrind's DHAT (``--count-bytes``).

DHAT records every heap block with the stack that allocated it; the counted run sets
``PYTHONMALLOC=malloc`` so that every object is one ``malloc`` (DHAT does not see
Python's arenas). The innermost perf trampoline on an allocating stack names the Python
function whose code allocated (its *own* bytes; the rest goes to ``<interpreter>``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .._errors import CounterError
from .callgraph import INTERPRETER, PerfMap, SourceLines

# valgrind's options: heap blocks only, stacks deep enough to reach the trampoline above
# the C code that allocated (the evaluation loop, an object's constructor, the allocator).
ARGS = ("--tool=dhat", "--mode=heap", "--num-callers=64")
# A larger file is refused rather than read (a program with millions of allocating stacks).
MAX_FILE = 1 << 30


def read_dhat(path: str, perf_map: str, cwd: str | None = None) -> dict[Any, int]:
    """The bytes each Python function allocated in a DHAT run.

    :param path: DHAT's output (JSON)
    :param perf_map: the interpreter's perf map
    :param cwd: the folder the program ran in (relative file names)
    :return: ``(file, first line, qualname) -> bytes``, with :data:`INTERPRETER`
    :raises CounterError: the file is missing, too large or not DHAT's
    """
    try:
        if os.path.getsize(path) > MAX_FILE:
            raise CounterError(f"DHAT's output {path!r} is over {MAX_FILE >> 20} MiB", usage=False)
        with open(path, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise CounterError(f"DHAT's output {path!r} cannot be read: {e}", usage=False) from None
    pps, frames = (doc.get("pps"), doc.get("ftbl")) if isinstance(doc, dict) else (None, None)
    if not isinstance(pps, list) or not isinstance(frames, list):
        raise CounterError(f"{path!r} is not DHAT's output (no pps, ftbl)", usage=False)
    perf, lines = PerfMap(perf_map), SourceLines(cwd)
    keys: dict[int, Any] = {}  # frame index -> its function, None when no trampoline

    def key_of(i: Any) -> Any:
        if not isinstance(i, int):
            return None
        if i not in keys:
            text = frames[i] if 0 <= i < len(frames) else ""
            found = perf.function(str(text).split(":", 1)[0].strip()) if text else None
            keys[i] = None if found is None else lines.key(*found)
        return keys[i]

    own: dict[Any, int] = {}
    for pp in pps:
        size, stack = (pp.get("tb"), pp.get("fs")) if isinstance(pp, dict) else (None, None)
        if not isinstance(size, int) or size <= 0 or not isinstance(stack, list):
            continue
        # The innermost trampoline: the stack is listed from the allocator outwards.
        key = next((k for k in map(key_of, stack) if k is not None), INTERPRETER)
        own[key] = own.get(key, 0) + size
    return own

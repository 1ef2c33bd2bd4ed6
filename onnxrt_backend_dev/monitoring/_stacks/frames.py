"""The one frame type of a stack, and the rule telling library frames from the user's.

Standard library only, and nothing heavy: the spy process and the sampler import it.
"""

from __future__ import annotations

import os
from functools import cache
from typing import NamedTuple


class SampledFrame(NamedTuple):
    """One frame of a stack: the one frame type of every view and exporter.

    :param name: qualified name (``co_qualname`` on 3.11+, ``co_name`` before), or a
        label (``thread MainThread``)
    :param file: the code's file as the interpreter has it (``~`` or ``""`` for built-ins)
    :param first_line: the function's first line (with name and file, its identity; 0
        when unknown)
    :param line: the line running (or calling) in this frame
    """

    name: str
    file: str
    first_line: int
    line: int

    def function(self) -> SampledFrame:
        """The function: this frame with its line set to the function's first line (one
        frame per function, what the exporters key on)."""
        return SampledFrame(self.name, self.file, self.first_line, self.first_line)

    @property
    def is_library(self) -> bool:
        """True for standard library, installed packages, frozen or built-in code."""
        return is_library_path(self.file)


@cache
def library_prefixes() -> tuple[str, ...]:
    """The standard library's folders, computed on first use (``sysconfig.get_paths``
    costs milliseconds the start of ``run`` and of a sampled ``profile`` need not pay)."""
    import sysconfig

    paths = sysconfig.get_paths()
    prefixes = {paths.get("stdlib", ""), paths.get("platstdlib", "")}
    return tuple(sorted(p.replace("\\", "/").rstrip("/") + "/" for p in prefixes if p))


_LIBRARY_MARKERS = ("site-packages/", "dist-packages/", "<frozen ", "lib/python3")


# This package's own folder: its code is a library's to every view, installed or not
# (in a checkout, ``monitor()`` starting its sampler inside a block is not user code).
_OWN_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))).replace("\\", "/")
_OWN_FOLDER += "/"


def is_library_path(filename: str) -> bool:
    """Tells if a frame's file belongs to the standard library, an installed package,
    this package itself or the interpreter (built-ins, frozen modules).

    :param filename: the file as stored in the profile
    :return: True for library frames
    """
    name = filename.replace("\\", "/")
    if name in ("~", "", "<built-in>") or name.startswith(("<frozen", _OWN_FOLDER)):
        return True
    if name.startswith(library_prefixes()):
        return True
    return any(m in name for m in _LIBRARY_MARKERS)

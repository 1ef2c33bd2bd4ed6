"""Which frames of a sampled stack are the user's: not a library, not this tool, not the
console script that launched it; and the one-line ``peak ... in f (file.py:12)`` label.

Standard library only (and :mod:`.._stacks.frames`): the models import it lazily for
their summaries without importing the attribution.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Sequence

from .._stacks.frames import is_library_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._stacks.frames import SampledFrame

# Frames of this tool (the spy's own calls, stop()) are never the user's code.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Console scripts (``bin/onnxrt-monitoring``) launch this tool: an installed entry
# point, never the user's code.
_SCRIPTS = sysconfig.get_paths().get("scripts", "")
_SCRIPTS_DIR = os.path.abspath(_SCRIPTS) + os.sep if _SCRIPTS else "\0"  # "\0": none


def frame_label(frame: SampledFrame) -> str:
    """``function (file.py:line)``: how a frame is named in every view (the summary, the
    table, ``peak_stack``)."""
    return f"{frame.name} ({os.path.basename(frame.file)}:{frame.line})"


def is_user_frame(frame: SampledFrame) -> bool:
    """Tells if a frame is the user's code (not a library, not this tool)."""
    name = frame.file
    return not (is_library_path(name) or name.startswith(_OWN_DIR) or name.startswith(_SCRIPTS_DIR))


def is_own_frame(frame: SampledFrame) -> bool:
    """Tells if a frame is this tool's (the spy's start and stop, the CLI running a script)."""
    return frame.file.startswith(_OWN_DIR)


def user_view(stack: Sequence[SampledFrame]) -> tuple[SampledFrame, ...]:
    """The stack as the user sees it: without the outer frames that lead to the user's
    code (a runner, runpy, and everything down to this tool when it runs the user's
    script) when there is user code, and without this tool's frames at the inner end
    (the spy starting or stopping).

    :param stack: outermost first
    :return: the frames kept, none for this tool's own work (no user frame, one of this
        tool's frames)
    """
    end = len(stack)
    while end > 0 and is_own_frame(stack[end - 1]):
        end -= 1
    # This tool calling the user's code (spy --where running a script): it starts there.
    first = next((i + 1 for i in range(end - 1, -1, -1) if is_own_frame(stack[i])), 0)
    start = first
    while start < end and not is_user_frame(stack[start]):
        start += 1
    if start < end:
        return tuple(stack[start:end])
    if 0 < first < end:  # this tool ran library code only (spy --where -m json.tool)
        return tuple(f for f in stack[first:end] if not _is_runner(f))
    return () if any(is_own_frame(f) for f in stack) else tuple(stack)


def _is_runner(frame: SampledFrame) -> bool:
    """Tells if a frame is runpy's, which runs a module or a script for this tool."""
    name = frame.file.replace("\\", "/")
    return name.endswith("/runpy.py") or name == "<frozen runpy>"


def innermost_user(stack: Sequence[SampledFrame]) -> int:
    """Index of the innermost user frame of a stack (outermost first, not empty), the
    innermost frame if none is."""
    for i in range(len(stack) - 1, -1, -1):
        if is_user_frame(stack[i]):
            return i
    return len(stack) - 1


def peak_line(
    peak: float, peak_time: float, stack: Sequence[SampledFrame] | None, depth: int = 3
) -> str:
    """``peak 427 MiB at 1.25 s in groupby_sum (script.py:12) <- main (script.py:30)``:
    the innermost user frames at the peak, innermost first.

    :param peak: bytes
    :param peak_time: seconds since the start
    :param stack: the stack at the peak, outermost first
    :param depth: user frames shown at most
    """
    from .._format import format_bytes

    line = f"peak {format_bytes(peak)} at {peak_time:.2f} s"
    if not stack:
        return line + " (no stack sampled)"
    users = _fold_comprehensions([f for f in stack if is_user_frame(f)] or [stack[-1]])
    shown = [frame_label(f) for f in users[::-1][:depth]]
    return f"{line} in {' <- '.join(shown)}"


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _fold_comprehensions(stack: list[SampledFrame]) -> list[SampledFrame]:
    """A comprehension shown as the function around it, at the comprehension's line (as
    Python 3.12 inlines them); frames outermost first."""
    folded: list[SampledFrame] = []
    for f in stack:
        outer = folded[-1] if folded else None
        if outer is not None and f.name.endswith(_COMPREHENSIONS) and f.file == outer.file:
            folded[-1] = outer._replace(line=f.line)
            continue
        folded.append(f)
    return folded

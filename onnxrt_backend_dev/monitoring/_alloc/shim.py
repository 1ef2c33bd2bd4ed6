"""Where the compiled shim is, whether it can run, and the environment that loads it into
a program (``LD_PRELOAD`` and the settings it reads at its start).

The shim is an optional extension built by ``pip install .``: without a C compiler the
package installs without it, and :func:`shim_status` says why allocation tracking is off.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Mapping
from typing import NamedTuple

DEFAULT_MEAN = 256 * 1024  # bytes between two samples, on average
OFF_VARIABLE = "ONNXRT_MONITORING_ALLOC"  # "0" (or off, false, no) turns it off
_OFF = ("0", "off", "false", "no")
_ON = ("", "1", "on", "true", "yes")
NOT_BUILT = "allocation tracking off: the shim was not built (no C compiler at install)"
# The settings the shim reads (see shim.c); all removed from what is not the program.
SETTINGS = (
    "ONNXRT_ALLOC_MEAN",
    "ONNXRT_ALLOC_LAYOUT",
    "ONNXRT_ALLOC_SHIM",
    "ONNXRT_ALLOC_SEED",
    "ONNXRT_ALLOC_EXIT_WAIT_NS",
    "ONNXRT_ALLOC_CHILDREN",
)


class ShimStatus(NamedTuple):
    """Whether allocation tracking can run here.

    :param path: the shim's file (None when it cannot)
    :param reason: why it cannot (empty when it can)
    """

    path: str | None
    reason: str


def shim_path() -> str | None:
    """The built shim's file, None when it was not built."""
    folder = os.path.dirname(os.path.abspath(__file__))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_shim" + suffix)
        if os.path.isfile(path):
            return path
    return None


def shim_status(environ: Mapping[str, str] | None = None) -> ShimStatus:
    """Whether a program run by this tool can have its allocations tracked.

    :param environ: the environment (this process's by default)
    """
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return ShimStatus(None, f"allocation tracking off: not implemented on {sys.platform}")
    try:
        if not check_switch(env):
            return ShimStatus(None, f"allocation tracking off: {OFF_VARIABLE}={env[OFF_VARIABLE]}")
    except ValueError as e:
        return ShimStatus(None, f"allocation tracking off: {e}")
    path = shim_path()
    if path is None:
        return ShimStatus(None, NOT_BUILT)
    return ShimStatus(path, "")


def check_switch(environ: Mapping[str, str]) -> bool:
    """Whether ``ONNXRT_MONITORING_ALLOC`` lets allocation tracking run.

    :param environ: the environment
    :return: False for ``0``, ``off``, ``false``, ``no``; True when unset, empty or ``1``,
        ``on``, ``true``, ``yes`` (any case)
    :raises BadValue: another value (``abc`` turned nothing off, silently)
    """
    from .._errors import BadValue

    raw = environ.get(OFF_VARIABLE, "")
    value = raw.strip().lower()
    if value in _OFF or value in _ON:
        return value not in _OFF
    raise BadValue(f"{OFF_VARIABLE} must be 0 or 1 (off or on), got {raw!r}")


def layout_spec(layout: object) -> str:
    """The frame offsets the shim walks, as ``ONNXRT_ALLOC_LAYOUT`` says them:
    ``minor,leaf,cframe,back,code,instr,lasti,owner,firstline,codebytes`` (-1 for a field
    the version has not; ``codebytes``: 3.10's ``co_code``, -1 where the code object
    holds its bytecode itself).

    :param layout: an :class:`.._observe.layouts.Layout`
    """
    offsets: Mapping[str, int] = layout.offsets  # type: ignore[attr-defined]
    minor = int(layout.version[1])  # type: ignore[attr-defined]
    if "tstate.cframe" in offsets:
        leaf, cframe = offsets["tstate.cframe"], offsets["cframe.current_frame"]
    elif "tstate.current_frame" in offsets:
        leaf, cframe = offsets["tstate.current_frame"], -1
    else:
        leaf, cframe = offsets["tstate.frame"], -1
    fields = [
        minor,
        leaf,
        cframe,
        offsets["frame.back"],
        offsets["frame.code"],
        offsets.get("frame.instr", -1),
        offsets.get("frame.lasti", -1),
        offsets.get("frame.owner", -1),
        offsets["code.firstlineno"],
        offsets.get("code.code", -1),
    ]
    return ",".join(str(int(v)) for v in fields)


def program_env(
    base: Mapping[str, str],
    path: str,
    layout: object | None,
    mean: int = DEFAULT_MEAN,
    exit_wait: float = 2.0,
    seed: int | None = None,
    children: bool = False,
) -> dict[str, str]:
    """The environment of a program whose allocations are tracked: the shim first in
    ``LD_PRELOAD`` (before an allocator the user preloads, which then serves it), and
    its settings. The shim takes itself out of ``LD_PRELOAD`` at its start, so the
    program's own subprocesses do not load it, unless ``children``.

    :param base: the environment the program would have had
    :param path: the shim's file
    :param layout: the interpreter's layout (None: allocations without Python stacks)
    :param mean: bytes between two samples on average (0: counted, not sampled)
    :param exit_wait: seconds the program waits at most at its exit for its last records
        to be read (only while they are not)
    :param seed: makes the sampling repeatable (tests)
    :param children: the program's subprocesses load the shim too
    """
    env = {k: v for k, v in base.items() if k not in SETTINGS}
    preload = [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    env["LD_PRELOAD"] = ":".join([path, *(p for p in preload if p != path)])
    env["ONNXRT_ALLOC_SHIM"] = path
    env["ONNXRT_ALLOC_MEAN"] = str(int(mean))
    env["ONNXRT_ALLOC_EXIT_WAIT_NS"] = str(int(max(exit_wait, 0.0) * 1e9))
    if layout is not None:
        env["ONNXRT_ALLOC_LAYOUT"] = layout_spec(layout)
    if seed is not None:
        env["ONNXRT_ALLOC_SEED"] = str(int(seed))
    if children:
        env["ONNXRT_ALLOC_CHILDREN"] = "1"
    return env


def preloaded_allocator(environ: Mapping[str, str]) -> str:
    """The allocator a user preloads (jemalloc, tcmalloc, mimalloc), '' if none.

    :param environ: the program's environment
    """
    for entry in environ.get("LD_PRELOAD", "").replace(" ", ":").split(":"):
        name = os.path.basename(entry)
        if any(k in name for k in ("jemalloc", "tcmalloc", "mimalloc", "hoard", "scudo")):
            return name
    return ""

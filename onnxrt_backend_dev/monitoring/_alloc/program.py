"""Allocation tracking for a program the command starts: the environment that loads the
shim into it, and the tracker the observer reads it with.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import NamedTuple

from .._errors import BadValue
from .shim import DEFAULT_MEAN, preloaded_allocator, program_env, shim_status
from .tracker import AllocTracker

MAX_MEAN = 1 << 40
# Seconds a program waits at its exit, at most, for its last records to be read (it waits
# only while the observer has not read them: a few milliseconds).
EXIT_WAIT = 2.0


class AllocPlan(NamedTuple):
    """How a program's allocations will be tracked.

    :param env: the program's environment (None: unchanged, not tracked)
    :param make: makes the tracker for the program's pid (None: not tracked)
    :param note: why it is not tracked (empty when it is, or when it was turned off)
    :param preloaded: an allocator the user preloads (tracked through it)
    """

    env: dict[str, str] | None
    make: Callable[[int], AllocTracker] | None
    note: str
    preloaded: str


def check_mean(mean: int) -> int:
    """Refuses a sampling mean out of range (negative or absurd).

    :param mean: bytes between two samples (0: tracking off)
    """
    if not 0 <= mean <= MAX_MEAN:
        raise BadValue(f"the sampling mean must be between 0 and 1 TiB, got {mean}")
    return mean


def plan(
    mean: int = DEFAULT_MEAN,
    environ: Mapping[str, str] | None = None,
    layout: object | None = None,
    seed: int | None = None,
) -> AllocPlan:
    """Plans the tracking of a Python program run by this interpreter.

    :param mean: bytes between two samples on average (0: tracking off)
    :param environ: the program's environment (this process's by default)
    :param layout: this interpreter's layout (found when not given)
    :param seed: makes the sampling repeatable (tests)
    """
    env = dict(os.environ if environ is None else environ)
    if mean <= 0:
        return AllocPlan(None, None, "", "")
    status = shim_status(env)
    path = status.path
    if path is None:
        return AllocPlan(None, None, status.reason, "")
    if layout is None:
        layout = own_layout()
    program = program_env(env, path, layout, mean, exit_wait=EXIT_WAIT, seed=seed)

    preloaded = preloaded_allocator(env)

    def make(pid: int) -> AllocTracker:
        tracker = AllocTracker(pid, path)
        tracker.preloaded = preloaded
        return tracker

    return AllocPlan(program, make, "", preloaded)


def own_layout() -> object | None:
    """This interpreter's layout (the program runs the same one), None if unreadable."""
    from .._errors import ObserveError
    from .._observe.target import locate

    try:
        return locate(os.getpid()).layout
    except ObserveError:
        return None

"""How often to sample, in a module of its own: the command line reads these before it
knows whether it samples at all (no import of the samplers for that).

The observer's default (1 ms) comes from its measured cost: about 25 µs of its own CPU a
sample with the C walk, 2.5 % of one core at 1 kHz (``benchmarks/RESULTS.md``); the
in-process sampler's (2 ms) from its cost inside the program.
"""

from __future__ import annotations

from typing import Any

from .._validate import check_number

DEFAULT_INTERVAL = 0.002  # seconds: 25 samples in a 50 ms program, ~1.0x (RESULTS.md)
OBSERVER_INTERVAL = 0.001  # the observer's, outside the program
MIN_INTERVAL = 0.0001  # below, the handler alone would take most of the time
MAX_INTERVAL = 1.0  # above, a sample says little (py-spy's slowest rate is 1 Hz)


def check_interval(interval: Any, name: str = "interval", minimum: float = MIN_INTERVAL) -> float:
    """The sampling interval, in seconds, checked (every command's and function's).

    :param interval: what the caller gave
    :param name: the parameter's name, for the message
    :param minimum: the least it may be
    """
    return check_number(name, interval, minimum=minimum, maximum=MAX_INTERVAL)

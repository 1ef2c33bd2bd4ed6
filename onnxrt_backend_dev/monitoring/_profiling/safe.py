"""Escaping of profile data for the contexts it is written into.

Names, files and even figures come from a ``.prof`` file, which anybody may have
crafted: nothing of it reaches a page or a script unescaped.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .._errors import BadData
from .._html import script_json

__all__ = ["safe_count", "safe_time", "script_json"]  # script_json: the one of _html


def safe_count(value: Any, what: str = "a call count") -> int:
    """A call count as an int, whatever a hand-made graph holds.

    :param value: the count
    :param what: what it is, for the message
    :return: the count
    :raises ValueError: not an integer (a string, a float with a fraction, NaN...)
    """
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer():  # False for NaN, inf
            return int(value)
        try:
            return operator.index(value)  # numpy integers
        except TypeError:
            pass
    raise BadData(f"{what} must be an integer, got {type(value).__name__} {value!r:.60}")


def safe_time(value: Any, what: str = "a time") -> float:
    """A time as a finite float.

    :param value: the time
    :param what: what it is, for the message
    :return: the time
    :raises ValueError: not a finite number
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        f = float(value)  # numpy floats are floats
        if math.isfinite(f):
            return f
    raise BadData(f"{what} must be a finite number, got {type(value).__name__} {value!r:.60}")

"""Escaping of profile data for the contexts it is written into.

Names, files and even figures come from a ``.prof`` file, which anybody may have
crafted: nothing of it reaches a page or a script unescaped.
"""

from __future__ import annotations

import json
import math
import operator
from typing import Any

from .._errors import BadData

# Characters that could end a <script> element, start an HTML entity or end a JS line
# (U+2028 and U+2029 are line terminators in older JavaScript engines).
_SCRIPT_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_TABLE = str.maketrans(_SCRIPT_ESCAPES)


def script_json(data: Any) -> str:
    """Serializes ``data`` as JSON that can be pasted inside an HTML ``<script>`` element.

    :param data: JSON-serializable data, without NaN or infinities
    :return: the JSON text, with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
    :raises ValueError: the data holds NaN or an infinity (JSON has no such token)
    """
    return json.dumps(data, allow_nan=False).translate(_SCRIPT_TABLE)


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

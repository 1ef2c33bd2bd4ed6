"""Escaping of profile data for the contexts it is written into.

Names, files and even figures come from a ``.prof`` file, which anybody may have
crafted: nothing of it reaches a page or a script unescaped.
"""

from __future__ import annotations

import json
from typing import Any

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

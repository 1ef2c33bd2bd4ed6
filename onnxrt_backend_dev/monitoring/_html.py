"""The one escaping layer of every HTML page the package writes: names, files and source
lines may have been crafted, so text and attribute values go through :func:`text`, data
for a page's script through :func:`script_json`. A page's script writes names with
``textContent``, or through its own ``esc`` before ``innerHTML``.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["script_json", "text"]

# Characters that could end a <script> element, open a comment or an entity, or end a
# line of JavaScript (U+2028 and U+2029 in older engines).
_SCRIPT_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_TABLE = str.maketrans(_SCRIPT_ESCAPES)


def text(value: object) -> str:
    """``value`` as text of an HTML element or a quoted attribute's value.

    :param value: anything; ``str()`` of it is escaped
    :return: the escaped text (``&``, ``<``, ``>``, ``"`` and ``'``)
    """
    return html.escape(str(value), quote=True)


def script_json(data: Any) -> str:
    """Serializes ``data`` as JSON that can be pasted inside an HTML ``<script>`` element.

    :param data: JSON-serializable data, without NaN or infinities
    :return: the JSON text, with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
    :raises ValueError: the data holds NaN or an infinity (JSON has no such token)
    """
    return json.dumps(data, allow_nan=False).translate(_SCRIPT_TABLE)

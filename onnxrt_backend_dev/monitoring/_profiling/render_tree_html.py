"""The call tree as one self-contained HTML page (no network, no external file): it opens
with the hottest path expanded down to the first row under 5 %, with search and
expand/collapse. The template is ``tree.html`` beside this module; the data
goes in through :func:`script_json <.safe.script_json>`, the title through
:func:`html.escape`.
"""

from __future__ import annotations

import math
from importlib import resources
from typing import Any

from .._html import text as escape_text
from .model import ProfileNode
from .render_tree_text import tree_file
from .view_tree import CallTree, build_tree

#: Rows under this share stay closed when the page opens.
OPEN_SHARE = 0.05


def _template() -> str:
    return resources.files(__package__).joinpath("tree.html").read_text("utf-8")


def _number(value: Any) -> float:
    """A figure as a finite float for JSON (0 for what is not a finite number)."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def tree_data(tree: CallTree, program: str) -> dict[str, Any]:
    """The tree as the page's data: a table of strings and one short list per row,
    ``[parent, name, file, calls, time, recursive, folded, reentry]`` (``name`` and ``file``
    index the strings, -1 for a folded row).

    :param tree: the call tree
    :param program: the program's name
    :return: JSON-ready data
    """
    strings: dict[str, int] = {}
    rows: list[list[Any]] = []

    def ref(text: str) -> int:
        index = strings.get(text)
        if index is None:
            index = strings[text] = len(strings)
        return index

    for item in tree.items:
        node = item.node
        if node is None:
            name, file = -1, -1
        else:
            name = ref(node.func_name)
            short = tree_file(node.filename)
            file = ref(f"{short}:{node.line}" if short else "")
        rows.append(
            [
                item.parent,
                name,
                file,
                _number(item.calls),
                round(_number(item.time), 9),
                _number(item.recursive),
                item.folded,
                1 if item.reentry else 0,
            ]
        )
    return {
        "program": program,
        "total": _number(tree.total),
        "fold": tree.fold_share,
        "capped": tree.capped,
        "open": OPEN_SHARE,
        "strings": list(strings),
        "rows": rows,
    }


def render_tree_html(
    root: ProfileNode,
    title: str = "Call tree",
    program: str | None = None,
    **options: Any,
) -> str:
    """Renders the call tree of a graph as an HTML page.

    :param root: the root of the graph
    :param title: the page's title (``Call tree of PROGRAM`` when left to its default
        and ``program`` is given)
    :param program: the program's name (the root's name if None)
    :param options: given to :func:`build_tree <.view_tree.build_tree>`
    :return: the page
    """
    from .._html import script_json

    tree = build_tree(root, **options)
    top = tree.items[0].node
    name = program if program is not None else (top.func_name if top is not None else "?")
    if title == "Call tree" and program is not None:
        title = f"Call tree of {program}"
    page = _template().replace("__TITLE__", escape_text(title))
    return page.replace("__DATA__", script_json(tree_data(tree, name)))

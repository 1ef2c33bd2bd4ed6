"""The call tree as text, the way pyinstrument prints it: a header naming the program,
the total time and the columns, then one row per call edge, children hottest first.

Function names are never cut; file names are shortened in their path part only
(``json/encoder.py``, not ``/usr/lib/python3.11/json/encoder.py``).
"""

from __future__ import annotations

import io
from typing import Any, TextIO

from .._errors import BadValue
from .._format import one_line
from .._sampling.view import short_file
from .model import ProfileNode
from .view_tree import CallTree, TreeItem, build_tree


def tree_file(filename: str) -> str:
    """A node's file as the trees show it (:func:`short_file`, the one of every view),
    empty for a built-in (cProfile's ``~``).

    :param filename: the node's file
    :return: the short path
    """
    return "" if filename in ("~", "") else short_file(filename)


def _location(node: ProfileNode) -> str:
    file = tree_file(node.filename)
    return one_line(f"  {file}:{node.line}") if file else ""


def time_unit(total: float) -> tuple[str, float]:
    """The unit the times of a tree are written in, chosen from its total so that the
    rows read with three decimals.

    :param total: seconds
    :return: the unit's name and the factor from seconds
    """
    if total >= 1.0:
        return "s", 1.0
    if total >= 1e-3:
        return "ms", 1e3
    return "us", 1e6


def _count(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError, OverflowError):
        return "?"


def _label(item: TreeItem) -> str:
    node = item.node
    if node is None:
        return f"{item.folded} more ({100 * item.share:.1f} %)"
    text = one_line(node.func_name) + _location(node)
    if item.reentry:
        text += "  [re-entered: already on the path above]"
    if item.recursive:
        text += f"  [recursive: +{_count(item.recursive)} calls folded here]"
    return text


# The tree's guides: (branch, last branch, continued, nothing below), by style.
GUIDES = {
    "unicode": ("├─ ", "└─ ", "│  ", "   "),
    "ascii": ("|- ", "`- ", "|  ", "   "),
}


def write_tree_text(
    tree: CallTree,
    stream: TextIO,
    program: str | None = None,
    max_indent: int = 30,
    guides: str = "unicode",
) -> None:
    """Writes the call tree into ``stream``.

    :param tree: the tree from :func:`build_tree <.view_tree.build_tree>`
    :param stream: a text stream
    :param program: the program's name for the header (the root's name if None)
    :param max_indent: levels drawn; deeper rows are drawn at that level with their
        depth in brackets
    :param guides: ``unicode`` (box-drawing characters) or ``ascii``, for a terminal
        that cannot show the former
    """
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    if guides not in GUIDES:
        raise BadValue(f"guides must be one of {sorted(GUIDES)}, got {guides!r}")
    branch, last, through, blank = GUIDES[guides]
    items = tree.items
    root = items[0].node
    name = program if program is not None else (root.func_name if root else "?")
    fold = (
        f"rows under {100 * tree.fold_share:.1f} % folded"
        if tree.fold_share > 0
        else "all rows shown"
    )
    if tree.capped:
        fold += f", the rest past {tree.capped:,} rows folded"
    unit, scale = time_unit(tree.total)
    stream.write(
        f"Call tree of {one_line(name)}: {tree.total * scale:.3f} {unit} in total "
        f"(cProfile; shares of the total, {_ORDERS.get(tree.order, tree.order)}, {fold})\n"
        f"{'share':>7}  {f'time ({unit})':>10}  {'calls':>11}  function  file:line\n"
    )
    # The guides under each row, capped at max_indent levels.
    below: list[str] = []
    lines: list[str] = []
    deep = 0
    for item in items:
        if item.parent < 0:
            guide, cont = "", ""
        else:
            up = below[item.parent]
            guide = up + (last if item.last else branch)
            cont = up if item.depth >= max_indent else up + (blank if item.last else through)
        below.append(cont)
        if item.depth > max_indent:
            deep += 1
            guide += f"[{item.depth}] "
        calls = "" if item.node is None else _count(item.calls)
        lines.append(
            f"{100 * item.share:6.1f}%  {item.time * scale:10.3f}  {calls:>11}  "
            f"{guide}{_label(item)}\n"
        )
        if len(lines) >= 2048:
            stream.write("".join(lines))
            lines.clear()
    stream.write("".join(lines))
    if deep:
        stream.write(
            f"[{deep} rows deeper than {max_indent} levels are drawn at level {max_indent} "
            "with their depth in brackets]\n"
        )


# How the header describes the order of the children, by sort name.
_ORDERS = {
    "cumulative": "children hottest first",
    "time": "children by own time",
    "line": "children in line order",
}


def render_tree_text(
    root: ProfileNode,
    program: str | None = None,
    max_indent: int = 30,
    guides: str = "unicode",
    **options: Any,
) -> str:
    """The call tree rooted at the program's entry point, as text.

    :param root: the root of the graph
    :param program: the program's name for the header
    :param max_indent: see :func:`write_tree_text`
    :param guides: see :func:`write_tree_text`
    :param options: given to :func:`build_tree <.view_tree.build_tree>` (``fold_share``,
        ``filter_node``, ``sort_key``, ``max_rows`` and the filters)
    :return: text
    """
    out = io.StringIO()
    tree = build_tree(root, **options)
    write_tree_text(tree, out, program=program, max_indent=max_indent, guides=guides)
    return out.getvalue()

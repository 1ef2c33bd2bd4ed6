"""The tree of rows as text, in the reference's format."""

from __future__ import annotations

from collections.abc import Sequence

from ._callgraph import Row


def align_text(text: str, size: int) -> str:
    """Pads ``text`` to ``size`` characters or elides its middle with ``...``.

    :param text: text to align
    :param size: width of the column; text is returned as is when ``size <= 0``
    :return: aligned text
    """
    if size <= 0:
        return text
    if len(text) <= size:
        return text + " " * (size - len(text))
    if size <= 3:
        return text[:size]
    keep = size - 3
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + "..." + (text[len(text) - tail :] if tail else "")


def _count_width(rows: Sequence[Row]) -> int:
    """Width of the call count columns (a sign space and the longest count)."""
    longest = max(len(str(abs(int(v)))) for r in rows for v in (r.nc1, r.nc2))
    return longest + 1


def render_text(
    rows: Sequence[Row], fct_width: int = 60, show_share: bool = True, max_indent: int = 30
) -> str:
    """Renders rows as the reference's text tree.

    :param rows: rows from :func:`tree_rows <._callgraph.tree_rows>`
    :param fct_width: width of the function name column
    :param show_share: append each row's share of the total time
    :param max_indent: indentation levels drawn before folding deeper rows at that
        level, their depth in brackets
    :return: text
    """
    if fct_width < 0:
        raise ValueError(f"fct_width must be >= 0, got {fct_width!r}")
    if max_indent < 1:
        raise ValueError(f"max_indent must be >= 1, got {max_indent!r}")
    if not rows:
        return ""
    dg = _count_width(rows)
    lines = []
    folded = 0
    for r in rows:
        name = r.node.func_name
        indent = r.indent
        if indent > max_indent:
            folded += 1
            name = f"[{indent}] {name}"
            indent = max_indent
        pad = indent * 4
        line = (
            f"{' ' * pad}{align_text(name, fct_width - pad)}"
            f" -- {int(r.nc1): {dg}d} {int(r.nc2): {dg}d}"
            f" -- {r.tin:1.5f} {r.tall:1.5f} -- {r.node.key} ({r.node.func_name})"
        )
        if r.ref:
            line += " +++"
        if show_share:
            line += f" -- {r.share * 100:.1f}%"
        lines.append(line)
    if folded:
        lines.append(
            f"[{folded} rows deeper than {max_indent} levels are drawn at level "
            f"{max_indent} with their depth in brackets]"
        )
    return "\n".join(lines)

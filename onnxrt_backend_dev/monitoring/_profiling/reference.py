"""The reference's renderings of a graph: :meth:`ProfileNode.as_dict
<.model.ProfileNode.as_dict>`, ``to_text`` (the forest as text, in the reference's
format: :func:`render_segments_text`) and ``to_json`` (the rows nested:
:func:`nest_rows`), as functions of the node.

The model reaches this module through the package's ``reference_rendering`` on first
use, so importing the model imports no renderer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter, mod
from typing import Any

from .._errors import BadValue
from .._format import one_line
from .._gc import gc_paused
from .filters import ViewOptions, call_dict
from .model import FilterNode, ProfileNode
from .view_reference import Segment, TreeRows


def as_dict(
    node: ProfileNode, filter_node: FilterNode | None, sort_key: Any, **options: Any
) -> list[dict[str, Any]]:
    """See :meth:`ProfileNode.as_dict <.model.ProfileNode.as_dict>`: the rows as the
    reference's dictionaries, plus ``share`` of the total (and ``more='+'`` for a
    reference)."""
    rows = []
    with gc_paused():
        view = TreeRows(node, filter_node, sort_key, ViewOptions(**options))
        inv_total = 1.0 / view.total if view.total > 0 else 0.0
        for func, depth, el, ref in view.raw():
            d = call_dict(func, depth, el)
            d["share"] = el[3] * inv_total
            if ref:
                d["more"] = "+"
            rows.append(d)
    return rows


def to_text(
    node: ProfileNode,
    filter_node: FilterNode | None,
    sort_key: Any,
    fct_width: int,
    show_share: bool,
    max_indent: int,
    **options: Any,
) -> str:
    """See :meth:`ProfileNode.to_text <.model.ProfileNode.to_text>`."""
    view = ViewOptions(**options)
    with gc_paused():
        rows = TreeRows(node, filter_node, sort_key, view)
        return render_segments_text(
            rows.segments(),
            fct_width=fct_width,
            max_indent=max_indent,
            max_count=rows.max_count,
            # a second walk of the same view (a walk marks what it expanded), in case
            # the rows' counts need narrower columns than the graph's largest count
            segments_again=rows.segments_again,
            share_of=rows.total if show_share else None,
        )


def to_json(
    node: ProfileNode, filter_node: FilterNode | None, sort_key: Any, as_str: bool, **kwargs: Any
) -> str | dict[str, Any]:
    """See :meth:`ProfileNode.to_json <.model.ProfileNode.to_json>`: ``{"profile":
    nested}`` (:func:`nest_rows`), the rest of ``kwargs`` given to :func:`json.dumps`."""
    opts = {k: kwargs.pop(k) for k in ViewOptions.FIELDS if k in kwargs}
    max_indent = kwargs.pop("max_indent", 30)
    with gc_paused():
        nested, folded = nest_rows(as_dict(node, filter_node, sort_key, **opts), max_indent)
        doc: dict[str, Any] = {"profile": nested}
        if folded:
            doc["folded"] = (
                f"{folded} rows deeper than {max_indent} levels are attached at level "
                f"{max_indent}; details.indent keeps their depth"
            )
        if not as_str:
            return doc
        # JSON has no NaN or Infinity token: refuse them rather than write invalid JSON.
        kwargs.setdefault("allow_nan", False)
        return json.dumps(doc, **kwargs)


def nest_rows(rows: Sequence[dict[str, Any]], max_indent: int = 30) -> tuple[dict[str, Any], int]:
    """Nests rows as ``{name: {"details": {...}, "calls": {...}}}``, rows deeper than
    ``max_indent`` attached at that level (``details["indent"]`` keeps their depth) so
    that any JSON parser reads the nesting.

    :param rows: rows of :func:`as_dict`
    :param max_indent: deepest nesting level
    :return: the nested dictionary and the number of folded rows
    """
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    width = len(str(max((abs(int(r["nc1"])) for r in rows), default=0)))
    top: dict[str, Any] = {}
    # containers[i] is the "calls" dictionary receiving rows of level i.
    containers: list[dict[str, Any]] = [top]
    folded = 0
    for r in rows:
        level = r["indent"]
        if level > max_indent:
            folded += 1
            level = max_indent
        level = min(level, len(containers) - 1)
        del containers[level + 1 :]
        target = containers[level]
        sep = ":::" if level == 0 else ":"
        name = f"{int(r['nc1']):<{width}d}-{r['tall']:1.5f}{sep}{r['fct']}"
        if name in target:
            # Numbered by the container's size, then past any function named so.
            base, n = name, len(target)
            while name in target:
                name, n = f"{base}#{n}", n + 1
        item: dict[str, Any] = {"details": r}
        target[name] = item
        calls: dict[str, Any] = {}
        item["calls"] = calls
        containers.append(calls)
    _drop_empty_calls(top)
    return top, folded


def _drop_empty_calls(top: dict[str, Any]) -> None:
    stack = [top]
    while stack:
        for item in stack.pop().values():
            if item["calls"]:
                stack.append(item["calls"])
            else:
                del item["calls"]


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


def count_width(max_count: int) -> int:
    """Width of the count columns, the reference's rule: ``int(log10(max) + 1.5)`` (with
    the sign space of ``{: Nd}`` a count may overflow it by one character, as there); 1
    when no count is positive.

    :param max_count: the largest call count of the rows
    :return: the width
    """
    if max_count < 1:
        return 1
    return int(math.log(max_count) / math.log(10) + 1.5)


# Widest name column accepted: wider only pads every row with spaces.
MAX_FCT_WIDTH = 1000


def _check_widths(fct_width: Any, max_indent: int) -> None:
    if type(fct_width) is not int or not 0 <= fct_width <= MAX_FCT_WIDTH:
        raise BadValue(f"fct_width must be an int in [0, {MAX_FCT_WIDTH}], got {fct_width!r}")
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")


def _prefix(name: str, indent: int, fct_width: int, max_indent: int) -> str:
    """Indentation and aligned name; deeper than ``max_indent``, the depth in brackets."""
    if indent > max_indent:
        name = f"[{indent}] {name}"
        indent = max_indent
    pad = indent * 4
    return " " * pad + align_text(name, fct_width - pad)


def render_segments_text(
    segments: Iterable[Segment],
    fct_width: int = 60,
    max_indent: int = 30,
    max_count: int = 0,
    segments_again: Callable[[], Iterable[Segment]] | None = None,
    share_of: float | None = None,
) -> str:
    """Renders the segments of :meth:`TreeRows.segments
    <.view_reference.TreeRows.segments>` in the reference's format, each line one
    %-formatting of a template made once per function, depth and kind, in C loops
    (``map``): the name padded to ``fct_width`` minus the indent, ``-- nc1 nc2 -- tin
    tall -- file:line:func (func)``, ``+++`` for a reference, ``-- share%`` with
    ``share_of``.

    :param segments: the segments, streamed
    :param fct_width: width of the function name column (0 to 1000)
    :param max_indent: indentation levels drawn; deeper rows are drawn at that level,
        their depth in brackets
    :param max_count: a bound of the rows' call counts, sizing the count columns first
    :param segments_again: the segments once more, when the rows' largest count needs
        narrower columns than ``max_count`` (the reference sizes them from its rows)
    :param share_of: the total time each row's share is appended as a share of, None
        for no share column
    :return: text
    """
    _check_widths(fct_width, max_indent)
    hint = int(max_count)
    scale = None if share_of is None else (100.0 / share_of if share_of > 0 else 0.0)
    layout = (fct_width, max_indent, scale)
    text, top = _render_segments(segments, count_width(hint), *layout)
    if count_width(top) != count_width(hint) and segments_again is not None:
        text = _render_segments(segments_again(), count_width(top), *layout)[0]
    return text


_FIRST, _SECOND = itemgetter(0), itemgetter(1)


class _Templates(dict[ProfileNode, str]):
    """The %-templates of the lines of one depth and kind, by node, made on first use."""

    def __init__(
        self, depth: int, ref: bool, figures: str, fct_width: int, max_indent: int, share: str
    ):
        super().__init__()
        self.depth, self.ref, self.figures, self.share = depth, ref, figures, share
        self.fct_width, self.max_indent = fct_width, max_indent

    def __missing__(self, node: ProfileNode) -> str:
        name = one_line(node.func_name)
        head = _prefix(name, self.depth, self.fct_width, self.max_indent).replace("%", "%%")
        tail = f" -- {one_line(node.key)} ({name})".replace("%", "%%")
        line = f"{head}{self.figures}{tail}{' +++' if self.ref else ''}{self.share}"
        self[node] = line
        return line


def _format_lines(templates: list[str], els: list[Any]) -> list[str]:
    """Each template formatted with its figures, in one C loop (a hand-made graph's
    lists or longer tuples made 4-tuples when it fails)."""
    try:
        return list(map(mod, templates, els))
    except TypeError:
        return list(map(mod, templates, [(el[0], el[1], el[2], el[3]) for el in els]))


def _render_segments(
    segments: Iterable[Segment],
    width: int,
    fct_width: int,
    max_indent: int,
    scale: float | None,
) -> tuple[str, int]:
    """The text of the segments and their largest call count; ``scale`` turns a time
    into the share column's percentage (None: no share column)."""
    figures = f" -- % {width}d % {width}d -- %1.5f %1.5f"
    share = "" if scale is None else " -- %.1f%%"
    # By depth and kind: the lines' templates by node (a node shows at few depths).
    templates: dict[tuple[int, bool], _Templates] = {}
    lines: list[str] = []
    els: list[Any] = []
    add_lines, add_els = lines.extend, els.extend
    folded = 0
    for depth, nodes, seg_els, ref in segments:
        known = templates.get((depth, ref))
        if known is None:
            known = templates[depth, ref] = _Templates(
                depth, ref, figures, fct_width, max_indent, share
            )
        add_lines(map(known.__getitem__, nodes))
        add_els(seg_els)
        if depth > max_indent:
            folded += len(nodes)
    if not els:
        return "", 0
    top = max(max(map(_FIRST, els)), max(map(_SECOND, els)))
    if scale is not None:
        els = [(el[0], el[1], el[2], el[3], el[3] * scale) for el in els]
    lines = _format_lines(lines, els)
    if folded:
        lines.append(
            f"[{folded} rows deeper than {max_indent} levels are drawn at level "
            f"{max_indent} with their depth in brackets]"
        )
    return "\n".join(lines), int(top)

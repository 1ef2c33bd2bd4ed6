"""The reference forest as one self-contained HTML page (the template ``forest.html``
beside this module): the rows as JSON and a script showing them as a tree (expand and
collapse, search, shares, ``+++`` references jumping to the function's entry).
"""

from __future__ import annotations

import math
import operator
from importlib import resources
from itertools import chain, count, repeat
from operator import itemgetter
from typing import Any

from .._errors import BadData
from .._html import script_json
from .._html import text as escape_text
from .filters import ViewOptions
from .load import valid_columns
from .model import FilterNode, ProfileNode
from .view_reference import TreeRows


def render_forest_html(
    root: ProfileNode,
    title: str = "Call tree",
    filter_node: FilterNode | None = None,
    sort_key: Any = "cumulative",
    **options: Any,
) -> str:
    """Renders the call tree of a graph as an HTML page.

    :param root: the node to start from
    :param title: page title
    :param filter_node: see :meth:`ProfileNode.as_dict <.model.ProfileNode.as_dict>`
    :param sort_key: order of callees
    :param options: filters, see :class:`ViewOptions <.filters.ViewOptions>`
    :return: the page
    """
    view = TreeRows(root, filter_node, sort_key, ViewOptions(**options))
    payload = _payload(view)
    page = resources.files(__package__).joinpath("forest.html").read_text("utf-8")
    page = page.replace("__TITLE__", escape_text(title))
    return page.replace("__DATA__", payload)


def _payload(view: TreeRows) -> str:
    """The page's data: ``{"total", "names": [[fct, where]...], "figures": [indent,
    name's index, nc1, nc2, tin, tall, ref, ...]}``, seven numbers per row.

    The page writes the figures as HTML, so each must be a number: checked in C loops
    (a profile read from a file always passes), else row by row with a message naming
    the function (a hand-made graph may hold anything). ``%r`` of a finite float is the
    text JSON writes.
    """
    total = safe_time(view.total, "the total time")
    nodes: list[ProfileNode] = []
    figures: list[Any] = []
    depths: list[int] = []
    refs: list[int] = []
    # Segments (rows of one depth and kind) become columns with C loops.
    for depth, seg_nodes, seg_els, ref in view.segments():
        nodes.extend(seg_nodes)
        figures.extend(seg_els)
        depths.extend(repeat(depth, len(seg_nodes)))
        refs.extend(repeat(1 if ref else 0, len(seg_nodes)))
    # Functions numbered in the order of their first row.
    index = dict(zip(dict.fromkeys(nodes), count()))
    names = [[str(n.func_name), str(n.key)] for n in index]
    columns = [list(map(itemgetter(i), figures)) for i in range(4)]
    if valid_columns(columns):
        counts1, counts2 = columns[0], columns[1]
        tins, talls = list(map(float, columns[2])), list(map(float, columns[3]))
    else:
        counts1, counts2, tins, talls = _checked_columns(nodes, figures, names, index, total)
    ids = list(map(index.__getitem__, nodes))
    numbers = list(zip(depths, ids, counts1, counts2, tins, talls, refs, strict=True))
    chunks = []
    for start in range(0, len(numbers), _CHUNK):
        part = numbers[start : start + _CHUNK]
        chunks.append(",".join([_ROW] * len(part)) % tuple(chain.from_iterable(part)))
    body = ",".join(chunks)
    head = script_json({"total": total, "names": names})
    return f'{head[:-1]}, "figures": [{body}]}}'


# One row's numbers in the page's JSON (counts are ints, times finite floats).
_ROW = "%d,%d,%d,%d,%r,%r,%d"
_CHUNK = 2048


def _checked_columns(
    nodes: list[ProfileNode],
    figures: list[Any],
    names: list[list[str]],
    index: dict[ProfileNode, int],
    total: float,
) -> tuple[list[int], list[int], list[float], list[float]]:
    """The four figure columns, each value checked."""
    inv_total = 1.0 / total if total > 0 else 0.0
    columns: tuple[list[int], list[int], list[float], list[float]] = ([], [], [], [])
    for node, el in zip(nodes, figures, strict=True):
        key = names[index[node]][1]
        columns[0].append(safe_count(el[0], f"nc1 of {key!r}"))
        columns[1].append(safe_count(el[1], f"nc2 of {key!r}"))
        columns[2].append(safe_time(el[2], f"tin of {key!r}"))
        columns[3].append(safe_time(el[3], f"tall of {key!r}"))
        safe_time(el[3] * inv_total, f"the share of {key!r}")
    return columns


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

"""The reference's renderings of a graph: :meth:`ProfileNode.as_dict
<.model.ProfileNode.as_dict>`, ``to_text`` and ``to_json``, as functions of the node.

The model reaches this module through the package's ``reference_rendering`` on first
use, so importing the model imports no renderer.
"""

from __future__ import annotations

from pstats import SortKey
from typing import Any

from .._gc import gc_paused
from .filters import ViewOptions
from .model import FilterNode, ProfileNode
from .render_forest_text import render_segments_text
from .render_json import render_json, row_as_dict
from .view_reference import TreeRows, tree_rows


def as_dict(
    node: ProfileNode,
    filter_node: FilterNode | None = None,
    sort_key: Any = SortKey.LINE,
    **options: Any,
) -> list[dict[str, Any]]:
    """See :meth:`ProfileNode.as_dict <.model.ProfileNode.as_dict>`."""
    with gc_paused():
        rows = tree_rows(node, filter_node, sort_key, ViewOptions(**options))
        return [row_as_dict(r) for r in rows]


def to_text(
    node: ProfileNode,
    filter_node: FilterNode | None = None,
    sort_key: Any = SortKey.LINE,
    fct_width: int = 60,
    show_share: bool = False,
    max_indent: int = 30,
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
    node: ProfileNode,
    filter_node: FilterNode | None = None,
    sort_key: Any = SortKey.LINE,
    as_str: bool = True,
    **kwargs: Any,
) -> str | dict[str, Any]:
    """See :meth:`ProfileNode.to_json <.model.ProfileNode.to_json>`."""
    opts = {k: kwargs.pop(k) for k in ViewOptions.FIELDS if k in kwargs}
    max_indent = kwargs.pop("max_indent", 30)
    with gc_paused():
        rows = tree_rows(node, filter_node, sort_key, ViewOptions(**opts))
        return render_json(rows, as_str=as_str, max_indent=max_indent, **kwargs)

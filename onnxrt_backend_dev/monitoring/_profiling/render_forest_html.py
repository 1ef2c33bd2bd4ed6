"""The call tree as one self-contained HTML page: no network, no external file.

The page embeds the rows of :func:`tree_rows <.view_reference.tree_rows>` as JSON and a
small script that shows them as a tree: expand and collapse, search, share of the
total time, ``+++`` references jumping to the function's own entry. The template is
``forest.html`` beside this module.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from .filters import ViewOptions
from .model import FilterNode, ProfileNode
from .safe import safe_count, safe_time, script_json
from .view_reference import TreeRows


def _template() -> str:
    return resources.files(__package__).joinpath("forest.html").read_text("utf-8")


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
    rows = list(view)
    # The page's script writes the figures as HTML: each one is checked to be a number
    # (a hand-made graph may hold anything), names go through the page's escaping.
    data = {
        "total": safe_time(view.total, "the total time"),
        "rows": [
            [
                r.indent,
                str(r.node.func_name),
                str(r.node.key),
                safe_count(r.nc1, f"nc1 of {r.node.key!r}"),
                safe_count(r.nc2, f"nc2 of {r.node.key!r}"),
                safe_time(r.tin, f"tin of {r.node.key!r}"),
                safe_time(r.tall, f"tall of {r.node.key!r}"),
                int(r.ref),
                safe_time(r.share, f"the share of {r.node.key!r}"),
            ]
            for r in rows
        ],
    }
    payload = script_json(data)
    page = _template().replace("__TITLE__", html.escape(title))
    return page.replace("__DATA__", payload)

"""The call tree as one self-contained HTML page: no network, no external file.

The page embeds the rows of :func:`tree_rows <.view_reference.tree_rows>` as JSON and a
small script that shows them as a tree: expand and collapse, search, share of the
total time, ``+++`` references jumping to the function's own entry. The template is
``calltree.html`` beside this module.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from .filters import ViewOptions
from .model import FilterNode, ProfileNode
from .safe import script_json
from .view_reference import TreeRows


def _template() -> str:
    return resources.files(__package__).joinpath("calltree.html").read_text("utf-8")


def render_html(
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
    data = {
        "total": view.total,
        "rows": [
            [
                r.indent,
                r.node.func_name,
                r.node.key,
                r.nc1,
                r.nc2,
                r.tin,
                r.tall,
                int(r.ref),
                r.share,
            ]
            for r in rows
        ],
    }
    payload = script_json(data)
    page = _template().replace("__TITLE__", html.escape(title))
    return page.replace("__DATA__", payload)

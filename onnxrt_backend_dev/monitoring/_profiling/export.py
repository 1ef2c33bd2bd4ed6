"""The renderers of the formats that show a view of the graph chosen by ``view``
(``text`` and ``html``: the call tree or the reference's forest), and the thin
wrappers of those with one view (``json``, ``speedscope``); listed in
:mod:`.formats`."""

from __future__ import annotations

from pstats import SortKey
from typing import Any

from .formats import check_view
from .model import ProfileNode


def export_text(root: ProfileNode, view: str = "reference", **options: Any) -> str:
    """The graph as text.

    :param root: the graph
    :param view: ``reference`` (:meth:`ProfileNode.to_text <.model.ProfileNode.to_text>`)
        or ``tree`` (:func:`render_tree_text <.render_tree_text.render_tree_text>`)
    :param options: given to the view's renderer
    :return: text
    """
    if check_view(view) == "tree":
        from .render_tree_text import render_tree_text

        return render_tree_text(root, **options)
    return root.to_text(**options)


def export_json(root: ProfileNode, **options: Any) -> str:
    """The reference rows as JSON, see :meth:`ProfileNode.to_json
    <.model.ProfileNode.to_json>`."""
    return str(root.to_json(as_str=True, **options))


def export_html(
    root: ProfileNode,
    title: str = "Call tree",
    filter_node: Any = None,
    sort_key: Any = SortKey.CUMULATIVE,
    view: str = "reference",
    **options: Any,
) -> str:
    """The graph as one self-contained HTML page.

    :param root: the graph
    :param title: the page's title
    :param filter_node: see :meth:`ProfileNode.as_dict <.model.ProfileNode.as_dict>`
    :param sort_key: order of callees
    :param view: ``reference`` (the forest of rows) or ``tree`` (the call tree rooted
        at the program, opened along its hottest path)
    :param options: filters and the view's own options
    :return: the page
    """
    if check_view(view) == "tree":
        from .render_tree_html import render_tree_html

        return render_tree_html(
            root, title=title, filter_node=filter_node, sort_key=sort_key, **options
        )
    from .render_html import render_html

    return render_html(root, title=title, filter_node=filter_node, sort_key=sort_key, **options)


def export_speedscope(root: ProfileNode, **options: Any) -> str:
    """The call paths as a speedscope document, see :func:`render_speedscope
    <.render_speedscope.render_speedscope>`."""
    from .render_speedscope import render_speedscope

    return str(render_speedscope(root, as_str=True, **options))

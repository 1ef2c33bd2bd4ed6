"""The renderers of the formats listed in :mod:`.formats`: ``text`` and ``html`` (the
view chosen by ``view``: the call tree or the reference's forest), ``json`` and
``speedscope``."""

from __future__ import annotations

from collections.abc import Callable
from pstats import SortKey
from typing import Any

from .._gc import gc_paused
from .._validate import check_str
from .choices import check_view
from .model import ProfileNode


def export_text(root: ProfileNode, view: str = "reference", **options: Any) -> str:
    """The graph as text.

    :param root: the graph
    :param view: ``reference`` (:func:`.reference.to_text`) or ``tree``
        (:func:`render_tree_text <.render_tree_text.render_tree_text>`)
    :param options: given to the view's renderer
    :return: text
    """
    # Each renderer imported when its view is asked for: a format costs only its own.
    if check_view(view) == "tree":
        from .render_tree_text import render_tree_text

        return render_tree_text(root, **options)
    from .reference import to_text

    return to_text(root, **options)


def export_json(root: ProfileNode, **options: Any) -> str:
    """The reference rows as JSON, see :func:`.reference.to_json`."""
    from .reference import to_json

    return str(to_json(root, as_str=True, **options))


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
    :param view: ``reference`` (the forest of rows) or ``tree`` (the folded call tree)
    :param options: filters and the view's own options
    :return: the page
    """
    check_str("title", title)
    render: Callable[..., str]
    if check_view(view) == "tree":
        from .render_tree_html import render_tree_html

        render = render_tree_html
    else:
        from .render_forest_html import render_forest_html

        render = render_forest_html
    # Hundreds of thousands of rows that all survive: no collection while they are built.
    with gc_paused():
        return render(root, title=title, filter_node=filter_node, sort_key=sort_key, **options)


def export_speedscope(root: ProfileNode, **options: Any) -> str:
    """The call paths as a speedscope document, see :func:`render_speedscope
    <.render_paths.render_speedscope>`."""
    from .render_paths import render_speedscope

    return str(render_speedscope(root, as_str=True, **options))

"""The renderers of the formats of :mod:`.formats` that draw a view chosen by ``view``:
``text`` and ``html``, the reference's forest or the call tree. The call tree is the
folded one (:mod:`.view_folded`) drawn by the sampled profile's renderers, so that
``profile --cprofile`` and the sampled ``profile`` print one tree."""

from __future__ import annotations

from collections.abc import Callable
from pstats import SortKey
from typing import Any

from .._errors import BadValue
from .._gc import gc_paused
from .._validate import check_str
from .choices import check_view
from .model import ProfileNode

_GUIDES = ("unicode", "ascii")


def render_tree_text(
    root: ProfileNode,
    program: str | None = None,
    max_indent: int = 30,
    guides: str = "unicode",
    **options: Any,
) -> str:
    """The folded call tree rooted at the program's entry point, as text.

    :param root: the root of the graph
    :param program: the program's name for the header
    :param max_indent: levels drawn; deeper rows are drawn at that level with their
        level in brackets
    :param guides: ``unicode`` (box-drawing characters) or ``ascii``
    :param options: see :func:`folded_view <.view_folded.folded_view>`
    :return: text
    """
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    if guides not in _GUIDES:
        raise BadValue(f"guides must be one of {sorted(_GUIDES)}, got {guides!r}")
    from .._sampling.render_text import to_text
    from .view_folded import folded_view

    folded, opts = folded_view(root, program, **options)
    return to_text(folded.profile, guides=guides, hot=False, max_indent=max_indent, **opts)


def render_tree_html(
    root: ProfileNode,
    title: str = "Call tree",
    program: str | None = None,
    **options: Any,
) -> str:
    """The folded call tree of a graph as an HTML page.

    :param root: the root of the graph
    :param title: the page's title; left to its default, the header line (naming the
        program, the total and cProfile)
    :param program: the program's name for the header
    :param options: see :func:`folded_view <.view_folded.folded_view>`
    :return: the page
    """
    from .._sampling.render_html import to_html
    from .view_folded import folded_view

    folded, opts = folded_view(root, program, **options)
    return to_html(folded.profile, title=None if title == "Call tree" else title, **opts)


def export_text(root: ProfileNode, view: str = "reference", **options: Any) -> str:
    """The graph as text.

    :param root: the graph
    :param view: ``reference`` (:meth:`ProfileNode.to_text <.model.ProfileNode.to_text>`)
        or ``tree`` (:func:`render_tree_text`)
    :param options: given to the view's renderer
    :return: text
    """
    if check_view(view) == "tree":
        return render_tree_text(root, **options)
    return root.to_text(**options)


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
    render: Callable[..., str] = render_tree_html
    if check_view(view) == "reference":
        from .render_forest_html import render_forest_html

        render = render_forest_html
    # Hundreds of thousands of rows that all survive: no collection while they are built.
    with gc_paused():
        return render(root, title=title, filter_node=filter_node, sort_key=sort_key, **options)

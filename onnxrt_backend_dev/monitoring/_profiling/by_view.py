"""The renderers of the formats of :mod:`.formats` that draw a view chosen by ``view``:
``text`` and ``html``, the reference's forest or the call tree (``to_tree_text`` and
``to_html`` are the library's, :mod:`..profiling` exports them). The call tree is the
folded one (:mod:`.view_folded`) drawn by the sampled profile's renderers, so that
``profile --cprofile`` and the sampled ``profile`` print one tree."""

from __future__ import annotations

from collections.abc import Callable
from pstats import SortKey
from typing import Any

from .._errors import BadValue
from .._gc import gc_paused
from .._sampling.view import FOLD_SHARE
from .._validate import check_str
from .choices import check_view
from .model import ProfileNode
from .run import as_root

_GUIDES = ("unicode", "ascii")


def to_tree_text(
    graph: Any,
    program: str | None = None,
    fold_share: float = FOLD_SHARE,
    max_indent: int = 30,
    guides: str = "unicode",
    **options: Any,
) -> str:
    """The call tree rooted at the program's entry point as text, folded as the sampled
    profile's (library frames folded, an import one row ``import pandas``). Below a
    function called from several places, the times are shared out in proportion; the
    exact call counts are :meth:`ProfileNode.to_text`'s.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param program: the program's name for the header
    :param fold_share: share of the total under which rows are folded (0 shows all)
    :param max_indent: levels drawn; deeper rows show their level in brackets
    :param guides: ``unicode`` (box-drawing characters) or ``ascii``
    :param options: filters (:class:`ViewOptions`: ``hide_stdlib`` leaves library frames
        out), ``show_all`` (no folding), ``sort_key`` (``cumulative``, ``time``,
        ``line``), ``filter_node``, ``max_rows``
    :return: text
    """
    root = as_root(graph)
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    if guides not in _GUIDES:
        raise BadValue(f"guides must be one of {sorted(_GUIDES)}, got {guides!r}")
    from .._sampling.render_text import to_text
    from .view_folded import folded_view

    folded, opts = folded_view(root, program, fold_share, **options)
    return to_text(folded.profile, guides=guides, hot=False, max_indent=max_indent, **opts)


def export_text(root: ProfileNode, view: str = "reference", **options: Any) -> str:
    """The graph as text.

    :param root: the graph
    :param view: ``reference`` (:meth:`ProfileNode.to_text <.model.ProfileNode.to_text>`)
        or ``tree`` (:func:`to_tree_text`)
    :param options: given to the view's renderer
    :return: text
    """
    if check_view(view) == "tree":
        return to_tree_text(root, **options)
    return root.to_text(**options)


def to_html(
    graph: Any,
    title: str = "Call tree",
    filter_node: Callable[..., bool] | None = None,
    sort_key: Any = SortKey.CUMULATIVE,
    view: str = "reference",
    **options: Any,
) -> str:
    """Exports the call tree as one self-contained HTML page.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param title: page title
    :param filter_node: see :meth:`ProfileNode.as_dict`
    :param sort_key: order of callees
    :param view: ``reference`` (the rows of :meth:`ProfileNode.as_dict`) or ``tree``
        (:func:`to_tree_text`'s folded tree, with its options)
    :param options: filters, see :class:`ViewOptions`
    :return: the HTML page
    """
    root = as_root(graph)
    check_str("title", title)
    reference = check_view(view) == "reference"
    # Hundreds of thousands of rows that all survive: no collection while they are built.
    with gc_paused():
        if reference:
            from .render_forest_html import render_forest_html

            return render_forest_html(root, title, filter_node, sort_key, **options)
        from .._sampling.render_html import to_html as page
        from .view_folded import folded_view

        folded, opts = folded_view(root, filter_node=filter_node, sort_key=sort_key, **options)
        # Left to its default, the title is the header line (the program, the total, cProfile).
        return page(folded.profile, title=None if title == "Call tree" else title, **opts)

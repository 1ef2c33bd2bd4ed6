"""The folded call tree (:mod:`.view_folded`) as the sampled profile's HTML page."""

from __future__ import annotations

from typing import Any

from .._sampling.render_html import to_html
from .model import ProfileNode
from .view_folded import folded_view


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
    folded, opts = folded_view(root, program, **options)
    return to_html(folded.profile, title=None if title == "Call tree" else title, **opts)

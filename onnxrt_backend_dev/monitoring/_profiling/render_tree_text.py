"""The folded call tree (:mod:`.view_folded`) as the sampled profile's text, so that
``profile --cprofile`` and the sampled ``profile`` print one tree."""

from __future__ import annotations

from typing import Any

from .._errors import BadValue
from .._sampling.render_text import to_text
from .model import ProfileNode
from .view_folded import folded_view

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
    folded, opts = folded_view(root, program, **options)
    return to_text(folded.profile, guides=guides, hot=False, max_indent=max_indent, **opts)

"""The call tree of a cProfile graph, as text and as an HTML page: the folded view
(:mod:`.view_folded`) drawn by the sampled profile's renderers
(:mod:`.._sampling.render_text`, :mod:`.._sampling.render_html`), so that
``profile --cprofile`` and the sampled ``profile`` show one tree, folded by one code.

The options of the former call tree map onto it: ``fold_share`` (and ``min_share``,
the larger wins) folds rows into ``N more``, ``max_depth`` cuts the folded rows (0: the
top level), ``max_indent`` draws deeper rows at that level with their level in
brackets, ``focus`` roots the tree at the matching functions, ``hide_stdlib`` leaves
library frames out (their callees in their place), ``show_all`` draws every library
frame (no folding), ``sort_key`` orders the children (``cumulative``: hottest first;
``time``: by own time; ``line``: by file and line), ``filter_node`` and ``max_rows``
bound the expansion. Exact call counts are the reference view's and the JSON's: the
tree says so in a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._errors import BadType, BadValue
from .._sampling.render_html import to_html
from .._sampling.render_text import to_text
from .._sampling.view import Row
from .._validate import check_callable
from .choices import FOLD_SHARE
from .filters import ViewOptions
from .model import FilterNode, ProfileNode
from .sorting import sort_name
from .view_folded import MAX_CELLS, MAX_ROWS, SHORT_DEPTH, FoldedView, folded_profile

#: The note under the header: where the exact counts are.
COUNTS_NOTE = "exact call counts: the reference view (ProfileNode.to_text, --view reference), JSON"
#: The note when one import row gathers the modules of several packages.
IMPORTS_NOTE = (
    "cProfile does not say which module imported which: 'import X' gathers them, "
    "X the busiest package"
)
_GUIDES = ("unicode", "ascii")
_ORDERS: dict[str, Callable[[Row], Any] | None] = {
    "cumulative": None,
    "time": lambda r: -r.self_wall,
    "line": lambda r: (r.file, r.line),
}
_ORDER_WORDS = {"time": "by own time", "line": "in line order"}
_OWN = ("fold_share", "sort_key", "filter_node", "max_rows", "show_all")


def folded_view(
    root: ProfileNode,
    program: str | None = None,
    fold_share: float = FOLD_SHARE,
    sort_key: Any = "cumulative",
    filter_node: FilterNode | None = None,
    max_rows: int = MAX_ROWS,
    show_all: bool = False,
    **filters: Any,
) -> tuple[FoldedView, dict[str, Any]]:
    """The folded view of a graph and the renderers' keywords, the options checked.

    :param root: the root of the graph
    :param program: the program's name for the header
    :param fold_share: rows under this share of the total go into ``N more`` (0: none)
    :param sort_key: ``cumulative``, ``time`` or ``line`` (see the module's docstring)
    :param filter_node: leaves out the nodes for which it returns False
    :param max_rows: rows of the expanded tree kept at most
    :param show_all: no folding of library frames
    :param filters: ``hide_stdlib``, ``min_share``, ``max_depth``, ``focus``
    :return: the view and ``fold_share``, ``show_all``, ``max_depth``, ``order``
    :raises BadType: an unknown option or a ``filter_node`` that is not callable
    :raises BadValue: a value out of its range
    """
    unknown = sorted(set(filters) - set(ViewOptions.FIELDS))
    if unknown:
        raise BadType(
            f"unexpected option(s) {unknown} for the call tree, which takes "
            f"{list(_OWN)}, max_indent, guides and the filters {list(ViewOptions.FIELDS)}"
        )
    view = ViewOptions(**filters)
    check_callable("filter_node", filter_node, optional=True)
    if not 0.0 <= fold_share <= 1.0:
        raise BadValue(f"fold_share must be in [0, 1], got {fold_share!r}")
    if max_rows < 1:
        raise BadValue(f"max_rows must be >= 1, got {max_rows!r}")
    order_name = sort_name(sort_key)
    folded = folded_profile(
        root, program or "", [COUNTS_NOTE], view.hide_stdlib, show_all, view.focus,
        filter_node, max_rows,
    )  # fmt: skip
    notes = folded.profile.notes
    if order_name != "cumulative":
        notes.append(f"children {_ORDER_WORDS[order_name]}")
    if folded.merged_imports:
        notes.append(IMPORTS_NOTE)
    if folded.capped:
        notes.append(f"the call paths past {folded.capped:,} rows are in their callers' time")
    if folded.shortened:
        notes.append(
            f"{folded.shortened:,} call paths were cut to their outermost {SHORT_DEPTH} "
            f"frames (the paths hold {MAX_CELLS:,} frames at most)"
        )
    options = {
        "fold_share": max(fold_share, view.min_share),
        "show_all": show_all,
        "max_depth": view.max_depth,
        "order": _ORDERS[order_name],
    }
    return folded, options


def render_folded_text(
    root: ProfileNode,
    program: str | None = None,
    max_indent: int = 30,
    guides: str = "unicode",
    **options: Any,
) -> str:
    """The folded call tree as text: a header naming cProfile, notes, the tree.

    :param root: the root of the graph
    :param program: the program's name for the header
    :param max_indent: levels drawn; deeper rows are drawn at that level with their
        level in brackets
    :param guides: ``unicode`` (box-drawing characters) or ``ascii``
    :param options: see :func:`folded_view`
    :return: text
    """
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    if guides not in _GUIDES:
        raise BadValue(f"guides must be one of {sorted(_GUIDES)}, got {guides!r}")
    folded, opts = folded_view(root, program, **options)
    return to_text(folded.profile, guides=guides, hot=False, max_indent=max_indent, **opts)


def render_folded_html(
    root: ProfileNode,
    title: str = "Call tree",
    program: str | None = None,
    **options: Any,
) -> str:
    """The folded call tree as one self-contained page, opened along the hottest path
    and the hottest path through the user's code.

    :param root: the root of the graph
    :param title: the page's title; left to its default, the header line (naming the
        program, the total and cProfile)
    :param program: the program's name for the header
    :param options: see :func:`folded_view`
    :return: the page
    """
    folded, opts = folded_view(root, program, **options)
    return to_html(folded.profile, title=None if title == "Call tree" else title, **opts)

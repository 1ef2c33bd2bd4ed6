"""Profiling: where the time goes, as a call tree built from :mod:`cProfile` data.

:func:`profile` runs a function under :mod:`cProfile`; :func:`profile2graph` turns any
``pstats`` profile into a graph of :class:`ProfileNode` (``to_text``, ``as_dict``,
``to_json``: the reference's forest); the functions below render its other views. The
pipeline lives in ``_profiling``.
"""

from __future__ import annotations

from collections.abc import Callable
from pstats import SortKey
from typing import Any

from ._profiling.by_view import export_html, render_tree_text
from ._profiling.choices import FOLD_SHARE
from ._profiling.filters import ViewOptions
from ._profiling.formats import FORMATS, VIEWS, Format, renderer
from ._profiling.load import ProfileFormatError
from ._profiling.model import ProfileNode
from ._profiling.plot import plot_top_functions
from ._profiling.run import (
    as_root,
    check_no_profiler_active,
    path_cleaner,
    profile,
    profile2df,
    profile2graph,
)
from ._profiling.view_paths import PathLimits, render_collapsed, render_speedscope
from ._profiling.view_tree import CallTree, build_tree, hot_path_leaves
from ._report.sampling import Sampling, sample, sampling
from ._sampling.result import SamplingResult

__all__ = [
    "FORMATS", "VIEWS", "CallTree", "Format", "PathLimits", "ProfileFormatError",
    "ProfileNode", "Sampling", "SamplingResult", "SortKey", "ViewOptions", "call_tree",
    "check_no_profiler_active", "export", "hot_paths", "path_cleaner", "plot_profile",
    "profile", "profile2df", "profile2graph", "sample", "sampling", "to_collapsed",
    "to_html", "to_speedscope", "to_tree_text",
]  # fmt: skip


def to_speedscope(
    graph: Any, name: str = "profile", as_str: bool = True, **options: Any
) -> str | dict[str, Any]:
    """Exports a profile as a speedscope document (weights in seconds).

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param name: name of the profile
    :param as_str: return JSON text or the dictionary
    :param options: filters (see :class:`ViewOptions`) and ``limits``
        (:class:`PathLimits`)
    :return: JSON text or dictionary
    """
    return render_speedscope(as_root(graph), name=name, as_str=as_str, **options)


def to_collapsed(graph: Any, unit: float = 1e-6, **options: Any) -> str:
    """Exports a profile as collapsed stacks (``a;b;c N``, N in ``unit`` seconds).

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param unit: seconds per count (microseconds by default)
    :param options: filters (see :class:`ViewOptions`) and ``limits``
    :return: text, one line per stack
    """
    return render_collapsed(as_root(graph), unit=unit, **options)


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
    return export_html(root, title, filter_node, sort_key, view, **options)


def plot_profile(graph: Any, top: int = 15, key: str = "tall", ax: Any = None) -> Any:
    """Bar chart of the functions with the largest times.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param top: number of functions shown
    :param key: ``tall`` (time with callees) or ``tin`` (own time)
    :param ax: matplotlib axes to draw on, a new figure if None
    :return: the axes
    """
    return plot_top_functions(as_root(graph), top=top, key=key, ax=ax)


def to_tree_text(
    graph: Any,
    program: str | None = None,
    fold_share: float = FOLD_SHARE,
    max_indent: int = 30,
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
    :param options: filters (:class:`ViewOptions`: ``hide_stdlib`` leaves library frames
        out), ``show_all`` (no folding), ``sort_key`` (``cumulative``, ``time``,
        ``line``), ``guides`` (``unicode``, ``ascii``), ``filter_node``, ``max_rows``
    :return: text
    """
    return render_tree_text(
        as_root(graph), program=program, max_indent=max_indent, fold_share=fold_share, **options
    )


def call_tree(graph: Any, fold_share: float = FOLD_SHARE, **options: Any) -> CallTree:
    """The call tree rooted at the program's entry point, as rows before the fold of
    :func:`to_tree_text`: one row per caller -> callee edge on each path.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param fold_share: share of the total under which rows are folded (0 shows all)
    :param options: filters, ``sort_key``, ``filter_node``, ``max_rows``
    :return: the tree: ``items`` in depth-first order, ``total``
    """
    return build_tree(as_root(graph), fold_share=fold_share, **options)


def hot_paths(graph: Any, count: int = 5, builtins: bool = False) -> list[list[str]]:
    """The top root-to-leaf paths of the call tree by time, as function names, the
    hottest first (built-ins left out, recursive repeats written once).

    :param graph: a :class:`CallTree <._profiling.view_tree.CallTree>`, a
        :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param count: paths returned at most
    :param builtins: keep the built-in functions in the paths
    :return: the paths
    """
    tree = graph if isinstance(graph, CallTree) else build_tree(as_root(graph))
    return [names for names, _ in hot_path_leaves(tree, count, builtins)]


def export(graph: Any, fmt: str = "text", **options: Any) -> str:
    """Renders a profile in one of :data:`FORMATS`.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param fmt: ``text``, ``json``, ``html``, ``speedscope`` or ``collapsed``
    :param options: given to the renderer (filters, ``sort_key``, ``view`` for text and
        html...)
    :return: the rendered text
    """
    return renderer(fmt)(as_root(graph), **options)

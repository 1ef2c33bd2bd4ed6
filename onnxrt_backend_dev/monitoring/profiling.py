"""Profiling: where the time goes, as a call tree built from :mod:`cProfile` data.

:func:`profile` runs a function under :mod:`cProfile`; :func:`profile2graph` turns any
``pstats`` profile into a graph of :class:`ProfileNode` (``to_text``, ``as_dict``,
``to_json``: the reference's forest); the other functions it exports render its other
views. The pipeline lives in ``_profiling``.
"""

from __future__ import annotations

from pstats import SortKey
from typing import Any

from ._profiling.by_view import to_html, to_tree_text
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
from ._profiling.view_paths import PathLimits, to_collapsed, to_speedscope
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


def plot_profile(graph: Any, top: int = 15, key: str = "tall", ax: Any = None) -> Any:
    """Bar chart of the functions with the largest times.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param top: number of functions shown
    :param key: ``tall`` (time with callees) or ``tin`` (own time)
    :param ax: matplotlib axes to draw on, a new figure if None
    :return: the axes
    """
    return plot_top_functions(as_root(graph), top=top, key=key, ax=ax)


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

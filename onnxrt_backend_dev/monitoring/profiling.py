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
from ._profiling.filters import ViewOptions
from ._profiling.formats import FORMATS, VIEWS, Format, renderer
from ._profiling.load import ProfileFormatError
from ._profiling.model import ProfileNode
from ._profiling.plot import plot_profile
from ._profiling.run import (
    as_root,
    check_no_profiler_active,
    path_cleaner,
    profile,
    profile2df,
    profile2graph,
)
from ._profiling.view_paths import PathLimits, to_collapsed, to_speedscope
from ._profiling.view_tree import CallTree, call_tree, hot_path_leaves
from ._report.sampling import Sampling, sample, sampling
from ._sampling.result import SamplingResult

__all__ = [
    "FORMATS", "VIEWS", "CallTree", "Format", "PathLimits", "ProfileFormatError",
    "ProfileNode", "Sampling", "SamplingResult", "SortKey", "ViewOptions", "call_tree",
    "check_no_profiler_active", "export", "hot_paths", "path_cleaner", "plot_profile",
    "profile", "profile2df", "profile2graph", "sample", "sampling", "to_collapsed",
    "to_html", "to_speedscope", "to_tree_text",
]  # fmt: skip


def hot_paths(graph: Any, count: int = 5, builtins: bool = False) -> list[list[str]]:
    """The top root-to-leaf paths of the call tree by time, as function names, the
    hottest first (built-ins left out, recursive repeats written once).

    :param graph: a :class:`CallTree <._profiling.view_tree.CallTree>`, a
        :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param count: paths returned at most
    :param builtins: keep the built-in functions in the paths
    :return: the paths
    """
    tree = graph if isinstance(graph, CallTree) else call_tree(graph)
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

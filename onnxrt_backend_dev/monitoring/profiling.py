"""Profiling: where the time goes, as a call tree built from :mod:`cProfile` data.

:func:`profile` runs a function under :mod:`cProfile`; :func:`profile2graph` turns any
``pstats`` profile (cProfile, the ``profile`` module, pyinstrument, yappi, several
merged) into a graph of :class:`ProfileNode` whose ``to_text``, ``as_dict`` and
``to_json`` render the reference's forest of rows; :func:`to_tree_text` and
:func:`call_tree` the call tree rooted at the program, as pyinstrument shows it.
:func:`to_speedscope`, :func:`to_collapsed` and :func:`to_html` export it for speedscope,
flame graph tools and a browser; :data:`FORMATS` is the registry of export formats;
:func:`plot_profile` draws the top functions. pandas and matplotlib are only imported by
the functions that need them.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Callable, Sequence
from io import StringIO
from pstats import SortKey, Stats
from typing import Any

from ._profiling.builder import build_graph
from ._profiling.filters import ViewOptions
from ._profiling.formats import FORMATS, VIEWS, Format, format_names, get_format
from ._profiling.load import ProfileFormatError, load_profiles
from ._profiling.model import ProfileNode
from ._profiling.view_paths import PathLimits
from ._profiling.view_tree import FOLD_SHARE, CallTree
from ._sampling.result import SamplingResult
from ._sampling.session import Sampling, sample, sampling

__all__ = [
    "FORMATS",
    "VIEWS",
    "CallTree",
    "Format",
    "PathLimits",
    "ProfileFormatError",
    "ProfileNode",
    "Sampling",
    "SamplingResult",
    "SortKey",
    "ViewOptions",
    "call_tree",
    "check_no_profiler_active",
    "export",
    "hot_paths",
    "plot_profile",
    "profile",
    "profile2df",
    "profile2graph",
    "sample",
    "sampling",
    "to_collapsed",
    "to_html",
    "to_speedscope",
    "to_tree_text",
]


def check_no_profiler_active() -> None:
    """Raises :class:`RuntimeError` if a profiler is already active in this thread
    (``sys.setprofile`` hook, or the profiler slot of :mod:`sys.monitoring` on 3.12+):
    a second one would either fail or silently replace it.
    """
    hook = sys.getprofile()
    if hook is not None:
        raise RuntimeError(
            f"another profiler is already active (sys.getprofile() returns {hook!r}); "
            "stop it before profiling"
        )
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        tool = monitoring.get_tool(monitoring.PROFILER_ID)
        if tool is not None:
            raise RuntimeError(
                f"another profiler is already active (sys.monitoring profiler slot is "
                f"held by {tool!r}); stop it before profiling"
            )


def _rootrem_pairs(rootrem: Any) -> list[tuple[str, str]]:
    if rootrem is None:
        return []
    if isinstance(rootrem, str):
        return [(rootrem, "")]
    pairs = []
    for sub in rootrem:
        if isinstance(sub, str):
            pairs.append((sub, ""))
        elif isinstance(sub, tuple) and len(sub) == 2:
            pairs.append((str(sub[0]), str(sub[1])))
        else:
            raise TypeError(
                f"rootrem must be a str or a list of str or (old, new) pairs, "
                f"got an element {sub!r}"
            )
    return pairs


def path_cleaner(rootrem: Any = None) -> Callable[[str], str]:
    """Returns a function shortening paths: site-packages and the standard library
    become ``site-packages`` and ``lib``, then ``rootrem`` is removed.

    :param rootrem: a str or a list of str or ``(old, new)`` pairs to replace
    :return: the function
    """
    pairs = _rootrem_pairs(rootrem)
    try:
        packages = [p for p in site.getsitepackages() if p]
    except AttributeError:  # virtualenv's old site module
        packages = []
    replacements = []
    if packages:
        replacements.append((packages[-1], "site-packages"))
        replacements.append((os.path.normpath(os.path.join(packages[-1], "..")), "lib"))
    replacements.extend(pairs)

    def clean_text(text: str) -> str:
        for old, new in replacements:
            text = text.replace(old, new)
        return text

    return clean_text


def profile(
    fct: Callable[[], Any],
    sort: str = "cumulative",
    rootrem: str | Sequence[Any] | None = None,
    as_df: bool = False,
    return_results: bool = False,
    **kwargs: Any,
) -> tuple[Any, ...]:
    """Profiles the execution of a function.

    :param fct: function to profile
    :param sort: see :meth:`pstats.Stats.sort_stats`
    :param rootrem: root to remove in filenames: a str, or a list of str or
        ``(old, new)`` pairs; site-packages paths are shortened as well
    :param as_df: return the results as a dataframe and not text
    :param return_results: if True, return results as well (in the first position)
    :param kwargs: additional parameters used to create the profiler, see
        :class:`cProfile.Profile`
    :return: raw results, statistics text dump (or dataframe is as_df is True)
    :raises RuntimeError: if another profiler is already active

    An exception raised by ``fct`` propagates unchanged; the profiler is disabled first.
    """
    import cProfile

    if not callable(fct):
        raise TypeError(f"fct must be callable, got {type(fct).__name__}")
    valid_sorts = Stats.sort_arg_dict_default
    if sort not in valid_sorts and sort not in {k.value for k in SortKey}:
        raise ValueError(f"sort must be one of {sorted(valid_sorts)}, got {sort!r}")
    clean_text = path_cleaner(rootrem)
    check_no_profiler_active()
    pr = cProfile.Profile(**kwargs)
    pr.enable()
    try:
        fct_res = fct()
    finally:
        pr.disable()
    s = StringIO()
    ps = Stats(pr, stream=s).sort_stats(sort)
    if as_df:
        from ._profiling.render_json import rows_to_dataframe, stats_rows

        res: Any = rows_to_dataframe(stats_rows(ps, clean_text))
    else:
        ps.print_stats()
        res = clean_text(s.getvalue())
    if return_results:
        return fct_res, ps, res
    return ps, res


def profile2graph(
    ps: Any, clean_text: Callable[[str], str] | None = None, verbose: bool = False
) -> tuple[ProfileNode, dict[str, ProfileNode]]:
    """Converts profiling statistics into a graphs.

    Any ``pstats`` data loads: cProfile, the ``profile`` module (call counts only),
    pyinstrument (``ncalls=-1``), yappi. Functions whose keys collide after
    ``clean_text`` are merged, and so are several profiles given as a list.

    :param ps: an instance of :class:`pstats.Stats`, a path to a profile file, or a
        list of them
    :param clean_text: function to clean function names
    :param verbose: prints the size of the graph on stdout
    :return: the root (the only entry point, or a virtual node ``<all>`` calling the
        entry points, not rendered) and the nodes by ``node.key``
    :raises ProfileFormatError: a file is empty, truncated, not a profile, or holds
        values of the wrong type or non-finite times (the message names the file)
    """
    root, nodes = build_graph(load_profiles(ps), clean_text=clean_text)
    if verbose:
        edges = sum(len(n.calls_to) for n in nodes.values())
        print(f"[profile2graph] {len(nodes)} functions, {edges} calls, root={root.key!r}")
    return root, nodes


def profile2df(
    ps: Any,
    as_df: bool = True,
    clean_text: Callable[[str], str] | None = None,
    verbose: bool = False,
) -> Any:
    """Converts profiling statistics into a DataFrame.

    :param ps: an instance of :class:`pstats.Stats`, a path or a list of them
    :param as_df: returns the results as a dataframe (True) or a list of dictionaries
    :param clean_text: function to clean file names
    :param verbose: prints the number of rows on stdout
    :return: the reference's table: a DataFrame (pandas extra) with columns ``fct,
        file, ncalls1, ncalls2, tin, cum_tin, tall, cum_tall``, one row per ``(fct,
        file)`` with the figures summed, sorted by decreasing ``cum_tall``, index
        ``0..n-1``; with ``as_df=False``, one dictionary per function of the profile
        with these keys
    :raises ProfileFormatError: see :func:`profile2graph`
    """
    from ._profiling.render_json import reference_dataframe, stats_rows

    rows = stats_rows(ps, clean_text, skip_artifacts=False)
    if verbose:
        print(f"[profile2df] {len(rows)} rows")
    return reference_dataframe(rows) if as_df else rows


def _as_root(graph: Any) -> ProfileNode:
    if isinstance(graph, ProfileNode):
        return graph
    return build_graph(load_profiles(graph, "graph"))[0]


def to_speedscope(
    graph: Any, name: str = "profile", as_str: bool = True, **options: Any
) -> str | dict[str, Any]:
    """Exports a profile as a speedscope document (one sampled profile, weights in
    seconds, summing to the total time of the top-level functions).

    :param graph: a :class:`ProfileNode` (usually the root) or what
        :func:`profile2graph` accepts
    :param name: name of the profile
    :param as_str: return JSON text or the dictionary
    :param options: filters (see :class:`ViewOptions`) and ``limits``
        (:class:`PathLimits`)
    :return: JSON text or dictionary
    """
    from ._profiling.render_speedscope import render_speedscope

    return render_speedscope(_as_root(graph), name=name, as_str=as_str, **options)


def to_collapsed(graph: Any, unit: float = 1e-6, **options: Any) -> str:
    """Exports a profile as collapsed stacks (``a;b;c N``, N in ``unit`` seconds),
    read by flamegraph.pl, speedscope and most flame graph tools.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param unit: seconds per count (microseconds by default)
    :param options: filters (see :class:`ViewOptions`) and ``limits``
    :return: text, one line per stack
    """
    from ._profiling.render_collapsed import render_collapsed

    return render_collapsed(_as_root(graph), unit=unit, **options)


def to_html(
    graph: Any,
    title: str = "Call tree",
    filter_node: Callable[..., bool] | None = None,
    sort_key: Any = SortKey.CUMULATIVE,
    view: str = "reference",
    **options: Any,
) -> str:
    """Exports the call tree as one self-contained HTML page (no network): expand and
    collapse, search, share of the total time.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param title: page title
    :param filter_node: see :meth:`ProfileNode.as_dict`
    :param sort_key: order of callees
    :param view: ``reference`` (the rows of :meth:`ProfileNode.as_dict`) or ``tree``
        (the call tree of :func:`to_tree_text`, opened along its hottest path down to
        the first row under 5 %; ``program``, ``fold_share`` and ``max_rows`` accepted)
    :param options: filters, see :class:`ViewOptions`
    :return: the HTML page
    """
    from ._profiling.export import export_html

    return export_html(
        _as_root(graph),
        title=title,
        filter_node=filter_node,
        sort_key=sort_key,
        view=view,
        **options,
    )


def plot_profile(graph: Any, top: int = 15, key: str = "tall", ax: Any = None) -> Any:
    """Bar chart of the functions with the largest times.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param top: number of functions shown
    :param key: ``tall`` (time with callees) or ``tin`` (own time)
    :param ax: matplotlib axes to draw on, a new figure if None
    :return: the axes
    """
    from ._profiling.plot import plot_top_functions

    return plot_top_functions(_as_root(graph), top=top, key=key, ax=ax)


def to_tree_text(
    graph: Any,
    program: str | None = None,
    fold_share: float = FOLD_SHARE,
    max_indent: int = 30,
    **options: Any,
) -> str:
    """The call tree rooted at the program's entry point as text, the way pyinstrument
    prints it: one row per caller -> callee edge with cProfile's figures for that edge
    (share of the root's time, time with callees, calls), children hottest first and
    never adding up to more than their parent, recursion folded into the row of the
    caller, rows under ``fold_share`` folded into one ``N more`` row per parent.

    :param graph: a :class:`ProfileNode` (usually the root) or what
        :func:`profile2graph` accepts
    :param program: the program's name for the header (the root's name if None)
    :param fold_share: share of the total under which rows are folded (0 shows all)
    :param max_indent: levels drawn; deeper rows show their depth in brackets
    :param options: filters (see :class:`ViewOptions`), ``sort_key`` (``cumulative``,
        the default, ``time`` or ``line``), ``filter_node``, ``max_rows``
    :return: text
    """
    from ._profiling.render_tree_text import render_tree_text

    return render_tree_text(
        _as_root(graph), program=program, max_indent=max_indent, fold_share=fold_share, **options
    )


def call_tree(graph: Any, fold_share: float = FOLD_SHARE, **options: Any) -> CallTree:
    """The call tree rooted at the program's entry point, as rows (see
    :func:`to_tree_text`).

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param fold_share: share of the total under which rows are folded (0 shows all)
    :param options: as for :func:`to_tree_text`
    :return: the tree: ``items`` in depth-first order, ``total``
    """
    from ._profiling.view_tree import build_tree

    return build_tree(_as_root(graph), fold_share=fold_share, **options)


def hot_paths(graph: Any, count: int = 5, builtins: bool = False) -> list[list[str]]:
    """The top root-to-leaf paths of the call tree by time, as function names (the
    first is the hottest path, following the hottest child at each step; built-ins
    left out and consecutive repeats of a recursive function written once).

    :param graph: a :class:`CallTree <._profiling.view_tree.CallTree>`, a
        :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param count: paths returned at most
    :param builtins: keep the built-in functions in the paths
    :return: the paths
    """
    from ._profiling.view_tree import CallTree
    from ._profiling.view_tree import hot_paths as _hot_paths

    tree = graph if isinstance(graph, CallTree) else _as_root(graph)
    return _hot_paths(tree, count=count, builtins=builtins)


def export(graph: Any, fmt: str = "text", **options: Any) -> str:
    """Renders a profile in one of :data:`FORMATS`.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts
    :param fmt: ``text``, ``json``, ``html``, ``speedscope`` or ``collapsed``
    :param options: given to the renderer (filters, ``sort_key``, ``view`` for text and
        html...)
    :return: the rendered text
    """
    entry = get_format(fmt)
    if entry.render is None:
        raise ValueError(
            f"fmt {fmt!r} writes the raw statistics (pstats.Stats.dump_stats), it is not "
            f"a rendering; fmt must be one of {format_names(rendered_only=True)}"
        )
    return entry.render(_as_root(graph), **options)

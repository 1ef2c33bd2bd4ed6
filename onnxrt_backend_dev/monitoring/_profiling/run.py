"""Running a function under :mod:`cProfile` (:func:`profile <..profiling.profile>`'s
machinery), the reference's path cleaner, and the graph and table of a profile."""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Callable, Sequence
from io import StringIO
from pstats import SortKey, Stats
from typing import Any

from .._errors import BadType, BadValue, StateError
from .._validate import check_bool, check_callable
from .builder import build_graph, is_artifact
from .load import load_profiles
from .model import ProfileNode

# Columns of the per-function table of profile(as_df=True), in order.
DF_COLUMNS = ["namefct", "file", "ncalls1", "ncalls2", "tin", "cum_tin", "tall", "cum_tall"]
# Columns of the reference's profile2df table, in order.
REFERENCE_COLUMNS = ["fct", *DF_COLUMNS[1:]]


def check_no_profiler_active() -> None:
    """Raises :class:`RuntimeError` if a profiler is already active in this thread
    (``sys.setprofile``, or :mod:`sys.monitoring`'s profiler slot): a second one would
    fail or silently replace it."""
    hook = sys.getprofile()
    if hook is not None:
        raise StateError(
            f"another profiler is already active (sys.getprofile() returns {hook!r}); "
            "stop it before profiling"
        )
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        tool = monitoring.get_tool(monitoring.PROFILER_ID)
        if tool is not None:
            raise StateError(
                f"another profiler is already active (sys.monitoring profiler slot is "
                f"held by {tool!r}); stop it before profiling"
            )


def _rootrem_pairs(rootrem: Any) -> list[tuple[str, str]]:
    if rootrem is None:
        return []
    if isinstance(rootrem, str):
        return [(rootrem, "")]
    if not isinstance(rootrem, (list, tuple)):
        raise BadType(
            f"rootrem must be a str, a list of str or (old, new) pairs, or None, "
            f"got {type(rootrem).__name__}"
        )
    pairs = []
    for sub in rootrem:
        if isinstance(sub, str):
            pairs.append((sub, ""))
        elif isinstance(sub, tuple) and len(sub) == 2:
            pairs.append((str(sub[0]), str(sub[1])))
        else:
            raise BadType(
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

    check_callable("fct", fct)
    check_bool("as_df", as_df)
    check_bool("return_results", return_results)
    valid_sorts = Stats.sort_arg_dict_default
    if not isinstance(sort, str) or (
        sort not in valid_sorts and sort not in {k.value for k in SortKey}
    ):
        raise BadValue(f"sort must be one of {sorted(valid_sorts)}, got {sort!r}")
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

    Any ``pstats`` data loads (cProfile, ``profile``, pyinstrument, yappi); functions
    whose keys collide after ``clean_text`` are merged, as are several profiles.

    :param ps: an instance of :class:`pstats.Stats`, a path to a profile file, or a
        list of them
    :param clean_text: function to clean function names
    :param verbose: prints the size of the graph on stdout
    :return: the root (the only entry point, or a virtual node ``<all>`` calling the
        entry points, not rendered) and the nodes by ``node.key``
    :raises ProfileFormatError: a file is empty, truncated, not a profile, or holds
        values of the wrong type or non-finite times (the message names the file)
    """
    check_callable("clean_text", clean_text, optional=True)
    check_bool("verbose", verbose)
    root, nodes = build_graph(load_profiles(ps), clean_text=clean_text)
    if verbose:  # the documented verbose: the one print of the library
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
    :return: the reference's table (pandas extra): columns ``fct, file, ncalls1,
        ncalls2, tin, cum_tin, tall, cum_tall``, one row per ``(fct, file)``, sorted by
        decreasing ``cum_tall``; with ``as_df=False``, one dictionary per function
    :raises ProfileFormatError: see :func:`profile2graph`
    """
    check_callable("clean_text", clean_text, optional=True)
    check_bool("as_df", as_df)
    check_bool("verbose", verbose)
    rows = stats_rows(ps, clean_text, skip_artifacts=False)
    if verbose:
        print(f"[profile2df] {len(rows)} rows")
    return rows_to_dataframe(rows, reference=True) if as_df else rows


def as_root(graph: Any) -> ProfileNode:
    """``graph`` if it is a node, else the root of the graph of what
    :func:`profile2graph <..profiling.profile2graph>` accepts.

    :param graph: a node, statistics, a path or a list of them
    :return: a node
    """
    if isinstance(graph, ProfileNode):
        return graph
    return build_graph(load_profiles(graph, "graph"))[0]


def _better_name(fct: str, file: str) -> str:
    if len(fct) > 15:
        return f"{file.split(':')[-1]}-{fct}"
    return f"{os.path.basename(file)}-{fct}"


def stats_rows(
    ps: Any, clean_text: Callable[[str], str] | None = None, skip_artifacts: bool = True
) -> list[dict[str, Any]]:
    """One row per function of one or several profiles: ``namefct, fct, file, ncalls1,
    ncalls2, tin, cum_tin, tall, cum_tall`` (the cumulated columns equal ``tin`` and
    ``tall``, as in the reference).

    :param ps: :class:`pstats.Stats`, a path, or a list of them (validated here)
    :param clean_text: function to clean file names
    :param skip_artifacts: leave out the profiler's own entries
    :return: rows
    """
    from .._validate import checked_text_function

    clean = checked_text_function("clean_text", clean_text)
    rows = []
    for loaded in load_profiles(ps):
        for func, v in loaded.stats.items():
            if skip_artifacts and is_artifact(func):
                continue
            file = f"{clean(str(func[0]).replace(chr(92), '/'))}:{func[1]}"
            fct = str(func[2])
            rows.append(
                {
                    "namefct": _better_name(fct, file),
                    "fct": fct,
                    "file": file,
                    "ncalls1": v[0],
                    "ncalls2": v[1],
                    "tin": v[2],
                    "cum_tin": v[2],
                    "tall": v[3],
                    "cum_tall": v[3],
                }
            )
    return rows


def rows_to_dataframe(rows: list[dict[str, Any]], reference: bool = False) -> Any:
    """The per-function table as a DataFrame grouped by function and file (``namefct``,
    or ``fct`` for the reference's ``profile2df``), sorted by decreasing ``cum_tall``,
    index ``0..n-1``.

    :param rows: rows from :func:`stats_rows`
    :param reference: the reference's columns (:data:`REFERENCE_COLUMNS`), else
        :data:`DF_COLUMNS`
    :return: a :class:`pandas.DataFrame`
    """
    from .._optional import require

    pandas = require("pandas", "pandas", "profiling tables")
    columns = REFERENCE_COLUMNS if reference else DF_COLUMNS
    df = pandas.DataFrame(rows, columns=columns)
    df = df.groupby([columns[0], "file"], as_index=False).sum()
    df = df.sort_values("cum_tall", ascending=False).reset_index(drop=True)
    return df[columns].copy()

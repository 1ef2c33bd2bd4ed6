"""Rows as dictionaries, nested JSON, and the flat per-function table (DataFrame)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import BadValue
from .builder import is_artifact
from .filters import call_dict
from .load import load_profiles
from .view_reference import Row

# Columns of the per-function table of profile(as_df=True), in order.
DF_COLUMNS = ["namefct", "file", "ncalls1", "ncalls2", "tin", "cum_tin", "tall", "cum_tall"]
# Columns of the reference's profile2df table, in order.
REFERENCE_COLUMNS = ["fct", *DF_COLUMNS[1:]]


def row_as_dict(r: Row) -> dict[str, Any]:
    """One row as the reference's dictionary, plus ``share`` (and ``more='+'`` for a
    reference)."""
    d = call_dict(r.node, r.indent, (r.nc1, r.nc2, r.tin, r.tall))
    d["share"] = r.share
    if r.ref:
        d["more"] = "+"
    return d


def nest_rows(rows: Sequence[Row], max_indent: int = 30) -> tuple[dict[str, Any], int]:
    """Nests rows as ``{name: {"details": {...}, "calls": {...}}}``, rows deeper than
    ``max_indent`` attached at that level (``details["indent"]`` keeps their depth) so
    that any JSON parser reads the nesting.

    :param rows: rows in depth-first order
    :param max_indent: deepest nesting level
    :return: the nested dictionary and the number of folded rows
    """
    if max_indent < 1:
        raise BadValue(f"max_indent must be >= 1, got {max_indent!r}")
    width = len(str(max((abs(int(r.nc1)) for r in rows), default=0)))
    top: dict[str, Any] = {}
    # containers[i] is the "calls" dictionary receiving rows of level i.
    containers: list[dict[str, Any]] = [top]
    folded = 0
    for r in rows:
        level = r.indent
        if level > max_indent:
            folded += 1
            level = max_indent
        level = min(level, len(containers) - 1)
        del containers[level + 1 :]
        target = containers[level]
        sep = ":::" if level == 0 else ":"
        name = f"{int(r.nc1):<{width}d}-{r.tall:1.5f}{sep}{r.node.func_name}"
        if name in target:
            # Numbered by the container's size, then past any function named so.
            base, n = name, len(target)
            while name in target:
                name, n = f"{base}#{n}", n + 1
        item: dict[str, Any] = {"details": row_as_dict(r)}
        target[name] = item
        calls: dict[str, Any] = {}
        item["calls"] = calls
        containers.append(calls)
    _drop_empty_calls(top)
    return top, folded


def _drop_empty_calls(top: dict[str, Any]) -> None:
    stack = [top]
    while stack:
        for item in stack.pop().values():
            if item["calls"]:
                stack.append(item["calls"])
            else:
                del item["calls"]


def render_json(
    rows: Sequence[Row], as_str: bool = True, max_indent: int = 30, **kwargs: Any
) -> str | dict[str, Any]:
    """Renders rows as ``{"profile": nested}``.

    :param rows: rows in depth-first order
    :param as_str: return a string (:func:`json.dumps` with ``kwargs``) or the dictionary
    :param max_indent: deepest nesting level, see :func:`nest_rows`
    :param kwargs: given to :func:`json.dumps`
    :return: JSON text or dictionary
    """
    nested, folded = nest_rows(rows, max_indent=max_indent)
    doc: dict[str, Any] = {"profile": nested}
    if folded:
        doc["folded"] = (
            f"{folded} rows deeper than {max_indent} levels are attached at level "
            f"{max_indent}; details.indent keeps their depth"
        )
    if as_str:
        # JSON has no NaN or Infinity token: refuse them rather than write invalid JSON.
        kwargs.setdefault("allow_nan", False)
        return json.dumps(doc, **kwargs)
    return doc


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

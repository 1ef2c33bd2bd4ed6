"""The sampled profile as JSON (schema ``onnxrt-sampling``, version 1).

Trees are flat lists of rows, each naming its parent's index (no nesting: a deep
recursion stays a flat list, read without recursion)::

    {"schema": "onnxrt-sampling", "version": 1, "program": ..., "duration": s,
     "cpu_time": s, "interval": s, "timer": ..., "samples": n, "notes": [...],
     "threads": [{"name": ..., "main": bool, "wall": s, "cpu": s,
                  "rows": [{"parent": -1 or index, "name", "file", "line", "kind",
                            "wall", "cpu", "python", "native", "system", "self",
                            "waiting", "hidden"}]}],
     "split_known": bool, "native_threads": [{"name", "count", "cpu"}],
     "hot_lines": [{"function", "file", "line", "seconds", "share",
                    "lines": [{"line", "seconds", "share", "source",
                               "split": {"python", "native", "system", "waiting"}}]}]}

CPU seconds in Python, native code and the kernel are 0 where the collector does not
split them (``split_known`` false: the in-process sampler); a line's ``split`` gives the
shares of its time, adding up to 1. Where the threads Python does not know used CPU
while a row or line ran (the observer), the row has ``pool`` (CPU seconds) and the
line's ``split`` a ``pool`` (that CPU over the line's time: 2.8 is 2.8 cores); absent
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .model import SampledProfile
from .view import FOLD_SHARE, Row, hot_lines, short_file, trees, visible_rows

SCHEMA = "onnxrt-sampling"
VERSION = 1
SPLIT = ("python", "native", "system", "waiting")


def tree_rows(
    root: Row,
    fold_share: float,
    max_depth: int | None = None,
    order: Callable[[Row], Any] | None = None,
) -> list[dict[str, Any]]:
    """A tree as a flat list of rows in drawing order, each with its parent's index.

    :param root: the thread's root
    :param fold_share: see :func:`~.view.visible_rows`
    :param max_depth: deeper rows left out
    :param order: see :func:`~.view.visible_rows`
    :return: the rows (the root first, parent -1)
    """
    rows: list[dict[str, Any]] = []
    parents: list[int] = []  # index of the open row at each depth
    for depth, row, _last in visible_rows(root, fold_share, max_depth, order):
        del parents[depth:]
        pool = {"pool": round(row.pool, 6)} if row.pool else {}
        rows.append(
            {
                "parent": parents[-1] if parents else -1,
                "name": row.label,
                "file": short_file(row.file) if row.file else "",
                "path": row.file,
                "line": row.line,
                "kind": row.kind,
                "wall": round(row.wall, 6),
                "cpu": round(row.cpu, 6),
                "python": round(row.python, 6),
                "native": round(row.native, 6),
                "system": round(row.system, 6),
                "self": round(row.self_wall, 6),
                "waiting": row.waiting,
                "hidden": row.hidden_text(),
            }
            | pool
        )
        parents.append(len(rows) - 1)
    return rows


def to_dict(
    profile: SampledProfile,
    fold_share: float = FOLD_SHARE,
    show_all: bool = False,
    max_depth: int | None = None,
    order: Callable[[Row], Any] | None = None,
) -> dict[str, Any]:
    """The profile as a JSON-ready dictionary (see the module's docstring).

    :param profile: the profile
    :param fold_share: see :func:`~.view.visible_rows`
    :param show_all: no folding of library frames
    :param max_depth: rows deeper than this under the thread are left out (0: the top
        level only)
    :param order: see :func:`~.view.visible_rows`
    """
    deepest = None if max_depth is None else max_depth + 1
    sampled = [t for t in profile.threads if t.totals]
    threads = [
        {
            "name": t.name,
            "main": t.is_main,
            "wall": round(root.wall, 6),
            "cpu": round(root.cpu, 6),
            "rows": tree_rows(root, fold_share, deepest, order),
        }
        for t, root in zip(sampled, trees(profile, show_all), strict=True)
    ]
    hot = [
        {
            "function": f.name,
            "file": short_file(f.file),
            "line": f.first_line,
            "seconds": round(f.seconds, 6),
            "share": round(f.share, 6),
            "lines": [
                {
                    "line": h.line,
                    "seconds": round(h.seconds, 6),
                    "share": round(h.share, 6),
                    "source": h.source,
                    "split": dict(zip(SPLIT, (round(x, 4) for x in h.split), strict=True))
                    | ({"pool": round(h.pool, 4)} if h.pool else {}),
                }
                for h in f.lines
            ],
        }
        for f in hot_lines(profile)
    ]
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "program": profile.program,
        "duration": round(profile.duration, 6),
        "cpu_time": round(profile.cpu_time, 6),
        "interval": profile.interval,
        "timer": profile.timer,
        "samples": profile.samples,
        "notes": list(profile.notes),
        "split_known": profile.split_known,
        "threads": threads,
        "native_threads": [
            {"name": n, "count": c, "cpu": round(sec, 6)} for n, c, sec in profile.native_threads
        ],
        "hot_lines": hot,
    }


def to_json(profile: SampledProfile, fold_share: float = FOLD_SHARE, show_all: bool = False) -> str:
    """The profile as JSON text (never NaN).

    :param profile: the profile
    :param fold_share: see :func:`~.view.visible_rows`
    :param show_all: no folding of library frames
    """
    return json.dumps(to_dict(profile, fold_share, show_all), allow_nan=False, indent=1)

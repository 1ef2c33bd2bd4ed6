"""Bar chart of the functions taking the most time (matplotlib, no pyplot state)."""

from __future__ import annotations

from typing import Any

from .._errors import BadValue
from .run import as_root

_KEYS = {"tall": "time with callees (s)", "tin": "own time (s)"}


def plot_profile(graph: Any, top: int = 15, key: str = "tall", ax: Any = None) -> Any:
    """Bar chart of the functions with the largest times.

    :param graph: a :class:`ProfileNode` or what :func:`profile2graph` accepts (every
        function reachable from its root is considered)
    :param top: number of functions shown
    :param key: ``tall`` (time with callees) or ``tin`` (own time)
    :param ax: matplotlib axes to draw on; a new figure (no pyplot, no window) if None
    :return: the axes
    """
    root = as_root(graph)
    if key not in _KEYS:
        raise BadValue(f"key must be one of {sorted(_KEYS)}, got {key!r}")
    if top < 1:
        raise BadValue(f"top must be >= 1, got {top!r}")
    from .._optional import require

    require("matplotlib", "plot", "profile charts")
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(8, 3.5)).add_subplot()
    nodes = [n for n in root if not n.virtual]
    nodes.sort(key=lambda n: -getattr(n, key))
    nodes = nodes[:top]
    labels = [f"{n.func_name[:40]}\n{n.filename.split('/')[-1]}:{n.line}" for n in nodes]
    ax.bar(range(len(nodes)), [getattr(n, key) for n in nodes], color="#e4572e")
    ax.set_xticks(range(len(nodes)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(_KEYS[key])
    ax.set_title(f"top {len(nodes)} functions by {_KEYS[key]}")
    if ax.figure is not None:
        ax.figure.tight_layout()
    return ax

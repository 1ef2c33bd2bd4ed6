"""Call paths as collapsed stacks, ``a;b;c N``: the input of flamegraph.pl, speedscope
and most flame graph tools."""

from __future__ import annotations

from typing import Any

from .model import ProfileNode
from .view_paths import expand_paths, path_stacks, split_options

# Characters with a meaning in the format: ';' separates frames, the last space the count.
_TRANSLATION = str.maketrans({";": ":", "\n": " ", "\r": " "})


def frame_label(node: ProfileNode) -> str:
    """The name of a frame in a collapsed stack: ``func (file:line)``.

    :param node: the function
    :return: the label, without ``;`` or line breaks
    """
    return f"{node.func_name} ({node.filename}:{node.line})".translate(_TRANSLATION)


def render_collapsed(root: ProfileNode, unit: float = 1e-6, **options: Any) -> str:
    """Renders the call paths of a graph as collapsed stacks, one line per path with own
    time, its count in ``unit`` seconds (paths rounding to 0 are left out).

    :param root: the node to start from
    :param unit: seconds per count
    :param options: filters (:class:`ViewOptions <.filters.ViewOptions>`) and
        ``limits`` (:class:`PathLimits <.view_paths.PathLimits>`)
    :return: text
    """
    if not unit > 0:
        raise ValueError(f"unit must be > 0, got {unit!r}")
    view, limits = split_options(dict(options))
    items = expand_paths(root, view, limits)
    labels = [frame_label(item.node) for item in items]
    counts: dict[str, int] = {}
    for item, stack in zip(items, path_stacks(items), strict=True):
        n = round(item.self_time / unit)
        if n > 0:
            key = ";".join(labels[i] for i in stack)
            counts[key] = counts.get(key, 0) + n
    return "".join(f"{k} {v}\n" for k, v in counts.items())

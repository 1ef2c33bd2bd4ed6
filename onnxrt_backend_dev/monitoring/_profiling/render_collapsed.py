"""Call paths as collapsed stacks, ``a;b;c N``: the input of flamegraph.pl, speedscope
and most flame graph tools."""

from __future__ import annotations

from typing import Any

from .._stacks.export import to_collapsed
from .._stacks.frames import StackFrame
from .._validate import check_number
from .model import ProfileNode
from .view_paths import expand_paths, path_stacks, split_options


def render_collapsed(root: ProfileNode, unit: float = 1e-6, **options: Any) -> str:
    """Renders the call paths of a graph as collapsed stacks, one line per path with own
    time, its count in ``unit`` seconds (paths rounding to 0 are left out).

    :param root: the node to start from
    :param unit: seconds per count
    :param options: filters (:class:`ViewOptions <.filters.ViewOptions>`) and
        ``limits`` (:class:`PathLimits <.view_paths.PathLimits>`)
    :return: text
    """
    check_number("unit", unit, above=0)  # also refuses NaN and infinity (counts of 0)
    view, limits = split_options(dict(options))
    items = expand_paths(root, view, limits)
    frames = [StackFrame(i.node.func_name, i.node.filename, i.node.line) for i in items]
    stacks = (
        ([frames[i] for i in stack], item.self_time)
        for item, stack in zip(items, path_stacks(items), strict=True)
    )
    return to_collapsed(stacks, unit)

"""Call paths (:mod:`.view_paths`) as collapsed stacks (``a;b;c N``: the input of
flamegraph.pl and most flame graph tools) or a speedscope document (each path with own
time a sample weighing that time in seconds)."""

from __future__ import annotations

from typing import Any

from .._stacks.export import to_collapsed, to_speedscope
from .._validate import check_number
from .model import ProfileNode
from .view_paths import path_samples


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
    return to_collapsed(path_samples(root, options), unit)


def render_speedscope(
    root: ProfileNode, name: str = "profile", as_str: bool = True, **options: Any
) -> str | dict[str, Any]:
    """Renders the call paths of a graph as a speedscope document.

    :param root: the node to start from
    :param name: the profile's name
    :param as_str: return JSON text or the dictionary
    :param options: filters and ``limits``, as :func:`render_collapsed`'s
    :return: JSON text or dictionary
    """
    return to_speedscope(path_samples(root, options), name, "seconds", as_str)

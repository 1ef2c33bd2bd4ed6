"""Call paths as a speedscope document: each path with own time a sample weighing that
time in seconds (see :func:`.._stacks.export.to_speedscope`)."""

from __future__ import annotations

from typing import Any

from .._stacks.export import to_speedscope
from .model import ProfileNode
from .view_paths import path_samples


def render_speedscope(
    root: ProfileNode, name: str = "profile", as_str: bool = True, **options: Any
) -> str | dict[str, Any]:
    """Renders the call paths of a graph as a speedscope document.

    :param root: the node to start from
    :param name: the profile's name
    :param as_str: return JSON text or the dictionary
    :param options: filters (:class:`ViewOptions <.filters.ViewOptions>`) and
        ``limits`` (:class:`PathLimits <.view_paths.PathLimits>`)
    :return: JSON text or dictionary
    """
    return to_speedscope(path_samples(root, options), name, "seconds", as_str)

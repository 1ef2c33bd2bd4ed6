"""Call paths as a speedscope document (https://www.speedscope.app/file-format-schema.json).

One ``sampled`` profile: each call path with own time is a sample whose stack indexes
the shared frames and whose weight is that own time in seconds, so the weights sum to
the total time of the top-level functions.
"""

from __future__ import annotations

import json
from typing import Any

from ... import __version__
from .model import ProfileNode
from .view_paths import expand_paths, path_stacks, split_options

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


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
    view, limits = split_options(dict(options))
    items = expand_paths(root, view, limits)
    frame_index: dict[int, int] = {}
    frames: list[dict[str, Any]] = []
    item_frame: list[int] = []
    for item in items:
        node = item.node
        index = frame_index.get(id(node))
        if index is None:
            index = frame_index[id(node)] = len(frames)
            frames.append({"name": node.func_name, "file": node.filename, "line": node.line})
        item_frame.append(index)
    samples: list[list[int]] = []
    weights: list[float] = []
    for item, stack in zip(items, path_stacks(items), strict=True):
        if item.self_time > 0:
            samples.append([item_frame[i] for i in stack])
            weights.append(item.self_time)
    doc: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": "seconds",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        ],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": f"onnxrt_backend_dev.monitoring {__version__}",
    }
    return json.dumps(doc) if as_str else doc

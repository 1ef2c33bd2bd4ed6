"""Exporters of weighted stacks ``(frames, weight)``, frames outermost first, the weight
in the export's unit (seconds of own time, bytes of growth), for any source. Stacks of
weight <= 0 are left out of every export.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .._validate import check_number
from .frames import SampledFrame

WeightedStack = tuple[Sequence[SampledFrame], float]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
# Characters with a meaning in the collapsed format: ';' separates frames, the last space
# the count; a line break would end the line.
_COLLAPSED_TRANSLATION = str.maketrans({";": ":", "\n": " ", "\r": " "})


def collapsed_label(frame: SampledFrame) -> str:
    """The name of a frame in a collapsed stack: ``func (file:line)``.

    :param frame: the frame
    :return: the label, without ``;`` or line breaks
    """
    return f"{frame.name} ({frame.file}:{frame.first_line})".translate(_COLLAPSED_TRANSLATION)


def to_collapsed(stacks: Iterable[WeightedStack], scale: float = 1.0) -> str:
    """Collapsed stacks, ``a;b;c N``: the input of flamegraph.pl, speedscope, inferno.
    Stacks with the same labels add up, in the order they first appear; counts rounding
    to 0 are left out.

    :param stacks: weighted stacks
    :param scale: the weight of one count (``1e-6`` for microseconds of a time in seconds)
    :return: text, one line per stack
    """
    check_number("scale", scale, above=0)  # also refuses NaN and infinity (counts of 0)
    counts: dict[str, int] = {}
    labels: dict[SampledFrame, str] = {}
    for frames, weight in stacks:
        n = round(weight / scale)
        if n <= 0:
            continue
        parts = []
        for frame in frames:
            label = labels.get(frame)
            if label is None:
                label = labels[frame] = collapsed_label(frame)
            parts.append(label)
        key = ";".join(parts)
        counts[key] = counts.get(key, 0) + n
    return "".join(f"{k} {v}\n" for k, v in counts.items())


def to_speedscope(
    stacks: Iterable[WeightedStack], name: str, unit: str, as_str: bool = True
) -> str | dict[str, Any]:
    """A speedscope document: one ``sampled`` profile whose samples are the stacks, over
    frames shared by (name, file, first line).

    :param stacks: weighted stacks
    :param name: the profile's name
    :param unit: the weights' unit as speedscope names it (``seconds``, ``bytes``...)
    :param as_str: return JSON text or the dictionary
    :return: JSON text (never NaN) or the dictionary
    """
    # Imported here: the spy process stands empty packages in for the parents (no version).
    from ... import __version__

    frame_index: dict[SampledFrame, int] = {}
    frames: list[dict[str, Any]] = []
    samples: list[list[int]] = []
    weights: list[float] = []
    for stack, weight in stacks:
        if not weight > 0:
            continue
        path = []
        for frame in stack:
            index = frame_index.get(frame)
            if index is None:
                index = frame_index[frame] = len(frames)
                frames.append({"name": frame.name, "file": frame.file, "line": frame.first_line})
            path.append(index)
        samples.append(path)
        weights.append(weight)
    doc: dict[str, Any] = {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": unit,
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
    return json.dumps(doc, allow_nan=False) if as_str else doc

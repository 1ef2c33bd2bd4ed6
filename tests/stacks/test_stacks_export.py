"""The one set of stack exporters (speedscope, collapsed) and the library rule."""

from __future__ import annotations

import json
import math
import os

import pytest

from onnxrt_backend_dev.monitoring._stacks.export import (
    SPEEDSCOPE_SCHEMA,
    collapsed_label,
    to_collapsed,
    to_speedscope,
)
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame, is_library_path

MAIN = SampledFrame("main", "app.py", 1, 1)
LOAD = SampledFrame("load", "app.py", 5, 5)
HOSTILE = SampledFrame("a;b\nc\r", "x;y.py", 3, 3)


def test_collapsed_adds_up_stacks_of_the_same_labels_in_first_seen_order() -> None:
    # GIVEN two stacks ending in load (the same labels) and one in main alone
    stacks = [([MAIN, LOAD], 2e-6), ([MAIN], 1e-6), ([MAIN, LOAD], 3e-6), ([MAIN], 1e-9)]
    # WHEN written in microseconds THEN load's counts add up and the 0-count one is left out
    assert to_collapsed(stacks, scale=1e-6) == (
        "main (app.py:1);load (app.py:5) 5\nmain (app.py:1) 1\n"
    )


def test_collapsed_labels_cannot_break_the_format() -> None:
    assert collapsed_label(HOSTILE) == "a:b c  (x:y.py:3)"
    line = to_collapsed([([MAIN, HOSTILE], 7.0)])
    assert line.count("\n") == 1 and line.count(";") == 1 and line.endswith(" 7\n")


@pytest.mark.parametrize(
    ("scale", "rule"),
    [
        (0, "scale must be > 0"),
        (-1.0, "scale must be > 0"),
        (math.nan, "scale must be a finite number"),
        (math.inf, "scale must be a finite number"),  # every count 0: an empty file
    ],
)
def test_collapsed_refuses_a_scale_that_is_not_positive(scale: float, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        to_collapsed([], scale)


def test_speedscope_shares_frames_and_skips_empty_stacks() -> None:
    # GIVEN three stacks, one of weight 0
    stacks = [([MAIN, LOAD], 2.0), ([MAIN], 0.0), ([MAIN, HOSTILE], 1.5)]
    # WHEN exported THEN frames are shared, the empty stack is gone, the weights sum up
    doc = json.loads(str(to_speedscope(stacks, "memory growth", "bytes")))
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA and doc["activeProfileIndex"] == 0
    assert [f["name"] for f in doc["shared"]["frames"]] == ["main", "load", "a;b\nc\r"]
    profile = doc["profiles"][0]
    assert profile["unit"] == "bytes" and profile["samples"] == [[0, 1], [0, 2]]
    assert profile["weights"] == [2.0, 1.5] and profile["endValue"] == 3.5
    assert doc["exporter"].startswith("onnxrt_backend_dev.monitoring ")


def test_speedscope_never_writes_nan() -> None:
    with pytest.raises(ValueError):
        to_speedscope([([MAIN], math.inf)], "p", "seconds")


def test_library_rule() -> None:
    assert is_library_path(os.__file__) and is_library_path("~") and is_library_path("")
    assert is_library_path("/x/site-packages/pandas/core.py")
    assert is_library_path("<frozen importlib._bootstrap>")
    assert not is_library_path("/home/me/project/app.py")

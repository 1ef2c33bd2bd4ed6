"""Draws the memory spy's retained series with matplotlib (the plot extra)."""

from __future__ import annotations

from typing import Any

from .._optional import require
from .series import SpyResult

# Unit of the y axis: factor -> label.
_UNIT_LABELS: dict[int, str] = {1: "B", 2**10: "KiB", 2**20: "MiB", 2**30: "GiB"}


def plot_memory(result: SpyResult, ax: Any = None, unit: int = 2**20) -> Any:
    """Draws every channel of a spy result against time, marks as vertical lines.

    Never calls ``show()``; with ``ax=None`` a new figure is created (the caller saves or
    shows it).

    :param result: what ``MemorySpy.stop()`` returned
    :param ax: matplotlib Axes to draw on, None for a new figure
    :param unit: bytes per unit of the y axis (1, 1024, 2**20, 2**30)
    :return: the Axes
    """
    if unit not in _UNIT_LABELS:
        raise ValueError(f"unit must be one of {sorted(_UNIT_LABELS)}, got {unit!r}")
    if ax is None:
        plt = require("matplotlib.pyplot", "plot", "plotting the memory series")
        _, ax = plt.subplots(figsize=(8, 4))
    t0 = result.t0
    for mon in result.monitors():
        points = list(mon.series)
        if not points:
            continue
        ax.plot([t - t0 for t, _ in points], [v / unit for _, v in points], label=mon.name)
    for t, label in result.get("marks", []):
        ax.axvline(t, color="grey", linestyle=":", linewidth=1)
        ax.annotate(
            label,
            (t, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
        )
    _mark_peak(ax, result["cpu"], unit)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"memory ({_UNIT_LABELS[unit]})")
    ax.set_title("memory peak per tick")
    ax.legend(loc="best")
    return ax


def _mark_peak(ax: Any, cpu: Any, unit: int) -> None:
    """Marks the CPU peak with the function running when it was reached (stacks=True)."""
    if cpu.where is None or not cpu.where.peak_stack:
        return
    from .where import innermost_user

    stack = cpu.where.peak_stack
    frame = stack[innermost_user(stack)]
    x, y = cpu.peak_time, cpu.max_peak / unit
    ax.plot([x], [y], marker="v", color="red", linestyle="none")
    ax.annotate(
        f"peak in {frame.function}",
        (x, y),
        textcoords="offset points",
        xytext=(4, 4),
        fontsize=8,
        color="red",
    )
